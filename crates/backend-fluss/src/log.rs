//! The [`StateLog`] contract on a Fluss log table: appends with lower-bound offsets, offsets
//! and reads.

use crate::bucket;
use crate::error::{BACKEND, FlussError, with_operation};
use crate::open::{FlussLog, fetch_identity, listed_offsets};
use crate::table::COLUMNS;
use actionstate_core::{Error as CoreError, LogIdentity, Position, ReadBatch, StateLog, WireRecord};
use fluss::error::Error as ClientError;
use fluss::row::GenericRow;
use fluss::rpc::message::OffsetSpec;
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

    async fn append(&self, record: WireRecord) -> Result<Position, CoreError> {
        let inner = &self.inner;
        let Some(writer) = inner.writer.as_ref().filter(|_| !inner.config.read_only) else {
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
        let append_error = |source: ClientError| FlussError::Append {
            table: inner.table_name.clone(),
            bucket,
            source: Box::new(source),
        };
        let acked = writer.append(&row).map_err(|e| fail(append_error(e)))?;
        let timeout = inner.config.delivery_timeout;
        let started = Instant::now();
        let outcome = tokio::time::timeout(timeout, async {
            if inner.config.flush_on_append {
                // Sends the batch now. Its result covers other appends too; this record's own
                // acknowledgement below decides.
                let _ = writer.flush().await;
            }
            acked.await
        })
        .await;
        match outcome {
            Ok(Ok(())) => {
                floor.fetch_max(lower + 1, Ordering::AcqRel);
                Ok(Position { partition: bucket, offset: lower, exact: false })
            }
            Ok(Err(e)) => Err(fail(append_error(e))),
            Err(_) => Err(fail(FlussError::DeliveryTimeout {
                table: inner.table_name.clone(),
                bucket,
                waited: started.elapsed(),
            })),
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
