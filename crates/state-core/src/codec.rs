//! The record envelope: magic, format version, kind, length, writer epoch, checksum, postcard
//! payload.
//!
//! ```text
//! offset  size  field
//! 0       4     magic  b"AcSt"
//! 4       1     format version (5)
//! 5       1     record kind (1 upsert, 2 delete, 3 audit, 4 fence, 5 checkpoint)
//! 6       4     payload length, u32 little-endian
//! 10      8     writer epoch, u64 little-endian
//! 18      4     checksum: CRC-32C of (version, kind, length, epoch, payload), u32 little-endian
//! 22      n     payload: postcard encoding of the record
//! ```
//!
//! The writer epoch is the epoch of the owner that appended the record (see
//! [`crate::fence`]): a replay skips a record written with an epoch older than a fence before
//! it that covers its key. It sits in the header so that a replay reads it without decoding.
//!
//! Version 5 differs from 4 only in its payload: an upserted state ends with the optional
//! trace context of the attempt that first wrote it
//! ([`ActionState::trace`](crate::ActionState::trace)). Version 4 records decode with none.
//! Version 4 differs from 3 the same way: an upserted state ends with the key's optional
//! readable label ([`ActionState::label`](crate::ActionState::label)). Version 3 records
//! decode with no label.
//!
//! Version 2 has no epoch (a 14-byte header, the checksum at offset 10 over version, kind,
//! length and payload); version 1 differs from 2 only in its checksum: the first 16 bytes of
//! blake3 over the same bytes (a 26-byte header). Both are still read, as epoch 0: a log
//! written before fencing existed. Version 2 exists because the checksum is on the rebuild's
//! path for every record: CRC-32C (hardware-accelerated, as Kafka and Fluss use for their own
//! batches) costs about a tenth of blake3 on a 400-byte record, and a checksum that detects
//! corruption needs no cryptographic strength. Identities and fingerprints stay blake3.
//!
//! `docs/format.md` documents the same bytes; golden files pin them.

use crate::error::Error;
use crate::fence::fence_log_key;
use crate::key::StateKey;
use crate::kind::RecordKind;
use crate::log::WireRecord;
use crate::record::{Evidence, LogRecord, audit_log_key};

/// The four magic bytes every envelope starts with.
pub const MAGIC: [u8; 4] = *b"AcSt";
/// The format version this build writes.
pub const FORMAT_VERSION: u8 = 5;
/// The format version before trace contexts: the same envelope, states without one.
pub const V4: u8 = 4;
/// The format version before key labels: the same envelope, states without a label.
pub const V3: u8 = 3;
/// The oldest format version this build reads.
pub const OLDEST_READABLE_VERSION: u8 = 1;
/// Length of the envelope header of [`FORMAT_VERSION`].
pub const HEADER_LEN: usize = 22;
/// Length of the envelope header of format version 2 (no writer epoch).
pub const V2_HEADER_LEN: usize = 14;
/// Length of the envelope header of format version 1 (a 16-byte blake3 checksum).
pub const V1_HEADER_LEN: usize = 26;

/// Encodes a record into the bytes a backend appends, the log key and the enveloped value,
/// as written by an unfenced writer (epoch 0; see [`encode_by`]).
pub fn encode(record: &LogRecord) -> Result<WireRecord, Error> {
    encode_by(record, 0)
}

/// Encodes a record written by the owner of writer epoch `epoch` (see [`crate::fence`]).
pub fn encode_by(record: &LogRecord, epoch: u64) -> Result<WireRecord, Error> {
    let key = match record {
        LogRecord::Upsert(s) => s.key.to_bytes().to_vec(),
        LogRecord::Delete { key, .. } => key.to_bytes().to_vec(),
        LogRecord::Audit(a) => audit_log_key(&a.key, a.seq).to_vec(),
        LogRecord::Fence(f) => fence_log_key(&f.key, f.epoch).to_vec(),
        LogRecord::Checkpoint(c) => c.log_key().to_vec(),
        LogRecord::Resolve(r) => crate::wait::resolve_log_key(r).to_vec(),
    };
    Ok(WireRecord { key_id: record.key_id(), key, value: encode_value_by(record, epoch)? })
}

/// Encodes only the enveloped value of a record, with writer epoch 0 (see
/// [`encode_value_by`]).
pub fn encode_value(record: &LogRecord) -> Result<Vec<u8>, Error> {
    encode_value_by(record, 0)
}

