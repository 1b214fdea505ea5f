//! The checks of the `decode` fuzz target, in one function, [`check`], that the fuzz target
//! (`fuzz/fuzz_targets/decode.rs`, nightly, cargo-fuzz) and a stable test
//! (`crates/state-core/tests/codec/fuzz_target.rs`, in every `cargo test`) both call: a target
//! that fails on its first input then fails the workspace's tests, and so CI, too.
//!
//! Each input is tried four ways:
//! 1. as an enveloped value, with `codec::decode_value` and `codec::writer_epoch`;
//! 2. as a log key and a value, with `codec::decode` and `codec::peek`: the first byte gives
//!    the key length (105 for a state key, 41 for an audit or a fence key), the key and the
//!    value follow;
//! 3. as a postcard payload wrapped in an envelope of the current format with a valid checksum,
//!    once for every record kind (fence records included), so that the fuzzer gets past the
//!    checksum and exercises payload decoding, and `codec::peek` (the rebuild's
//!    allocation-free walk) against the decoder;
//! 4. through the records those decode to, re-encoded with `codec::encode_by` under their
//!    writer epoch (for (3), one of three the input's first byte picks).
//!
//! The envelopes of (3) are not laid out here: each starts from the header
//! `codec::encode_by` writes for a golden record of the kind, and only the length and the
//! checksum are set for the new payload. Rewrapping the golden record's own payload must give
//! back exactly what the codec wrote, so a change of the format that this file does not follow
//! fails on the first input, whatever it is, instead of making every envelope invalid. The
//! headers are made once, not per input, so that the fuzzer's time goes to the decoder.
//!
//! Decoding must never panic. Whatever decodes must re-encode to bytes that decode to the same
//! record, under the same writer epoch.

use actionstate_core::codec::{self, HEADER_LEN};
use actionstate_core::{Error, Evidence, LogRecord, RecordKind};
use std::sync::OnceLock;

/// A golden record of every kind (`crates/state-core/tests/golden`, which the codec tests pin):
/// the templates of the envelopes of (3). A new record kind without one here fails every input.
const TEMPLATES: [(&str, &str); 6] = [
    ("upsert_completed", include_str!("../../crates/state-core/tests/golden/upsert_completed.hex")),
    ("delete_operator", include_str!("../../crates/state-core/tests/golden/delete_operator.hex")),
    ("audit_operator", include_str!("../../crates/state-core/tests/golden/audit_operator.hex")),
    ("fence", include_str!("../../crates/state-core/tests/golden/fence.hex")),
    ("checkpoint_commit", include_str!("../../crates/state-core/tests/golden/checkpoint_commit.hex")),
    ("resolve_request", include_str!("../../crates/state-core/tests/golden/resolve_request.hex")),
];

/// Runs every check on one input; panics (the fuzzer's finding) when one fails.
pub(crate) fn check(data: &[u8]) {
    check_value(data);
    check_keyed(data);
    let epoch = EPOCHS[usize::from(data.first().copied().unwrap_or(0)) % EPOCHS.len()];
    for template in templates().iter().filter(|t| t.epoch == epoch) {
        check_wrapped(template.kind, epoch, &envelope(&template.value, data));
    }
}

/// The writer epochs of the envelopes of (3), picked by the input's first byte: an unfenced
/// writer, a restored one and the largest epoch.
const EPOCHS: [u64; 3] = [0, 3, u64::MAX];

/// (1): `data` as an enveloped value.
fn check_value(data: &[u8]) {
    let epoch = codec::writer_epoch(data);
    if let Ok(record) = codec::decode_value(data) {
        let epoch = epoch.expect("the writer epoch of a value that decodes can be read");
        check_round_trip(&record, epoch);
    }
}

/// (2): `data` as a key length byte, a log key and a value.
fn check_keyed(data: &[u8]) {
    let Some((&key_len, rest)) = data.split_first() else { return };
    let (key, value) = rest.split_at(usize::from(key_len).min(rest.len()));
    if let Ok(record) = codec::decode(key, value) {
        let wire = codec::encode(&record).expect("a decoded record encodes");
        assert_eq!(wire.key, key, "decode accepted a key that encode does not write");
        check_round_trip(&record, codec::writer_epoch(value).expect("a decoded value has a writer epoch"));
    }
    check_peek(key, value);
}

/// (3): the envelope of the current format around the input, of record kind `kind`, written
/// with writer epoch `epoch`.
fn check_wrapped(kind: RecordKind, epoch: u64, value: &[u8]) {
    match codec::decode_value(value) {
        Ok(record) => {
            assert_eq!(record.kind(), kind, "the decoder returned a record of another kind than its header's");
            assert_eq!(codec::writer_epoch(value).expect("a valid envelope has a writer epoch"), epoch);
            check_round_trip(&record, epoch);
            // Under its own log key the record must decode and peek as it did alone.
            let key = codec::encode(&record).expect("a decoded record encodes").key;
            assert!(codec::decode(&key, value).is_ok(), "a record failed to decode under its own log key");
            check_peek(&key, value);
        }
        Err(err) => assert!(
            matches!(err, Error::Payload { .. } | Error::TrailingBytes { .. } | Error::KindMismatch { .. }),
            "a valid envelope of kind {kind:?} failed with {err:?}"
        ),
    }
    // A state key of layout 1 that the record (almost surely) is not written under: the walk
    // and the decoder must agree on the mismatch too.
    check_peek(&[1; 105], value);
}

