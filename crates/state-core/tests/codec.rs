//! Tests of the record codec, the state-key and audit-key layouts, the canonical fingerprints
//! and the recovery markers.
//!
//! Golden files in `tests/golden/*.hex` pin the encoded bytes of fixed records; the hex
//! digests in this file pin the fingerprint, key, action and occurrence digests. Both are
//! documented in `docs/format.md`. Set `ACTIONSTATE_BLESS=1` to rewrite the golden files after
//! an intended format change.
#![allow(clippy::unwrap_used, reason = "tests")]

use actionstate_core::codec::{self, FORMAT_VERSION, HEADER_LEN, MAGIC};
use actionstate_core::{
    AUDIT_KEY_LAYOUT, ActionDigest, ActionId, ActionState, Attributes, Audit, AuditDetail, CallResult, CallStatus,
    Error, Event, EventId, Evidence, Fingerprint, InvalidationReason, KeyId, LogIdentity, LogRecord, Marker, MemoryOp,
    MemoryUpdate, MissReason, OccurrenceId, Progress, RecordKind, StateKey, TaggedBytes, Trigger, Value, audit_log_key,
};
use proptest::prelude::*;
use proptest::sample::Index;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

// ---------------------------------------------------------------------------------------------
// Strategies
// ---------------------------------------------------------------------------------------------

fn arb_key_id() -> impl Strategy<Value = KeyId> {
    any::<[u8; 32]>().prop_map(KeyId)
}

fn arb_state_key() -> impl Strategy<Value = StateKey> {
    (arb_key_id(), any::<u64>(), any::<[u8; 16]>(), any::<[u8; 32]>(), any::<[u8; 16]>()).prop_map(
        |(key, seq, occurrence, fingerprint, action)| StateKey {
            key,
            seq,
            occurrence: OccurrenceId(occurrence),
            fingerprint: Fingerprint(fingerprint),
            action: ActionDigest(action),
        },
    )
}

fn arb_event_id() -> impl Strategy<Value = EventId> {
    any::<u128>().prop_map(EventId)
}

fn arb_fingerprint() -> impl Strategy<Value = Fingerprint> {
    any::<[u8; 32]>().prop_map(Fingerprint)
}

fn arb_action_id() -> impl Strategy<Value = ActionId> {
    ("[a-z_]{0,12}", proptest::option::of("\\PC{0,6}")).prop_map(|(name, version)| ActionId { name, version })
}

fn arb_trigger() -> impl Strategy<Value = Trigger> {
    prop_oneof![
        Just(Trigger::Input),
        (arb_state_key(), any::<u32>()).prop_map(|(producer, index)| Trigger::Emitted { producer, index }),
        "\\PC{0,10}".prop_map(|label| Trigger::Bootstrap { label }),
    ]
}

/// Every float class except NaN: NaN is not equal to itself, so records holding one cannot be
/// compared with `==` after a round trip. NaN handling is covered by the byte-level tests.
fn arb_float() -> impl Strategy<Value = f64> {
    use proptest::num::f64;
    f64::POSITIVE | f64::NEGATIVE | f64::NORMAL | f64::SUBNORMAL | f64::ZERO | f64::INFINITE
}

fn arb_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::Int),
        arb_float().prop_map(Value::Float),
        "\\PC{0,12}".prop_map(Value::String),
        proptest::collection::vec(any::<u8>(), 0..16).prop_map(Value::Bytes),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::List),
            proptest::collection::btree_map("\\PC{0,6}", inner, 0..6).prop_map(Value::Map),
        ]
    })
}

fn arb_attributes() -> impl Strategy<Value = Attributes> {
    proptest::collection::btree_map("\\PC{0,8}", arb_value(), 0..5).prop_map(Attributes::from)
}

fn arb_event() -> impl Strategy<Value = Event> {
    (arb_event_id(), "[a-z_]{0,12}", arb_attributes()).prop_map(|(id, event_type, attributes)| Event {
        id,
        event_type,
        attributes,
    })
}

fn arb_call_status() -> impl Strategy<Value = CallStatus> {
    prop_oneof![
        Just(CallStatus::Pending),
        // An empty result is a valid result and must survive as such.
        Just(CallStatus::Succeeded { result: Vec::new() }),
        proptest::collection::vec(any::<u8>(), 0..32).prop_map(|result| CallStatus::Succeeded { result }),
        proptest::collection::vec(any::<u8>(), 0..32).prop_map(|error| CallStatus::Failed { error }),
    ]
}

fn arb_call_result() -> impl Strategy<Value = CallResult> {
    ("[a-z.:_]{0,16}", any::<[u8; 32]>(), arb_call_status()).prop_map(|(function_id, args_digest, status)| CallResult {
        function_id,
        args_digest,
        status,
    })
}

fn arb_memory_update() -> impl Strategy<Value = MemoryUpdate> {
    let op = prop_oneof![
        ("[a-z]{0,8}", proptest::collection::vec(any::<u8>(), 0..24))
            .prop_map(|(tag, bytes)| MemoryOp::Set(TaggedBytes { tag, bytes })),
        Just(MemoryOp::NewObject),
        Just(MemoryOp::Delete),
    ];
    ("\\PC{0,16}", op).prop_map(|(path, op)| MemoryUpdate { path, op })
}

fn arb_pending() -> impl Strategy<Value = Progress> {
    proptest::collection::vec(arb_call_result(), 0..6).prop_map(|calls| Progress::Pending { calls })
}

fn arb_completed() -> impl Strategy<Value = Progress> {
    (proptest::collection::vec(arb_event(), 0..4), proptest::collection::vec(arb_memory_update(), 0..6))
        .prop_map(|(outputs, memory)| Progress::Completed { outputs, memory })
}

fn arb_action_state(progress: impl Strategy<Value = Progress>) -> impl Strategy<Value = ActionState> {
    (arb_state_key(), arb_action_id(), arb_trigger(), arb_event_id(), arb_fingerprint(), progress).prop_map(
        |(key, action, trigger, trigger_event, input, progress)| ActionState {
            key,
            action,
            trigger,
            trigger_event,
            input,
            progress,
        },
    )
}

fn arb_miss_reason() -> impl Strategy<Value = MissReason> {
    proptest::sample::select(MissReason::ALL.to_vec())
}

fn arb_invalidation_reason() -> impl Strategy<Value = InvalidationReason> {
    prop_oneof![arb_miss_reason().prop_map(InvalidationReason::Miss), Just(InvalidationReason::ProducerReplaced),]
}

fn arb_audit_detail() -> impl Strategy<Value = AuditDetail> {
    prop_oneof![
        Just(AuditDetail::Absent),
        (proptest::collection::vec(arb_fingerprint(), 0..4), arb_fingerprint())
            .prop_map(|(recorded, current)| AuditDetail::RootChanged { recorded, current }),
        (arb_event_id(), arb_event_id())
            .prop_map(|(recorded, current)| AuditDetail::OccurrenceConflict { recorded, current }),
        arb_state_key().prop_map(|producer| AuditDetail::ProducerReplaced { producer }),
    ]
}

fn arb_audit() -> impl Strategy<Value = Audit> {
    (
        arb_key_id(),
        any::<u64>(),
        arb_state_key(),
        proptest::option::of(arb_action_id()),
        arb_invalidation_reason(),
        arb_audit_detail(),
        any::<u64>(),
    )
        .prop_map(|(key, seq, probe, action, reason, detail, removed)| Audit {
            key,
            seq,
            probe,
            action,
            reason,
            detail,
            removed,
        })
}

fn arb_delete() -> impl Strategy<Value = LogRecord> {
    (arb_state_key(), arb_invalidation_reason()).prop_map(|(key, reason)| LogRecord::Delete { key, reason })
}

fn arb_record() -> impl Strategy<Value = LogRecord> {
    prop_oneof![
        arb_action_state(arb_pending()).prop_map(LogRecord::Upsert),
        arb_action_state(arb_completed()).prop_map(LogRecord::Upsert),
        arb_delete(),
        arb_audit().prop_map(LogRecord::Audit),
    ]
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// Encodes `record`, checks the wire key and header, decodes both ways and returns the value.
fn assert_round_trip(record: &LogRecord) -> Vec<u8> {
    let wire = codec::encode(record).unwrap();
    assert_eq!(wire.key_id, record.key_id());
    let expected_key = match record {
        LogRecord::Upsert(s) => s.key.to_bytes().to_vec(),
        LogRecord::Delete { key, .. } => key.to_bytes().to_vec(),
        LogRecord::Audit(a) => audit_log_key(&a.key, a.seq).to_vec(),
    };
    assert_eq!(wire.key, expected_key);
    assert_eq!(wire.value[..4], MAGIC);
    assert_eq!(wire.value[4], FORMAT_VERSION);
    assert_eq!(wire.value[5], record.kind() as u8);
    let declared = u32::from_le_bytes(wire.value[6..10].try_into().unwrap()) as usize;
    assert_eq!(declared, wire.value.len() - HEADER_LEN);
    assert_eq!(codec::encode_value(record).unwrap(), wire.value, "encode_value and encode disagree");
    assert_eq!(&codec::decode_value(&wire.value).unwrap(), record);
    assert_eq!(&codec::decode(&wire.key, &wire.value).unwrap(), record);
    wire.value
}

/// The envelope checksum as `docs/format.md` defines it for `version`, computed independently
/// of the codec: CRC-32C (version 2) or the first 16 bytes of blake3 (version 1) over version,
/// kind, length and payload.
fn spec_checksum(version: u8, kind: u8, len: u32, payload: &[u8]) -> Vec<u8> {
    let mut covered = vec![version, kind];
    covered.extend_from_slice(&len.to_le_bytes());
    covered.extend_from_slice(payload);
    if version == 1 {
        blake3::hash(&covered).as_bytes()[..16].to_vec()
    } else {
        crc32c::crc32c(&covered).to_le_bytes().to_vec()
    }
}

/// Builds an envelope of `version` by hand with a correct checksum around an arbitrary payload.
fn envelope(version: u8, kind: u8, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).unwrap();
    let mut out = MAGIC.to_vec();
    out.push(version);
    out.push(kind);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&spec_checksum(version, kind, len, payload));
    out.extend_from_slice(payload);
    out
}

fn attrs(entries: &[(&str, Value)]) -> Attributes {
    entries.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect()
}

fn map(entries: &[(&str, Value)]) -> Value {
    Value::Map(entries.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect())
}

fn fixed_event(id: u128, event_type: &str, attributes: Attributes) -> Event {
    Event { id: EventId(id), event_type: event_type.to_owned(), attributes }
}

