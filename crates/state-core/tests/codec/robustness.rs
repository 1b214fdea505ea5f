//! Robustness: random and mutated input never panics.

use crate::strategies::arb_record;
use crate::support::envelope;
use actionstate_core::Error;
use actionstate_core::codec::{self, FORMAT_VERSION, MAGIC};
use proptest::prelude::*;
use proptest::sample::Index;

#[derive(Debug, Clone)]
pub(crate) enum Mutation {
    Flip { at: Index, bit: u8 },
    Set { at: Index, byte: u8 },
    Truncate { at: Index },
    Extend(Vec<u8>),
    Insert { at: Index, byte: u8 },
    Remove { at: Index },
}

impl Mutation {
    pub(crate) fn apply(&self, bytes: &mut Vec<u8>) {
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

pub(crate) fn arb_mutation() -> impl Strategy<Value = Mutation> {
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
        kind in 1u8..=4,
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
            // Version 5 is one bit away from 4 (whose payload ends sooner) and 1 (which reads
            // the header differently); the checksum covers the version byte.
            4 if matches!(value[4], 1..=4) => prop_assert!(
                matches!(err, Error::BadChecksum | Error::Truncated { .. } | Error::TrailingBytes { .. }),
                "{:?}",
                err
            ),
            4 => prop_assert!(matches!(err, Error::UnknownVersion { .. }), "{:?}", err),
            5 => prop_assert!(matches!(err, Error::UnknownKind { .. } | Error::BadChecksum), "{:?}", err),
            6..=9 => prop_assert!(matches!(err, Error::Truncated { .. } | Error::TrailingBytes { .. }), "{:?}", err),
            _ => prop_assert!(matches!(err, Error::BadChecksum), "{:?}", err),
        }
    }
}
