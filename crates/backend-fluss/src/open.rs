//! Opening the log: the database and the table, their checks, and the log's identity.

use crate::config::FlussConfig;
use crate::error::FlussError;
use crate::error::{is_authentication, with_operation};
use crate::retention;
use crate::{BACKEND, BUCKET_KEY, COLUMNS, CREATE_LOCK, FlussLog, Inner};
use actionstate_core::{Error as CoreError, LogIdentity};
use fluss::client::{FlussAdmin, FlussConnection};
use fluss::error::Error as ClientError;
use fluss::metadata::{DataType, DataTypes, Schema, TableDescriptor, TableInfo, TablePath};
use fluss::rpc::FlussError as ApiError;
use fluss::rpc::message::OffsetSpec;
use std::future::Future;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub(crate) fn log_schema() -> Result<Schema, ClientError> {
    Schema::builder()
        .column(COLUMNS[0], DataTypes::bytes())
        .column(COLUMNS[1], DataTypes::bytes())
        .column(COLUMNS[2], DataTypes::bytes())
        .build()
}

/// Runs a client request bounded by the request timeout.
pub(crate) async fn request<T>(
    config: &FlussConfig,
    operation: &'static str,
    f: impl Future<Output = Result<T, ClientError>>,
) -> Result<T, FlussError> {
    match tokio::time::timeout(config.request_timeout, f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) if is_authentication(&e) => {
            Err(FlussError::Authentication { operation, bootstrap: config.bootstrap.clone(), detail: e.to_string() })
        }
        Ok(Err(e)) => Err(FlussError::Client { operation, table: config.table_name(), source: Box::new(e) }),
        Err(_) => Err(FlussError::Timeout {
            operation,
            table: config.table_name(),
            bootstrap: config.bootstrap.clone(),
            waited: config.request_timeout,
        }),
    }
}

/// Checks an existing table against the configuration and the log layout.
pub(crate) fn check_table(config: &FlussConfig, info: &TableInfo) -> Result<(), FlussError> {
    let table = config.table_name();
    let incompatible = |detail: String| FlussError::IncompatibleTable { table: table.clone(), detail };
    let columns: Vec<(&str, &DataType)> =
        info.get_row_type().fields().iter().map(|f| (f.name(), f.data_type())).collect();
    let names: Vec<&str> = columns.iter().map(|(n, _)| *n).collect();
    if names != COLUMNS {
        return Err(incompatible(format!("columns {names:?}, expected {COLUMNS:?}")));
    }
    if let Some((name, ty)) = columns.iter().find(|(_, ty)| !matches!(ty, DataType::Bytes(_))) {
        return Err(incompatible(format!("column {name} has type {ty:?}, expected BYTES")));
    }
    if info.has_primary_key() {
        return Err(incompatible("it has a primary key (a log table has none)".into()));
    }
    if info.is_partitioned() {
        return Err(incompatible("it is partitioned".into()));
    }
    if info.get_bucket_keys() != [BUCKET_KEY] {
        return Err(incompatible(format!("bucket key {:?}, expected [\"{BUCKET_KEY}\"]", info.get_bucket_keys())));
    }
    match info.get_table_config().get_datalake_format() {
        Ok(None) => {}
        Ok(Some(format)) => {
            return Err(incompatible(format!("data-lake format {format:?} changes the bucket function")));
        }
        Err(e) => return Err(incompatible(format!("unreadable data-lake format: {e}"))),
    }
    let found = u32::try_from(info.get_num_buckets())
        .map_err(|_| FlussError::Unexpected(format!("bucket count {}", info.get_num_buckets())))?;
    if config.read_only {
        // Reads whatever the table keeps, with the buckets it has.
        return Ok(());
    }
    if found != config.buckets {
        return Err(FlussError::BucketsChanged { table, configured: config.buckets, found });
    }
    check_retention(config, info)
}

/// Refuses a table that deletes records by age sooner than the configuration accepts.
pub(crate) fn check_retention(config: &FlussConfig, info: &TableInfo) -> Result<(), FlussError> {
    let property = retention::LOG_TTL_PROPERTY;
    let value = info.get_properties().get(property).map(String::as_str);
    retention::check_log_ttl(value, config.log_ttl).map_err(|problem| FlussError::LogRetention {
        table: config.table_name(),
        property,
        value: value.map_or_else(|| "not set (Fluss's default: 7 d)".to_owned(), |v| format!("'{v}'")),
        problem,
    })
}

pub(crate) fn check_name(what: &str, name: &str) -> Result<(), FlussError> {
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
        return Err(FlussError::InvalidConfig(format!(
            "{what} name {name:?} must be non-empty ASCII letters, digits, `_` and `-`"
        )));
    }
    Ok(())
}

impl FlussLog {
    /// Opens the log: connects, creates the database and the table if absent, checks an
    /// existing table, captures the log's identity and lists the end offsets.
    pub async fn open(config: FlussConfig) -> Result<FlussLog, CoreError> {
        // On the heap: the opening future holds about 8 KiB of client futures, which would
        // otherwise sit inline in every caller's future.
        Box::pin(Self::open_inner(config)).await.map_err(|e| with_operation(e, "open"))
    }

