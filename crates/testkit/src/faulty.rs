//! [`Faulty`]: the one fault-injecting wrapper over any [`StateLog`]. What it injects comes from
//! an [`Inject`]or shared by every handle that wraps with it: [`Faults`], the knobs a test
//! turns (a failed or unacknowledged append, appends that stop after a budget, failed reads
//! and reclaims, an unreachable backend, appends held forever, slow or hanging reads), or one
//! of the test's own (the simulator's crash points).

use actionstate_core::{BackendError, Capabilities, Error, LogIdentity, Position, ReadBatch, StateLog, WireRecord};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// The backend name of the errors [`Faults`] injects.
pub const FAULTY: &str = "faulty";

/// An operation of the [`StateLog`] contract, as an [`Inject`]or sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// [`StateLog::current_identity`].
    Metadata,
    /// [`StateLog::append`].
    Append,
    /// [`StateLog::earliest_offsets`] and [`StateLog::end_offsets`].
    ListOffsets,
    /// [`StateLog::read`].
    Read,
    /// [`StateLog::reclaim`].
    Reclaim,
}

impl Operation {
    /// The operation's name in a [`BackendError`].
    pub fn name(self) -> &'static str {
        match self {
            Operation::Metadata => "metadata",
            Operation::Append => "append",
            Operation::ListOffsets => "list offsets",
            Operation::Read => "read",
            Operation::Reclaim => "reclaim",
        }
    }
}

/// When appends are held (never answer), so that a test can drop a write's future while it
/// waits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Hold {
    /// Appends go through.
    #[default]
    Off,
    /// Appends wait forever before they reach the log.
    BeforeAppend,
    /// Appends reach the log (the record is durable) and then wait forever before reporting
    /// it: the acknowledgement is in flight.
    BeforeAck,
}

/// How reads of one partition answer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SlowReads {
    /// As the log does.
    #[default]
    Never,
    /// Reads of this partition never answer (a bucket whose server hangs).
    Hang(u32),
    /// Reads of this partition answer after this long, each time.
    Pause(u32, Duration),
}

/// What a [`Faulty`] log asks before and after each operation. An `Err` fails the operation
/// with that error; the defaults inject nothing.
///
/// Implementations MUST be cheap and MUST NOT block: they are asked on every operation, from
/// any task. An injector SHOULD count appends itself when its faults are placed by number, so
/// that every handle sharing it counts the same appends.
pub trait Inject: Send + Sync {
    /// Before `operation` reaches the log (for an append, before [`before_append`](Self::before_append)).
    fn before(&self, operation: Operation) -> Result<(), Error> {
        let _ = operation;
        Ok(())
    }

    /// Before an append reaches the log: `Err` fails it unwritten; `Ok` gives the ticket
    /// [`after_append`](Self::after_append) gets for the same append.
    fn before_append(&self) -> Result<u64, Error> {
        Ok(0)
    }

    /// After the log acknowledged the append of `ticket`: `Err` loses the acknowledgement
    /// (the record is written, the caller sees a failure).
    fn after_append(&self, ticket: u64) -> Result<(), Error> {
        let _ = ticket;
        Ok(())
    }

    /// Whether an append starting now is held.
    fn hold(&self) -> Hold {
        Hold::Off
    }

    /// How long a read of `partition` starting now waits first: `None` forever.
    fn read_delay(&self, partition: u32) -> Option<Duration> {
        let _ = partition;
        Some(Duration::ZERO)
    }
}

/// The fault that [`Faults`] injected: what it simulates, e.g. `"acknowledgement lost"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InjectedFault(pub &'static str);

impl fmt::Display for InjectedFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "injected fault: {}", self.0)
    }
}

impl std::error::Error for InjectedFault {}

fn injected(operation: Operation, fault: &'static str) -> Error {
    BackendError::retryable(FAULTY, operation.name(), InjectedFault(fault)).into()
}

