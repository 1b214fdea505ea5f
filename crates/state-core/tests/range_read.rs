//! `RangeRead` against a tiny fake log that keeps or breaks the read rules of the contract.

#![allow(clippy::unwrap_used)]

use actionstate_core::{Error, LogIdentity, Position, RangeRead, ReadBatch, ReadRecord, StateLog, WireRecord};
use std::future::Future;
use std::pin::pin;
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};

/// Runs a future whose awaits are all ready at once (the fake log never waits).
fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    match f.as_mut().poll(&mut cx) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("the fake log never waits"),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Keeps the contract.
    Good,
    /// Returns an empty batch that does not advance once it reaches `at`.
    StuckAt(u64),
    /// Adds a record at `to` to every batch.
    PastTheEnd,
    /// Returns every batch in reverse order.
    Reordered,
    /// Returns twice the records asked for.
    Overfull,
    /// Returns a `next` equal to the last record's offset.
    NextBehind,
}

/// One partition of records at the given offsets (gaps allowed, as compaction leaves them).
#[derive(Debug)]
struct FakeLog {
    identity: LogIdentity,
    offsets: Vec<u64>,
    mode: Mode,
    reads: Mutex<Vec<(u64, u64, usize)>>,
}

impl FakeLog {
    fn new(offsets: impl IntoIterator<Item = u64>, mode: Mode) -> Self {
        FakeLog {
            identity: LogIdentity { backend: "fake".into(), id: "fake".into(), partitions: 1 },
            offsets: offsets.into_iter().collect(),
            mode,
            reads: Mutex::new(Vec::new()),
        }
    }

    fn record(offset: u64) -> ReadRecord {
        ReadRecord { offset, key: offset.to_le_bytes().to_vec(), value: vec![1; 3] }
    }

    fn batch(&self, from: u64, to: u64, max: usize) -> ReadBatch {
        if let Mode::StuckAt(at) = self.mode
            && from >= at
        {
            return ReadBatch { records: Vec::new(), next: from };
        }
        let take = if self.mode == Mode::Overfull { max * 2 } else { max };
        let mut records: Vec<ReadRecord> =
            self.offsets.iter().filter(|&&o| o >= from && o < to).take(take).map(|&o| Self::record(o)).collect();
        let next = match records.last() {
            Some(last) if records.len() >= max => last.offset + 1,
            _ => to,
        };
        match self.mode {
            Mode::PastTheEnd => records.push(Self::record(to)),
            Mode::Reordered => records.reverse(),
            Mode::NextBehind => {
                if let Some(last) = records.last() {
                    return ReadBatch { next: last.offset, records };
                }
            }
            _ => {}
        }
        ReadBatch { records, next }
    }
}

impl StateLog for FakeLog {
    fn identity(&self) -> &LogIdentity {
        &self.identity
    }

    async fn current_identity(&self) -> Result<LogIdentity, Error> {
        Ok(self.identity.clone())
    }

    async fn append(&self, _record: WireRecord) -> Result<Position, Error> {
        unimplemented!("the fake log is read only")
    }

    async fn earliest_offsets(&self) -> Result<Vec<u64>, Error> {
        Ok(vec![self.offsets.first().copied().unwrap_or(0)])
    }

    async fn end_offsets(&self) -> Result<Vec<u64>, Error> {
        Ok(vec![self.offsets.last().map_or(0, |o| o + 1)])
    }

    async fn read(&self, _partition: u32, from: u64, to: u64, max: usize) -> Result<ReadBatch, Error> {
        self.reads.lock().unwrap().push((from, to, max));
        Ok(self.batch(from, to, max))
    }
}

/// Reads the whole range: the offsets read, or the first error.
fn read(log: &FakeLog, from: u64, to: u64, max: usize) -> Result<Vec<u64>, Error> {
    block_on(async {
        let mut range = RangeRead::new(0, from, to, max);
        let mut offsets = Vec::new();
        while let Some(records) = range.next_batch(log).await? {
            offsets.extend(records.iter().map(|r| r.offset));
        }
        assert!(range.is_done());
        assert!(range.next_offset() >= to);
        Ok(offsets)
    })
}

