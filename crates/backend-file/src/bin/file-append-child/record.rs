//! The deterministic records the crash child appends. The crash test includes this file too,
//! so it can regenerate the exact bytes the child wrote for any sequence number.
#![allow(dead_code, reason = "the child and the crash test each use part of it")]

use actionstate_core::{
    ActionId, ActionState, Attributes, Event, EventId, KeyId, LogRecord, Progress, StateKey, Trigger, Value,
    WireRecord, codec,
};

/// Number of business keys the records are spread over.
pub(crate) const KEYS: u64 = 8;

/// The business key of record `seq`.
pub(crate) fn key_of(seq: u64) -> KeyId {
    KeyId::of(format!("crash-key-{}", seq % KEYS).as_bytes())
}

/// Record `seq`: a completed state of round `seq` of key `seq % KEYS` with one output event,
/// about 300 bytes once enveloped.
pub(crate) fn record(seq: u64) -> LogRecord {
    let mut attributes = Attributes::new();
    attributes.insert("n".into(), Value::Int(i64::try_from(seq).unwrap_or(i64::MAX)));
    attributes.insert("text".into(), Value::String(format!("{seq:020}").repeat(4)));
    let input = Event { id: EventId(u128::from(seq) << 1), event_type: "input".into(), attributes: attributes.clone() };
    let output = Event { id: EventId((u128::from(seq) << 1) | 1), event_type: "reply".into(), attributes };
    let action = ActionId::new("crash-append");
    LogRecord::Upsert(ActionState {
        label: None,
        trace: None,
        key: StateKey::new(key_of(seq), seq, &action, &input, &Trigger::Input),
        action,
        trigger: Trigger::Input,
        trigger_event: input.id,
        input: input.fingerprint(),
        progress: Progress::Completed { outputs: vec![output], memory: vec![] },
    })
}

/// The bytes the child appends for `seq`.
pub(crate) fn wire(seq: u64) -> Result<WireRecord, actionstate_core::Error> {
    codec::encode(&record(seq))
}

/// The sequence number of a record written by [`record`].
pub(crate) fn seq_of(record: &LogRecord) -> Option<u64> {
    match record {
        LogRecord::Upsert(state) => Some(state.key.seq),
        _ => None,
    }
}

/// FNV-1a of the value bytes, printed with each acknowledgement.
pub(crate) fn hash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}
