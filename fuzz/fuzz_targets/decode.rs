//! Fuzzes the record decoder.
//!
//! Each input is tried three ways:
//! 1. as an enveloped value, with `codec::decode_value`;
//! 2. as a log key and a value, with `codec::decode`: the first byte gives the key length
//!    (105 for a state key, 41 for an audit key), the key and the value follow;
//! 3. as a postcard payload wrapped in a valid envelope (one per record kind), so the fuzzer
//!    gets past the checksum and exercises payload decoding.
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

/// An envelope with a correct checksum around `payload`, built as `docs/format.md` describes.
fn envelope(kind: u8, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).expect("fuzz inputs are small");
    let mut h = blake3::Hasher::new();
    h.update(&[codec::FORMAT_VERSION, kind]);
    h.update(&len.to_le_bytes());
    h.update(payload);
    let mut out = Vec::with_capacity(codec::HEADER_LEN + payload.len());
    out.extend_from_slice(&codec::MAGIC);
    out.extend_from_slice(&[codec::FORMAT_VERSION, kind]);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&h.finalize().as_bytes()[..16]);
    out.extend_from_slice(payload);
    out
}
