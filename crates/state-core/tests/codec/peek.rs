//! `peek`: the evidence of a record without materializing it.

use crate::golden_files::golden_upsert_completed;
use crate::nesting::{MAX_VALUE_DEPTH, deep_payload};
use crate::robustness::{Mutation, arb_mutation};
use crate::strategies::{arb_record, arb_state_key};
use crate::support::{envelope, fixed_state_key};
use actionstate_core::codec::{self, FORMAT_VERSION};
use actionstate_core::{Evidence, LogRecord};
use proptest::prelude::*;

/// `peek` answers exactly as `decode` does: the same error, or the evidence of the same state.
fn assert_peek_agrees(key: &[u8], value: &[u8]) -> Result<(), TestCaseError> {
    match (codec::peek(key, value), codec::decode(key, value)) {
        (Ok(codec::Peeked::Upsert(evidence)), Ok(LogRecord::Upsert(state))) => {
            prop_assert_eq!(evidence, Evidence::of(&state));
        }
        (Ok(codec::Peeked::Other(peeked)), Ok(decoded)) => {
            prop_assert!(!matches!(decoded, LogRecord::Upsert(_)));
            prop_assert_eq!(*peeked, decoded);
        }
        (Err(a), Err(b)) => prop_assert_eq!(a.to_string(), b.to_string()),
        (peeked, decoded) => prop_assert!(false, "peek {:?} but decode {:?}", peeked, decoded),
    }
    Ok(())
}

proptest! {
    #[test]
    fn peek_agrees_with_decode(record in arb_record()) {
        let wire = codec::encode(&record).unwrap();
        assert_peek_agrees(&wire.key, &wire.value)?;
        let expected = match &record {
            LogRecord::Upsert(s) => codec::Peeked::Upsert(Evidence::of(s)),
            other => codec::Peeked::Other(Box::new(other.clone())),
        };
        prop_assert_eq!(codec::peek(&wire.key, &wire.value).unwrap(), expected);
    }

    /// Corrupted payloads under a valid checksum (what a buggy writer could produce) exercise
    /// every step of the walk: it must refuse whatever the decoder refuses.
    #[test]
    fn peek_agrees_with_decode_on_corrupted_payloads(
        record in arb_record(),
        mutations in proptest::collection::vec(arb_mutation(), 1..4),
    ) {
        let wire = codec::encode(&record).unwrap();
        let mut payload = postcard::to_allocvec(&record).unwrap();
        for m in &mutations {
            if !payload.is_empty() || matches!(m, Mutation::Extend(_) | Mutation::Insert { .. }) {
                m.apply(&mut payload);
            }
        }
        assert_peek_agrees(&wire.key, &envelope(FORMAT_VERSION, record.kind() as u8, &payload))?;
    }

    #[test]
    fn peek_agrees_with_decode_on_random_payloads(
        key in proptest::collection::vec(any::<u8>(), 105..=105),
        payload in proptest::collection::vec(any::<u8>(), 0..600),
    ) {
        assert_peek_agrees(&key, &envelope(FORMAT_VERSION, 1, &payload))?;
    }

    /// A record keyed by another state key is refused by both.
    #[test]
    fn peek_checks_the_log_key(record in arb_record(), other in arb_state_key()) {
        let wire = codec::encode(&record).unwrap();
        assert_peek_agrees(&other.to_bytes(), &wire.value)?;
    }
}

#[test]
fn peek_bounds_value_nesting_like_decode() {
    let key = fixed_state_key().to_bytes();
    for depth in [MAX_VALUE_DEPTH - 1, MAX_VALUE_DEPTH, MAX_VALUE_DEPTH + 1, 10 * MAX_VALUE_DEPTH] {
        let value = envelope(FORMAT_VERSION, 1, &deep_payload(depth));
        assert_peek_agrees(&key, &value).unwrap();
        assert_eq!(codec::peek(&key, &value).is_ok(), depth <= MAX_VALUE_DEPTH, "depth {depth}");
    }
}

/// The walk reads varints with postcard's limits: a longer encoding than needed is accepted
/// (postcard does not require the shortest); a `u32` may take five bytes and a `u128` nineteen,
/// the last of which may carry only the bits left (four and two); a longer varint is refused.
/// `peek` and `decode` agree on each.
#[test]
fn peek_reads_varints_as_postcard_does() {
    let record = golden_upsert_completed();
    let LogRecord::Upsert(state) = &record else { unreachable!("an upsert") };
    let wire = codec::encode(&record).unwrap();
    let payload = postcard::to_allocvec(&record).unwrap();
    let check = |bytes: Vec<u8>, accepted: bool, what: &str| {
        let value = envelope(FORMAT_VERSION, record.kind() as u8, &bytes);
        assert_peek_agrees(&wire.key, &value).unwrap();
        assert_eq!(codec::peek(&wire.key, &value).is_ok(), accepted, "{what}");
    };
    // A LEB128 varint of `v` in exactly `len` bytes, `top` or'ed into the last one.
    let padded = |v: u128, len: usize, top: u8| -> Vec<u8> {
        let mut out: Vec<u8> = (0..len - 1).map(|i| ((v >> (7 * i)) as u8 & 0x7f) | 0x80).collect();
        out.push(((v >> (7 * (len - 1))) as u8 & 0x7f) | top);
        out
    };

    // The `Upsert` variant index (a u32, 0) opens the payload in one byte.
    assert_eq!(payload[0], 0);
    for (index, accepted) in
        [(padded(0, 2, 0), true), (padded(0, 5, 0), true), (padded(0, 5, 0x10), false), (padded(0, 6, 0), false)]
    {
        let mut bytes = index.clone();
        bytes.extend_from_slice(&payload[1..]);
        check(bytes, accepted, &format!("variant index as {index:02x?}"));
    }

    // The trigger event id (a u128) follows the key, the action and the trigger.
    let at = postcard::to_allocvec(&(0u8, &state.key, &state.action, &state.trigger)).unwrap().len();
    let id_len = postcard::to_allocvec(&state.trigger_event).unwrap().len();
    let id = state.trigger_event.0;
    assert!(id < 1 << 126);
    for (varint, accepted) in [(padded(id, 19, 0), true), (padded(id, 19, 3), true), (padded(id, 19, 4), false)] {
        let mut bytes = payload[..at].to_vec();
        bytes.extend_from_slice(&varint);
        bytes.extend_from_slice(&payload[at + id_len..]);
        check(bytes, accepted, &format!("trigger event id as {varint:02x?}"));
    }
}
