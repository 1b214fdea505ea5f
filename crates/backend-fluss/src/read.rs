//! Reading a bucket: one cached scanner per bucket, reading up to the offset the caller
//! captured.

use crate::client::request;
use crate::error::FlussError;
use crate::open::{FlussLog, Reader};
use actionstate_core::{ReadBatch, ReadRecord};
use fluss::client::{FlussTable, LogScanner};
use fluss::row::DataGetters;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Longest single poll of a scanner; a read polls again until its stall timeout.
const POLL: Duration = Duration::from_millis(200);

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

    /// Reads `bucket` from `from` up to `to`, at most `max` records. A reader that failed or
    /// stalled is dropped; the next read starts afresh.
    pub(crate) async fn read_inner(
        &self,
        bucket: u32,
        from: u64,
        to: u64,
        max: usize,
    ) -> Result<ReadBatch, FlussError> {
        let inner = &self.inner;
        let table = &inner.table_name;
        let mut reader = self.take_reader(bucket, from).await?;
        let stall = inner.config.read_stall_timeout;
        let mut records = Vec::new();
        let mut next = from;
        let mut last_progress = Instant::now();
        loop {
            if reader.take_pending(&mut records, &mut next, to, max) {
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
            reader.poll_into(table, bucket, next, wait, inner.config.request_timeout).await?;
        }
        self.put_back(bucket, reader, next, to);
        Ok(ReadBatch { records, next })
    }

    /// The bucket's cached scanner if it continues at `from`, or a new one subscribed there.
    async fn take_reader(&self, bucket: u32, from: u64) -> Result<Reader, FlussError> {
        let inner = &self.inner;
        let cached = inner.readers.lock().ok().and_then(|mut g| g.get_mut(bucket as usize).and_then(Option::take));
        if let Some(r) = cached.filter(|r| r.next == from) {
            return Ok(r);
        }
        let scanner = self.new_reader(bucket)?;
        let (b, offset) = (
            i32::try_from(bucket).map_err(|_| FlussError::Unexpected(format!("bucket {bucket}")))?,
            i64::try_from(from).map_err(|_| FlussError::Unexpected(format!("offset {from}")))?,
        );
        request(&inner.config, "subscribing a scanner", scanner.subscribe(b, offset)).await.map_err(|e| match e {
            FlussError::Client { source, .. } => {
                FlussError::Read { table: inner.table_name.clone(), bucket, offset: from, source }
            }
            other => other,
        })?;
        Ok(Reader { scanner, next: from, pending: VecDeque::new() })
    }

    /// Keeps `reader` in the cache for the bucket's next read, which continues at `next`. A
    /// finished range drops its scanner, so an idle cached scanner never holds a bucket.
    fn put_back(&self, bucket: u32, mut reader: Reader, next: u64, to: u64) {
        if next < to {
            reader.next = next;
            if let Ok(mut g) = self.inner.readers.lock()
                && let Some(slot) = g.get_mut(bucket as usize)
                && slot.is_none()
            {
                *slot = Some(reader);
            }
        }
    }
}

impl Reader {
    /// Moves the records polled earlier from `next` on into `records`, up to `max` of them and
    /// below `to`, advancing `next`; whether it moved any.
    fn take_pending(&mut self, records: &mut Vec<ReadRecord>, next: &mut u64, to: u64, max: usize) -> bool {
        let mut progressed = false;
        while records.len() < max && *next < to {
            let Some(r) = self.pending.pop_front() else { break };
            if r.offset < *next {
                continue;
            }
            if r.offset >= to {
                self.pending.push_front(r);
                *next = to;
                break;
            }
            *next = r.offset + 1;
            records.push(r);
            progressed = true;
        }
        progressed
    }

    /// Polls the scanner for up to `wait` (giving up after `wait` and the request timeout more)
    /// and queues the records of `bucket` it returns.
    async fn poll_into(
        &mut self,
        table: &str,
        bucket: u32,
        next: u64,
        wait: Duration,
        request_timeout: Duration,
    ) -> Result<(), FlussError> {
        let polled = match tokio::time::timeout(wait + request_timeout, self.scanner.poll(wait)).await {
            Ok(Ok(p)) => p,
            Ok(Err(source)) => {
                return Err(FlussError::Read {
                    table: table.to_owned(),
                    bucket,
                    offset: next,
                    source: Box::new(source),
                });
            }
            // The caller's loop checks the stall and polls again.
            Err(_) => return Ok(()),
        };
        for (tb, recs) in polled.records_by_buckets() {
            if u32::try_from(tb.bucket_id()).ok() != Some(bucket) {
                continue;
            }
            for r in recs {
                let offset = u64::try_from(r.offset())
                    .map_err(|_| FlussError::Unexpected(format!("record offset {} in bucket {bucket}", r.offset())))?;
                let row = r.row();
                let field = |pos: usize| {
                    row.get_bytes(pos).map(<[u8]>::to_vec).map_err(|source| FlussError::Read {
                        table: table.to_owned(),
                        bucket,
                        offset,
                        source: Box::new(source),
                    })
                };
                self.pending.push_back(ReadRecord { offset, key: field(0)?, value: field(1)? });
            }
        }
        Ok(())
    }
}
