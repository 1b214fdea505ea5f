//! Reading a partition: one cached consumer per partition, assigned without a group, reading up
//! to the offset the caller captured.

use crate::error::KafkaError;
use crate::error::{LogContext, consumer_error_is_transient};
use crate::{Inner, KafkaLog, TOMBSTONE_HEADER};
use actionstate_core::{ReadBatch, ReadRecord};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, TopicPartitionList};
use std::time::{Duration, Instant};

/// A cached reader of one partition and the offset it continues at.
pub(crate) struct Reader {
    consumer: BaseConsumer<LogContext>,
    next: u64,
}

impl KafkaLog {
    pub(crate) fn read_blocking(
        inner: &Inner,
        partition: u32,
        from: u64,
        to: u64,
        max: usize,
    ) -> Result<ReadBatch, KafkaError> {
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
                let consumer: BaseConsumer<LogContext> =
                    cc.create_with_context(LogContext::new(&inner.config)).map_err(|source| KafkaError::Client {
                        operation: "creating a consumer",
                        source,
                        context: None,
                        authentication_hint: false,
                    })?;
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
                // A connection that failed (a leader that died or restarts): librdkafka
                // reconnects or follows the new leader by itself, and the stall timeout bounds
                // the wait. Failing here would fail a rebuild on every leader election.
                Some(Err(source)) if consumer_error_is_transient(&source) => {}
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

/// The value the store appended for a record read back: the payload, or for a tombstone the
/// envelope in its header (empty when a null value carries none).
pub(crate) fn stored_value<M: Message>(msg: &M) -> Vec<u8> {
    if let Some(payload) = msg.payload() {
        return payload.to_vec();
    }
    msg.headers()
        .and_then(|h| h.iter().find(|h| h.key == TOMBSTONE_HEADER).and_then(|h| h.value.map(<[u8]>::to_vec)))
        .unwrap_or_default()
}
