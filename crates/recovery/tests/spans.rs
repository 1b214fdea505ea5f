//! The store's spans (docs/design.md, section 5.8) through a crash and the restore that reuses
//! what the first attempt did: one span per attempt of an action with the decision `begin`
//! made, one per durable call and wait inside it saying whether it executed or replayed, one
//! for each restore and rebuild; no business key, token, reply or idempotency key in clear.
//!
//! A layer of `tracing-subscriber` records every span the store opens, with its fields, its
//! parent and whether it closed.
#![allow(clippy::unwrap_used, reason = "tests")]

mod common;

use actionstate_core::{IdempotencyKey, StateLog, TraceContext, Trigger, WaitOutcome, WaitToken};
use actionstate_memory::MemoryLog;
use actionstate_recovery::{
    ActionHandle, ActionStateStore, Begin, CallSource, DurableCall, Ownership, RestoreFrom, Round, StoreConfig, Wait,
    Waited, call_key_digest,
};
use actionstate_testkit::Faulty;
use common::{input, key, plan};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use tracing::Subscriber;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// One span as the layer saw it.
#[derive(Clone, Debug)]
struct Seen {
    name: &'static str,
    /// The index of its parent among the spans seen.
    parent: Option<usize>,
    fields: BTreeMap<String, String>,
    closed: bool,
}

impl Seen {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }
}

/// Records every span opened while it is the default subscriber.
#[derive(Clone, Default)]
struct Spans(Arc<Mutex<SpansInner>>);

#[derive(Default)]
struct SpansInner {
    seen: Vec<Seen>,
    /// Open spans by their id (ids are reused once a span closes).
    open: HashMap<u64, usize>,
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Spans {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let parent = match attrs.parent() {
            Some(p) => Some(p.clone()),
            None if attrs.is_contextual() => ctx.current_span().id().cloned(),
            None => None,
        };
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        let mut inner = self.0.lock().unwrap();
        let parent = parent.and_then(|p| inner.open.get(&p.into_u64()).copied());
        inner.seen.push(Seen { name: attrs.metadata().name(), parent, fields, closed: false });
        let at = inner.seen.len() - 1;
        inner.open.insert(id.into_u64(), at);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        let mut inner = self.0.lock().unwrap();
        if let Some(&at) = inner.open.get(&id.into_u64()) {
            values.record(&mut Fields(&mut inner.seen[at].fields));
        }
    }

    fn on_close(&self, id: Id, _ctx: Context<'_, S>) {
        let mut inner = self.0.lock().unwrap();
        if let Some(at) = inner.open.remove(&id.into_u64()) {
            inner.seen[at].closed = true;
        }
    }
}

impl Spans {
    fn seen(&self) -> Vec<Seen> {
        self.0.lock().unwrap().seen.clone()
    }
}

async fn owner(log: &MemoryLog) -> ActionStateStore<MemoryLog> {
    ActionStateStore::restore(log.reopen(), StoreConfig::default(), &Ownership::All, RestoreFrom::Latest)
        .await
        .unwrap()
        .0
}

/// `begin` of carol's first input, which came in the trace `trace`.
async fn begin_in(store: &ActionStateStore<MemoryLog>, trace: TraceContext) -> Begin {
    let inp = input(1);
    let round = store.round(Round::new(key("carol"), 0, &inp).traced(trace));
    let begun = store.begin(&round, &plan(), &inp, &Trigger::Input).await.unwrap();
    round.suspend();
    begun
}

async fn begin(store: &ActionStateStore<MemoryLog>, name: &str) -> Begin {
    let inp = input(1);
    let round = store.round(Round::new(key(name), 0, &inp));
    let begun = store.begin(&round, &plan(), &inp, &Trigger::Input).await.unwrap();
    round.suspend();
    begun
}

fn handle(begun: Begin) -> ActionHandle {
    match begun {
        Begin::Fresh(h, _) | Begin::Resume(h) => h,
        Begin::Reuse(_) => panic!("the action completed"),
    }
}

/// A call of `function` with argument `n`; the key it was handed goes to `keys`.
async fn call(
    store: &ActionStateStore<MemoryLog>,
    h: &mut ActionHandle,
    function: &str,
    n: u32,
    keys: &mut Vec<IdempotencyKey>,
) -> CallSource {
    let mut handed = None;
    // The search is a tool in the GenAI conventions.
    let made = DurableCall::new(function).args(&n).unwrap();
    let made = if function == "search" { made.tool() } else { made };
    let c = store
        .call(h, made, |k| {
            handed = Some(k);
            async move { Ok(n.to_le_bytes().to_vec()) }
        })
        .await
        .unwrap();
    keys.extend(handed);
    c.source
}

