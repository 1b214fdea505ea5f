//! Digests and keys against an independent implementation of the encodings `docs/format.md`
//! documents.

use crate::strategies::{
    arb_action_id, arb_attributes, arb_event, arb_event_id, arb_key_id, arb_state_key, arb_trigger,
};
use crate::support::{attrs, fixed_state_key};
use actionstate_core::codec;
use actionstate_core::{
    ActionDigest, ActionId, Attributes, Event, Fingerprint, KeyId, OccurrenceId, StateKey, Trigger, Value,
    audit_log_key,
};
use proptest::prelude::*;

mod spec {
    use super::*;

    pub(super) const KEY: &str = "actionstate 2026-11 business key v1";
    pub(super) const ACTION: &str = "actionstate 2026-11 action id v1";
    pub(super) const OCCURRENCE: &str = "actionstate 2026-11 occurrence v1";
    pub(super) const FINGERPRINT: &str = "actionstate 2026-11 event fingerprint v1";
    pub(super) const PARTITION: &str = "actionstate 2026-11 partition v1";

    fn len(out: &mut Vec<u8>, n: usize) {
        out.extend_from_slice(&u64::try_from(n).unwrap().to_le_bytes());
    }

    fn bytes(out: &mut Vec<u8>, b: &[u8]) {
        len(out, b.len());
        out.extend_from_slice(b);
    }

    fn value(out: &mut Vec<u8>, v: &Value) {
        match v {
            Value::Null => out.push(0),
            Value::Bool(b) => out.extend_from_slice(&[1, u8::from(*b)]),
            Value::Int(i) => {
                out.push(2);
                out.extend_from_slice(&i.to_le_bytes());
            }
            Value::Float(x) => {
                out.push(3);
                let bits = if x.is_nan() {
                    0x7ff8_0000_0000_0000u64
                } else if *x == 0.0 {
                    0
                } else {
                    x.to_bits()
                };
                out.extend_from_slice(&bits.to_le_bytes());
            }
            Value::String(s) => {
                out.push(4);
                bytes(out, s.as_bytes());
            }
            Value::Bytes(b) => {
                out.push(5);
                bytes(out, b);
            }
            Value::List(items) => {
                out.push(6);
                len(out, items.len());
                items.iter().for_each(|i| value(out, i));
            }
            Value::Map(m) => {
                out.push(7);
                map(out, m.iter());
            }
        }
    }

