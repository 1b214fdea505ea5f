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
//!   [`append`](actionstate_core::StateLog::append) awaits this record's own delivery report and returns its exact
//!   offset. When the report carries none (librdkafka's -1001, for a batch sent again that the
//!   broker called a duplicate), the append reads its partition from the highest offset
//!   reported before the record was sent, and returns where the record is; not found, it fails
//!   with the retryable `DeliveryUnconfirmed` (its outcome is unknown, as after a lost
//!   acknowledgement). Nothing on the append path flushes the producer. An append that has no report a
//!   second after [`KafkaConfig::delivery_timeout`] fails with librdkafka's retryable
//!   `MessageTimedOut` (librdkafka alone can hold a message in flight longer: to a leader that
//!   waits for replicas which died, or to a node restarting); its record may still be written,
//!   as when an acknowledgement is lost.
//! - A record whose value is a `Delete` envelope (an invalidated state) is produced as a Kafka
//!   **tombstone**: null value, so compaction drops the superseded state and, after
//!   `delete.retention.ms`, the tombstone itself. The envelope travels in the record header
//!   [`TOMBSTONE_HEADER`], and [`read`](actionstate_core::StateLog::read) returns it as the record's value, so
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
//! - [`reclaim`](actionstate_core::StateLog::reclaim) deletes records through Kafka's `DeleteRecords`
//!   ([`KafkaLog::capabilities`](actionstate_core::StateLog::capabilities) reports
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
//!   deleted by age or size, only by [`reclaim`](actionstate_core::StateLog::reclaim), which the store calls for
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
//!
//! [`StateLog`]: actionstate_core::StateLog
//! [`LogIdentity`]: actionstate_core::LogIdentity
//! [`Capabilities::RECLAIM`]: actionstate_core::Capabilities::RECLAIM
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(unsafe_code)]
#![warn(missing_docs)]

#[allow(unsafe_code, reason = "librdkafka's DescribeTopics has no safe wrapper in rdkafka")]
mod topic_id;

mod config;
mod error;
mod log;
mod open;
mod read;
mod replicas;
mod tombstone;
mod topic_config;

/// Partitions of a topic created from a URL without `partitions=N`.
pub use actionstate_core::DEFAULT_PARTITIONS;
pub use config::{KafkaConfig, Security};
pub use error::{BACKEND, KafkaError};
pub use open::KafkaLog;
pub use replicas::PartitionReplicas;
pub use tombstone::TOMBSTONE_HEADER;
