//! Records survive encoding and decoding, and the envelope is the documented one.

use crate::strategies::{arb_action_state, arb_audit, arb_completed, arb_delete, arb_pending, arb_record};
use crate::support::{assert_round_trip, attrs, envelope, fixed_event, fixed_input, fixed_state_key, map};
use actionstate_core::codec::{self, FORMAT_VERSION, HEADER_LEN, MAGIC};
use actionstate_core::{
    ActionId, ActionState, Audit, AuditDetail, CallResult, CallStatus, Error, EventId, Fingerprint, InvalidationReason,
    LogRecord, MAX_OPERATOR_TEXT, MemoryOp, MemoryUpdate, MissReason, Progress, RecordKind, StateKey, TaggedBytes,
    Trigger, Value,
};
use proptest::prelude::*;

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
// Long: every record variant written out, as a list.
#[test]
fn every_variant_round_trips() {
    let sk = fixed_state_key();
    let reasons = [
        InvalidationReason::Miss(MissReason::Absent),
        InvalidationReason::Miss(MissReason::RootChanged),
        InvalidationReason::Miss(MissReason::OccurrenceConflict),
        InvalidationReason::ProducerReplaced,
        InvalidationReason::Operator { text: String::new() },
        InvalidationReason::Operator { text: "replay the tool call after the fix: ünïcode ✓".into() },
        InvalidationReason::Operator { text: "x".repeat(MAX_OPERATOR_TEXT) },
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
        AuditDetail::Operator,
    ];
    let mut records = Vec::new();
    for reason in reasons {
        records.push(LogRecord::Delete { key: sk, reason: reason.clone() });
        for detail in &details {
            for action in [None, Some(ActionId::versioned("summarize", ""))] {
                records.push(LogRecord::Audit(Audit {
                    key: sk.key,
                    seq: sk.seq,
                    probe: sk,
                    action,
                    reason: reason.clone(),
                    detail: detail.clone(),
                    removed: 3,
                }));
            }
        }
    }
    let statuses = [
        CallStatus::Pending { key: None },
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
                label: None,
                trace: None,
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
                label: None,
                trace: None,
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
                label: None,
                trace: None,
                progress: Progress::Completed { outputs: vec![], memory: vec![] },
                ..base
            }));
        }
    }
    assert_eq!(records.len(), 7 + 7 * 6 * 2 + 5 * 3 * 4);
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
            label: None,
            trace: None,
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
    let pending = assert_round_trip(&with(CallStatus::Pending { key: None }));
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
    assert_eq!(codec::encode_value(&record).unwrap(), envelope(5, 2, &payload));
    assert_eq!(codec::encode_value_by(&record, 0x0102_0304_0506_0708).unwrap(), {
        let mut expected = MAGIC.to_vec();
        expected.extend_from_slice(&[5, 2]);
        expected.extend_from_slice(&u32::try_from(payload.len()).unwrap().to_le_bytes());
        expected.extend_from_slice(&[8, 7, 6, 5, 4, 3, 2, 1]);
        let mut covered = expected[4..].to_vec();
        covered.extend_from_slice(&payload);
        expected.extend_from_slice(&crc32c::crc32c(&covered).to_le_bytes());
        expected.extend_from_slice(&payload);
        expected
    });
    assert_eq!(MAGIC, *b"AcSt");
    assert_eq!(FORMAT_VERSION, 5);
    assert_eq!(HEADER_LEN, 22);
    assert_eq!(codec::V2_HEADER_LEN, 14);
    assert_eq!(codec::V1_HEADER_LEN, 26);
    assert_eq!(RecordKind::Upsert as u8, 1);
    assert_eq!(RecordKind::Delete as u8, 2);
    assert_eq!(RecordKind::Audit as u8, 3);
    assert_eq!(RecordKind::Fence as u8, 4);
    assert_eq!(RecordKind::Checkpoint as u8, 5);
    assert_eq!(RecordKind::Resolve as u8, 6);
    for b in 0..=u8::MAX {
        let kind = RecordKind::from_byte(b);
        assert_eq!(kind.map(|k| k as u8), (1..=6).contains(&b).then_some(b));
    }
}