/// Encodes only the enveloped value of a record written with writer epoch `epoch`. A record
/// the decoder would refuse (an operator's reason text beyond
/// [`MAX_OPERATOR_TEXT`](crate::MAX_OPERATOR_TEXT)) is refused with a typed error.
pub fn encode_value_by(record: &LogRecord, epoch: u64) -> Result<Vec<u8>, Error> {
    record.check()?;
    // The payload is serialized straight after a zeroed header, which is filled in once its
    // length and checksum are known: one buffer, instead of growing a payload vector by
    // doubling and copying it behind the header. Most records fit the first allocation.
    let mut out = Vec::with_capacity(ENCODE_CAPACITY);
    out.resize(HEADER_LEN, 0);
    let mut out = postcard::to_extend(record, out).map_err(|e| Error::Payload { detail: e.to_string() })?;
    let payload_len = out.len() - HEADER_LEN;
    let len = u32::try_from(payload_len).map_err(|_| Error::TooLarge { len: payload_len })?;
    let kind = record.kind() as u8;
    let checksum = crc(FORMAT_VERSION, kind, len, Some(epoch), &out[HEADER_LEN..]);
    out[..4].copy_from_slice(&MAGIC);
    out[4] = FORMAT_VERSION;
    out[5] = kind;
    out[6..10].copy_from_slice(&len.to_le_bytes());
    out[10..18].copy_from_slice(&epoch.to_le_bytes());
    out[18..HEADER_LEN].copy_from_slice(&checksum.to_le_bytes());
    Ok(out)
}

/// First capacity of an encoded value: a completed state with a few small events is a few
/// hundred bytes.
const ENCODE_CAPACITY: usize = 512;

/// Decodes a record read from the log and checks that its log key agrees with its payload.
pub fn decode(key: &[u8], value: &[u8]) -> Result<LogRecord, Error> {
    let (version, kind, body) = open_envelope(value)?;
    keyed_by(key, decode_payload(version, kind, body)?)
}

/// Decodes an enveloped value. Each failure class has its own error variant.
pub fn decode_value(value: &[u8]) -> Result<LogRecord, Error> {
    let (version, kind, body) = open_envelope(value)?;
    decode_payload(version, kind, body)
}

/// Decodes the payload of an envelope of `version` whose header gave `kind`.
fn decode_payload(version: u8, kind: RecordKind, body: &[u8]) -> Result<LogRecord, Error> {
    let payload = |e: postcard::Error| Error::Payload { detail: e.to_string() };
    let (record, rest): (LogRecord, &[u8]) = if version >= FORMAT_VERSION {
        postcard::take_from_bytes(body).map_err(payload)?
    } else if version == V4 {
        let (old, rest): (older::LogRecord<older::Untraced>, &[u8]) =
            postcard::take_from_bytes(body).map_err(payload)?;
        (old.upgrade(version)?, rest)
    } else {
        let (old, rest): (older::LogRecord<older::Unlabeled>, &[u8]) =
            postcard::take_from_bytes(body).map_err(payload)?;
        (old.upgrade(version)?, rest)
    };
    if !rest.is_empty() {
        return Err(Error::TrailingBytes { extra: rest.len() });
    }
    if record.kind() != kind {
        return Err(Error::KindMismatch { header: kind, payload: record.kind() });
    }
    // What the encoder refuses to write, the decoder refuses to read.
    if let LogRecord::Resolve(r) = &record {
        r.check()?;
    }
    Ok(record)
}

/// `record`, if `key` is the log key it is written under.
fn keyed_by(key: &[u8], record: LogRecord) -> Result<LogRecord, Error> {
    let agrees = match &record {
        LogRecord::Upsert(s) => key == s.key.to_bytes().as_slice(),
        LogRecord::Delete { key: k, .. } => key == k.to_bytes().as_slice(),
        LogRecord::Audit(a) => key == audit_log_key(&a.key, a.seq).as_slice(),
        LogRecord::Fence(f) => key == fence_log_key(&f.key, f.epoch).as_slice(),
        LogRecord::Checkpoint(c) => key == c.log_key().as_slice(),
        LogRecord::Resolve(r) => key == crate::wait::resolve_log_key(r).as_slice(),
    };
    if agrees { Ok(record) } else { Err(Error::KeyMismatch { kind: record.kind() }) }
}

