//! One round of the agent through the store: each action looked up (reused, resumed or run),
//! its durable calls journaled, its completion written, its memory applied.

use crate::agent::{self, BOOTSTRAP, Kind};
use crate::attempt::Attempt;
use crate::crash::Crashes;
use crate::ledger::Ledger;
use crate::outcome::{Outcome, SimError, crash_or};
use crate::plan::{SimConfig, key_id, key_name};
use crate::source::LogSource;
use actionstate_core::{ActionState, Attributes, Event, MemoryOp, MemoryUpdate, StateKey, TaggedBytes, Trigger, Value};
use actionstate_recovery::{ActionHandle, Begin, CallSource, Round};
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
    a.stores[owner].round_completed(key, seq);
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
/// reconciled, or run: then counted by the ledger).
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
    let run = || async {
        ledger.lock().call(call_key);
        Ok(agent::external(function, args))
    };
    let store = &a.stores[owner];
    let call = if reconcile {
        let reconciler = || async { Ok(agent::external(function, args)) };
        store.call_reconciled(handle, function, agent::digest(args), run, reconciler).await
    } else {
        store.call(handle, function, agent::digest(args), run).await
    }
    .map_err(|e| crash_or(e, crashes))?;
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
