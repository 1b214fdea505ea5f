#![allow(clippy::unwrap_used, reason = "tests")]
//! The commands as an operator runs them on the embedded store, with bad input: a command
//! never deletes or writes what it was not asked to, refuses a log it would mix its history
//! into, never prints a secret, and gives the hint the error calls for.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

fn actionstate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_actionstate")).args(args).output().unwrap()
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// Every file under `dir` with its length and a hash of its bytes: what "unchanged" is
/// checked against.
fn contents(dir: &Path) -> BTreeMap<String, (usize, u64)> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            for (name, bytes) in contents(&path) {
                out.insert(format!("{}/{name}", path.file_name().unwrap().to_string_lossy()), bytes);
            }
        } else {
            let bytes = std::fs::read(&path).unwrap();
            let mut h = std::hash::DefaultHasher::new();
            std::hash::Hash::hash(&bytes, &mut h);
            out.insert(
                path.file_name().unwrap().to_string_lossy().into_owned(),
                (bytes.len(), std::hash::Hasher::finish(&h)),
            );
        }
    }
    out
}

/// A demo's data directory in `parent`: `parent/data`, and its URL.
fn demo_store(parent: &Path) -> (std::path::PathBuf, String) {
    let data = parent.join("data");
    let url = format!("file:{}", data.display());
    let out = actionstate(&["demo", "--json", "--inputs", "40", "--keys", "4", "--log", &url]);
    assert!(out.status.success(), "demo failed: {}", text(&out));
    (data, url)
}

