//! The occurrence-aware state key and its fixed byte layout, and the trigger path its
//! occurrence digest is taken from. A trigger names its producer by state key, and a state key
//! is derived from its trigger, so the two share this module.

use crate::canonical;
use crate::error::Error;
use crate::event::Event;
use crate::id::{ActionDigest, ActionId, Fingerprint, KeyId, OccurrenceId, context, truncate16};
use serde::{Deserialize, Serialize};

/// Identity of one action state: (business key, sequence, occurrence, event fingerprint, action).
///
/// Encodes to [`StateKey::ENCODED_LEN`] fixed-layout bytes (see `docs/format.md`); nothing is
/// parsed from delimiters. Ordering of the encoded bytes follows (key, seq, ...) because the
/// sequence is stored big-endian.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct StateKey {
    /// The business key.
    pub key: KeyId,
    /// The round: sequence number of the input that started it.
    pub seq: u64,
    /// The trigger path of the event.
    pub occurrence: OccurrenceId,
    /// Fingerprint of the trigger event.
    pub fingerprint: Fingerprint,
    /// The action.
    pub action: ActionDigest,
}

impl StateKey {
    /// First byte of every encoded state key: the layout version.
    pub const LAYOUT: u8 = 1;
    /// Length of an encoded state key.
    pub const ENCODED_LEN: usize = 1 + 32 + 8 + 16 + 32 + 16;

    /// The state key of `action` triggered by `event` (which came about through `trigger`) in
    /// round `seq` of `key`.
    pub fn new(key: KeyId, seq: u64, action: &ActionId, event: &Event, trigger: &Trigger) -> Self {
        StateKey {
            key,
            seq,
            occurrence: trigger.occurrence(),
            fingerprint: event.fingerprint(),
            action: action.digest(),
        }
    }

    /// The key that names round `seq` of `key` as a whole rather than one state of it: its
    /// occurrence, fingerprint and action digests are zero. It is the probe of the audit record
    /// of an operator's invalidation (`docs/format.md`, section 1).
    pub fn round(key: KeyId, seq: u64) -> Self {
        StateKey {
            key,
            seq,
            occurrence: OccurrenceId([0; 16]),
            fingerprint: Fingerprint([0; 32]),
            action: ActionDigest([0; 16]),
        }
    }

    /// The fixed-layout encoding: layout byte, key id, seq (big-endian), occurrence,
    /// fingerprint, action digest.
    pub fn to_bytes(&self) -> [u8; Self::ENCODED_LEN] {
        let mut out = [0u8; Self::ENCODED_LEN];
        out[0] = Self::LAYOUT;
        out[1..33].copy_from_slice(&self.key.0);
        // Big-endian so that byte order of encoded keys sorts rounds in sequence order.
        out[33..41].copy_from_slice(&self.seq.to_be_bytes());
        out[41..57].copy_from_slice(&self.occurrence.0);
        out[57..89].copy_from_slice(&self.fingerprint.0);
        out[89..105].copy_from_slice(&self.action.0);
        out
    }

    /// Decodes the fixed layout; any other length or layout byte is a typed error.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, Error> {
        let arr: &[u8; Self::ENCODED_LEN] =
            bytes.try_into().map_err(|_| Error::BadStateKey { len: bytes.len(), layout: bytes.first().copied() })?;
        if arr[0] != Self::LAYOUT {
            return Err(Error::BadStateKey { len: bytes.len(), layout: Some(arr[0]) });
        }
        let mut key = [0u8; 32];
        key.copy_from_slice(&arr[1..33]);
        let mut seq = [0u8; 8];
        seq.copy_from_slice(&arr[33..41]);
        let mut occurrence = [0u8; 16];
        occurrence.copy_from_slice(&arr[41..57]);
        let mut fingerprint = [0u8; 32];
        fingerprint.copy_from_slice(&arr[57..89]);
        let mut action = [0u8; 16];
        action.copy_from_slice(&arr[89..105]);
        Ok(StateKey {
            key: KeyId(key),
            seq: u64::from_be_bytes(seq),
            occurrence: OccurrenceId(occurrence),
            fingerprint: Fingerprint(fingerprint),
            action: ActionDigest(action),
        })
    }

    /// The part of the key that identifies a state within its round.
    pub fn local(&self) -> LocalKey {
        LocalKey { occurrence: self.occurrence, fingerprint: self.fingerprint, action: self.action }
    }
}

/// A state key without its business key and sequence: unique within one round.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LocalKey {
    /// The trigger path.
    pub occurrence: OccurrenceId,
    /// Fingerprint of the trigger event.
    pub fingerprint: Fingerprint,
    /// The action.
    pub action: ActionDigest,
}

impl LocalKey {
    /// The full state key within round `seq` of `key`.
    pub fn within(&self, key: KeyId, seq: u64) -> StateKey {
        StateKey { key, seq, occurrence: self.occurrence, fingerprint: self.fingerprint, action: self.action }
    }
}

/// How the event that triggers an action came to be.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Trigger {
    /// A root event from outside. Its id is new after every restore, so roots match by
    /// fingerprint.
    Input,
    /// Output number `index` of the state `producer`, in the same round.
    Emitted {
        /// The state that emitted the event.
        producer: StateKey,
        /// Position of the event among the producer's outputs.
        index: u32,
    },
    /// An event the runtime mints on every attempt (e.g. an "agent run begins" event).
    Bootstrap {
        /// Stable label of the bootstrap source.
        label: String,
    },
}

impl Trigger {
    /// Whether this is a root (`Input`) trigger.
    pub fn is_input(&self) -> bool {
        matches!(self, Trigger::Input)
    }

    /// The producer state of an `Emitted` trigger.
    pub fn producer(&self) -> Option<&StateKey> {
        match self {
            Trigger::Emitted { producer, .. } => Some(producer),
            _ => None,
        }
    }

    /// The occurrence digest: the trigger path, so that two identical-attribute outputs of one
    /// producer get different state keys.
    pub fn occurrence(&self) -> OccurrenceId {
        let mut h = context::Context::Occurrence.hasher();
        match self {
            Trigger::Input => {
                h.update(&[0]);
            }
            Trigger::Emitted { producer, index } => {
                h.update(&[1]);
                h.update(&producer.to_bytes());
                h.update(&index.to_le_bytes());
            }
            Trigger::Bootstrap { label } => {
                h.update(&[2]);
                canonical::write_str(&mut h, label);
            }
        }
        OccurrenceId(truncate16(h.finalize().as_bytes()))
    }
}