#[test]
fn a_range_read_completes_in_order() {
    let log = FakeLog::new(0..10, Mode::Good);
    assert_eq!(read(&log, 0, 10, 4).unwrap(), (0..10).collect::<Vec<_>>());
    assert_eq!(read(&log, 3, 7, 100).unwrap(), vec![3, 4, 5, 6]);
    // Gaps (offsets without a record) are stepped over.
    let log = FakeLog::new([0, 1, 5, 9], Mode::Good);
    assert_eq!(read(&log, 0, 12, 2).unwrap(), vec![0, 1, 5, 9]);
    // An empty range reads nothing and asks the log for nothing.
    let log = FakeLog::new(0..10, Mode::Good);
    assert_eq!(read(&log, 5, 5, 10).unwrap(), Vec::<u64>::new());
    assert!(log.reads.lock().unwrap().is_empty());
}

#[test]
fn max_is_passed_to_every_read_and_respected() {
    let log = FakeLog::new(0..10, Mode::Good);
    read(&log, 0, 10, 3).unwrap();
    let reads = log.reads.lock().unwrap().clone();
    assert_eq!(reads, vec![(0, 10, 3), (3, 10, 3), (6, 10, 3), (9, 10, 3)]);
    // A max of 0 would never advance: it reads one record a batch.
    let log = FakeLog::new(0..3, Mode::Good);
    assert_eq!(read(&log, 0, 3, 0).unwrap(), vec![0, 1, 2]);
    assert!(log.reads.lock().unwrap().iter().all(|&(_, _, max)| max == 1));
    // A batch larger than asked for breaks the contract.
    let err = read(&FakeLog::new(0..10, Mode::Overfull), 0, 10, 3).unwrap_err();
    assert!(matches!(err, Error::BadRead { partition: 0, offset: 0, .. }), "{err}");
    assert!(err.to_string().contains("6 records returned, at most 3"), "{err}");
}

#[test]
fn an_empty_batch_that_does_not_advance_is_no_progress() {
    let log = FakeLog::new(0..10, Mode::StuckAt(4));
    let err = read(&log, 0, 10, 2).unwrap_err();
    assert!(matches!(err, Error::NoProgress { partition: 0, offset: 4, end: 10 }), "{err}");
    let text = err.to_string();
    assert!(text.contains("partition 0") && text.contains("offset 4") && text.contains("10"), "{text}");
    assert!(!err.is_retryable());
    // The range stays where it was: nothing below 4 is lost, nothing at 4 is skipped.
    let mut range = RangeRead::new(0, 0, 10, 4);
    assert_eq!(block_on(range.next_batch(&log)).unwrap().unwrap().len(), 4);
    assert!(block_on(range.next_batch(&log)).is_err());
    assert_eq!(range.next_offset(), 4);
    assert!(!range.is_done());
}

#[test]
fn a_record_outside_the_range_is_a_bad_read() {
    let err = read(&FakeLog::new(0..20, Mode::PastTheEnd), 0, 10, 100).unwrap_err();
    assert!(matches!(err, Error::BadRead { partition: 0, offset: 0, .. }), "{err}");
    assert!(err.to_string().contains("record at offset 10 outside the range [0, 10)"), "{err}");
    // Below `from` as well.
    let range = RangeRead::new(3, 5, 10, 4);
    let batch = ReadBatch { records: vec![FakeLog::record(4)], next: 6 };
    let err = range.check(&batch).unwrap_err();
    assert!(err.to_string().contains("partition 3 at offset 5: record at offset 4 outside"), "{err}");
}

#[test]
fn reordered_records_are_a_bad_read() {
    let err = read(&FakeLog::new(0..10, Mode::Reordered), 0, 10, 4).unwrap_err();
    assert!(matches!(err, Error::BadRead { partition: 0, offset: 0, .. }), "{err}");
    assert!(err.to_string().contains("record at offset 2 follows offset 3"), "{err}");
    // A record twice is out of order too.
    let range = RangeRead::new(0, 0, 10, 4);
    let batch = ReadBatch { records: vec![FakeLog::record(1), FakeLog::record(1)], next: 2 };
    assert!(matches!(range.check(&batch), Err(Error::BadRead { .. })));
}

#[test]
fn a_next_offset_at_or_below_a_returned_record_is_a_bad_read() {
    let err = read(&FakeLog::new(0..10, Mode::NextBehind), 0, 10, 4).unwrap_err();
    assert!(err.to_string().contains("next offset 3 does not pass the last record's offset 3"), "{err}");
}

#[test]
fn the_read_future_is_send() {
    fn send<T: Send>(t: T) -> T {
        t
    }
    let log = FakeLog::new(0..3, Mode::Good);
    let mut range = RangeRead::new(0, 0, 3, 10);
    let records = block_on(send(range.next_batch(&log))).unwrap().unwrap();
    assert_eq!(records.len(), 3);
}
