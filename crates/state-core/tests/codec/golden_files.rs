//! Golden records: the encoded bytes of fixed records, pinned in `tests/golden/*.hex`, and the
//! bytes format versions 1 to 4 wrote for them, in `tests/golden/v1` to `v4`.

use crate::support::{attrs, envelope_by, fixed_event, fixed_input, fixed_state_key, map};
use actionstate_core::codec;
use actionstate_core::{
    ActionId, ActionState, Attributes, Audit, AuditDetail, CallResult, CallStatus, CheckpointCommit, CheckpointEntry,
    CheckpointRecord, CheckpointRollback, Error, Evidence, ExternalCheckpoint, Fence, FenceMark, Fingerprint,
    IdempotencyKey, InvalidationReason, KeyId, KeyLabel, LogIdentity, LogRecord, Marker, MemoryOp, MemoryUpdate,
    MissReason, Ownership, Progress, StateKey, TaggedBytes, TraceContext, Trigger, Value, checkpoint_key_id,
    fence_key_id,
};
use std::path::{Path, PathBuf};

fn golden_upsert_pending() -> LogRecord {
    let input = fixed_input();
    LogRecord::Upsert(ActionState {
        label: None,
        trace: None,
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
                CallResult {
                    function_id: "tool.mail".into(),
                    args_digest: [0xcd; 32],
                    status: CallStatus::Pending { key: None },
                },
            ],
        },
    })
}

