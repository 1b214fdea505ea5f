//! Proptest strategies for every type a record holds.

use actionstate_core::{
    ActionDigest, ActionId, ActionState, Attributes, Audit, AuditDetail, CallResult, CallStatus, Event, EventId,
    Fingerprint, IdempotencyKey, InvalidationReason, KeyId, KeyLabel, LogRecord, MemoryOp, MemoryUpdate, MissReason,
    OccurrenceId, Progress, StateKey, TaggedBytes, TraceContext, Trigger, Value, WaitOutcome, WaitSecret, WaitSlot,
};
use proptest::prelude::*;

pub(crate) fn arb_key_id() -> impl Strategy<Value = KeyId> {
    any::<[u8; 32]>().prop_map(KeyId)
}

pub(crate) fn arb_state_key() -> impl Strategy<Value = StateKey> {
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

pub(crate) fn arb_event_id() -> impl Strategy<Value = EventId> {
    any::<u128>().prop_map(EventId)
}

pub(crate) fn arb_fingerprint() -> impl Strategy<Value = Fingerprint> {
    any::<[u8; 32]>().prop_map(Fingerprint)
}

pub(crate) fn arb_action_id() -> impl Strategy<Value = ActionId> {
    ("[a-z_]{0,12}", proptest::option::of("\\PC{0,6}")).prop_map(|(name, version)| ActionId { name, version })
}

pub(crate) fn arb_trigger() -> impl Strategy<Value = Trigger> {
    prop_oneof![
        Just(Trigger::Input),
        (arb_state_key(), any::<u32>()).prop_map(|(producer, index)| Trigger::Emitted { producer, index }),
        "\\PC{0,10}".prop_map(|label| Trigger::Bootstrap { label }),
    ]
}

/// Every float class except NaN: NaN is not equal to itself, so records holding one cannot be
/// compared with `==` after a round trip. NaN handling is covered by the byte-level tests.
pub(crate) fn arb_float() -> impl Strategy<Value = f64> {
    use proptest::num::f64;
    f64::POSITIVE | f64::NEGATIVE | f64::NORMAL | f64::SUBNORMAL | f64::ZERO | f64::INFINITE
}

pub(crate) fn arb_value() -> impl Strategy<Value = Value> {
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

pub(crate) fn arb_attributes() -> impl Strategy<Value = Attributes> {
    proptest::collection::btree_map("\\PC{0,8}", arb_value(), 0..5).prop_map(Attributes::from)
}

pub(crate) fn arb_event() -> impl Strategy<Value = Event> {
    (arb_event_id(), "[a-z_]{0,12}", arb_attributes()).prop_map(|(id, event_type, attributes)| Event {
        id,
        event_type,
        attributes,
    })
}

pub(crate) fn arb_call_status() -> impl Strategy<Value = CallStatus> {
    prop_oneof![
        Just(CallStatus::Pending { key: None }),
        (arb_state_key(), any::<u32>(), 0usize..64, "[a-z.]{0,8}").prop_map(|(sk, incarnation, position, f)| {
            CallStatus::Pending { key: Some(IdempotencyKey::derive("", &sk, incarnation, position, &f, &[7; 32])) }
        }),
        // An empty result is a valid result and must survive as such.
        Just(CallStatus::Succeeded { result: Vec::new() }),
        proptest::collection::vec(any::<u8>(), 0..32).prop_map(|result| CallStatus::Succeeded { result }),
        proptest::collection::vec(any::<u8>(), 0..32).prop_map(|error| CallStatus::Failed { error }),
        arb_wait_slot().prop_map(|wait| CallStatus::Waiting { wait }),
        (arb_wait_slot(), arb_wait_outcome()).prop_map(|(wait, outcome)| CallStatus::Resolved { wait, outcome }),
    ]
}

pub(crate) fn arb_wait_slot() -> impl Strategy<Value = WaitSlot> {
    (any::<[u8; 16]>(), any::<u64>(), proptest::option::of(any::<u64>()))
        .prop_map(|(secret, since_ms, deadline_ms)| WaitSlot { secret: WaitSecret(secret), since_ms, deadline_ms })
}

pub(crate) fn arb_wait_outcome() -> impl Strategy<Value = WaitOutcome> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..32).prop_map(WaitOutcome::Reply),
        proptest::collection::vec(any::<u8>(), 0..32).prop_map(WaitOutcome::Rejected),
        Just(WaitOutcome::TimedOut),
    ]
}

