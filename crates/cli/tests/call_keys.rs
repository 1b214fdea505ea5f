//! `inspect` and `explain` show each durable call's idempotency key: the one a PENDING slot
//! recorded, and for a finished call the one the store derives.
#![allow(clippy::unwrap_used, reason = "tests")]

use actionstate_core::{ActionId, Attributes, Event, IdempotencyKey, Ownership, Trigger, Value};
use actionstate_recovery::{
    ActionStateStore, Begin, CallOutput, DurableCall, LogConfig, Round, Snapshot, StoreConfig, open,
};
use std::process::Command;
use std::sync::Mutex;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_and_explain_show_each_calls_key() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file:{}", dir.path().join("data").display());
    let made = Mutex::new(Vec::<IdempotencyKey>::new());
    {
        let log = open(&url.parse::<LogConfig>().unwrap()).await.unwrap();
        let (store, _) =
            ActionStateStore::restore(log, StoreConfig::default(), &Ownership::All, Vec::<Snapshot>::new())
                .await
                .unwrap();
        let mut attributes = Attributes::new();
        attributes.insert("text".into(), Value::from("refund order 7"));
        let input = Event::new("request", attributes);
        let round = Round::named("customer-7", 0, &input);
        let Begin::Fresh(mut h, _) =
            store.begin(&round, &ActionId::new("refund"), &input, &Trigger::Input).await.unwrap()
        else {
            panic!("a new store has nothing to reuse")
        };
        let keep = |k: IdempotencyKey| {
            made.lock().unwrap().push(k);
            std::future::ready::<CallOutput>(Ok(b"order 7: 20 EUR".to_vec()))
        };
        store.call(&mut h, DurableCall::new("orders.lookup").args_digest([1; 32]), keep).await.unwrap();
        // The refund's PENDING slot is durable; the process stops before its result.
        let refund_call =
            DurableCall::new("payments.refund").args_digest([2; 32]).reconcile(|_| std::future::ready(Ok(Vec::new())));
        let refund = store.call(&mut h, refund_call, |k| {
            made.lock().unwrap().push(k);
            std::future::pending::<CallOutput>()
        });
        assert!(tokio::time::timeout(std::time::Duration::from_millis(200), refund).await.is_err());
    }
    let made = made.lock().unwrap().clone();
    assert_eq!(made.len(), 2);

    let out =
        Command::new(env!("CARGO_BIN_EXE_actionstate")).args(["inspect", "--log", &url, "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let journal: Vec<String> = report["index"][0]["rounds"][0]["states"][0]["journal"]
        .as_array()
        .unwrap_or_else(|| panic!("no journal in {report}"))
        .iter()
        .map(|c| c.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(journal.len(), 2, "{journal:?}");
    assert!(
        journal[0].starts_with("orders.lookup ok") && journal[0].ends_with(&format!("key {}", made[0])),
        "{journal:?}"
    );
    assert!(
        journal[1].starts_with("payments.refund pending") && journal[1].ends_with(&format!("key {}", made[1])),
        "{journal:?}"
    );

    let out = Command::new(env!("CARGO_BIN_EXE_actionstate"))
        .args(["explain", "--log", &url, "--key", "customer-7", "--seq", "0", "--action", "refund"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    for key in &made {
        assert!(text.contains(&format!("key {key}")), "{text}");
    }
}
