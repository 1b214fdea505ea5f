//! Fault tests that stop a real server while the store writes, for backends whose servers
//! `cargo xtask services up` starts (see [`actionstate_testkit::services::ServerProcess`]).

use actionstate_core::{
    ActionId, ActionState, Attributes, Error, Event, EventId, KeyId, LogRecord, Progress, StateKey, StateLog, Trigger,
    Value, codec,
};
use actionstate_recovery::{ActionStateStore, Begin, CheckpointForm, Ownership, Round, StoreConfig};
use actionstate_testkit::conformance;
use actionstate_testkit::services::ServerProcess;
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What a failed put may take beyond the delivery timeout: encoding, the index lock and the
/// scheduling of a loaded machine.
pub(crate) const MARGIN: Duration = Duration::from_secs(3);
/// Keys putting concurrently.
const TASKS: u64 = 4;

/// The business key of writer `k`.
pub(crate) fn key(k: u64) -> KeyId {
    KeyId::of(format!("server-stop-{k}").as_bytes())
}

/// A completed state of key `k`, round `seq`.
pub(crate) fn state(k: u64, seq: u64) -> (ActionState, Event) {
    let key = key(k);
    let mut a = Attributes::new();
    a.insert("n".into(), Value::Int(seq as i64));
    let input = Event { id: EventId(u128::from(k) << 64 | u128::from(seq)), event_type: "input".into(), attributes: a };
    let action = ActionId::new("server-stop");
    let sk = StateKey::new(key, seq, &action, &input, &Trigger::Input);
    let mut out = Attributes::new();
    out.insert("answer".into(), Value::Int((k * 1000 + seq) as i64));
    let output =
        Event { id: EventId(u128::from(k) << 96 | u128::from(seq)), event_type: "answer".into(), attributes: out };
    let s = ActionState {
        label: None,
        trace: None,
        key: sk,
        action,
        trigger: Trigger::Input,
        trigger_event: input.id,
        input: input.fingerprint(),
        progress: Progress::Completed { outputs: vec![output], memory: Vec::new() },
    };
    (s, input)
}

#[derive(Debug)]
pub(crate) enum Outcome {
    Acked(Arc<ActionState>),
    Failed {
        error: String,
        /// What [`StoreError::is_retryable`](actionstate_recovery::StoreError::is_retryable) said.
        retryable: bool,
    },
}

/// One put and how it ended.
#[derive(Debug)]
pub(crate) struct Put {
    pub(crate) state: ActionState,
    /// When it began.
    pub(crate) at: Instant,
    /// How long it took to succeed or fail.
    pub(crate) took: Duration,
    pub(crate) outcome: Outcome,
}

impl Put {
    pub(crate) fn acked(&self) -> bool {
        matches!(self.outcome, Outcome::Acked(_))
    }
}

pub(crate) async fn put<L: StateLog, C: CheckpointForm>(store: &ActionStateStore<L, C>, k: u64, seq: u64) -> Put {
    let (s, input) = state(k, seq);
    let round = Round::new(s.key.key, seq, &input);
    let at = Instant::now();
    let failed =
        |e: actionstate_recovery::StoreError| Outcome::Failed { error: e.to_string(), retryable: e.is_retryable() };
    let outcome = match store.begin(&round, &s.action, &input, &Trigger::Input).await {
        Ok(Begin::Fresh(handle, _)) => {
            let Progress::Completed { outputs, memory } = s.progress.clone() else { unreachable!() };
            match store.complete(handle, outputs, memory).await {
                Ok(indexed) => Outcome::Acked(indexed),
                Err(e) => failed(e),
            }
        }
        Ok(other) => panic!("state {k}/{seq} was already recorded: {other:?}"),
        Err(e) => failed(e),
    };
    Put { state: s, at, took: at.elapsed(), outcome }
}