/// The faults a test turns on and off, shared by every handle wrapped with them. Appends are
/// counted from 1 over all those handles; a fault placed by number counts from the next one.
/// Every injected failure is a retryable [`Error::Backend`] (backend [`FAULTY`]) whose source
/// is an [`InjectedFault`].
#[derive(Debug, Default)]
pub struct Faults {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    appends: u64,
    fail_append: Option<u64>,
    lose_ack: Option<u64>,
    /// Appends still let through before every later one fails.
    budget: Option<u64>,
    fail_reads: bool,
    fail_reclaims: bool,
    down: bool,
    hold: Hold,
    slow_reads: SlowReads,
}

impl Faults {
    /// No faults yet.
    pub fn new() -> Arc<Self> {
        Arc::new(Faults::default())
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A test's panic while the lock was held leaves nothing half-updated: every change
        // under it is one assignment.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The `n`-th append from now (1 = the next) fails before writing anything.
    pub fn fail_nth_append(&self, n: u64) {
        let mut s = self.state();
        s.fail_append = Some(s.appends + n);
    }

    /// The `n`-th append from now writes its record but reports an error, as when the
    /// acknowledgement is lost on the way back.
    pub fn lose_ack_of_nth_append(&self, n: u64) {
        let mut s = self.state();
        s.lose_ack = Some(s.appends + n);
    }

    /// Lets `keep` more appends through and fails every later one (a writer that crashes
    /// part way through a sequence of appends); `None` lets every append through again.
    pub fn fail_appends_after(&self, keep: Option<u64>) {
        self.state().budget = keep;
    }

    /// Makes every read fail (or succeed again).
    pub fn fail_reads(&self, fail: bool) {
        self.state().fail_reads = fail;
    }

    /// Makes every reclaim fail (or succeed again).
    pub fn fail_reclaims(&self, fail: bool) {
        self.state().fail_reclaims = fail;
    }

    /// Makes the backend unreachable: every operation fails with a retryable error.
    pub fn set_down(&self, down: bool) {
        self.state().down = down;
    }

    /// Holds later appends as `hold` says.
    pub fn hold_appends(&self, hold: Hold) {
        self.state().hold = hold;
    }

    /// Makes reads of one partition hang or slow, or answer as the log does again.
    pub fn slow_reads(&self, reads: SlowReads) {
        self.state().slow_reads = reads;
    }

    /// Appends attempted so far (held and failed ones included).
    pub fn appends(&self) -> u64 {
        self.state().appends
    }
}

impl Inject for Faults {
    fn before(&self, operation: Operation) -> Result<(), Error> {
        let s = self.state();
        if s.down {
            return Err(injected(operation, "backend unreachable"));
        }
        match operation {
            Operation::Read if s.fail_reads => Err(injected(operation, "read failed")),
            Operation::Reclaim if s.fail_reclaims => Err(injected(operation, "reclaim failed")),
            _ => Ok(()),
        }
    }

    fn before_append(&self) -> Result<u64, Error> {
        let mut s = self.state();
        s.appends += 1;
        let n = s.appends;
        if s.fail_append == Some(n) {
            return Err(injected(Operation::Append, "append failed"));
        }
        match s.budget {
            Some(0) => Err(injected(Operation::Append, "the writer crashed")),
            Some(left) => {
                s.budget = Some(left - 1);
                Ok(n)
            }
            None => Ok(n),
        }
    }

    fn after_append(&self, ticket: u64) -> Result<(), Error> {
        if self.state().lose_ack == Some(ticket) {
            return Err(injected(Operation::Append, "acknowledgement lost"));
        }
        Ok(())
    }

    fn hold(&self) -> Hold {
        self.state().hold
    }

