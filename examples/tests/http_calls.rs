//! The example of docs/calls.md, "Idempotency keys for external calls", against a local HTTP
//! service that deduplicates by the `Idempotency-Key` header and answers whether a key was
//! applied (the simulator's external service), crashed after each call's effect as a process that dies
//! there: the charge made again is deduplicated, the receipt is reconciled by its key, and each
//! takes effect once.

use actionstate_sim::external::ExternalService;
use std::path::Path;
use std::process::Command;

fn run(dir: &Path, api: &str, crash_after: &str) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_http-calls"))
        .current_dir(dir)
        .env("PAYMENTS_API", api)
        .env("CRASH_AFTER", crash_after)
        .output()
        .expect("the example runs");
    let stdout = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() || out.status.code() == Some(3), "the example failed: {stdout}\n{stderr}");
    (out.status.code(), stdout)
}

// The service runs on the runtime's workers while the test waits for the example's process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_call_takes_effect_once_through_two_crashes() {
    let service = ExternalService::start().await.expect("the service starts");
    let api = service.url().trim_start_matches("http://").to_owned();
    let dir = tempfile::tempdir().expect("a temporary directory");
    assert_eq!(run(dir.path(), &api, "charge"), (Some(3), String::new()), "the first run dies after the charge");
    assert_eq!(service.report().effects, 1);
    assert_eq!(run(dir.path(), &api, "receipt"), (Some(3), String::new()), "the second dies after the receipt");
    let r = service.report();
    assert_eq!((r.requests, r.effects, r.deduplicated), (3, 2, 1), "the charge made again was deduplicated: {r:?}");
    assert_eq!(run(dir.path(), &api, ""), (Some(0), "charge: Journal, receipt: Reconciled".to_owned()));
    let r = service.report();
    assert_eq!((r.effects, r.lookups), (2, 1), "the reconciler asked about the receipt's key, and sent nothing: {r:?}");
    assert_eq!(run(dir.path(), &api, ""), (Some(0), "checkout: reused".to_owned()));
    assert_eq!(service.report().requests, 3, "a reused action calls nobody");
}

#[test]
fn the_calls_document_quotes_the_example_as_it_is() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("../docs/calls.md")).expect("docs/calls.md");
    let section = doc.split("# Idempotency keys for external calls").nth(1).expect("docs/calls.md has the section");
    let block = section.split("```rust\n").nth(1).and_then(|b| b.split("```").next()).expect("it quotes Rust");
    let code = std::fs::read_to_string(root.join("src/bin/http_calls.rs")).expect("the example");
    assert_eq!(block, code, "docs/calls.md no longer quotes examples/src/bin/http_calls.rs");
}
