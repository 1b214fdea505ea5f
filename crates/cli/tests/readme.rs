#![allow(clippy::unwrap_used, reason = "tests")]
//! Every shell example of the README and of the documents it sends a user to (their
//! ```` ```sh ```` blocks), run in order as a user reads them: the documents in the order of
//! [`DOCUMENTS`], each top to bottom, in one fresh temporary directory: each line through
//! `sh -c` (so quoting, comments and pipes read as they do in the user's shell), failing on a
//! non-zero exit, and on a miss where the text around the example promises reuse. A document
//! with a shell example that is in neither [`DOCUMENTS`] nor [`NOT_RUN`] fails the test.
//!
//! What each kind of line must show (besides exit 0):
//! - `demo`: the summary the documents describe: some actions reused (`N reused`, N > 0), no
//!   duplicate side effects, no acknowledged state lost, and a match with a crash-free run;
//! - `explain`: a reuse decision (`→ reuse`) for the round it names, which the demo's data
//!   must still hold (a round the demo's checkpoints pruned misses);
//! - `inspect`: its header (`N records in M partitions`); `verify --json`: `"ok": true`;
//! - `reset --dry-run`: a plan that removes at least one state and writes nothing;
//!   `reset --yes`: the audit record written, after which the `explain` line before it, run
//!   again, still shows its reuse (the text: earlier rounds are still reused);
//! - the metrics example: `curl` prints `actionstate_` series, and the demo's reuse hits equal
//!   the `reused` of its summary ("its hits ... match its summary").
//!
//! Lines this test does not run, each with why, are listed in [`EXCLUDED`]; a line of a kind
//! it neither runs nor excludes fails the test, so a new example cannot be skipped silently.
//! Every rewrite of a line is listed in [`REWRITES`] or at the code that makes it, and fails
//! the test when the text it rewrites is no longer there.

use actionstate_testkit::services::{Service, skip, skip_because};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const TEST: &str = "readme_shell_examples_run_in_order_and_reuse_where_the_text_says";

/// The documents whose shell examples run, in this order, relative to the repository root: the
/// README's quick start, then the command line (the demo's data that `inspect`, `explain` and
/// `reset` read, and the metrics example), checkpoints (a `cargo test` line, excluded), and the
/// URL grammar's credentials example on Kafka.
const DOCUMENTS: &[&str] = &["README.md", "docs/cli.md", "docs/checkpoints.md", "docs/logs.md"];

/// Documents with shell examples this test does not run, and why.
const NOT_RUN: &[(&str, &str)] = &[
    ("BENCHMARKS.md", "benchmark commands (`cargo xtask bench`), which take minutes to hours and run by hand"),
    ("docs/benchmarks-history.md", "the commands of earlier benchmark runs, as they were when each run was made"),
];

/// How long one line may run: the demo's debug build on a loaded machine takes about a minute.
const PATIENCE: Duration = Duration::from_secs(300);

/// Lines not run here, by prefix, and why.
const EXCLUDED: &[(&str, &str)] = &[
    (
        "cargo xtask ",
        "CI itself (`ci`) and server management: this test runs inside `cargo xtask ci`, which starts the servers",
    ),
    ("cargo test ", "a test of the workspace, which `cargo xtask ci` runs in its own test step"),
];

/// The ways the documents start a command of the `actionstate` binary. Both run the binary this
/// test was built with (`CARGO_BIN_EXE_actionstate`): the same program a user gets, in its
/// debug build, since building the release profile inside a test would cost CI minutes for
/// nothing this test checks.
const BINARY_PREFIXES: &[&str] = &["cargo run --release -p actionstate -- ", "actionstate "];

/// Rewrites of the text of a line, for this machine: (what, with what, why). `{SASL}`,
/// `{USER}` and `{TOPIC}` are the local broker's SASL/PLAIN listener and user and a topic of
/// this run. Each applies only to lines that contain its text, and must apply to some line.
const REWRITES: &[(&str, &str, &str)] = &[
    (
        "broker-1:9093,broker-2:9093",
        "{SASL}",
        "the brokers of the example are the local broker's SASL_PLAINTEXT listener (KAFKA_SASL_BOOTSTRAP)",
    ),
    ("/agent-state?", "/{TOPIC}?", "a topic of this run, so that every run starts from a new one"),
    ("username=agent&", "username={USER}&", "the one user the local broker knows (KAFKA_SASL_USERNAME)"),
    (
        "&ca_file=/etc/ssl/ca.pem",
        "",
        "the local listener has no TLS: with a user name and no CA file the backend uses sasl_plaintext",
    ),
    (
        "--inputs 2000 ",
        "--inputs 50 ",
        "the metrics example's run on the debug binary: 2,000 inputs would take minutes of CI, and the \
         hits match the summary at any size",
    ),
    ("--metrics 127.0.0.1:9898 ", "--metrics 127.0.0.1:0 ", "a free port (the address served is printed)"),
    ("--linger 60", "--linger 5", "long enough for the next line's curl, short enough for CI"),
];

