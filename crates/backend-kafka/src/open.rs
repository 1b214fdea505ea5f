//! Opening the log: the topic's creation, readiness, configuration check and identity.

use crate::config::KafkaConfig;
use crate::config::millis;
use crate::error::KafkaError;
use crate::error::{LogContext, with_operation};
use crate::{BACKEND, Inner, KafkaLog, blocking};
use crate::{topic_config, topic_id};
use actionstate_core::{Error as CoreError, LogIdentity};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::{Client, ClientContext};
use rdkafka::error::{KafkaError as RdError, RDKafkaErrorCode};
use rdkafka::producer::{FutureProducer, Producer};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
