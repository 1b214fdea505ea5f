//! The log and opening it: [`FlussLog`] and the state its handles share, the database and the
//! table, their checks, and the log's identity.

use crate::client::{connect, request};
use crate::config::FlussConfig;
use crate::error::{BACKEND, FlussError, leader_moving, with_operation};
use crate::retention;
use crate::table::{BUCKET_KEY, REPLICATION_PROPERTY, check_name, check_table, log_schema, warn_read_only};
use crate::writer::{Appender, Generation};
use actionstate_core::{BackendConfig, Error as CoreError, LogIdentity, ReadRecord};
use fluss::client::{FlussAdmin, FlussConnection, FlussTable, LogScanner};
use fluss::metadata::{TableDescriptor, TableInfo, TablePath};
use fluss::rpc::FlussError as ApiError;
use fluss::rpc::message::OffsetSpec;
use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Serializes creating tables within a process. The Fluss 0.9.1 coordinator was seen to lose
/// the creation of one of two tables created 30 ms apart (registered in ZooKeeper, never given
/// buckets, so its buckets never get a leader); creating one table at a time, each until its
/// buckets have leaders, avoids that for the tables one process creates. A table that gets no
/// leaders anyway is created again by open (see `open::should_recreate`).
static CREATE_LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// What the handles of one log share.
pub(crate) struct Inner {
    pub(crate) config: FlussConfig,
    pub(crate) table_name: String,
    pub(crate) path: TablePath,
    pub(crate) connection: FlussConnection,
    pub(crate) admin: Arc<FlussAdmin>,
    pub(crate) info: TableInfo,
    /// `None` when read-only.
    pub(crate) writer: Option<Appender>,
    /// Per bucket, a lower bound of the offset of the next record appended (see the crate
    /// docs).
    pub(crate) floors: Vec<AtomicU64>,
    /// One cached scanner per bucket, taken out while a read uses it.
    pub(crate) readers: Mutex<Vec<Option<Reader>>>,
}

/// A [`StateLog`](actionstate_core::StateLog) on one Fluss log table.
pub struct FlussLog {
    pub(crate) inner: Arc<Inner>,
    pub(crate) identity: LogIdentity,
}

impl fmt::Debug for FlussLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FlussLog").field("config", &self.inner.config).field("identity", &self.identity).finish()
    }
}

/// A cached scanner of one bucket, the offset it continues at, and records it polled past
/// the end of the last read (see `read.rs`).
pub(crate) struct Reader {
    pub(crate) scanner: LogScanner,
    pub(crate) next: u64,
    pub(crate) pending: VecDeque<ReadRecord>,
}

impl FlussLog {
    /// The configuration the log was opened with.
    pub fn config(&self) -> &FlussConfig {
        &self.inner.config
    }

    /// The table path.
    pub fn table_path(&self) -> &TablePath {
        &self.inner.path
    }

    /// The fluss-rs connection the log uses (for tools that write or scan the same table).
    pub fn connection(&self) -> &FlussConnection {
        &self.inner.connection
    }

    /// The table's metadata as captured at open.
    pub fn table_info(&self) -> &TableInfo {
        &self.inner.info
    }

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
        let log_ttl = checked_settings(&config)?;
        let connection = connect(&config).await?;
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
        // `ready_table`, after a recreation too): see `CREATE_LOCK`.
        let _creating = if exists { None } else { Some(CREATE_LOCK.lock().await) };
        let origin = if exists { Origin::Found } else { create_table(&config, &admin, &path, &log_ttl).await? };
        let (identity, table, ends) = ready_table(&mut config, &connection, &admin, &path, origin, &log_ttl).await?;
        let info = table.get_table_info().clone();
        drop(table);
        let writer = new_writer(&config, &path, &info).await?;
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

/// Checks the names and the bucket count of `config`; the value of the TTL property a created
/// table gets.
fn checked_settings(config: &FlussConfig) -> Result<String, FlussError> {
    check_name("database", &config.database)?;
    check_name("table", &config.table)?;
    if config.buckets == 0 || i32::try_from(config.buckets).is_err() {
        return Err(FlussError::InvalidConfig(format!("bucket count {} out of range", config.buckets)));
    }
    retention::log_ttl_value(config.log_ttl).map_err(FlussError::InvalidConfig)
}

/// The table once every bucket has a leader: its identity, its handle and its end offsets. A
/// table this open created whose buckets get no leader within the request timeout is dropped
/// and created again, once ([`should_recreate`]). A read-only open takes the table's bucket
/// count into `config`.
async fn ready_table<'c>(
    config: &mut FlussConfig,
    connection: &'c FlussConnection,
    admin: &FlussAdmin,
    path: &TablePath,
    mut origin: Origin,
    log_ttl: &str,
) -> Result<(LogIdentity, FlussTable<'c>, Vec<u64>), FlussError> {
    // How long the buckets of the table this call created first waited for leaders, once
    // it was dropped and created again.
    let mut recreated_after: Option<Duration> = None;
    loop {
        let identity = fetch_identity(config, admin, path).await?;
        let table = request(config, "fetching the table metadata", connection.get_table(path)).await?;
        check_table(config, table.get_table_info())?;
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
        match listed_offsets(config, admin, path, "end_offsets", OffsetSpec::Latest).await {
            Ok(ends) => return Ok((identity, table, ends)),
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
                origin = recreate_table(config, admin, path, &identity, log_ttl).await?;
            }
            Err(FlussError::TableNotReady { table: name, waited, detail }) if recreated_after.is_some() => {
                let first = recreated_after.unwrap_or_default();
                return Err(not_ready_after_recreating(name, waited, &detail, first));
            }
            Err(e) => return Err(e),
        }
    }
}