    fn read_delay(&self, partition: u32) -> Option<Duration> {
        match self.state().slow_reads {
            SlowReads::Hang(p) if p == partition => None,
            SlowReads::Pause(p, pause) if p == partition => Some(pause),
            _ => Some(Duration::ZERO),
        }
    }
}

/// A log whose operations fail, hang or lose their acknowledgement where its injector says;
/// otherwise it is `L`. Clones share the injector (as handles share a server).
pub struct Faulty<L, F: ?Sized = Faults> {
    inner: L,
    faults: Arc<F>,
}

impl<L: Clone, F: ?Sized> Clone for Faulty<L, F> {
    fn clone(&self) -> Self {
        Faulty { inner: self.inner.clone(), faults: Arc::clone(&self.faults) }
    }
}

impl<L: fmt::Debug, F: ?Sized> fmt::Debug for Faulty<L, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Faulty").field("inner", &self.inner).finish_non_exhaustive()
    }
}

impl<L> Faulty<L, Faults> {
    /// `inner` with [`Faults`] of its own, none turned on yet.
    pub fn wrap(inner: L) -> Self {
        Faulty { inner, faults: Faults::new() }
    }
}

impl<L, F: ?Sized> Faulty<L, F> {
    /// `inner` with the faults of `faults`, which other handles may share.
    pub fn new(inner: L, faults: Arc<F>) -> Self {
        Faulty { inner, faults }
    }

    /// The wrapped log.
    pub fn inner(&self) -> &L {
        &self.inner
    }

    /// The injector, to turn faults on and off.
    pub fn faults(&self) -> &Arc<F> {
        &self.faults
    }

    /// Another handle with the same faults on `inner` (say, the wrapped log reopened).
    pub fn with_inner<M>(&self, inner: M) -> Faulty<M, F> {
        Faulty { inner, faults: Arc::clone(&self.faults) }
    }
}

