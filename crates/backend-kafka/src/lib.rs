//! # actionstate-kafka
//!
//! A [`StateLog`] on an Apache Kafka topic, through [rdkafka](https://docs.rs/rdkafka)
//! (librdkafka, built from source by `rdkafka-sys`).
//!
//! ```no_run
//! # async fn demo() -> Result<(), actionstate_core::Error> {
//! use actionstate_core::{KeyId, StateLog, WireRecord};
//! use actionstate_kafka::{KafkaConfig, KafkaLog};
//!
//! let log = KafkaLog::open(KafkaConfig::new("127.0.0.1:9092", "agent-state", 8)).await?;
//! let record = WireRecord { key_id: KeyId::of(b"customer-42"), key: b"k".to_vec(), value: b"v".to_vec() };
//! let position = log.append(record).await?;
//! let end = log.end_offsets().await?[position.partition as usize];
//! let batch = log.read(position.partition, position.offset, end, 100).await?;
//! assert_eq!(batch.records.len(), 1);
//! # Ok(()) }
//! ```
//!
//! ## Guarantees
//!
//! - [`KafkaLog::open`] creates the topic when it is absent, with the configured partition count
//!   and replication factor and the [topic configuration](#topic-configuration) below, and waits
//!   until every partition has a leader. An existing topic with another partition count is
//!   refused ([`KafkaError::PartitionsChanged`]), never re-partitioned; an existing topic's
//!   configuration is checked (and migrated or refused) as described below.
//! - Every record is produced to the partition [`KeyId::partition`](actionstate_core::KeyId::partition)
//!   names, set explicitly, so all records of one key share a partition.
//! - The producer runs with `acks=all`, `enable.idempotence=true` and `linger.ms=0`;
//!   [`append`](StateLog::append) awaits this record's own delivery report and returns its exact
//!   offset. Nothing on the append path flushes the producer.
//! - A record whose value is a `Delete` envelope (an invalidated state) is produced as a Kafka
//!   **tombstone**: null value, so compaction drops the superseded state and, after
//!   `delete.retention.ms`, the tombstone itself. The envelope travels in the record header
//!   [`TOMBSTONE_HEADER`], and [`read`](StateLog::read) returns it as the record's value, so
//!   the store reads the same bytes it appended. A null value without that header is returned
//!   as an empty value, which the decoder rejects with an error naming partition and offset.
//! - Reads assign one partition to a consumer without a consumer group's commits
//!   (`enable.auto.commit=false`, `auto.offset.reset=error`), stop at the `to` offset the caller
//!   captured, and fail naming partition and offset when no record arrives for
//!   [`KafkaConfig::read_stall_timeout`].
//! - Blocking librdkafka calls (metadata, watermarks, consumer polls) run on tokio's blocking
//!   pool. A watermark request a partition answers with `NotLeaderForPartition` or
//!   `LeaderNotAvailable` (briefly, right after the topic is created or while a leader is
//!   elected) is repeated until [`KafkaConfig::request_timeout`]. Admin requests (creating the
//!   topic, describing and altering its configuration, deleting records) are futures that
//!   rdkafka's admin client completes from its own thread; they are awaited, with
//!   [`KafkaConfig::request_timeout`] as request and operation timeout.
//! - [`reclaim`](StateLog::reclaim) deletes records through Kafka's `DeleteRecords`
//!   ([`KafkaLog::capabilities`](StateLog::capabilities) reports
//!   [`Capabilities::RECLAIM`]): it checks every offset against the end offsets first (one
//!   beyond the end is [`actionstate_core::Error::OffsetBeyondEnd`]), asks only for the
//!   partitions whose offset lies above the earliest one, and returns the earliest offsets
//!   listed again afterwards. The broker moves a partition's log start offset to the requested
//!   offset, never past it, and deletes the segments below it. A failure names topic, partitions
//!   and offsets ([`KafkaError::Reclaim`]) and is retryable when it may pass (timeouts, leader
//!   moves).
//!
//! ## Topic configuration
//!
//! Kafka refuses `DeleteRecords` on a topic whose `cleanup.policy` lacks `delete`, and a
//! `delete` policy with finite retention removes records by age or size, checkpoint or not. So
//! a topic is created with
//!
//! - `cleanup.policy=compact,delete` — compaction still drops an upsert behind the tombstone
//!   of its key (invalidated states), and `delete` allows `DeleteRecords`;
//! - `retention.ms=-1` and `retention.bytes=-1` — time and size retention off: nothing is
//!   deleted by age or size, only by [`reclaim`](StateLog::reclaim), which the store calls for
//!   no more than what its restorable checkpoints no longer need;
//! - `segment.bytes=67108864` and `segment.ms=3600000` — the broker gives disk back a whole
//!   segment at a time, once `DeleteRecords` has moved the start of the log past it; with the
//!   defaults (1 GiB, seven days) a partition would hold up to a gigabyte, or a week of a quiet
//!   partition's records, that no checkpoint needs. 64 MiB segments rolled at least hourly
//!   bound that to one segment and an hour.
//!
//! An existing topic's configuration is described when the log is opened:
//!
//! - a policy without `delete` (`compact` alone is what earlier versions of this crate
//!   created) is migrated to the settings above with `AlterConfigs`, keeping the topic's
//!   other overrides (`AlterConfigs` replaces the whole set), and the change is logged with
//!   `tracing`; if the broker refuses, the open fails with [`KafkaError::TopicMigration`],
//!   which names the `kafka-configs.sh` command that makes the change;
//! - a policy with `delete` and a finite `retention.ms` or `retention.bytes` (a topic created
//!   by hand takes the broker's default of seven days) is refused with
//!   [`KafkaError::TopicRetention`], which names the setting, its value and the fix
//!   (`retention.ms=-1`, `retention.bytes=-1`), unless [`KafkaConfig::allow_retention`] is set.
//!   With it, records older than the topic's retention may be gone, and a restore from a
//!   checkpoint that needs them fails with [`actionstate_core::Error::DataLoss`].
//!
//! ## Log identity
//!
//! The [`LogIdentity`] is backend `"kafka"`, id `<cluster id>/<topic>/<topic id>` and the
//! partition count. The topic id is the 128-bit id Kafka gives a topic when it is created (in
//! hex), read through librdkafka's `DescribeTopics` call (rdkafka's safe API does not wrap it;
//! see the `topic_id` module, the crate's only unsafe code). A topic deleted and created again
//! under the same name gets a new topic id, so markers of the old topic fail validation with
//! [`actionstate_core::Error::LogChanged`] even when the partition count is the same.
//!
//! ## Error classes
//!
//! Failures become [`actionstate_core::Error::Backend`]; librdkafka error codes that may pass on
//! retry (timeouts, transport failures, leader changes, too few in-sync replicas) are retryable,
//! the rest (authentication, authorization, record too large, invalid configuration) terminal.
//! See [`KafkaError::is_retryable`].