fn fixed_input() -> Event {
    fixed_event(0x0123_4567_89ab_cdef_fedc_ba98_7654_3210, "input", attrs(&[("text", Value::from("hello"))]))
}

fn fixed_state_key() -> StateKey {
    StateKey::new(KeyId::of(b"customer-42"), 7, &ActionId::new("summarize"), &fixed_input(), &Trigger::Input)
}

// ---------------------------------------------------------------------------------------------
// Round trips
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: Some(Box::new(proptest::test_runner::FileFailurePersistence::WithSource("proptest-regressions"))), ..ProptestConfig::default() })]

    #[test]
    fn round_trip_upsert_pending(state in arb_action_state(arb_pending())) {
        assert_round_trip(&LogRecord::Upsert(state));
    }

    #[test]
    fn round_trip_upsert_completed(state in arb_action_state(arb_completed())) {
        assert_round_trip(&LogRecord::Upsert(state));
    }

    #[test]
    fn round_trip_delete(record in arb_delete()) {
        assert_round_trip(&record);
    }

    #[test]
    fn round_trip_audit(audit in arb_audit()) {
        assert_round_trip(&LogRecord::Audit(audit));
    }

    #[test]
    fn round_trip_any_record_and_reject_foreign_keys(a in arb_record(), b in arb_record()) {
        assert_round_trip(&a);
        let wire_a = codec::encode(&a).unwrap();
        let wire_b = codec::encode(&b).unwrap();
        let crossed = codec::decode(&wire_b.key, &wire_a.value);
        if wire_a.key == wire_b.key {
            prop_assert_eq!(crossed.unwrap(), a);
        } else {
            prop_assert!(
                matches!(crossed, Err(Error::KeyMismatch { kind }) if kind == a.kind()),
                "expected KeyMismatch, got {:?}", crossed
            );
        }
    }
}

/// Every enum variant reachable from a record, written out so coverage does not depend on
/// what the random strategies happen to pick.
#[test]
fn every_variant_round_trips() {
    let sk = fixed_state_key();
    let reasons = [
        InvalidationReason::Miss(MissReason::Absent),
        InvalidationReason::Miss(MissReason::RootChanged),
        InvalidationReason::Miss(MissReason::OccurrenceConflict),
        InvalidationReason::ProducerReplaced,
    ];
    let details = [
        AuditDetail::Absent,
        AuditDetail::RootChanged { recorded: vec![], current: Fingerprint([1; 32]) },
        AuditDetail::RootChanged {
            recorded: vec![Fingerprint([2; 32]), Fingerprint([3; 32])],
            current: Fingerprint([4; 32]),
        },
        AuditDetail::OccurrenceConflict { recorded: EventId(0), current: EventId(u128::MAX) },
        AuditDetail::ProducerReplaced { producer: sk },
    ];
    let mut records = Vec::new();
    for reason in reasons {
        records.push(LogRecord::Delete { key: sk, reason });
        for detail in &details {
            for action in [None, Some(ActionId::versioned("summarize", ""))] {
                records.push(LogRecord::Audit(Audit {
                    key: sk.key,
                    seq: sk.seq,
                    probe: sk,
                    action,
                    reason,
                    detail: detail.clone(),
                    removed: 3,
                }));
            }
        }
    }
    let statuses = [
        CallStatus::Pending,
        CallStatus::Succeeded { result: vec![] },
        CallStatus::Succeeded { result: vec![0, 1, 2] },
        CallStatus::Failed { error: vec![] },
        CallStatus::Failed { error: b"timeout".to_vec() },
    ];
    let triggers = [
        Trigger::Input,
        Trigger::Emitted { producer: sk, index: 0 },
        Trigger::Emitted { producer: sk, index: u32::MAX },
        Trigger::Bootstrap { label: String::new() },
        Trigger::Bootstrap { label: "agent-start".into() },
    ];
    let memory = vec![
        MemoryUpdate {
            path: "a.b".into(),
            op: MemoryOp::Set(TaggedBytes { tag: "json".into(), bytes: b"1".to_vec() }),
        },
        MemoryUpdate { path: "a.c".into(), op: MemoryOp::Set(TaggedBytes { tag: String::new(), bytes: vec![] }) },
        MemoryUpdate { path: "a".into(), op: MemoryOp::NewObject },
        MemoryUpdate { path: "a.b".into(), op: MemoryOp::Delete },
    ];
    let values = map(&[
        ("null", Value::Null),
        ("bool", Value::Bool(false)),
        ("int", Value::Int(i64::MIN)),
        ("float", Value::Float(-0.0)),
        ("inf", Value::Float(f64::NEG_INFINITY)),
        ("string", Value::from("")),
        ("bytes", Value::Bytes(vec![])),
        ("list", Value::List(vec![Value::List(vec![]), map(&[])])),
    ]);
    for trigger in triggers {
        for version in [None, Some(String::new()), Some("v2".to_owned())] {
            let base = ActionState {
                key: sk,
                action: ActionId { name: "summarize".into(), version: version.clone() },
                trigger: trigger.clone(),
                trigger_event: EventId(42),
                input: fixed_input().fingerprint(),
                progress: Progress::Pending { calls: vec![] },
            };
            let calls = statuses
                .iter()
                .map(|status| CallResult {
                    function_id: "llm.chat".into(),
                    args_digest: [9; 32],
                    status: status.clone(),
                })
                .collect();
            records.push(LogRecord::Upsert(ActionState { progress: Progress::Pending { calls }, ..base.clone() }));
            records.push(LogRecord::Upsert(base.clone()));
            records.push(LogRecord::Upsert(ActionState {
                progress: Progress::Completed {
                    outputs: vec![
                        fixed_event(1, "out", attrs(&[("v", values.clone())])),
                        fixed_event(2, "out", attrs(&[])),
                    ],
                    memory: memory.clone(),
                },
                ..base.clone()
            }));
            records.push(LogRecord::Upsert(ActionState {
                progress: Progress::Completed { outputs: vec![], memory: vec![] },
                ..base
            }));
        }
    }
    assert_eq!(records.len(), 4 + 4 * 5 * 2 + 5 * 3 * 4);
    for record in &records {
        assert_round_trip(record);
    }
}

/// A pending call with an empty result and a completed state without outputs must not decode to
/// each other or to "no result".
#[test]
fn empty_results_stay_distinct() {
    let sk = fixed_state_key();
    let with = |status| {
        LogRecord::Upsert(ActionState {
            key: sk,
            action: ActionId::new("summarize"),
            trigger: Trigger::Input,
            trigger_event: EventId(5),
            input: Fingerprint([0; 32]),
            progress: Progress::Pending {
                calls: vec![CallResult { function_id: "f".into(), args_digest: [0; 32], status }],
            },
        })
    };
    let succeeded = assert_round_trip(&with(CallStatus::Succeeded { result: vec![] }));
    let failed = assert_round_trip(&with(CallStatus::Failed { error: vec![] }));
    let pending = assert_round_trip(&with(CallStatus::Pending));
    assert_ne!(succeeded, failed);
    assert_ne!(succeeded, pending);
    assert_ne!(failed, pending);
    match codec::decode_value(&succeeded).unwrap() {
        LogRecord::Upsert(s) => assert_eq!(s.calls()[0].status, CallStatus::Succeeded { result: vec![] }),
        other => panic!("decoded {other:?}"),
    }
}

/// The codec writes exactly the documented envelope around the postcard payload.
#[test]
fn envelope_matches_documented_layout() {
    let record = LogRecord::Delete { key: fixed_state_key(), reason: InvalidationReason::ProducerReplaced };
    let payload = postcard::to_allocvec(&record).unwrap();
    assert_eq!(codec::encode_value(&record).unwrap(), envelope(2, 2, &payload));
    assert_eq!(MAGIC, *b"AcSt");
    assert_eq!(FORMAT_VERSION, 2);
    assert_eq!(HEADER_LEN, 14);
    assert_eq!(codec::V1_HEADER_LEN, 26);
    assert_eq!(RecordKind::Upsert as u8, 1);
    assert_eq!(RecordKind::Delete as u8, 2);
    assert_eq!(RecordKind::Audit as u8, 3);
    for b in 0..=u8::MAX {
        let kind = RecordKind::from_byte(b);
        assert_eq!(kind.map(|k| k as u8), (1..=3).contains(&b).then_some(b));
    }
}

// ---------------------------------------------------------------------------------------------
// Decode failure classes
// ---------------------------------------------------------------------------------------------

fn sample_records() -> Vec<LogRecord> {
    let sk = fixed_state_key();
    vec![
        golden_upsert_completed(),
        LogRecord::Delete { key: sk, reason: InvalidationReason::Miss(MissReason::Absent) },
        golden_audit_root_changed(),
    ]
}

#[test]
fn decode_bad_magic() {
    for record in sample_records() {
        let wire = codec::encode(&record).unwrap();
        for at in 0..4 {
            let mut value = wire.value.clone();
            value[at] ^= 0x20;
            let mut found = *b"AcSt";
            found[at] ^= 0x20;
            let err = codec::decode(&wire.key, &value).unwrap_err();
            assert!(matches!(err, Error::BadMagic { found: f } if f == found), "offset {at}: {err:?}");
        }
    }
    let err = codec::decode_value(b"{\"json\": true}").unwrap_err();
    assert!(matches!(err, Error::BadMagic { found } if &found == b"{\"js"), "{err:?}");
    // Four bytes are enough to reject a foreign value, even without a full header.
    let err = codec::decode_value(b"PK\x03\x04").unwrap_err();
    assert!(matches!(err, Error::BadMagic { found } if &found == b"PK\x03\x04"), "{err:?}");
}

#[test]
fn decode_bad_checksum() {
    for record in sample_records() {
        let wire = codec::encode(&record).unwrap();
        let len = wire.value.len();
        // Every payload byte and every checksum byte is covered.
        for at in (HEADER_LEN..len).chain(10..HEADER_LEN) {
            for bit in [0x01u8, 0x80] {
                let mut value = wire.value.clone();
                value[at] ^= bit;
                let err = codec::decode(&wire.key, &value).unwrap_err();
                assert!(matches!(err, Error::BadChecksum), "flip {bit:#x} at {at}: {err:?}");
            }
        }
        // The kind byte is covered too: switching to another known kind fails the checksum.
        for kind in 1..=3u8 {
            if kind == record.kind() as u8 {
                continue;
            }
            let mut value = wire.value.clone();
            value[5] = kind;
            let err = codec::decode_value(&value).unwrap_err();
            assert!(matches!(err, Error::BadChecksum), "kind {kind}: {err:?}");
        }
    }
}