/// The first process of the scenario: two calls and a wait that suspends and is resolved; then
/// the process dies. The second: restores, replays the calls and the wait, calls once more and
/// completes; the same input once more reuses the completed action. The keys the executed
/// calls were handed, and the wait's token.
async fn crash_and_replay(log: &MemoryLog) -> (Vec<IdempotencyKey>, WaitToken) {
    let mut keys = Vec::new();
    let token = {
        let store = owner(log).await;
        let mut h = handle(begin(&store, "alice@example.com").await);
        assert_eq!(call(&store, &mut h, "model", 1, &mut keys).await, CallSource::Executed);
        assert_eq!(call(&store, &mut h, "search", 2, &mut keys).await, CallSource::Executed);
        let Waited::Suspended(token) = store.wait(&mut h, Wait::new("approval")).await.unwrap() else {
            panic!("the wait did not suspend")
        };
        store.resolve(&token, b"approved by carol").await.unwrap();
        token
    };
    let store = owner(log).await;
    let mut h = handle(begin(&store, "alice@example.com").await);
    assert_eq!(call(&store, &mut h, "model", 1, &mut keys).await, CallSource::Journal);
    assert_eq!(call(&store, &mut h, "search", 2, &mut keys).await, CallSource::Journal);
    let waited = store.wait(&mut h, Wait::new("approval")).await.unwrap();
    assert_eq!(waited, Waited::Done(WaitOutcome::Reply(b"approved by carol".to_vec())));
    assert_eq!(call(&store, &mut h, "pay", 3, &mut keys).await, CallSource::Executed);
    store.complete(h, Vec::new(), Vec::new()).await.unwrap();
    assert!(matches!(begin(&store, "alice@example.com").await, Begin::Reuse(_)));
    assert_eq!(keys.len(), 3, "the key of every executed call");
    (keys, token)
}

/// Prints the spans, one line each, as the test's output shows one input's trace.
fn print(seen: &[Seen]) {
    for (n, s) in seen.iter().enumerate() {
        let parent = s.parent.map_or("-".to_owned(), |p| p.to_string());
        println!("span {n:>2} {:<20} parent {parent:>2} closed {:<5} {:?}", s.name, s.closed, s.fields);
    }
}

/// The GenAI operation and span name of each `search` call inside the attempt at `attempt`.
fn search_as_genai(seen: &[Seen], attempt: usize) -> Vec<(Option<&str>, Option<&str>)> {
    seen.iter()
        .filter(|s| s.parent == Some(attempt) && s.field("actionstate.call.function") == Some("search"))
        .map(|s| (s.field("gen_ai.operation.name"), s.field("otel.name")))
        .collect()
}

/// No span shows any of `clear` in any field.
fn assert_nothing_in_clear(seen: &[Seen], clear: &[String]) {
    for s in seen {
        for v in s.fields.values() {
            for c in clear {
                assert!(!v.contains(c.as_str()), "span {} shows {c:?}: {v}", s.name);
            }
        }
    }
}