/// The writer of the log, on a connection of its own (see the `writer` module). A read-only
/// log starts none: fluss-rs's writer asks the server for a writer id (an idempotent writer's
/// state) and runs a sender task, for appends it never makes.
async fn new_writer(config: &FlussConfig, path: &TablePath, info: &TableInfo) -> Result<Option<Appender>, FlussError> {
    if config.read_only {
        warn_read_only(config, info);
        return Ok(None);
    }
    Ok(Some(Appender::new(Generation::open(config, path, info, 0).await?)))
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

/// Per bucket of the configured count, the offsets of `spec`, asking again while a bucket has
/// no leader, until the request timeout ([`FlussError::TableNotReady`]).
pub(crate) async fn listed_offsets(
    config: &FlussConfig,
    admin: &FlussAdmin,
    path: &TablePath,
    operation: &'static str,
    spec: OffsetSpec,
) -> Result<Vec<u64>, FlussError> {
    let buckets: Vec<i32> = (0..config.buckets).filter_map(|b| i32::try_from(b).ok()).collect();
    // Right after the table is created, or while a leader moves, a bucket has no leader for
    // a moment: ask again until the request timeout.
    let started = Instant::now();
    let listed = loop {
        match request(config, operation, admin.list_offsets(path, &buckets, spec.clone())).await {
            Err(FlussError::Client { source, .. }) if leader_moving(&source) => {
                if started.elapsed() >= config.request_timeout {
                    return Err(FlussError::TableNotReady {
                        table: config.table_name(),
                        waited: started.elapsed(),
                        detail: source.to_string(),
                    });
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            other => break other?,
        }
    };
    let mut out = Vec::with_capacity(buckets.len());
    for b in &buckets {
        let offset =
            listed.get(b).copied().ok_or_else(|| FlussError::Unexpected(format!("no offset listed for bucket {b}")))?;
        let offset =
            u64::try_from(offset).map_err(|_| FlussError::Unexpected(format!("offset {offset} of bucket {b}")))?;
        out.push(offset);
    }
    Ok(out)
}

/// The Fluss backend as `actionstate-recovery` chooses it by a log URL's scheme; its
/// partitions are the table's buckets. Here rather than in `config.rs`: the log holds its
/// configuration, so `config.rs` naming the log would make the two files import each other.
impl BackendConfig for FlussConfig {
    type Log = FlussLog;
    const SCHEME: &'static str = "fluss";
    const URL_FORM: &'static str = "fluss://HOST:PORT/DATABASE/TABLE";

    fn from_url(url: &str) -> Result<Self, CoreError> {
        FlussConfig::from_url(url)
    }

    fn read_only(self) -> Self {
        FlussConfig { read_only: true, ..self }
    }

    fn with_partitions(self, buckets: u32) -> Self {
        FlussConfig { buckets, ..self }
    }

    fn partitions(&self) -> u32 {
        self.buckets
    }

    fn open(&self) -> impl Future<Output = Result<FlussLog, CoreError>> + Send {
        FlussLog::open(self.clone())
    }
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
