//! Crash injection: [`Crashes`], the injector of the test kit's [`Faulty`] log wrapper that
//! fails chosen appends, before or after they are written, and records that the process
//! "crashed"; [`CrashLog`] is a log wrapped with it.

use actionstate_core::{BackendError, Error};
use actionstate_testkit::{Faulty, Inject};
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

/// A log that crashes where [`Crashes`] says: `CrashLog::new(log, crashes)`.
pub type CrashLog<L> = Faulty<L, Crashes>;

fn crash_error(e: InjectedCrash) -> Error {
    BackendError::retryable("sim", "append", e).into()
}

/// Appends are counted over the whole run, by every log of it: the `n`-th may crash before
/// its record is written ([`CrashPoint::BeforeAppend`]) or after ([`CrashPoint::AfterAppend`]).
impl Inject for Crashes {
    fn before_append(&self) -> Result<u64, Error> {
        let n = self.appends.fetch_add(1, Ordering::Relaxed) + 1;
        self.fire(CrashPoint::BeforeAppend(n)).map_err(crash_error)?;
        Ok(n)
    }

    fn after_append(&self, n: u64) -> Result<(), Error> {
        self.fire(CrashPoint::AfterAppend(n)).map_err(crash_error)
    }
}
