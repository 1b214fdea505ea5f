#![allow(clippy::unwrap_used, reason = "tests")]
//! The `actionstate` binary end to end: demo, inspect, explain, verify, bench arguments.

use actionstate_core::{KeyId, StateLog, WireRecord};
use std::process::Command;

fn actionstate(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_actionstate")).args(args).output().unwrap()
}

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// What every demo run must report, on any backend: it ran on `backend` over `inputs` inputs,
/// crashed and restored, reused completed actions from the log, executed no side effect twice,
/// lost no acknowledged state, and ended as a crash-free run ends.
fn assert_demo_summary(summary: &serde_json::Value, backend: &str, inputs: u64) {
    assert_eq!(summary["backend"], backend, "{summary}");
    assert_eq!(summary["inputs"], inputs, "{summary}");
    assert_eq!(summary["duplicate_side_effects"], 0, "{summary}");
    assert_eq!(summary["lost_acknowledged"], 0, "{summary}");
    assert_eq!(summary["matches_crash_free_run"], true, "{summary}");
    assert!(summary["crashes"].as_u64().unwrap() >= 1, "the demo must crash: {summary}");
    assert!(summary["restores"].as_u64().unwrap() >= 1, "the demo must restore: {summary}");
    assert!(summary["reused"].as_u64().unwrap() > 0, "a restore must reuse completed actions: {summary}");
    assert!(summary["rebuild_records"].as_u64().unwrap() > 0, "a restore must read the log: {summary}");
    assert_eq!(summary["idempotency"], true, "{summary}");
    assert!(summary["external_effects"].as_u64().unwrap() > 0, "the calls reach the external service: {summary}");
    assert_eq!(summary["external_duplicates"], 0, "the service deduplicates by key: {summary}");
    // The approval step: actions waited, were approved, rejected or timed out, and resumed
    // with their outcome exactly once.
    let waits = &summary["waits"];
    for figure in ["made", "resolved", "rejected", "timed_out", "resumed"] {
        assert!(waits[figure].as_u64().unwrap() > 0, "no approval {figure}: {summary}");
    }
    assert_eq!((waits["delivered_twice"].as_u64(), waits["lost"].as_u64()), (Some(0), Some(0)), "{summary}");
    let outcomes = ["resolved", "rejected", "timed_out"].map(|f| waits[f].as_u64().unwrap()).iter().sum::<u64>();
    assert_eq!(outcomes, waits["made"].as_u64().unwrap(), "every wait made ended once: {summary}");
}