    fn map<'a>(out: &mut Vec<u8>, m: impl ExactSizeIterator<Item = (&'a String, &'a Value)>) {
        len(out, m.len());
        for (k, v) in m {
            bytes(out, k.as_bytes());
            value(out, v);
        }
    }

    pub(super) fn fingerprint(event_type: &str, attributes: &Attributes) -> [u8; 32] {
        let mut out = Vec::new();
        bytes(&mut out, event_type.as_bytes());
        map(&mut out, attributes.iter());
        blake3::derive_key(FINGERPRINT, &out)
    }

    pub(super) fn action(a: &ActionId) -> [u8; 16] {
        let mut out = Vec::new();
        bytes(&mut out, a.name.as_bytes());
        match &a.version {
            None => out.push(0),
            Some(v) => {
                out.push(1);
                bytes(&mut out, v.as_bytes());
            }
        }
        blake3::derive_key(ACTION, &out)[..16].try_into().unwrap()
    }

    pub(super) fn occurrence(t: &Trigger) -> [u8; 16] {
        let mut out = Vec::new();
        match t {
            Trigger::Input => out.push(0),
            Trigger::Emitted { producer, index } => {
                out.push(1);
                out.extend_from_slice(&producer.to_bytes());
                out.extend_from_slice(&index.to_le_bytes());
            }
            Trigger::Bootstrap { label } => {
                out.push(2);
                bytes(&mut out, label.as_bytes());
            }
        }
        blake3::derive_key(OCCURRENCE, &out)[..16].try_into().unwrap()
    }

    pub(super) fn partition(k: &KeyId, n: u32) -> u32 {
        let h = blake3::derive_key(PARTITION, &k.0);
        u32::try_from(u64::from_le_bytes(h[..8].try_into().unwrap()) % u64::from(n.max(1))).unwrap()
    }

    pub(super) fn key_group(k: &KeyId, n: u16) -> u16 {
        u16::try_from(u64::from_le_bytes(k.0[..8].try_into().unwrap()) % u64::from(n.max(1))).unwrap()
    }

    pub(super) fn state_key(k: &StateKey) -> Vec<u8> {
        let mut out = vec![1];
        out.extend_from_slice(&k.key.0);
        out.extend_from_slice(&k.seq.to_be_bytes());
        out.extend_from_slice(&k.occurrence.0);
        out.extend_from_slice(&k.fingerprint.0);
        out.extend_from_slice(&k.action.0);
        out
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: Some(Box::new(proptest::test_runner::FileFailurePersistence::WithSource("proptest-regressions"))), ..ProptestConfig::default() })]

    #[test]
    fn digests_match_documented_encodings(
        event_type in "\\PC{0,8}",
        attributes in arb_attributes(),
        nan_bits in any::<u64>(),
        action in arb_action_id(),
        trigger in arb_trigger(),
        key_bytes in proptest::collection::vec(any::<u8>(), 0..40),
        partitions in any::<u32>(),
        groups in any::<u16>(),
        sk in arb_state_key(),
    ) {
        let mut attributes = attributes;
        // Include NaNs with arbitrary payloads, which the strategy otherwise leaves out.
        attributes.insert("nan".into(), Value::Float(f64::from_bits(nan_bits | 0x7ff0_0000_0000_0001)));
        prop_assert_eq!(Fingerprint::of(&event_type, &attributes).0, spec::fingerprint(&event_type, &attributes));
        prop_assert_eq!(action.digest().0, spec::action(&action));
        prop_assert_eq!(trigger.occurrence().0, spec::occurrence(&trigger));
        let key = KeyId::of(&key_bytes);
        prop_assert_eq!(key.0, blake3::derive_key(spec::KEY, &key_bytes));
        prop_assert_eq!(key.partition(partitions), spec::partition(&key, partitions));
        prop_assert!(key.partition(partitions) < partitions.max(1));
        prop_assert_eq!(key.key_group(groups), spec::key_group(&key, groups));
        prop_assert!(key.key_group(groups) < groups.max(1));
        prop_assert_eq!(sk.to_bytes().to_vec(), spec::state_key(&sk));
        let audit = audit_log_key(&sk.key, sk.seq);
        prop_assert_eq!(audit[0], 0xA1);
        prop_assert_eq!(&audit[1..33], &sk.key.0[..]);
        prop_assert_eq!(&audit[33..41], &sk.seq.to_be_bytes()[..]);
    }

    #[test]
    fn checkpoint_keys_match_their_documented_layout(
        checkpoint in crate::strategies::arb_checkpoint(),
    ) {
        let key = checkpoint.log_key();
        // `docs/format.md`, section 4b, spelled out again.
        let mut spec = vec![0xC1];
        spec.extend_from_slice(&checkpoint.key.0);
        let owner = postcard::to_allocvec(&checkpoint.owner).unwrap();
        spec.extend_from_slice(&blake3::hash(&owner).as_bytes()[..8]);
        spec.extend_from_slice(&checkpoint.epoch.to_be_bytes());
        spec.extend_from_slice(&checkpoint.id.to_be_bytes());
        let part = match &checkpoint.entry {
            actionstate_core::CheckpointEntry::Part { index, .. } => *index,
            actionstate_core::CheckpointEntry::Commit(_) => u32::MAX,
            actionstate_core::CheckpointEntry::Rollback(_) => u32::MAX - 1,
            actionstate_core::CheckpointEntry::External(_) => u32::MAX - 2,
        };
        spec.extend_from_slice(&part.to_be_bytes());
        prop_assert_eq!(key.to_vec(), spec);
    }

    #[test]
    fn int_and_float_fingerprints_differ(n in any::<i64>(), event_type in "[a-z]{0,6}") {
        #[allow(clippy::cast_precision_loss, reason = "any float near n will do")]
        let x = n as f64;
        let int = Fingerprint::of(&event_type, &attrs(&[("v", Value::Int(n))]));
        let float = Fingerprint::of(&event_type, &attrs(&[("v", Value::Float(x))]));
        prop_assert_ne!(int, float);
    }

    #[test]
    fn float_fingerprint_is_normalized(bits in any::<u64>()) {
        let x = f64::from_bits(bits);
        let of = |x: f64| Fingerprint::of("x", &attrs(&[("x", Value::Float(x))]));
        prop_assert_eq!(of(x), of(actionstate_core::normalize_float(x)));
        if !x.is_nan() && x != 0.0 {
            prop_assert_eq!(actionstate_core::normalize_float(x).to_bits(), bits);
        }
    }

    #[test]
    fn identical_events_with_different_ids_share_a_fingerprint(
        a in arb_event_id(),
        b in arb_event_id(),
        event_type in "[a-z_]{0,8}",
        attributes in arb_attributes(),
        key in arb_key_id(),
        seq in any::<u64>(),
        action in arb_action_id(),
        trigger in arb_trigger(),
    ) {
        let ea = Event { id: a, event_type: event_type.clone(), attributes: attributes.clone() };
        let eb = Event { id: b, event_type, attributes };
        prop_assert_eq!(ea.fingerprint(), eb.fingerprint());
        prop_assert_eq!(StateKey::new(key, seq, &action, &ea, &trigger), StateKey::new(key, seq, &action, &eb, &trigger));
    }

    #[test]
    fn identical_outputs_of_one_producer_get_distinct_keys(
        producer in arb_state_key(),
        i in any::<u32>(),
        j in any::<u32>(),
        event in arb_event(),
        action in arb_action_id(),
    ) {
        let ka = StateKey::new(producer.key, producer.seq, &action, &event, &Trigger::Emitted { producer, index: i });
        let kb = StateKey::new(producer.key, producer.seq, &action, &event, &Trigger::Emitted { producer, index: j });
        prop_assert_eq!(ka == kb, i == j);
    }

    #[test]
    fn state_key_bytes_round_trip(sk in arb_state_key()) {
        let bytes = sk.to_bytes();
        prop_assert_eq!(bytes.len(), StateKey::ENCODED_LEN);
        prop_assert_eq!(bytes[0], StateKey::LAYOUT);
        prop_assert_eq!(StateKey::from_bytes(&bytes).unwrap(), sk);
        prop_assert_eq!(codec::decode_state_key(&bytes).unwrap(), sk);
        prop_assert_eq!(sk.local().within(sk.key, sk.seq), sk);
    }

    /// Encoded keys of one business key sort by round, whatever the rest of the key holds; and
    /// byte order agrees with the derived order of `StateKey`.
    #[test]
    fn encoded_keys_sort_by_seq(a in arb_state_key(), b in arb_state_key(), key in arb_key_id()) {
        let a_same = StateKey { key, ..a };
        let b_same = StateKey { key, ..b };
        if a_same.seq != b_same.seq {
            prop_assert_eq!(
                a_same.to_bytes().cmp(&b_same.to_bytes()),
                a_same.seq.cmp(&b_same.seq)
            );
            let ka = audit_log_key(&key, a_same.seq);
            let kb = audit_log_key(&key, b_same.seq);
            prop_assert_eq!(ka.cmp(&kb), a_same.seq.cmp(&b_same.seq));
        }
        prop_assert_eq!(a.to_bytes().cmp(&b.to_bytes()), a.cmp(&b));
    }
}

#[test]
fn encoded_keys_sort_by_seq_across_byte_boundaries() {
    let key = KeyId::of(b"customer-42");
    let base = fixed_state_key();
    let seqs =
        [0u64, 1, 0xff, 0x100, 0xffff, 0x1_0000, u64::from(u32::MAX), u64::from(u32::MAX) + 1, u64::MAX - 1, u64::MAX];
    let encoded: Vec<[u8; 105]> = seqs
        .iter()
        .enumerate()
        .map(|(i, &seq)| {
            // Later rounds get smaller trailing fields, so only the seq can order them.
            let filler = u8::try_from(0xff - i).unwrap();
            StateKey {
                key,
                seq,
                occurrence: OccurrenceId([filler; 16]),
                fingerprint: Fingerprint([filler; 32]),
                action: ActionDigest([filler; 16]),
            }
            .to_bytes()
        })
        .collect();
    assert!(encoded.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(StateKey::from_bytes(&encoded[3]).unwrap().seq, 0x100);
    assert_eq!(base.to_bytes()[33..41], 7u64.to_be_bytes());
}
