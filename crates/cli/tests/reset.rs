#![allow(clippy::unwrap_used, reason = "tests")]
//! `actionstate reset` end to end: an operator's repair of one key in a data directory of the
//! embedded store, refused without `--yes`, printed only with `--dry-run`, and once written
//! shown by `inspect` and `explain` and re-executed by the next restore.

use actionstate_core::{ActionId, Attributes, Event, KeyId, Marker, StateLog, Trigger, Value};
use actionstate_file::{FileConfig, FileLog};
use actionstate_recovery::{
    ActionStateStore, Begin, CheckpointForm, Ownership, Retention, Round, Snapshot, StoreConfig,
};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

const KEY: &str = "customer-7";
const ROUNDS: u64 = 4;
const FROM: u64 = 2;
const WHY: &str = "the refund tool paid twice until the fix of 2026-11-30";

fn actionstate(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_actionstate")).args(args).output().unwrap()
}

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Runtime::new().unwrap()
}

fn log(data: &Path) -> FileLog {
    FileLog::open(FileConfig::new(data, 4)).unwrap()
}

fn config() -> StoreConfig {
    StoreConfig { retention: Retention::KeepAll, ..StoreConfig::default() }
}

fn store(data: &Path) -> ActionStateStore<FileLog> {
    ActionStateStore::new(log(data), config())
}

fn question(seq: u64) -> Event {
    let mut attributes = Attributes::new();
    attributes.insert("n".into(), Value::Int(i64::try_from(seq).unwrap()));
    Event::new("question", attributes)
}

/// One round of `KEY`: `answer` on the input emits a `reply`, `notify` runs on it. Returns the
/// names of the actions that ran (the others were reused).
async fn round<L: StateLog, F: CheckpointForm>(store: &ActionStateStore<L, F>, seq: u64) -> Vec<&'static str> {
    let key = KeyId::of(KEY.as_bytes());
    let input = question(seq);
    let r = Round::new(key, seq, &input);
    let mut ran = Vec::new();
    let answer = match store.begin(&r, &ActionId::new("answer"), &input, &Trigger::Input).await.unwrap() {
        Begin::Reuse(state) => state,
        Begin::Resume(h) | Begin::Fresh(h, _) => {
            ran.push("answer");
            store.complete(h, vec![Event::new("reply", Attributes::new())], Vec::new()).await.unwrap()
        }
    };
    let trigger = Trigger::Emitted { producer: answer.key, index: 0 };
    match store.begin(&r, &ActionId::new("notify"), &answer.outputs()[0], &trigger).await.unwrap() {
        Begin::Reuse(_) => {}
        Begin::Resume(h) | Begin::Fresh(h, _) => {
            ran.push("notify");
            store.complete(h, Vec::new(), Vec::new()).await.unwrap();
        }
    }
    ran
}

/// A data directory holding rounds `0..ROUNDS` of `KEY` and of another key.
fn written(data: &Path) {
    runtime().block_on(async {
        let store = store(data);
        for seq in 0..ROUNDS {
            assert_eq!(round(&store, seq).await, ["answer", "notify"]);
            let other = question(seq);
            let r = Round::new(KeyId::of(b"other"), seq, &other);
            let Begin::Fresh(h, _) = store.begin(&r, &ActionId::new("answer"), &other, &Trigger::Input).await.unwrap()
            else {
                panic!("the other key's round {seq} is new");
            };
            store.complete(h, Vec::new(), Vec::new()).await.unwrap();
        }
    });
}

/// The end offsets of the log in `data`.
fn ends(data: &Path) -> Vec<u64> {
    runtime().block_on(async { FileLog::open(FileConfig::new(data, 4)).unwrap().end_offsets().await.unwrap() })
}

