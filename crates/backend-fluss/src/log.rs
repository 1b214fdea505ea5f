//! The [`StateLog`] contract on a Fluss log table: appends with lower-bound offsets, offsets
//! and reads.

use crate::bucket;
use crate::error::{BACKEND, FlussError, with_operation, writer_dead};
use crate::open::{FlussLog, fetch_identity, listed_offsets};
use crate::table::COLUMNS;
use crate::writer::{Generation, Recovery};
use actionstate_core::{Error as CoreError, LogIdentity, Position, ReadBatch, StateLog, WireRecord};
use fluss::error::Error as ClientError;
use fluss::row::GenericRow;
use fluss::rpc::message::OffsetSpec;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

impl FlussLog {
    /// Per bucket, the offsets of `spec` (earliest or latest). Latest offsets raise the
    /// append floors.
    async fn list_offsets(&self, operation: &'static str, spec: OffsetSpec) -> Result<Vec<u64>, FlussError> {
        let inner = &self.inner;
        let latest = matches!(spec, OffsetSpec::Latest);
        let out = listed_offsets(&inner.config, &inner.admin, &inner.path, operation, spec).await?;
        if latest {
            for (offset, floor) in out.iter().zip(&inner.floors) {
                floor.fetch_max(*offset, Ordering::AcqRel);
            }
        }
        Ok(out)
    }
}

impl StateLog for FlussLog {
    fn identity(&self) -> &LogIdentity {
        &self.identity
    }

    async fn current_identity(&self) -> Result<LogIdentity, CoreError> {
        fetch_identity(&self.inner.config, &self.inner.admin, &self.inner.path)
            .await
            .map_err(|e| with_operation(e, "current_identity"))
    }