#[test]
fn decode_unknown_version() {
    for record in sample_records() {
        let wire = codec::encode(&record).unwrap();
        for version in [0u8, 3, 0x7f, 0xff] {
            let mut value = wire.value.clone();
            value[4] = version;
            let err = codec::decode(&wire.key, &value).unwrap_err();
            assert!(
                matches!(err, Error::UnknownVersion { found, oldest: 1, newest: 2 } if found == version),
                "version {version}: {err:?}"
            );
        }
    }
    // The version is checked as soon as its byte is present.
    let err = codec::decode_value(b"AcSt\x03").unwrap_err();
    assert!(matches!(err, Error::UnknownVersion { found: 3, oldest: 1, newest: 2 }), "{err:?}");
}

#[test]
fn decode_unknown_kind() {
    for record in sample_records() {
        let wire = codec::encode(&record).unwrap();
        for kind in [0u8, 4, 0x80, 0xff] {
            let mut value = wire.value.clone();
            value[5] = kind;
            let err = codec::decode(&wire.key, &value).unwrap_err();
            assert!(matches!(err, Error::UnknownKind { found } if found == kind), "kind {kind}: {err:?}");
        }
    }
    let err = codec::decode_value(b"AcSt\x01\x09").unwrap_err();
    assert!(matches!(err, Error::UnknownKind { found: 9 }), "{err:?}");
}

#[test]
fn decode_truncated() {
    for record in sample_records() {
        let wire = codec::encode(&record).unwrap();
        let full = wire.value.len();
        assert!(full > HEADER_LEN + 2);
        // Inside the header: magic, version, kind, length and checksum fields.
        for cut in [0, 1, 3, 4, 5, 6, 8, 9, 10, 12, 13] {
            let err = codec::decode(&wire.key, &wire.value[..cut]).unwrap_err();
            assert!(
                matches!(err, Error::Truncated { needed: HEADER_LEN, available } if available == cut),
                "cut at {cut}: {err:?}"
            );
        }
        // Inside the payload, including a header without any payload.
        for cut in [HEADER_LEN, HEADER_LEN + 1, (HEADER_LEN + full) / 2, full - 1] {
            let err = codec::decode(&wire.key, &wire.value[..cut]).unwrap_err();
            assert!(
                matches!(err, Error::Truncated { needed, available } if needed == full && available == cut),
                "cut at {cut} of {full}: {err:?}"
            );
        }
        // A declared length larger than the bytes present is truncation too.
        let mut value = wire.value.clone();
        let declared = u32::try_from(full - HEADER_LEN).unwrap();
        value[6..10].copy_from_slice(&(declared + 5).to_le_bytes());
        let err = codec::decode_value(&value).unwrap_err();
        assert!(
            matches!(err, Error::Truncated { needed, available } if needed == full + 5 && available == full),
            "{err:?}"
        );
        value[6..10].copy_from_slice(&u32::MAX.to_le_bytes());
        let err = codec::decode_value(&value).unwrap_err();
        assert!(matches!(err, Error::Truncated { available, .. } if available == full), "{err:?}");
    }
}

#[test]
fn decode_trailing_bytes() {
    for record in sample_records() {
        let wire = codec::encode(&record).unwrap();
        for extra in [1usize, 7, 300] {
            let mut value = wire.value.clone();
            value.extend(std::iter::repeat_n(0u8, extra));
            let err = codec::decode(&wire.key, &value).unwrap_err();
            assert!(matches!(err, Error::TrailingBytes { extra: e } if e == extra), "extra {extra}: {err:?}");
        }
        // A declared length shorter than the bytes present leaves trailing bytes.
        let mut value = wire.value.clone();
        let declared = u32::try_from(wire.value.len() - HEADER_LEN).unwrap();
        value[6..10].copy_from_slice(&(declared - 3).to_le_bytes());
        let err = codec::decode_value(&value).unwrap_err();
        assert!(matches!(err, Error::TrailingBytes { extra: 3 }), "{err:?}");
    }
}

/// Bytes after the postcard record but inside the declared, checksummed payload.
#[test]
fn decode_trailing_bytes_inside_payload() {
    let record = golden_delete();
    let mut payload = postcard::to_allocvec(&record).unwrap();
    payload.extend_from_slice(&[0xde, 0xad]);
    let err = codec::decode_value(&envelope(FORMAT_VERSION, record.kind() as u8, &payload)).unwrap_err();
    assert!(matches!(err, Error::TrailingBytes { extra: 2 }), "{err:?}");
}

/// Reachable only with a checksum computed over the wrong kind: the header and the payload
/// disagree about the record kind.
#[test]
fn decode_kind_mismatch() {
    for record in sample_records() {
        let payload = postcard::to_allocvec(&record).unwrap();
        for header in [RecordKind::Upsert, RecordKind::Delete, RecordKind::Audit] {
            let result = codec::decode_value(&envelope(FORMAT_VERSION, header as u8, &payload));
            if header == record.kind() {
                assert_eq!(result.unwrap(), record);
            } else {
                let err = result.unwrap_err();
                assert!(
                    matches!(err, Error::KindMismatch { header: h, payload: p } if h == header && p == record.kind()),
                    "{err:?}"
                );
            }
        }
    }
}

/// A payload with a valid checksum that is not a postcard record.
#[test]
fn decode_malformed_payload() {
    let cases: [&[u8]; 5] = [
        &[],                    // no variant at all
        &[9],                   // unknown LogRecord variant
        &[1],                   // Delete without its state key
        &[1, 0xff, 0xff, 0xff], // Delete with a cut-off state key
        &[0; 5],                // Upsert cut off inside its state key
    ];
    for payload in cases {
        for kind in 1..=3u8 {
            let err = codec::decode_value(&envelope(FORMAT_VERSION, kind, payload)).unwrap_err();
            assert!(matches!(err, Error::Payload { .. }), "payload {payload:?}: {err:?}");
        }
    }
}

#[test]
fn decode_key_mismatch() {
    let records = sample_records();
    let keys: Vec<Vec<u8>> = records.iter().map(|r| codec::encode(r).unwrap().key).collect();
    for record in &records {
        let wire = codec::encode(record).unwrap();
        let mut other_seq = wire.key.clone();
        // Both key layouts hold the seq big-endian at bytes 33..41.
        other_seq[40] ^= 1;
        let mut wrong: Vec<Vec<u8>> = vec![Vec::new(), other_seq, wire.key[..wire.key.len() - 1].to_vec()];
        wrong.extend(keys.iter().filter(|k| **k != wire.key).cloned());
        for key in wrong {
            let err = codec::decode(&key, &wire.value).unwrap_err();
            assert!(matches!(err, Error::KeyMismatch { kind } if kind == record.kind()), "{err:?}");
        }
    }
    // A Delete and an Upsert of the same state share their key; an audit key never matches them.
    let sk = fixed_state_key();
    let delete = codec::encode(&LogRecord::Delete { key: sk, reason: InvalidationReason::ProducerReplaced }).unwrap();
    assert_eq!(delete.key, sk.to_bytes());
    let err = codec::decode(&audit_log_key(&sk.key, sk.seq), &delete.value).unwrap_err();
    assert!(matches!(err, Error::KeyMismatch { kind: RecordKind::Delete }), "{err:?}");
}

#[test]
fn decode_bad_state_key() {
    let good = fixed_state_key().to_bytes();
    assert_eq!(good.len(), 105);
    assert_eq!(codec::decode_state_key(&good).unwrap(), fixed_state_key());

    let err = StateKey::from_bytes(&[]).unwrap_err();
    assert!(matches!(err, Error::BadStateKey { len: 0, layout: None }), "{err:?}");
    let err = StateKey::from_bytes(&good[..104]).unwrap_err();
    assert!(matches!(err, Error::BadStateKey { len: 104, layout: Some(1) }), "{err:?}");
    let mut long = good.to_vec();
    long.push(0);
    let err = codec::decode_state_key(&long).unwrap_err();
    assert!(matches!(err, Error::BadStateKey { len: 106, layout: Some(1) }), "{err:?}");
    for layout in [0u8, 2, AUDIT_KEY_LAYOUT, 0xff] {
        let mut bad = good;
        bad[0] = layout;
        let err = codec::decode_state_key(&bad).unwrap_err();
        assert!(matches!(err, Error::BadStateKey { len: 105, layout: Some(l) } if l == layout), "{err:?}");
    }
    let audit_key = audit_log_key(&KeyId::of(b"customer-42"), 7);
    let err = codec::decode_state_key(&audit_key).unwrap_err();
    assert!(matches!(err, Error::BadStateKey { len: 41, layout: Some(AUDIT_KEY_LAYOUT) }), "{err:?}");
}

/// Errors read from the log carry partition and offset and keep the cause.
#[test]
fn decode_error_at_position() {
    let err = codec::decode_value(b"nope").unwrap_err().at(3, 99);
    match &err {
        Error::Corrupt { partition: 3, offset: 99, source } => {
            assert!(matches!(**source, Error::BadMagic { .. }), "{source:?}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    let text = err.to_string();
    assert!(text.contains("partition 3") && text.contains("offset 99"), "{text}");
    assert!(!err.is_retryable());
}

// ---------------------------------------------------------------------------------------------
// Robustness: random and mutated input never panics
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Mutation {
    Flip { at: Index, bit: u8 },
    Set { at: Index, byte: u8 },
    Truncate { at: Index },
    Extend(Vec<u8>),
    Insert { at: Index, byte: u8 },
    Remove { at: Index },
}

impl Mutation {
    fn apply(&self, bytes: &mut Vec<u8>) {
        match self {
            Mutation::Flip { at, bit } => {
                let i = at.index(bytes.len());
                bytes[i] ^= 1 << (bit % 8);
            }
            Mutation::Set { at, byte } => {
                let i = at.index(bytes.len());
                bytes[i] = *byte;
            }
            Mutation::Truncate { at } => bytes.truncate(at.index(bytes.len())),
            Mutation::Extend(tail) => bytes.extend_from_slice(tail),
            Mutation::Insert { at, byte } => {
                let i = at.index(bytes.len() + 1);
                bytes.insert(i, *byte);
            }
            Mutation::Remove { at } => {
                let i = at.index(bytes.len());
                bytes.remove(i);
            }
        }
    }
}

fn arb_mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<Index>(), any::<u8>()).prop_map(|(at, bit)| Mutation::Flip { at, bit }),
        (any::<Index>(), any::<u8>()).prop_map(|(at, byte)| Mutation::Set { at, byte }),
        any::<Index>().prop_map(|at| Mutation::Truncate { at }),
        proptest::collection::vec(any::<u8>(), 0..40).prop_map(Mutation::Extend),
        (any::<Index>(), any::<u8>()).prop_map(|(at, byte)| Mutation::Insert { at, byte }),
        any::<Index>().prop_map(|at| Mutation::Remove { at }),
    ]
}