/// An operator's reason text is bounded at `MAX_OPERATOR_TEXT` bytes of UTF-8: the constructor
/// and the encoder refuse a longer one with a typed error, and the decoder refuses a record
/// that carries one (written by a faulty encoder), so every record one accepts the other does.
#[test]
fn operator_text_beyond_the_limit_is_refused_by_encoder_and_decoder() {
    assert_eq!(MAX_OPERATOR_TEXT, 1024);
    let at_limit = "é".repeat(MAX_OPERATOR_TEXT / 2);
    let reason = InvalidationReason::operator(at_limit.clone()).unwrap();
    assert_eq!(reason, InvalidationReason::Operator { text: at_limit });
    let beyond = "é".repeat(MAX_OPERATOR_TEXT / 2) + "x";
    assert!(matches!(
        InvalidationReason::operator(beyond.clone()),
        Err(Error::OperatorTextTooLong { len: 1025, max: MAX_OPERATOR_TEXT })
    ));
    let sk = fixed_state_key();
    let too_long = InvalidationReason::Operator { text: beyond };
    let delete = LogRecord::Delete { key: sk, reason: too_long.clone() };
    let audit = LogRecord::Audit(Audit {
        key: sk.key,
        seq: sk.seq,
        probe: StateKey::round(sk.key, sk.seq),
        action: None,
        reason: too_long,
        detail: AuditDetail::Operator,
        removed: 0,
    });
    for record in [delete, audit] {
        assert!(
            matches!(codec::encode(&record), Err(Error::OperatorTextTooLong { len: 1025, max: 1024 })),
            "{record:?}"
        );
        let payload = postcard::to_allocvec(&record).unwrap();
        let value = envelope(FORMAT_VERSION, record.kind() as u8, &payload);
        // (postcard reports a custom error without its message.)
        let decoded = codec::decode_value(&value);
        assert!(matches!(decoded, Err(Error::Payload { .. })), "a 1025-byte operator text decoded as {decoded:?}");
    }
}

/// A key label is kept whole up to `MAX_KEY_LABEL` bytes and cut at a character boundary
/// beyond; a record carrying one longer than that (which no encoder writes) is refused.
#[test]
fn key_labels_are_bounded_and_cut_at_a_character_boundary() {
    use actionstate_core::{KeyLabel, MAX_KEY_LABEL};
    assert_eq!(KeyLabel::new("customer-42").as_str(), "customer-42");
    let long = "é".repeat(40); // 80 bytes
    let cut = KeyLabel::new(&long);
    assert_eq!(cut.as_str(), "é".repeat(32));
    assert!(cut.as_str().len() <= MAX_KEY_LABEL);
    assert_eq!(KeyLabel::new("").as_str(), "");
    // 65 bytes of label, hand-encoded: postcard's `Some`, the length, the bytes; then no trace
    // context.
    let state = ActionState {
        label: None,
        trace: None,
        key: fixed_state_key(),
        action: ActionId::new("answer"),
        trigger: Trigger::Input,
        trigger_event: EventId(7),
        input: Fingerprint([3; 32]),
        progress: Progress::Completed { outputs: vec![], memory: vec![] },
    };
    let mut payload = postcard::to_allocvec(&LogRecord::Upsert(state)).unwrap();
    assert_eq!((payload.pop(), payload.pop()), (Some(0), Some(0)));
    payload.extend_from_slice(&[1, 65]);
    payload.extend_from_slice(&[b'k'; 65]);
    payload.push(0);
    let err = codec::decode_value(&envelope(FORMAT_VERSION, 1, &payload)).unwrap_err();
    assert!(matches!(err, Error::Payload { .. }), "{err:?}");
}