/// The envelope of a golden record, as `codec::encode_by` wrote it.
struct Template {
    kind: RecordKind,
    epoch: u64,
    value: Vec<u8>,
}

/// A template of every record kind the codec knows (the kind bytes `RecordKind::from_byte`
/// accepts) for every epoch of [`EPOCHS`], made once. Rewrapping a template's own payload must
/// give back exactly what the codec wrote.
fn templates() -> &'static [Template] {
    static TEMPLATES_BY_EPOCH: OnceLock<Vec<Template>> = OnceLock::new();
    TEMPLATES_BY_EPOCH.get_or_init(|| {
        let golden: Vec<LogRecord> = TEMPLATES.iter().map(|(name, text)| golden_record(name, text)).collect();
        let mut out = Vec::new();
        for kind in (0..=u8::MAX).filter_map(RecordKind::from_byte) {
            let record = golden.iter().find(|r| r.kind() == kind).unwrap_or_else(|| {
                panic!("no golden template of record kind {kind:?} in fuzz/checks/decode.rs: add one to TEMPLATES")
            });
            for epoch in EPOCHS {
                let value = codec::encode_by(record, epoch).expect("a golden record encodes").value;
                assert_eq!(
                    envelope(&value, &value[HEADER_LEN..]),
                    value,
                    "fuzz/checks/decode.rs builds envelopes unlike codec::encode_by (format {}): update envelope()",
                    codec::FORMAT_VERSION
                );
                out.push(Template { kind, epoch, value });
            }
        }
        out
    })
}

/// Decodes the golden file `name` (`key HEX` and `value HEX` lines).
fn golden_record(name: &str, text: &str) -> LogRecord {
    let field = |prefix: &str| {
        let hex =
            text.lines().find_map(|l| l.strip_prefix(prefix)).unwrap_or_else(|| panic!("{name}: no {prefix}line"));
        hex::decode(hex.trim()).unwrap_or_else(|e| panic!("{name}: {prefix}is not hex: {e}"))
    };
    codec::decode(&field("key "), &field("value ")).unwrap_or_else(|e| {
        panic!("golden record {name} no longer decodes ({e}): fuzz/checks/decode.rs is out of date")
    })
}

/// `template` (an envelope `codec::encode_by` wrote) with its payload replaced by `payload`:
/// the length field (offset 6) and the CRC-32C (offset 18, over bytes 4 to 18 and the payload)
/// set as `docs/format.md` section 2 describes for the current format.
fn envelope(template: &[u8], payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).expect("fuzz inputs are small");
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(&template[..HEADER_LEN]);
    out[6..10].copy_from_slice(&len.to_le_bytes());
    let checksum = crc32c::crc32c_append(crc32c::crc32c(&out[4..18]), payload);
    out[18..22].copy_from_slice(&checksum.to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// Re-encodes `record` with writer epoch `epoch`, decodes the result and checks that nothing
/// changed. Records are compared by their encoding, which is exact even for NaN floats; without
/// NaN they must also compare equal.
fn check_round_trip(record: &LogRecord, epoch: u64) {
    let wire = codec::encode_by(record, epoch).expect("a decoded record encodes");
    assert_eq!(wire.value, codec::encode_value_by(record, epoch).expect("a decoded record encodes"));
    assert_eq!(codec::writer_epoch(&wire.value).expect("an encoded record has a writer epoch"), epoch);
    let again = codec::decode(&wire.key, &wire.value).expect("an encoded record decodes");
    assert_eq!(codec::encode_value_by(&again, epoch).expect("re-encodes"), wire.value);
    if same(record, record) {
        assert_eq!(&again, record);
    }
}

/// `PartialEq` through a function, so comparing a record with itself (false with NaN inside)
/// reads as intended.
fn same(a: &LogRecord, b: &LogRecord) -> bool {
    a == b
}

/// `codec::peek` must answer exactly as `codec::decode`: the same error, or the evidence of the
/// same state.
fn check_peek(key: &[u8], value: &[u8]) {
    match (codec::peek(key, value), codec::decode(key, value)) {
        (Ok(codec::Peeked::Upsert(evidence)), Ok(LogRecord::Upsert(state))) => {
            assert_eq!(evidence, Evidence::of(&state));
        }
        // Compared by encoding, which is exact even with NaN floats inside.
        (Ok(codec::Peeked::Other(peeked)), Ok(decoded)) => {
            assert!(!matches!(decoded, LogRecord::Upsert(_)), "peek missed an upsert");
            assert_eq!(codec::encode_value(&peeked).ok(), codec::encode_value(&decoded).ok());
        }
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
        (peeked, decoded) => panic!("peek {peeked:?} but decode {decoded:?}"),
    }
}
