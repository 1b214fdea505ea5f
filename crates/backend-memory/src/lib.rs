//! An in-memory [`StateLog`] with fault injection, for tests of code above the backend
//! contract.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use actionstate_core::{
    BackendError, Capabilities, Error, LogIdentity, Position, ReadBatch, ReadRecord, StateLog, WireRecord,
};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

const BACKEND: &str = "memory";

#[derive(Debug)]
struct Storage {
    id: String,
    partitions: Vec<Vec<(Vec<u8>, Vec<u8>)>>,
    earliest: Vec<u64>,
}

#[derive(Debug, Default)]
struct Faults {
    /// Appends so far (counted from 1).
    appends: u64,
    fail_append: Option<u64>,
    lose_ack: Option<u64>,
    fail_reads: bool,
    fail_reclaims: bool,
    down: bool,
}

#[derive(Debug)]
struct Shared {
    storage: Mutex<Storage>,
    faults: Mutex<Faults>,
}

/// Numbers the logs of this process, so that no two logs (and no log and its recreation)
/// share an identity: markers of one are refused by another.
static NEXT_LOG: AtomicU64 = AtomicU64::new(0);

fn next_id() -> String {
    format!("memory-{}", NEXT_LOG.fetch_add(1, Ordering::Relaxed))
}

/// An in-memory log. Clones and [`reopen`](MemoryLog::reopen)ed handles share the records,
/// like two clients of one server.
#[derive(Clone, Debug)]
pub struct MemoryLog {
    shared: Arc<Shared>,
    identity: LogIdentity,
}

/// The fault an injected failure simulates.
#[derive(Debug)]
pub struct InjectedFault(pub &'static str);

impl std::fmt::Display for InjectedFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "injected fault: {}", self.0)
    }
}

impl std::error::Error for InjectedFault {}

/// A read starting at or past the end of its partition.
#[derive(Debug)]
struct PastTheEnd {
    partition: u32,
    offset: u64,
    end: u64,
}

impl std::fmt::Display for PastTheEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let PastTheEnd { partition, offset, end } = self;
        write!(f, "nothing to read at offset {offset} of partition {partition}: it ends at {end}")
    }
}

impl std::error::Error for PastTheEnd {}

impl MemoryLog {
    /// An empty log with `partitions` partitions and an identity no other log of this process
    /// has.
    pub fn new(partitions: u32) -> Self {
        let shared = Arc::new(Shared {
            storage: Mutex::new(Storage {
                id: next_id(),
                partitions: vec![Vec::new(); partitions.max(1) as usize],
                earliest: vec![0; partitions.max(1) as usize],
            }),
            faults: Mutex::new(Faults::default()),
        });
        let identity = Self::identity_of(&shared);
        MemoryLog { shared, identity }
    }

    fn identity_of(shared: &Shared) -> LogIdentity {
        let st = shared.storage.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        LogIdentity {
            backend: BACKEND.into(),
            id: st.id.clone(),
            partitions: u32::try_from(st.partitions.len()).unwrap_or(u32::MAX),
        }
    }

    /// A new handle on the same records, with the identity as it is now.
    pub fn reopen(&self) -> Self {
        MemoryLog { shared: Arc::clone(&self.shared), identity: Self::identity_of(&self.shared) }
    }

    /// The `n`-th append from now (1 = the next) fails before writing anything.
    pub fn fail_nth_append(&self, n: u64) {
        let mut f = self.shared.faults.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        f.fail_append = Some(f.appends + n);
    }

    /// The `n`-th append from now writes its record but reports an error, as when the
    /// acknowledgement is lost on the way back.
    pub fn lose_ack_of_nth_append(&self, n: u64) {
        let mut f = self.shared.faults.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        f.lose_ack = Some(f.appends + n);
    }

    /// Makes every read fail (or succeed again).
    pub fn fail_reads(&self, fail: bool) {
        self.shared.faults.lock().unwrap_or_else(std::sync::PoisonError::into_inner).fail_reads = fail;
    }

    /// Makes every reclaim fail (or succeed again).
    pub fn fail_reclaims(&self, fail: bool) {
        self.shared.faults.lock().unwrap_or_else(std::sync::PoisonError::into_inner).fail_reclaims = fail;
    }

    /// Makes the backend unreachable: every operation fails with a retryable error.
    pub fn set_down(&self, down: bool) {
        self.shared.faults.lock().unwrap_or_else(std::sync::PoisonError::into_inner).down = down;
    }

    /// Drops every record and recreates the log with `partitions` partitions and a new
    /// identity, as when a topic is deleted and created again.
    pub fn recreate(&self, partitions: u32) {
        let mut st = self.shared.storage.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        st.id = next_id();
        st.partitions = vec![Vec::new(); partitions.max(1) as usize];
        st.earliest = vec![0; partitions.max(1) as usize];
    }

    /// Deletes the records of `partition` below `offset` (retention), advancing its earliest
    /// offset.
    pub fn truncate_before(&self, partition: u32, offset: u64) {
        let mut st = self.shared.storage.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(e) = st.earliest.get_mut(partition as usize) {
            *e = (*e).max(offset);
        }
    }

    /// Replaces the value bytes of one stored record (to simulate corruption).
    pub fn corrupt(&self, partition: u32, offset: u64, value: Vec<u8>) {
        let mut st = self.shared.storage.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(r) = st.partitions.get_mut(partition as usize).and_then(|p| p.get_mut(offset as usize)) {
            r.1 = value;
        }
    }

