//! [`MemoryLog`], a handle on the records every handle of one log shares, and making one.

use crate::error::BACKEND;
use actionstate_core::LogIdentity;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

#[derive(Debug)]
pub(crate) struct Storage {
    pub(crate) id: String,
    pub(crate) partitions: Vec<Vec<(Vec<u8>, Vec<u8>)>>,
    pub(crate) earliest: Vec<u64>,
}

/// What every handle on one log shares, like the server of its clients.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) storage: Mutex<Storage>,
    /// Appends attempted so far.
    pub(crate) appends: AtomicU64,
}

/// Numbers the logs of this process, so that no two logs (and no log and its recreation)
/// share an identity: markers of one are refused by another.
static NEXT_LOG: AtomicU64 = AtomicU64::new(0);

fn next_id() -> String {
    format!("memory-{}", NEXT_LOG.fetch_add(1, Ordering::Relaxed))
}

/// Locks shared state. A test's panic while it was held leaves nothing half-updated: every
/// change under the lock is one assignment or one push.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// An in-memory log. Clones and [`reopen`](MemoryLog::reopen)ed handles share the records,
/// like two clients of one server.
#[derive(Clone, Debug)]
pub struct MemoryLog {
    pub(crate) shared: Arc<Shared>,
    pub(crate) identity: LogIdentity,
}

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
            appends: AtomicU64::new(0),
        });
        let identity = Self::identity_of(&shared);
        MemoryLog { shared, identity }
    }

    pub(crate) fn identity_of(shared: &Shared) -> LogIdentity {
        let st = lock(&shared.storage);
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

    /// Drops every record and recreates the log with `partitions` partitions and a new
    /// identity, as when a topic is deleted and created again.
    pub fn recreate(&self, partitions: u32) {
        let mut st = lock(&self.shared.storage);
        st.id = next_id();
        st.partitions = vec![Vec::new(); partitions.max(1) as usize];
        st.earliest = vec![0; partitions.max(1) as usize];
    }
}