/// A crash after two calls and a wait that was resolved, a restore, the same input again: the
/// second attempt replays both calls and the wait from the journal, executes what is new, and
/// completes; a third
/// `begin` reuses the completed action. Each shows in its spans, and no span holds a key, a
/// token or a reply in clear.
// Long: one scenario's spans, asserted attempt by attempt in the order they were opened.
#[tokio::test]
async fn a_crash_and_its_replay_show_in_the_spans_as_executed_and_replayed() {
    let spans = Spans::default();
    let _default = tracing::subscriber::set_default(tracing_subscriber::registry().with(spans.clone()));
    let log = MemoryLog::new(4);
    let (keys, token) = crash_and_replay(&log).await;

    let seen = spans.seen();
    print(&seen);
    let named =
        |name: &str| -> Vec<(usize, &Seen)> { seen.iter().enumerate().filter(|(_, s)| s.name == name).collect() };
    assert_eq!(named("actionstate.restore").len(), 2, "one span per restore");
    assert!(!named("actionstate.rebuild").is_empty(), "no rebuild span");

    // Three attempts of the one action: fresh, resumed, reused.
    let attempts = named("actionstate.action");
    assert_eq!(attempts.len(), 3, "{attempts:?}");
    let k = key("alice@example.com").to_string();
    for (_, a) in &attempts {
        assert_eq!((a.field("actionstate.key"), a.field("actionstate.round")), (Some(k.as_str()), Some("0")));
        assert_eq!(a.field("actionstate.action"), Some("plan"));
        assert!(a.closed, "an attempt's span ends with its handle: {a:?}");
    }
    let [(first, a1), (second, a2), (_, a3)] = attempts[..] else { unreachable!() };
    assert_eq!(
        (a1.field("actionstate.decision"), a1.field("actionstate.miss_reason"), a1.field("actionstate.replayed")),
        (Some("fresh"), Some("absent"), Some("false"))
    );
    assert_eq!(a1.field("actionstate.completed"), None, "the crashed attempt did not complete");
    assert_eq!(
        (a2.field("actionstate.decision"), a2.field("actionstate.completed"), a2.field("actionstate.replayed")),
        (Some("resume"), Some("true"), Some("false"))
    );
    assert_eq!((a3.field("actionstate.decision"), a3.field("actionstate.replayed")), (Some("reuse"), Some("true")));
    // The input came in no trace, and this build exports no spans: no first attempt to name.
    assert!(attempts.iter().all(|(_, a)| a.field("actionstate.first_attempt").is_none()), "{attempts:?}");

    // The calls and the wait, each inside its attempt.
    let inside = |attempt: usize, name: &str| -> Vec<&Seen> {
        seen.iter().filter(|s| s.name == name && s.parent == Some(attempt)).collect()
    };
    let summary = |s: &Seen| {
        (
            s.field("actionstate.call.function").unwrap().to_owned(),
            s.field("actionstate.call.source").unwrap().to_owned(),
            s.field("actionstate.replayed").unwrap().to_owned(),
        )
    };
    let first_calls: Vec<_> = inside(first, "actionstate.call").into_iter().map(summary).collect();
    let second_calls: Vec<_> = inside(second, "actionstate.call").into_iter().map(summary).collect();
    let row = |f: &str, s: &str, r: &str| (f.to_owned(), s.to_owned(), r.to_owned());
    assert_eq!(first_calls, [row("model", "executed", "false"), row("search", "executed", "false")]);
    assert_eq!(
        second_calls,
        [row("model", "journal", "true"), row("search", "journal", "true"), row("pay", "executed", "false")]
    );
    // The executed search is the GenAI tool execution; its replay is no execution.
    assert_eq!(search_as_genai(&seen, first), [(Some("execute_tool"), Some("execute_tool search"))]);
    assert_eq!(search_as_genai(&seen, second), [(None, None)]);
    // An executed call carries the digest of the key it was handed, a replayed one none.
    let digests: Vec<Option<&str>> = inside(first, "actionstate.call")
        .into_iter()
        .chain(inside(second, "actionstate.call"))
        .map(|s| s.field("actionstate.call.key_digest"))
        .collect();
    let wanted: Vec<String> = keys.iter().map(call_key_digest).collect();
    assert_eq!(digests, [Some(&*wanted[0]), Some(&*wanted[1]), None, None, Some(&*wanted[2])]);

    let waits = (inside(first, "actionstate.wait"), inside(second, "actionstate.wait"));
    assert_eq!(waits.0.len(), 1);
    assert_eq!(waits.0[0].field("actionstate.wait.status"), Some("suspended"));
    assert_eq!(waits.1.len(), 1);
    assert_eq!(
        (waits.1[0].field("actionstate.wait.status"), waits.1[0].field("actionstate.wait.outcome")),
        (Some("resumed"), Some("reply"))
    );
    // Resolved while the first process ran: the restore hands the outcome over in the journal.
    assert_eq!(waits.1[0].field("actionstate.replayed"), Some("true"));

    // Nothing in clear: the business key, the token, the reply, an idempotency key.
    let mut clear = vec!["alice@example.com".to_owned(), token.to_text(), "approved by carol".to_owned()];
    clear.extend(keys.iter().map(ToString::to_string));
    assert_nothing_in_clear(&seen, &clear);
}

