//! How an invalidated state travels as a Kafka tombstone: a `Delete` record is produced with a
//! null value and its envelope in [`TOMBSTONE_HEADER`], and read back as that envelope.

use actionstate_core::{RecordKind, codec};
use rdkafka::message::{Headers, Message};

/// The record header that carries the envelope of a tombstone (a `Delete` record produced with
/// a null value).
pub const TOMBSTONE_HEADER: &str = "actionstate-delete";

/// Whether `value` is the envelope of a `Delete` record (magic, then the kind byte at 5).
pub(crate) fn is_delete_envelope(value: &[u8]) -> bool {
    value.starts_with(&codec::MAGIC) && value.get(5) == Some(&(RecordKind::Delete as u8))
}

/// The value the store appended for a record read back: the payload, or for a tombstone the
/// envelope in its header (empty when a null value carries none).
pub(crate) fn stored_value<M: Message>(msg: &M) -> Vec<u8> {
    if let Some(payload) = msg.payload() {
        return payload.to_vec();
    }
    msg.headers()
        .and_then(|h| h.iter().find(|h| h.key == TOMBSTONE_HEADER).and_then(|h| h.value.map(<[u8]>::to_vec)))
        .unwrap_or_default()
}
