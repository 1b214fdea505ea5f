//! Opening the log: the database and the table, their checks, and the log's identity.

use crate::config::FlussConfig;
use crate::error::FlussError;
use crate::error::{is_authentication, with_operation};
use crate::retention;
use crate::{BACKEND, BUCKET_KEY, COLUMNS, CREATE_LOCK, FlussLog, Inner, listed_offsets};
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

/// The table property that sets a table's replication factor ([`FlussConfig::replication`]).
pub(crate) const REPLICATION_PROPERTY: &str = "table.replication.factor";

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
        Ok(Err(e)) if is_authentication(&e) => Err(FlussError::Authentication {
            operation,
            bootstrap: config.bootstrap.clone(),
            detail: e.to_string(),
            credentials: config.security.is_some(),
        }),
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

/// What a read-only open says about a table it reads as it is: one whose TTL deletes records
/// by age may already have lost records that a checkpoint needs (a marker below the earliest
/// offsets is then reported as data loss).
fn warn_read_only(config: &FlussConfig, info: &TableInfo) {
    let value = info.get_properties().get(retention::LOG_TTL_PROPERTY).map(String::as_str);
    let Err(problem) = retention::check_log_ttl(value, None) else { return };
    let shown = value.unwrap_or("not set (Fluss's default: 7 d)");
    match problem.table_ttl() {
        Some(ttl) => tracing::warn!(
            table = %config.table_name(),
            property = retention::LOG_TTL_PROPERTY,
            value = shown,
            "the table deletes records older than {ttl:?} by age: records a checkpoint needs may already be gone, \
             and the tools read what is left"
        ),
        None => tracing::warn!(
            table = %config.table_name(),
            property = retention::LOG_TTL_PROPERTY,
            value = shown,
            "reading the table without knowing whether it deletes records by age ({problem})"
        ),
    }
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
    /// existing table, captures the log's identity and lists the end offsets, waiting until
    /// every bucket has a leader. A table this call created whose buckets get no leader within
    /// the request timeout is dropped and created again, once (see [`FlussError::TableNotReady`]).
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
                        credentials: config.security.is_some(),
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
        // Held from creating a table until its buckets have leaders (the end-offset listing in
        // the loop below, after a recreation too): see `CREATE_LOCK`.
        let _creating = if exists { None } else { Some(CREATE_LOCK.lock().await) };
        let mut origin = if exists { Origin::Found } else { create_table(&config, &admin, &path, &log_ttl).await? };
        // How long the buckets of the table this call created first waited for leaders, once
        // it was dropped and created again.
        let mut recreated_after: Option<Duration> = None;
        let (identity, table, ends) = loop {
            let identity = fetch_identity(&config, &admin, &path).await?;
            let table = request(&config, "fetching the table metadata", connection.get_table(&path)).await?;
            check_table(&config, table.get_table_info())?;
            if config.read_only {
                config.buckets = identity.partitions;
            }
            if !identity.id.ends_with(&format!("/{}", table.get_table_info().get_table_id())) {
                // Recreated between the two lookups: let the caller open again.
                return Err(FlussError::Timeout {
                    operation: "opening a table that is being recreated",
                    table: config.table_name(),
                    bootstrap: config.bootstrap.clone(),
                    waited: Duration::ZERO,
                });
            }
            // Waits until every bucket has a leader.
            match listed_offsets(&config, &admin, &path, "end_offsets", OffsetSpec::Latest).await {
                Ok(ends) => break (identity, table, ends),
                Err(FlussError::TableNotReady { table: name, waited, detail })
                    if should_recreate(origin, config.read_only, recreated_after.is_some()) =>
                {
                    tracing::warn!(
                        table = %name,
                        waited = ?waited,
                        detail = %detail,
                        "the Fluss table {name} this open created got no bucket leaders within {waited:?} \
                         ({detail}): dropping it and creating it again, once"
                    );
                    recreated_after = Some(waited);
                    origin = recreate_table(&config, &admin, &path, &identity, &log_ttl).await?;
                }
                Err(FlussError::TableNotReady { table: name, waited, detail }) if recreated_after.is_some() => {
                    let first = recreated_after.unwrap_or_default();
                    return Err(not_ready_after_recreating(name, waited, &detail, first));
                }
                Err(e) => return Err(e),
            }
        };
        let info = table.get_table_info().clone();
        // A read-only log starts no writer: fluss-rs's writer asks the server for a writer id
        // (an idempotent writer's state) and runs a sender task, for appends it never makes.
        let writer = if config.read_only {
            warn_read_only(&config, &info);
            None
        } else {
            let writer = table.new_append().and_then(|a| a.create_writer()).map_err(|source| FlussError::Client {
                operation: "creating the writer",
                table: config.table_name(),
                source: Box::new(source),
            })?;
            Some(writer)
        };
        drop(table);
        let buckets = config.buckets;
        debug_assert_eq!(ends.len(), buckets as usize);
        let inner = Inner {
            table_name: config.table_name(),
            config,
            path,
            connection,
            admin,
            info,
            writer,
            // The listed end offsets: a record appended from now on lands at or past them.
            floors: ends.into_iter().map(AtomicU64::new).collect(),
            readers: Mutex::new((0..buckets).map(|_| None).collect()),
        };
        Ok(FlussLog { inner: Arc::new(inner), identity })
    }
}