/// Stops `server` (SIGTERM) while four keys put completed states through a store on the
/// log `open` returns, keeps putting while it is down (longer than `delivery_timeout`), starts
/// it again with `restart`, and keeps putting until puts succeed. Then checks, panicking with
/// the reason otherwise:
///
/// - every put that returned `Ok` is indexed and its record is in the log, at its position
///   (exact positions) or after it (lower bounds);
/// - every put that failed did so within `delivery_timeout` plus a margin and is not indexed;
/// - puts succeed after the restart;
/// - a rebuild from a marker taken before the stop, on a freshly opened log, holds every
///   acknowledged state, equal to what was put, and nothing else but states whose put failed
///   after their record reached the server (a lost acknowledgement, which the put contract
///   allows; the failed put itself never indexes it).
///
/// `name` prefixes the summary lines it prints. The server is shared: run this test alone.
// Long: one scenario read top to bottom: puts, the stop, the restart and the checks, each step on what the one before left.
pub async fn server_stop_during_puts<L, F, Fut>(
    name: &str,
    open: F,
    server: ServerProcess,
    restart: impl FnOnce(&ServerProcess) -> std::io::Result<ServerProcess> + Send + 'static,
    delivery_timeout: Duration,
) where
    L: StateLog + Send + Sync + 'static,
    F: Fn() -> Fut,
    Fut: Future<Output = Result<L, Error>>,
{
    // Two-phase: the snapshot below is what the rebuild restores from.
    let store =
        Arc::new(ActionStateStore::new_two_phase(open().await.expect("opening the log"), StoreConfig::default()));
    // Some states before the fault, then the marker the rebuild starts from.
    let mut early = Vec::new();
    for seq in 0..5 {
        for k in 0..TASKS {
            let p = put(&store, k, seq).await;
            assert!(matches!(p.outcome, Outcome::Acked(_)), "{p:?}");
            early.push(p.state);
        }
    }
    let before = store.snapshot(1).await.expect("a snapshot before the fault");

    // The stream: TASKS keys putting one round after another until told to stop.
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = tokio::task::JoinSet::new();
    for k in 0..TASKS {
        let (store, stop) = (Arc::clone(&store), Arc::clone(&stop));
        tasks.spawn(async move {
            let mut puts = Vec::new();
            let mut seq = 5;
            while !stop.load(Ordering::Relaxed) {
                puts.push(put(&store, k, seq).await);
                seq += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            puts
        });
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let stopped_at = Instant::now();
    let server = tokio::task::spawn_blocking(move || {
        server.stop(Duration::from_secs(60)).expect("stopping the server");
        server
    })
    .await
    .expect("the stopping task");
    eprintln!("{name}: server stopped in {:?}", stopped_at.elapsed());
    // Down for longer than the delivery timeout, so puts in flight fail.
    tokio::time::sleep(delivery_timeout + Duration::from_secs(3)).await;
    let restarted_at = Instant::now();
    let server = tokio::task::spawn_blocking(move || restart(&server).expect("restarting the server"))
        .await
        .expect("the restarting task");
    eprintln!("{name}: server restarted as pid {}", server.pid);

    // Keep putting until every task has had puts succeed after the restart (or give up).
    let deadline = restarted_at + Duration::from_secs(120);
    let mut probes = Vec::new();
    loop {
        let p = put(&store, 100 + probes.len() as u64, 0).await;
        let done = p.acked();
        probes.push(p);
        if done {
            break;
        }
        assert!(Instant::now() < deadline, "no put succeeded within 120 s of restarting the server: {probes:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let recovered_after = restarted_at.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    let mut puts = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        puts.extend(joined.expect("a putting task"));
    }

    let acked: Vec<&Put> = puts.iter().filter(|p| p.acked()).collect();
    let failed: Vec<&Put> = puts.iter().filter(|p| !p.acked()).collect();
    let acked_after_restart = acked.iter().filter(|p| p.at > restarted_at).count();
    println!(
        "{name}-stop puts={} acked={} failed={} acked_after_restart={acked_after_restart} recovered_after={:.1}s",
        puts.len(),
        acked.len(),
        failed.len(),
        recovered_after.as_secs_f64()
    );
    assert!(!failed.is_empty(), "no put failed while the broker was down: the server did not stop");
    assert!(acked_after_restart > 0, "no put of the stream succeeded after the restart");

    // Failed puts: within the delivery timeout, nothing indexed.
    for p in failed.iter().copied().chain(probes.iter().filter(|p| !p.acked())) {
        let Outcome::Failed { error, .. } = &p.outcome else { unreachable!() };
        let took = p.took;
        assert!(took <= delivery_timeout + MARGIN, "a put failed only after {took:?}: {error}");
        assert!(store.with_index(|i| i.get(&p.state.key).is_none()), "failed put {:?} is indexed", p.state.key);
    }
    eprintln!("first failure: {:?}", failed.first().map(|p| &p.outcome));

    // Acknowledged puts: indexed, and readable at their position.
    let stored = stored_records(store.log()).await.expect("reading the log after the restart");
    for p in &acked {
        if let Err(e) = check_acked(&store, &stored, p) {
            panic!("{e}");
        }
    }

    // A rebuild from the snapshot taken before the stop, on a fresh log handle. The puts finish
    // no round, so the snapshot completed none and the rebuild prunes nothing: it starts from
    // the snapshot's marker alone.
    let log = open().await.expect("reopening the log after the restart");
    let (rebuilt, restored) =
        ActionStateStore::restore(log, StoreConfig::default(), &Ownership::All, std::slice::from_ref(&before))
            .await
            .expect("the rebuild from the marker taken before the fault");
    let report = restored.rebuild;
    let states = indexed_states(&rebuilt);
    // Everything else the rebuild holds: states put before the marker, the probes after the
    // restart, and puts that failed after their record reached the broker.
    let mut expected: HashMap<StateKey, &ActionState> = early.iter().map(|s| (s.key, s)).collect();
    expected.extend(acked.iter().map(|p| (p.state.key, &p.state)));
    expected.extend(probes.iter().filter(|p| p.acked()).map(|p| (p.state.key, &p.state)));
    let failed_states: HashMap<StateKey, &ActionState> =
        failed.iter().copied().chain(probes.iter().filter(|p| !p.acked())).map(|p| (p.state.key, &p.state)).collect();
    let check = compare_rebuilt(&states, &expected, &failed_states);
    assert!(check.problems.is_empty(), "the rebuild from the marker taken before the fault: {:?}", check.problems);
    let landed_although_failed = check.landed_although_failed;
    println!(
        "{name}-stop rebuild records={} states={} acked={} landed_although_failed={landed_although_failed}",
        report.records,
        states.len(),
        expected.len()
    );
    assert_eq!(states.len() as u64, expected.len() as u64 + landed_although_failed);
}

/// Every record of a log, by partition and offset.
pub(crate) type Stored = BTreeMap<(u32, u64), (Vec<u8>, Vec<u8>)>;

/// Reads every partition of `log` from its start to the end offsets it reports now.
pub(crate) async fn stored_records<L: StateLog>(log: &L) -> Result<Stored, Error> {
    let end = log.end_offsets().await?;
    let mut stored = BTreeMap::new();
    for (partition, &to) in (0u32..).zip(&end) {
        for (offset, key, value) in conformance::read_all(log, partition, 0, to).await? {
            stored.insert((partition, offset), (key, value));
        }
    }
    Ok(stored)
}

/// Whether the acknowledged put `p` is indexed as put and its record is in `stored` at the
/// position it was acknowledged at (exact positions) or after it (lower bounds); `Err` says
/// what is wrong.
pub(crate) fn check_acked<L: StateLog, C: CheckpointForm>(
    store: &ActionStateStore<L, C>,
    stored: &Stored,
    p: &Put,
) -> Result<(), String> {
    let key = &p.state.key;
    let Outcome::Acked(indexed) = &p.outcome else { return Err(format!("put {key:?} was not acknowledged")) };
    if **indexed != p.state {
        return Err(format!("acknowledged state {key:?} was indexed as {indexed:?}"));
    }
    let Some(position) = store.with_index(|i| i.position(key)) else {
        return Err(format!("acknowledged state {key:?} is not indexed"));
    };
    let want = LogRecord::Upsert(p.state.clone());
    // An exact position names the record's offset; a lower bound (Fluss) one at or below it.
    let found = stored
        .range((position.partition, position.offset)..(position.partition + 1, 0))
        .find(|(at, (k, v))| {
            codec::decode(k, v).is_ok_and(|r| r == want) && (!position.exact || at.1 == position.offset)
        })
        .map(|(at, _)| *at);
    match found {
        None => Err(format!(
            "acknowledged record {key:?} is not in partition {} {} offset {}",
            position.partition,
            if position.exact { "at" } else { "at or after" },
            position.offset
        )),
        Some(_) => Ok(()),
    }
}

/// Every state `store`'s index holds, decoded.
pub(crate) fn indexed_states<L: StateLog, C: CheckpointForm>(
    store: &ActionStateStore<L, C>,
) -> BTreeMap<StateKey, ActionState> {
    store.with_index(|i| {
        // A dump scans the whole index: allowed here, as the index's `scan-guard` feature
        // (on whenever the index's own tests are built alongside) requires.
        let _scan = actionstate_index::allow_scans();
        i.dump()
            .into_iter()
            .map(|(k, (r, _))| (k, ActionState::clone(&r.state().expect("a rebuilt state decodes"))))
            .collect()
    })
}

/// How the states a rebuild holds compare with what was put.
#[derive(Debug, Default)]
pub(crate) struct RebuildCheck {
    /// States of failed puts the rebuild holds, equal to what was put: records that reached
    /// the log although their put failed (a lost acknowledgement, which the put contract
    /// allows).
    pub(crate) landed_although_failed: u64,
    /// Acknowledged states the rebuild lacks, or holds changed.
    pub(crate) acked_lost: u64,
    /// States nobody put, or failed puts' states changed.
    pub(crate) unexpected: u64,
    /// What is wrong, one line each.
    pub(crate) problems: Vec<String>,
}

/// Compares the `states` a rebuild holds with the `expected` (acknowledged) ones and those
/// whose put `failed`.
pub(crate) fn compare_rebuilt(
    states: &BTreeMap<StateKey, ActionState>,
    expected: &HashMap<StateKey, &ActionState>,
    failed: &HashMap<StateKey, &ActionState>,
) -> RebuildCheck {
    let mut check = RebuildCheck::default();
    for (key, s) in states {
        match (expected.get(key), failed.get(key)) {
            (Some(_), _) => {}
            (None, Some(f)) if s == *f => check.landed_although_failed += 1,
            (None, Some(_)) => {
                check.unexpected += 1;
                check.problems.push(format!("the rebuild holds failed put {key:?} changed: {s:?}"));
            }
            (None, None) => {
                check.unexpected += 1;
                check.problems.push(format!("the rebuild holds a state nobody put: {key:?}"));
            }
        }
    }
    for (key, e) in expected {
        match states.get(key) {
            Some(s) if s == *e => {}
            Some(s) => {
                check.acked_lost += 1;
                check.problems.push(format!("acknowledged state {key:?} rebuilt as {s:?}"));
            }
            None => {
                check.acked_lost += 1;
                check.problems.push(format!("acknowledged state {key:?} missing after rebuild"));
            }
        }
    }
    check
}
