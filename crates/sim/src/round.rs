//! One round of the agent through the store: each action looked up (reused, resumed or run),
//! its durable calls journaled, its completion written, its memory applied.

use crate::agent::{self, BOOTSTRAP, Kind};
use crate::approvals::{self, Approver};
use crate::attempt::{Attempt, Parked, Run};
use crate::crash::Crashes;
use crate::external::{Api, ExternalError};
use crate::ledger::Ledger;
use crate::outcome::{Outcome, SimError, crash_or};
use crate::plan::{SimConfig, key_id, key_name};
use crate::source::LogSource;
use actionstate_core::{
    ActionState, Attributes, Event, IdempotencyKey, MemoryOp, MemoryUpdate, StateKey, TaggedBytes, Trigger, Value,
    WaitOutcome,
};
use actionstate_recovery::{ActionHandle, Begin, CallSource, DurableCall, Round, Wait, Waited};
use parking_lot::Mutex;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

/// What a round needs of the run besides the attempt: crash injection, the ledger, the
/// approver (none for a zombie, whose tokens no one receives) and where results go.
pub(crate) struct Ctx<'a> {
    pub(crate) crashes: &'a Crashes,
    pub(crate) ledger: &'a Mutex<Ledger>,
    pub(crate) approver: Option<&'a Mutex<Approver>>,
    pub(crate) outcome: &'a mut Outcome,
}

impl Run<'_> {
    /// What a round of the surviving attempt needs.
    pub(crate) fn ctx(&mut self) -> Ctx<'_> {
        Ctx { crashes: self.crashes, ledger: self.ledger, approver: Some(self.approver), outcome: &mut *self.outcome }
    }
}

/// Processes input `v` of key number `k` as the key's next round, or queues it behind the
/// key's round that waits for an approval.
pub(crate) async fn round<S: LogSource>(
    config: &SimConfig,
    a: &mut Attempt<S>,
    k: u32,
    v: i64,
    cx: &mut Ctx<'_>,
) -> Result<(), SimError> {
    let key = key_id(k);
    if a.parked.contains_key(&key) {
        cx.outcome.queued += 1;
        a.deferred.entry(key).or_default().push_back((k, v));
        return Ok(());
    }
    let seq = {
        let next = a.next_seq.entry(key).or_insert(0);
        let seq = *next;
        *next += 1;
        seq
    };
    play(config, a, Parked { k, v, seq }, cx).await
}

/// Runs round `r`: the input's `plan` and the bootstrap's `greet`, then every action their
/// outputs trigger. A round run again (once its wait ended) reuses what it completed. If an
/// action suspends on a wait, the round is parked: its other actions go on, and it stays live.
pub(crate) async fn play<S: LogSource>(
    config: &SimConfig,
    a: &mut Attempt<S>,
    r: Parked,
    cx: &mut Ctx<'_>,
) -> Result<(), SimError> {
    let Parked { k, v, seq } = r;
    let key = key_id(k);
    let owner = a.owners.iter().position(|o| o.owns(&key)).unwrap_or(0);
    let input =
        agent::event(a.fresh_id(config.seed), "input", [("key", Value::Int(i64::from(k))), ("v", Value::Int(v))]);
    let boot = agent::event(a.fresh_id(config.seed), BOOTSTRAP, []);
    let round = Round::named(&key_name(k), seq, &input);
    let mut queue: VecDeque<(Kind, Event, Trigger)> = VecDeque::from([
        (Kind::Plan, input, Trigger::Input),
        (Kind::Greet, boot, Trigger::Bootstrap { label: BOOTSTRAP.into() }),
    ]);
    let mut results: Vec<(String, Vec<Attributes>)> = Vec::new();
    let mut waiting = false;
    while let Some((kind, event, trigger)) = queue.pop_front() {
        cx.crashes.operation()?;
        let store = &a.stores[owner];
        let begun = store.begin(&round, &kind.action(), &event, &trigger).await.map_err(|e| crash_or(e, cx.crashes))?;
        let state: Arc<ActionState> = match begun {
            Begin::Reuse(state) => {
                cx.outcome.reused += 1;
                state
            }
            Begin::Resume(handle) => {
                cx.outcome.resumed += 1;
                match execute(config, a, owner, kind, &event, seq, handle, "resumed", cx).await? {
                    Some(state) => state,
                    None => {
                        waiting = true;
                        continue;
                    }
                }
            }
            Begin::Fresh(handle, reason) => {
                match execute(config, a, owner, kind, &event, seq, handle, reason.as_str(), cx).await? {
                    Some(state) => state,
                    None => {
                        waiting = true;
                        continue;
                    }
                }
            }
        };
        apply_memory(a.memory.entry(key).or_default(), &state);
        results.push((kind.name().to_owned(), state.outputs().iter().map(|e| e.attributes.clone()).collect()));
        for (index, out) in state.outputs().iter().enumerate() {
            for child in Kind::triggered_by(&out.event_type) {
                let trigger = Trigger::Emitted { producer: state.key, index: index as u32 };
                queue.push_back((*child, out.clone(), trigger));
            }
        }
    }
    if waiting {
        // The round stays live (`suspend`, not `finish`): a checkpoint keeps what it did, and
        // it is run again once its wait ended.
        a.stores[owner].round(round).suspend();
        a.parked.insert(key, r);
        return Ok(());
    }
    cx.ledger.lock().round_done(key, seq, &results);
    cx.outcome.results.insert((key, seq), results);
    // The store learns of the round only once all its actions are done: in between, the
    // actions need the attempt mutably, and a crash that cuts the round short leaves it for the
    // next attempt to replay, as it did before open rounds were counted.
    a.stores[owner].round(round).finish();
    Ok(())
}

