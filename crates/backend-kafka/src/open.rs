//! The log and opening it: [`KafkaLog`] and the state its handles share, the topic's
//! creation, readiness, configuration check and identity.

use crate::config::{KafkaConfig, SEGMENTS, SETTINGS, millis};
use crate::error::{BACKEND, KafkaError, LogContext, with_operation};
use crate::{topic_config, topic_id};
use actionstate_core::{BackendConfig, Error as CoreError, LogIdentity};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::{Client, ClientContext};
use rdkafka::consumer::BaseConsumer;
use rdkafka::error::{KafkaError as RdError, RDKafkaErrorCode};
use rdkafka::producer::{FutureProducer, Producer};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the handles of one log share.
pub(crate) struct Inner {
    pub(crate) config: KafkaConfig,
    pub(crate) producer: FutureProducer<LogContext>,
    /// The producer's context: the last connection error it saw.
    pub(crate) errors: LogContext,
    /// Deletes records on reclaim.
    pub(crate) admin: AdminClient<LogContext>,
    /// One cached consumer per partition, taken out while a read uses it.
    pub(crate) readers: Mutex<Vec<Vec<Reader>>>,
    /// Per partition, an offset no greater than that of the next record appended: one past
    /// the highest offset a delivery report gave. The position of an append whose report
    /// carries no offset (see `log.rs`).
    pub(crate) floors: Vec<AtomicU64>,
}

/// A cached reader of one partition and the offset it continues at (see `read.rs`).
pub(crate) struct Reader {
    pub(crate) consumer: BaseConsumer<LogContext>,
    pub(crate) next: u64,
}

/// A [`StateLog`](actionstate_core::StateLog) on one Kafka topic.
pub struct KafkaLog {
    pub(crate) inner: Arc<Inner>,
    pub(crate) identity: LogIdentity,
}

impl fmt::Debug for KafkaLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KafkaLog").field("config", &self.inner.config).field("identity", &self.identity).finish()
    }
}

/// Runs `f` on tokio's blocking pool (librdkafka's metadata, watermark and poll calls block).
pub(crate) async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, KafkaError> {
    tokio::task::spawn_blocking(f).await.map_err(|e| KafkaError::Task(e.to_string()))
}

/// Longest single metadata request while opening; the open retries until the request timeout.
pub(crate) const OPEN_ATTEMPT: Duration = Duration::from_secs(1);

/// How often open asks again to create a topic the metadata still reports absent.
pub(crate) const CREATE_RETRY: Duration = Duration::from_millis(500);

/// Partition count of `topic`, `None` when the topic does not exist; `Err` with a description
/// when it exists but is not ready (a partition without leader).
pub(crate) fn topic_partitions(
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
    /// The configuration the log was opened with.
    pub fn config(&self) -> &KafkaConfig {
        &self.inner.config
    }

    /// The topic name.
    pub fn topic(&self) -> &str {
        &self.inner.config.topic
    }

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
            .set("linger.ms", "0")
            .set("message.timeout.ms", millis(config.delivery_timeout))
            .set("allow.auto.create.topics", "false");
        // An idempotent producer asks the cluster for a producer id as it starts; a read-only
        // log produces nothing and asks for none (its producer only fetches metadata and
        // watermarks).
        pc.set("enable.idempotence", if config.read_only { "false" } else { "true" });
        let errors = LogContext::new(&config);
        let producer: FutureProducer<LogContext> = pc.create_with_context(errors.clone()).map_err(|source| {
            KafkaError::Client { operation: "creating the producer", source, context: None, authentication_hint: false }
        })?;
        let admin: AdminClient<LogContext> = config
            .client_config()
            .create_with_context(LogContext::new(&config))
            .map_err(|source| KafkaError::Client {
                operation: "creating the admin client",
                source,
                context: None,
                authentication_hint: false,
            })?;

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
        // read-only log reads whatever the topic keeps, and changes nothing: it only says what
        // the topic's settings may already have deleted.
        if config.read_only {
            topic_config::warn_read_only(&admin, &config).await;
        } else {
            topic_config::check(&admin, &config).await?;
        }
        let identity = Self::fetch_identity(&producer, &errors, &topic, timeout).await?;
        let readers = Mutex::new((0..partitions).map(|_| Vec::new()).collect());
        let floors = (0..partitions).map(|_| AtomicU64::new(0)).collect();
        Ok(KafkaLog { inner: Arc::new(Inner { config, producer, errors, admin, readers, floors }), identity })
    }

    async fn create_topic(admin: &AdminClient<LogContext>, config: &KafkaConfig) -> Result<(), KafkaError> {
        let partitions = i32::try_from(config.partitions)
            .map_err(|_| KafkaError::Unexpected(format!("partition count {}", config.partitions)))?;
        let mut topic =
            NewTopic::new(&config.topic, partitions, TopicReplication::Fixed(config.replication.unwrap_or(-1)));
        let mut settings: BTreeMap<&str, &str> = SEGMENTS.into_iter().collect();
        settings.extend(config.topic_settings.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        // Last, so that no topic setting replaces what the crate chooses (from_url refuses them too).
        settings.extend(SETTINGS);
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

    pub(crate) async fn fetch_identity(
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
}

/// The Kafka backend as `actionstate-recovery` chooses it by a log URL's scheme. Here rather than
/// in `config.rs`: the log holds its configuration, so `config.rs` naming the log would make the
/// two files import each other.
impl BackendConfig for KafkaConfig {
    type Log = KafkaLog;
    const SCHEME: &'static str = "kafka";
    const URL_FORM: &'static str = "kafka://HOST:PORT/TOPIC";

    fn from_url(url: &str) -> Result<Self, CoreError> {
        KafkaConfig::from_url(url)
    }

    fn read_only(self) -> Self {
        KafkaConfig { read_only: true, ..self }
    }

    fn with_partitions(self, partitions: u32) -> Self {
        KafkaConfig { partitions, ..self }
    }

    fn partitions(&self) -> u32 {
        self.partitions
    }

    fn open(&self) -> impl Future<Output = Result<KafkaLog, CoreError>> + Send {
        KafkaLog::open(self.clone())
    }
}
