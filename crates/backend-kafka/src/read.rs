//! Reading a partition: consumers assigned without a group, reading up to the offset the caller
//! captured, kept per partition for the next reads (a few of them: stores that share a log read
//! partition 0 at once, and a consumer made for each read would cost a connection each time).

use crate::config::KafkaConfig;
use crate::error::{KafkaError, LogContext, consumer_error_is_transient};
use crate::open::{Inner, KafkaLog, Reader};
use crate::tombstone::stored_value;
use actionstate_core::{ReadBatch, ReadRecord};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use std::time::{Duration, Instant};

impl KafkaLog {
    /// Reads `partition` from `from` up to `to`, at most `max` records, on the calling thread
    /// (librdkafka's polls block). A reader that failed is dropped; the next read starts afresh.
    pub(crate) fn read_blocking(
        inner: &Inner,
        partition: u32,
        from: u64,
        to: u64,
        max: usize,
    ) -> Result<ReadBatch, KafkaError> {
        let mut reader = take_reader(inner, partition, from)?;
        reader.seek(&inner.config.topic, partition, from)?;
        let (records, next) = reader.fill(&inner.config, partition, from, to, max)?;
        put_back(inner, partition, reader, next, to);
        Ok(ReadBatch { records, next })
    }
}

/// Consumers kept per partition for later reads.
const READERS_PER_PARTITION: usize = 4;

/// A cached reader of the partition, taken out of the cache (one that continues at `from` if
/// there is one), or a new one.
fn take_reader(inner: &Inner, partition: u32, from: u64) -> Result<Reader, KafkaError> {
    let cached = inner.readers.lock().ok().and_then(|mut g| {
        let pool = g.get_mut(partition as usize)?;
        let at = pool.iter().position(|r| r.next == from).or_else(|| pool.len().checked_sub(1))?;
        Some(pool.swap_remove(at))
    });
    if let Some(reader) = cached {
        return Ok(reader);
    }
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
    Ok(Reader { consumer, next: u64::MAX })
}

/// Keeps `reader` in the cache for the partition's next read, which continues at `next`.
fn put_back(inner: &Inner, partition: u32, mut reader: Reader, next: u64, to: u64) {
    if next >= to {
        // The range is read: stop the consumer fetching ahead while it sits in the cache.
        let _ = reader.consumer.unassign();
        reader.next = u64::MAX;
    } else {
        reader.next = next;
    }
    if let Ok(mut g) = inner.readers.lock()
        && let Some(pool) = g.get_mut(partition as usize)
        && pool.len() < READERS_PER_PARTITION
    {
        pool.push(reader);
    }
}

impl Reader {
    /// Assigns the partition at `from`, unless the reader continues there already.
    fn seek(&mut self, topic: &str, partition: u32, from: u64) -> Result<(), KafkaError> {
        if self.next == from {
            return Ok(());
        }
        let offset = i64::try_from(from).map_err(|_| KafkaError::Unexpected(format!("offset {from}")))?;
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, partition as i32, Offset::Offset(offset))
            .map_err(|source| KafkaError::Read { topic: topic.to_owned(), partition, offset: from, source })?;
        self.consumer.assign(&tpl).map_err(|source| KafkaError::Read {
            topic: topic.to_owned(),
            partition,
            offset: from,
            source,
        })?;
        self.next = from;
        Ok(())
    }

    /// Polls the records from `from` until there are `max`, the offset `to` is reached, or no
    /// record arrives for the read stall timeout; returns them and the offset after them.
    fn fill(
        &mut self,
        config: &KafkaConfig,
        partition: u32,
        from: u64,
        to: u64,
        max: usize,
    ) -> Result<(Vec<ReadRecord>, u64), KafkaError> {
        let topic = &config.topic;
        // Sized for the whole batch at once: growing it by doubling touched (and had the kernel
        // zero) twice the memory per batch, a tenth of a rebuild's time in profiles.
        let mut records = Vec::with_capacity(max.min(usize::try_from(to.saturating_sub(from)).unwrap_or(max)));
        let mut stall = Stall::new(config.read_stall_timeout);
        let mut next = from;
        while records.len() < max && next < to {
            let polled = match self.consumer.poll(Duration::ZERO) {
                Some(polled) => Some(polled),
                None => match stall.remaining() {
                    Ok(left) => self.consumer.poll(left),
                    // Compaction never removes the last record below an end offset the broker
                    // reported (it sits in the active segment, or a newer record of its key
                    // follows at or past `to`), so a stall means `to` lies beyond the end or the
                    // broker is gone. Records already read are returned; the next call reports
                    // the stall.
                    Err(_) if !records.is_empty() => break,
                    Err(waited) => {
                        return Err(KafkaError::ReadStalled {
                            topic: topic.clone(),
                            partition,
                            offset: next,
                            to,
                            waited,
                        });
                    }
                },
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
                    stall.progressed();
                }
            }
        }
        Ok((records, next))
    }
}

/// How long a read has waited for a record, against the read stall timeout.
struct Stall {
    limit: Duration,
    last_progress: Instant,
    /// Whether records arrived since `last_progress` was taken. Queued records are taken
    /// without waiting and without reading the clock (reading it for every record cost a few
    /// percent of a rebuild); only an empty queue reads the clock and waits.
    progressed: bool,
}

impl Stall {
    fn new(limit: Duration) -> Self {
        Stall { limit, last_progress: Instant::now(), progressed: false }
    }

    /// A record arrived.
    fn progressed(&mut self) {
        self.progressed = true;
    }

    /// How much longer to wait for a record, or `Err` with the time waited once that reached
    /// the limit.
    fn remaining(&mut self) -> Result<Duration, Duration> {
        if self.progressed {
            self.last_progress = Instant::now();
            self.progressed = false;
        }
        let waited = self.last_progress.elapsed();
        if waited >= self.limit { Err(waited) } else { Ok(self.limit - waited) }
    }
}