/// A record read without materializing an upserted state: see [`peek`].
#[derive(Clone, Debug, PartialEq)]
pub enum Peeked {
    /// An upsert: the state's evidence; the value decodes to the state with [`decode_value`].
    Upsert(Evidence),
    /// A delete, an audit, a fence or a checkpoint record, decoded (all are rare; boxed, so that the upsert
    /// a rebuild peeks for nearly every record is not moved around in a record-sized enum).
    Other(Box<LogRecord>),
}

/// Checks a record read from the log exactly as [`decode`] does (envelope, checksum, payload,
/// key agreement) and returns the same errors, but reads an upserted state only for its
/// [`Evidence`], without allocating the state. A rebuild uses it to index records it keeps
/// encoded.
pub fn peek(key: &[u8], value: &[u8]) -> Result<Peeked, Error> {
    let (version, kind, body) = open_envelope(value)?;
    if kind == RecordKind::Upsert
        && let Some(evidence) = crate::view::evidence(body, version >= V4, version >= FORMAT_VERSION)
        && key == evidence.key.to_bytes().as_slice()
    {
        return Ok(Peeked::Upsert(evidence));
    }
    // Not an upsert, or the walk found something wrong: the full decoder decides (on the
    // envelope already checked), so the errors are exactly its errors.
    Ok(match keyed_by(key, decode_payload(version, kind, body)?)? {
        LogRecord::Upsert(state) => Peeked::Upsert(Evidence::of(&state)),
        other => Peeked::Other(Box::new(other)),
    })
}

/// The writer epoch of an enveloped value (0 for formats 1 and 2), read from its header
/// alone: the rest of the envelope is not checked (a rebuild reads it of records
/// [`peek`] has checked).
pub fn writer_epoch(value: &[u8]) -> Result<u64, Error> {
    match value.get(4) {
        Some(&(V3 | V4 | FORMAT_VERSION)) => {
            let bytes = value.get(10..18).ok_or(Error::Truncated { needed: HEADER_LEN, available: value.len() })?;
            let mut epoch = [0u8; 8];
            epoch.copy_from_slice(bytes);
            Ok(u64::from_le_bytes(epoch))
        }
        Some(1 | 2) => Ok(0),
        Some(&found) => Err(Error::UnknownVersion { found, oldest: OLDEST_READABLE_VERSION, newest: FORMAT_VERSION }),
        None => Err(Error::Truncated { needed: HEADER_LEN, available: value.len() }),
    }
}

/// Checks the envelope (magic, version, kind, length, checksum) and returns the format
/// version, the record kind and the payload.
fn open_envelope(value: &[u8]) -> Result<(u8, RecordKind, &[u8]), Error> {
    let truncated = |needed| Error::Truncated { needed, available: value.len() };
    let magic = value.get(..4).ok_or_else(|| truncated(HEADER_LEN))?;
    if magic != MAGIC {
        return Err(Error::BadMagic { found: magic.try_into().unwrap_or_default() });
    }
    let version = *value.get(4).ok_or_else(|| truncated(HEADER_LEN))?;
    let header_len = match version {
        V3 | V4 | FORMAT_VERSION => HEADER_LEN,
        2 => V2_HEADER_LEN,
        OLDEST_READABLE_VERSION => V1_HEADER_LEN,
        found => {
            return Err(Error::UnknownVersion { found, oldest: OLDEST_READABLE_VERSION, newest: FORMAT_VERSION });
        }
    };
    let kind_byte = *value.get(5).ok_or_else(|| truncated(header_len))?;
    let kind = RecordKind::from_byte(kind_byte).ok_or_else(|| Error::UnknownKind { found: kind_byte })?;
    let header = value.get(..header_len).ok_or_else(|| truncated(header_len))?;
    let mut len_bytes = [0u8; 4];
    len_bytes.copy_from_slice(&header[6..10]);
    let len = u32::from_le_bytes(len_bytes);
    let body = &value[header_len..];
    let expected = len as usize;
    if body.len() < expected {
        return Err(truncated(header_len.saturating_add(expected)));
    }
    if body.len() > expected {
        return Err(Error::TrailingBytes { extra: body.len() - expected });
    }
    let intact = match version {
        V3 | V4 | FORMAT_VERSION => {
            let mut epoch = [0u8; 8];
            epoch.copy_from_slice(&header[10..18]);
            header[18..22] == crc(version, kind_byte, len, Some(u64::from_le_bytes(epoch)), body).to_le_bytes()
        }
        2 => header[10..14] == crc(version, kind_byte, len, None, body).to_le_bytes(),
        _ => header[10..26] == blake3_v1(version, kind_byte, len, body),
    };
    if !intact {
        return Err(Error::BadChecksum);
    }
    Ok((version, kind, body))
}