/// Row 1: `bench` on a directory holding a store and two other files refuses and deletes
/// nothing; on a missing directory it removes what it created; on an empty one it leaves the
/// directory as it found it.
#[test]
fn bench_never_deletes_a_directory_it_did_not_create() {
    let dir = tempfile::tempdir().unwrap();
    let (data, _) = demo_store(dir.path());
    std::fs::write(data.join("notes.txt"), b"mine").unwrap();
    std::fs::write(data.join("other.bin"), b"also mine").unwrap();
    let before = contents(&data);
    let out = actionstate(&["bench", "--log", &format!("file:{}", data.display()), "--puts", "10", "--records", "100"]);
    assert!(!out.status.success(), "bench ran on a directory of the user's: {}", text(&out));
    assert!(text(&out).contains("is not empty") && text(&out).contains("notes.txt"), "{}", text(&out));
    assert_eq!(contents(&data), before, "bench changed the user's files");

    let fresh = dir.path().join("fresh");
    let out =
        actionstate(&["bench", "--log", &format!("file:{}", fresh.display()), "--puts", "10", "--records", "100"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!fresh.exists(), "bench left the directory it created");

    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let out =
        actionstate(&["bench", "--log", &format!("file:{}", empty.display()), "--puts", "10", "--records", "100"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(empty.is_dir() && contents(&empty).is_empty(), "bench removed or left something in an empty directory");
}

/// Row 2: `soak` and `demo` on an existing store refuse it, naming what they found, and write
/// nothing to it; on a directory of other files they refuse too.
#[test]
fn soak_and_demo_refuse_a_log_that_holds_anything() {
    let dir = tempfile::tempdir().unwrap();
    let (data, url) = demo_store(dir.path());
    let before = contents(&data);
    for args in [vec!["soak", "--log", &url, "--inputs", "2000"], vec!["demo", "--log", &url, "--inputs", "40"]] {
        let out = actionstate(&args);
        assert!(!out.status.success(), "{args:?} wrote into an existing store: {}", text(&out));
        assert!(text(&out).contains("is not empty: it holds"), "{args:?}: {}", text(&out));
        assert_eq!(contents(&data), before, "{args:?} changed the store");
    }
    let others = dir.path().join("others");
    std::fs::create_dir(&others).unwrap();
    std::fs::write(others.join("keep.txt"), b"mine").unwrap();
    let out = actionstate(&["demo", "--log", &format!("file:{}", others.display()), "--inputs", "40"]);
    assert!(!out.status.success() && text(&out).contains("keep.txt"), "{}", text(&out));
    assert_eq!(contents(&others).len(), 1, "the demo created a store beside the user's file");
}

/// Row 7: `reset` refuses a key with no recorded state, a range of rounds it does not have,
/// and an empty reason, and writes nothing.
#[test]
fn reset_refuses_unknown_keys_and_empty_reasons_and_writes_nothing() {
    // Refused with `--yes` too: the plan is made on the log opened read-only, so the data
    // file stays byte-identical (it was opened for writing first, and its bytes changed).
    let dir = tempfile::tempdir().unwrap();
    let (data, url) = demo_store(dir.path());
    let before = actionstate(&["verify", "--log", &url, "--json"]);
    assert!(before.status.success(), "{}", text(&before));
    let bytes = contents(&data);
    for (args, expected) in [
        (vec!["--key", "no-such-key", "--from-seq", "0", "--reason", "x", "--yes"], "has no recorded state"),
        (vec!["--key", "sim-key-0", "--from-seq", "100000", "--reason", "x", "--yes"], "has no state from round"),
        (vec!["--key", "sim-key-0", "--from-seq", "0", "--reason", "", "--yes"], "--reason is empty"),
        (vec!["--key", "sim-key-0", "--from-seq", "0", "--reason", "   ", "--yes"], "--reason is empty"),
        (vec!["--key", "no-such-key", "--from-seq", "0", "--reason", "x", "--dry-run"], "has no recorded state"),
    ] {
        let mut all = vec!["reset", "--log", &url];
        all.extend(args.iter().copied());
        let out = actionstate(&all);
        assert!(!out.status.success(), "{args:?} was accepted: {}", text(&out));
        assert!(text(&out).contains(expected), "{args:?}: {}", text(&out));
        assert!(text(&out).contains("nothing written") || expected == "--reason is empty", "{}", text(&out));
        assert_eq!(contents(&data), bytes, "{args:?}: a refused reset changed the data directory's bytes");
    }
    let after = actionstate(&["verify", "--log", &url, "--json"]);
    let records = |o: &Output| serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()["records"].clone();
    assert_eq!(records(&after), records(&before), "a refused reset wrote records");
    assert!(data.exists());
}

/// Row 8 and 9: a URL with an inline password, or a secret in the user part, is refused by
/// every command without printing the secret, whichever backend it names and whether or not
/// that backend is compiled in.
#[test]
fn no_command_prints_a_secret_from_a_url() {
    const SECRET: &str = "s3cr3t-value-42";
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    let urls = [
        format!("file:{d}?password={SECRET}"),
        format!("file:{d}?sasl.password={SECRET}&partitions=2"),
        format!("kafka://127.0.0.1:1/t?username=u&password={SECRET}"),
        format!("kafak://127.0.0.1:1/t?username=u&password={SECRET}"),
        format!("kafka://u:{SECRET}@127.0.0.1:1/t"),
        format!("fluss://127.0.0.1:1/db/t?username=u&token={SECRET}"),
        format!("memory:x?password={SECRET}"),
    ];
    for url in &urls {
        for args in [
            vec!["inspect", "--log", url],
            vec!["verify", "--log", url],
            vec!["explain", "--log", url, "--key", "k", "--seq", "0", "--action", "a"],
            vec!["reset", "--log", url, "--key", "k", "--from-seq", "0", "--reason", "r", "--dry-run"],
            vec!["demo", "--log", url, "--inputs", "10"],
            vec!["soak", "--log", url, "--inputs", "10"],
            vec!["bench", "--log", url, "--puts", "1", "--records", "1"],
        ] {
            let out = actionstate(&args);
            assert!(!out.status.success(), "{args:?} accepted a URL with a secret");
            assert!(!text(&out).contains(SECRET), "{args:?} printed the secret: {}", text(&out));
            assert!(text(&out).contains("***"), "{args:?} does not show where the secret was: {}", text(&out));
        }
    }
}

/// Row 12: a demo started while another holds the same empty directory (during its in-memory
/// rehearsal) refuses, and the first one runs to its normal end.
#[test]
fn a_second_demo_on_the_same_log_refuses_while_the_first_runs() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let url = format!("file:{}", data.display());
    let first = Command::new(env!("CARGO_BIN_EXE_actionstate"))
        .args(["demo", "--json", "--inputs", "200", "--log", &url])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The first demo claims the log before its rehearsals: its store file appears.
    let started = std::time::Instant::now();
    while !data.join("actionstate.redb").exists() {
        assert!(started.elapsed().as_secs() < 60, "the first demo never created its store");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let second = actionstate(&["demo", "--json", "--inputs", "200", "--log", &url]);
    let first = first.wait_with_output().unwrap();
    assert!(first.status.success(), "the first demo failed: {}", text(&first));
    assert!(!second.status.success(), "two demos wrote into one log: {}", text(&second));
    let why = text(&second);
    assert!(why.contains("is not empty") || why.contains("already open"), "{why}");
    let summary: serde_json::Value = serde_json::from_slice(&first.stdout).unwrap();
    assert_eq!(summary["matches_crash_free_run"], true, "{summary}");
    assert!(summary["reused"].as_u64().unwrap() > 0, "{summary}");
}

/// Row 11: a demo on more partitions than its rehearsal assumed still crashes and restores as
/// planned, or fails saying which part of its plan did not happen; it never reports a run
/// without crashes and reuse as a success.
#[test]
fn the_demo_fails_when_its_plan_did_not_happen() {
    let dir = tempfile::tempdir().unwrap();
    for partitions in [1, 3, 16] {
        let url = format!("file:{}?partitions={partitions}", dir.path().join(format!("p{partitions}")).display());
        let out = actionstate(&["demo", "--json", "--inputs", "80", "--log", &url]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let summary: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap_or_default();
        if out.status.success() {
            assert!(summary["crashes"].as_u64().unwrap() >= 2, "{summary}");
            assert!(summary["restores"].as_u64().unwrap() >= summary["crashes"].as_u64().unwrap(), "{summary}");
            assert!(summary["reused"].as_u64().unwrap() > 0, "{summary}");
        } else {
            assert!(text(&out).contains("the demo's plan did not happen"), "{}", text(&out));
        }
    }
    // One input cannot hold three crashes and a reuse: the demo says so and fails.
    let url = format!("file:{}", dir.path().join("tiny").display());
    let out = actionstate(&["demo", "--json", "--inputs", "1", "--keys", "1", "--log", &url]);
    assert!(!out.status.success(), "a demo without its crashes passed: {}", text(&out));
    assert!(text(&out).contains("the demo's plan did not happen"), "{}", text(&out));
}

/// Row 13: the hint fits the error: a path that is a regular file gets no broker advice, and
/// a directory another process holds is named as such.
#[test]
fn hints_match_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plain-file");
    std::fs::write(&file, b"not a directory").unwrap();
    for command in ["inspect", "verify"] {
        let out = actionstate(&[command, "--log", &format!("file:{}", file.display())]);
        assert!(!out.status.success());
        let err = text(&out);
        assert!(!err.contains("xtask services") && !err.contains("close the other"), "{command}: {err}");
        assert!(err.contains("hint: "), "{command}: no hint: {err}");
    }
    let out = actionstate(&["demo", "--log", &format!("file:{}", file.display()), "--inputs", "10"]);
    assert!(!out.status.success());
    assert!(!text(&out).contains("xtask services"), "{}", text(&out));
}

/// Row 7: an operator finds a key by the name the application gave it: `inspect` lists each
/// key with the label its states carry (the simulator names its keys), and `--key NAME`
/// selects it.
#[test]
fn inspect_shows_the_names_the_application_gave_its_keys() {
    let dir = tempfile::tempdir().unwrap();
    let (_, url) = demo_store(dir.path());
    let out = actionstate(&["inspect", "--log", &url, "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let labels: Vec<&str> = report["index"].as_array().unwrap().iter().filter_map(|k| k["label"].as_str()).collect();
    assert_eq!(labels.len(), 4, "every key of the demo has its name: {report}");
    for k in 0..4 {
        assert!(labels.contains(&format!("sim-key-{k}").as_str()), "{labels:?}");
    }
    let one = actionstate(&["inspect", "--log", &url, "--key", "sim-key-2"]);
    assert!(text(&one).contains("\nkey sim-key-2 ("), "{}", text(&one));
    assert!(!text(&one).contains("sim-key-1"), "{}", text(&one));
}