#![deny(unsafe_code)]
#![warn(missing_docs)]

#[allow(unsafe_code, reason = "librdkafka's DescribeTopics has no safe wrapper in rdkafka")]
mod topic_id;

mod config;
mod topic_config;

use config::millis;
pub use config::{DEFAULT_PARTITIONS, KafkaConfig, Security};

use actionstate_core::{
    BackendError, Capabilities, Error as CoreError, LogIdentity, Position, ReadBatch, ReadRecord, RecordKind, StateLog,
    WireRecord, codec,
};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::{Client, ClientContext};
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::{KafkaError as RdError, RDKafkaErrorCode};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::util::Timeout;
use rdkafka::{Offset, TopicPartitionList};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use topic_config::RETENTION_MS;

/// Longest single metadata request while opening; the open retries until the request timeout.
const OPEN_ATTEMPT: Duration = Duration::from_secs(1);

/// How often open asks again to create a topic the metadata still reports absent.
const CREATE_RETRY: Duration = Duration::from_millis(500);

/// Backend name used in [`LogIdentity`] and [`BackendError`].
pub const BACKEND: &str = "kafka";

/// What an append or a reclaim on a read-only log returns.
fn read_only(operation: &'static str) -> CoreError {
    CoreError::Unsupported { backend: format!("{BACKEND} (opened read-only)"), operation }
}