/// The checksum of versions 2 to 5: CRC-32C of version, kind, length, the writer epoch
/// (versions 3 to 5) and payload.
fn crc(version: u8, kind: u8, len: u32, epoch: Option<u64>, payload: &[u8]) -> u32 {
    let mut head = [0u8; 14];
    head[0] = version;
    head[1] = kind;
    head[2..6].copy_from_slice(&len.to_le_bytes());
    let head = match epoch {
        Some(epoch) => {
            head[6..14].copy_from_slice(&epoch.to_le_bytes());
            &head[..]
        }
        None => &head[..6],
    };
    crc32c::crc32c_append(crc32c::crc32c(head), payload)
}

/// The version 1 checksum: the first 16 bytes of blake3 over the same bytes.
fn blake3_v1(version: u8, kind: u8, len: u32, payload: &[u8]) -> [u8; 16] {
    let mut h = blake3::Hasher::new();
    h.update(&[version, kind]);
    h.update(&len.to_le_bytes());
    h.update(payload);
    crate::id::truncate16(h.finalize().as_bytes())
}

/// Decodes a state key from a log key (Upsert and Delete records are keyed by it).
pub fn decode_state_key(key: &[u8]) -> Result<StateKey, Error> {
    StateKey::from_bytes(key)
}

/// The records of formats 1 to 4, read by the same derive, variant for variant, and given what
/// their format lacked as `None`: format 4's states have no trace context, and those of formats
/// 1 to 3 no key label either. Formats 1 to 3 had no checkpoint or resolve records.
mod older {
    use super::V4;
    use crate::checkpoint::CheckpointRecord;
    use crate::error::Error;
    use crate::fence::Fence;
    use crate::id::{ActionId, EventId, Fingerprint};
    use crate::key::{StateKey, Trigger};
    use crate::record::{Audit, InvalidationReason, LogRecord as New};
    use crate::state::{ActionState, KeyLabel, Progress};
    use crate::wait::ResolveRequest;
    use serde::Deserialize;

    #[derive(Deserialize)]
    pub(super) enum LogRecord<S> {
        Upsert(S),
        Delete { key: StateKey, reason: InvalidationReason },
        Audit(Audit),
        Fence(Fence),
        Checkpoint(CheckpointRecord),
        Resolve(ResolveRequest),
    }

    /// A state of formats 1 to 3.
    #[derive(Deserialize)]
    pub(super) struct Unlabeled {
        key: StateKey,
        action: ActionId,
        trigger: Trigger,
        trigger_event: EventId,
        input: Fingerprint,
        progress: Progress,
    }

    /// A state of format 4: a state of formats 1 to 3, then its label. Postcard writes a
    /// struct as its fields one after the other, so the nesting reads the same bytes.
    #[derive(Deserialize)]
    pub(super) struct Untraced {
        state: Unlabeled,
        label: Option<KeyLabel>,
    }

    impl Unlabeled {
        fn labeled(self, label: Option<KeyLabel>) -> ActionState {
            let Unlabeled { key, action, trigger, trigger_event, input, progress } = self;
            ActionState { key, action, trigger, trigger_event, input, progress, label, trace: None }
        }
    }

    impl From<Unlabeled> for ActionState {
        fn from(s: Unlabeled) -> Self {
            s.labeled(None)
        }
    }

    impl From<Untraced> for ActionState {
        fn from(s: Untraced) -> Self {
            s.state.labeled(s.label)
        }
    }

    impl<S: Into<ActionState>> LogRecord<S> {
        /// Today's record of this record of format `version`.
        pub(super) fn upgrade(self, version: u8) -> Result<New, Error> {
            Ok(match self {
                LogRecord::Upsert(s) => New::Upsert(s.into()),
                LogRecord::Delete { key, reason } => New::Delete { key, reason },
                LogRecord::Audit(a) => New::Audit(a),
                LogRecord::Fence(f) => New::Fence(f),
                LogRecord::Checkpoint(_) | LogRecord::Resolve(_) if version < V4 => {
                    return Err(Error::Payload {
                        detail: format!("format {version} has no checkpoint or resolve records"),
                    });
                }
                LogRecord::Checkpoint(c) => New::Checkpoint(c),
                LogRecord::Resolve(r) => New::Resolve(r),
            })
        }
    }
}
