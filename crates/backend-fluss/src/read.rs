//! Reading a bucket: one cached scanner per bucket, reading up to the offset the caller
//! captured.

use crate::error::FlussError;
use crate::open::request;
use crate::{FlussLog, POLL};
use actionstate_core::{ReadBatch, ReadRecord};
use fluss::client::{FlussTable, LogScanner};
use fluss::row::DataGetters;
use std::collections::VecDeque;
use std::time::Instant;

/// A cached scanner of one bucket, the offset it continues at, and records it polled past
/// the end of the last read.
pub(crate) struct Reader {
    scanner: LogScanner,
    next: u64,
    pending: VecDeque<ReadRecord>,
}

impl FlussLog {
    pub(crate) fn new_reader(&self, bucket: u32) -> Result<LogScanner, FlussError> {
        let inner = &self.inner;
        let table = FlussTable::new(&inner.connection, inner.connection.get_metadata(), inner.info.clone());
        table.new_scan().create_log_scanner().map_err(|source| FlussError::Read {
            table: inner.table_name.clone(),
            bucket,
            offset: 0,
            source: Box::new(source),
        })
    }

    pub(crate) async fn read_inner(
        &self,
        bucket: u32,
        from: u64,
        to: u64,
        max: usize,
    ) -> Result<ReadBatch, FlussError> {
        let inner = &self.inner;
        let table = &inner.table_name;
        let cached = inner.readers.lock().ok().and_then(|mut g| g.get_mut(bucket as usize).and_then(Option::take));
        let mut reader = match cached {
            Some(r) if r.next == from => r,
            _ => {
                let scanner = self.new_reader(bucket)?;
                let (b, offset) = (
                    i32::try_from(bucket).map_err(|_| FlussError::Unexpected(format!("bucket {bucket}")))?,
                    i64::try_from(from).map_err(|_| FlussError::Unexpected(format!("offset {from}")))?,
                );
                request(&inner.config, "subscribing a scanner", scanner.subscribe(b, offset)).await.map_err(
                    |e| match e {
                        FlussError::Client { source, .. } => {
                            FlussError::Read { table: table.clone(), bucket, offset: from, source }
                        }
                        other => other,
                    },
                )?;
                Reader { scanner, next: from, pending: VecDeque::new() }
            }
        };
        let stall = inner.config.read_stall_timeout;
        let mut records = Vec::new();
        let mut next = from;
        let mut last_progress = Instant::now();
        loop {
            while records.len() < max && next < to {
                let Some(r) = reader.pending.pop_front() else { break };
                if r.offset < next {
                    continue;
                }
                if r.offset >= to {
                    reader.pending.push_front(r);
                    next = to;
                    break;
                }
                next = r.offset + 1;
                records.push(r);
                last_progress = Instant::now();
            }
            if records.len() >= max || next >= to {
                break;
            }
            let waited = last_progress.elapsed();
            if waited >= stall {
                if !records.is_empty() {
                    break;
                }
                // The scanner is dropped: the next read starts afresh.
                return Err(FlussError::ReadStalled { table: table.clone(), bucket, offset: next, to, waited });
            }
            let wait = (stall - waited).min(POLL);
            let polled =
                match tokio::time::timeout(wait + inner.config.request_timeout, reader.scanner.poll(wait)).await {
                    Ok(Ok(p)) => p,
                    Ok(Err(source)) => {
                        return Err(FlussError::Read {
                            table: table.clone(),
                            bucket,
                            offset: next,
                            source: Box::new(source),
                        });
                    }
                    Err(_) => continue,
                };
            for (tb, recs) in polled.records_by_buckets() {
                if u32::try_from(tb.bucket_id()).ok() != Some(bucket) {
                    continue;
                }
                for r in recs {
                    let offset = u64::try_from(r.offset()).map_err(|_| {
                        FlussError::Unexpected(format!("record offset {} in bucket {bucket}", r.offset()))
                    })?;
                    let row = r.row();
                    let field = |pos: usize| {
                        row.get_bytes(pos).map(<[u8]>::to_vec).map_err(|source| FlussError::Read {
                            table: table.clone(),
                            bucket,
                            offset,
                            source: Box::new(source),
                        })
                    };
                    reader.pending.push_back(ReadRecord { offset, key: field(0)?, value: field(1)? });
                }
            }
        }
        if next < to {
            reader.next = next;
            if let Ok(mut g) = inner.readers.lock()
                && let Some(slot) = g.get_mut(bucket as usize)
                && slot.is_none()
            {
                *slot = Some(reader);
            }
        }
        // A finished range drops its scanner, so an idle cached scanner never holds a bucket.
        Ok(ReadBatch { records, next })
    }
}