    // Long: one append read top to bottom: the record, its turns on the current writer, the wait for its acknowledgement with the stall checks, and the one place a failed turn becomes a retry.
    async fn append(&self, record: WireRecord) -> Result<Position, CoreError> {
        let inner = &self.inner;
        let Some(appender) = inner.writer.as_ref().filter(|_| !inner.config.read_only) else {
            return Err(CoreError::Unsupported {
                backend: format!("{BACKEND} (opened read-only)"),
                operation: "append",
            });
        };
        let fail = |e: FlussError| with_operation(e, "append");
        let buckets = inner.config.buckets;
        let bucket = record.key_id.partition(buckets);
        let column = bucket::bucket_key(&record.key_id, buckets).ok_or_else(|| {
            fail(FlussError::Unexpected(format!("no bucket key found for bucket {bucket} of {buckets}")))
        })?;
        let floor = &inner.floors[bucket as usize];
        // Taken before the record is sent: a lower bound of its offset.
        let lower = floor.load(Ordering::Acquire);
        let mut row = GenericRow::new(COLUMNS.len());
        row.set_field(0, record.key.as_slice());
        row.set_field(1, record.value.as_slice());
        row.set_field(2, &column[..]);
        let started = Instant::now();
        let deadline = started + inner.config.delivery_timeout;
        let timed_out =
            || FlussError::DeliveryTimeout { table: inner.table_name.clone(), bucket, waited: started.elapsed() };
        // Bounded by the append's deadline: a recovery that does not finish in time waits.
        let recover = |generation: Arc<Generation>, sent_to: Option<i32>| async move {
            let recovering = appender.recover(&inner.config, &inner.path, &inner.info, &generation, bucket, sent_to);
            tokio::time::timeout(deadline.saturating_duration_since(Instant::now()), recovering)
                .await
                .unwrap_or(Ok(Recovery::Wait))
        };
        let append_error = |source: ClientError| FlussError::Append {
            table: inner.table_name.clone(),
            bucket,
            source: Box::new(source),
        };
        // A writer closed for good: replaced within the deadline, or the append fails, retryably.
        let replace_dead = |generation: Arc<Generation>, e: ClientError| async move {
            let replacing = appender.replace_dead(&inner.config, &inner.path, &inner.info, &generation);
            match tokio::time::timeout(deadline.saturating_duration_since(Instant::now()), replacing).await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(reopen)) => {
                    tracing::debug!(table = %inner.table_name, bucket, error = %reopen, "no new writer for a closed one");
                    Err(fail(append_error(e)))
                }
                Err(_) => Err(fail(timed_out())),
            }
        };
        // Each turn hands the record to the current writer; a turn ends when that writer is
        // replaced after its bucket's leader moved, or after it was closed (the `writer` module).
        loop {
            if Instant::now() >= deadline {
                return Err(fail(timed_out()));
            }
            let generation = appender.current();
            let sent_to = generation.leader_of(bucket);
            let acked = match generation.writer.append(&row) {
                Ok(acked) => acked,
                Err(e) if writer_dead(&e) => {
                    replace_dead(generation, e).await?;
                    continue;
                }
                Err(e) => return Err(fail(append_error(e))),
            };
            if inner.config.flush_on_append {
                generation.flush_in_background();
            }
            tokio::pin!(acked);
            let error = loop {
                let now = Instant::now();
                if now >= deadline {
                    return Err(fail(timed_out()));
                }
                let wait = (deadline - now).min(inner.config.stall_timeout);
                let waited = tokio::select! {
                    biased;
                    waited = tokio::time::timeout(wait, &mut acked) => waited,
                    // Replaced and stopped (another append's recovery): it never sends this.
                    () = generation.stopped() => break None,
                };
                match waited {
                    Ok(Ok(())) => {
                        floor.fetch_max(lower + 1, Ordering::AcqRel);
                        return Ok(Position { partition: bucket, offset: lower, exact: false });
                    }
                    Ok(Err(e)) => break Some(e),
                    Err(_) if Instant::now() >= deadline => return Err(fail(timed_out())),
                    // Stalled: the writer may be stuck on a leader that is gone.
                    Err(_) => {
                        match recover(Arc::clone(&generation), sent_to).await {
                            Ok(Recovery::Retry) => break None,
                            Ok(Recovery::Wait) => continue,
                            // No new writer to check with (the cluster does not answer):
                            // the record may still be acknowledged.
                            Err(e) => {
                                tracing::debug!(table = %inner.table_name, bucket, error = %e, "no writer to recover with");
                                continue;
                            }
                        }
                    }
                }
            };
            match error {
                None => {}
                // Closed for good (its writer ID was refused): a new writer, or a retryable error.
                Some(e) if writer_dead(&e) => replace_dead(generation, e).await?,
                // Failed: append again only on a replaced writer. A writer that was closed
                // because another bucket's leader moved fails what it held, retriable or not.
                Some(e) => {
                    let replaced = appender.current().number != generation.number;
                    let recovery = if Instant::now() < deadline && (replaced || e.is_retriable()) {
                        recover(Arc::clone(&generation), sent_to).await.unwrap_or(Recovery::Wait)
                    } else {
                        Recovery::Wait
                    };
                    if recovery != Recovery::Retry {
                        return Err(fail(append_error(e)));
                    }
                }
            }
            tracing::debug!(table = %inner.table_name, bucket, "appending again on the replaced writer");
        }
    }

    async fn earliest_offsets(&self) -> Result<Vec<u64>, CoreError> {
        self.list_offsets("earliest_offsets", OffsetSpec::Earliest)
            .await
            .map_err(|e| with_operation(e, "earliest_offsets"))
    }

    async fn end_offsets(&self) -> Result<Vec<u64>, CoreError> {
        self.list_offsets("end_offsets", OffsetSpec::Latest).await.map_err(|e| with_operation(e, "end_offsets"))
    }

    /// Both lists asked at once (Fluss answers each offset spec in a request of its own).
    async fn offsets(&self) -> Result<(Vec<u64>, Vec<u64>), CoreError> {
        let (earliest, end) = tokio::join!(self.earliest_offsets(), self.end_offsets());
        Ok((earliest?, end?))
    }

    async fn read(&self, partition: u32, from: u64, to: u64, max: usize) -> Result<ReadBatch, CoreError> {
        if partition >= self.identity.partitions {
            return Err(with_operation(
                FlussError::NoSuchBucket {
                    table: self.inner.table_name.clone(),
                    bucket: partition,
                    buckets: self.identity.partitions,
                },
                "read",
            ));
        }
        if from >= to || max == 0 {
            return Ok(ReadBatch { records: Vec::new(), next: from });
        }
        self.read_inner(partition, from, to, max).await.map_err(|e| with_operation(e, "read"))
    }
}
