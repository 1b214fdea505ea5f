#![allow(clippy::unwrap_used, reason = "tests")]
//! The commands that only read leave a data directory as they found it, and a broken store is
//! never reported healthy: the `actionstate` binary on the embedded store.
//!
//! - `inspect`, `verify`, `explain` and `reset --dry-run` change no byte of the store and
//!   create nothing, and work with read permission alone (as another user, on files 0444 in a
//!   directory 0555) and on a read-only mount;
//! - an emptied file, a truncated file and a flipped byte (with `verify_on_open=false` too) are
//!   errors naming the file, never `ok`, never a panic;
//! - `file://HOST/...` is refused unless HOST is `localhost` or empty.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_actionstate");

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn actionstate(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

/// A data directory a 40-input demo wrote, under a fresh temporary directory.
fn demo_store() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let url = format!("file:{}", data.display());
    let out = actionstate(&["demo", "--log", &url, "--json", "--inputs", "40", "--keys", "4"]);
    assert!(out.status.success(), "demo failed: {}{}", text(&out.stdout), text(&out.stderr));
    (dir, data)
}

/// Every entry of `dir` with the SHA-256 of its bytes (`sha256sum`), so a changed byte, a
/// created or a removed file all show.
fn fingerprint(dir: &Path) -> BTreeMap<String, String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            let out = Command::new("sha256sum").arg(&path).output().unwrap();
            assert!(out.status.success(), "sha256sum {}: {}", path.display(), text(&out.stderr));
            let sum = text(&out.stdout).split_whitespace().next().unwrap().to_owned();
            (path.file_name().unwrap().to_string_lossy().into_owned(), sum)
        })
        .collect()
}

fn owned(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| (*a).to_owned()).collect()
}

/// The commands that only read, each on the log `url`.
fn read_only_commands(url: &str) -> Vec<Vec<String>> {
    vec![
        owned(&["inspect", "--log", url, "--json"]),
        owned(&["verify", "--log", url]),
        owned(&["waits", "--log", url, "--json"]),
        owned(&["explain", "--log", url, "--key", "sim-key-0", "--seq", "0", "--action", "plan"]),
        owned(&["reset", "--log", url, "--key", "sim-key-0", "--from-seq", "0", "--reason", "audit", "--dry-run"]),
    ]
}

fn is_root() -> bool {
    let out = Command::new("id").arg("-u").output().unwrap();
    text(&out.stdout).trim() == "0"
}

/// Runs the binary with `args` as user `nobody` when this test runs as root (where file modes
/// are not enforced), as this user otherwise.
fn as_another_user(args: &[String]) -> Output {
    if is_root() {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", BIN])
            .args(args)
            .output()
            .unwrap()
    } else {
        Command::new(BIN).args(args).output().unwrap()
    }
}

fn assert_succeeded(out: &Output, what: &str) {
    assert!(out.status.success(), "{what} failed: {}{}", text(&out.stdout), text(&out.stderr));
}

#[test]
fn read_only_commands_change_no_byte_of_the_store() {
    let (_dir, data) = demo_store();
    let url = format!("file:{}", data.display());
    let before = fingerprint(&data);
    for args in read_only_commands(&url) {
        let out = Command::new(BIN).args(&args).output().unwrap();
        assert_succeeded(&out, &args.join(" "));
        assert_eq!(fingerprint(&data), before, "`{}` changed the data directory", args.join(" "));
    }
    // With the checksum pass off too.
    let unverified = format!("{url}?verify_on_open=false");
    for args in read_only_commands(&unverified) {
        let out = Command::new(BIN).args(&args).output().unwrap();
        assert_succeeded(&out, &args.join(" "));
        assert_eq!(fingerprint(&data), before, "`{}` changed the data directory", args.join(" "));
    }
}

#[test]
fn read_only_commands_work_with_read_permission_alone() {
    let (dir, data) = demo_store();
    let url = format!("file:{}", data.display());
    let before = fingerprint(&data);
    let mode = |path: &Path, mode| std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    mode(dir.path(), 0o755);
    mode(&data.join("actionstate.redb"), 0o444);
    mode(&data, 0o555);
    let results: Vec<(String, Output)> =
        read_only_commands(&url).into_iter().map(|args| (args.join(" "), as_another_user(&args))).collect();
    mode(&data, 0o755);
    for (what, out) in &results {
        assert_succeeded(out, what);
    }
    assert_eq!(fingerprint(&data), before);
}