/// The demo's comparison: the same crashes with and without idempotency keys. With them, the
/// call a crash makes run again is deduplicated by the service and a reconciled call is found
/// by its key; without them, both take effect again.
#[test]
fn the_demo_without_idempotency_keys_shows_the_duplicates_the_keys_prevent() {
    let run = |extra: &[&str]| {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("file:{}", dir.path().join("data").to_str().unwrap());
        let out = actionstate(&[&["demo", "--json", "--log", &url][..], extra].concat());
        assert!(out.status.success(), "demo failed: {}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
        serde_json::from_str::<serde_json::Value>(stdout(&out).trim()).unwrap()
    };
    let keyed = run(&[]);
    assert_demo_summary(&keyed, "file", 200);
    let deduplicated = keyed["external_deduplicated"].as_u64().unwrap();
    assert!(deduplicated >= 1, "a call ran again and the service answered it from its ledger: {keyed}");
    assert!(keyed["durable_calls_reconciled"].as_u64().unwrap() >= 1, "{keyed}");
    assert!(keyed["external_lookups"].as_u64().unwrap() >= 1, "the reconciler asks the service: {keyed}");
    let unkeyed = run(&["--no-idempotency"]);
    assert_eq!(unkeyed["idempotency"], false, "{unkeyed}");
    assert_eq!(unkeyed["matches_crash_free_run"], true, "{unkeyed}");
    assert!(
        unkeyed["external_duplicates"].as_u64().unwrap() > deduplicated,
        "without keys the call run again and the reconciled one both take effect twice: {unkeyed}"
    );
    assert_eq!(unkeyed["crashes"], keyed["crashes"], "the same crashes: {keyed} {unkeyed}");
}

#[test]
fn demo_reports_no_duplicates_and_no_lost_states_and_the_directory_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data = data.to_str().unwrap();
    let url = format!("file:{data}");
    let out = actionstate(&["demo", "--json", "--inputs", "40", "--keys", "4", "--log", &url]);
    assert!(out.status.success(), "demo failed: {}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
    let summary: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    for key in [
        "backend",
        "inputs",
        "executed",
        "reused",
        "resumed",
        "reexecuted",
        "duplicate_side_effects",
        "lost_acknowledged",
    ] {
        assert!(summary.get(key).is_some(), "summary lacks `{key}`: {summary}");
    }
    assert_demo_summary(&summary, "file", 40);
    assert_offline_tools_read(&url, 4);
}

/// `verify`, `inspect` and `explain` on the log a 40-input demo over `keys` keys wrote: every
/// record decodes, the index invariants hold, every key is there, and a completed action is
/// explained as reused. On any backend.
fn assert_offline_tools_read(url: &str, keys: u64) {
    let verify = actionstate(&["verify", "--log", url]);
    assert!(verify.status.success(), "verify failed: {}{}", stdout(&verify), String::from_utf8_lossy(&verify.stderr));
    assert!(stdout(&verify).contains("0 corrupt, index invariants hold"), "{}", stdout(&verify));
    let verify = actionstate(&["verify", "--log", url, "--json"]);
    let report: serde_json::Value = serde_json::from_str(stdout(&verify).trim()).unwrap();
    assert_eq!(report["ok"], true, "{report}");
    assert!(report["records"].as_u64().unwrap() > 40, "{report}");

    let inspect = actionstate(&["inspect", "--log", url, "--json"]);
    assert!(inspect.status.success(), "{}", String::from_utf8_lossy(&inspect.stderr));
    let view: serde_json::Value = serde_json::from_str(&stdout(&inspect)).unwrap();
    assert_eq!(view["keys"], keys, "{view}");
    assert_eq!(view["corrupt_records"], 0);

    // The first round retention kept (it reclaims the rounds no retained checkpoint needs).
    let mut explained = Vec::new();
    for seq in 0..12 {
        let seq = seq.to_string();
        let explain = actionstate(&["explain", "--log", url, "--key", "sim-key-0", "--seq", &seq, "--action", "plan"]);
        assert!(explain.status.success(), "{}", String::from_utf8_lossy(&explain.stderr));
        explained.push(stdout(&explain));
        if explained.last().is_some_and(|e| e.contains("reuse: completed")) {
            return;
        }
    }
    panic!("no round of sim-key-0 is explained as reused:\n{}", explained.join("\n"));
}

#[test]
fn verify_names_the_position_of_a_corrupt_record_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    {
        let log = actionstate_file::FileLog::open(actionstate_file::FileConfig::new(&data, 2)).unwrap();
        let rt = tokio::runtime::Runtime::new().unwrap();
        let key_id = KeyId::of(b"broken");
        let mut key = vec![1u8];
        key.extend_from_slice(&key_id.0);
        rt.block_on(log.append(WireRecord { key_id, key, value: b"not an envelope".to_vec() })).unwrap();
    }
    let url = format!("file:{}", data.display());
    let out = actionstate(&["verify", "--log", &url]);
    assert!(!out.status.success(), "verify must fail on a corrupt record");
    let text = stdout(&out);
    assert!(text.contains("corrupt record at partition") && text.contains("offset 0"), "{text}");
    assert!(text.contains("bad magic"), "{text}");
    let out = actionstate(&["verify", "--log", &url, "--json"]);
    assert!(!out.status.success());
    let report: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!((report["ok"].as_bool(), report["corrupt"][0]["offset"].as_u64()), (Some(false), Some(0)), "{report}");
}

#[test]
fn inspecting_a_directory_without_a_store_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = actionstate(&["inspect", "--log", &format!("file:{}", dir.path().display())]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no actionstate database"), "{err}");
    let lines: Vec<&str> = err.trim_end().lines().collect();
    assert_eq!(lines.len(), 2, "the error is one line, then its hint: {err}");
    assert!(lines[0].starts_with("error: ") && lines[1].starts_with("hint: no store there"), "{err}");
    assert!(!err.contains("xtask services") && !err.contains("close"), "a hint for another problem: {err}");
    assert_eq!(err.matches("no actionstate database").count(), 1, "a cause is repeated: {err}");
}

