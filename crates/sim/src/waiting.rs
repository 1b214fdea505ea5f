//! The runtime's side of durable waits (see `approvals.rs`): each step moves the clock, lets
//! the approver answer what is due, enforces deadlines, and runs again the parked rounds whose
//! waits ended, then the inputs queued behind them.

use crate::approvals::{Approver, Decision, STEP_MS};
use crate::attempt::Attempt;
use crate::crash::Crashes;
use crate::outcome::{SimError, crash_or};
use crate::plan::SimConfig;
use crate::round::{Ctx, play, round};
use crate::source::LogSource;
use actionstate_core::KeyId;
use actionstate_recovery::{StoreError, WaitStatus};
use parking_lot::Mutex;

/// Steps the end of a run may take for its parked rounds to end: the longest a wait lasts
/// (its timeout) in steps, with room to spare.
const MOST_DRAIN_STEPS: u64 = 10 * crate::approvals::APPROVAL_TIMEOUT_MS / STEP_MS;

/// One step of the runtime's clock (nothing without approvals: a run without them is the
/// same as before they existed).
pub(crate) async fn step<S: LogSource>(
    config: &SimConfig,
    a: &mut Attempt<S>,
    cx: &mut Ctx<'_>,
) -> Result<(), SimError> {
    if config.approval_every == 0 {
        return Ok(());
    }
    a.clock.advance(STEP_MS);
    if let Some(approver) = cx.approver {
        answer(config, a, approver, cx.crashes).await?;
    }
    let mut ended: Vec<KeyId> = Vec::new();
    for store in &a.stores {
        cx.crashes.operation()?;
        store.expire_waits().await.map_err(|e| crash_or(e, cx.crashes))?;
        for w in store.waits() {
            let WaitStatus::Resolved { outcome } = w.status else { continue };
            if outcome == "timed_out"
                && let Some(approver) = cx.approver
            {
                approver.lock().timed_out(w.key, w.seq);
            }
            if a.parked.get(&w.key).is_some_and(|p| p.seq == w.seq) {
                ended.push(w.key);
            }
        }
    }
    ended.sort();
    ended.dedup();
    for key in ended {
        resume(config, a, key, cx).await?;
    }
    Ok(())
}

/// The approver answers every token due now, through the store that owns its key. A crash
/// leaves the token with the approver, who answers it again after the restore.
async fn answer<S: LogSource>(
    config: &SimConfig,
    a: &Attempt<S>,
    approver: &Mutex<Approver>,
    crashes: &Crashes,
) -> Result<(), SimError> {
    let outside = approver.lock().outside.clone();
    if let Some(outside) = outside {
        return outside_answers(config, a, approver, crashes, &outside).await;
    }
    let due = approver.lock().due(config.seed, a.clock.now_ms());
    for (token, seq, decision) in due {
        crashes.operation()?;
        let owner = a.owners.iter().position(|o| o.owns(&token.key)).unwrap_or(0);
        let store = &a.stores[owner];
        let done = match decision {
            Decision::Approve(reply) => store.resolve(&token, &reply).await,
            Decision::Reject(reason) => store.reject(&token, &reason).await,
            Decision::Ignore => continue,
        };
        match done {
            Ok(r) => approver.lock().answered(&token, seq, Some(r)),
            Err(StoreError::UnknownWait { .. }) => approver.lock().answered(&token, seq, None),
            Err(e) => return Err(crash_or(e, crashes)),
        }
    }
    Ok(())
}

/// How long a runtime waits for an answer of the outside approver that is due.
const MOST_APPROVER_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// The answers of the approver in another process that are due now, as the stores record
/// them: read from the log (`poll_resolutions`) while the runtime runs, or, for an approver
/// that answers only while it is stopped, by stopping ([`SimError::AwaitingApproval`]). The
/// clock does not move until they are all in.
async fn outside_answers<S: LogSource>(
    config: &SimConfig,
    a: &Attempt<S>,
    approver: &Mutex<Approver>,
    crashes: &Crashes,
    outside: &crate::approvals::OutsideApprover,
) -> Result<(), SimError> {
    let due = approver.lock().due(config.seed, a.clock.now_ms());
    let started = std::time::Instant::now();
    for (token, seq, _) in due {
        let owner = a.owners.iter().position(|o| o.owns(&token.key)).unwrap_or(0);
        let store = &a.stores[owner];
        loop {
            crashes.operation()?;
            store.poll_resolutions().await.map_err(|e| crash_or(e, crashes))?;
            match store.wait_outcome(&token) {
                Ok(Some(outcome)) => {
                    let recorded = actionstate_recovery::Resolution { outcome, recorded: true };
                    approver.lock().answered(&token, seq, Some(recorded));
                    break;
                }
                Ok(None) if !outside.while_running => return Err(SimError::AwaitingApproval),
                Ok(None) if started.elapsed() > MOST_APPROVER_WAIT => {
                    return Err(SimError::ApprovalMissing { seconds: MOST_APPROVER_WAIT.as_secs() });
                }
                Ok(None) => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
                Err(StoreError::UnknownWait { .. }) => {
                    approver.lock().answered(&token, seq, None);
                    break;
                }
                Err(e) => return Err(crash_or(e, crashes)),
            }
        }
    }
    Ok(())
}

/// Runs the parked round of `key` again; once it finished, the inputs queued behind it follow,
/// until one of them waits in turn.
async fn resume<S: LogSource>(
    config: &SimConfig,
    a: &mut Attempt<S>,
    key: KeyId,
    cx: &mut Ctx<'_>,
) -> Result<(), SimError> {
    let Some(parked) = a.parked.remove(&key) else { return Ok(()) };
    play(config, a, parked, cx).await?;
    while !a.parked.contains_key(&key) {
        let Some((k, v)) = a.deferred.get_mut(&key).and_then(std::collections::VecDeque::pop_front) else { break };
        round(config, a, k, v, cx).await?;
    }
    if a.deferred.get(&key).is_some_and(std::collections::VecDeque::is_empty) {
        a.deferred.remove(&key);
    }
    Ok(())
}

/// After a restore: every parked round is run again once, which hands its token to the
/// approver again (a token handed out by a process that died reached no one) and finishes the
/// rounds whose waits ended meanwhile.
pub(crate) async fn reenter<S: LogSource>(
    config: &SimConfig,
    a: &mut Attempt<S>,
    cx: &mut Ctx<'_>,
) -> Result<(), SimError> {
    let keys: Vec<KeyId> = a.parked.keys().copied().collect();
    for key in keys {
        resume(config, a, key, cx).await?;
    }
    Ok(())
}

/// The source is done: steps until every parked round finished (an unanswered wait times out).
pub(crate) async fn drain<S: LogSource>(
    config: &SimConfig,
    a: &mut Attempt<S>,
    cx: &mut Ctx<'_>,
) -> Result<(), SimError> {
    let mut steps = 0;
    while !a.parked.is_empty() {
        step(config, a, cx).await?;
        steps += 1;
        if steps > MOST_DRAIN_STEPS {
            return Err(SimError::Store(actionstate_recovery::StoreError::Task(format!(
                "{} rounds still wait {steps} steps after the source ended",
                a.parked.len()
            ))));
        }
    }
    Ok(())
}