/// A wait's span says whether its outcome was recorded before the attempt began (replayed from
/// the journal) or while it ran (resolved after `begin`, delivered for the first time).
#[tokio::test]
async fn a_wait_says_whether_its_outcome_came_from_the_journal() {
    let spans = Spans::default();
    let _default = tracing::subscriber::set_default(tracing_subscriber::registry().with(spans.clone()));
    let log = MemoryLog::new(4);
    {
        let store = owner(&log).await;
        let mut h = handle(begin(&store, "bob").await);
        let Waited::Suspended(token) = store.wait(&mut h, Wait::new("approval")).await.unwrap() else { panic!() };
        // Begun again while the wait is pending, resolved before the attempt reaches it.
        let mut h = handle(begin(&store, "bob").await);
        store.resolve(&token, b"yes").await.unwrap();
        assert!(matches!(store.wait(&mut h, Wait::new("approval")).await.unwrap(), Waited::Done(_)));
    }
    // After a crash the outcome is in the journal the restore hands over.
    let store = owner(&log).await;
    let end = log.end_offsets().await.unwrap();
    let mut h = handle(begin(&store, "bob").await);
    assert!(matches!(store.wait(&mut h, Wait::new("approval")).await.unwrap(), Waited::Done(_)));
    drop(h);
    assert_eq!(log.end_offsets().await.unwrap(), end, "a replayed wait wrote something");
    let waits: Vec<Seen> = spans.seen().into_iter().filter(|s| s.name == "actionstate.wait").collect();
    let seen: Vec<_> = waits
        .iter()
        .map(|s| (s.field("actionstate.wait.status").unwrap_or("-"), s.field("actionstate.replayed").unwrap_or("-")))
        .collect();
    assert_eq!(seen, [("suspended", "false"), ("resumed", "false"), ("resumed", "true")], "{waits:?}");
}

/// A call that ran but whose journal write failed (its acknowledgement lost, as when the process
/// dies in the write) reads as executed on its span: the side effect happened, and the record
/// that did land lets the next attempt replay it.
#[tokio::test]
async fn a_call_whose_journal_write_fails_still_reads_as_executed() {
    let spans = Spans::default();
    let _default = tracing::subscriber::set_default(tracing_subscriber::registry().with(spans.clone()));
    let log = Faulty::wrap(MemoryLog::new(4));
    let faults = Arc::clone(log.faults());
    let (store, _) =
        ActionStateStore::restore(log, StoreConfig::default(), &Ownership::All, RestoreFrom::Latest).await.unwrap();
    let inp = input(1);
    let round = store.round(Round::new(key("dave"), 0, &inp));
    let Begin::Fresh(mut h, _) = store.begin(&round, &plan(), &inp, &Trigger::Input).await.unwrap() else {
        panic!("nothing was recorded")
    };
    round.suspend();
    faults.lose_ack_of_nth_append(1);
    let paid = store.call(&mut h, DurableCall::new("pay"), |_| async { Ok(b"paid".to_vec()) }).await;
    assert!(paid.is_err(), "the journal write's error reaches the caller: {paid:?}");
    drop(h);
    let calls: Vec<Seen> = spans.seen().into_iter().filter(|s| s.name == "actionstate.call").collect();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].field("actionstate.call.source"), Some("executed"), "{calls:?}");
    assert_eq!(calls[0].field("actionstate.replayed"), Some("false"), "{calls:?}");
}

/// A round that came in a trace: the state its first attempt writes records the trace
/// context, every later write carries it unchanged (the same input replayed after a crash
/// comes in a trace of its own), and the attempts that resume or reuse the state name it as
/// `actionstate.first_attempt`: the later trace leads back to the first.
#[tokio::test]
async fn later_attempts_name_the_trace_of_the_first() {
    let spans = Spans::default();
    let _default = tracing::subscriber::set_default(tracing_subscriber::registry().with(spans.clone()));
    let first = TraceContext::from_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
    let replayed = TraceContext::from_traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01").unwrap();
    let log = MemoryLog::new(4);
    let mut keys = Vec::new();
    {
        let store = owner(&log).await;
        let mut h = handle(begin_in(&store, first).await);
        assert_eq!(h.trace(), Some(&first));
        assert_eq!(call(&store, &mut h, "model", 1, &mut keys).await, CallSource::Executed);
    }
    let store = owner(&log).await;
    let mut h = handle(begin_in(&store, replayed).await);
    assert_eq!(h.trace(), Some(&first), "the resumed attempt took the trace of the round it replays");
    assert_eq!(call(&store, &mut h, "model", 1, &mut keys).await, CallSource::Journal);
    store.complete(h, Vec::new(), Vec::new()).await.unwrap();
    let Begin::Reuse(state) = begin_in(&store, replayed).await else { panic!("the action completed") };
    assert_eq!(state.trace, Some(first), "the completed state carries the first attempt's trace");

    let attempts: Vec<Seen> = spans.seen().into_iter().filter(|s| s.name == "actionstate.action").collect();
    let named: Vec<_> = attempts
        .iter()
        .map(|a| (a.field("actionstate.decision").unwrap(), a.field("actionstate.first_attempt")))
        .collect();
    let traceparent = first.traceparent();
    assert_eq!(named, [("fresh", None), ("resume", Some(&*traceparent)), ("reuse", Some(&*traceparent))]);
}
