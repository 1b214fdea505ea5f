//! The [`StateLog`] contract on a Kafka topic: appends, watermarks, reclaim and reads.

use crate::error::{KafkaError, code_is_retryable, read_only, with_operation};
use crate::open::{KafkaLog, blocking};
use crate::tombstone::{TOMBSTONE_HEADER, is_delete_envelope};
use actionstate_core::{Capabilities, Error as CoreError, LogIdentity, Position, ReadBatch, StateLog, WireRecord};
use rdkafka::admin::AdminOptions;
use rdkafka::error::{KafkaError as RdError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureRecord, Producer};
use rdkafka::util::Timeout;
use rdkafka::{Offset, TopicPartitionList};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How long after [`KafkaConfig::delivery_timeout`](crate::KafkaConfig::delivery_timeout) an
/// append stops waiting for its delivery report. librdkafka checks its message timeouts once a
/// second, so its own timeout reports within this; but an idempotent producer does not time out
/// a request in flight, and a leader that holds one (waiting for replicas that died, with the
/// controller quorum gone) or a node restarting can keep a message past its timeout for as long
/// as the request lasts.
const DELIVERY_SLACK: Duration = Duration::from_secs(1);

/// Partitions whose watermarks are asked at once (one thread each).
const WATERMARK_FANOUT: usize = 16;

impl KafkaLog {
    /// Where `record`, delivered without an offset, is: read from `lower` (an offset it is at
    /// or after) to its partition's end, the first record with its key and bytes. Not there:
    /// [`KafkaError::DeliveryUnconfirmed`], retryable, since the append's outcome is then
    /// unknown (librdkafka marks such a batch delivered, trusting the broker's duplicate check).
    async fn locate(&self, partition: u32, lower: u64, record: &WireRecord) -> Result<Position, CoreError> {
        let ends = self.end_offsets().await?;
        let end = ends.get(partition as usize).copied().unwrap_or(lower);
        let mut from = lower;
        while from < end {
            let batch = self.read(partition, from, end, 1024).await?;
            if let Some(found) = batch.records.iter().find(|r| r.key == record.key && r.value == record.value) {
                return Ok(Position { partition, offset: found.offset, exact: true });
            }
            if batch.next <= from {
                break;
            }
            from = batch.next;
        }
        tracing::warn!(topic = %self.inner.config.topic, partition, from = lower, end, "a record delivered without an offset is not in its partition");
        let topic = self.inner.config.topic.clone();
        Err(with_operation(KafkaError::DeliveryUnconfirmed { topic, partition, from: lower, end }, "append"))
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
                            if e.rdkafka_error_code().is_some_and(code_is_retryable)
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
        let floor = self.inner.floors.get(partition as usize).ok_or_else(|| {
            with_operation(
                KafkaError::Unexpected(format!("partition {partition} of {}", self.identity.partitions)),
                "append",
            )
        })?;
        // Taken before the record is sent: what was delivered before it lies before it (the
        // idempotent producer keeps a partition's records in the order they were sent).
        let lower = floor.load(Ordering::Acquire);
        let sent = self.inner.producer.send(rec, Timeout::After(delivery_timeout));
        match tokio::time::timeout(delivery_timeout + DELIVERY_SLACK, sent).await {
            Ok(Ok(delivery)) => Ok(match u64::try_from(delivery.offset) {
                Ok(offset) => {
                    floor.fetch_max(offset + 1, Ordering::AcqRel);
                    Position { partition, offset, exact: true }
                }
                // Delivered without an offset: librdkafka reports -1001 for a batch the broker
                // answered DUPLICATE_SEQUENCE_NUMBER (sent again after a timeout, written by
                // the first send). Confirmed where it is, or the outcome is unknown.
                Err(_) => {
                    let position = self.locate(partition, lower, &record).await?;
                    floor.fetch_max(position.offset + 1, Ordering::AcqRel);
                    position
                }
            }),
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

    /// One request per partition for both (a watermark request answers both).
    async fn offsets(&self) -> Result<(Vec<u64>, Vec<u64>), CoreError> {
        Ok(self.watermarks("offsets").await?.into_iter().unzip())
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