/// If `value` decodes, the record re-encodes to bytes that decode to the same record. Records
/// are compared through their encoding, which is exact even for NaN floats.
fn check_decoded(value: &[u8]) {
    if let Ok(record) = codec::decode_value(value) {
        let again = codec::encode_value(&record).unwrap();
        let reread = codec::decode_value(&again).unwrap();
        assert_eq!(codec::encode_value(&reread).unwrap(), again);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: Some(Box::new(proptest::test_runner::FileFailurePersistence::WithSource("proptest-regressions"))), ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(value in proptest::collection::vec(any::<u8>(), 0..400),
                                key in proptest::collection::vec(any::<u8>(), 0..120)) {
        check_decoded(&value);
        let _ = codec::decode(&key, &value);
        let _ = codec::decode_state_key(&key);
    }

    #[test]
    fn random_bytes_behind_a_valid_header_never_panic(
        version in prop_oneof![Just(1u8), any::<u8>()],
        kind in 0u8..5,
        len in prop_oneof![0u32..400, any::<u32>()],
        rest in proptest::collection::vec(any::<u8>(), 0..400),
    ) {
        let mut value = MAGIC.to_vec();
        value.extend_from_slice(&[version, kind]);
        value.extend_from_slice(&len.to_le_bytes());
        value.extend_from_slice(&rest);
        check_decoded(&value);
    }

    #[test]
    fn random_payload_with_valid_checksum_never_panics(
        kind in 1u8..=3,
        payload in proptest::collection::vec(any::<u8>(), 0..600),
    ) {
        match codec::decode_value(&envelope(FORMAT_VERSION, kind, &payload)) {
            Ok(record) => {
                prop_assert_eq!(record.kind() as u8, kind);
                check_decoded(&codec::encode_value(&record).unwrap());
            }
            Err(err) => prop_assert!(
                matches!(err, Error::Payload { .. } | Error::TrailingBytes { .. } | Error::KindMismatch { .. }),
                "{:?}", err
            ),
        }
    }

    /// Any change to the bytes of a valid envelope is detected; an unchanged envelope decodes
    /// to the same record.
    #[test]
    fn mutated_envelopes_decode_the_same_or_fail(
        record in arb_record(),
        mutations in proptest::collection::vec(arb_mutation(), 1..4),
    ) {
        let wire = codec::encode(&record).unwrap();
        let mut value = wire.value.clone();
        for m in &mutations {
            if !value.is_empty() || matches!(m, Mutation::Extend(_) | Mutation::Insert { .. }) {
                m.apply(&mut value);
            }
        }
        match codec::decode(&wire.key, &value) {
            Ok(decoded) => {
                prop_assert_eq!(&value, &wire.value);
                prop_assert_eq!(decoded, record);
            }
            Err(_) => prop_assert_ne!(&value, &wire.value),
        }
    }

    /// A single bit flip is reported as the failure class of the field it hit.
    #[test]
    fn bit_flip_reports_the_field_it_hit(record in arb_record(), at in any::<Index>(), bit in 0u8..8) {
        let wire = codec::encode(&record).unwrap();
        let mut value = wire.value.clone();
        let i = at.index(value.len());
        value[i] ^= 1 << bit;
        let err = codec::decode(&wire.key, &value).unwrap_err();
        match i {
            0..=3 => prop_assert!(matches!(err, Error::BadMagic { .. }), "{:?}", err),
            4 => prop_assert!(matches!(err, Error::UnknownVersion { .. }), "{:?}", err),
            5 => prop_assert!(matches!(err, Error::UnknownKind { .. } | Error::BadChecksum), "{:?}", err),
            6..=9 => prop_assert!(matches!(err, Error::Truncated { .. } | Error::TrailingBytes { .. }), "{:?}", err),
            _ => prop_assert!(matches!(err, Error::BadChecksum), "{:?}", err),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Golden records
// ---------------------------------------------------------------------------------------------

fn golden_upsert_pending() -> LogRecord {
    let input = fixed_input();
    LogRecord::Upsert(ActionState {
        key: fixed_state_key(),
        action: ActionId::new("summarize"),
        trigger: Trigger::Input,
        trigger_event: input.id,
        input: input.fingerprint(),
        progress: Progress::Pending {
            calls: vec![
                CallResult {
                    function_id: "llm.chat".into(),
                    args_digest: *blake3::hash(b"args-1").as_bytes(),
                    status: CallStatus::Succeeded { result: b"{\"text\":\"hi\"}".to_vec() },
                },
                CallResult {
                    function_id: "tool.noop".into(),
                    args_digest: [0; 32],
                    status: CallStatus::Succeeded { result: vec![] },
                },
                CallResult {
                    function_id: "tool.mail".into(),
                    args_digest: [0xab; 32],
                    status: CallStatus::Failed { error: b"smtp 451".to_vec() },
                },
                CallResult { function_id: "tool.mail".into(), args_digest: [0xcd; 32], status: CallStatus::Pending },
            ],
        },
    })
}

fn golden_upsert_completed() -> LogRecord {
    let input = fixed_input();
    let producer = fixed_state_key();
    let trigger = Trigger::Emitted { producer, index: 1 };
    let event = fixed_event(
        0x1111_2222_3333_4444_5555_6666_7777_8888,
        "tool_request",
        attrs(&[("tool", Value::from("search")), ("limit", Value::Int(10))]),
    );
    let action = ActionId::versioned("call_tool", "v2");
    let key = StateKey::new(producer.key, producer.seq, &action, &event, &trigger);
    let output = fixed_event(
        0x9999_aaaa_bbbb_cccc_dddd_eeee_ffff_0000,
        "tool_response",
        attrs(&[
            ("ok", Value::Bool(true)),
            ("score", Value::Float(0.75)),
            ("count", Value::Int(-3)),
            ("none", Value::Null),
            ("raw", Value::Bytes(vec![0, 1, 2, 0xff])),
            (
                "hits",
                Value::List(vec![
                    map(&[("title", Value::from("Ünïcode")), ("rank", Value::Int(1))]),
                    map(&[
                        ("title", Value::from("second")),
                        ("tags", Value::List(vec![Value::from("a"), Value::Null])),
                    ]),
                ]),
            ),
        ]),
    );
    LogRecord::Upsert(ActionState {
        key,
        action,
        trigger,
        trigger_event: event.id,
        input: input.fingerprint(),
        progress: Progress::Completed {
            outputs: vec![output, fixed_event(3, "done", Attributes::new())],
            memory: vec![
                MemoryUpdate { path: "conversation".into(), op: MemoryOp::NewObject },
                MemoryUpdate {
                    path: "conversation.last_query".into(),
                    op: MemoryOp::Set(TaggedBytes { tag: "json".into(), bytes: b"\"rust\"".to_vec() }),
                },
                MemoryUpdate { path: "conversation.draft".into(), op: MemoryOp::Delete },
            ],
        },
    })
}

fn golden_delete() -> LogRecord {
    LogRecord::Delete { key: fixed_state_key(), reason: InvalidationReason::Miss(MissReason::RootChanged) }
}

fn golden_audit_root_changed() -> LogRecord {
    let sk = fixed_state_key();
    LogRecord::Audit(Audit {
        key: sk.key,
        seq: sk.seq,
        probe: sk,
        action: Some(ActionId::new("summarize")),
        reason: InvalidationReason::Miss(MissReason::RootChanged),
        detail: AuditDetail::RootChanged {
            recorded: vec![Fingerprint::of("input", &attrs(&[("text", Value::from("hallo"))]))],
            current: fixed_input().fingerprint(),
        },
        removed: 4,
    })
}

fn golden_audit_producer_replaced() -> LogRecord {
    let sk = fixed_state_key();
    LogRecord::Audit(Audit {
        key: sk.key,
        seq: 8,
        probe: StateKey { seq: 8, ..sk },
        action: None,
        reason: InvalidationReason::ProducerReplaced,
        detail: AuditDetail::ProducerReplaced { producer: sk },
        removed: 1,
    })
}

fn golden_cases() -> Vec<(&'static str, LogRecord)> {
    vec![
        ("upsert_pending", golden_upsert_pending()),
        ("upsert_completed", golden_upsert_completed()),
        ("delete", golden_delete()),
        ("audit_root_changed", golden_audit_root_changed()),
        ("audit_producer_replaced", golden_audit_producer_replaced()),
    ]
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("golden")
}

fn bless() -> bool {
    std::env::var("ACTIONSTATE_BLESS").is_ok_and(|v| v == "1")
}

/// Golden file text: the log key and the enveloped value, each as one line of lowercase hex.
fn golden_text(key: &[u8], value: &[u8]) -> String {
    format!("key {}\nvalue {}\n", hex::encode(key), hex::encode(value))
}

/// Parses a golden file into (key, value).
fn parse_golden(text: &str) -> (Vec<u8>, Vec<u8>) {
    let mut key = None;
    let mut value = None;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let (field, hex_text) = line.split_once(' ').unwrap_or_else(|| panic!("bad golden line {line:?}"));
        let bytes = hex::decode(hex_text.trim()).unwrap();
        match field {
            "key" => key = Some(bytes),
            "value" => value = Some(bytes),
            other => panic!("unknown golden field {other:?}"),
        }
    }
    (key.unwrap(), value.unwrap())
}

/// Compares the encoding of every golden record with its file, and decodes the file's bytes
/// back to the record, so the pinned bytes stay readable. Only this test touches the files.
#[test]
fn golden_records_match_files() {
    let dir = golden_dir();
    let mut failures = Vec::new();
    for (name, record) in golden_cases() {
        let wire = codec::encode(&record).unwrap();
        let expected = golden_text(&wire.key, &wire.value);
        let path = dir.join(format!("{name}.hex"));
        if bless() {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &expected).unwrap();
        }
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) => {
                failures.push(format!("{}: {e}", path.display()));
                continue;
            }
        };
        if text != expected {
            failures.push(format!(
                "{}: encoding changed\n  file:    {}\n  encoded: {}",
                path.display(),
                text.trim_end().replace('\n', " | "),
                expected.trim_end().replace('\n', " | "),
            ));
        }
        let (key, value) = parse_golden(&text);
        match codec::decode(&key, &value) {
            Ok(decoded) if decoded == record => {}
            other => failures.push(format!("{}: decodes to {other:?}", path.display())),
        }
    }
    assert!(
        failures.is_empty(),
        "golden files disagree with the codec (rerun with ACTIONSTATE_BLESS=1 only for an intended format change):\n{}",
        failures.join("\n")
    );
}