/// Failures of the Kafka backend.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KafkaError {
    /// A librdkafka call failed.
    #[error("{operation}: {source}{}", context_suffix(.context))]
    Client {
        /// What was being done.
        operation: &'static str,
        /// The librdkafka error.
        source: RdError,
        /// The last error librdkafka reported for the connection (e.g. a refused connection or a
        /// failed authentication), if any.
        context: Option<String>,
    },
    /// The brokers rejected the SASL credentials.
    #[error("{operation}: authentication failed: {detail}")]
    Authentication {
        /// What was being done.
        operation: &'static str,
        /// librdkafka's description.
        detail: String,
    },
    /// The topic does not exist (any more).
    #[error("topic {topic} does not exist")]
    TopicMissing {
        /// The topic.
        topic: String,
    },
    /// The topic exists with another partition count than configured.
    #[error("topic {topic} has {found} partitions, configured {configured}")]
    PartitionsChanged {
        /// The topic.
        topic: String,
        /// Partitions configured.
        configured: u32,
        /// Partitions the topic has.
        found: u32,
    },
    /// The topic was not ready (created, with leaders for every partition) in time.
    #[error("topic {topic} not ready after {waited:?}: {detail}")]
    TopicNotReady {
        /// The topic.
        topic: String,
        /// How long was waited.
        waited: Duration,
        /// The last state seen.
        detail: String,
    },
    /// A read received no record for the stall timeout.
    #[error("read of {topic} partition {partition} stalled at offset {offset} (target {to}) for {waited:?}")]
    ReadStalled {
        /// The topic.
        topic: String,
        /// The partition.
        partition: u32,
        /// The offset the read waited for.
        offset: u64,
        /// The end of the requested range.
        to: u64,
        /// How long no record arrived.
        waited: Duration,
    },
    /// A read failed at a known position.
    #[error("read of {topic} partition {partition} at offset {offset}: {source}")]
    Read {
        /// The topic.
        topic: String,
        /// The partition.
        partition: u32,
        /// The offset being read.
        offset: u64,
        /// The librdkafka error.
        source: RdError,
    },
    /// An admin request about the topic (describing or altering its configuration) failed.
    #[error("{operation} of topic {topic}: {}{}", code_text(.source), context_suffix(.context))]
    Admin {
        /// What was being done.
        operation: &'static str,
        /// The topic.
        topic: String,
        /// The librdkafka error.
        source: Box<RdError>,
        /// The last error librdkafka reported for the connection, if any.
        context: Option<String>,
    },
    /// `DeleteRecords` failed, for the whole request or for one partition of it.
    #[error(
        "reclaiming topic {topic} {}: {}{}{}",
        targets_text(.targets),
        code_text(.source),
        policy_hint(.source),
        context_suffix(.context)
    )]
    Reclaim {
        /// The topic.
        topic: String,
        /// The partitions concerned, each with the offset records were to be deleted below.
        targets: Vec<(u32, u64)>,
        /// The librdkafka error.
        source: Box<RdError>,
        /// The last error librdkafka reported for the connection, if any.
        context: Option<String>,
    },
    /// The topic's `cleanup.policy` lacks `delete`, so Kafka refuses `DeleteRecords`, and
    /// changing it failed.
    #[error(
        "topic {topic} has cleanup.policy={policy}, under which Kafka refuses DeleteRecords, and \
         changing it to compact,delete failed: {detail}; make the change with `kafka-configs.sh \
         --bootstrap-server <broker> --alter --entity-type topics --entity-name {topic} --add-config \
         'cleanup.policy=[compact,delete],retention.ms=-1,retention.bytes=-1'` and open the log again"
    )]
    TopicMigration {
        /// The topic.
        topic: String,
        /// The topic's `cleanup.policy`.
        policy: String,
        /// Why the change failed.
        detail: String,
        /// Whether trying again may succeed (a timeout, a change not yet visible).
        retryable: bool,
    },
    /// The topic deletes records by age or size, which may remove what a checkpoint needs.
    #[error(
        "topic {topic} has cleanup.policy={policy} and {setting}={value}: Kafka deletes records by {} \
         whether a checkpoint still needs them or not; set retention.ms=-1 and retention.bytes=-1 on the \
         topic (`kafka-configs.sh --bootstrap-server <broker> --alter --entity-type topics --entity-name \
         {topic} --add-config retention.ms=-1,retention.bytes=-1`), or set KafkaConfig::allow_retention to \
         accept that restoring an old checkpoint may fail with data loss",
        retention_kind(.setting)
    )]
    TopicRetention {
        /// The topic.
        topic: String,
        /// The topic's `cleanup.policy`.
        policy: String,
        /// The retention setting: `retention.ms` or `retention.bytes`.
        setting: &'static str,
        /// Its value.
        value: String,
    },
    /// A partition outside `0..partitions` was asked for.
    #[error("partition {partition} out of range: topic {topic} has {partitions} partitions")]
    NoSuchPartition {
        /// The topic.
        topic: String,
        /// Partition asked for.
        partition: u32,
        /// Partitions of the topic.
        partitions: u32,
    },
    /// The broker reported a value that cannot be an offset or partition count.
    #[error("unexpected value from the broker: {0}")]
    Unexpected(String),
    /// A blocking task panicked or was cancelled.
    #[error("blocking task failed: {0}")]
    Task(String),
}

fn context_suffix(context: &Option<String>) -> String {
    context.as_ref().map(|c| format!(" (last client error: {c})")).unwrap_or_default()
}

/// What a retention setting deletes by.
fn retention_kind(setting: &str) -> &'static str {
    if setting == RETENTION_MS { "age" } else { "size" }
}

/// `partition 0 below offset 5, partition 1 below offset 7`.
fn targets_text(targets: &[(u32, u64)]) -> String {
    let parts: Vec<String> = targets.iter().map(|(p, o)| format!("partition {p} below offset {o}")).collect();
    parts.join(", ")
}

/// An admin request's error: its code when it has one (rdkafka's own text for a partition's
/// error of an admin request says "Offset fetch error").
fn code_text(source: &RdError) -> String {
    match error_code(source) {
        Some(code) => code.to_string(),
        None => source.to_string(),
    }
}

/// What a `DeleteRecords` refused by the cleanup policy needs.
fn policy_hint(source: &RdError) -> &'static str {
    if error_code(source) == Some(RDKafkaErrorCode::PolicyViolation) {
        " (the topic's cleanup.policy must include delete: opening the log again migrates it)"
    } else {
        ""
    }
}

/// The librdkafka error code of `e`, including an admin operation's (which
/// `rdkafka_error_code` does not report).
fn error_code(e: &RdError) -> Option<RDKafkaErrorCode> {
    match e {
        RdError::AdminOp(code) => Some(*code),
        e => e.rdkafka_error_code(),
    }
}

impl KafkaError {
    /// Whether retrying the operation may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            KafkaError::Client { source, .. } | KafkaError::Read { source, .. } => {
                error_code(source).is_some_and(code_is_retryable)
            }
            KafkaError::Admin { source, .. } | KafkaError::Reclaim { source, .. } => {
                error_code(source).is_some_and(code_is_retryable)
            }
            KafkaError::ReadStalled { .. } | KafkaError::TopicNotReady { .. } => true,
            KafkaError::TopicMigration { retryable, .. } => *retryable,
            KafkaError::TopicRetention { .. }
            | KafkaError::Authentication { .. }
            | KafkaError::TopicMissing { .. }
            | KafkaError::PartitionsChanged { .. }
            | KafkaError::NoSuchPartition { .. }
            | KafkaError::Unexpected(_)
            | KafkaError::Task(_) => false,
        }
    }

    fn operation(&self) -> &'static str {
        match self {
            KafkaError::Client { operation, .. } | KafkaError::Authentication { operation, .. } => operation,
            KafkaError::Admin { .. } | KafkaError::TopicMigration { .. } | KafkaError::TopicRetention { .. } => "open",
            KafkaError::Reclaim { .. } => "reclaim",
            KafkaError::ReadStalled { .. } | KafkaError::Read { .. } | KafkaError::NoSuchPartition { .. } => "read",
            KafkaError::TopicMissing { .. }
            | KafkaError::PartitionsChanged { .. }
            | KafkaError::TopicNotReady { .. } => "open",
            KafkaError::Unexpected(_) | KafkaError::Task(_) => "request",
        }
    }
}