/// How open came by its table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// It existed already (or another process created it at the same time): it may hold data.
    Found,
    /// This call created it.
    Created,
}

/// Whether open drops its table and creates it again after the table's buckets got no leader
/// within the request timeout: only a table this call created (so nobody wrote to it: without
/// leaders nobody could), never in read-only mode, and only once. The Fluss 0.9.1 coordinator
/// was seen to register a new table and never give its buckets a leader (about one table in
/// 140 on the local cluster); a table created again gets them.
pub(crate) fn should_recreate(origin: Origin, read_only: bool, recreated: bool) -> bool {
    origin == Origin::Created && !read_only && !recreated
}

/// The [`FlussError::TableNotReady`] of an open whose table got no bucket leaders within
/// `waited` after it was recreated, the first wait having been `first`.
fn not_ready_after_recreating(table: String, waited: Duration, detail: &str, first: Duration) -> FlussError {
    FlussError::TableNotReady {
        table,
        waited,
        detail: format!(
            "{detail} (the table was recreated once: created by this open, its buckets got no \
             leader within {first:?}, so it was dropped and created again)"
        ),
    }
}

/// Creates the log table: [`Origin::Created`], or [`Origin::Found`] when another process
/// created it first (then it is checked like any existing table).
async fn create_table(
    config: &FlussConfig,
    admin: &FlussAdmin,
    path: &TablePath,
    log_ttl: &str,
) -> Result<Origin, FlussError> {
    let schema = log_schema().map_err(|source| FlussError::Client {
        operation: "building the schema",
        table: config.table_name(),
        source: Box::new(source),
    })?;
    let buckets = i32::try_from(config.buckets).unwrap_or(i32::MAX);
    let mut descriptor = TableDescriptor::builder()
        .schema(schema)
        .distributed_by(Some(buckets), vec![BUCKET_KEY.to_owned()])
        .property(retention::LOG_TTL_PROPERTY, log_ttl);
    if let Some(replication) = config.replication {
        descriptor = descriptor.property(REPLICATION_PROPERTY, replication.to_string());
    }
    let descriptor = descriptor.build().map_err(|source| FlussError::Client {
        operation: "building the table descriptor",
        table: config.table_name(),
        source: Box::new(source),
    })?;
    match request(config, "creating the table", admin.create_table(path, &descriptor, false)).await {
        Ok(()) => Ok(Origin::Created),
        Err(FlussError::Client { source, .. }) if source.api_error() == Some(ApiError::TableAlreadyExist) => {
            Ok(Origin::Found)
        }
        Err(e) => Err(e),
    }
}