/// Runs action `kind` on `event` (its side effects go to the ledger) and completes it; `None`
/// if it suspended on a durable wait.
#[allow(clippy::too_many_arguments, reason = "internal; the pieces are the run's state")]
async fn execute<S: LogSource>(
    config: &SimConfig,
    a: &mut Attempt<S>,
    owner: usize,
    kind: Kind,
    event: &Event,
    seq: u64,
    mut handle: ActionHandle,
    reason: &str,
    cx: &Ctx<'_>,
) -> Result<Option<Arc<ActionState>>, SimError> {
    let (crashes, ledger) = (cx.crashes, cx.ledger);
    let sk: StateKey = *handle.key();
    ledger.lock().execute(&sk, reason);
    let seed = config.seed;
    let mut delivered = None;
    let (outputs, memory) = match kind {
        Kind::Plan => {
            let v = agent::int(event, "v");
            let plan =
                durable(a, owner, &mut handle, agent::PLAN_CALL, &v.to_le_bytes(), false, crashes, ledger).await?;
            let task = [("topic", Value::Int(v % 3))];
            let t1 = agent::event(a.fresh_id(seed), "task", task.clone());
            let t2 = agent::event(a.fresh_id(seed), "task", task);
            let mut outputs = vec![t1, t2];
            if approvals::needs_approval(config, &sk.key, seq) {
                outputs.push(agent::event(a.fresh_id(seed), "approval", [("amount", Value::Int(v))]));
            }
            (outputs, vec![set("plan/last", plan)])
        }
        Kind::Approve => {
            let wait = Wait::new(agent::APPROVAL_WAIT)
                .args(&agent::int(event, "amount"))?
                .timeout(Duration::from_millis(approvals::APPROVAL_TIMEOUT_MS));
            crashes.operation()?;
            let waited = a.stores[owner].wait(&mut handle, wait).await.map_err(|e| crash_or(e, crashes))?;
            let outcome = match waited {
                Waited::Done(outcome) => outcome,
                Waited::Suspended(token) => {
                    if let Some(approver) = cx.approver {
                        approver.lock().hand(seed, token, seq, a.clock.now_ms())?;
                    }
                    return Ok(None);
                }
            };
            if outcome == WaitOutcome::TimedOut
                && let Some(approver) = cx.approver
            {
                approver.lock().timed_out(sk.key, seq);
            }
            delivered = Some((handle.incarnation(), outcome.name()));
            (Vec::new(), vec![set(&approvals::memory_path(seq), approvals::remembered(&outcome))])
        }
        Kind::Work => {
            let topic = agent::int(event, "topic");
            let found =
                durable(a, owner, &mut handle, agent::SEARCH_CALL, &topic.to_le_bytes(), false, crashes, ledger)
                    .await?;
            let fetched =
                durable(a, owner, &mut handle, agent::FETCH_CALL, &found, config.reconcile, crashes, ledger).await?;
            let result = agent::event(
                a.fresh_id(seed),
                "result",
                [("topic", Value::Int(topic)), ("answer", Value::Bytes(fetched))],
            );
            (vec![result], Vec::new())
        }
        Kind::Summarize => (Vec::new(), vec![set(&format!("summary/{seq}"), agent::bytes(event, "answer"))]),
        Kind::Greet => (vec![agent::event(a.fresh_id(seed), "note", [("text", Value::from("hello"))])], Vec::new()),
        Kind::Jot => (Vec::new(), vec![set("notes/last_seq", seq.to_le_bytes().to_vec())]),
    };
    crashes.operation()?;
    let state = a.stores[owner].complete(handle, outputs, memory).await.map_err(|e| crash_or(e, crashes))?;
    let mut l = ledger.lock();
    l.completion_acked(sk);
    if let Some((incarnation, outcome)) = delivered {
        l.wait_delivered(sk, incarnation, outcome);
    }
    Ok(Some(state))
}

