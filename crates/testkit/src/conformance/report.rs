//! How the suite reaches a backend ([`Harness`]) and what it reports ([`ConformanceReport`]).

use actionstate_core::{Error, StateLog};
use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::task::Poll;

/// How the suite reaches a backend.
pub trait Harness: Send + Sync {
    /// The backend's log type.
    type Log: StateLog;

    /// Opens a new, empty log with `partitions` partitions (a new topic, table or directory on
    /// every call).
    fn fresh(&self, partitions: u32) -> impl Future<Output = Result<Self::Log, Error>> + Send;

    /// Drops `log` and opens the same log again, as a restarted process would.
    fn reopen(&self, log: Self::Log) -> impl Future<Output = Result<Self::Log, Error>> + Send;

    /// Deletes the log behind `log` and creates it again under the same name with
    /// `partitions` partitions. Returns a handle on the log: the old handle where the backend
    /// lets it outlive the recreation (a topic recreated under a running client), or a new
    /// one where it cannot (an embedded store whose handle must be closed before its files are
    /// deleted). The suite captures the old identity before calling this and compares it with
    /// [`StateLog::current_identity`] of the returned handle, never with its
    /// [`StateLog::identity`]; it writes to the recreated log through a handle from
    /// [`reopen`](Harness::reopen).
    fn recreate(&self, log: Self::Log, partitions: u32) -> impl Future<Output = Result<Self::Log, Error>> + Send;

    /// Opens a log whose backend cannot be reached (a closed port, an inaccessible path). May
    /// fail right away; if it returns a handle, its operations must fail.
    fn unreachable(&self) -> impl Future<Output = Result<Self::Log, Error>> + Send;
}

/// What a check returns: `Err` with the rule the backend broke.
pub type CheckResult = Result<(), String>;

/// The checks [`run_all`](super::run_all) runs, in order; each is a public function of
/// [`conformance`](super).
pub const CHECKS: [&str; 10] = [
    "acknowledged_appends_survive_reopen",
    "per_partition_order",
    "end_and_earliest_offsets",
    "reads_stop_at_the_captured_end",
    "reads_make_progress_and_skip_nothing",
    "partition_set_change_is_detected",
    "recreation_with_the_same_partition_count_is_detected",
    "concurrent_appends_from_many_tasks",
    "reclaim_keeps_what_it_must",
    "unreachable_backend_fails_clearly",
];

/// One failed check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckFailure {
    /// The check's name (one of [`CHECKS`]).
    pub check: &'static str,
    /// The rule it found broken (or the panic it ended with).
    pub message: String,
}

/// The outcome of [`run_all`](super::run_all): which checks ran and which failed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConformanceReport {
    /// Every check run, in order.
    pub checks: Vec<&'static str>,
    /// The checks that failed, in order, with their messages.
    pub failures: Vec<CheckFailure>,
}

impl ConformanceReport {
    /// Whether every check passed.
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }

    /// The failure message of `check`, if it failed.
    pub fn failure(&self, check: &str) -> Option<&str> {
        self.failures.iter().find(|f| f.check == check).map(|f| f.message.as_str())
    }

    /// Panics with the report, naming each failed check, unless every check passed.
    #[track_caller]
    pub fn assert_passed(&self) {
        assert!(self.passed(), "{self}");
    }

    /// Runs `check` and records its outcome under `name`; a panic in the check is its failure.
    pub(super) async fn run(&mut self, name: &'static str, check: impl Future<Output = CheckResult>) {
        self.checks.push(name);
        let outcome = match catch_unwind(check).await {
            Ok(outcome) => outcome,
            Err(panic) => Err(format!("panicked: {panic}")),
        };
        if let Err(message) = outcome {
            self.failures.push(CheckFailure { check: name, message });
        }
    }
}

impl fmt::Display for ConformanceReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (total, failed) = (self.checks.len(), self.failures.len());
        if failed == 0 {
            return write!(f, "conformance: all {total} checks passed");
        }
        write!(f, "conformance: {failed} of {total} checks failed")?;
        for failure in &self.failures {
            write!(f, "\n  {}: {}", failure.check, failure.message)?;
        }
        Ok(())
    }
}

/// Polls `f`, turning a panic into `Err` with its message.
async fn catch_unwind<F: Future>(f: F) -> Result<F::Output, String> {
    let mut f = std::pin::pin!(f);
    std::future::poll_fn(move |cx| match std::panic::catch_unwind(AssertUnwindSafe(|| f.as_mut().poll(cx))) {
        Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
        Ok(Poll::Pending) => Poll::Pending,
        Err(panic) => Poll::Ready(Err(panic_message(panic.as_ref()))),
    })
    .await
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
        (Some(s), _) => (*s).to_owned(),
        (_, Some(s)) => s.clone(),
        _ => "a panic without a message".to_owned(),
    }
}
