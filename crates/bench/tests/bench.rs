#![allow(clippy::unwrap_used, reason = "tests")]
//! `actionstate-bench` end to end with tiny counts: each backend's run prints the figures
//! `cargo xtask bench` reports (and BENCHMARKS.md records) and keeps to the claim rules. The
//! server runs need the servers `cargo xtask services up` starts; without them a test prints
//! the skip marker, which `cargo xtask ci` turns into a failure.

use std::process::{Command, Output};

fn bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_actionstate-bench")).args(args).output().unwrap()
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// The one JSON object of a run that must have succeeded.
fn report(out: &Output) -> serde_json::Value {
    assert!(out.status.success(), "the benchmark failed: {}", text(out));
    serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).unwrap()
}

/// The figures every backend reports: put latency against the raw client's, rebuild rate
/// against the raw reader's (`raw`) and the log's own read, with a ratio for each of the
/// nine rounds.
fn assert_common_figures(r: &serde_json::Value, puts: u64, raw: &str) {
    assert_eq!(r["puts"], puts, "{r}");
    for field in ["put_median_us", "put_p99_us", "raw_median_us", "raw_p99_us", "put_ratio"] {
        assert!(r[field].as_f64().is_some_and(|v| v > 0.0), "{field} in {r}");
    }
    assert!(r["put_p99_us"].as_f64() >= r["put_median_us"].as_f64(), "{r}");
    for field in ["rebuild_records_per_s", raw, "rebuild_ratio", "log_read_records_per_s", "rebuild_vs_log_read"] {
        assert!(r[field].as_f64().is_some_and(|v| v > 0.0), "{field} in {r}");
    }
    assert_eq!(r["rebuild_round_ratios"].as_array().map(Vec::len), Some(9), "{r}");
    assert!(r["record_bytes"].as_u64().is_some_and(|b| (200..1000).contains(&b)), "{r}");
}

#[test]
fn file_bench_reports_put_and_rebuild_ratios_and_removes_what_it_created() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let out = bench(&["--log", &format!("file:{}", data.display()), "--puts", "20", "--records", "300", "--json"]);
    let r = report(&out);
    assert_eq!(r["backend"], "file", "{r}");
    // What the last rebuild read: the records and the fence of each of the nine rebuilds in
    // each of the eight partitions.
    assert_eq!(r["records"], 300 + 9 * 8, "{r}");
    assert_common_figures(&r, 20, "raw_scan_records_per_s");
    assert!(!data.exists(), "the benchmark left the directory it created");
}

#[test]
fn file_bench_refuses_a_directory_that_holds_anything() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), b"mine").unwrap();
    let out = bench(&["--log", &format!("file:{}", dir.path().display()), "--puts", "5", "--records", "10"]);
    assert!(!out.status.success(), "the benchmark ran in a directory of the user's: {}", text(&out));
    assert!(text(&out).contains("is not empty") && text(&out).contains("notes.txt"), "{}", text(&out));
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, ["notes.txt"], "the benchmark changed the directory");
    assert_eq!(std::fs::read(dir.path().join("notes.txt")).unwrap(), b"mine");
}

/// The bootstrap address of the service `name` for `test`, or `None` after skipping.
#[cfg(any(feature = "kafka", feature = "fluss"))]
fn bootstrap(name: &str, prefix: &str, test: &str) -> Option<String> {
    let server = actionstate_testkit::services::Service::require(name, prefix, test)?;
    Some(server.get(&format!("{prefix}_BOOTSTRAP")).unwrap().to_owned())
}

#[test]
#[cfg(feature = "kafka")]
fn kafka_bench_reports_put_linger_concurrent_txn_and_rebuild_figures() {
    let Some(bootstrap) =
        bootstrap("kafka", "KAFKA", "kafka_bench_reports_put_linger_concurrent_txn_and_rebuild_figures")
    else {
        return;
    };
    let url = format!("kafka://{bootstrap}/bench_test_{}?replication=1", std::process::id());
    let out = bench(&["--log", &url, "--puts", "20", "--records", "300", "--concurrent-puts", "2", "--json"]);
    let r = report(&out);
    assert_eq!(r["backend"], "kafka", "{r}");
    assert_eq!(r["records"], 300, "{r}");
    assert_common_figures(&r, 20, "raw_read_records_per_s");
    for field in [
        "linger_wait_median_us",
        "send_flush_median_us",
        "concurrent_puts_per_s",
        "raw_concurrent_per_s",
        "concurrent_ratio",
        "log_concurrent_per_s",
        "store_memory_concurrent_per_s",
        "txn_put_median_us",
        "txn_ratio",
        "txn_batch_ratio",
    ] {
        assert!(r[field].as_f64().is_some_and(|v| v > 0.0), "{field} in {r}");
    }
    assert_eq!(r["concurrent_round_ratios"].as_array().map(Vec::len), Some(15), "{r}");
}

#[test]
#[cfg(feature = "fluss")]
fn fluss_bench_reports_put_and_rebuild_ratios() {
    let Some(bootstrap) = bootstrap("fluss", "FLUSS", "fluss_bench_reports_put_and_rebuild_ratios") else { return };
    let url = format!("fluss://{bootstrap}/actionstate_bench/bench_test_{}", std::process::id());
    let out = bench(&["--log", &url, "--puts", "20", "--records", "300", "--json"]);
    let r = report(&out);
    assert_eq!(r["backend"], "fluss", "{r}");
    assert_eq!(r["records"], 300, "{r}");
    assert_common_figures(&r, 20, "raw_read_records_per_s");
}

/// `--waits` on the embedded store: a waiting action's phases and its ratio to a plain call,
/// then the pending waits, each found again by the restore; what it created is removed.
#[test]
fn waits_bench_reports_the_ratio_to_a_plain_call_and_the_pending_waits_a_restore_finds() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let url = format!("file:{}", data.display());
    let r = report(&bench(&["--waits", "--log", &url, "--puts", "10", "--pending-waits", "500", "--json"]));
    assert_eq!((r["backend"].as_str(), r["actions"].as_u64()), (Some("file"), Some(10)), "{r}");
    for field in ["plain_call_ms", "wait_suspend_ms", "resolve_ms", "resume_ms", "wait_resolve_resume_ms", "ratio"] {
        assert!(r[field].as_f64().is_some_and(|v| v > 0.0), "{field} in {r}");
    }
    assert_eq!((r["pending_waits"].as_u64(), r["restored_waits"].as_u64()), (Some(500), Some(500)), "{r}");
    assert!(r["restore_ms"].as_f64().is_some_and(|v| v > 0.0), "{r}");
    assert!(!data.exists(), "the benchmark left the directory it created");
}