/// Makes durable call `function` of the action behind `handle` (replayed from its journal,
/// reconciled, or run: then counted by the ledger). With an external service, a run sends the
/// call there under its idempotency key, and a reconciler asks the service about that key.
#[allow(clippy::too_many_arguments, reason = "internal; the pieces are the run's state")]
async fn durable<S: LogSource>(
    a: &Attempt<S>,
    owner: usize,
    handle: &mut ActionHandle,
    function: &'static str,
    args: &[u8],
    reconcile: bool,
    crashes: &Crashes,
    ledger: &Mutex<Ledger>,
) -> Result<Vec<u8>, SimError> {
    crashes.operation()?;
    let call_key = (*handle.key(), handle.cursor(), function);
    // The service's name for the logical call: a call made again after an invalidation is
    // another one.
    let logical =
        format!("{}/{}/{function}/{}", hex::encode(handle.key().to_bytes()), handle.cursor(), handle.incarnation());
    let failed: Mutex<Option<ExternalError>> = Mutex::new(None);
    let api = if reconcile { Api::Records } else { Api::Deduplicating };
    let (external, failed_at, logical) = (a.external.as_deref(), &failed, logical.as_str());
    let run = move |key: IdempotencyKey| async move {
        ledger.lock().call(call_key);
        match external {
            None => Ok(agent::external(function, args)),
            Some(service) => service.call(api, function, args, key.as_str(), logical).await.map_err(|e| {
                *failed_at.lock() = Some(e);
                Vec::new()
            }),
        }
    };
    let store = &a.stores[owner];
    // The agent's arguments are bytes already; the agent defines their digest.
    let call = DurableCall::new(function).args_digest(agent::digest(args));
    // The GenAI operations the calls stand for: the plan is a model's, the others are tools.
    let call = if function == agent::PLAN_CALL { call.model(agent::PLAN_MODEL) } else { call.tool() };
    let call = if reconcile {
        let reconciler = move |key: IdempotencyKey| async move {
            let Some(service) = external else { return Ok(agent::external(function, args)) };
            match service.lookup(key.as_str()).await {
                Ok(Some(answer)) => Ok(answer),
                // Not applied (or no key was sent to look it up by): make the call now.
                Ok(None) => run(key).await,
                Err(e) => {
                    *failed_at.lock() = Some(e);
                    Err(Vec::new())
                }
            }
        };
        store.call(handle, call.reconcile(reconciler), run).await
    } else {
        store.call(handle, call, run).await
    }
    .map_err(|e| crash_or(e, crashes))?;
    if let Some(e) = failed.into_inner() {
        // The run stops: the journal holds a failed call the service never answered.
        return Err(SimError::External(e));
    }
    let mut l = ledger.lock();
    match call.source {
        CallSource::Journal => l.calls_replayed += 1,
        CallSource::Reconciled => l.calls_reconciled += 1,
        CallSource::Executed => {}
    }
    l.call_acked(call_key);
    Ok(call.output.unwrap_or_default())
}

fn set(path: &str, bytes: Vec<u8>) -> MemoryUpdate {
    MemoryUpdate { path: path.to_owned(), op: MemoryOp::Set(TaggedBytes { tag: "bytes".into(), bytes }) }
}

fn apply_memory(memory: &mut BTreeMap<String, Vec<u8>>, state: &ActionState) {
    if let actionstate_core::Progress::Completed { memory: updates, .. } = &state.progress {
        for u in updates {
            match &u.op {
                MemoryOp::Set(v) => {
                    memory.insert(u.path.clone(), v.bytes.clone());
                }
                MemoryOp::NewObject => {
                    memory.insert(u.path.clone(), Vec::new());
                }
                MemoryOp::Delete => {
                    memory.remove(&u.path);
                }
            }
        }
    }
}