/// Whether a librdkafka error code may clear on retry.
fn code_is_retryable(code: RDKafkaErrorCode) -> bool {
    use RDKafkaErrorCode as C;
    matches!(
        code,
        C::BrokerTransportFailure
            | C::Resolve
            | C::MessageTimedOut
            | C::AllBrokersDown
            | C::OperationTimedOut
            | C::QueueFull
            | C::TimedOutQueue
            | C::ISRInsufficient
            | C::WaitingForCoordinator
            | C::Retry
            | C::Interrupted
            | C::UnknownTopicOrPartition
            | C::LeaderNotAvailable
            | C::NotLeaderForPartition
            | C::RequestTimedOut
            | C::BrokerNotAvailable
            | C::ReplicaNotAvailable
            | C::NetworkException
            | C::CoordinatorLoadInProgress
            | C::CoordinatorNotAvailable
            | C::NotCoordinator
            | C::NotEnoughReplicas
            | C::NotEnoughReplicasAfterAppend
            | C::NotController
            | C::KafkaStorageError
            | C::FencedLeaderEpoch
            | C::UnknownLeaderEpoch
            | C::OffsetNotAvailable
            | C::PreferredLeaderNotAvailable
            | C::EligibleLeadersNotAvailable
            | C::ThrottlingQuotaExceeded
    )
}

impl From<KafkaError> for CoreError {
    fn from(e: KafkaError) -> Self {
        let operation = e.operation();
        if e.is_retryable() {
            CoreError::Backend(BackendError::retryable(BACKEND, operation, e))
        } else {
            CoreError::Backend(BackendError::terminal(BACKEND, operation, e))
        }
    }
}

fn with_operation(e: KafkaError, operation: &'static str) -> CoreError {
    if e.is_retryable() {
        CoreError::Backend(BackendError::retryable(BACKEND, operation, e))
    } else {
        CoreError::Backend(BackendError::terminal(BACKEND, operation, e))
    }
}

/// Client context remembering the connection-level errors librdkafka reported, so that a
/// failed or timed-out request can say why (refused connection, failed authentication).
#[derive(Debug, Default, Clone)]
struct LogContext {
    seen: Arc<Mutex<SeenErrors>>,
}

#[derive(Debug, Default)]
struct SeenErrors {
    /// The last authentication failure; kept, since the client's credentials never change.
    authentication: Option<String>,
    /// The last other error, not overwritten by the summary "all brokers are down".
    last: Option<String>,
}

impl LogContext {
    /// The last connection-level error reported, if any.
    fn last(&self) -> Option<String> {
        self.seen.lock().ok().and_then(|g| g.authentication.clone().or_else(|| g.last.clone()))
    }

    /// Turns a failed request into a [`KafkaError`], naming an authentication failure as such.
    fn fail(&self, operation: &'static str, source: RdError) -> KafkaError {
        let (authentication, last) = match self.seen.lock() {
            Ok(g) => (g.authentication.clone(), g.last.clone()),
            Err(_) => (None, None),
        };
        match authentication {
            Some(detail) => KafkaError::Authentication { operation, detail },
            None => KafkaError::Client { operation, source, context: last },
        }
    }
}

impl ClientContext for LogContext {
    fn log(&self, _level: rdkafka::config::RDKafkaLogLevel, _fac: &str, _log_message: &str) {}

    fn error(&self, error: RdError, reason: &str) {
        let Ok(mut g) = self.seen.lock() else { return };
        match error.rdkafka_error_code() {
            Some(RDKafkaErrorCode::Authentication | RDKafkaErrorCode::SaslAuthenticationFailed) => {
                g.authentication = Some(reason.to_owned());
            }
            Some(RDKafkaErrorCode::AllBrokersDown) if g.last.is_some() => {}
            _ => g.last = Some(reason.to_owned()),
        }
    }
}

impl ConsumerContext for LogContext {}

/// A cached reader of one partition and the offset it continues at.
struct Reader {
    consumer: BaseConsumer<LogContext>,
    next: u64,
}

struct Inner {
    config: KafkaConfig,
    producer: FutureProducer<LogContext>,
    /// The producer's context: the last connection error it saw.
    errors: LogContext,
    /// Deletes records on reclaim.
    admin: AdminClient<LogContext>,
    /// One cached consumer per partition, taken out while a read uses it.
    readers: Mutex<Vec<Option<Reader>>>,
}

/// A [`StateLog`] on one Kafka topic.
pub struct KafkaLog {
    inner: Arc<Inner>,
    identity: LogIdentity,
}

