//! Fuzzes the record decoder.
//!
//! Each input is tried three ways:
//! 1. as an enveloped value, with `codec::decode_value`;
//! 2. as a log key and a value, with `codec::decode`: the first byte gives the key length
//!    (105 for a state key, 41 for an audit key), the key and the value follow;
//! 3. as a postcard payload wrapped in a valid envelope (one per record kind), so the fuzzer
//!    gets past the checksum and exercises payload decoding, and `codec::peek` (the rebuild's
//!    allocation-free walk) against the decoder.
//!
//! Decoding must never panic. Whatever decodes must re-encode to bytes that decode to the same
//! record.
#![no_main]

use actionstate_core::{LogRecord, codec};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(record) = codec::decode_value(data) {
        check_round_trip(&record);
    }

    if let Some((&key_len, rest)) = data.split_first() {
        let (key, value) = rest.split_at(usize::from(key_len).min(rest.len()));
        if let Ok(record) = codec::decode(key, value) {
            let wire = codec::encode(&record).expect("a decoded record encodes");
            assert_eq!(wire.key, key, "decode accepted a key that encode does not write");
            check_round_trip(&record);
        }
    }

    for kind in 1..=3u8 {
        let value = envelope(kind, data);
        // Upserts are keyed by their state key: the walk and the decoder both check it.
        if let Ok(LogRecord::Upsert(s)) = codec::decode_value(&value) {
            check_peek(&s.key.to_bytes(), &value);
        }
        check_peek(&[1; 105], &value);
        match codec::decode_value(&value) {
            Ok(record) => {
                assert_eq!(record.kind() as u8, kind);
                check_round_trip(&record);
            }
            Err(err) => assert!(
                matches!(
                    err,
                    actionstate_core::Error::Payload { .. }
                        | actionstate_core::Error::TrailingBytes { .. }
                        | actionstate_core::Error::KindMismatch { .. }
                ),
                "a valid envelope failed with {err:?}"
            ),
        }
    }
});

/// Re-encodes `record`, decodes the result and checks that nothing changed. Records are
/// compared by their encoding, which is exact even for NaN floats; without NaN they must also
/// compare equal.
fn check_round_trip(record: &LogRecord) {
    let bytes = codec::encode_value(record).expect("a decoded record encodes");
    let wire = codec::encode(record).expect("a decoded record encodes");
    assert_eq!(wire.value, bytes);
    let again = codec::decode(&wire.key, &wire.value).expect("an encoded record decodes");
    assert_eq!(codec::encode_value(&again).expect("re-encodes"), bytes);
    if same(record, record) {
        assert_eq!(&again, record);
    }
}

/// `PartialEq` through a function, so comparing a record with itself (false with NaN inside)
/// reads as intended.
fn same(a: &LogRecord, b: &LogRecord) -> bool {
    a == b
}

/// An envelope with a correct checksum around `payload`, built as `docs/format.md` describes
/// (format version 2: CRC-32C of version, kind, length and payload).
fn envelope(kind: u8, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).expect("fuzz inputs are small");
    let mut covered = vec![codec::FORMAT_VERSION, kind];
    covered.extend_from_slice(&len.to_le_bytes());
    covered.extend_from_slice(payload);
    let mut out = Vec::with_capacity(codec::HEADER_LEN + payload.len());
    out.extend_from_slice(&codec::MAGIC);
    out.extend_from_slice(&[codec::FORMAT_VERSION, kind]);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(&covered).to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// `codec::peek` must answer exactly as `codec::decode`: the same error, or the evidence of the
/// same state.
fn check_peek(key: &[u8], value: &[u8]) {
    match (codec::peek(key, value), codec::decode(key, value)) {
        (Ok(codec::Peeked::Upsert(evidence)), Ok(LogRecord::Upsert(state))) => {
            assert_eq!(evidence, actionstate_core::Evidence::of(&state));
        }
        // Compared by encoding, which is exact even with NaN floats inside.
        (Ok(codec::Peeked::Other(peeked)), Ok(decoded)) => {
            assert_eq!(codec::encode_value(&peeked).ok(), codec::encode_value(&decoded).ok());
        }
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
        (peeked, decoded) => panic!("peek {peeked:?} but decode {decoded:?}"),
    }
}
