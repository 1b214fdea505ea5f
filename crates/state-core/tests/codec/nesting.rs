//! Nesting depth: values nest at most `MAX_VALUE_DEPTH` deep, on both sides of the codec.

use crate::support::{assert_round_trip, attrs, envelope, fixed_event, fixed_state_key, map};
use actionstate_core::codec::{self, FORMAT_VERSION, HEADER_LEN};
use actionstate_core::{
    ActionId, ActionState, Error, EventId, Fingerprint, LogRecord, Progress, RecordKind, Trigger, Value,
};

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
pub(crate) fn deep_payload(depth: usize) -> Vec<u8> {
    let event = fixed_event(1, "t", attrs(&[("a", Value::Null)]));
    let record = LogRecord::Upsert(ActionState {
        label: None,
        trace: None,
        key: fixed_state_key(),
        action: ActionId::new("x"),
        trigger: Trigger::Input,
        trigger_event: EventId(1),
        input: Fingerprint([0; 32]),
        progress: Progress::Completed { outputs: vec![event], memory: vec![] },
    });
    let payload = postcard::to_allocvec(&record).unwrap();
    // The payload ends with the attribute key "a", the Null variant, an empty memory list, no
    // key label and no trace context.
    let (head, tail) = payload.split_at(payload.len() - 4);
    assert_eq!(tail, [0, 0, 0, 0]);
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
pub(crate) const MAX_VALUE_DEPTH: usize = 128;

#[test]
fn nesting_at_the_limit_round_trips() {
    let deep = nested_list(MAX_VALUE_DEPTH);
    let record = LogRecord::Upsert(ActionState {
        label: None,
        trace: None,
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
        label: None,
        trace: None,
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
