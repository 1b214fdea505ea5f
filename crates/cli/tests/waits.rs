#![allow(clippy::unwrap_used, reason = "tests")]
//! `actionstate waits` and `actionstate resolve` on the embedded store, as an operator runs
//! them while the owner is stopped: `waits` lists a suspended action's wait and changes no
//! byte; `resolve` refuses a malformed token, an unknown one and an oversized reply, writing
//! nothing; it records the first outcome only; the owner, restored, receives the reply in the
//! re-entered action. No output shows the token or the reply. (On Kafka and Fluss, with the
//! owner running: `server_waits.rs`.)

use actionstate_core::{ActionId, Attributes, Event, Trigger, WaitOutcome, WaitToken};
use actionstate_recovery::{
    ActionHandle, ActionStateStore, AnyLog, Begin, LogConfig, Ownership, RestoreFrom, Round, StoreConfig, Wait, Waited,
};
use std::path::Path;
use std::process::{Command, Output};

fn actionstate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_actionstate")).args(args).output().unwrap()
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// Every file under `dir` (one level, as a data directory is) with its bytes.
fn contents(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            (path.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&path).unwrap())
        })
        .collect();
    out.sort();
    out
}

async fn owner(url: &str) -> ActionStateStore<AnyLog> {
    let config: LogConfig = url.parse().unwrap();
    let log = actionstate_recovery::open(&config).await.unwrap();
    ActionStateStore::restore(log, StoreConfig::default(), &Ownership::All, RestoreFrom::Latest).await.unwrap().0
}

/// Begins (or re-enters) the payment action of round 0 of `invoice-7`, up to its approval.
async fn run_to_approval(store: &ActionStateStore<AnyLog>) -> (ActionHandle, Waited) {
    let input = Event::new("invoice", Attributes::new());
    let round = store.round(Round::named("invoice-7", 0, &input));
    let begun = store.begin(&round, &ActionId::new("pay"), &input, &Trigger::Input).await.unwrap();
    round.suspend();
    let mut h = match begun {
        Begin::Fresh(h, _) | Begin::Resume(h) => h,
        Begin::Reuse(_) => panic!("the action completed"),
    };
    let waited = store.wait(&mut h, Wait::new("approval").args("pay 120 EUR").unwrap()).await.unwrap();
    (h, waited)
}

// Long: one operator's session, from the suspended owner through the refusals and the resolve
// to the restored owner, reads as one story.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_offline_resolve_reaches_the_restored_owner_and_refusals_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let url = format!("file:{}", data.display());
    let token = {
        let store = owner(&url).await;
        let (_, waited) = run_to_approval(&store).await;
        let Waited::Suspended(token) = waited else { panic!("{waited:?}") };
        token
    };
    let token_text = token.to_text();
    let before = contents(&data);

    // `waits` lists it, read-only.
    let out = actionstate(&["waits", "--log", &url, "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let waits = listed["waits"].as_array().unwrap();
    assert_eq!(waits.len(), 1, "{listed}");
    assert_eq!((waits[0]["key"].as_str(), waits[0]["seq"].as_u64()), (Some("invoice-7"), Some(0)));
    assert_eq!((waits[0]["action"].as_str(), waits[0]["name"].as_str()), (Some("pay"), Some("approval")));
    assert_eq!(waits[0]["status"].as_str(), Some("pending"));
    let table = actionstate(&["waits", "--log", &url, "--key", "invoice-7"]);
    assert!(text(&table).contains("1 waits") && text(&table).contains("approval"), "{}", text(&table));
    let other = actionstate(&["waits", "--log", &url, "--key", "someone-else", "--json"]);
    let none: serde_json::Value = serde_json::from_slice(&other.stdout).unwrap();
    assert_eq!(none["waits"].as_array().map(Vec::len), Some(0), "{none}");
    let explained = actionstate(&["explain", "--log", &url, "--key", "invoice-7", "--seq", "0", "--action", "pay"]);
    assert!(text(&explained).contains("approval wait pending since"), "{}", text(&explained));
    assert_eq!(contents(&data), before, "`waits` or `explain` changed the data directory");

    // Refusals: each writes nothing.
    let reply = dir.path().join("reply.json");
    std::fs::write(&reply, br#"{"approved_by":"dana"}"#).unwrap();
    let big = dir.path().join("big.bin");
    std::fs::write(&big, vec![b'x'; 64 * 1024 + 1]).unwrap();
    let reply_arg = reply.to_str().unwrap();
    let unknown = WaitToken { key: token.key, secret: actionstate_core::WaitSecret::random() }.to_text();
    let truncated = &token_text[..token_text.len() - 2];
    for (args, expected) in [
        (vec!["--token", "not-a-token", "--payload-file", reply_arg], "a wait token starts with"),
        (vec!["--token", truncated, "--payload-file", reply_arg], "--token"),
        (vec!["--token", &unknown, "--payload-file", reply_arg], "has this token"),
        (vec!["--token", &token_text, "--payload-file", big.to_str().unwrap()], "more than a wait records"),
        (vec!["--token", &token_text], "--payload-file"),
        (vec!["--token", &token_text, "--payload-file", reply_arg, "--reject", "no"], "cannot be used with"),
        (vec!["--token", &token_text, "--payload-file", "/no/such/file"], "reading --payload-file"),
    ] {
        let mut all = vec!["resolve", "--log", &url];
        all.extend(args.iter().copied());
        let out = actionstate(&all);
        assert!(!out.status.success(), "{args:?} succeeded: {}", text(&out));
        assert!(text(&out).contains(expected), "{args:?}: expected {expected:?} in {}", text(&out));
        assert!(!text(&out).contains(&token_text[5..]), "{args:?} printed the token: {}", text(&out));
        assert_eq!(contents(&data), before, "a refused resolve ({args:?}) changed the data directory");
    }
    // The resolve records the reply, once; a second one (a rejection) writes nothing.
    let out = actionstate(&["resolve", "--log", &url, "--token", &token_text, "--payload-file", reply_arg, "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let done: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((done["recorded"].as_bool(), done["outcome"].as_str()), (Some(true), Some("reply")), "{done}");
    assert!(!text(&out).contains("dana") && !text(&out).contains(&token_text[5..]), "{}", text(&out));
    let resolved = contents(&data);
    assert_ne!(resolved, before, "the resolve wrote nothing");
    let again = actionstate(&["resolve", "--log", &url, "--token", &token_text, "--reject", "too late", "--json"]);
    assert!(again.status.success(), "{}", text(&again));
    let second: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!((second["recorded"].as_bool(), second["outcome"].as_str()), (Some(false), Some("reply")), "{second}");
    assert_eq!(contents(&data), resolved, "a second resolve changed the data directory");
    let listed = actionstate(&["waits", "--log", &url, "--json"]);
    let listed: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(listed["waits"][0]["status"].as_str(), Some("resolved (reply)"), "{listed}");
    let explained = actionstate(&["explain", "--log", &url, "--key", "invoice-7", "--seq", "0", "--action", "pay"]);
    assert!(text(&explained).contains("approval wait resolved (reply)"), "{}", text(&explained));
    assert!(!text(&explained).contains("dana"), "explain printed the reply: {}", text(&explained));

    // The owner restores, re-enters the action, and receives the reply from its journal.
    let store = owner(&url).await;
    let (h, waited) = run_to_approval(&store).await;
    assert_eq!(waited, Waited::Done(WaitOutcome::Reply(br#"{"approved_by":"dana"}"#.to_vec())));
    store.complete(h, vec![], vec![]).await.unwrap();
    assert!(store.waits().is_empty(), "{:?}", store.waits());
}
