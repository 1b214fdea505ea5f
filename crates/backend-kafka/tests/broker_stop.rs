//! The broker stops during a stream of puts, and comes back.
//!
//! Stops the broker `cargo xtask services up kafka` started (`KAFKA_PID` in
//! `target/services/kafka.env`) with SIGTERM while tasks put completed states through an
//! `ActionStateStore` on a `KafkaLog`, keeps putting while it is down, starts it again with the
//! same command line and keeps putting until puts succeed again. Then:
//!
//! - every put that returned `Ok` is indexed and its record is readable, byte for byte, at the
//!   position it was acknowledged at;
//! - every put that failed did so within the delivery timeout (plus a margin for the put's own
//!   work) and left no state in the index;
//! - puts succeed after the restart;
//! - a rebuild from a marker taken before the stop holds every acknowledged state, equal to
//!   what was put, and nothing else but states whose put failed after their record may have
//!   reached the broker (a lost acknowledgement: the put contract allows the record to be
//!   durable although the put failed; it is never indexed by the failed put itself).
//!
//! The test restarts the shared broker, so it must not run beside other Kafka tests: it is
//! built only with the `broker-fault-tests` feature, and `cargo xtask ci` runs it on its own
//! after the other tests. It updates the pid file and `KAFKA_PID` so `cargo xtask services down`
//! stops the restarted broker.

#![allow(clippy::unwrap_used)]

use actionstate_core::{
    ActionId, ActionState, Attributes, Event, EventId, KeyId, LogRecord, Progress, StateKey, StateLog, Trigger, Value,
    codec,
};
use actionstate_kafka::{KafkaConfig, KafkaLog};
use actionstate_recovery::testkit::conformance;
use actionstate_recovery::testkit::services::{self, ServerProcess, Service};
use actionstate_recovery::{ActionStateStore, Begin, Ownership, Round, StoreConfig};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const DELIVERY_TIMEOUT: Duration = Duration::from_secs(5);
/// What a failed put may take beyond the delivery timeout: encoding, the index lock and the
/// scheduling of a loaded machine.
const MARGIN: Duration = Duration::from_secs(3);
const TASKS: u64 = 4;
const PARTITIONS: u32 = 4;

