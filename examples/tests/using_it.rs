//! The README's "Using it", run twice as a user runs it: the first run asks the model for
//! every input and checkpoints every second one; the second restores that checkpoint, resumes
//! its input there, and reuses the answer given after it instead of asking again.

use std::path::Path;
use std::process::Command;

fn run(dir: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_using-it")).current_dir(dir).output().expect("the example runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "the example failed: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout.trim().to_owned()
}

#[test]
fn the_second_run_reuses_what_the_first_did_after_its_checkpoint() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    assert_eq!(run(dir.path()), "model calls: 3, answers reused: 0");
    assert!(dir.path().join("actionstate-data").is_dir(), "the log lives where the README says");
    assert_eq!(run(dir.path()), "model calls: 0, answers reused: 1");
    assert_eq!(run(dir.path()), "model calls: 0, answers reused: 1", "a restart restores the same checkpoint");
}

#[test]
fn the_readme_quotes_the_example_as_it_is() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("../README.md")).expect("README.md");
    let section = readme.split("## Using it").nth(1).expect("README has a section `Using it`");
    let block = section.split("```rust\n").nth(1).and_then(|b| b.split("```").next()).expect("it quotes Rust");
    let code = std::fs::read_to_string(root.join("src/bin/using_it.rs")).expect("the example");
    assert_eq!(block, code, "README `Using it` no longer quotes examples/src/bin/using_it.rs");
}

#[test]
fn the_crate_docs_open_with_the_same_example() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = std::fs::read_to_string(root.join("../crates/recovery/src/lib.rs")).expect("the crate's lib.rs");
    let docs: String = lib
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .map(|l| format!("{}\n", l.strip_prefix(' ').unwrap_or(l)))
        .collect();
    let block = docs.split("```rust,no_run\n").nth(1).and_then(|b| b.split("```").next()).expect("it quotes Rust");
    let code = std::fs::read_to_string(root.join("src/bin/using_it.rs")).expect("the example");
    assert_eq!(block, code, "the crate docs of actionstate-recovery no longer open with examples/src/bin/using_it.rs");
}
