//! The clock durable waits are timed by: wall time in milliseconds since the Unix epoch, since a
//! wait's start and deadline are recorded and outlive the process; or a manual clock that tests
//! and the simulator move by hand.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// What a store reads the time from when a wait begins and when deadlines are checked
/// ([`StoreConfig::clock`](crate::StoreConfig::clock)).
#[derive(Clone, Debug, Default)]
pub enum Clock {
    /// The system's wall clock.
    #[default]
    System,
    /// A clock that moves only when told to ([`Clock::manual`], [`Clock::advance`]).
    Manual(Arc<AtomicU64>),
}

impl Clock {
    /// A manual clock that reads `start_ms` until advanced.
    pub fn manual(start_ms: u64) -> Self {
        Clock::Manual(Arc::new(AtomicU64::new(start_ms)))
    }

    /// Moves a manual clock (and every clone of it) forward by `ms`; the system clock moves by
    /// itself, so this does nothing to it.
    pub fn advance(&self, ms: u64) {
        if let Clock::Manual(now) = self {
            now.fetch_add(ms, Ordering::Relaxed);
        }
    }

    /// Now, in milliseconds since the Unix epoch (0 before it).
    pub fn now_ms(&self) -> u64 {
        match self {
            Clock::System => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            Clock::Manual(now) => now.load(Ordering::Relaxed),
        }
    }
}