#[test]
fn read_only_commands_work_on_a_read_only_mount() {
    if !is_root() || !Command::new("unshare").args(["-m", "true"]).status().is_ok_and(|s| s.success()) {
        // Mounting needs root; read permission alone is covered by the test above.
        eprintln!("read-only bind mount not available to this user: not tested here");
        return;
    }
    let (dir, data) = demo_store();
    let mount = dir.path().join("mounted");
    std::fs::create_dir(&mount).unwrap();
    let before = fingerprint(&data);
    let url = format!("file:{}", mount.display());
    for args in read_only_commands(&url) {
        // A private mount namespace: the bind mount is gone when the command exits.
        let script = r#"mount --bind "$1" "$2" && mount -o remount,bind,ro "$2" && touch "$2/probe" 2>/dev/null && exit 97; shift 2; exec "$@""#;
        let out = Command::new("unshare")
            .args(["-m", "sh", "-c", script, "sh"])
            .arg(&data)
            .arg(&mount)
            .arg(BIN)
            .args(&args)
            .output()
            .unwrap();
        assert_ne!(out.status.code(), Some(97), "the mount is writable");
        assert_succeeded(&out, &format!("{} (read-only mount)", args.join(" ")));
    }
    assert_eq!(fingerprint(&data), before);
    assert!(std::fs::read_dir(&mount).unwrap().next().is_none(), "something was left at the mount point");
}

#[test]
fn read_only_commands_create_nothing_where_there_is_no_store() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    for args in read_only_commands(&format!("file:{}", missing.display())) {
        let out = Command::new(BIN).args(&args).output().unwrap();
        assert!(!out.status.success(), "`{}` succeeded without a store", args.join(" "));
        assert!(!missing.exists(), "`{}` created {}", args.join(" "), missing.display());
    }
    // An existing, empty directory stays empty.
    for args in read_only_commands(&format!("file:{}", dir.path().display())) {
        let out = Command::new(BIN).args(&args).output().unwrap();
        assert!(!out.status.success(), "`{}` succeeded without a store", args.join(" "));
        assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none(), "`{}` created a file", args.join(" "));
    }
}

/// Asserts that `out` is an error that names `file` and calls it corrupt: not `ok`, not a
/// panic, not a bare I/O error.
fn assert_corruption_error(out: &Output, file: &Path, what: &str) {
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(!out.status.success(), "{what} succeeded: {stdout}{stderr}");
    assert_ne!(out.status.code(), Some(101), "{what} panicked: {stderr}");
    assert!(!stderr.contains("panicked"), "{what}: {stderr}");
    assert!(!stdout.contains("\"ok\": true") && !stdout.contains("\"ok\":true"), "{what} said ok: {stdout}");
    assert!(!stdout.contains("index invariants hold"), "{what} reported the store healthy: {stdout}");
    assert!(stderr.contains(&file.display().to_string()), "{what} does not name {}: {stderr}", file.display());
    assert!(stderr.contains("corrupt"), "{what} does not call it corrupt: {stderr}");
    assert!(!stderr.contains("failed to fill whole buffer"), "{what} gives a bare I/O error: {stderr}");
}

#[test]
fn an_emptied_store_is_never_verified_ok_and_stays_as_it_is() {
    let (_dir, data) = demo_store();
    let file = data.join("actionstate.redb");
    std::fs::OpenOptions::new().write(true).open(&file).unwrap().set_len(0).unwrap();
    let url = format!("file:{}", data.display());
    let before = fingerprint(&data);
    for args in [
        vec!["verify", "--log", &url],
        vec!["verify", "--log", &url, "--json"],
        vec!["inspect", "--log", &url],
        vec!["inspect", "--log", &url, "--json"],
        vec!["explain", "--log", &url, "--key", "sim-key-0", "--seq", "0", "--action", "plan"],
    ] {
        let out = actionstate(&args);
        assert_corruption_error(&out, &file, &args.join(" "));
        assert!(text(&out.stderr).contains("empty"), "{}", text(&out.stderr));
        assert_eq!(fingerprint(&data), before, "`{}` changed the emptied store", args.join(" "));
    }
    assert_eq!(std::fs::metadata(&file).unwrap().len(), 0);
    // A writer does not make a new log of it either.
    let out = actionstate(&["demo", "--log", &url, "--json", "--inputs", "4", "--keys", "1"]);
    assert!(!out.status.success(), "demo wrote into the emptied store: {}", text(&out.stdout));
    assert_eq!(std::fs::metadata(&file).unwrap().len(), 0);
}

