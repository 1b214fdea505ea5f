//! The idempotency key of a durable call (docs/format.md, section 6.7): golden values pin the
//! derivation, and every part of a call's identity changes the key.
#![allow(clippy::unwrap_used, reason = "tests")]

use actionstate_core::{
    ActionId, Attributes, Event, EventId, IDEMPOTENCY_KEY_LEN, IdempotencyKey, KeyId, StateKey, Trigger, Value,
};
use proptest::prelude::*;

fn question(text: &str) -> Event {
    let mut attributes = Attributes::new();
    attributes.insert("text".into(), Value::from(text));
    Event { id: EventId(1), event_type: "question".into(), attributes }
}

fn state(key: &str, seq: u64, action: &str, text: &str) -> StateKey {
    StateKey::new(KeyId::of(key.as_bytes()), seq, &ActionId::new(action), &question(text), &Trigger::Input)
}

#[test]
fn golden_values() {
    let answer = state("customer-42", 0, "answer", "What is my balance?");
    let cases = [
        (IdempotencyKey::derive("", &answer, 0, 0, "llm.complete", &[0; 32]), GOLDEN[0]),
        (IdempotencyKey::derive("", &answer, 1, 0, "llm.complete", &[0; 32]), GOLDEN[1]),
        (IdempotencyKey::derive("", &answer, 0, 1, "payments.charge", &[7; 32]), GOLDEN[2]),
        (IdempotencyKey::derive("eu-prod", &answer, 0, 0, "llm.complete", &[0; 32]), GOLDEN[3]),
    ];
    let got: Vec<&str> = cases.iter().map(|(key, _)| key.as_str()).collect();
    let want: Vec<&str> = cases.iter().map(|(_, golden)| *golden).collect();
    assert_eq!(got, want);
}

const GOLDEN: [&str; 4] = [
    "as1-71b173e58f41eb00ba34cba483780a19f098961858ca7cda0416ebb0",
    "as1-c9a6ede5165a6b37577d71ff33a73919d8adf0d660b90dfabe93d9c7",
    "as1-ba51ac8533a3757d07cd686b5223423d36178d76a49752eaa039a176",
    "as1-d58a40dfe657d63a2525e430ef52fc548b7f157a5d209c239da31e26",
];

/// The derivation as docs/format.md (section 6.7) writes it, apart from the code.
fn documented(
    scope: &str,
    state: &StateKey,
    incarnation: u32,
    position: u64,
    function_id: &str,
    args: &[u8; 32],
) -> String {
    let mut input = Vec::new();
    input.extend((scope.len() as u64).to_be_bytes());
    input.extend(scope.as_bytes());
    input.extend(state.to_bytes());
    input.extend(incarnation.to_be_bytes());
    input.extend(position.to_be_bytes());
    input.extend((function_id.len() as u64).to_be_bytes());
    input.extend(function_id.as_bytes());
    input.extend(args);
    let digest = blake3::derive_key("actionstate 2026-12 durable call idempotency key v1", &input);
    format!("as1-{}", hex::encode(&digest[..28]))
}

#[test]
fn the_key_is_derived_as_documented() {
    let answer = state("customer-42", 0, "answer", "What is my balance?");
    assert_eq!(documented("", &answer, 0, 0, "llm.complete", &[0; 32]), GOLDEN[0]);
    assert_eq!(documented("", &answer, 1, 0, "llm.complete", &[0; 32]), GOLDEN[1]);
    assert_eq!(documented("", &answer, 0, 1, "payments.charge", &[7; 32]), GOLDEN[2]);
    assert_eq!(documented("eu-prod", &answer, 0, 0, "llm.complete", &[0; 32]), GOLDEN[3]);
}

#[test]
fn a_key_is_printable_and_fits_common_limits() {
    let key = IdempotencyKey::derive("", &state("k", 3, "a", "x"), 2, 5, "f", &[1; 32]);
    assert_eq!(key.as_str().len(), IDEMPOTENCY_KEY_LEN);
    const { assert!(IDEMPOTENCY_KEY_LEN <= 64) };
    assert!(key.as_str().starts_with("as1-"));
    assert!(key.as_str()[4..].bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)), "{key}");
    assert_eq!(key.to_string(), key.as_str());
}

/// One part of a call's identity, changed.
#[derive(Clone, Debug)]
enum Change {
    Scope,
    Key,
    Round,
    Action,
    Input,
    Trigger,
    Incarnation,
    Position,
    Function,
    Args,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The same identity gives the same key; changing any one part gives another.
    #[test]
    fn every_part_of_a_calls_identity_goes_into_its_key(
        seq in 0u64..1_000,
        incarnation in 0u32..4,
        position in 0usize..16,
        digest in any::<[u8; 32]>(),
        change in prop_oneof![
            Just(Change::Scope), Just(Change::Key), Just(Change::Round), Just(Change::Action),
            Just(Change::Input), Just(Change::Trigger), Just(Change::Incarnation),
            Just(Change::Position), Just(Change::Function), Just(Change::Args),
        ],
    ) {
        let base = state("k", seq, "act", "hello");
        let key = IdempotencyKey::derive("", &base, incarnation, position, "tool.fetch", &digest);
        prop_assert_eq!(&key, &IdempotencyKey::derive("", &base, incarnation, position, "tool.fetch", &digest));
        let mut flipped = digest;
        flipped[0] ^= 1;
        let producer = state("k", seq, "plan", "hello");
        let emitted = StateKey::new(
            KeyId::of(b"k"), seq, &ActionId::new("act"), &question("hello"), &Trigger::Emitted { producer, index: 0 },
        );
        let other = match change {
            Change::Scope => IdempotencyKey::derive("other", &base, incarnation, position, "tool.fetch", &digest),
            Change::Key => IdempotencyKey::derive("", &state("j", seq, "act", "hello"), incarnation, position, "tool.fetch", &digest),
            Change::Round => IdempotencyKey::derive("", &state("k", seq + 1, "act", "hello"), incarnation, position, "tool.fetch", &digest),
            Change::Action => IdempotencyKey::derive("", &state("k", seq, "act2", "hello"), incarnation, position, "tool.fetch", &digest),
            Change::Input => IdempotencyKey::derive("", &state("k", seq, "act", "hello!"), incarnation, position, "tool.fetch", &digest),
            Change::Trigger => IdempotencyKey::derive("", &emitted, incarnation, position, "tool.fetch", &digest),
            Change::Incarnation => IdempotencyKey::derive("", &base, incarnation + 1, position, "tool.fetch", &digest),
            Change::Position => IdempotencyKey::derive("", &base, incarnation, position + 1, "tool.fetch", &digest),
            Change::Function => IdempotencyKey::derive("", &base, incarnation, position, "tool.search", &digest),
            Change::Args => IdempotencyKey::derive("", &base, incarnation, position, "tool.fetch", &flipped),
        };
        prop_assert_ne!(key, other, "{:?}", change);
    }

    /// A new event id (a replay) does not change the key: only the event's content does.
    #[test]
    fn a_replay_with_new_event_ids_keeps_the_key(id in any::<u128>()) {
        let mut replayed = question("hello");
        replayed.id = EventId(id);
        let replayed = StateKey::new(KeyId::of(b"k"), 1, &ActionId::new("act"), &replayed, &Trigger::Input);
        prop_assert_eq!(
            IdempotencyKey::derive("", &replayed, 0, 0, "f", &[0; 32]),
            IdempotencyKey::derive("", &state("k", 1, "act", "hello"), 0, 0, "f", &[0; 32])
        );
    }
}