/// Every golden file belongs to a case, so a renamed case cannot leave a stale file behind.
#[test]
fn golden_dir_has_no_stray_files() {
    let names: Vec<String> = golden_cases().iter().map(|(n, _)| format!("{n}.hex")).collect();
    for dir in [golden_dir(), golden_dir().join("v1")] {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let file = entry.file_name().into_string().unwrap();
            if entry.file_type().unwrap().is_dir() {
                assert_eq!(file, "v1", "stray golden directory {file}");
                continue;
            }
            assert!(names.contains(&file), "stray golden file {}", dir.join(&file).display());
        }
    }
}

/// Records written by format version 1 (blake3 checksum, 26-byte header) stay readable: the
/// files in `tests/golden/v1` are the bytes version 1 wrote for the golden records. They are
/// never rewritten.
#[test]
fn version_1_golden_files_still_decode() {
    for (name, record) in golden_cases() {
        let path = golden_dir().join("v1").join(format!("{name}.hex"));
        let (key, value) = parse_golden(&std::fs::read_to_string(&path).unwrap());
        assert_eq!(value[4], 1, "{}", path.display());
        let payload = postcard::to_allocvec(&record).unwrap();
        assert_eq!(value, envelope(1, record.kind() as u8, &payload), "{}", path.display());
        assert_eq!(codec::decode(&key, &value).unwrap(), record, "{}", path.display());
        let expected = match &record {
            LogRecord::Upsert(s) => codec::Peeked::Upsert(Evidence::of(s)),
            other => codec::Peeked::Other(Box::new(other.clone())),
        };
        assert_eq!(codec::peek(&key, &value).unwrap(), expected, "{}", path.display());
        // Its 16-byte blake3 checksum still protects every payload and checksum byte.
        for at in (codec::V1_HEADER_LEN..value.len()).chain(10..codec::V1_HEADER_LEN) {
            let mut bad = value.clone();
            bad[at] ^= 0x10;
            assert!(matches!(codec::decode(&key, &bad), Err(Error::BadChecksum)), "{} byte {at}", path.display());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Golden digest vectors
// ---------------------------------------------------------------------------------------------

/// Collects (name, actual, expected) and fails listing every mismatch with its actual value.
#[derive(Default)]
struct Vectors(Vec<String>);

impl Vectors {
    fn check(&mut self, name: &str, actual: impl std::fmt::Display, expected: &str) {
        let actual = actual.to_string();
        if actual != expected {
            self.0.push(format!("{name}: expected {expected}, got {actual}"));
        }
    }

    fn finish(self) {
        assert!(self.0.is_empty(), "golden vectors changed:\n{}", self.0.join("\n"));
    }
}

fn nested_attributes() -> Attributes {
    attrs(&[
        ("list", Value::List(vec![Value::Int(1), Value::Float(2.5), Value::Null, Value::Bool(true)])),
        ("map", map(&[("x", Value::Bytes(vec![0, 1, 2])), ("y", Value::from("é")), ("z", map(&[]))])),
        ("empty_list", Value::List(vec![])),
    ])
}

#[test]
fn fingerprint_golden_vectors() {
    let mut v = Vectors::default();
    let f = |t: &str, a: &Attributes| Fingerprint::of(t, a);
    v.check(
        "empty type, empty map",
        f("", &Attributes::new()),
        "de9df419e5dc61f03bb3968b8494d00f9951e4067a60f1b11329449d570d0daf",
    );
    v.check(
        "input, empty map",
        f("input", &Attributes::new()),
        "d9fb06e9f9215d25888594c8921403e25f783de2ca6080bd45ba65bb1d7ba2ae",
    );
    v.check(
        "input, text hello",
        f("input", &attrs(&[("text", Value::from("hello"))])),
        "49b847c125e6f47f527ee37bcf6d6d51357c142545c41f137807e0014e1464f8",
    );
    v.check(
        "nested",
        f("input", &nested_attributes()),
        "2fe943ea3ed994b87bacaf95c1440cb965191e6ac0aa561af4b8196449cc29a5",
    );
    v.check(
        "ints",
        f("n", &attrs(&[("a", Value::Int(0)), ("b", Value::Int(-1)), ("c", Value::Int(i64::MAX))])),
        "2ec863f6ec9f76540f54fc371bc4b29adb2fe5a750da27b49a3ebaca739a044c",
    );
    v.check(
        "string",
        f("s", &attrs(&[("s", Value::from("1"))])),
        "e1027b8f15dbd8801e85eed413e361cb6d1d603834ff7e3cb0b25a1a2567d5ec",
    );
    v.check(
        "bytes",
        f("b", &attrs(&[("b", Value::Bytes(b"1".to_vec()))])),
        "b992483effed175b2b2a28843fbb9c98da8ac4c13acc2ef758dfe440cf74a618",
    );
    v.check(
        "bool and null",
        f("t", &attrs(&[("b", Value::Bool(false)), ("n", Value::Null)])),
        "3ea3b715fcfb9b5f9157bfe24b4cc175ce2b98928162c19638951a3dbdae28d6",
    );
    v.check(
        "float 1.5",
        f("x", &attrs(&[("x", Value::Float(1.5))])),
        "a325e80bbbca47c3e7b5714168e20b52e3e23d22efd21b5eec052e7713177d73",
    );
    v.check(
        "float 0.0",
        f("x", &attrs(&[("x", Value::Float(0.0))])),
        "4b580b8d39502557ab680dbd80392f66d9362aeccd67fd5a6f922819006237e6",
    );
    v.check(
        "float NaN",
        f("x", &attrs(&[("x", Value::Float(f64::NAN))])),
        "c298d2c4b4a01351394e419ba0f7470e322e25fb05c74f496a7c34c5c0c7c330",
    );
    // Normalized floats pin to the same digests as their canonical forms.
    let float = |x: f64| f("x", &attrs(&[("x", Value::Float(x))]));
    v.check("float -0.0", float(-0.0), "4b580b8d39502557ab680dbd80392f66d9362aeccd67fd5a6f922819006237e6");
    v.check("float -NaN", float(-f64::NAN), "c298d2c4b4a01351394e419ba0f7470e322e25fb05c74f496a7c34c5c0c7c330");
    v.check(
        "float signalling NaN",
        float(f64::from_bits(0x7ff0_0000_0000_0001)),
        "c298d2c4b4a01351394e419ba0f7470e322e25fb05c74f496a7c34c5c0c7c330",
    );
    // The same entries inserted in reverse order, at both levels, give the same digest.
    let mut reversed = Attributes::new();
    let mut inner = BTreeMap::new();
    inner.insert("z".to_owned(), map(&[]));
    inner.insert("y".to_owned(), Value::from("é"));
    inner.insert("x".to_owned(), Value::Bytes(vec![0, 1, 2]));
    reversed.insert("map".to_owned(), Value::Map(inner));
    reversed
        .insert("list".to_owned(), Value::List(vec![Value::Int(1), Value::Float(2.5), Value::Null, Value::Bool(true)]));
    reversed.insert("empty_list".to_owned(), Value::List(vec![]));
    v.check(
        "nested, reverse insertion order",
        f("input", &reversed),
        "2fe943ea3ed994b87bacaf95c1440cb965191e6ac0aa561af4b8196449cc29a5",
    );
    v.finish();
}

#[test]
fn fingerprint_normalizes_floats() {
    let of = |x: f64| Fingerprint::of("x", &attrs(&[("x", Value::Float(x))]));
    assert_eq!(of(-0.0), of(0.0));
    let nans = [
        f64::NAN,
        -f64::NAN,
        f64::from_bits(0x7ff0_0000_0000_0001), // signalling
        f64::from_bits(0xfff8_0000_0000_0001),
        f64::from_bits(0x7fff_ffff_ffff_ffff),
        f64::INFINITY - f64::INFINITY,
    ];
    for nan in nans {
        assert!(nan.is_nan());
        assert_eq!(of(nan), of(f64::NAN), "{:#x}", nan.to_bits());
    }
    assert_ne!(of(f64::NAN), of(f64::INFINITY));
    assert_ne!(of(0.0), of(f64::MIN_POSITIVE));
    assert_ne!(of(1.0), of(-1.0));
    // Normalization applies inside lists and nested maps too.
    let nested = |x: f64| Fingerprint::of("x", &attrs(&[("l", Value::List(vec![map(&[("f", Value::Float(x))])]))]));
    assert_eq!(nested(-0.0), nested(0.0));
    assert_eq!(nested(-f64::NAN), nested(f64::NAN));
}

#[test]
fn fingerprint_ignores_insertion_order() {
    let entries = [
        ("b", Value::Int(2)),
        ("a", Value::from("one")),
        ("c", map(&[("y", Value::Null), ("x", Value::Bool(true))])),
        ("", Value::List(vec![Value::Int(1)])),
    ];
    let mut forward = Attributes::new();
    for (k, val) in entries.iter() {
        forward.insert((*k).to_owned(), val.clone());
    }
    let mut backward = Attributes::new();
    for (k, val) in entries.iter().rev() {
        backward.insert((*k).to_owned(), val.clone());
    }
    let mut inner = BTreeMap::new();
    inner.insert("x".to_owned(), Value::Bool(true));
    inner.insert("y".to_owned(), Value::Null);
    backward.insert("c".to_owned(), Value::Map(inner));
    assert_eq!(Fingerprint::of("t", &forward), Fingerprint::of("t", &backward));
    // List order, unlike map order, is significant.
    let l1 = attrs(&[("l", Value::List(vec![Value::Int(1), Value::Int(2)]))]);
    let l2 = attrs(&[("l", Value::List(vec![Value::Int(2), Value::Int(1)]))]);
    assert_ne!(Fingerprint::of("t", &l1), Fingerprint::of("t", &l2));
}

/// Length prefixes keep neighbouring fields apart: no two of these collide.
#[test]
fn fingerprint_has_no_boundary_collisions() {
    let cases: Vec<(&str, Attributes)> = vec![
        ("ab", Attributes::new()),
        ("a", attrs(&[("b", Value::Null)])),
        ("a", attrs(&[("", Value::from("b"))])),
        ("t", attrs(&[("s", Value::from("1"))])),
        ("t", attrs(&[("s", Value::Bytes(b"1".to_vec()))])),
        ("t", attrs(&[("s", Value::Int(1))])),
        ("t", attrs(&[("s", Value::Float(1.0))])),
        ("t", attrs(&[("s", Value::List(vec![]))])),
        ("t", attrs(&[("s", map(&[]))])),
        ("t", attrs(&[("s", Value::List(vec![Value::Null]))])),
        ("t", attrs(&[("s", map(&[("", Value::Null)]))])),
        ("t", attrs(&[("s", Value::Null)])),
        ("t", attrs(&[("s", Value::Bool(false))])),
        ("t", attrs(&[("sx", Value::Null)])),
        ("t", attrs(&[("s", Value::List(vec![Value::from("a"), Value::from("b")]))])),
        ("t", attrs(&[("s", Value::List(vec![Value::from("ab")]))])),
    ];
    let prints: Vec<Fingerprint> = cases.iter().map(|(t, a)| Fingerprint::of(t, a)).collect();
    for i in 0..prints.len() {
        for j in i + 1..prints.len() {
            assert_ne!(prints[i], prints[j], "{:?} vs {:?}", cases[i], cases[j]);
        }
    }
}

#[test]
fn key_id_golden_vectors() {
    let mut v = Vectors::default();
    v.check("empty", KeyId::of(b""), "2bb035ffae0a202ea1fd2e1a227612aac3460f53584ef6cf4f347e921e41cf2b");
    v.check(
        "customer-42",
        KeyId::of(b"customer-42"),
        "c9490be9b707cfe05eac7499aa81d4eae64eed0cda0605bead000f8a999dd67c",
    );
    v.check("1", KeyId::of(b"1"), "9f50ef15edc47a86d2a5f4f27141a81434244d4f44fadedeb8eebb3b08b5a650");
    v.check("\"1\"", KeyId::of(b"\"1\""), "8c7162b034a36f8c7d30e372f5a2000133fa478397b492c07b52048ccfd2d399");
    v.finish();
    assert_ne!(KeyId::of(b"1"), KeyId::of(b"\"1\""));
}

#[test]
fn action_digest_golden_vectors() {
    let mut v = Vectors::default();
    v.check("summarize", ActionId::new("summarize").digest(), "459efe50dce24c70e944309851a7b08f");
    v.check("summarize@v2", ActionId::versioned("summarize", "v2").digest(), "8612605da2bd2372bf793d9688734c2c");
    v.check("summarize@", ActionId::versioned("summarize", "").digest(), "6cdd660a7ffe54ef49c521fa581bf2b6");
    v.check("empty name", ActionId::new("").digest(), "06c3102306c33b35fae3687c2273bd42");
    v.finish();
    assert_ne!(ActionId::new("summarize").digest(), ActionId::versioned("summarize", "").digest());
    assert_ne!(ActionId::versioned("ab", "c").digest(), ActionId::versioned("a", "bc").digest());
    assert_ne!(ActionId::versioned("summarize", "v1").digest(), ActionId::versioned("summarize", "v2").digest());
}

#[test]
fn occurrence_golden_vectors() {
    let producer = fixed_state_key();
    let mut v = Vectors::default();
    v.check("producer state key", hex::encode(producer.to_bytes()), "01c9490be9b707cfe05eac7499aa81d4eae64eed0cda0605bead000f8a999dd67c0000000000000007400a109f9e1602d79551561b37d1750a49b847c125e6f47f527ee37bcf6d6d51357c142545c41f137807e0014e1464f8459efe50dce24c70e944309851a7b08f");
    v.check("input", Trigger::Input.occurrence(), "400a109f9e1602d79551561b37d1750a");
    v.check("emitted 0", Trigger::Emitted { producer, index: 0 }.occurrence(), "a585fa522150d59d3eecb7a285d59660");
    v.check("emitted 1", Trigger::Emitted { producer, index: 1 }.occurrence(), "9db4e4935889cb9582d4f731f9154c5a");
    v.check(
        "bootstrap agent-start",
        Trigger::Bootstrap { label: "agent-start".into() }.occurrence(),
        "cf459e1888508a4801388dff13cef534",
    );
    v.check(
        "bootstrap empty",
        Trigger::Bootstrap { label: String::new() }.occurrence(),
        "17319f003115b667ef3f6e4ce41db11d",
    );
    v.finish();
}

#[test]
fn key_group_and_partition_golden_vectors() {
    let key = KeyId::of(b"customer-42");
    let other = KeyId::of(b"customer-43");
    let mut v = Vectors::default();
    v.check("customer-42 group 128", key.key_group(128), "73");
    v.check("customer-42 group 65535", key.key_group(u16::MAX), "7004");
    v.check("customer-43 group 128", other.key_group(128), "24");
    v.check("customer-42 partition 8", key.partition(8), "7");
    v.check("customer-42 partition 1000", key.partition(1000), "551");
    v.check("customer-43 partition 8", other.partition(8), "5");
    v.finish();
    for k in [key, other] {
        assert_eq!(k.key_group(0), 0);
        assert_eq!(k.key_group(1), 0);
        assert_eq!(k.partition(0), 0);
        assert_eq!(k.partition(1), 0);
    }
}

// ---------------------------------------------------------------------------------------------
// Digests against an independent implementation of the documented encodings
// ---------------------------------------------------------------------------------------------

mod spec {
    use super::*;

    pub(super) const KEY: &str = "actionstate 2026-11 business key v1";
    pub(super) const ACTION: &str = "actionstate 2026-11 action id v1";
    pub(super) const OCCURRENCE: &str = "actionstate 2026-11 occurrence v1";
    pub(super) const FINGERPRINT: &str = "actionstate 2026-11 event fingerprint v1";
    pub(super) const PARTITION: &str = "actionstate 2026-11 partition v1";

    fn len(out: &mut Vec<u8>, n: usize) {
        out.extend_from_slice(&u64::try_from(n).unwrap().to_le_bytes());
    }

    fn bytes(out: &mut Vec<u8>, b: &[u8]) {
        len(out, b.len());
        out.extend_from_slice(b);
    }

    fn value(out: &mut Vec<u8>, v: &Value) {
        match v {
            Value::Null => out.push(0),
            Value::Bool(b) => out.extend_from_slice(&[1, u8::from(*b)]),
            Value::Int(i) => {
                out.push(2);
                out.extend_from_slice(&i.to_le_bytes());
            }
            Value::Float(x) => {
                out.push(3);
                let bits = if x.is_nan() {
                    0x7ff8_0000_0000_0000u64
                } else if *x == 0.0 {
                    0
                } else {
                    x.to_bits()
                };
                out.extend_from_slice(&bits.to_le_bytes());
            }
            Value::String(s) => {
                out.push(4);
                bytes(out, s.as_bytes());
            }
            Value::Bytes(b) => {
                out.push(5);
                bytes(out, b);
            }
            Value::List(items) => {
                out.push(6);
                len(out, items.len());
                items.iter().for_each(|i| value(out, i));
            }
            Value::Map(m) => {
                out.push(7);
                map(out, m.iter());
            }
        }
    }

    fn map<'a>(out: &mut Vec<u8>, m: impl ExactSizeIterator<Item = (&'a String, &'a Value)>) {
        len(out, m.len());
        for (k, v) in m {
            bytes(out, k.as_bytes());
            value(out, v);
        }
    }

    pub(super) fn fingerprint(event_type: &str, attributes: &Attributes) -> [u8; 32] {
        let mut out = Vec::new();
        bytes(&mut out, event_type.as_bytes());
        map(&mut out, attributes.iter());
        blake3::derive_key(FINGERPRINT, &out)
    }

    pub(super) fn action(a: &ActionId) -> [u8; 16] {
        let mut out = Vec::new();
        bytes(&mut out, a.name.as_bytes());
        match &a.version {
            None => out.push(0),
            Some(v) => {
                out.push(1);
                bytes(&mut out, v.as_bytes());
            }
        }
        blake3::derive_key(ACTION, &out)[..16].try_into().unwrap()
    }

    pub(super) fn occurrence(t: &Trigger) -> [u8; 16] {
        let mut out = Vec::new();
        match t {
            Trigger::Input => out.push(0),
            Trigger::Emitted { producer, index } => {
                out.push(1);
                out.extend_from_slice(&producer.to_bytes());
                out.extend_from_slice(&index.to_le_bytes());
            }
            Trigger::Bootstrap { label } => {
                out.push(2);
                bytes(&mut out, label.as_bytes());
            }
        }
        blake3::derive_key(OCCURRENCE, &out)[..16].try_into().unwrap()
    }

    pub(super) fn partition(k: &KeyId, n: u32) -> u32 {
        let h = blake3::derive_key(PARTITION, &k.0);
        u32::try_from(u64::from_le_bytes(h[..8].try_into().unwrap()) % u64::from(n.max(1))).unwrap()
    }

    pub(super) fn key_group(k: &KeyId, n: u16) -> u16 {
        u16::try_from(u64::from_le_bytes(k.0[..8].try_into().unwrap()) % u64::from(n.max(1))).unwrap()
    }

    pub(super) fn state_key(k: &StateKey) -> Vec<u8> {
        let mut out = vec![1];
        out.extend_from_slice(&k.key.0);
        out.extend_from_slice(&k.seq.to_be_bytes());
        out.extend_from_slice(&k.occurrence.0);
        out.extend_from_slice(&k.fingerprint.0);
        out.extend_from_slice(&k.action.0);
        out
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: Some(Box::new(proptest::test_runner::FileFailurePersistence::WithSource("proptest-regressions"))), ..ProptestConfig::default() })]

    #[test]
    fn digests_match_documented_encodings(
        event_type in "\\PC{0,8}",
        attributes in arb_attributes(),
        nan_bits in any::<u64>(),
        action in arb_action_id(),
        trigger in arb_trigger(),
        key_bytes in proptest::collection::vec(any::<u8>(), 0..40),
        partitions in any::<u32>(),
        groups in any::<u16>(),
        sk in arb_state_key(),
    ) {
        let mut attributes = attributes;
        // Include NaNs with arbitrary payloads, which the strategy otherwise leaves out.
        attributes.insert("nan".into(), Value::Float(f64::from_bits(nan_bits | 0x7ff0_0000_0000_0001)));
        prop_assert_eq!(Fingerprint::of(&event_type, &attributes).0, spec::fingerprint(&event_type, &attributes));
        prop_assert_eq!(action.digest().0, spec::action(&action));
        prop_assert_eq!(trigger.occurrence().0, spec::occurrence(&trigger));
        let key = KeyId::of(&key_bytes);
        prop_assert_eq!(key.0, blake3::derive_key(spec::KEY, &key_bytes));
        prop_assert_eq!(key.partition(partitions), spec::partition(&key, partitions));
        prop_assert!(key.partition(partitions) < partitions.max(1));
        prop_assert_eq!(key.key_group(groups), spec::key_group(&key, groups));
        prop_assert!(key.key_group(groups) < groups.max(1));
        prop_assert_eq!(sk.to_bytes().to_vec(), spec::state_key(&sk));
        let audit = audit_log_key(&sk.key, sk.seq);
        prop_assert_eq!(audit[0], 0xA1);
        prop_assert_eq!(&audit[1..33], &sk.key.0[..]);
        prop_assert_eq!(&audit[33..41], &sk.seq.to_be_bytes()[..]);
    }

    #[test]
    fn int_and_float_fingerprints_differ(n in any::<i64>(), event_type in "[a-z]{0,6}") {
        #[allow(clippy::cast_precision_loss, reason = "any float near n will do")]
        let x = n as f64;
        let int = Fingerprint::of(&event_type, &attrs(&[("v", Value::Int(n))]));
        let float = Fingerprint::of(&event_type, &attrs(&[("v", Value::Float(x))]));
        prop_assert_ne!(int, float);
    }

    #[test]
    fn float_fingerprint_is_normalized(bits in any::<u64>()) {
        let x = f64::from_bits(bits);
        let of = |x: f64| Fingerprint::of("x", &attrs(&[("x", Value::Float(x))]));
        prop_assert_eq!(of(x), of(actionstate_core::normalize_float(x)));
        if !x.is_nan() && x != 0.0 {
            prop_assert_eq!(actionstate_core::normalize_float(x).to_bits(), bits);
        }
    }

    #[test]
    fn identical_events_with_different_ids_share_a_fingerprint(
        a in arb_event_id(),
        b in arb_event_id(),
        event_type in "[a-z_]{0,8}",
        attributes in arb_attributes(),
        key in arb_key_id(),
        seq in any::<u64>(),
        action in arb_action_id(),
        trigger in arb_trigger(),
    ) {
        let ea = Event { id: a, event_type: event_type.clone(), attributes: attributes.clone() };
        let eb = Event { id: b, event_type, attributes };
        prop_assert_eq!(ea.fingerprint(), eb.fingerprint());
        prop_assert_eq!(StateKey::new(key, seq, &action, &ea, &trigger), StateKey::new(key, seq, &action, &eb, &trigger));
    }

    #[test]
    fn identical_outputs_of_one_producer_get_distinct_keys(
        producer in arb_state_key(),
        i in any::<u32>(),
        j in any::<u32>(),
        event in arb_event(),
        action in arb_action_id(),
    ) {
        let ka = StateKey::new(producer.key, producer.seq, &action, &event, &Trigger::Emitted { producer, index: i });
        let kb = StateKey::new(producer.key, producer.seq, &action, &event, &Trigger::Emitted { producer, index: j });
        prop_assert_eq!(ka == kb, i == j);
    }

    #[test]
    fn state_key_bytes_round_trip(sk in arb_state_key()) {
        let bytes = sk.to_bytes();
        prop_assert_eq!(bytes.len(), StateKey::ENCODED_LEN);
        prop_assert_eq!(bytes[0], StateKey::LAYOUT);
        prop_assert_eq!(StateKey::from_bytes(&bytes).unwrap(), sk);
        prop_assert_eq!(codec::decode_state_key(&bytes).unwrap(), sk);
        prop_assert_eq!(sk.local().within(sk.key, sk.seq), sk);
    }

    /// Encoded keys of one business key sort by round, whatever the rest of the key holds; and
    /// byte order agrees with the derived order of `StateKey`.
    #[test]
    fn encoded_keys_sort_by_seq(a in arb_state_key(), b in arb_state_key(), key in arb_key_id()) {
        let a_same = StateKey { key, ..a };
        let b_same = StateKey { key, ..b };
        if a_same.seq != b_same.seq {
            prop_assert_eq!(
                a_same.to_bytes().cmp(&b_same.to_bytes()),
                a_same.seq.cmp(&b_same.seq)
            );
            let ka = audit_log_key(&key, a_same.seq);
            let kb = audit_log_key(&key, b_same.seq);
            prop_assert_eq!(ka.cmp(&kb), a_same.seq.cmp(&b_same.seq));
        }
        prop_assert_eq!(a.to_bytes().cmp(&b.to_bytes()), a.cmp(&b));
    }
}