#[test]
fn a_truncated_store_is_a_corruption_error_not_an_io_error() {
    let (_dir, data) = demo_store();
    let file = data.join("actionstate.redb");
    let bytes = std::fs::read(&file).unwrap();
    let url = format!("file:{}", data.display());
    for len in [100, 4096, bytes.len() / 2, bytes.len() - 4096] {
        std::fs::write(&file, &bytes[..len]).unwrap();
        for query in ["", "?verify_on_open=false"] {
            for command in ["verify", "inspect"] {
                let log = format!("{url}{query}");
                let out = actionstate(&[command, "--log", &log]);
                assert_corruption_error(
                    &out,
                    &file,
                    &format!("{command} --log {log} on {len} of {} bytes", bytes.len()),
                );
            }
        }
        assert_eq!(std::fs::read(&file).unwrap(), &bytes[..len], "a command changed the truncated file");
    }
}

#[test]
fn a_flipped_byte_without_verify_on_open_is_an_error_not_a_panic() {
    let (_dir, data) = demo_store();
    let file = data.join("actionstate.redb");
    let bytes = std::fs::read(&file).unwrap();
    let unverified = format!("file:{}?verify_on_open=false", data.display());
    let verified = format!("file:{}", data.display());
    // The first bytes of a page hold a node's entry count and offsets: a flip there leaves the
    // engine a page it cannot make sense of (what made it panic before).
    let candidates: Vec<usize> = (4096..bytes.len())
        .step_by(4096)
        .flat_map(|page| (2..8).map(move |i| page + i))
        .filter(|&i| bytes[i] != 0)
        .collect();
    let mut engine_failures = 0;
    for &at in candidates.iter().take(48) {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0xff;
        std::fs::write(&file, &damaged).unwrap();
        let out = actionstate(&["verify", "--log", &unverified]);
        let stderr = text(&out.stderr);
        assert_ne!(out.status.code(), Some(101), "byte {at}: verify panicked: {stderr}");
        assert!(!stderr.contains("panicked"), "byte {at}: {stderr}");
        if stderr.contains("inconsistent page") {
            assert_corruption_error(&out, &file, &format!("verify on byte {at} flipped, unverified open"));
            engine_failures += 1;
            // With the checksum pass on (the default), the same damage is found on open.
            let out = actionstate(&["verify", "--log", &verified]);
            assert_corruption_error(&out, &file, &format!("verify on byte {at} flipped"));
        }
        assert_eq!(std::fs::read(&file).unwrap(), damaged, "verify changed the damaged file");
    }
    assert!(engine_failures > 0, "no flipped byte made the engine fail: the test exercises nothing");
}

#[test]
fn a_file_url_with_a_host_is_refused_unless_it_is_localhost() {
    let (dir, data) = demo_store();
    assert!(data.is_absolute());
    for url in [format!("file://localhost{}", data.display()), format!("file://{}", data.display())] {
        let out = actionstate(&["inspect", "--log", &url, "--json"]);
        assert_succeeded(&out, &format!("inspect --log {url}"));
        let view: serde_json::Value = serde_json::from_str(&text(&out.stdout)).unwrap();
        assert_eq!(view["keys"], 4, "{url}: {view}");
    }
    // `file://host/tmp/x` once became the relative `tmp/x`: run where that would be created.
    let cwd = dir.path().join("cwd");
    std::fs::create_dir(&cwd).unwrap();
    for command in
        [&["inspect", "--log", "file://host/tmp/x"][..], &["demo", "--log", "file://host/tmp/x", "--inputs", "4"]]
    {
        let out = Command::new(BIN).args(command).current_dir(&cwd).output().unwrap();
        let stderr = text(&out.stderr);
        assert!(!out.status.success(), "{command:?} succeeded: {}", text(&out.stdout));
        assert!(stderr.contains("host `host`"), "{command:?} does not name the host: {stderr}");
        assert!(std::fs::read_dir(&cwd).unwrap().next().is_none(), "{command:?} created something in its directory");
    }
}