    async fn open_inner(mut config: FlussConfig) -> Result<FlussLog, FlussError> {
        check_name("database", &config.database)?;
        check_name("table", &config.table)?;
        if config.buckets == 0 || i32::try_from(config.buckets).is_err() {
            return Err(FlussError::InvalidConfig(format!("bucket count {} out of range", config.buckets)));
        }
        let log_ttl = retention::log_ttl_value(config.log_ttl).map_err(FlussError::InvalidConfig)?;
        let connection =
            match tokio::time::timeout(config.request_timeout, FlussConnection::new(config.client_config())).await {
                Ok(Ok(c)) => c,
                Ok(Err(e)) if is_authentication(&e) => {
                    return Err(FlussError::Authentication {
                        operation: "connect",
                        bootstrap: config.bootstrap.clone(),
                        detail: e.to_string(),
                    });
                }
                Ok(Err(source)) => {
                    return Err(FlussError::Connect { bootstrap: config.bootstrap.clone(), source: Box::new(source) });
                }
                Err(_) => {
                    return Err(FlussError::Timeout {
                        operation: "connect",
                        table: config.table_name(),
                        bootstrap: config.bootstrap.clone(),
                        waited: config.request_timeout,
                    });
                }
            };
        let admin = connection.get_admin().map_err(|source| FlussError::Client {
            operation: "creating the admin client",
            table: config.table_name(),
            source: Box::new(source),
        })?;
        if !config.read_only {
            request(&config, "creating the database", admin.create_database(&config.database, None, true)).await?;
        }
        let path = TablePath::new(config.database.clone(), config.table.clone());
        let exists = request(&config, "looking up the table", admin.table_exists(&path)).await?;
        if !exists && config.read_only {
            return Err(FlussError::TableMissing { table: config.table_name() });
        }
        // Held from creating a table until its buckets have leaders (the end-offset listing at
        // the end of open): see `CREATE_LOCK`.
        let _creating = if exists { None } else { Some(CREATE_LOCK.lock().await) };
        if !exists {
            let schema = log_schema().map_err(|source| FlussError::Client {
                operation: "building the schema",
                table: config.table_name(),
                source: Box::new(source),
            })?;
            let buckets = i32::try_from(config.buckets).unwrap_or(i32::MAX);
            let descriptor = TableDescriptor::builder()
                .schema(schema)
                .distributed_by(Some(buckets), vec![BUCKET_KEY.to_owned()])
                .property(retention::LOG_TTL_PROPERTY, log_ttl)
                .build()
                .map_err(|source| FlussError::Client {
                    operation: "building the table descriptor",
                    table: config.table_name(),
                    source: Box::new(source),
                })?;
            // Created concurrently by another process: fine, checked below like any table.
            request(&config, "creating the table", admin.create_table(&path, &descriptor, true)).await?;
        }
        let identity = fetch_identity(&config, &admin, &path).await?;
        let table = request(&config, "fetching the table metadata", connection.get_table(&path)).await?;
        let info = table.get_table_info().clone();
        check_table(&config, &info)?;
        if config.read_only {
            config.buckets = identity.partitions;
        }
        if !identity.id.ends_with(&format!("/{}", info.get_table_id())) {
            // Recreated between the two lookups: let the caller open again.
            return Err(FlussError::Timeout {
                operation: "opening a table that is being recreated",
                table: config.table_name(),
                bootstrap: config.bootstrap.clone(),
                waited: Duration::ZERO,
            });
        }
        let writer = table.new_append().and_then(|a| a.create_writer()).map_err(|source| FlussError::Client {
            operation: "creating the writer",
            table: config.table_name(),
            source: Box::new(source),
        })?;
        drop(table);
        let buckets = config.buckets;
        let inner = Inner {
            table_name: config.table_name(),
            config,
            path,
            connection,
            admin,
            info,
            writer,
            floors: (0..buckets).map(|_| AtomicU64::new(0)).collect(),
            readers: Mutex::new((0..buckets).map(|_| None).collect()),
        };
        let log = FlussLog { inner: Arc::new(inner), identity };
        log.list_offsets("end_offsets", OffsetSpec::Latest).await?;
        Ok(log)
    }
}

pub(crate) async fn fetch_identity(
    config: &FlussConfig,
    admin: &FlussAdmin,
    path: &TablePath,
) -> Result<LogIdentity, FlussError> {
    let info = match request(config, "fetching the table info", admin.get_table_info(path)).await {
        Err(FlussError::Client { source, .. })
            if matches!(source.api_error(), Some(ApiError::TableNotExist | ApiError::DatabaseNotExist)) =>
        {
            return Err(FlussError::TableMissing { table: config.table_name() });
        }
        other => other?,
    };
    let database = request(config, "fetching the database info", admin.get_database_info(&config.database)).await?;
    let partitions = u32::try_from(info.get_num_buckets())
        .map_err(|_| FlussError::Unexpected(format!("bucket count {}", info.get_num_buckets())))?;
    Ok(LogIdentity {
        backend: BACKEND.to_owned(),
        id: format!("db-{}/{}.{}/{}", database.created_time(), config.database, config.table, info.get_table_id()),
        partitions,
    })
}
