//! Helpers shared by the modules: the round-trip check, a hand-built envelope and fixed
//! events and state keys.

use actionstate_core::codec::{self, FORMAT_VERSION, HEADER_LEN, MAGIC};
use actionstate_core::{
    ActionId, Attributes, Event, EventId, KeyId, LogRecord, StateKey, Trigger, Value, audit_log_key, fence_log_key,
};

/// Encodes `record`, checks the wire key and header, decodes both ways and returns the value.
pub(crate) fn assert_round_trip(record: &LogRecord) -> Vec<u8> {
    let wire = codec::encode(record).unwrap();
    assert_eq!(wire.key_id, record.key_id());
    let expected_key = match record {
        LogRecord::Upsert(s) => s.key.to_bytes().to_vec(),
        LogRecord::Delete { key, .. } => key.to_bytes().to_vec(),
        LogRecord::Audit(a) => audit_log_key(&a.key, a.seq).to_vec(),
        LogRecord::Fence(f) => fence_log_key(&f.key, f.epoch).to_vec(),
        LogRecord::Checkpoint(c) => {
            let part = match &c.entry {
                actionstate_core::CheckpointEntry::Part { index, .. } => *index,
                actionstate_core::CheckpointEntry::Commit(_) => actionstate_core::checkpoint::COMMIT_PART,
                actionstate_core::CheckpointEntry::Rollback(_) => actionstate_core::checkpoint::ROLLBACK_PART,
                actionstate_core::CheckpointEntry::External(_) => actionstate_core::checkpoint::EXTERNAL_PART,
            };
            actionstate_core::checkpoint::checkpoint_log_key(&c.key, &c.owner, c.epoch, c.id, part).to_vec()
        }
        LogRecord::Resolve(r) => actionstate_core::resolve_log_key(r).to_vec(),
    };
    assert_eq!(wire.key, expected_key);
    assert_eq!(wire.value[..4], MAGIC);
    assert_eq!(wire.value[4], FORMAT_VERSION);
    assert_eq!(wire.value[5], record.kind() as u8);
    let declared = u32::from_le_bytes(wire.value[6..10].try_into().unwrap()) as usize;
    assert_eq!(declared, wire.value.len() - HEADER_LEN);
    assert_eq!(codec::writer_epoch(&wire.value).unwrap(), 0, "encode writes as epoch 0");
    assert_eq!(codec::encode_value(record).unwrap(), wire.value, "encode_value and encode disagree");
    assert_eq!(&codec::decode_value(&wire.value).unwrap(), record);
    assert_eq!(&codec::decode(&wire.key, &wire.value).unwrap(), record);
    wire.value
}

/// The envelope checksum as `docs/format.md` defines it for `version`, computed independently
/// of the codec: CRC-32C (versions 2 and 3) or the first 16 bytes of blake3 (version 1) over
/// version, kind, length, the writer epoch (version 3 only) and payload.
pub(crate) fn spec_checksum(version: u8, kind: u8, len: u32, epoch: u64, payload: &[u8]) -> Vec<u8> {
    let mut covered = vec![version, kind];
    covered.extend_from_slice(&len.to_le_bytes());
    if version >= 3 {
        covered.extend_from_slice(&epoch.to_le_bytes());
    }
    covered.extend_from_slice(payload);
    if version == 1 {
        blake3::hash(&covered).as_bytes()[..16].to_vec()
    } else {
        crc32c::crc32c(&covered).to_le_bytes().to_vec()
    }
}

/// Builds an envelope of `version` by hand with a correct checksum around an arbitrary payload
/// (writer epoch 0 in version 3).
pub(crate) fn envelope(version: u8, kind: u8, payload: &[u8]) -> Vec<u8> {
    envelope_by(version, kind, 0, payload)
}

/// Builds an envelope of `version` by hand, of a record written with writer epoch `epoch`
/// (ignored before version 3, which has none).
pub(crate) fn envelope_by(version: u8, kind: u8, epoch: u64, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).unwrap();
    let mut out = MAGIC.to_vec();
    out.push(version);
    out.push(kind);
    out.extend_from_slice(&len.to_le_bytes());
    if version >= 3 {
        out.extend_from_slice(&epoch.to_le_bytes());
    }
    out.extend_from_slice(&spec_checksum(version, kind, len, epoch, payload));
    out.extend_from_slice(payload);
    out
}

pub(crate) fn attrs(entries: &[(&str, Value)]) -> Attributes {
    entries.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect()
}

pub(crate) fn map(entries: &[(&str, Value)]) -> Value {
    Value::Map(entries.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect())
}

pub(crate) fn fixed_event(id: u128, event_type: &str, attributes: Attributes) -> Event {
    Event { id: EventId(id), event_type: event_type.to_owned(), attributes }
}

pub(crate) fn fixed_input() -> Event {
    fixed_event(0x0123_4567_89ab_cdef_fedc_ba98_7654_3210, "input", attrs(&[("text", Value::from("hello"))]))
}

pub(crate) fn fixed_state_key() -> StateKey {
    StateKey::new(KeyId::of(b"customer-42"), 7, &ActionId::new("summarize"), &fixed_input(), &Trigger::Input)
}
