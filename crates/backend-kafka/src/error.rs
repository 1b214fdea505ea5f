//! [`KafkaError`]: what fails, whether a retry may pass, and the client context that keeps the
//! last connection error librdkafka reported.

use crate::config::{KafkaConfig, RETENTION_MS};
use actionstate_core::{BackendError, Error as CoreError};
use rdkafka::client::ClientContext;
use rdkafka::consumer::ConsumerContext;
use rdkafka::error::{KafkaError as RdError, RDKafkaErrorCode};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Backend name used in [`LogIdentity`](actionstate_core::LogIdentity) and [`BackendError`].
pub const BACKEND: &str = "kafka";

/// What an append or a reclaim on a read-only log returns.
pub(crate) fn read_only(operation: &'static str) -> CoreError {
    CoreError::Unsupported { backend: format!("{BACKEND} (opened read-only)"), operation }
}

/// Failures of the Kafka backend.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KafkaError {
    /// A librdkafka call failed.
    #[error("{operation}: {source}{}{}", context_suffix(.context), hint_suffix(*.authentication_hint))]
    Client {
        /// What was being done.
        operation: &'static str,
        /// The librdkafka error.
        source: RdError,
        /// The last error librdkafka reported for the connection (e.g. a refused connection or a
        /// failed authentication), if any.
        context: Option<String>,
        /// Whether the failure suggests that the listener needs credentials the client lacks:
        /// the brokers accepted the connection but never answered, as a SASL listener does to
        /// a client without them. The message then says which URL parameters to add.
        authentication_hint: bool,
    },
    /// The brokers rejected the SASL credentials.
    #[error(
        "{operation}: authentication failed: {detail} (check the log URL's `username=` and the password \
         its `password_env=` or `password_file=` names)"
    )]
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
         {topic} --add-config retention.ms=-1,retention.bytes=-1`), or add `allow_retention=true` to the log \
         URL to accept that restoring an old checkpoint may fail with data loss",
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
    /// An append was reported delivered without an offset (librdkafka's -1001, for a batch the
    /// broker called a duplicate of one it had written), and its partition does not hold the
    /// record from the offset it must be at or after: whether it was written is unknown, as
    /// when an acknowledgement is lost.
    #[error(
        "{topic} partition {partition}: a record reported delivered without an offset is not between offsets \
         {from} and {end}; whether it was written is unknown"
    )]
    DeliveryUnconfirmed {
        /// The topic.
        topic: String,
        /// The partition.
        partition: u32,
        /// The offset the record must be at or after.
        from: u64,
        /// The end of the partition when it was looked for.
        end: u64,
    },
    /// A blocking task panicked or was cancelled.
    #[error("blocking task failed: {0}")]
    Task(String),
}

/// What [`KafkaError::Client`] says when a client without credentials got no answer from
/// brokers that accepted its connection.
pub(crate) const AUTHENTICATION_HINT: &str = "the brokers accepted the connection but did not answer: if the listener needs \
     authentication, add `security=sasl_plaintext&username=U&password_env=VAR` to the log URL (`security=sasl_ssl` \
     and `ca_file=PATH` over TLS)";

fn hint_suffix(authentication_hint: bool) -> String {
    if authentication_hint { format!("; {AUTHENTICATION_HINT}") } else { String::new() }
}

pub(crate) fn context_suffix(context: &Option<String>) -> String {
    context.as_ref().map(|c| format!(" (last client error: {c})")).unwrap_or_default()
}

/// What a retention setting deletes by.
pub(crate) fn retention_kind(setting: &str) -> &'static str {
    if setting == RETENTION_MS { "age" } else { "size" }
}

/// `partition 0 below offset 5, partition 1 below offset 7`.
pub(crate) fn targets_text(targets: &[(u32, u64)]) -> String {
    let parts: Vec<String> = targets.iter().map(|(p, o)| format!("partition {p} below offset {o}")).collect();
    parts.join(", ")
}

/// An admin request's error: its code when it has one (rdkafka's own text for a partition's
/// error of an admin request says "Offset fetch error").
pub(crate) fn code_text(source: &RdError) -> String {
    match error_code(source) {
        Some(code) => code.to_string(),
        None => source.to_string(),
    }
}

/// What a `DeleteRecords` refused by the cleanup policy needs.
pub(crate) fn policy_hint(source: &RdError) -> &'static str {
    if error_code(source) == Some(RDKafkaErrorCode::PolicyViolation) {
        " (the topic's cleanup.policy must include delete: opening the log again migrates it)"
    } else {
        ""
    }
}

/// The librdkafka error code of `e`, including an admin operation's (which
/// `rdkafka_error_code` does not report).
pub(crate) fn error_code(e: &RdError) -> Option<RDKafkaErrorCode> {
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
            KafkaError::ReadStalled { .. }
            | KafkaError::TopicNotReady { .. }
            | KafkaError::DeliveryUnconfirmed { .. } => true,
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
            KafkaError::DeliveryUnconfirmed { .. } => "append",
        }
    }
}

/// Whether a librdkafka error code may clear on retry.
pub(crate) fn code_is_retryable(code: RDKafkaErrorCode) -> bool {
    use RDKafkaErrorCode as C;
    matches!(
        code,
        C::BrokerTransportFailure
            // A request outstanding on a broker the cluster's metadata stopped listing (one that
            // died and was fenced), or whose address changed: asked again, another answers.
            | C::DestroyBroker
            | C::NodeUpdate
            | C::WaitCache
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

/// Whether an error a consumer's poll returned only says that a connection failed, which
/// librdkafka recovers from by itself (it reconnects, or fetches from the partition's new
/// leader once the metadata names one): a broker that died, or one restarting. Any other
/// error (an offset out of range, a fatal error) is the read's failure.
pub(crate) fn consumer_error_is_transient(e: &RdError) -> bool {
    use RDKafkaErrorCode as C;
    matches!(
        e,
        RdError::MessageConsumption(C::BrokerTransportFailure | C::AllBrokersDown | C::Resolve | C::DestroyBroker)
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

pub(crate) fn with_operation(e: KafkaError, operation: &'static str) -> CoreError {
    if e.is_retryable() {
        CoreError::Backend(BackendError::retryable(BACKEND, operation, e))
    } else {
        CoreError::Backend(BackendError::terminal(BACKEND, operation, e))
    }
}

/// Client context remembering the connection-level errors librdkafka reported, so that a
/// failed or timed-out request can say why (refused connection, failed authentication).
#[derive(Debug, Default, Clone)]
pub(crate) struct LogContext {
    seen: Arc<Mutex<SeenErrors>>,
    /// Whether the client has SASL credentials: without, a listener that needs them accepts
    /// the connection and then closes it, and failures hint at authentication.
    authenticates: bool,
}

#[derive(Debug, Default)]
pub(crate) struct SeenErrors {
    /// The last authentication failure; kept, since the client's credentials never change.
    authentication: Option<String>,
    /// The last other error, not overwritten by the summary "all brokers are down".
    last: Option<String>,
}

impl LogContext {
    /// The context of a client of `config`.
    pub(crate) fn new(config: &KafkaConfig) -> Self {
        LogContext { seen: Arc::default(), authenticates: config.security.is_some() }
    }

    /// The last connection-level error reported, if any.
    pub(crate) fn last(&self) -> Option<String> {
        self.seen.lock().ok().and_then(|g| g.authentication.clone().or_else(|| g.last.clone()))
    }

    /// Turns a failed request into a [`KafkaError`], naming an authentication failure as such.
    pub(crate) fn fail(&self, operation: &'static str, source: RdError) -> KafkaError {
        let (authentication, last) = match self.seen.lock() {
            Ok(g) => (g.authentication.clone(), g.last.clone()),
            Err(_) => (None, None),
        };
        match authentication {
            Some(detail) => KafkaError::Authentication { operation, detail },
            None => {
                let authentication_hint = !self.authenticates && unanswered(&source, last.as_deref());
                KafkaError::Client { operation, source, context: last, authentication_hint }
            }
        }
    }
}

/// Whether `source` says that brokers went unanswered although a connection was made: a
/// transport failure or a timeout, with no refused connection or unresolvable name seen (then
/// no broker listens there, and credentials would not help).
fn unanswered(source: &RdError, last: Option<&str>) -> bool {
    use RDKafkaErrorCode as C;
    let no_server = ["Connection refused", "resolve", "Name or service not known", "No route to host"];
    matches!(
        error_code(source),
        Some(
            C::BrokerTransportFailure
                | C::AllBrokersDown
                | C::OperationTimedOut
                | C::MessageTimedOut
                | C::RequestTimedOut
        )
    ) && !last.is_some_and(|l| no_server.iter().any(|n| l.contains(n)))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A client without credentials whose brokers took the connection and never answered (a
    /// SASL listener closes it) is told the listener may need authentication; one that found
    /// no broker, or that has credentials, is not.
    #[test]
    fn unanswered_requests_without_credentials_hint_at_authentication() {
        let plain = LogContext::new(&KafkaConfig::new("h:1", "t", 1));
        let mut with_sasl = KafkaConfig::new("h:1", "t", 1);
        with_sasl.security = Some(crate::Security::sasl_plain("u", "p"));
        let sasl = LogContext::new(&with_sasl);
        let transport = || RdError::MetadataFetch(RDKafkaErrorCode::BrokerTransportFailure);
        let hint = |context: &LogContext, last: Option<&str>| {
            if let Some(last) = last {
                context.error(RdError::Global(RDKafkaErrorCode::BrokerTransportFailure), last);
            }
            match context.fail("fetching topic metadata", transport()) {
                KafkaError::Client { authentication_hint, .. } => authentication_hint,
                other => panic!("{other:?}"),
            }
        };
        assert!(hint(&plain, Some("127.0.0.1:9093/bootstrap: Disconnected (after 0ms in state UP)")));
        let text = plain.fail("fetching topic metadata", transport()).to_string();
        assert!(text.contains("security=sasl_plaintext&username=U&password_env=VAR"), "{text}");
        assert!(!hint(&sasl, Some("Disconnected")));
        let refused = LogContext::new(&KafkaConfig::new("h:1", "t", 1));
        assert!(!hint(&refused, Some("Connect to ipv4#127.0.0.1:1 failed: Connection refused")));
        let other = LogContext::new(&KafkaConfig::new("h:1", "t", 1));
        match other.fail("append", RdError::MessageProduction(RDKafkaErrorCode::MessageSizeTooLarge)) {
            KafkaError::Client { authentication_hint, .. } => assert!(!authentication_hint),
            e => panic!("{e:?}"),
        }
    }

    /// What an append fails with when librdkafka's delivery report carries `code`.
    fn append_failure(code: RDKafkaErrorCode) -> CoreError {
        with_operation(LogContext::default().fail("append", RdError::MessageProduction(code)), "append")
    }

    /// A put while the partition has too few in-sync replicas, or none to lead it, fails with
    /// a retryable error: the broker's NOT_ENOUGH_REPLICAS (with two of three brokers gone, or
    /// after the append), or librdkafka's delivery timeout when no broker answers at all.
    #[test]
    fn append_failures_of_a_lost_quorum_are_retryable() {
        for code in [
            RDKafkaErrorCode::NotEnoughReplicas,
            RDKafkaErrorCode::NotEnoughReplicasAfterAppend,
            RDKafkaErrorCode::MessageTimedOut,
            RDKafkaErrorCode::RequestTimedOut,
            RDKafkaErrorCode::NotLeaderForPartition,
            RDKafkaErrorCode::LeaderNotAvailable,
            RDKafkaErrorCode::AllBrokersDown,
        ] {
            let CoreError::Backend(e) = append_failure(code) else { panic!("{code:?} is not a backend error") };
            assert!(e.is_retryable(), "{code:?} must be retryable: {e}");
            assert_eq!((e.backend(), e.operation()), (BACKEND, "append"));
        }
    }

    /// A request that was outstanding on a broker when it died and left the metadata fails
    /// with `DestroyBroker` (as a rebuild's watermark request did when a leader was killed):
    /// retryable, since another broker answers it.
    #[test]
    fn requests_to_a_broker_that_left_the_cluster_are_retryable() {
        for code in [RDKafkaErrorCode::DestroyBroker, RDKafkaErrorCode::NodeUpdate, RDKafkaErrorCode::WaitCache] {
            let failed = LogContext::default().fail("fetching watermarks", RdError::MetadataFetch(code));
            let CoreError::Backend(e) = with_operation(failed, "earliest_offsets") else { panic!("{code:?}") };
            assert!(e.is_retryable(), "{code:?} must be retryable: {e}");
        }
    }

    /// A dropped connection is waited out by a read; an offset out of range or a fatal error
    /// fails it.
    #[test]
    fn only_connection_failures_are_transient_for_a_read() {
        use RDKafkaErrorCode as C;
        for code in [C::BrokerTransportFailure, C::AllBrokersDown, C::Resolve, C::DestroyBroker] {
            assert!(consumer_error_is_transient(&RdError::MessageConsumption(code)), "{code:?}");
        }
        for code in [C::OffsetOutOfRange, C::UnknownTopicOrPartition, C::TopicAuthorizationFailed] {
            assert!(!consumer_error_is_transient(&RdError::MessageConsumption(code)), "{code:?}");
        }
        assert!(!consumer_error_is_transient(&RdError::MessageConsumptionFatal(C::BrokerTransportFailure)));
    }

    /// A producer that librdkafka declared fatal, and a record the broker will never take, do
    /// not pass on retry.
    #[test]
    fn fatal_and_oversized_appends_are_terminal() {
        for code in
            [RDKafkaErrorCode::Fatal, RDKafkaErrorCode::MessageSizeTooLarge, RDKafkaErrorCode::TopicAuthorizationFailed]
        {
            assert!(!append_failure(code).is_retryable(), "{code:?} must be terminal");
        }
    }
}