pub(crate) fn arb_call_result() -> impl Strategy<Value = CallResult> {
    ("[a-z.:_]{0,16}", any::<[u8; 32]>(), arb_call_status()).prop_map(|(function_id, args_digest, status)| CallResult {
        function_id,
        args_digest,
        status,
    })
}

pub(crate) fn arb_memory_update() -> impl Strategy<Value = MemoryUpdate> {
    let op = prop_oneof![
        ("[a-z]{0,8}", proptest::collection::vec(any::<u8>(), 0..24))
            .prop_map(|(tag, bytes)| MemoryOp::Set(TaggedBytes { tag, bytes })),
        Just(MemoryOp::NewObject),
        Just(MemoryOp::Delete),
    ];
    ("\\PC{0,16}", op).prop_map(|(path, op)| MemoryUpdate { path, op })
}

pub(crate) fn arb_pending() -> impl Strategy<Value = Progress> {
    proptest::collection::vec(arb_call_result(), 0..6).prop_map(|calls| Progress::Pending { calls })
}

pub(crate) fn arb_completed() -> impl Strategy<Value = Progress> {
    (proptest::collection::vec(arb_event(), 0..4), proptest::collection::vec(arb_memory_update(), 0..6))
        .prop_map(|(outputs, memory)| Progress::Completed { outputs, memory })
}

/// No label, or one of up to 80 characters (ASCII or not), which `KeyLabel` cuts at 64 bytes.
pub(crate) fn arb_label() -> impl Strategy<Value = Option<KeyLabel>> {
    proptest::option::of("[a-z0-9_-]{0,80}|[a-zé😀-]{0,30}".prop_map(|name| KeyLabel::new(&name)))
}

/// No trace context, or any valid one.
pub(crate) fn arb_trace() -> impl Strategy<Value = Option<TraceContext>> {
    proptest::option::of(
        (any::<[u8; 16]>(), any::<[u8; 8]>(), any::<u8>())
            .prop_filter_map("an all-zero id is no context", |(t, s, f)| TraceContext::new(t, s, f)),
    )
}

pub(crate) fn arb_action_state(progress: impl Strategy<Value = Progress>) -> impl Strategy<Value = ActionState> {
    let parts = (arb_state_key(), arb_action_id(), arb_trigger(), arb_event_id(), arb_fingerprint(), progress);
    (parts, arb_label(), arb_trace()).prop_map(
        |((key, action, trigger, trigger_event, input, progress), label, trace)| ActionState {
            label,
            trace,
            key,
            action,
            trigger,
            trigger_event,
            input,
            progress,
        },
    )
}

pub(crate) fn arb_miss_reason() -> impl Strategy<Value = MissReason> {
    proptest::sample::select(MissReason::ALL.to_vec())
}

pub(crate) fn arb_invalidation_reason() -> impl Strategy<Value = InvalidationReason> {
    prop_oneof![
        arb_miss_reason().prop_map(InvalidationReason::Miss),
        Just(InvalidationReason::ProducerReplaced),
        "\\PC{0,40}".prop_map(|text| InvalidationReason::Operator { text }),
    ]
}

pub(crate) fn arb_audit_detail() -> impl Strategy<Value = AuditDetail> {
    prop_oneof![
        Just(AuditDetail::Absent),
        (proptest::collection::vec(arb_fingerprint(), 0..4), arb_fingerprint())
            .prop_map(|(recorded, current)| AuditDetail::RootChanged { recorded, current }),
        (arb_event_id(), arb_event_id())
            .prop_map(|(recorded, current)| AuditDetail::OccurrenceConflict { recorded, current }),
        arb_state_key().prop_map(|producer| AuditDetail::ProducerReplaced { producer }),
        Just(AuditDetail::Operator),
    ]
}