/// Drops the table this open created, whose buckets got no leader, and creates it again. Only
/// if the table is still the one created (`created`): a table that another process dropped and
/// created again in the meantime is not this call's to drop ([`FlussError::Timeout`], as for
/// any table recreated while open looks it up: open again).
async fn recreate_table(
    config: &FlussConfig,
    admin: &FlussAdmin,
    path: &TablePath,
    created: &LogIdentity,
    log_ttl: &str,
) -> Result<Origin, FlussError> {
    let current = match fetch_identity(config, admin, path).await {
        Ok(identity) => Some(identity),
        Err(FlussError::TableMissing { .. }) => None,
        Err(e) => return Err(e),
    };
    match current {
        Some(current) if current.id != created.id => {
            return Err(FlussError::Timeout {
                operation: "opening a table that is being recreated",
                table: config.table_name(),
                bootstrap: config.bootstrap.clone(),
                waited: Duration::ZERO,
            });
        }
        Some(_) => {
            request(config, "dropping the table whose buckets got no leader", admin.drop_table(path, true)).await?;
        }
        None => {}
    }
    create_table(config, admin, path, log_ttl).await
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

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;
    use actionstate_core::StateLog;
    use actionstate_testkit::services::Service;

    #[test]
    fn only_a_table_this_open_created_is_recreated_and_only_once() {
        assert!(should_recreate(Origin::Created, false, false));
        // Found: it may hold data.
        assert!(!should_recreate(Origin::Found, false, false));
        // Once.
        assert!(!should_recreate(Origin::Created, false, true));
        assert!(!should_recreate(Origin::Found, false, true));
    }

    #[test]
    fn read_only_never_recreates() {
        for origin in [Origin::Created, Origin::Found] {
            for recreated in [false, true] {
                assert!(!should_recreate(origin, true, recreated), "{origin:?} recreated={recreated}");
            }
        }
    }

    #[test]
    fn the_error_after_recreating_says_so() {
        let e = not_ready_after_recreating(
            "db.t".to_owned(),
            Duration::from_secs(15),
            "No leader found for table bucket: TableBucket(1, 0).",
            Duration::from_secs(15),
        );
        assert!(e.is_retryable());
        let message = e.to_string();
        assert!(message.starts_with("table db.t not ready after 15s: No leader found"), "{message}");
        assert!(message.contains("recreated once"), "{message}");
    }

    /// The step after a table got no bucket leaders, against a real cluster (the state itself
    /// cannot be provoked): it drops and creates again the table this open created, and leaves
    /// alone a table that is no longer that one.
    #[tokio::test]
    async fn recreating_replaces_only_the_table_this_open_created() {
        let Some(cluster) = Service::require("fluss", "FLUSS", "recreate-table") else { return };
        let table = format!("recreate_{}", uuid::Uuid::new_v4().simple());
        let mut config = FlussConfig::new(cluster.get("FLUSS_BOOTSTRAP").unwrap(), "actionstate_tests", &table, 2);
        config.request_timeout = Duration::from_secs(15);
        let connection = FlussConnection::new(config.client_config()).await.unwrap();
        let admin = connection.get_admin().unwrap();
        admin.create_database(&config.database, None, true).await.unwrap();
        let path = TablePath::new(config.database.clone(), config.table.clone());
        let ttl = retention::log_ttl_value(None).unwrap();
        let creating = CREATE_LOCK.lock().await;

        assert_eq!(create_table(&config, &admin, &path, &ttl).await.unwrap(), Origin::Created);
        assert_eq!(create_table(&config, &admin, &path, &ttl).await.unwrap(), Origin::Found);
        let first = fetch_identity(&config, &admin, &path).await.unwrap();

        assert_eq!(recreate_table(&config, &admin, &path, &first, &ttl).await.unwrap(), Origin::Created);
        let second = fetch_identity(&config, &admin, &path).await.unwrap();
        assert_ne!(second.id, first.id, "a new table");
        let ends = listed_offsets(&config, &admin, &path, "end_offsets", OffsetSpec::Latest).await.unwrap();
        assert_eq!(ends, [0, 0]);

        // Another table by now than the one created: not dropped.
        let e = recreate_table(&config, &admin, &path, &first, &ttl).await.unwrap_err();
        assert!(matches!(e, FlussError::Timeout { .. }), "{e}");
        assert_eq!(fetch_identity(&config, &admin, &path).await.unwrap().id, second.id);
        drop(creating);

        let log = FlussLog::open(config).await.unwrap();
        assert_eq!(log.identity().id, second.id);
        drop(log);
        admin.drop_table(&path, false).await.unwrap();
    }
}