impl fmt::Debug for KafkaLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KafkaLog").field("config", &self.inner.config).field("identity", &self.identity).finish()
    }
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, KafkaError> {
    tokio::task::spawn_blocking(f).await.map_err(|e| KafkaError::Task(e.to_string()))
}

/// Partition count of `topic`, `None` when the topic does not exist; `Err` with a description
/// when it exists but is not ready (a partition without leader).
fn topic_partitions(
    client: &Client<impl ClientContext>,
    topic: &str,
    timeout: Duration,
) -> Result<Result<Option<u32>, String>, RdError> {
    let md = client.fetch_metadata(Some(topic), timeout)?;
    let Some(t) = md.topics().iter().find(|t| t.name() == topic) else { return Ok(Ok(None)) };
    if let Some(err) = t.error() {
        let code = RDKafkaErrorCode::from(err);
        if code == RDKafkaErrorCode::UnknownTopicOrPartition || code == RDKafkaErrorCode::UnknownTopic {
            return Ok(Ok(None));
        }
        return Ok(Err(format!("topic error {code}")));
    }
    if t.partitions().is_empty() {
        return Ok(Ok(None));
    }
    for p in t.partitions() {
        if p.leader() < 0 || p.error().is_some() {
            return Ok(Err(format!("partition {} has no leader", p.id())));
        }
    }
    let n = u32::try_from(t.partitions().len()).map_err(|_| RdError::MetadataFetch(RDKafkaErrorCode::Fail))?;
    Ok(Ok(Some(n)))
}

impl KafkaLog {
    /// Opens the log: creates the topic if it is absent, waits until every partition has a
    /// leader, checks the topic's configuration (migrating one whose cleanup policy refuses
    /// `DeleteRecords`, refusing one that deletes by age or size; see
    /// [topic configuration](crate#topic-configuration)), and captures the log's identity.
    pub async fn open(config: KafkaConfig) -> Result<KafkaLog, CoreError> {
        Self::open_inner(config).await.map_err(|e| with_operation(e, "open"))
    }