    /// Number of appends attempted so far.
    pub fn appends(&self) -> u64 {
        self.shared.faults.lock().unwrap_or_else(std::sync::PoisonError::into_inner).appends
    }

    fn check_down(&self, operation: &'static str) -> Result<(), Error> {
        if self.shared.faults.lock().unwrap_or_else(std::sync::PoisonError::into_inner).down {
            return Err(BackendError::retryable(BACKEND, operation, InjectedFault("backend unreachable")).into());
        }
        Ok(())
    }
}

impl StateLog for MemoryLog {
    fn identity(&self) -> &LogIdentity {
        &self.identity
    }

    async fn current_identity(&self) -> Result<LogIdentity, Error> {
        self.check_down("metadata")?;
        Ok(Self::identity_of(&self.shared))
    }

    async fn append(&self, record: WireRecord) -> Result<Position, Error> {
        self.check_down("append")?;
        let (fail, lose) = {
            let mut f = self.shared.faults.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            f.appends += 1;
            (f.fail_append == Some(f.appends), f.lose_ack == Some(f.appends))
        };
        if fail {
            return Err(BackendError::retryable(BACKEND, "append", InjectedFault("append failed")).into());
        }
        let mut st = self.shared.storage.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if st.id != self.identity.id {
            return Err(Error::LogChanged { expected: self.identity.to_string(), found: st.id.clone() });
        }
        let partition = record.key_id.partition(self.identity.partitions);
        let p = &mut st.partitions[partition as usize];
        p.push((record.key, record.value));
        let offset = p.len() as u64 - 1;
        if lose {
            return Err(BackendError::retryable(BACKEND, "append", InjectedFault("acknowledgement lost")).into());
        }
        Ok(Position { partition, offset, exact: true })
    }

    async fn earliest_offsets(&self) -> Result<Vec<u64>, Error> {
        self.check_down("list offsets")?;
        Ok(self.shared.storage.lock().unwrap_or_else(std::sync::PoisonError::into_inner).earliest.clone())
    }

    async fn end_offsets(&self) -> Result<Vec<u64>, Error> {
        self.check_down("list offsets")?;
        Ok(self
            .shared
            .storage
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .partitions
            .iter()
            .map(|p| p.len() as u64)
            .collect())
    }

    async fn read(&self, partition: u32, from: u64, to: u64, max: usize) -> Result<ReadBatch, Error> {
        self.check_down("read")?;
        if self.shared.faults.lock().unwrap_or_else(std::sync::PoisonError::into_inner).fail_reads {
            return Err(BackendError::retryable(BACKEND, "read", InjectedFault("read failed")).into());
        }
        let st = self.shared.storage.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let partitions = u32::try_from(st.partitions.len()).unwrap_or(u32::MAX);
        let p = st.partitions.get(partition as usize).ok_or_else(|| Error::UnknownPartition {
            log: self.identity.to_string(),
            partition,
            partitions,
        })?;
        let earliest = st.earliest[partition as usize];
        if from < earliest {
            // Never skip silently: the records asked for are gone.
            return Err(Error::DataLoss { partition, offset: from, earliest });
        }
        if from < to && max > 0 && from >= p.len() as u64 {
            // Nothing to fetch: an empty batch that does not advance would break the contract.
            let end = p.len() as u64;
            return Err(BackendError::retryable(BACKEND, "read", PastTheEnd { partition, offset: from, end }).into());
        }
        let start = from;
        let stop = to.min(p.len() as u64).min(start.saturating_add(max as u64));
        let records = (start..stop)
            .map(|offset| {
                let (key, value) = &p[offset as usize];
                ReadRecord { offset, key: key.clone(), value: value.clone() }
            })
            .collect();
        Ok(ReadBatch { records, next: stop.max(start) })
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::RECLAIM
    }

    async fn reclaim(&self, before: &[u64]) -> Result<Vec<u64>, Error> {
        self.check_down("reclaim")?;
        if self.shared.faults.lock().unwrap_or_else(std::sync::PoisonError::into_inner).fail_reclaims {
            return Err(BackendError::retryable(BACKEND, "reclaim", InjectedFault("reclaim failed")).into());
        }
        let mut st = self.shared.storage.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let partitions = u32::try_from(st.partitions.len()).unwrap_or(u32::MAX);
        if before.len() != st.partitions.len() {
            return Err(Error::UnknownPartition {
                log: self.identity.to_string(),
                partition: u32::try_from(before.len().min(st.partitions.len())).unwrap_or(u32::MAX),
                partitions,
            });
        }
        for (p, &offset) in (0u32..).zip(before) {
            let end = st.partitions[p as usize].len() as u64;
            if offset > end {
                return Err(Error::OffsetBeyondEnd { partition: p, offset, end });
            }
        }
        let Storage { partitions: records, earliest, .. } = &mut *st;
        for ((records, earliest), &offset) in records.iter_mut().zip(earliest.iter_mut()).zip(before) {
            // Offsets stay dense: the reclaimed records keep their slots, emptied.
            for slot in records.iter_mut().take(usize::try_from(offset).unwrap_or(usize::MAX)).skip(*earliest as usize)
            {
                *slot = (Vec::new(), Vec::new());
            }
            *earliest = (*earliest).max(offset);
        }
        Ok(st.earliest.clone())
    }
}
