//! Crash injection: a [`StateLog`] wrapper that fails chosen appends, before or after they
//! are written, and records that the process "crashed".

use actionstate_core::{BackendError, Error, LogIdentity, Position, ReadBatch, StateLog, WireRecord};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Where an injected crash strikes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum CrashPoint {
    /// Before the `n`-th store operation (lookup, durable call, completion, snapshot),
    /// counted from 1 over the whole run.
    BeforeOperation(u64),
    /// The `n`-th append (from 1, over the whole run) fails before its record is written: the
    /// side effect that preceded it happened, its persist did not.
    BeforeAppend(u64),
    /// The `n`-th append is written but its acknowledgement never arrives.
    AfterAppend(u64),
}

/// Shared crash bookkeeping of one simulated run: counters and the points still armed.
#[derive(Debug, Default)]
pub struct Crashes {
    operations: AtomicU64,
    appends: AtomicU64,
    armed: Mutex<BTreeMap<CrashPoint, ()>>,
    /// The point of the crash that fired since it was last taken.
    crashed: Mutex<Option<CrashPoint>>,
    /// While set, nothing fires (a zombie runs: the crashes are the surviving attempt's).
    paused: std::sync::atomic::AtomicBool,
}

/// The reason an operation failed because of an injected crash.
#[derive(Debug, thiserror::Error)]
#[error("injected crash at {0:?}")]
pub struct InjectedCrash(pub CrashPoint);

impl Crashes {
    /// Crash bookkeeping with `points` armed.
    pub fn new(points: impl IntoIterator<Item = CrashPoint>) -> Arc<Self> {
        let c = Crashes::default();
        c.armed.lock().extend(points.into_iter().map(|p| (p, ())));
        Arc::new(c)
    }

    /// Counts one store operation; `Err` if a crash is armed before it.
    pub fn operation(&self) -> Result<(), InjectedCrash> {
        let n = self.operations.fetch_add(1, Ordering::Relaxed) + 1;
        self.fire(CrashPoint::BeforeOperation(n))
    }

    /// Holds every armed crash back (`true`) or arms them again; counting goes on.
    pub fn pause(&self, paused: bool) {
        self.paused.store(paused, Ordering::Relaxed);
    }

    fn fire(&self, point: CrashPoint) -> Result<(), InjectedCrash> {
        if self.paused.load(Ordering::Relaxed) {
            return Ok(());
        }
        if self.armed.lock().remove(&point).is_some() {
            *self.crashed.lock() = Some(point);
            return Err(InjectedCrash(point));
        }
        Ok(())
    }

    /// The point of the crash that fired since the last [`take_crashed`](Self::take_crashed),
    /// if one did. A store error caused by an injected crash reports it here: the store wraps
    /// the injected error in its own.
    pub fn take_crashed(&self) -> Option<CrashPoint> {
        self.crashed.lock().take()
    }

    /// Store operations counted so far.
    pub fn operations(&self) -> u64 {
        self.operations.load(Ordering::Relaxed)
    }

    /// Appends counted so far.
    pub fn appends(&self) -> u64 {
        self.appends.load(Ordering::Relaxed)
    }

    /// Crash points not fired yet.
    pub fn armed(&self) -> usize {
        self.armed.lock().len()
    }
}

/// A log that crashes where [`Crashes`] says.
#[derive(Debug)]
pub struct CrashLog<L> {
    inner: L,
    crashes: Arc<Crashes>,
}

impl<L: StateLog> CrashLog<L> {
    /// Wraps `inner`.
    pub fn new(inner: L, crashes: Arc<Crashes>) -> Self {
        CrashLog { inner, crashes }
    }

    /// The wrapped log.
    pub fn inner(&self) -> &L {
        &self.inner
    }
}

fn crash_error(e: InjectedCrash) -> Error {
    BackendError::retryable("sim", "append", e).into()
}

impl<L: StateLog> StateLog for CrashLog<L> {
    fn identity(&self) -> &LogIdentity {
        self.inner.identity()
    }

    async fn current_identity(&self) -> Result<LogIdentity, Error> {
        self.inner.current_identity().await
    }

    async fn append(&self, record: WireRecord) -> Result<Position, Error> {
        let n = self.crashes.appends.fetch_add(1, Ordering::Relaxed) + 1;
        self.crashes.fire(CrashPoint::BeforeAppend(n)).map_err(crash_error)?;
        let position = self.inner.append(record).await?;
        self.crashes.fire(CrashPoint::AfterAppend(n)).map_err(crash_error)?;
        Ok(position)
    }

    async fn earliest_offsets(&self) -> Result<Vec<u64>, Error> {
        self.inner.earliest_offsets().await
    }

    async fn end_offsets(&self) -> Result<Vec<u64>, Error> {
        self.inner.end_offsets().await
    }

    async fn read(&self, partition: u32, from: u64, to: u64, max: usize) -> Result<ReadBatch, Error> {
        self.inner.read(partition, from, to, max).await
    }

    fn capabilities(&self) -> actionstate_core::Capabilities {
        self.inner.capabilities()
    }

    async fn reclaim(&self, before: &[u64]) -> Result<Vec<u64>, Error> {
        self.inner.reclaim(before).await
    }
}