    async fn open_inner(config: KafkaConfig) -> Result<KafkaLog, KafkaError> {
        let mut pc = config.client_config();
        pc.set("acks", "all")
            .set("enable.idempotence", "true")
            .set("linger.ms", "0")
            .set("message.timeout.ms", millis(config.delivery_timeout))
            .set("allow.auto.create.topics", "false");
        let errors = LogContext::default();
        let producer: FutureProducer<LogContext> = pc
            .create_with_context(errors.clone())
            .map_err(|source| KafkaError::Client { operation: "creating the producer", source, context: None })?;
        let admin: AdminClient<LogContext> = config
            .client_config()
            .create_with_context(LogContext::default())
            .map_err(|source| KafkaError::Client { operation: "creating the admin client", source, context: None })?;

        let started = Instant::now();
        let topic = config.topic.clone();
        let timeout = config.request_timeout;
        // When the topic was last asked to be created: again while the metadata says it is absent,
        // since a creation right after a deletion may be refused until the deletion completes.
        let mut created: Option<Instant> = None;
        let partitions = loop {
            let p = producer.clone();
            let t = topic.clone();
            // Short attempts, so that a rejected password fails the open as soon as librdkafka
            // reports it instead of after the whole request timeout.
            let attempt = timeout.min(OPEN_ATTEMPT);
            let state = match blocking(move || topic_partitions(p.client(), &t, attempt)).await? {
                Ok(state) => state,
                Err(e) => {
                    let err = errors.fail("fetching topic metadata", e);
                    if matches!(err, KafkaError::Authentication { .. }) || started.elapsed() >= timeout {
                        return Err(err);
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let detail = match state {
                Ok(Some(found)) => break found,
                Ok(None) if config.read_only => return Err(KafkaError::TopicMissing { topic }),
                Ok(None) if created.is_none_or(|at| at.elapsed() >= CREATE_RETRY) => {
                    Self::create_topic(&admin, &config).await?;
                    created = Some(Instant::now());
                    "created, not yet in metadata".to_owned()
                }
                Ok(None) => "created, not yet in metadata".to_owned(),
                Err(detail) => detail,
            };
            if started.elapsed() > timeout {
                return Err(KafkaError::TopicNotReady { topic, waited: started.elapsed(), detail });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        if partitions != config.partitions && !config.read_only {
            return Err(KafkaError::PartitionsChanged { topic, configured: config.partitions, found: partitions });
        }
        // Also for a topic this open created: another client may have created it first. A
        // read-only log reads whatever the topic keeps, and changes nothing.
        if !config.read_only {
            topic_config::check(&admin, &config).await?;
        }
        let identity = Self::fetch_identity(&producer, &errors, &topic, timeout).await?;
        let readers = Mutex::new((0..partitions).map(|_| None).collect());
        Ok(KafkaLog { inner: Arc::new(Inner { config, producer, errors, admin, readers }), identity })
    }

    async fn create_topic(admin: &AdminClient<LogContext>, config: &KafkaConfig) -> Result<(), KafkaError> {
        let partitions = i32::try_from(config.partitions)
            .map_err(|_| KafkaError::Unexpected(format!("partition count {}", config.partitions)))?;
        let mut topic =
            NewTopic::new(&config.topic, partitions, TopicReplication::Fixed(config.replication.unwrap_or(-1)));
        let mut settings: BTreeMap<&str, &str> = topic_config::SEGMENTS.into_iter().collect();
        settings.extend(config.topic_settings.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        // Last, so that no topic setting replaces what the crate chooses (from_url refuses them too).
        settings.extend(topic_config::SETTINGS);
        for (key, value) in &settings {
            topic = topic.set(key, value);
        }
        let opts = AdminOptions::new()
            .request_timeout(Some(config.request_timeout))
            .operation_timeout(Some(config.request_timeout));
        let results = admin
            .create_topics([&topic], &opts)
            .await
            .map_err(|e| admin.inner().context().fail("creating the topic", e))?;
        for r in results {
            match r {
                Ok(_) => {}
                // Created concurrently, or the deletion of an older topic of that name is still
                // in progress: the metadata loop waits for it.
                Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((_, code)) => {
                    return Err(admin.inner().context().fail("creating the topic", RdError::AdminOp(code)));
                }
            }
        }
        Ok(())
    }

    async fn fetch_identity(
        producer: &FutureProducer<LogContext>,
        errors: &LogContext,
        topic: &str,
        timeout: Duration,
    ) -> Result<LogIdentity, KafkaError> {
        let p = producer.clone();
        let t = topic.to_owned();
        let (partitions, cluster, topic_id) = blocking(move || {
            let parts = topic_partitions(p.client(), &t, timeout)?;
            let cluster = p.client().fetch_cluster_id(timeout);
            Ok::<_, RdError>((parts, cluster, topic_id::describe(p.client(), &t, timeout)))
        })
        .await?
        .map_err(|e| errors.fail("fetching topic metadata", e))?;
        let partitions = match partitions {
            Ok(Some(n)) => n,
            Ok(None) => return Err(KafkaError::TopicMissing { topic: topic.to_owned() }),
            Err(detail) => {
                return Err(KafkaError::TopicNotReady { topic: topic.to_owned(), waited: Duration::ZERO, detail });
            }
        };
        let cluster = cluster.ok_or_else(|| {
            errors.fail("fetching the cluster id", RdError::MetadataFetch(RDKafkaErrorCode::OperationTimedOut))
        })?;
        let topic_id = match topic_id {
            Ok(topic_id::TopicId::Id(id)) => id,
            Ok(topic_id::TopicId::Missing) => return Err(KafkaError::TopicMissing { topic: topic.to_owned() }),
            Err(detail) => {
                return Err(KafkaError::TopicNotReady { topic: topic.to_owned(), waited: Duration::ZERO, detail });
            }
        };
        Ok(LogIdentity { backend: BACKEND.to_owned(), id: format!("{cluster}/{topic}/{topic_id:032x}"), partitions })
    }

    /// The configuration the log was opened with.
    pub fn config(&self) -> &KafkaConfig {
        &self.inner.config
    }

    /// The topic name.
    pub fn topic(&self) -> &str {
        &self.inner.config.topic
    }

    async fn watermarks(&self, operation: &'static str) -> Result<Vec<(u64, u64)>, CoreError> {
        let inner = Arc::clone(&self.inner);
        let partitions = self.identity.partitions;
        let result = blocking(move || {
            let client = inner.producer.client();
            let one = |p: u32| {
                // A partition whose leadership is still moving (right after the topic was
                // created, or during a leader election) answers NotLeader for a moment:
                // ask again until the request timeout.
                let started = Instant::now();
                let (lo, hi) = loop {
                    match client.fetch_watermarks(&inner.config.topic, p as i32, inner.config.request_timeout) {
                        Ok(w) => break w,
                        Err(e)
                            if matches!(
                                e.rdkafka_error_code(),
                                Some(RDKafkaErrorCode::NotLeaderForPartition | RDKafkaErrorCode::LeaderNotAvailable)
                            ) && started.elapsed() < inner.config.request_timeout =>
                        {
                            std::thread::sleep(Duration::from_millis(50));
                        }
                        Err(e) => return Err(inner.errors.fail("fetching watermarks", e)),
                    }
                };
                let conv = |o: i64| {
                    u64::try_from(o).map_err(|_| KafkaError::Unexpected(format!("watermark {o} of partition {p}")))
                };
                Ok((conv(lo)?, conv(hi)?))
            };
            // Each partition's watermarks are a request round trip of their own: the partitions
            // are asked at once, a bounded number at a time, instead of one after another
            // (a rebuild waited for sixteen round trips before reading a record).
            let one = &one;
            let all: Vec<u32> = (0..partitions).collect();
            let mut out = Vec::with_capacity(all.len());
            for chunk in all.chunks(WATERMARK_FANOUT) {
                std::thread::scope(|s| {
                    let asked: Vec<_> = chunk.iter().map(|&p| s.spawn(move || one(p))).collect();
                    for h in asked {
                        let panicked = |_| Err(KafkaError::Task("a watermark request panicked".into()));
                        out.push(h.join().unwrap_or_else(panicked)?);
                    }
                    Ok::<_, KafkaError>(())
                })?;
            }
            Ok::<_, KafkaError>(out)
        })
        .await;
        result.and_then(|r| r).map_err(|e| with_operation(e, operation))
    }

    /// Deletes, per `(partition, before)`, the records below `before` with one `DeleteRecords`
    /// request.
    async fn delete_records(&self, targets: Vec<(u32, u64)>) -> Result<(), KafkaError> {
        let topic = &self.inner.config.topic;
        let admin = &self.inner.admin;
        let failed = |targets: Vec<(u32, u64)>, source: RdError| KafkaError::Reclaim {
            topic: topic.clone(),
            targets,
            source: Box::new(source),
            context: admin.inner().context().last(),
        };
        let mut tpl = TopicPartitionList::with_capacity(targets.len());
        for &(p, before) in &targets {
            let offset = i64::try_from(before).map_err(|_| KafkaError::Unexpected(format!("offset {before}")))?;
            let partition = i32::try_from(p).map_err(|_| KafkaError::Unexpected(format!("partition {p}")))?;
            tpl.add_partition_offset(topic, partition, Offset::Offset(offset))
                .map_err(|e| failed(vec![(p, before)], e))?;
        }
        let timeout = self.inner.config.request_timeout;
        let opts = AdminOptions::new().request_timeout(Some(timeout)).operation_timeout(Some(timeout));
        let result = admin.delete_records(&tpl, &opts).await.map_err(|e| failed(targets.clone(), e))?;
        for element in result.elements() {
            if let Err(e) = element.error() {
                let p = u32::try_from(element.partition()).unwrap_or(u32::MAX);
                let asked = targets.iter().filter(|(q, _)| *q == p).copied().collect();
                return Err(failed(asked, e));
            }
        }
        Ok(())
    }

    fn read_blocking(inner: &Inner, partition: u32, from: u64, to: u64, max: usize) -> Result<ReadBatch, KafkaError> {
        let topic = &inner.config.topic;
        let cached = inner.readers.lock().ok().and_then(|mut g| g.get_mut(partition as usize).and_then(Option::take));
        let mut reader = match cached {
            Some(r) => r,
            None => {
                let mut cc = inner.config.client_config();
                cc.set("group.id", format!("actionstate-read-{}", uuid::Uuid::new_v4()))
                    .set("enable.auto.commit", "false")
                    .set("enable.auto.offset.store", "false")
                    .set("auto.offset.reset", "error")
                    .set("enable.partition.eof", "false")
                    .set("fetch.wait.max.ms", "100");
                let consumer: BaseConsumer<LogContext> = cc
                    .create_with_context(LogContext::default())
                    .map_err(|source| KafkaError::Client { operation: "creating a consumer", source, context: None })?;
                // An offset no read starts at, so the first read assigns.
                Reader { consumer, next: u64::MAX }
            }
        };
        if reader.next != from {
            let offset = i64::try_from(from).map_err(|_| KafkaError::Unexpected(format!("offset {from}")))?;
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition_offset(topic, partition as i32, Offset::Offset(offset))
                .map_err(|source| KafkaError::Read { topic: topic.clone(), partition, offset: from, source })?;
            reader.consumer.assign(&tpl).map_err(|source| KafkaError::Read {
                topic: topic.clone(),
                partition,
                offset: from,
                source,
            })?;
            reader.next = from;
        }
        // Sized for the whole batch at once: growing it by doubling touched (and had the kernel
        // zero) twice the memory per batch, a tenth of a rebuild's time in profiles.
        let mut records = Vec::with_capacity(max.min(usize::try_from(to.saturating_sub(from)).unwrap_or(max)));
        let stall = inner.config.read_stall_timeout;
        let mut last_progress = Instant::now();
        // Whether records arrived since `last_progress` was taken. Queued records are taken
        // without waiting and without reading the clock (reading it for every record cost a
        // few percent of a rebuild); only an empty queue reads the clock and waits.
        let mut progressed = false;
        let mut next = from;
        while records.len() < max && next < to {
            let polled = match reader.consumer.poll(Duration::ZERO) {
                Some(polled) => Some(polled),
                None => {
                    if progressed {
                        last_progress = Instant::now();
                        progressed = false;
                    }
                    let waited = last_progress.elapsed();
                    if waited >= stall {
                        // Compaction never removes the last record below an end offset the
                        // broker reported (it sits in the active segment, or a newer record of
                        // its key follows at or past `to`), so a stall means `to` lies beyond
                        // the end or the broker is gone. Records already read are returned; the
                        // next call reports the stall.
                        if !records.is_empty() {
                            break;
                        }
                        return Err(KafkaError::ReadStalled {
                            topic: topic.clone(),
                            partition,
                            offset: next,
                            to,
                            waited,
                        });
                    }
                    reader.consumer.poll(stall - waited)
                }
            };
            match polled {
                None => {}
                Some(Err(source)) => {
                    return Err(KafkaError::Read { topic: topic.clone(), partition, offset: next, source });
                }
                Some(Ok(msg)) => {
                    let offset = u64::try_from(msg.offset())
                        .map_err(|_| KafkaError::Unexpected(format!("record offset {}", msg.offset())))?;
                    if offset < next {
                        continue;
                    }
                    if offset >= to {
                        next = to;
                        break;
                    }
                    records.push(ReadRecord {
                        offset,
                        key: msg.key().map(<[u8]>::to_vec).unwrap_or_default(),
                        value: stored_value(&msg),
                    });
                    next = offset + 1;
                    progressed = true;
                }
            }
        }
        if next >= to {
            // The range is read: stop the consumer fetching ahead while it sits in the cache.
            let _ = reader.consumer.unassign();
            reader.next = u64::MAX;
        } else {
            reader.next = next;
        }
        if let Ok(mut g) = inner.readers.lock()
            && let Some(slot) = g.get_mut(partition as usize)
            && slot.is_none()
        {
            *slot = Some(reader);
        }
        Ok(ReadBatch { records, next })
    }
}

/// Partitions whose watermarks are asked at once (one thread each).
const WATERMARK_FANOUT: usize = 16;

/// The record header that carries the envelope of a tombstone (a `Delete` record produced with
/// a null value).
pub const TOMBSTONE_HEADER: &str = "actionstate-delete";

/// Whether `value` is the envelope of a `Delete` record (magic, then the kind byte at 5).
fn is_delete_envelope(value: &[u8]) -> bool {
    value.starts_with(&codec::MAGIC) && value.get(5) == Some(&(RecordKind::Delete as u8))
}

/// The value the store appended for a record read back: the payload, or for a tombstone the
/// envelope in its header (empty when a null value carries none).
fn stored_value<M: Message>(msg: &M) -> Vec<u8> {
    if let Some(payload) = msg.payload() {
        return payload.to_vec();
    }
    msg.headers()
        .and_then(|h| h.iter().find(|h| h.key == TOMBSTONE_HEADER).and_then(|h| h.value.map(<[u8]>::to_vec)))
        .unwrap_or_default()
}

impl StateLog for KafkaLog {
    fn identity(&self) -> &LogIdentity {
        &self.identity
    }

    async fn current_identity(&self) -> Result<LogIdentity, CoreError> {
        Self::fetch_identity(
            &self.inner.producer,
            &self.inner.errors,
            &self.inner.config.topic,
            self.inner.config.request_timeout,
        )
        .await
        .map_err(|e| with_operation(e, "current_identity"))
    }

    async fn append(&self, record: WireRecord) -> Result<Position, CoreError> {
        if self.inner.config.read_only {
            return Err(read_only("append"));
        }
        let partition = record.key_id.partition(self.identity.partitions);
        let p = i32::try_from(partition)
            .map_err(|_| with_operation(KafkaError::Unexpected(format!("partition {partition}")), "append"))?;
        let rec = FutureRecord::to(&self.inner.config.topic).partition(p).key(&record.key);
        let rec = if is_delete_envelope(&record.value) {
            rec.headers(OwnedHeaders::new().insert(Header { key: TOMBSTONE_HEADER, value: Some(&record.value) }))
        } else {
            rec.payload(&record.value)
        };
        match self.inner.producer.send(rec, Timeout::After(self.inner.config.delivery_timeout)).await {
            Ok(delivery) => {
                let offset = u64::try_from(delivery.offset).map_err(|_| {
                    with_operation(KafkaError::Unexpected(format!("delivered offset {}", delivery.offset)), "append")
                })?;
                Ok(Position { partition, offset, exact: true })
            }
            Err((e, _)) => Err(with_operation(self.inner.errors.fail("append", e), "append")),
        }
    }

    async fn earliest_offsets(&self) -> Result<Vec<u64>, CoreError> {
        Ok(self.watermarks("earliest_offsets").await?.into_iter().map(|(lo, _)| lo).collect())
    }

    async fn end_offsets(&self) -> Result<Vec<u64>, CoreError> {
        Ok(self.watermarks("end_offsets").await?.into_iter().map(|(_, hi)| hi).collect())
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::RECLAIM
    }

    async fn reclaim(&self, before: &[u64]) -> Result<Vec<u64>, CoreError> {
        if self.inner.config.read_only {
            return Err(read_only("reclaim"));
        }
        let partitions = self.identity.partitions;
        if before.len() != partitions as usize {
            return Err(CoreError::UnknownPartition {
                log: self.identity.to_string(),
                partition: u32::try_from(before.len().min(partitions as usize)).unwrap_or(u32::MAX),
                partitions,
            });
        }
        let marks = self.watermarks("reclaim").await?;
        let mut targets = Vec::new();
        for ((p, &offset), &(earliest, end)) in (0u32..).zip(before).zip(&marks) {
            // End offsets only grow: an offset within the end now is within it when the
            // broker deletes.
            if offset > end {
                return Err(CoreError::OffsetBeyondEnd { partition: p, offset, end });
            }
            if offset > earliest {
                targets.push((p, offset));
            }
        }
        if targets.is_empty() {
            return Ok(marks.into_iter().map(|(lo, _)| lo).collect());
        }
        self.delete_records(targets).await.map_err(|e| with_operation(e, "reclaim"))?;
        // DeleteRecords reports low watermarks as well; listing them again gives what
        // `earliest_offsets` reports from now on, the skipped partitions included.
        Ok(self.watermarks("reclaim").await?.into_iter().map(|(lo, _)| lo).collect())
    }

    async fn read(&self, partition: u32, from: u64, to: u64, max: usize) -> Result<ReadBatch, CoreError> {
        if partition >= self.identity.partitions {
            return Err(with_operation(
                KafkaError::NoSuchPartition {
                    topic: self.inner.config.topic.clone(),
                    partition,
                    partitions: self.identity.partitions,
                },
                "read",
            ));
        }
        if from >= to || max == 0 {
            return Ok(ReadBatch { records: Vec::new(), next: from });
        }
        let inner = Arc::clone(&self.inner);
        blocking(move || Self::read_blocking(&inner, partition, from, to, max))
            .await
            .and_then(|r| r)
            .map_err(|e| with_operation(e, "read"))
    }
}