/// One line of a ```` ```sh ```` block: its document, its line number there and its text.
#[derive(Debug)]
struct Example {
    doc: &'static str,
    line: usize,
    text: String,
}

/// The repository root.
fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// The markdown files of the root and of `docs/` that hold a ```` ```sh ```` block, relative to
/// the root and sorted.
fn documents_with_shell_examples() -> Vec<String> {
    let mut out = Vec::new();
    for dir in ["", "docs/"] {
        for entry in std::fs::read_dir(root().join(dir)).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
            if name.ends_with(".md") && text.lines().any(|l| l.trim() == "```sh") {
                out.push(format!("{dir}{name}"));
            }
        }
    }
    out.sort();
    out
}

/// The shell examples of every document of [`DOCUMENTS`], in order.
fn all_examples() -> Vec<Example> {
    let mut out = Vec::new();
    for doc in DOCUMENTS {
        let text = std::fs::read_to_string(root().join(doc)).unwrap_or_else(|e| panic!("{doc}: {e}"));
        let found = examples(doc, &text);
        assert!(!found.is_empty(), "{doc} is listed in DOCUMENTS but holds no ```sh block");
        out.extend(found);
    }
    out
}

fn examples(doc: &'static str, text: &str) -> Vec<Example> {
    let mut out = Vec::new();
    let mut in_sh = false;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if !in_sh {
            in_sh = trimmed == "```sh";
        } else if trimmed.starts_with("```") {
            in_sh = false;
        } else if !trimmed.is_empty() {
            out.push(Example { doc, line: i + 1, text: trimmed.to_owned() });
        }
    }
    out
}

/// The local Kafka broker's SASL listener, when this build and this machine have one.
struct Kafka {
    sasl_bootstrap: String,
    user: String,
    password: String,
    topic: String,
}

/// The local broker, or `None` after printing the skip marker (a failure in `cargo xtask ci`).
fn local_kafka() -> Option<Kafka> {
    if !cfg!(feature = "kafka") {
        skip_because("kafka", TEST, "the binary was built without the kafka feature (--features kafka)");
        return None;
    }
    let Some(service) = Service::find("kafka", "KAFKA") else {
        skip("kafka", TEST);
        return None;
    };
    let get = |key: &str| service.get(key).map(str::to_owned);
    match (get("KAFKA_SASL_BOOTSTRAP"), get("KAFKA_SASL_USERNAME"), get("KAFKA_SASL_PASSWORD")) {
        (Some(sasl_bootstrap), Some(user), Some(password)) => {
            Some(Kafka { sasl_bootstrap, user, password, topic: format!("readme_{}_agent-state", std::process::id()) })
        }
        _ => {
            skip_because("kafka", TEST, &format!("{} has no SASL listener settings", service.source));
            None
        }
    }
}

/// The line as run here: the binary for the document's command prefix, and [`REWRITES`].
fn rewrite(text: &str, kafka: Option<&Kafka>, used: &mut [bool]) -> String {
    let mut text = text.to_owned();
    for prefix in BINARY_PREFIXES {
        if let Some(rest) = text.strip_prefix(prefix) {
            text = format!("'{}' {rest}", env!("CARGO_BIN_EXE_actionstate"));
            break;
        }
    }
    for (i, (from, to, _why)) in REWRITES.iter().enumerate() {
        if text.contains(from) {
            let to = match kafka {
                Some(k) => {
                    to.replace("{SASL}", &k.sasl_bootstrap).replace("{USER}", &k.user).replace("{TOPIC}", &k.topic)
                }
                None => (*to).to_owned(),
            };
            text = text.replace(from, &to);
            used[i] = true;
        }
    }
    text
}

/// `sh -c LINE` in `dir`, with `env` and `TMPDIR=dir` (where `demo` without `--log` puts its
/// data directory), its output captured.
fn shell(line: &str, dir: &Path, env: &HashMap<String, String>) -> Command {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", line]).current_dir(dir).env("TMPDIR", dir).envs(env).stdin(Stdio::null());
    cmd
}

