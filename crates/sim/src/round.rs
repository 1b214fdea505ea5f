//! One round of the agent through the store: each action looked up (reused, resumed or run),
//! its durable calls journaled, its completion written, its memory applied.

use crate::agent::{self, BOOTSTRAP, Kind};
use crate::attempt::Attempt;
use crate::crash::Crashes;
use crate::external::{Api, ExternalError};
use crate::ledger::Ledger;
use crate::outcome::{Outcome, SimError, crash_or};
use crate::plan::{SimConfig, key_id, key_name};
use crate::source::LogSource;
use actionstate_core::{
    ActionState, Attributes, Event, IdempotencyKey, MemoryOp, MemoryUpdate, StateKey, TaggedBytes, Trigger, Value,
};
use actionstate_recovery::{ActionHandle, Begin, CallSource, DurableCall, Round};
use parking_lot::Mutex;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// Processes input `v` of key number `k` as the key's next round: the input's `plan` and the
/// bootstrap's `greet`, then every action their outputs trigger.
pub(crate) async fn round<S: LogSource>(
    config: &SimConfig,
    a: &mut Attempt<S>,
    k: u32,
    v: i64,
    crashes: &Crashes,
    ledger: &Mutex<Ledger>,
    outcome: &mut Outcome,
) -> Result<(), SimError> {
    let key = key_id(k);
    let owner = a.owners.iter().position(|o| o.owns(&key)).unwrap_or(0);
    let seq = {
        let next = a.next_seq.entry(key).or_insert(0);
        let seq = *next;
        *next += 1;
        seq
    };
    let input =
        agent::event(a.fresh_id(config.seed), "input", [("key", Value::Int(i64::from(k))), ("v", Value::Int(v))]);
    let boot = agent::event(a.fresh_id(config.seed), BOOTSTRAP, []);
    let round = Round::named(&key_name(k), seq, &input);
    let mut queue: VecDeque<(Kind, Event, Trigger)> = VecDeque::from([
        (Kind::Plan, input, Trigger::Input),
        (Kind::Greet, boot, Trigger::Bootstrap { label: BOOTSTRAP.into() }),
    ]);
    let mut results: Vec<(String, Vec<Attributes>)> = Vec::new();
    while let Some((kind, event, trigger)) = queue.pop_front() {
        crashes.operation()?;
        let store = &a.stores[owner];
        let begun = store.begin(&round, &kind.action(), &event, &trigger).await.map_err(|e| crash_or(e, crashes))?;
        let state: Arc<ActionState> = match begun {
            Begin::Reuse(state) => {
                outcome.reused += 1;
                state
            }
            Begin::Resume(handle) => {
                outcome.resumed += 1;
                execute(config, a, owner, kind, &event, seq, handle, "resumed", crashes, ledger).await?
            }
            Begin::Fresh(handle, reason) => {
                execute(config, a, owner, kind, &event, seq, handle, reason.as_str(), crashes, ledger).await?
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
    ledger.lock().round_done(key, seq, &results);
    outcome.results.insert((key, seq), results);
    // The store learns of the round only once all its actions are done: in between, the
    // actions need the attempt mutably, and a crash that cuts the round short leaves it for the
    // next attempt to replay, as it did before open rounds were counted.
    a.stores[owner].round(round).finish();
    Ok(())
}

/// Runs action `kind` on `event` (its side effects go to the ledger) and completes it.
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
    crashes: &Crashes,
    ledger: &Mutex<Ledger>,
) -> Result<Arc<ActionState>, SimError> {
    let sk: StateKey = *handle.key();
    ledger.lock().execute(&sk, reason);
    let seed = config.seed;
    let (outputs, memory) = match kind {
        Kind::Plan => {
            let v = agent::int(event, "v");
            let plan =
                durable(a, owner, &mut handle, agent::PLAN_CALL, &v.to_le_bytes(), false, crashes, ledger).await?;
            let task = [("topic", Value::Int(v % 3))];
            let t1 = agent::event(a.fresh_id(seed), "task", task.clone());
            let t2 = agent::event(a.fresh_id(seed), "task", task);
            (vec![t1, t2], vec![set("plan/last", plan)])
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
    ledger.lock().completion_acked(sk);
    Ok(state)
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
