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
//!   offset. Nothing on the append path flushes the producer. An append that has no report a
//!   second after [`KafkaConfig::delivery_timeout`] fails with librdkafka's retryable
//!   `MessageTimedOut` (librdkafka alone can hold a message in flight longer: to a leader that
//!   waits for replicas which died, or to a node restarting); its record may still be written,
//!   as when an acknowledgement is lost.
//! - A record whose value is a `Delete` envelope (an invalidated state) is produced as a Kafka
//!   **tombstone**: null value, so compaction drops the superseded state and, after
//!   `delete.retention.ms`, the tombstone itself. The envelope travels in the record header
//!   [`TOMBSTONE_HEADER`], and [`read`](StateLog::read) returns it as the record's value, so
//!   the store reads the same bytes it appended. A null value without that header is returned
//!   as an empty value, which the decoder rejects with an error naming partition and offset.
//! - Reads assign one partition to a consumer without a consumer group's commits
//!   (`enable.auto.commit=false`, `auto.offset.reset=error`), stop at the `to` offset the caller
//!   captured, and fail naming partition and offset when no record arrives for
//!   [`KafkaConfig::read_stall_timeout`]. A broker connection that fails meanwhile (a leader
//!   that died or restarts) is waited out, as librdkafka reconnects or follows the new leader;
//!   any other consumer error fails the read.
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
mod error;
mod open;
mod read;
mod topic_config;

pub use error::KafkaError;
use error::{LogContext, read_only, with_operation};
use read::Reader;

/// Partitions of a topic created from a URL without `partitions=N`.
pub use actionstate_core::DEFAULT_PARTITIONS;
pub use config::{KafkaConfig, Security};

use actionstate_core::{
    Capabilities, Error as CoreError, LogIdentity, Position, ReadBatch, RecordKind, StateLog, WireRecord, codec,
};
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::error::{KafkaError as RdError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::util::Timeout;
use rdkafka::{Offset, TopicPartitionList};
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Backend name used in [`LogIdentity`] and [`BackendError`](actionstate_core::BackendError).
pub const BACKEND: &str = "kafka";

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

impl KafkaLog {
    /// The configuration the log was opened with.
    pub fn config(&self) -> &KafkaConfig {
        &self.inner.config
    }

    /// The topic name.
    pub fn topic(&self) -> &str {
        &self.inner.config.topic
    }

    /// Where each partition of the topic lives now, as the cluster's metadata reports it: its
    /// leader, its replicas and those in sync, by broker id, in partition order. After a
    /// broker died the metadata names it as leader until the controller notices; a
    /// partition without a leader (during an election) has `leader: None`.
    pub async fn partition_replicas(&self) -> Result<Vec<PartitionReplicas>, CoreError> {
        let inner = Arc::clone(&self.inner);
        let result = blocking(move || {
            let topic = &inner.config.topic;
            let md = inner
                .producer
                .client()
                .fetch_metadata(Some(topic), inner.config.request_timeout)
                .map_err(|e| inner.errors.fail("fetching topic metadata", e))?;
            let Some(t) = md.topics().iter().find(|t| t.name() == topic) else {
                return Err(KafkaError::TopicMissing { topic: topic.clone() });
            };
            if let Some(err) = t.error() {
                let code = RDKafkaErrorCode::from(err);
                if matches!(code, RDKafkaErrorCode::UnknownTopicOrPartition | RDKafkaErrorCode::UnknownTopic) {
                    return Err(KafkaError::TopicMissing { topic: topic.clone() });
                }
                return Err(inner.errors.fail("fetching topic metadata", RdError::MetadataFetch(code)));
            }
            let mut out = t
                .partitions()
                .iter()
                .map(|p| {
                    let partition = u32::try_from(p.id())
                        .map_err(|_| KafkaError::Unexpected(format!("partition id {} of {topic}", p.id())))?;
                    Ok(PartitionReplicas {
                        partition,
                        leader: (p.leader() >= 0).then_some(p.leader()),
                        replicas: p.replicas().to_vec(),
                        in_sync: p.isr().to_vec(),
                    })
                })
                .collect::<Result<Vec<_>, KafkaError>>()?;
            out.sort_by_key(|p| p.partition);
            Ok(out)
        })
        .await;
        result.and_then(|r| r).map_err(|e| with_operation(e, "partition_replicas"))
    }

    async fn watermarks(&self, operation: &'static str) -> Result<Vec<(u64, u64)>, CoreError> {
        let inner = Arc::clone(&self.inner);
        let partitions = self.identity.partitions;
        let result = blocking(move || {
            let client = inner.producer.client();
            let one = |p: u32| {
                // A partition whose leadership is still moving (right after the topic was
                // created, or during a leader election) answers NotLeader for a moment, and a
                // request outstanding on a broker that just died fails at once
                // (`DestroyBroker`, a refused connection): ask again until the request timeout,
                // as long as the failure may clear.
                let started = Instant::now();
                let (lo, hi) = loop {
                    match client.fetch_watermarks(&inner.config.topic, p as i32, inner.config.request_timeout) {
                        Ok(w) => break w,
                        Err(e)
                            if e.rdkafka_error_code().is_some_and(crate::error::code_is_retryable)
                                && started.elapsed() < inner.config.request_timeout =>
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
}

/// One partition's replicas, as [`KafkaLog::partition_replicas`] reports them (broker ids).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionReplicas {
    /// The partition.
    pub partition: u32,
    /// The broker leading it, if one does.
    pub leader: Option<i32>,
    /// The brokers holding a replica.
    pub replicas: Vec<i32>,
    /// The replicas in sync with the leader (the ISR), the leader's among them.
    pub in_sync: Vec<i32>,
}

/// How long after [`KafkaConfig::delivery_timeout`] an append stops waiting for its delivery
/// report. librdkafka checks its message timeouts once a second, so its own timeout reports
/// within this; but an idempotent producer does not time out a request in flight, and a
/// leader that holds one (waiting for replicas that died, with the controller quorum gone)
/// or a node restarting can keep a message past its timeout for as long as the request lasts.
const DELIVERY_SLACK: Duration = Duration::from_secs(1);

/// Partitions whose watermarks are asked at once (one thread each).
const WATERMARK_FANOUT: usize = 16;

/// The record header that carries the envelope of a tombstone (a `Delete` record produced with
/// a null value).
pub const TOMBSTONE_HEADER: &str = "actionstate-delete";

/// Whether `value` is the envelope of a `Delete` record (magic, then the kind byte at 5).
fn is_delete_envelope(value: &[u8]) -> bool {
    value.starts_with(&codec::MAGIC) && value.get(5) == Some(&(RecordKind::Delete as u8))
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
        let delivery_timeout = self.inner.config.delivery_timeout;
        let sent = self.inner.producer.send(rec, Timeout::After(delivery_timeout));
        match tokio::time::timeout(delivery_timeout + DELIVERY_SLACK, sent).await {
            Ok(Ok(delivery)) => {
                let offset = u64::try_from(delivery.offset).map_err(|_| {
                    with_operation(KafkaError::Unexpected(format!("delivered offset {}", delivery.offset)), "append")
                })?;
                Ok(Position { partition, offset, exact: true })
            }
            Ok(Err((e, _))) => Err(with_operation(self.inner.errors.fail("append", e), "append")),
            // The record may still be delivered: like an append whose acknowledgement was lost.
            Err(_) => Err(with_operation(
                self.inner.errors.fail("append", RdError::MessageProduction(RDKafkaErrorCode::MessageTimedOut)),
                "append",
            )),
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
