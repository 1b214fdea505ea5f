//! The idempotency key of a durable call: one printable string per logical call, which an
//! external service can deduplicate by (an `Idempotency-Key` header, a message id, a ticket
//! reference). Its derivation is in docs/format.md, section 6.7, and its promises in
//! docs/design.md, section 5.2.
//!
//! The key is a digest of what makes the call this call: the deployment's scope (empty by
//! default), the action's [`StateKey`] (business
//! key, round, trigger path, trigger fingerprint, action), the action's incarnation (how many
//! times an invalidation removed that state: a repaired or diverged history gets new keys),
//! the call's position in the journal, its function id and its argument digest. Nothing that
//! differs between retries, crashes, replays, rebuilds, owners or backends goes into it: no
//! event id, no log position, no epoch.

use crate::StateKey;
use std::fmt;

/// The blake3 key-derivation context of version 1 of the key.
const CONTEXT: &str = "actionstate 2026-12 durable call idempotency key v1";

/// The key's prefix: the derivation's name and version.
pub const IDEMPOTENCY_KEY_PREFIX: &str = "as1-";

/// Bytes of the digest the key spells in hex (224 bits).
const DIGEST_BYTES: usize = 28;

/// Characters of every key: the prefix and 56 lowercase hex digits.
pub const IDEMPOTENCY_KEY_LEN: usize = IDEMPOTENCY_KEY_PREFIX.len() + 2 * DIGEST_BYTES;

/// The idempotency key of one durable call (see the module docs). Printable ASCII
/// (`as1-` and lowercase hex), [`IDEMPOTENCY_KEY_LEN`] (60) characters.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// The key of the call at `position` of the journal of `state`'s incarnation
    /// `incarnation`, calling `function_id` with arguments of digest `args_digest`, in the
    /// deployment's `scope` (empty by default).
    pub fn derive(
        scope: &str,
        state: &StateKey,
        incarnation: u32,
        position: usize,
        function_id: &str,
        args_digest: &[u8; 32],
    ) -> Self {
        let mut h = blake3::Hasher::new_derive_key(CONTEXT);
        // Length-prefixed, as the function id below: no two (scope, rest) pairs share bytes.
        h.update(&u64::try_from(scope.len()).unwrap_or(u64::MAX).to_be_bytes());
        h.update(scope.as_bytes());
        h.update(&state.to_bytes());
        h.update(&incarnation.to_be_bytes());
        h.update(&u64::try_from(position).unwrap_or(u64::MAX).to_be_bytes());
        // Length-prefixed, so that no two (function id, digest) pairs share their bytes.
        h.update(&u64::try_from(function_id.len()).unwrap_or(u64::MAX).to_be_bytes());
        h.update(function_id.as_bytes());
        h.update(args_digest);
        let digest = h.finalize();
        IdempotencyKey(format!("{IDEMPOTENCY_KEY_PREFIX}{}", hex::encode(&digest.as_bytes()[..DIGEST_BYTES])))
    }

    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IdempotencyKey({})", self.0)
    }
}

impl AsRef<str> for IdempotencyKey {
    fn as_ref(&self) -> &str {
        &self.0
    }
}