#[test]
fn reset_refuses_to_write_without_yes_and_a_dry_run_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    written(&data);
    let url = format!("file:{}", data.display());
    let d = url.as_str();
    let before = ends(&data);
    let args = ["reset", "--log", d, "--key", KEY, "--from-seq", "2", "--reason", WHY];

    let refused = actionstate(&args);
    assert!(!refused.status.success(), "reset without --yes must fail: {}", stdout(&refused));
    assert!(stderr(&refused).contains("refusing to write without --yes"), "{}", stderr(&refused));
    let text = stdout(&refused);
    assert!(text.contains("would remove 4 states in 2 rounds"), "{text}");
    for (seq, action) in [(2, "answer"), (2, "notify"), (3, "answer"), (3, "notify")] {
        assert!(
            text.lines().any(|l| l.contains(&format!("round {seq} ")) && l.contains(action) && l.contains("state ")),
            "round {seq} {action} is listed: {text}"
        );
    }
    assert_eq!(ends(&data), before, "a refused reset wrote nothing");

    let dry = actionstate(&[&args[..], &["--dry-run"]].concat());
    assert!(dry.status.success(), "{}{}", stdout(&dry), stderr(&dry));
    assert!(stdout(&dry).contains("dry run: nothing written"), "{}", stdout(&dry));
    let dry = actionstate(&[&args[..], &["--dry-run", "--json"]].concat());
    assert!(dry.status.success(), "{}", stderr(&dry));
    let plan: serde_json::Value = serde_json::from_str(&stdout(&dry)).unwrap();
    assert_eq!(plan["written"], false, "{plan}");
    assert_eq!(plan["rounds"], 2, "{plan}");
    let listed: Vec<(u64, &str)> = plan["states"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["round"].as_u64().unwrap(), s["action"].as_str().unwrap()))
        .collect();
    assert_eq!(listed, [(2, "answer"), (2, "notify"), (3, "answer"), (3, "notify")]);
    assert!(plan["states"][0]["state_key"].as_str().is_some_and(|k| !k.is_empty()), "{plan}");
    assert_eq!(ends(&data), before, "a dry run wrote nothing");

    let both = actionstate(&[&args[..], &["--dry-run", "--yes"]].concat());
    assert!(!both.status.success(), "--dry-run and --yes exclude each other");
    let long = "x".repeat(1025);
    let too_long = actionstate(&["reset", "--log", d, "--key", KEY, "--from-seq", "2", "--reason", &long, "--yes"]);
    assert!(!too_long.status.success());
    assert!(stderr(&too_long).contains("exceeds the limit of 1024 bytes"), "{}", stderr(&too_long));
    assert_eq!(ends(&data), before, "a refused reason wrote nothing");
}

#[test]
fn reset_then_inspect_shows_the_operator_audit_and_a_restore_reruns_exactly_those_rounds() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    written(&data);
    let url = format!("file:{}", data.display());
    let d = url.as_str();

    let reset = actionstate(&["reset", "--log", d, "--key", KEY, "--from-seq", "2", "--reason", WHY, "--yes"]);
    assert!(reset.status.success(), "{}{}", stdout(&reset), stderr(&reset));
    assert!(stdout(&reset).contains("removes 4 states in 2 rounds"), "{}", stdout(&reset));
    assert!(stdout(&reset).contains("wrote an audit record"), "{}", stdout(&reset));

    let inspect = actionstate(&["inspect", "--log", d, "--key", KEY, "--json"]);
    assert!(inspect.status.success(), "{}", stderr(&inspect));
    let view: serde_json::Value = serde_json::from_str(&stdout(&inspect)).unwrap();
    let audits = view["audit"].as_array().unwrap();
    let operator: Vec<&serde_json::Value> = audits.iter().filter(|a| a["reason"] == "operator").collect();
    assert_eq!(operator.len(), 1, "{view}");
    assert_eq!(operator[0]["text"], WHY, "{view}");
    assert_eq!(operator[0]["seq"], FROM, "{view}");
    assert_eq!(operator[0]["removed"], 4, "{view}");
    let rounds: Vec<u64> =
        view["index"][0]["rounds"].as_array().unwrap().iter().map(|r| r["seq"].as_u64().unwrap()).collect();
    assert_eq!(rounds, [0, 1], "only the rounds before the repair remain: {view}");

    let table = stdout(&actionstate(&["inspect", "--log", d, "--key", KEY]));
    assert!(table.contains(&format!("operator {WHY:?}")), "{table}");
    let explain = actionstate(&["explain", "--log", d, "--key", KEY, "--seq", "3", "--action", "answer"]);
    assert!(explain.status.success());
    assert!(stdout(&explain).contains(&format!("audit: operator {WHY:?} removed 4")), "{}", stdout(&explain));
    let explain = actionstate(&["explain", "--log", d, "--key", KEY, "--seq", "3", "--action", "answer", "--json"]);
    let explained: serde_json::Value = serde_json::from_str(&stdout(&explain)).unwrap();
    assert_eq!(explained["audit"][0]["text"], WHY, "{explained}");
    let verify = actionstate(&["verify", "--log", d]);
    assert!(verify.status.success(), "{}", stdout(&verify));

    // A restore from the start of the log replays the repair: the runtime re-executes exactly
    // rounds 2 and 3.
    runtime().block_on(async {
        let log = log(&data);
        // From offset 0 of every partition, no round completed.
        let start = Snapshot {
            checkpoint: 0,
            marker: Marker::new(log.identity().clone(), vec![0; 4]),
            completed: Arc::default(),
        };
        let (store, _) = ActionStateStore::restore(log, config(), &Ownership::All, &[start]).await.unwrap();
        for seq in 0..ROUNDS {
            let want: &[&str] = if seq >= FROM { &["answer", "notify"] } else { &[] };
            assert_eq!(round(&store, seq).await, want, "round {seq}");
        }
    });
}