pub(crate) fn arb_audit() -> impl Strategy<Value = Audit> {
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

pub(crate) fn arb_delete() -> impl Strategy<Value = LogRecord> {
    (arb_state_key(), arb_invalidation_reason()).prop_map(|(key, reason)| LogRecord::Delete { key, reason })
}

pub(crate) fn arb_record() -> impl Strategy<Value = LogRecord> {
    prop_oneof![
        arb_action_state(arb_pending()).prop_map(LogRecord::Upsert),
        arb_action_state(arb_completed()).prop_map(LogRecord::Upsert),
        arb_delete(),
        arb_audit().prop_map(LogRecord::Audit),
        arb_fence().prop_map(LogRecord::Fence),
        arb_checkpoint().prop_map(LogRecord::Checkpoint),
        arb_resolve().prop_map(LogRecord::Resolve),
    ]
}

/// A resolve request for any key and secret: a reply or a rejection of up to 64 bytes.
pub(crate) fn arb_resolve() -> impl Strategy<Value = actionstate_core::ResolveRequest> {
    use actionstate_core::{KeyId, ResolveRequest, WaitOutcome, WaitSecret};
    let outcome = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..64).prop_map(WaitOutcome::Reply),
        prop::collection::vec(any::<u8>(), 0..64).prop_map(WaitOutcome::Rejected),
    ];
    (any::<[u8; 32]>(), any::<[u8; 16]>(), outcome).prop_map(|(key, secret, outcome)| ResolveRequest {
        key: KeyId(key),
        secret: WaitSecret(secret),
        outcome,
    })
}

/// A checkpoint part, commit, rollback or external checkpoint of any owner, epoch and id, with a few completed rounds, a
/// marker of up to four partitions and metadata up to 64 bytes.
pub(crate) fn arb_checkpoint() -> impl Strategy<Value = actionstate_core::CheckpointRecord> {
    use actionstate_core::{CheckpointCommit, CheckpointEntry, KeyId, LogIdentity, Marker};
    let completed = prop::collection::vec((any::<[u8; 32]>().prop_map(KeyId), any::<u64>()), 0..4);
    let commit = (
        prop::collection::vec(any::<u64>(), 1..4),
        prop::collection::vec(any::<u8>(), 0..64),
        completed.clone(),
        any::<u32>(),
        any::<u64>(),
    )
        .prop_map(|(offsets, metadata, completed, parts, from)| {
            let log = LogIdentity { backend: "memory".into(), id: "m".into(), partitions: offsets.len() as u32 };
            CheckpointEntry::Commit(CheckpointCommit {
                marker: Marker::new(log, offsets),
                metadata,
                completed,
                parts,
                from,
            })
        });
    let part = (0u32..u32::MAX, completed).prop_map(|(index, completed)| CheckpointEntry::Part { index, completed });
    let rollback = prop::collection::vec((any::<u64>(), arb_fence().prop_map(|f| f.groups)), 0..3)
        .prop_map(|restored| CheckpointEntry::Rollback(actionstate_core::CheckpointRollback { restored }));
    let external = (prop::collection::vec(any::<u64>(), 1..4), any::<u64>()).prop_map(|(offsets, from)| {
        let log = LogIdentity { backend: "memory".into(), id: "m".into(), partitions: offsets.len() as u32 };
        CheckpointEntry::External(actionstate_core::ExternalCheckpoint { marker: Marker::new(log, offsets), from })
    });
    (arb_fence(), any::<u64>(), prop_oneof![commit, part, rollback, external]).prop_map(|(fence, id, entry)| {
        actionstate_core::CheckpointRecord { key: fence.key, owner: fence.groups, epoch: fence.epoch, id, entry }
    })
}

/// A fence of every key or of a range of key groups, under any key id and epoch.
pub(crate) fn arb_fence() -> impl Strategy<Value = actionstate_core::Fence> {
    let groups = prop_oneof![
        Just(actionstate_core::Ownership::All),
        (1u16..=u16::MAX, any::<u16>(), any::<u16>()).prop_map(|(max_groups, a, b)| {
            actionstate_core::Ownership::Groups { max_groups, owned: a.min(b)..a.max(b) }
        }),
    ];
    (any::<[u8; 32]>(), groups, any::<u64>()).prop_map(|(key, groups, epoch)| actionstate_core::Fence {
        key: actionstate_core::KeyId(key),
        groups,
        epoch,
    })
}
