//! "Waiting for a person" (docs/waits.md), run as a user runs it: the service suspends on an
//! approval and is killed (SIGKILL) while it waits; the approval arrives through
//! `actionstate resolve` while it is stopped; restarted, the service continues with the reply
//! and pays once; a run after that finds the invoice settled. A rejection ends it unpaid. The
//! token is in the file the service handed it out in, and no output shows it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The `actionstate` command line, built beside this test by `cargo test --workspace` (and by
/// `cargo xtask ci`), which builds every binary of the workspace's packages.
fn actionstate() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's path");
    let dir = exe.parent().and_then(Path::parent).expect("target/PROFILE/deps/TEST");
    let bin = dir.join(format!("actionstate{}", std::env::consts::EXE_SUFFIX));
    assert!(bin.is_file(), "{} is missing: run `cargo build -p actionstate` (or the workspace's tests)", bin.display());
    bin
}

/// Starts the service in `dir` and waits for the line saying it suspended; then kills it.
fn run_until_it_waits_then_kill(dir: &Path) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_approval"))
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the example starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("its stdout")).read_line(&mut line).expect("a line");
    child.kill().expect("SIGKILL");
    child.wait().expect("it ends");
    line.trim().to_owned()
}

fn run(dir: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_approval")).current_dir(dir).output().expect("the example runs");
    assert!(out.status.success(), "the example failed: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// `actionstate resolve --log file:./actionstate-data --token - ARGS < approval.token` in `dir`.
fn resolve(dir: &Path, args: &[&str]) -> Output {
    let token = std::fs::File::open(dir.join("approval.token")).expect("the service handed out its token");
    Command::new(actionstate())
        .current_dir(dir)
        .args(["resolve", "--log", "file:./actionstate-data", "--token", "-"])
        .args(args)
        .stdin(token)
        .output()
        .expect("actionstate resolve runs")
}

#[test]
fn a_payment_waits_for_approval_across_a_kill_and_is_made_once() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    assert_eq!(run_until_it_waits_then_kill(dir.path()), "invoice-7: waiting for approval of 120 EUR");
    let token = std::fs::read_to_string(dir.path().join("approval.token")).expect("the token");
    // Restarted before anyone approved: the same wait, the same token.
    assert_eq!(run_until_it_waits_then_kill(dir.path()), "invoice-7: waiting for approval of 120 EUR");
    assert_eq!(std::fs::read_to_string(dir.path().join("approval.token")).expect("the token"), token);

    std::fs::write(dir.path().join("approval.json"), "dana").expect("the approval");
    let out = resolve(dir.path(), &["--payload-file", "approval.json"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("recorded: reply"), "{}", text(&out));
    assert!(!text(&out).contains(token.trim()) && !text(&out).contains("dana"), "{}", text(&out));

    assert_eq!(run(dir.path()), "invoice-7: paid 120 EUR, approved by dana");
    assert_eq!(run(dir.path()), "invoice-7: settled before", "a restart pays nothing again");
    let late = resolve(dir.path(), &["--reject", "too late"]);
    assert!(!late.status.success(), "a wait whose action completed took a resolve: {}", text(&late));
}

#[test]
fn a_rejected_payment_is_not_made() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    assert_eq!(run_until_it_waits_then_kill(dir.path()), "invoice-7: waiting for approval of 120 EUR");
    let out = resolve(dir.path(), &["--reject", "over budget"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(run(dir.path()), "invoice-7: not paid (rejected)");
    assert_eq!(run(dir.path()), "invoice-7: settled before");
}

#[test]
fn the_waits_document_quotes_the_example_as_it_is() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("../docs/waits.md")).expect("docs/waits.md");
    let section = doc.split("# Waiting for a person").nth(1).expect("docs/waits.md has a title `Waiting for a person`");
    let block = section.split("```rust\n").nth(1).and_then(|b| b.split("```").next()).expect("it quotes Rust");
    let code = std::fs::read_to_string(root.join("src/bin/approval.rs")).expect("the example");
    assert_eq!(block, code, "docs/waits.md no longer quotes examples/src/bin/approval.rs");
}