impl<L: StateLog, F: Inject + ?Sized + 'static> StateLog for Faulty<L, F> {
    fn identity(&self) -> &LogIdentity {
        self.inner.identity()
    }

    async fn current_identity(&self) -> Result<LogIdentity, Error> {
        self.faults.before(Operation::Metadata)?;
        self.inner.current_identity().await
    }

    async fn append(&self, record: WireRecord) -> Result<Position, Error> {
        self.faults.before(Operation::Append)?;
        let hold = self.faults.hold();
        let ticket = self.faults.before_append()?;
        if hold == Hold::BeforeAppend {
            std::future::pending::<()>().await;
        }
        let position = self.inner.append(record).await?;
        if hold == Hold::BeforeAck {
            std::future::pending::<()>().await;
        }
        self.faults.after_append(ticket)?;
        Ok(position)
    }

    async fn earliest_offsets(&self) -> Result<Vec<u64>, Error> {
        self.faults.before(Operation::ListOffsets)?;
        self.inner.earliest_offsets().await
    }

    async fn end_offsets(&self) -> Result<Vec<u64>, Error> {
        self.faults.before(Operation::ListOffsets)?;
        self.inner.end_offsets().await
    }

    async fn read(&self, partition: u32, from: u64, to: u64, max: usize) -> Result<ReadBatch, Error> {
        self.faults.before(Operation::Read)?;
        match self.faults.read_delay(partition) {
            None => std::future::pending::<()>().await,
            Some(pause) if !pause.is_zero() => crate::scenarios::sleep(pause).await,
            Some(_) => {}
        }
        self.inner.read(partition, from, to, max).await
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    async fn reclaim(&self, before: &[u64]) -> Result<Vec<u64>, Error> {
        self.faults.before(Operation::Reclaim)?;
        self.inner.reclaim(before).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actionstate_core::KeyId;
    use actionstate_memory::MemoryLog;

    fn record(n: u8) -> WireRecord {
        WireRecord { key_id: KeyId::of(b"k"), key: vec![n], value: vec![n] }
    }

    fn fault_of(err: &Error) -> Option<InjectedFault> {
        let Error::Backend(b) = err else { return None };
        std::error::Error::source(b)?.downcast_ref::<InjectedFault>().copied()
    }

    #[tokio::test]
    async fn appends_fail_before_or_after_writing_as_numbered() {
        let log = Faulty::wrap(MemoryLog::new(1));
        log.append(record(0)).await.expect("no fault yet");
        log.faults().fail_nth_append(2);
        log.faults().lose_ack_of_nth_append(1);
        let lost = log.append(record(1)).await.expect_err("acknowledgement lost");
        assert_eq!(fault_of(&lost), Some(InjectedFault("acknowledgement lost")));
        assert!(lost.is_retryable());
        let failed = log.append(record(2)).await.expect_err("append failed");
        assert_eq!(fault_of(&failed), Some(InjectedFault("append failed")));
        // The lost acknowledgement's record is written; the failed append's is not.
        assert_eq!(log.end_offsets().await.expect("end"), vec![2]);
        assert_eq!(log.faults().appends(), 3);
        // A handle on the same log shares the faults and their count.
        let other = log.with_inner(log.inner().reopen());
        other.append(record(3)).await.expect("no fault left");
        assert_eq!(log.faults().appends(), 4);
    }

    #[tokio::test]
    async fn a_budget_lets_some_appends_through_then_fails_the_rest() {
        let log = Faulty::wrap(MemoryLog::new(1));
        log.faults().fail_appends_after(Some(2));
        for n in 0..2 {
            log.append(record(n)).await.expect("within the budget");
        }
        for n in 2..4 {
            let err = log.append(record(n)).await.expect_err("budget spent");
            assert_eq!(fault_of(&err), Some(InjectedFault("the writer crashed")));
        }
        log.faults().fail_appends_after(None);
        log.append(record(9)).await.expect("unlimited again");
        assert_eq!(log.end_offsets().await.expect("end"), vec![3]);
    }

    #[tokio::test]
    async fn reads_reclaims_and_a_down_backend_fail_until_lifted() {
        let log = Faulty::wrap(MemoryLog::new(1));
        log.append(record(0)).await.expect("append");
        log.faults().fail_reads(true);
        assert!(log.read(0, 0, 1, 10).await.is_err_and(|e| e.is_retryable()));
        log.faults().fail_reads(false);
        assert_eq!(log.read(0, 0, 1, 10).await.expect("read").records.len(), 1);
        log.faults().fail_reclaims(true);
        assert!(log.reclaim(&[1]).await.is_err());
        log.faults().fail_reclaims(false);
        log.faults().set_down(true);
        assert!(log.end_offsets().await.is_err() && log.current_identity().await.is_err());
        assert!(log.append(record(1)).await.is_err());
        assert_eq!(log.faults().appends(), 1, "a down backend sees no append");
        log.faults().set_down(false);
        assert_eq!(log.reclaim(&[1]).await.expect("reclaim"), vec![1]);
    }

    #[tokio::test]
    async fn held_appends_and_slow_reads_wait() {
        let log = Faulty::wrap(MemoryLog::new(1));
        log.faults().hold_appends(Hold::BeforeAck);
        assert!(crate::within(Duration::from_millis(50), log.append(record(0))).await.is_none());
        assert_eq!(log.end_offsets().await.expect("end"), vec![1], "held after writing");
        log.faults().hold_appends(Hold::BeforeAppend);
        assert!(crate::within(Duration::from_millis(50), log.append(record(1))).await.is_none());
        assert_eq!(log.end_offsets().await.expect("end"), vec![1], "held before writing");
        log.faults().hold_appends(Hold::Off);
        log.faults().slow_reads(SlowReads::Hang(0));
        assert!(crate::within(Duration::from_millis(50), log.read(0, 0, 1, 10)).await.is_none());
        log.faults().slow_reads(SlowReads::Pause(0, Duration::from_millis(30)));
        let started = std::time::Instant::now();
        log.read(0, 0, 1, 10).await.expect("slow read");
        assert!(started.elapsed() >= Duration::from_millis(30));
    }
}
