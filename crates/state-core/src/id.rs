//! Identities: business keys, events, actions, and the digests derived from them.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Writes a digest as lowercase hex; used by the `Debug`/`Display` impls of all digest types.
fn write_hex(f: &mut fmt::Formatter<'_>, bytes: &[u8]) -> fmt::Result {
    for b in bytes {
        write!(f, "{b:02x}")?;
    }
    Ok(())
}

macro_rules! digest_type {
    ($(#[$doc:meta])* $name:ident, $len:expr) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub struct $name(pub [u8; $len]);

        impl $name {
            /// Length of the digest in bytes.
            pub const LEN: usize = $len;

            /// The raw digest bytes.
            pub fn as_bytes(&self) -> &[u8; $len] {
                &self.0
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}(", stringify!($name))?;
                write_hex(f, &self.0)?;
                write!(f, ")")
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write_hex(f, &self.0)
            }
        }
    };
}

digest_type!(
    /// Identity of a business key: blake3 of the runtime's canonical key bytes.
    ///
    /// Never derived from a display string, so `1` and `"1"` stay distinct as long as the
    /// runtime's key encoding distinguishes them.
    KeyId,
    32
);

digest_type!(
    /// Identity of an action: a 128-bit blake3 digest of its name and optional version.
    ActionDigest,
    16
);

digest_type!(
    /// Identity of the trigger path (occurrence) of an event within a round.
    OccurrenceId,
    16
);

digest_type!(
    /// Canonical fingerprint of an event: blake3 over its type and attributes.
    Fingerprint,
    32
);

/// Domain-separation contexts for every digest the crate computes. Changing any of them
/// changes persisted identities, so they are pinned by golden tests.
pub(crate) mod context {
    use blake3::hazmat::{ContextKey, HasherExt, hash_derive_key_context};
    use std::sync::LazyLock;

    /// A blake3 derive-key context of this crate's digests. The context strings are part of the
    /// persisted format: changing one changes every digest of its kind.
    #[derive(Clone, Copy, Debug)]
    pub(crate) enum Context {
        Key,
        Action,
        Occurrence,
        Fingerprint,
        Partition,
    }

    impl Context {
        const ALL: [Context; 5] =
            [Context::Key, Context::Action, Context::Occurrence, Context::Fingerprint, Context::Partition];

        pub(crate) const fn name(self) -> &'static str {
            match self {
                Context::Key => "actionstate 2026-11 business key v1",
                Context::Action => "actionstate 2026-11 action id v1",
                Context::Occurrence => "actionstate 2026-11 occurrence v1",
                Context::Fingerprint => "actionstate 2026-11 event fingerprint v1",
                Context::Partition => "actionstate 2026-11 partition v1",
            }
        }

        /// A hasher equal to `blake3::Hasher::new_derive_key(self.name())`. That constructor
        /// hashes the context string on every call, one compression more than the digest itself
        /// needs; here each context is hashed once per process. A put computes several digests
        /// (fingerprint, action, occurrence, partition), each mostly one compression.
        pub(crate) fn hasher(self) -> blake3::Hasher {
            static KEYS: LazyLock<[ContextKey; 5]> =
                LazyLock::new(|| Context::ALL.map(|c| hash_derive_key_context(c.name())));
            blake3::Hasher::new_from_context_key(&KEYS[self as usize])
        }
    }
}

impl KeyId {
    /// Derives the identity of a business key from the runtime's canonical key bytes.
    pub fn of(canonical_key: &[u8]) -> Self {
        KeyId(*context::Context::Key.hasher().update(canonical_key).finalize().as_bytes())
    }

    /// The key group of this key among `max_groups` groups, used for ownership filtering
    /// (which worker owns which keys). Stable across platforms and releases: the first eight
    /// bytes of the key id read little-endian, modulo `max_groups`.
    ///
    /// `max_groups == 0` is treated as one group.
    pub fn key_group(&self, max_groups: u16) -> u16 {
        let groups = u64::from(max_groups.max(1));
        // The remainder is < max_groups <= u16::MAX, so the conversion cannot fail.
        u16::try_from(self.prefix_u64() % groups).unwrap_or(0)
    }

    /// The partition of this key among `partitions` partitions: a stable hash of the key id.
    ///
    /// All records of one business key land in one partition, so per-key order is log order.
    /// `partitions == 0` is treated as one partition.
    pub fn partition(&self, partitions: u32) -> u32 {
        let h = context::Context::Partition.hasher().update(&self.0).finalize();
        let mut first = [0u8; 8];
        first.copy_from_slice(&h.as_bytes()[..8]);
        let n = u64::from(partitions.max(1));
        u32::try_from(u64::from_le_bytes(first) % n).unwrap_or(0)
    }

    fn prefix_u64(&self) -> u64 {
        let mut first = [0u8; 8];
        first.copy_from_slice(&self.0[..8]);
        u64::from_le_bytes(first)
    }
}

/// Identity of one event occurrence: 128 bits, random for fresh events.
///
/// Replayed output events keep their ids; restored inputs get new ones.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct EventId(pub u128);

impl EventId {
    /// A fresh random (UUID v4) event id.
    pub fn random() -> Self {
        EventId(uuid::Uuid::new_v4().as_u128())
    }
}

impl fmt::Debug for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EventId({})", uuid::Uuid::from_u128(self.0))
    }
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&uuid::Uuid::from_u128(self.0), f)
    }
}

/// A stable action name plus an optional version.
///
/// Bumping the version makes earlier results unreachable on purpose: the code changed, so its
/// old results must not be reused. Identity never comes from code hashes.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ActionId {
    /// Stable name, e.g. `"summarize"`.
    pub name: String,
    /// Optional version; `None` and `Some("")` are different identities.
    pub version: Option<String>,
}

impl ActionId {
    /// An unversioned action.
    pub fn new(name: impl Into<String>) -> Self {
        ActionId { name: name.into(), version: None }
    }

    /// A versioned action.
    pub fn versioned(name: impl Into<String>, version: impl Into<String>) -> Self {
        ActionId { name: name.into(), version: Some(version.into()) }
    }

    /// The 128-bit digest used inside state keys.
    pub fn digest(&self) -> ActionDigest {
        let mut h = context::Context::Action.hasher();
        crate::canonical::write_str(&mut h, &self.name);
        match &self.version {
            None => {
                h.update(&[0]);
            }
            Some(v) => {
                h.update(&[1]);
                crate::canonical::write_str(&mut h, v);
            }
        }
        ActionDigest(truncate16(h.finalize().as_bytes()))
    }
}

impl fmt::Display for ActionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.version {
            Some(v) => write!(f, "{}@{}", self.name, v),
            None => f.write_str(&self.name),
        }
    }
}

pub(crate) fn truncate16(bytes: &[u8; 32]) -> [u8; 16] {
    let mut out = [0u8; 16];
    out.copy_from_slice(&bytes[..16]);
    out
}
