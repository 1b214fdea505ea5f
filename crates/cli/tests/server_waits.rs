//! A durable wait resolved from another process while its owner runs, on a real Kafka broker
//! and a real Fluss cluster (docs/design.md, section 5.7): the owner suspends an action and
//! polls for resolve requests; `actionstate resolve`, a separate process, appends a request
//! and reads the partition until the owner has recorded the outcome; the owner's re-entered
//! action receives the reply; a second resolve finds the first outcome standing; an unknown
//! token is refused and writes nothing. Each test prints how long the owner took to record
//! the request, the bound the design states: one poll interval and one read.
//!
//! The servers come from `cargo xtask services up kafka` and `cargo xtask services up fluss`
//! (or `KAFKA_*` and `FLUSS_*` in the environment); without them each test prints the
//! `ACTIONSTATE-SKIP` marker, which `cargo xtask ci` turns into a failure. Built only with the
//! binary's `kafka` and `fluss` features.
#![cfg(all(feature = "kafka", feature = "fluss"))]
#![allow(clippy::unwrap_used, reason = "tests")]

use actionstate_core::{ActionId, Attributes, Event, KeyId, StateLog, Trigger, WaitOutcome, WaitSecret, WaitToken};
use actionstate_recovery::{
    ActionHandle, ActionStateStore, AnyLog, Begin, LogConfig, Ownership, RestoreFrom, Round, StoreConfig, Wait, Waited,
};
use actionstate_testkit::services::Service;
use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the owner polls for resolve requests in these tests.
const POLL: Duration = Duration::from_millis(200);

fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("{prefix}_{}_{nanos}", std::process::id())
}

/// `actionstate resolve` with the token on standard input, as an operator runs it.
fn resolve(url: &str, token: &str, outcome: &[&str]) -> Output {
    let mut args = vec!["resolve", "--log", url, "--token", "-", "--json"];
    args.extend_from_slice(outcome);
    let mut child = Command::new(env!("CARGO_BIN_EXE_actionstate"))
        .args(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(format!("{token}\n").as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn json(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", text(o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(o)))
}

async fn begin(store: &ActionStateStore<AnyLog>, k: KeyId) -> ActionHandle {
    let input = Event::new("pay 120 EUR", Attributes::new());
    let round = store.round(Round::new(k, 0, &input));
    let begun = store.begin(&round, &ActionId::new("pay"), &input, &Trigger::Input).await.unwrap();
    round.suspend();
    match begun {
        Begin::Fresh(h, _) | Begin::Resume(h) => h,
        Begin::Reuse(_) => panic!("the action completed"),
    }
}

/// The whole exchange on the log `url` names.
async fn resolve_while_the_owner_runs(url: &str, what: &str) {
    let config: LogConfig = url.parse().unwrap();
    let log = actionstate_recovery::open(&config).await.unwrap();
    let (store, _) =
        ActionStateStore::restore(log, StoreConfig::default(), &Ownership::All, RestoreFrom::Latest).await.unwrap();
    let store = Arc::new(store);
    let k = KeyId::of(b"order-7");
    let mut h = begin(&store, k).await;
    let Waited::Suspended(token) = store.wait(&mut h, Wait::new("approval")).await.unwrap() else {
        panic!("the wait did not suspend")
    };
    // The owner's poll loop, as a runtime runs it; it notes when it recorded the request.
    let poller = {
        let store = Arc::clone(&store);
        tokio::spawn(async move {
            loop {
                if store.poll_resolutions().await.unwrap() > 0 {
                    return Instant::now();
                }
                tokio::time::sleep(POLL).await;
            }
        })
    };
    let dir = tempfile::tempdir().unwrap();
    let reply = dir.path().join("approval.json");
    std::fs::write(&reply, br#"{"approved":true}"#).unwrap();
    let (url_owned, text_token) = (url.to_owned(), token.to_text());
    let reply_arg = reply.to_str().unwrap().to_owned();
    let requested = Instant::now();
    let out = tokio::task::spawn_blocking(move || resolve(&url_owned, &text_token, &["--payload-file", &reply_arg]))
        .await
        .unwrap();
    let done = json(&out);
    assert_eq!((done["recorded"].as_bool(), done["outcome"].as_str()), (Some(true), Some("reply")), "{done}");
    assert!(!text(&out).contains(&token.to_text()[5..]), "the token was printed: {}", text(&out));
    let recorded = tokio::time::timeout(Duration::from_secs(30), poller).await.unwrap().unwrap();
    println!(
        "{what}: the running owner recorded an outside resolve {} ms after the request process started (poll every {} ms)",
        recorded.duration_since(requested).as_millis(),
        POLL.as_millis()
    );
    let approved = WaitOutcome::Reply(br#"{"approved":true}"#.to_vec());
    assert_eq!(store.wait_outcome(&token).unwrap(), Some(approved.clone()));
    let mut h = begin(&store, k).await;
    assert_eq!(store.wait(&mut h, Wait::new("approval")).await.unwrap(), Waited::Done(approved));

    // A second resolve finds the first outcome and writes nothing.
    let end = store.log().end_offsets().await.unwrap();
    let (url_owned, text_token) = (url.to_owned(), token.to_text());
    let again =
        tokio::task::spawn_blocking(move || resolve(&url_owned, &text_token, &["--reject", "too late"])).await.unwrap();
    let again = json(&again);
    assert_eq!((again["recorded"].as_bool(), again["outcome"].as_str()), (Some(false), Some("reply")), "{again}");
    assert_eq!(store.log().end_offsets().await.unwrap(), end, "a second resolve wrote something");

    // An unknown token is refused, and nothing is written.
    let forged = WaitToken { key: k, secret: WaitSecret::random() }.to_text();
    let (url_owned, forged_text) = (url.to_owned(), forged.clone());
    let refused =
        tokio::task::spawn_blocking(move || resolve(&url_owned, &forged_text, &["--reject", "no"])).await.unwrap();
    assert!(!refused.status.success(), "{}", text(&refused));
    assert!(text(&refused).contains("has this token"), "{}", text(&refused));
    assert_eq!(store.log().end_offsets().await.unwrap(), end, "a refused resolve wrote something");
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

#[test]
fn kafka_a_running_owner_records_a_resolve_from_another_process() {
    let test = "kafka_a_running_owner_records_a_resolve_from_another_process";
    let Some(kafka) = Service::require("kafka", "KAFKA", test) else { return };
    let url = format!("kafka://{}/{}?replication=1", kafka.bootstrap(), unique("actionstate-waits"));
    runtime().block_on(resolve_while_the_owner_runs(&url, "kafka"));
}

#[test]
fn fluss_a_running_owner_records_a_resolve_from_another_process() {
    let test = "fluss_a_running_owner_records_a_resolve_from_another_process";
    let Some(fluss) = Service::require("fluss", "FLUSS", test) else { return };
    let url = format!("fluss://{}/actionstate/{}", fluss.bootstrap(), unique("waits"));
    runtime().block_on(resolve_while_the_owner_runs(&url, "fluss"));
}