/// The demo on a server-backed log (`backend` names the service too, `prefix` its settings),
/// checked as on the embedded store. The server comes from `cargo xtask
/// services up` (or the environment); without one the test prints the skip marker, which
/// `cargo xtask ci` turns into a failure.
#[cfg(any(feature = "kafka", feature = "fluss"))]
fn demo_on_server(backend: &str, prefix: &str, test: &str) {
    use actionstate_testkit::services::Service;
    let Some(server) = Service::require(backend, prefix, test) else { return };
    let bootstrap = server.get(&format!("{prefix}_BOOTSTRAP")).unwrap().to_owned();
    let name = format!("demo_{}_{}", std::process::id(), backend);
    let url = match backend {
        "kafka" => format!("kafka://{bootstrap}/{name}?replication=1"),
        _ => format!("fluss://{bootstrap}/actionstate_demo/{name}"),
    };
    let out = actionstate(&["demo", "--json", "--inputs", "40", "--keys", "4", "--log", &url]);
    assert!(out.status.success(), "demo on {backend} failed: {}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
    let summary: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_demo_summary(&summary, backend, 40);
    assert_offline_tools_read(&url, 4);
    // A log that does not exist is an error, and reading it creates nothing.
    let absent = url.replace(&name, &format!("{name}_absent"));
    for _ in 0..2 {
        let out = actionstate(&["inspect", "--log", &absent]);
        assert!(!out.status.success(), "inspect of a missing log succeeded");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("does not exist"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // The same log again holds the first run's records: refused, not mixed.
    let again = actionstate(&["demo", "--json", "--inputs", "40", "--keys", "4", "--log", &url]);
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("is not empty"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    // An operator's repair offline, on the server's log: refused without --yes, then written;
    // inspect shows the audit it wrote and the log still verifies.
    let reset = ["reset", "--log", url.as_str(), "--key", "sim-key-0", "--from-seq", "3", "--reason", "tool fixed"];
    let refused = actionstate(&reset);
    assert!(!refused.status.success(), "reset wrote without --yes: {}", stdout(&refused));
    let done = actionstate(&[&reset[..], &["--yes"]].concat());
    assert!(
        done.status.success(),
        "reset on {backend} failed: {}{}",
        stdout(&done),
        String::from_utf8_lossy(&done.stderr)
    );
    assert!(stdout(&done).contains("wrote an audit record"), "{}", stdout(&done));
    let inspect = actionstate(&["inspect", "--log", &url, "--key", "sim-key-0", "--json"]);
    assert!(inspect.status.success(), "{}", String::from_utf8_lossy(&inspect.stderr));
    let view: serde_json::Value = serde_json::from_str(&stdout(&inspect)).unwrap();
    let operator: Vec<&serde_json::Value> =
        view["audit"].as_array().unwrap().iter().filter(|a| a["reason"] == "operator").collect();
    assert_eq!(operator.len(), 1, "{view}");
    assert_eq!((operator[0]["text"].as_str(), operator[0]["seq"].as_u64()), (Some("tool fixed"), Some(3)), "{view}");
    let verify = actionstate(&["verify", "--log", &url]);
    assert!(verify.status.success(), "{}", stdout(&verify));
}

/// The server tests below exist only with the `kafka` and `fluss` features, which the binary
/// leaves off by default. Where the servers are required (`cargo xtask ci`), a build without
/// them would pass by testing nothing: it fails here instead.
#[test]
fn server_backends_are_compiled_in_where_servers_are_required() {
    let compiled_in = cfg!(feature = "kafka") && cfg!(feature = "fluss");
    if std::env::var_os("ACTIONSTATE_REQUIRE_SERVICES").is_some() && !compiled_in {
        panic!(
            "ACTIONSTATE_REQUIRE_SERVICES is set, but the tests were built without the kafka and fluss \
             features (cargo test -p actionstate --features kafka,fluss)"
        );
    }
}

#[test]
#[cfg(feature = "kafka")]
fn demo_on_kafka_reports_no_duplicates_and_no_lost_states() {
    demo_on_server("kafka", "KAFKA", "demo_on_kafka_reports_no_duplicates_and_no_lost_states");
}

#[test]
#[cfg(feature = "fluss")]
fn demo_on_fluss_reports_no_duplicates_and_no_lost_states() {
    demo_on_server("fluss", "FLUSS", "demo_on_fluss_reports_no_duplicates_and_no_lost_states");
}

/// Every command that takes `--log` refuses a URL that names no log, saying why, before it
/// touches anything.
#[test]
fn a_bad_log_url_is_refused_with_what_is_wrong() {
    for command in ["demo", "bench", "soak"] {
        for (url, says) in [
            ("redis://h:1/t", "unknown backend"),
            ("kafka://h:1/t?partitions=0", "positive integer"),
            ("kafka://h:1/t?username=u&password=hunter2", "password_env"),
            ("file:", "needs a directory"),
        ] {
            let out = actionstate(&[command, "--log", url]);
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{command} --log {url} succeeded");
            if url.starts_with("kafka") && !cfg!(feature = "kafka") {
                assert!(err.contains("`kafka` cargo feature"), "{command} {url}: {err}");
                continue;
            }
            assert!(err.contains(says), "{command} --log {url}: {err}");
            assert!(!err.contains("hunter2"), "{command} printed a secret: {err}");
        }
    }
}

#[test]
fn soak_prints_a_json_line_per_run_with_growth_and_snapshot_entries() {
    let out = actionstate(&["soak", "--inputs", "4000", "--checkpoint-every", "500", "--compare", "--json"]);
    assert!(out.status.success(), "soak failed: {}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
    let lines: Vec<serde_json::Value> = stdout(&out).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 2, "one line per run: {lines:?}");
    for (line, retention) in lines.iter().zip(["3", "all"]) {
        assert_eq!(line["retention"], retention, "{line}");
        assert_eq!(line["inputs"], 4000, "{line}");
        for field in ["inputs_per_s", "disk_growth", "rss_growth", "snapshot_entries", "snapshot_ms_max"] {
            assert!(line[field].as_f64().is_some_and(|v| v > 0.0), "{field} in {line}");
        }
    }
    assert!(lines[0]["disk_growth"].as_f64() < lines[1]["disk_growth"].as_f64(), "{lines:?}");
}

/// `soak --owners`: a line for the owners' run, one for a single owner's on a second log, and
/// the comparison; the rescale shows in the first.
#[test]
fn soak_with_owners_compares_them_with_one_owner() {
    let args =
        ["soak", "--inputs", "4000", "--checkpoint-every", "200", "--owners", "2", "--rescale-to", "3", "--json"];
    let out = actionstate(&args);
    assert!(out.status.success(), "soak failed: {}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
    let lines: Vec<serde_json::Value> = stdout(&out).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!((&lines[0]["owners"], &lines[0]["rescale_to"]), (&2.into(), &3.into()), "{}", lines[0]);
    assert_eq!((&lines[1]["owners"], &lines[1]["rescale_to"]), (&1.into(), &serde_json::Value::Null), "{}", lines[1]);
    for line in &lines[..2] {
        assert_eq!(line["inputs"], 4000, "{line}");
        assert!(line["snapshot_entries"].as_u64().is_some_and(|v| v > 0), "{line}");
    }
    let ratio = lines[2]["throughput_ratio"].as_f64().unwrap();
    let (many, one) =
        (lines[2]["inputs_per_s"].as_f64().unwrap(), lines[2]["one_owner_inputs_per_s"].as_f64().unwrap());
    assert!((ratio - many / one).abs() < 0.01, "{}", lines[2]);
    assert_eq!(lines[2]["owners"], 2);
}

/// `soak --owners --pairs 2`: the owners and the one owner twice each, the second pair in the
/// other order, each on a log of its own; the comparison gives both ratios and their median.
#[test]
fn soak_pairs_alternate_the_order_and_report_the_median_ratio() {
    let args = ["soak", "--inputs", "2000", "--checkpoint-every", "200", "--owners", "2", "--pairs", "2", "--json"];
    let out = actionstate(&args);
    assert!(out.status.success(), "soak failed: {}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
    let lines: Vec<serde_json::Value> = stdout(&out).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 5, "{lines:?}");
    let owners: Vec<_> = lines[..4].iter().map(|l| l["owners"].as_u64().unwrap()).collect();
    assert_eq!(owners, [2, 1, 1, 2], "{lines:?}");
    let logs: std::collections::BTreeSet<_> = lines[..4].iter().map(|l| l["log"].to_string()).collect();
    assert_eq!(logs.len(), 4, "every run on a log of its own: {logs:?}");
    let rate = |l: &serde_json::Value| l["inputs_per_s"].as_f64().unwrap();
    let expected = [rate(&lines[0]) / rate(&lines[1]), rate(&lines[3]) / rate(&lines[2])];
    let compare = &lines[4];
    assert_eq!(compare["pairs"], 2, "{compare}");
    let ratios: Vec<f64> =
        compare["throughput_ratios"].as_array().unwrap().iter().map(|r| r.as_f64().unwrap()).collect();
    assert_eq!(ratios.len(), 2, "{compare}");
    for (got, want) in ratios.iter().zip(expected) {
        assert!((got - want).abs() < 0.01, "{got} against {want}: {compare}");
    }
    let median = compare["throughput_ratio"].as_f64().unwrap();
    assert!((median - f64::midpoint(ratios[0], ratios[1])).abs() < 0.002, "{compare}");
    let refused = actionstate(&["soak", "--inputs", "10", "--pairs", "2"]);
    assert!(!refused.status.success(), "--pairs without --owners was accepted");
}

/// `soak --owners --warm-up N`: the owners run N inputs first on a log of their own, reported
/// as the warm-up and left out of the comparison, which pairs only the measured runs.
#[test]
fn soak_warm_up_runs_first_and_is_left_out_of_the_comparison() {
    let args = ["soak", "--inputs", "2000", "--checkpoint-every", "200", "--owners", "2", "--warm-up", "600", "--json"];
    let out = actionstate(&args);
    assert!(out.status.success(), "soak failed: {}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
    let lines: Vec<serde_json::Value> = stdout(&out).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert_eq!(lines[0]["warm_up"], true, "{}", lines[0]);
    assert_eq!((lines[0]["inputs"].as_u64(), lines[0]["owners"].as_u64()), (Some(600), Some(2)), "{}", lines[0]);
    assert!(lines[0]["log"].as_str().unwrap().ends_with("warmup"), "{}", lines[0]);
    for measured in &lines[1..3] {
        assert_eq!((measured["warm_up"].as_bool(), measured["inputs"].as_u64()), (Some(false), Some(2000)));
    }
    let ratio = lines[3]["throughput_ratio"].as_f64().unwrap();
    let rate = |l: &serde_json::Value| l["inputs_per_s"].as_f64().unwrap();
    assert!((ratio - rate(&lines[1]) / rate(&lines[2])).abs() < 0.01, "{}", lines[3]);
    let refused = actionstate(&["soak", "--inputs", "10", "--warm-up", "5"]);
    assert!(!refused.status.success(), "--warm-up without --owners was accepted");
}

/// `soak --owners --two-phase`: the soak keeps the checkpoints; both runs say so, and the
/// owners reclaimed (the disk stays flat) although no checkpoint is written into the log.
#[test]
fn soak_with_two_phase_owners_keeps_the_checkpoints_itself() {
    let args = [
        "soak",
        "--inputs",
        "4000",
        "--checkpoint-every",
        "200",
        "--owners",
        "2",
        "--rescale-to",
        "3",
        "--two-phase",
        "--json",
    ];
    let out = actionstate(&args);
    assert!(out.status.success(), "soak failed: {}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
    let lines: Vec<serde_json::Value> = stdout(&out).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    for line in &lines {
        assert_eq!(line["two_phase"], true, "{line}");
    }
    assert_eq!((&lines[0]["owners"], &lines[0]["rescale_to"]), (&2.into(), &3.into()), "{}", lines[0]);
    for line in &lines[..2] {
        assert_eq!(line["inputs"], 4000, "{line}");
        assert!(line["snapshot_entries"].as_u64().is_some_and(|v| v > 0), "{line}");
        assert!(line["disk_growth"].as_f64().is_some_and(|g| g < 1.5), "{line}");
    }
    let refused = actionstate(&["soak", "--inputs", "10", "--two-phase"]);
    assert!(!refused.status.success(), "--two-phase without --owners was accepted");
}

/// `bench` on a data directory: put latency and throughput of the store, the rebuild rate of
/// every round and the log's own read rate, on the records it wrote; it removes the directory
/// it created.
#[test]
fn bench_reports_put_latency_and_rebuild_rate_of_a_data_directory() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let url = format!("file:{}", data.display());
    let out = actionstate(&["bench", "--log", &url, "--puts", "20", "--records", "300", "--json"]);
    assert!(out.status.success(), "bench failed: {}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
    let r: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_bench_report(&r, &url);
    assert!(!data.exists(), "bench left the directory it created");
}

/// `bench --log memory`: the rebuild rounds read the log the puts and the load wrote (a memory
/// log lives in its process alone), and nothing is said to stay behind.
#[test]
fn bench_on_a_memory_log_rebuilds_what_it_wrote() {
    let out = actionstate(&["bench", "--log", "memory", "--puts", "20", "--records", "300", "--json"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "bench failed: {}{err}", stdout(&out));
    let r: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_bench_report(&r, "memory:8");
    assert!(!err.contains("stay in"), "{err}");
}

/// The figures of a `bench --puts 20 --records 300` report on `url`.
fn assert_bench_report(r: &serde_json::Value, url: &str) {
    assert_eq!(r["log"], url, "{r}");
    assert_eq!(r["puts"], 20, "{r}");
    assert!(r["partitions"].as_u64().is_some_and(|p| p > 0), "{r}");
    for field in ["put_median_us", "put_p99_us", "puts_per_s", "rebuild_records_per_s", "log_read_records_per_s"] {
        assert!(r[field].as_f64().is_some_and(|v| v > 0.0), "{field} in {r}");
    }
    assert!(r["put_p99_us"].as_f64() >= r["put_median_us"].as_f64(), "{r}");
    // The log holds the loaded records, the puts (and their warm-up) and the fences.
    assert!(r["records"].as_u64().is_some_and(|n| n >= 300 + 20), "{r}");
    assert!(r["record_bytes"].as_u64().is_some_and(|b| (200..1000).contains(&b)), "{r}");
    let rounds = r["rebuild_round_records_per_s"].as_array().unwrap();
    assert_eq!(rounds.len(), 3, "{r}");
    assert!(rounds.iter().all(|x| x.as_f64().is_some_and(|v| v > 0.0)), "{r}");
}

/// `bench` on a server's new topic or table claims it, writes its records there and keeps
/// them: the log then verifies, and a second bench refuses it as not empty.
#[cfg(any(feature = "kafka", feature = "fluss"))]
fn bench_on_server(backend: &str, prefix: &str, test: &str) {
    use actionstate_testkit::services::Service;
    let Some(server) = Service::require(backend, prefix, test) else { return };
    let bootstrap = server.get(&format!("{prefix}_BOOTSTRAP")).unwrap().to_owned();
    let name = format!("bench_{}_{}", std::process::id(), backend);
    let url = match backend {
        "kafka" => format!("kafka://{bootstrap}/{name}?replication=1"),
        _ => format!("fluss://{bootstrap}/actionstate_demo/{name}"),
    };
    let out = actionstate(&["bench", "--log", &url, "--puts", "20", "--records", "300", "--json"]);
    assert!(
        out.status.success(),
        "bench on {backend} failed: {}{}",
        stdout(&out),
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_bench_report(&r, &url);
    assert!(String::from_utf8_lossy(&out.stderr).contains("stay in"), "{}", String::from_utf8_lossy(&out.stderr));
    let verify = actionstate(&["verify", "--log", &url]);
    assert!(verify.status.success(), "{}", stdout(&verify));
    let again = actionstate(&["bench", "--log", &url, "--puts", "20", "--records", "300"]);
    assert!(!again.status.success(), "a second bench wrote into the first one's log");
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("is not empty"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
}

#[test]
#[cfg(feature = "kafka")]
fn bench_on_kafka_writes_into_the_topic_it_claimed_and_keeps_it() {
    bench_on_server("kafka", "KAFKA", "bench_on_kafka_writes_into_the_topic_it_claimed_and_keeps_it");
}

#[test]
#[cfg(feature = "fluss")]
fn bench_on_fluss_writes_into_the_table_it_claimed_and_keeps_it() {
    bench_on_server("fluss", "FLUSS", "bench_on_fluss_writes_into_the_table_it_claimed_and_keeps_it");
}