/// A completed state of key `k`, round `seq`.
fn state(k: u64, seq: u64) -> (ActionState, Event) {
    let key = KeyId::of(format!("broker-stop-{k}").as_bytes());
    let mut a = Attributes::new();
    a.insert("n".into(), Value::Int(seq as i64));
    let input = Event { id: EventId(u128::from(k) << 64 | u128::from(seq)), event_type: "input".into(), attributes: a };
    let action = ActionId::new("broker-stop");
    let sk = StateKey::new(key, seq, &action, &input, &Trigger::Input);
    let mut out = Attributes::new();
    out.insert("answer".into(), Value::Int((k * 1000 + seq) as i64));
    let output =
        Event { id: EventId(u128::from(k) << 96 | u128::from(seq)), event_type: "answer".into(), attributes: out };
    let s = ActionState {
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
enum Outcome {
    Acked(Arc<ActionState>),
    Failed { took: Duration, error: String },
}

#[derive(Debug)]
struct Put {
    state: ActionState,
    at: Instant,
    outcome: Outcome,
}

async fn put(store: &ActionStateStore<KafkaLog>, k: u64, seq: u64) -> Put {
    let (s, input) = state(k, seq);
    let round = Round::new(s.key.key, seq, &input);
    let at = Instant::now();
    let outcome = match store.begin(&round, &s.action, &input, &Trigger::Input).await {
        Ok(Begin::Fresh(handle, _)) => {
            let Progress::Completed { outputs, memory } = s.progress.clone() else { unreachable!() };
            match store.complete(handle, outputs, memory).await {
                Ok(indexed) => Outcome::Acked(indexed),
                Err(e) => Outcome::Failed { took: at.elapsed(), error: e.to_string() },
            }
        }
        Ok(other) => panic!("state {k}/{seq} was already recorded: {other:?}"),
        Err(e) => Outcome::Failed { took: at.elapsed(), error: e.to_string() },
    };
    Put { state: s, at, outcome }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_stop_during_puts_loses_no_acknowledged_state() {
    // The broker xtask started, not just any bootstrap address: the test restarts its process.
    let Some(env_file) = services::env_file("kafka").filter(|f| f.exists()) else {
        services::skip("kafka", "broker-stop: no broker started by `cargo xtask services up kafka`");
        return;
    };
    let Some(env) = Service::find("kafka", "KAFKA") else {
        services::skip("kafka", "broker-stop");
        return;
    };
    let bootstrap = env.get("KAFKA_BOOTSTRAP").unwrap().to_owned();
    let broker = ServerProcess::of(env.get("KAFKA_PID").unwrap().parse().unwrap(), "kafka.Kafka").unwrap();

    let topic = format!("broker-stop-{}", uuid::Uuid::new_v4().simple());
    let mut config = KafkaConfig::new(&bootstrap, &topic, PARTITIONS);
    config.replication = Some(1);
    config.delivery_timeout = DELIVERY_TIMEOUT;
    config.request_timeout = Duration::from_secs(10);
    config.read_stall_timeout = Duration::from_secs(10);
    let store = Arc::new(ActionStateStore::new(KafkaLog::open(config.clone()).await.unwrap(), StoreConfig::default()));

    // Some states before the fault, then the marker the rebuild starts from.
    let mut early = Vec::new();
    for seq in 0..5 {
        for k in 0..TASKS {
            let p = put(&store, k, seq).await;
            assert!(matches!(p.outcome, Outcome::Acked(_)), "{p:?}");
            early.push(p.state);
        }
    }
    let before = store.snapshot(1).await.unwrap();

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
    let broker = tokio::task::spawn_blocking(move || {
        broker.stop(Duration::from_secs(60)).unwrap();
        broker
    })
    .await
    .unwrap();
    eprintln!("broker stopped in {:?}", stopped_at.elapsed());
    // Down for longer than the delivery timeout, so puts in flight fail.
    tokio::time::sleep(DELIVERY_TIMEOUT + Duration::from_secs(3)).await;
    let restarted_at = Instant::now();
    let broker = tokio::task::spawn_blocking(move || {
        let dir = broker.dir();
        broker.restart(&dir.join("broker.log"), &dir.join("kafka.pid"), &env_file, "KAFKA_PID").unwrap()
    })
    .await
    .unwrap();
    eprintln!("broker restarted as pid {}", broker.pid);

    // Keep putting until every task has had puts succeed after the restart (or give up).
    let deadline = restarted_at + Duration::from_secs(120);
    let mut probes = Vec::new();
    loop {
        let p = put(&store, 100 + probes.len() as u64, 0).await;
        let done = matches!(p.outcome, Outcome::Acked(_));
        probes.push(p);
        if done {
            break;
        }
        assert!(Instant::now() < deadline, "no put succeeded within 120 s of restarting the broker: {probes:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let recovered_after = restarted_at.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    let mut puts = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        puts.extend(joined.unwrap());
    }

    let acked: Vec<&Put> = puts.iter().filter(|p| matches!(p.outcome, Outcome::Acked(_))).collect();
    let failed: Vec<&Put> = puts.iter().filter(|p| matches!(p.outcome, Outcome::Failed { .. })).collect();
    let acked_after_restart = acked.iter().filter(|p| p.at > restarted_at).count();
    println!(
        "broker-stop puts={} acked={} failed={} acked_after_restart={acked_after_restart} recovered_after={:.1}s",
        puts.len(),
        acked.len(),
        failed.len(),
        recovered_after.as_secs_f64()
    );
    assert!(!failed.is_empty(), "no put failed while the broker was down: the broker did not stop");
    assert!(acked_after_restart > 0, "no put of the stream succeeded after the restart");

    // Failed puts: within the delivery timeout, nothing indexed.
    for p in failed.iter().copied().chain(probes.iter().filter(|p| matches!(p.outcome, Outcome::Failed { .. }))) {
        let Outcome::Failed { took, error } = &p.outcome else { unreachable!() };
        assert!(*took <= DELIVERY_TIMEOUT + MARGIN, "a put failed only after {took:?}: {error}");
        assert!(store.with_index(|i| i.get(&p.state.key).is_none()), "failed put {:?} is indexed", p.state.key);
    }
    eprintln!("first failure: {:?}", failed.first().map(|p| &p.outcome));

    // Acknowledged puts: indexed, and readable at their position.
    let log = store.log();
    let end = log.end_offsets().await.unwrap();
    let mut stored = HashMap::new();
    for (partition, &to) in (0u32..).zip(&end) {
        for (offset, key, value) in conformance::read_all(log, partition, 0, to).await {
            stored.insert((partition, offset), (key, value));
        }
    }
    for p in &acked {
        let Outcome::Acked(indexed) = &p.outcome else { unreachable!() };
        assert_eq!(**indexed, p.state);
        let position = store.with_index(|i| i.position(&p.state.key)).unwrap();
        let (key, value) = &stored[&(position.partition, position.offset)];
        let record = codec::decode(key, value).unwrap();
        assert_eq!(record, LogRecord::Upsert(p.state.clone()), "record at {position:?}");
    }

    // A rebuild from the marker taken before the stop, on a fresh log handle.
    let rebuilt = ActionStateStore::new(KafkaLog::open(config).await.unwrap(), StoreConfig::default());
    let report = rebuilt.rebuild(std::slice::from_ref(&before.marker), &Ownership::All, &HashMap::new()).await.unwrap();
    let states = rebuilt.with_index(|i| i.dump());
    // Everything else the rebuild holds: states put before the marker, the probes after the
    // restart, and puts that failed after their record reached the broker.
    let mut expected: HashMap<StateKey, &ActionState> = early.iter().map(|s| (s.key, s)).collect();
    expected.extend(acked.iter().map(|p| (p.state.key, &p.state)));
    expected.extend(probes.iter().filter(|p| matches!(p.outcome, Outcome::Acked(_))).map(|p| (p.state.key, &p.state)));
    let failed_states: HashMap<StateKey, &ActionState> = failed
        .iter()
        .copied()
        .chain(probes.iter().filter(|p| matches!(p.outcome, Outcome::Failed { .. })))
        .map(|p| (p.state.key, &p.state))
        .collect();
    let mut landed_although_failed = 0;
    for (key, (s, _)) in &states {
        match (expected.get(key), failed_states.get(key)) {
            (Some(e), _) => assert_eq!(**s, **e),
            (None, Some(f)) => {
                assert_eq!(**s, **f);
                landed_although_failed += 1;
            }
            (None, None) => panic!("the rebuild holds a state nobody put: {key:?}"),
        }
    }
    for (key, e) in &expected {
        assert_eq!(states.get(key).map(|(s, _)| &**s), Some(*e), "acknowledged state {key:?} missing after rebuild");
    }
    println!(
        "broker-stop rebuild records={} states={} acked={} landed_although_failed={landed_although_failed}",
        report.records,
        states.len(),
        expected.len()
    );
    assert_eq!(states.len(), expected.len() + landed_although_failed);
}
