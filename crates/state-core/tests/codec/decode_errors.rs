//! Each decode failure class, provoked on purpose.

use crate::golden_files::{golden_audit_root_changed, golden_delete, golden_upsert_completed};
use crate::support::{envelope, fixed_state_key};
use actionstate_core::codec::{self, FORMAT_VERSION, HEADER_LEN};
use actionstate_core::{
    AUDIT_KEY_LAYOUT, Error, InvalidationReason, KeyId, LogRecord, MissReason, RecordKind, StateKey, audit_log_key,
};

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
        for version in [0u8, 6, 0x7f, 0xff] {
            let mut value = wire.value.clone();
            value[4] = version;
            let err = codec::decode(&wire.key, &value).unwrap_err();
            assert!(
                matches!(err, Error::UnknownVersion { found, oldest: 1, newest: 5 } if found == version),
                "version {version}: {err:?}"
            );
        }
    }
    // The version is checked as soon as its byte is present.
    let err = codec::decode_value(b"AcSt\x06").unwrap_err();
    assert!(matches!(err, Error::UnknownVersion { found: 6, oldest: 1, newest: 5 }), "{err:?}");
    // The writer epoch reader refuses the same versions.
    assert!(matches!(codec::writer_epoch(b"AcSt\x06"), Err(Error::UnknownVersion { found: 6, .. })));
}

#[test]
fn decode_unknown_kind() {
    for record in sample_records() {
        let wire = codec::encode(&record).unwrap();
        for kind in [0u8, 7, 0x80, 0xff] {
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