#[test]
fn encoded_keys_sort_by_seq_across_byte_boundaries() {
    let key = KeyId::of(b"customer-42");
    let base = fixed_state_key();
    let seqs =
        [0u64, 1, 0xff, 0x100, 0xffff, 0x1_0000, u64::from(u32::MAX), u64::from(u32::MAX) + 1, u64::MAX - 1, u64::MAX];
    let encoded: Vec<[u8; 105]> = seqs
        .iter()
        .enumerate()
        .map(|(i, &seq)| {
            // Later rounds get smaller trailing fields, so only the seq can order them.
            let filler = u8::try_from(0xff - i).unwrap();
            StateKey {
                key,
                seq,
                occurrence: OccurrenceId([filler; 16]),
                fingerprint: Fingerprint([filler; 32]),
                action: ActionDigest([filler; 16]),
            }
            .to_bytes()
        })
        .collect();
    assert!(encoded.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(StateKey::from_bytes(&encoded[3]).unwrap().seq, 0x100);
    assert_eq!(base.to_bytes()[33..41], 7u64.to_be_bytes());
}

// ---------------------------------------------------------------------------------------------
// Markers
// ---------------------------------------------------------------------------------------------

fn log(id: &str, partitions: u32) -> LogIdentity {
    LogIdentity { backend: "file".into(), id: id.into(), partitions }
}

fn marker(id: &str, offsets: &[u64]) -> Marker {
    Marker { log: log(id, u32::try_from(offsets.len()).unwrap()), offsets: offsets.to_vec() }
}

#[test]
fn marker_merge_takes_min_per_partition() {
    let a = marker("t1", &[5, 0, 9, 100]);
    let b = marker("t1", &[3, 7, 9, 200]);
    let c = marker("t1", &[4, 2, 10, 150]);
    let merged = Marker::merge([&a, &b, &c]).unwrap().unwrap();
    assert_eq!(merged, marker("t1", &[3, 0, 9, 100]));
    // Order does not matter.
    assert_eq!(Marker::merge([&c, &a, &b]).unwrap().unwrap(), merged);
    assert_eq!(Marker::merge([&a]).unwrap().unwrap(), a);
    assert_eq!(Marker::merge([&a, &a]).unwrap().unwrap(), a);
    assert_eq!(Marker::merge(std::iter::empty::<&Marker>()).unwrap(), None);
}

#[test]
fn marker_merge_rejects_mixed_logs() {
    let a = marker("t1", &[5, 6]);
    let other_id = marker("t2", &[1, 1]);
    let err = Marker::merge([&a, &other_id]).unwrap_err();
    assert!(
        matches!(&err, Error::MixedMarkers { first, second } if *first == a.log.to_string() && *second == other_id.log.to_string()),
        "{err:?}"
    );
    let other_backend = Marker { log: LogIdentity { backend: "kafka".into(), ..a.log.clone() }, offsets: vec![1, 1] };
    assert!(matches!(Marker::merge([&a, &other_backend]), Err(Error::MixedMarkers { .. })));
    let other_partitions = marker("t1", &[1, 1, 1]);
    assert!(matches!(Marker::merge([&a, &other_partitions]), Err(Error::MixedMarkers { .. })));
    // Same identity but a malformed offset list.
    let short = Marker { log: a.log.clone(), offsets: vec![1] };
    assert!(matches!(Marker::merge([&a, &short]), Err(Error::MixedMarkers { .. })));
    // A mismatch anywhere in the sequence is caught.
    assert!(matches!(Marker::merge([&a, &a, &other_id, &a]), Err(Error::MixedMarkers { .. })));
}

#[test]
fn marker_validate_log_changed() {
    let m = marker("t1", &[1, 2]);
    for current in [log("t2", 2), log("t1", 3), LogIdentity { backend: "kafka".into(), ..log("t1", 2) }] {
        let err = m.validate(&current, &[0, 0, 0], &[10, 10, 10]).unwrap_err();
        assert!(
            matches!(&err, Error::LogChanged { expected, found } if *expected == m.log.to_string() && *found == current.to_string()),
            "{err:?}"
        );
    }
}

#[test]
fn marker_validate_unknown_partition() {
    let current = log("t1", 3);
    // More offsets than the log has partitions: partition 3 is the first unknown one.
    let long = Marker { log: current.clone(), offsets: vec![0, 0, 0, 0, 0] };
    let err = long.validate(&current, &[0; 5], &[10; 5]).unwrap_err();
    assert!(matches!(err, Error::UnknownPartition { partition: 3, partitions: 3, .. }), "{err:?}");
    // Fewer offsets than partitions: partition 2 has no offset in the marker.
    let short = Marker { log: current.clone(), offsets: vec![0, 0] };
    let err = short.validate(&current, &[0; 3], &[10; 3]).unwrap_err();
    assert!(matches!(err, Error::UnknownPartition { partition: 2, partitions: 3, .. }), "{err:?}");
    // End offsets missing for a partition of the marker.
    let m = marker("t1", &[0, 0, 0]);
    let err = m.validate(&current, &[0, 0, 0], &[10, 10]).unwrap_err();
    assert!(matches!(err, Error::UnknownPartition { partition: 2, partitions: 2, .. }), "{err:?}");
    assert!(err.to_string().contains("unknown partition 2"), "{err}");
}

#[test]
fn marker_validate_offsets() {
    let current = log("t1", 3);
    let earliest = [0, 5, 5];
    let end = [10, 10, 20];
    // Exact bounds are valid: offset == earliest and offset == end.
    marker("t1", &[0, 5, 20]).validate(&current, &earliest, &end).unwrap();
    marker("t1", &[10, 10, 5]).validate(&current, &earliest, &end).unwrap();
    marker("t1", &[3, 7, 11]).validate(&current, &earliest, &end).unwrap();

    let err = marker("t1", &[0, 11, 5]).validate(&current, &earliest, &end).unwrap_err();
    assert!(matches!(err, Error::OffsetBeyondEnd { partition: 1, offset: 11, end: 10 }), "{err:?}");
    let err = marker("t1", &[0, 5, 21]).validate(&current, &earliest, &end).unwrap_err();
    assert!(matches!(err, Error::OffsetBeyondEnd { partition: 2, offset: 21, end: 20 }), "{err:?}");

    let err = marker("t1", &[0, 5, 4]).validate(&current, &earliest, &end).unwrap_err();
    assert!(matches!(err, Error::DataLoss { partition: 2, offset: 4, earliest: 5 }), "{err:?}");
    let err = marker("t1", &[0, 4, 5]).validate(&current, &earliest, &end).unwrap_err();
    assert!(matches!(err, Error::DataLoss { partition: 1, offset: 4, earliest: 5 }), "{err:?}");

    // The first failing partition is reported.
    let err = marker("t1", &[11, 0, 99]).validate(&current, &earliest, &end).unwrap_err();
    assert!(matches!(err, Error::OffsetBeyondEnd { partition: 0, offset: 11, end: 10 }), "{err:?}");

    // An empty log (earliest == end) accepts exactly that offset.
    let empty_end = [7, 7, 7];
    marker("t1", &[7, 7, 7]).validate(&current, &empty_end, &empty_end).unwrap();
    let err = marker("t1", &[7, 6, 7]).validate(&current, &empty_end, &empty_end).unwrap_err();
    assert!(matches!(err, Error::DataLoss { partition: 1, offset: 6, earliest: 7 }), "{err:?}");
}

// ---------------------------------------------------------------------------------------------
// Nesting depth
// ---------------------------------------------------------------------------------------------

/// A value nested `depth` lists deep around a null.
fn nested_list(depth: usize) -> Value {
    let mut v = Value::Null;
    for _ in 0..depth {
        v = Value::List(vec![v]);
    }
    v
}

/// An Upsert payload whose single output carries `{"a": <depth lists around null>}`, built
/// byte by byte so that no deep value exists in memory.
fn deep_payload(depth: usize) -> Vec<u8> {
    let event = fixed_event(1, "t", attrs(&[("a", Value::Null)]));
    let record = LogRecord::Upsert(ActionState {
        key: fixed_state_key(),
        action: ActionId::new("x"),
        trigger: Trigger::Input,
        trigger_event: EventId(1),
        input: Fingerprint([0; 32]),
        progress: Progress::Completed { outputs: vec![event], memory: vec![] },
    });
    let payload = postcard::to_allocvec(&record).unwrap();
    // The payload ends with the attribute key "a", the Null variant and an empty memory list.
    let (head, tail) = payload.split_at(payload.len() - 2);
    assert_eq!(tail, [0, 0]);
    assert_eq!(head[head.len() - 2..], [1, b'a']);
    let mut out = head.to_vec();
    for _ in 0..depth {
        out.extend_from_slice(&[6, 1]); // List variant, one item
    }
    out.extend_from_slice(tail);
    out
}

/// Values nest at most `MAX_VALUE_DEPTH` lists and maps deep; the codec refuses deeper ones on
/// both sides instead of exhausting the stack.
const MAX_VALUE_DEPTH: usize = 128;

#[test]
fn nesting_at_the_limit_round_trips() {
    let deep = nested_list(MAX_VALUE_DEPTH);
    let record = LogRecord::Upsert(ActionState {
        key: fixed_state_key(),
        action: ActionId::new("x"),
        trigger: Trigger::Input,
        trigger_event: EventId(1),
        input: Fingerprint([0; 32]),
        progress: Progress::Completed {
            outputs: vec![fixed_event(
                1,
                "t",
                attrs(&[("a", deep), ("m", map(&[("l", nested_list(MAX_VALUE_DEPTH - 1))]))]),
            )],
            memory: vec![],
        },
    });
    let value = assert_round_trip(&record);
    let payload = postcard::to_allocvec(&record).unwrap();
    assert_eq!(value[HEADER_LEN..], payload[..]);
    assert_eq!(
        codec::decode_value(&envelope(FORMAT_VERSION, 1, &deep_payload(MAX_VALUE_DEPTH))).unwrap().kind(),
        RecordKind::Upsert
    );
}

#[test]
fn nesting_beyond_the_limit_is_an_error() {
    // Encoding refuses what decoding would refuse.
    let too_deep = LogRecord::Upsert(ActionState {
        key: fixed_state_key(),
        action: ActionId::new("x"),
        trigger: Trigger::Input,
        trigger_event: EventId(1),
        input: Fingerprint([0; 32]),
        progress: Progress::Completed {
            outputs: vec![fixed_event(1, "t", attrs(&[("a", map(&[("m", nested_list(MAX_VALUE_DEPTH))]))]))],
            memory: vec![],
        },
    });
    let err = codec::encode(&too_deep).unwrap_err();
    assert!(matches!(err, Error::Payload { .. }), "{err:?}");
    // Decoding a checksum-valid payload nested far beyond the limit fails cleanly, without
    // running out of stack.
    for depth in [MAX_VALUE_DEPTH + 1, 1_000, 200_000] {
        let err = codec::decode_value(&envelope(FORMAT_VERSION, 1, &deep_payload(depth))).unwrap_err();
        assert!(matches!(err, Error::Payload { .. }), "depth {depth}: {err:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// peek: the evidence of a record without materializing it
// ---------------------------------------------------------------------------------------------

/// `peek` answers exactly as `decode` does: the same error, or the evidence of the same state.
fn assert_peek_agrees(key: &[u8], value: &[u8]) -> Result<(), TestCaseError> {
    match (codec::peek(key, value), codec::decode(key, value)) {
        (Ok(codec::Peeked::Upsert(evidence)), Ok(LogRecord::Upsert(state))) => {
            prop_assert_eq!(evidence, Evidence::of(&state));
        }
        (Ok(codec::Peeked::Other(peeked)), Ok(decoded)) => {
            prop_assert!(!matches!(decoded, LogRecord::Upsert(_)));
            prop_assert_eq!(*peeked, decoded);
        }
        (Err(a), Err(b)) => prop_assert_eq!(a.to_string(), b.to_string()),
        (peeked, decoded) => prop_assert!(false, "peek {:?} but decode {:?}", peeked, decoded),
    }
    Ok(())
}

proptest! {
    #[test]
    fn peek_agrees_with_decode(record in arb_record()) {
        let wire = codec::encode(&record).unwrap();
        assert_peek_agrees(&wire.key, &wire.value)?;
        let expected = match &record {
            LogRecord::Upsert(s) => codec::Peeked::Upsert(Evidence::of(s)),
            other => codec::Peeked::Other(Box::new(other.clone())),
        };
        prop_assert_eq!(codec::peek(&wire.key, &wire.value).unwrap(), expected);
    }

    /// Corrupted payloads under a valid checksum (what a buggy writer could produce) exercise
    /// every step of the walk: it must refuse whatever the decoder refuses.
    #[test]
    fn peek_agrees_with_decode_on_corrupted_payloads(
        record in arb_record(),
        mutations in proptest::collection::vec(arb_mutation(), 1..4),
    ) {
        let wire = codec::encode(&record).unwrap();
        let mut payload = postcard::to_allocvec(&record).unwrap();
        for m in &mutations {
            if !payload.is_empty() || matches!(m, Mutation::Extend(_) | Mutation::Insert { .. }) {
                m.apply(&mut payload);
            }
        }
        assert_peek_agrees(&wire.key, &envelope(FORMAT_VERSION, record.kind() as u8, &payload))?;
    }

    #[test]
    fn peek_agrees_with_decode_on_random_payloads(
        key in proptest::collection::vec(any::<u8>(), 105..=105),
        payload in proptest::collection::vec(any::<u8>(), 0..600),
    ) {
        assert_peek_agrees(&key, &envelope(FORMAT_VERSION, 1, &payload))?;
    }

    /// A record keyed by another state key is refused by both.
    #[test]
    fn peek_checks_the_log_key(record in arb_record(), other in arb_state_key()) {
        let wire = codec::encode(&record).unwrap();
        assert_peek_agrees(&other.to_bytes(), &wire.value)?;
    }
}

#[test]
fn peek_bounds_value_nesting_like_decode() {
    let key = fixed_state_key().to_bytes();
    for depth in [MAX_VALUE_DEPTH - 1, MAX_VALUE_DEPTH, MAX_VALUE_DEPTH + 1, 10 * MAX_VALUE_DEPTH] {
        let value = envelope(FORMAT_VERSION, 1, &deep_payload(depth));
        assert_peek_agrees(&key, &value).unwrap();
        assert_eq!(codec::peek(&key, &value).is_ok(), depth <= MAX_VALUE_DEPTH, "depth {depth}");
    }
}

/// The walk reads varints with postcard's limits: a longer encoding than needed is accepted
/// (postcard does not require the shortest); a `u32` may take five bytes and a `u128` nineteen,
/// the last of which may carry only the bits left (four and two); a longer varint is refused.
/// `peek` and `decode` agree on each.
#[test]
fn peek_reads_varints_as_postcard_does() {
    let record = golden_upsert_completed();
    let LogRecord::Upsert(state) = &record else { unreachable!("an upsert") };
    let wire = codec::encode(&record).unwrap();
    let payload = postcard::to_allocvec(&record).unwrap();
    let check = |bytes: Vec<u8>, accepted: bool, what: &str| {
        let value = envelope(FORMAT_VERSION, record.kind() as u8, &bytes);
        assert_peek_agrees(&wire.key, &value).unwrap();
        assert_eq!(codec::peek(&wire.key, &value).is_ok(), accepted, "{what}");
    };
    // A LEB128 varint of `v` in exactly `len` bytes, `top` or'ed into the last one.
    let padded = |v: u128, len: usize, top: u8| -> Vec<u8> {
        let mut out: Vec<u8> = (0..len - 1).map(|i| ((v >> (7 * i)) as u8 & 0x7f) | 0x80).collect();
        out.push(((v >> (7 * (len - 1))) as u8 & 0x7f) | top);
        out
    };

    // The `Upsert` variant index (a u32, 0) opens the payload in one byte.
    assert_eq!(payload[0], 0);
    for (index, accepted) in
        [(padded(0, 2, 0), true), (padded(0, 5, 0), true), (padded(0, 5, 0x10), false), (padded(0, 6, 0), false)]
    {
        let mut bytes = index.clone();
        bytes.extend_from_slice(&payload[1..]);
        check(bytes, accepted, &format!("variant index as {index:02x?}"));
    }

    // The trigger event id (a u128) follows the key, the action and the trigger.
    let at = postcard::to_allocvec(&(0u8, &state.key, &state.action, &state.trigger)).unwrap().len();
    let id_len = postcard::to_allocvec(&state.trigger_event).unwrap().len();
    let id = state.trigger_event.0;
    assert!(id < 1 << 126);
    for (varint, accepted) in [(padded(id, 19, 0), true), (padded(id, 19, 3), true), (padded(id, 19, 4), false)] {
        let mut bytes = payload[..at].to_vec();
        bytes.extend_from_slice(&varint);
        bytes.extend_from_slice(&payload[at + id_len..]);
        check(bytes, accepted, &format!("trigger event id as {varint:02x?}"));
    }
}