/// Runs `cmd` to its end, at most [`PATIENCE`].
fn run(mut cmd: Command, what: &str) -> Output {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let drain = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            buf
        })
    };
    let out = drain(child.stdout.take().map(|s| Box::new(s) as Box<dyn Read + Send>));
    let err = drain(child.stderr.take().map(|s| Box::new(s) as Box<dyn Read + Send>));
    let status = wait(&mut child, what);
    Output { status, stdout: out.join().unwrap(), stderr: err.join().unwrap() }
}

fn wait(child: &mut Child, what: &str) -> std::process::ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if started.elapsed() > PATIENCE {
            let _ = child.kill();
            panic!("{what} ran longer than {PATIENCE:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Fails unless `out` exited 0; returns its standard output.
fn succeeded(out: &Output, what: &str) -> String {
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{what} exited with {}:\n{stdout}\n{}", out.status, text(&out.stderr));
    stdout
}

/// The number before `word` on the summary line that contains it (`1589 (1402 executed, 187
/// reused)` gives 187 for `reused`).
fn count_before(line: &str, word: &str) -> Option<u64> {
    let before = &line[..line.find(word)?];
    before.trim_end().rsplit(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

/// The demo's summary, checked as the documents describe it; returns its `reused` count.
fn check_demo_summary(stdout: &str, what: &str) -> u64 {
    // A label, then the column gap: `actions` is not `actionstate demo — ...`.
    let line_of = |label: &str| {
        stdout
            .lines()
            .find(|l| l.trim_start().strip_prefix(label).is_some_and(|rest| rest.starts_with("  ")))
            .unwrap_or_else(|| panic!("{what}: no `{label}` line:\n{stdout}"))
    };
    let reused =
        count_before(line_of("actions"), "reused").unwrap_or_else(|| panic!("{what}: no reused count:\n{stdout}"));
    assert!(reused > 0, "{what}: the text promises reuse, the demo reused nothing:\n{stdout}");
    for (label, expected) in
        [("duplicate side effects", "0"), ("acknowledged states lost", "0"), ("matches a crash-free run", "yes")]
    {
        let value = line_of(label).trim_start().strip_prefix(label).unwrap().trim();
        assert_eq!(value, expected, "{what}: `{label}`:\n{stdout}");
    }
    reused
}

/// The value of one series in the Prometheus text format (`name{label="value"} 12`).
fn series(body: &str, series: &str) -> Option<f64> {
    body.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// A command a document runs in the foreground while the next line reads what it serves (the
/// demo with `--metrics` and `--linger`): started, and waited for until it has finished its
/// work and lingers.
struct Lingering {
    child: Child,
    what: String,
    addr: String,
    stdout: std::thread::JoinHandle<String>,
    stderr: std::thread::JoinHandle<String>,
}

impl Lingering {
    fn start(mut cmd: Command, what: &str) -> Lingering {
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        let stdout = std::thread::spawn(move || out.lines().map_while(Result::ok).map(|l| l + "\n").collect());
        let (tx, rx) = std::sync::mpsc::channel();
        let err = BufReader::new(child.stderr.take().unwrap());
        let stderr = std::thread::spawn(move || {
            let mut all = String::new();
            for line in err.lines().map_while(Result::ok) {
                if let Some(url) = line.strip_prefix("metrics: http://") {
                    let _ = tx.send(Some(url.trim_end_matches("/metrics").to_owned()));
                }
                if line.starts_with("metrics: the command finished") {
                    let _ = tx.send(None);
                }
                all.push_str(&line);
                all.push('\n');
            }
            all
        });
        let mut addr = None;
        loop {
            match rx.recv_timeout(PATIENCE) {
                Ok(Some(a)) => addr = Some(a),
                Ok(None) => break,
                Err(_) => {
                    let _ = child.kill();
                    panic!("{what}: no `metrics: the command finished` notice:\n{}", stderr.join().unwrap());
                }
            }
        }
        let addr = addr.unwrap_or_else(|| panic!("{what}: no `metrics: http://ADDR/metrics` line before it finished"));
        Lingering { child, what: what.to_owned(), addr, stdout, stderr }
    }

    /// Waits for its end (the linger over): exit 0; returns its standard output.
    fn finish(mut self) -> String {
        let status = wait(&mut self.child, &self.what);
        let stdout = self.stdout.join().unwrap();
        assert!(status.success(), "{} exited with {status}:\n{stdout}\n{}", self.what, self.stderr.join().unwrap());
        stdout
    }
}

/// Runs one line of the binary and checks what the document says it shows.
fn check_binary_line(subcommand: &str, line: &str, stdout: &str, what: &str) {
    match subcommand {
        "demo" => {
            check_demo_summary(stdout, what);
        }
        "explain" => assert!(
            stdout.contains("→ reuse"),
            "{what}: the explain example must show a reuse decision (a round the demo leaves in the \
             log):\n{stdout}"
        ),
        "inspect" => assert!(stdout.contains(" records in "), "{what}: no inspect header:\n{stdout}"),
        "verify" => {
            let report: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
            assert_eq!(report["ok"], true, "{what}: {report}");
        }
        "reset" if line.contains("--dry-run") => {
            let planned = stdout.lines().next().and_then(|l| count_before(l, "states")).unwrap_or(0);
            assert!(planned > 0, "{what}: the example removes nothing:\n{stdout}");
            assert!(stdout.contains("nothing written"), "{what}:\n{stdout}");
        }
        "reset" => assert!(stdout.contains("wrote an audit record"), "{what}:\n{stdout}"),
        "waits" => assert!(stdout.contains(" waits (index rebuilt from "), "{what}: no waits header:\n{stdout}"),
        other => panic!("{what}: `{other}` is a command this test does not check yet: add what it must show"),
    }
}

// Long: the documents' blocks run in order, each on what the one before left; the test reads as a user does.
#[test]
fn readme_shell_examples_run_in_order_and_reuse_where_the_text_says() {
    let mut listed: Vec<String> =
        DOCUMENTS.iter().chain(NOT_RUN.iter().map(|(d, _)| d)).map(|d| (*d).to_owned()).collect();
    listed.sort();
    assert_eq!(
        documents_with_shell_examples(),
        listed,
        "documents with ```sh blocks that neither DOCUMENTS nor NOT_RUN lists"
    );
    let examples = all_examples();
    assert!(examples.len() >= 10, "the documents' ```sh blocks hold only {} lines", examples.len());
    let dir = tempfile::tempdir().unwrap();
    // Asked only when a line needs the server, and only once.
    let mut kafka: Option<Option<Kafka>> = None;
    let mut env = HashMap::new();
    let mut used = vec![false; REWRITES.len()];
    let mut lingering: Option<Lingering> = None;
    let mut last_explain: Option<(String, String)> = None;
    let mut ran = 0;
    let started = Instant::now();
    for example in &examples {
        let what = format!("{}:{} `{}`", example.doc, example.line, example.text);
        if let Some((_, why)) = EXCLUDED.iter().find(|(prefix, _)| example.text.starts_with(prefix)) {
            eprintln!("not run: {what}: {why}");
            continue;
        }
        let needs_kafka = example.text.contains("kafka://") || example.text.starts_with("export KAFKA_");
        let server = if needs_kafka {
            match kafka.get_or_insert_with(local_kafka) {
                Some(k) => Some(&*k),
                None => {
                    eprintln!("skipped (no local Kafka broker): {what}");
                    continue;
                }
            }
        } else {
            None
        };
        let line = rewrite(&example.text, server, &mut used);
        eprintln!("running {what}\n  as {line}\n  after {:.1}s", started.elapsed().as_secs_f64());
        ran += 1;

        // `export NAME=...`: the password of the SASL example, the local user's (the `...` is
        // the user's to fill in); it reaches the lines after it as the export would.
        if let Some(assignment) = line.strip_prefix("export ") {
            let (name, _) = assignment.split_once('=').unwrap_or_else(|| panic!("{what}: not NAME=VALUE"));
            assert_eq!(name, "KAFKA_PASSWORD", "{what}: an export this test does not know");
            env.insert(name.to_owned(), server.unwrap().password.clone());
            continue;
        }
        // `curl` reads what the lingering command before it serves, at the address it printed.
        if line.starts_with("curl ") {
            let demo = lingering.take().unwrap_or_else(|| panic!("{what}: nothing runs for curl to read"));
            let url = "http://127.0.0.1:9898/";
            assert!(line.contains(url), "{what}: curl reads something else than {url}");
            let line = line.replace(url, &format!("http://{}/", demo.addr));
            if Command::new("curl").arg("--version").output().is_err() {
                panic!("{what}: `curl` is not installed here; the metrics example needs it");
            }
            let body = succeeded(&run(shell(&line, dir.path(), &env), &what), &what);
            let summary = demo.finish();
            let reused = check_demo_summary(&summary, "the metrics example's demo");
            assert_eq!(
                series(&body, "actionstate_hits_total{kind=\"reuse\"}"),
                Some(reused as f64),
                "{what}: the reuse hits served are not the summary's {reused}:\n{body}"
            );
            continue;
        }
        assert!(lingering.is_none(), "{what}: the line before lingers for a curl that does not follow");
        let subcommand = BINARY_PREFIXES
            .iter()
            .find_map(|p| example.text.strip_prefix(p))
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| {
                panic!("{what}: a kind of line this test neither runs nor excludes: run it here or list it in EXCLUDED")
            });
        if line.contains("--linger") {
            lingering = Some(Lingering::start(shell(&line, dir.path(), &env), &what));
            continue;
        }
        // The Kafka example inspects a topic; inspect creates nothing, so the topic is made
        // first by the demo, the way docs/cli.md says it runs on Kafka (`replication=1`: the
        // local broker is a single node).
        if let (Some(k), "inspect") = (server, subcommand) {
            let url = line
                .split_once("--log '")
                .and_then(|(_, rest)| rest.split_once('\''))
                .map(|(url, _)| url)
                .unwrap_or_else(|| panic!("{what}: the URL is not in single quotes after --log"));
            assert!(url.contains(&k.topic), "{what}: {url}");
            let setup = format!(
                "'{}' demo --inputs 40 --keys 4 --log '{url}&replication=1'",
                env!("CARGO_BIN_EXE_actionstate")
            );
            let out = run(shell(&setup, dir.path(), &env), "the demo that creates the Kafka example's topic");
            check_demo_summary(&succeeded(&out, &setup), &setup);
        }
        let stdout = succeeded(&run(shell(&line, dir.path(), &env), &what), &what);
        check_binary_line(subcommand, &line, &stdout, &what);
        match subcommand {
            "explain" => last_explain = Some((line.clone(), what.clone())),
            // The text promises that a reset from a later round leaves the earlier rounds
            // reused: the explain line before it, run again, must still show its reuse.
            "reset" if !line.contains("--dry-run") => {
                let (explain, before) =
                    last_explain.as_ref().unwrap_or_else(|| panic!("{what}: no explain example before the reset"));
                let again = format!("{before}, again after {what}");
                let stdout = succeeded(&run(shell(explain, dir.path(), &env), &again), &again);
                check_binary_line("explain", explain, &stdout, &again);
            }
            _ => {}
        }
    }
    assert!(lingering.is_none(), "the last line lingers for a curl that does not follow");
    assert!(ran > 0, "no line of the documents ran");
    // A rewrite that no longer finds its text would leave the line as the document wrote it,
    // which fails or, worse, reaches another machine: each must still apply, unless the lines
    // it applies to were skipped for want of the server.
    let kafka_skipped = matches!(kafka, Some(None));
    for ((from, _, why), used) in REWRITES.iter().zip(&used) {
        let kafka_rewrite = ["broker-1", "agent-state", "username=", "ca_file="].iter().any(|k| from.contains(k));
        assert!(
            *used || (kafka_skipped && kafka_rewrite),
            "the rewrite of `{from}` ({why}) found no line in the documents"
        );
    }
}

/// The documents are read in their stated order, and the lines every assertion above relies on
/// are there: checked without running anything, so a move of an example shows up at once.
#[test]
fn the_documents_hold_the_examples_in_the_order_the_run_needs() {
    let examples = all_examples();
    assert!(examples.len() >= 10, "the documents' ```sh blocks hold only {} lines", examples.len());
    let at = |pred: &dyn Fn(&str) -> bool, what: &str| {
        examples.iter().position(|e| pred(&e.text)).unwrap_or_else(|| panic!("no example line {what}"))
    };
    let first_demo = at(&|t| t.contains(" demo") && t.contains("file:./demo-data"), "runs the demo on ./demo-data");
    let explain = at(&|t| t.contains(" explain "), "runs explain");
    let dry_run = at(&|t| t.contains(" reset ") && t.contains("--dry-run"), "runs reset --dry-run");
    let reset = at(&|t| t.contains(" reset ") && t.contains("--yes"), "runs reset --yes");
    assert!(first_demo < explain && explain < dry_run && dry_run < reset, "demo, explain, reset out of order");
    let linger = at(&|t| t.contains("--linger"), "lingers for curl");
    assert!(examples[linger + 1].text.starts_with("curl "), "the line after --linger is not curl");
    at(&|t| t.starts_with("export KAFKA_"), "exports the Kafka password");
    at(&|t| t.contains("kafka://"), "names a Kafka log");
    assert_eq!(examples[0].doc, "README.md", "the README's quick start runs first");
}

#[test]
fn the_summary_count_parser_reads_the_demo_line() {
    let line = "  actions                     1589 (1402 executed, 187 reused)";
    assert_eq!(count_before(line, "reused"), Some(187));
    assert_eq!(count_before(line, "executed"), Some(1402));
    assert_eq!(count_before("would remove 91 states in 13 rounds", "states"), Some(91));
    assert_eq!(count_before("nothing here", "reused"), None);
}