pub(crate) fn golden_upsert_completed() -> LogRecord {
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
        label: None,
        trace: None,
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

pub(crate) fn golden_delete() -> LogRecord {
    LogRecord::Delete { key: fixed_state_key(), reason: InvalidationReason::Miss(MissReason::RootChanged) }
}

pub(crate) fn golden_audit_root_changed() -> LogRecord {
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

/// An operator's invalidation of rounds 7 and later: its audit record (the probe names only
/// the key and the round) and the tombstone of one state it removed.
fn golden_audit_operator() -> LogRecord {
    let sk = fixed_state_key();
    LogRecord::Audit(Audit {
        key: sk.key,
        seq: 7,
        probe: StateKey::round(sk.key, 7),
        action: None,
        reason: golden_operator_reason(),
        detail: AuditDetail::Operator,
        removed: 2,
    })
}

fn golden_delete_operator() -> LogRecord {
    LogRecord::Delete { key: fixed_state_key(), reason: golden_operator_reason() }
}

fn golden_operator_reason() -> InvalidationReason {
    InvalidationReason::Operator { text: "refund tool fixed: re-run".into() }
}

/// The records format version 1 wrote, whose bytes `tests/golden/v1` keeps.
fn v1_cases() -> Vec<(&'static str, LogRecord)> {
    vec![
        ("upsert_pending", golden_upsert_pending()),
        ("upsert_completed", golden_upsert_completed()),
        ("delete", golden_delete()),
        ("audit_root_changed", golden_audit_root_changed()),
        ("audit_producer_replaced", golden_audit_producer_replaced()),
    ]
}

/// The records format version 2 wrote, whose bytes `tests/golden/v2` keeps: those of version
/// 1, and the operator's invalidation, whose variants (`InvalidationReason::Operator`,
/// `AuditDetail::Operator`) were appended to their enums after it, so the version 1 records
/// keep their bytes.
fn v2_cases() -> Vec<(&'static str, LogRecord)> {
    let mut cases = v1_cases();
    cases.push(("audit_operator", golden_audit_operator()));
    cases.push(("delete_operator", golden_delete_operator()));
    cases
}

/// A restored owner's fence in partition 1 of 4, for key groups 8..16 of 32, epoch 3.
fn golden_fence() -> LogRecord {
    LogRecord::Fence(Fence {
        key: fence_key_id(1, 4),
        groups: Ownership::Groups { max_groups: 32, owned: 8..16 },
        epoch: 3,
    })
}

/// The records format version 3 wrote, with their writer epochs, whose bytes
/// `tests/golden/v3` keeps: those of version 2 as an unfenced writer writes them (epoch 0), a
/// completed state written by the owner of epoch 3, and fence records (one of every key).
fn v3_cases() -> Vec<(&'static str, LogRecord, u64)> {
    let mut cases: Vec<_> = v2_cases().into_iter().map(|(name, record)| (name, record, 0)).collect();
    cases.push(("upsert_completed_epoch_3", golden_upsert_completed(), 3));
    cases.push(("fence", golden_fence(), 3));
    let all = LogRecord::Fence(Fence { key: KeyId::of(b"fence key"), groups: Ownership::All, epoch: u64::MAX });
    cases.push(("fence_all", all, u64::MAX));
    cases
}

/// A completed state of a key the application named: its label rides in the record (format 4).
fn golden_upsert_labeled() -> LogRecord {
    match golden_upsert_completed() {
        LogRecord::Upsert(s) => LogRecord::Upsert(ActionState { label: Some(KeyLabel::new("customer-42")), ..s }),
        other => other,
    }
}

/// The commit of checkpoint 7 of key groups 8..16 of 32, epoch 3, on a log of 4 partitions:
/// a marker with one fence, 16 bytes of metadata and two completed rounds.
fn golden_checkpoint_commit() -> LogRecord {
    let owner = Ownership::Groups { max_groups: 32, owned: 8..16 };
    let log = LogIdentity { backend: "file".into(), id: "0b4f6c1e".into(), partitions: 4 };
    let marker = Marker {
        log,
        offsets: vec![10, 0, 7, 12],
        fences: vec![FenceMark { groups: owner.clone(), epoch: 3, offsets: vec![2, 0, 1, 3] }],
    };
    LogRecord::Checkpoint(CheckpointRecord {
        key: checkpoint_key_id(4),
        owner,
        epoch: 3,
        id: 7,
        entry: CheckpointEntry::Commit(CheckpointCommit {
            marker,
            metadata: b"input offset 41\n".to_vec(),
            completed: vec![(KeyId::of(b"customer-42"), 3), (KeyId::of(b"customer-7"), 11)],
            parts: 0,
            from: 13,
        }),
    })
}

/// Part 0 of a checkpoint too large for its commit: checkpoint 8 of every key, epoch 5.
fn golden_checkpoint_part() -> LogRecord {
    LogRecord::Checkpoint(CheckpointRecord {
        key: checkpoint_key_id(4),
        owner: Ownership::All,
        epoch: 5,
        id: 8,
        entry: CheckpointEntry::Part { index: 0, completed: vec![(KeyId::of(b"customer-42"), 4)] },
    })
}

/// The rollback of a restore at epoch 9 of key groups 0..4 of 8 that restored the commit at
/// offset 13 of partition 0.
fn golden_checkpoint_rollback() -> LogRecord {
    let owner = Ownership::Groups { max_groups: 8, owned: 0..4 };
    LogRecord::Checkpoint(CheckpointRecord {
        key: checkpoint_key_id(4),
        owner: owner.clone(),
        epoch: 9,
        id: 0,
        entry: CheckpointEntry::Rollback(CheckpointRollback { restored: vec![(13, owner)] }),
    })
}

/// What an owner of key groups 8..16 of 32 at epoch 3, keeping its checkpoints itself,
/// writes once its runtime completed checkpoint 12: the snapshot's marker (one fence) and the
/// end offset of partition 0 it read.
fn golden_checkpoint_external() -> LogRecord {
    let owner = Ownership::Groups { max_groups: 32, owned: 8..16 };
    let log = LogIdentity { backend: "file".into(), id: "0b4f6c1e".into(), partitions: 4 };
    let marker = Marker {
        log,
        offsets: vec![10, 0, 7, 12],
        fences: vec![FenceMark { groups: owner.clone(), epoch: 3, offsets: vec![2, 0, 1, 3] }],
    };
    LogRecord::Checkpoint(CheckpointRecord {
        key: checkpoint_key_id(4),
        owner,
        epoch: 3,
        id: 12,
        entry: CheckpointEntry::External(ExternalCheckpoint { marker, from: 21 }),
    })
}

/// A resolve request from a process that does not own the key: the reply `{"approved":true}`
/// for the wait with secret 0x00..0x0f of key `customer-42`.
fn golden_resolve_request() -> LogRecord {
    let secret: [u8; 16] = std::array::from_fn(|i| i as u8);
    LogRecord::Resolve(actionstate_core::ResolveRequest {
        key: KeyId::of(b"customer-42"),
        secret: actionstate_core::WaitSecret(secret),
        outcome: actionstate_core::WaitOutcome::Reply(br#"{"approved":true}"#.to_vec()),
    })
}

/// A journal whose last call was recorded before it ran, in reconcile mode: its PENDING slot
/// carries the call's idempotency key (`CallStatus` variant 3).
fn golden_upsert_pending_keyed() -> LogRecord {
    match golden_upsert_pending() {
        LogRecord::Upsert(mut s) => {
            if let Progress::Pending { calls } = &mut s.progress
                && let Some(last) = calls.last_mut()
            {
                let key = IdempotencyKey::derive("", &s.key, 0, 3, &last.function_id, &last.args_digest);
                last.status = CallStatus::Pending { key: Some(key) };
            }
            LogRecord::Upsert(s)
        }
        other => other,
    }
}

/// The records format version 4 wrote, with their writer epochs, whose bytes `tests/golden/v4`
/// keeps: those of version 3 (without a label, as a key without a name is written), a labeled
/// state, a keyed PENDING slot, checkpoint records (a commit, a part, a rollback and an
/// external checkpoint) and a resolve request.
fn v4_cases() -> Vec<(&'static str, LogRecord, u64)> {
    let mut cases = v3_cases();
    cases.push(("upsert_labeled", golden_upsert_labeled(), 3));
    cases.push(("upsert_pending_keyed", golden_upsert_pending_keyed(), 3));
    cases.push(("checkpoint_commit", golden_checkpoint_commit(), 3));
    cases.push(("checkpoint_part", golden_checkpoint_part(), 5));
    cases.push(("checkpoint_rollback", golden_checkpoint_rollback(), 9));
    cases.push(("checkpoint_external", golden_checkpoint_external(), 3));
    cases.push(("resolve_request", golden_resolve_request(), 0));
    cases
}

/// A labeled state that records the trace context its first attempt ran in.
fn golden_upsert_traced() -> LogRecord {
    match golden_upsert_labeled() {
        LogRecord::Upsert(s) => {
            let trace = TraceContext::from_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
            LogRecord::Upsert(ActionState { trace, ..s })
        }
        other => other,
    }
}

/// Every golden record of the format this build writes, with the writer epoch it is written
/// with: those of version 4 (without a trace context, as a state written outside a trace is)
/// and a state with one.
fn golden_cases() -> Vec<(&'static str, LogRecord, u64)> {
    let mut cases = v4_cases();
    cases.push(("upsert_traced", golden_upsert_traced(), 3));
    cases
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
    for (name, record, epoch) in golden_cases() {
        let wire = codec::encode_by(&record, epoch).unwrap();
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
        match codec::writer_epoch(&value) {
            Ok(e) if e == epoch => {}
            other => failures.push(format!("{}: writer epoch {other:?}, expected {epoch}", path.display())),
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
    let current = golden_cases().into_iter().map(|(n, _, _)| n).collect::<Vec<_>>();
    let names_of = |cases: Vec<(&'static str, LogRecord)>| cases.into_iter().map(|(n, _)| n).collect::<Vec<_>>();
    let v3 = v3_cases().into_iter().map(|(n, _, _)| n).collect::<Vec<_>>();
    let v4 = v4_cases().into_iter().map(|(n, _, _)| n).collect::<Vec<_>>();
    for (dir, cases) in [
        (golden_dir(), current),
        (golden_dir().join("v1"), names_of(v1_cases())),
        (golden_dir().join("v2"), names_of(v2_cases())),
        (golden_dir().join("v3"), v3),
        (golden_dir().join("v4"), v4),
    ] {
        let names: Vec<String> = cases.iter().map(|n| format!("{n}.hex")).collect();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let file = entry.file_name().into_string().unwrap();
            if entry.file_type().unwrap().is_dir() {
                assert!(["v1", "v2", "v3", "v4"].contains(&file.as_str()), "stray golden directory {file}");
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
    // Its 16-byte blake3 checksum still protects every payload and checksum byte.
    old_version_files_decode(1, at_epoch_0(v1_cases()), codec::V1_HEADER_LEN);
}

/// Records written by format version 2 (no writer epoch, 14-byte header) stay readable, as
/// written by epoch 0: the files in `tests/golden/v2` are the bytes version 2 wrote for the
/// golden records. They are never rewritten.
#[test]
fn version_2_golden_files_still_decode_as_epoch_0() {
    old_version_files_decode(2, at_epoch_0(v2_cases()), codec::V2_HEADER_LEN);
}

/// Records written by format version 3 (states without a key label) stay readable, with their
/// writer epochs and no label: the files in `tests/golden/v3` are the bytes version 3 wrote for
/// the golden records. They are never rewritten.
#[test]
fn version_3_golden_files_still_decode_without_a_label() {
    old_version_files_decode(codec::V3, v3_cases(), codec::HEADER_LEN);
}

/// Records written by format version 4 (states without a trace context) stay readable, with
/// their writer epochs, labels and no trace context: the files in `tests/golden/v4` are the
/// bytes version 4 wrote for the golden records. They are never rewritten.
#[test]
fn version_4_golden_files_still_decode_without_a_trace_context() {
    old_version_files_decode(codec::V4, v4_cases(), codec::HEADER_LEN);
}

fn at_epoch_0(cases: Vec<(&'static str, LogRecord)>) -> Vec<(&'static str, LogRecord, u64)> {
    cases.into_iter().map(|(name, record)| (name, record, 0)).collect()
}

/// The payload format `version` (before 5) wrote for `record`: the same postcard encoding,
/// except that an upserted state ends before its trace context (which formats before 5 do not
/// have) and, before 4, before its key label.
fn old_payload(version: u8, record: &LogRecord) -> Vec<u8> {
    let mut payload = postcard::to_allocvec(record).unwrap();
    if let LogRecord::Upsert(s) = record {
        assert!(s.trace.is_none(), "formats before 5 have no trace context");
        assert_eq!(payload.pop(), Some(0), "a state without a trace context ends with postcard's None");
        if version < codec::V4 {
            assert!(s.label.is_none(), "formats before 4 have no label");
            assert_eq!(payload.pop(), Some(0), "a state without a label then ends with postcard's None");
        }
    }
    payload
}

/// The files of `tests/golden/v{version}` hold exactly the envelope of that version around each
/// case's payload, decode and peek to the case's record as written by the case's epoch, and
/// fail the checksum when any payload or checksum byte changes (the header is `header_len`
/// bytes).
fn old_version_files_decode(version: u8, cases: Vec<(&'static str, LogRecord, u64)>, header_len: usize) {
    for (name, record, epoch) in cases {
        let path = golden_dir().join(format!("v{version}")).join(format!("{name}.hex"));
        let (key, value) = parse_golden(&std::fs::read_to_string(&path).unwrap());
        assert_eq!(value[4], version, "{}", path.display());
        let payload = old_payload(version, &record);
        assert_eq!(value, envelope_by(version, record.kind() as u8, epoch, &payload), "{}", path.display());
        assert_eq!(codec::decode(&key, &value).unwrap(), record, "{}", path.display());
        assert_eq!(codec::writer_epoch(&value).unwrap(), epoch, "{}", path.display());
        let expected = match &record {
            LogRecord::Upsert(s) => codec::Peeked::Upsert(Evidence::of(s)),
            other => codec::Peeked::Other(Box::new(other.clone())),
        };
        assert_eq!(codec::peek(&key, &value).unwrap(), expected, "{}", path.display());
        for at in (header_len..value.len()).chain(10..header_len) {
            let mut bad = value.clone();
            bad[at] ^= 0x10;
            assert!(matches!(codec::decode(&key, &bad), Err(Error::BadChecksum)), "{} byte {at}", path.display());
        }
    }
}

/// The writer epoch of format 3 is covered by the checksum: a record whose epoch changed (a
/// zombie's record dressed as the new owner's) is refused.
#[test]
fn a_changed_writer_epoch_fails_the_checksum() {
    let wire = codec::encode_by(&golden_upsert_completed(), 3).unwrap();
    for at in 10..18 {
        let mut bad = wire.value.clone();
        bad[at] ^= 0x01;
        assert!(matches!(codec::decode(&wire.key, &bad), Err(Error::BadChecksum)), "byte {at}");
        assert!(matches!(codec::peek(&wire.key, &bad), Err(Error::BadChecksum)), "byte {at}");
    }
}
