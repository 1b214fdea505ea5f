//! Durable waits' words (docs/design.md, section 5.7): a wait is a slot of its action's
//! journal, recorded with an unguessable secret when it first becomes durable; its token names
//! the business key and carries that secret; its outcome (a reply, a rejection or a timeout)
//! replaces the slot's waiting status, the first one only.
//!
//! A token is a capability (whoever holds it can approve what the wait waits for), so neither
//! a token, a secret nor a reply is ever printed by `Debug`: they show their lengths, or
//! `<redacted>`.

use crate::id::KeyId;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The largest reply or rejection a wait records, in bytes: a reply is journaled in its
/// action's state, which every replay reads.
pub const MAX_WAIT_REPLY: usize = 64 * 1024;

/// The prefix of every wait token: its format's name and version.
pub const WAIT_TOKEN_PREFIX: &str = "asw1-";

/// Characters of every wait token: the prefix and 96 lowercase hex digits (the key's 32 bytes,
/// then the secret's 16).
pub const WAIT_TOKEN_LEN: usize = WAIT_TOKEN_PREFIX.len() + 2 * (KeyId::LEN + WaitSecret::LEN);

/// The unguessable part of a wait: 16 random bytes (a version-4 UUID's, 122 of them random,
/// from the operating system's generator), recorded with the wait when it first becomes
/// durable, and what a resolve must present. Nothing that names the wait (key, round, action)
/// derives it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct WaitSecret(pub [u8; 16]);

impl WaitSecret {
    /// Length of a secret in bytes.
    pub const LEN: usize = 16;

    /// A fresh secret.
    pub fn random() -> Self {
        WaitSecret(uuid::Uuid::new_v4().into_bytes())
    }
}

impl fmt::Debug for WaitSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WaitSecret(<redacted>)")
    }
}

/// What a wait slot records besides its outcome: the secret, when the action first waited and
/// when the wait times out (milliseconds since the Unix epoch, by the store's clock). Replays
/// keep all three: a restart never restarts the clock.
#[derive(Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitSlot {
    /// The wait's secret.
    pub secret: WaitSecret,
    /// When the wait first became durable.
    pub since_ms: u64,
    /// When it times out, if it does.
    pub deadline_ms: Option<u64>,
}

impl fmt::Debug for WaitSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WaitSlot")
            .field("since_ms", &self.since_ms)
            .field("deadline_ms", &self.deadline_ms)
            .finish_non_exhaustive()
    }
}

/// How a wait ended: the first of a reply, a rejection and a timeout; later ones are refused.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum WaitOutcome {
    /// The reply it waited for (encoded by the application).
    Reply(Vec<u8>),
    /// A rejection, with the rejecter's encoded reason.
    Rejected(Vec<u8>),
    /// Its deadline passed first.
    TimedOut,
}

impl WaitOutcome {
    /// The outcome's name: `reply`, `rejected` or `timed_out` (what metrics and listings say).
    pub fn name(&self) -> &'static str {
        match self {
            WaitOutcome::Reply(_) => "reply",
            WaitOutcome::Rejected(_) => "rejected",
            WaitOutcome::TimedOut => "timed_out",
        }
    }
}

impl fmt::Debug for WaitOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaitOutcome::Reply(b) => write!(f, "Reply(<{} bytes>)", b.len()),
            WaitOutcome::Rejected(b) => write!(f, "Rejected(<{} bytes>)", b.len()),
            WaitOutcome::TimedOut => f.write_str("TimedOut"),
        }
    }
}

/// A resolve asked for by a process that does not own the wait's key: appended to the key's
/// partition as [`LogRecord::Resolve`](crate::LogRecord::Resolve) (record kind 6), and
/// recorded by the owner, which settles the wait with it if the wait is still pending when it
/// reads the request (at its next poll, or when it restores). It changes no state itself: the
/// outcome the owner records is the wait's outcome, and whoever asked reads it back.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolveRequest {
    /// The business key of the waiting action (decides the partition).
    pub key: KeyId,
    /// The secret of the wait, as the token carries it.
    pub secret: WaitSecret,
    /// The outcome asked for: a reply or a rejection (a timeout is the owner's to record).
    pub outcome: WaitOutcome,
}

impl ResolveRequest {
    /// The request of `outcome` for the wait `token` names.
    pub fn new(token: &WaitToken, outcome: WaitOutcome) -> Self {
        ResolveRequest { key: token.key, secret: token.secret, outcome }
    }

    /// The token the request presents.
    pub fn token(&self) -> WaitToken {
        WaitToken { key: self.key, secret: self.secret }
    }

    /// Whether the codec can write it: a reply or rejection of at most [`MAX_WAIT_REPLY`]
    /// bytes (not a timeout).
    pub fn check(&self) -> Result<(), crate::Error> {
        match &self.outcome {
            WaitOutcome::Reply(b) | WaitOutcome::Rejected(b) if b.len() <= MAX_WAIT_REPLY => Ok(()),
            WaitOutcome::Reply(b) | WaitOutcome::Rejected(b) => {
                Err(crate::Error::WaitReplyTooLarge { len: b.len(), max: MAX_WAIT_REPLY })
            }
            WaitOutcome::TimedOut => Err(crate::Error::TimeoutRequested),
        }
    }
}

impl fmt::Debug for ResolveRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResolveRequest").field("key", &self.key).field("outcome", &self.outcome).finish_non_exhaustive()
    }
}

/// The log key of a resolve request: a tag byte, the key id and the wait's secret (requests
/// for one wait share it, so a compacted topic keeps one of them, which is all it needs).
pub fn resolve_log_key(request: &ResolveRequest) -> [u8; 49] {
    let mut out = [0u8; 49];
    out[0] = RESOLVE_KEY_LAYOUT;
    out[1..33].copy_from_slice(&request.key.0);
    out[33..49].copy_from_slice(&request.secret.0);
    out
}

/// First byte of a resolve request's log key.
pub const RESOLVE_KEY_LAYOUT: u8 = 0xB1;

/// What a wait hands out when it suspends, and what resolves it: the business key (which
/// routes a resolve to the key's partition and owner) and the wait's [`WaitSecret`]. Stable
/// from the moment the wait is durable, across retries, crashes, replays, restores and
/// failover; a wait whose history is invalidated records a new secret when it waits again.
///
/// Its text ([`to_text`](Self::to_text), [`parse`](Self::parse)) is `asw1-` and 96 lowercase
/// hex digits. `Debug` shows the key only.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct WaitToken {
    /// The business key of the waiting action.
    pub key: KeyId,
    /// The wait's secret.
    pub secret: WaitSecret,
}

/// Why a text is not a wait token.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadWaitToken {
    /// It does not start with [`WAIT_TOKEN_PREFIX`].
    #[error("a wait token starts with `{WAIT_TOKEN_PREFIX}`")]
    Prefix,
    /// It has the wrong length.
    #[error("a wait token has {WAIT_TOKEN_LEN} characters, this one has {0}")]
    Length(usize),
    /// It holds a character that is not a lowercase hex digit after the prefix.
    #[error("a wait token holds lowercase hex digits after its prefix")]
    Digits,
}

impl WaitToken {
    /// The token's text, to hand to whoever may resolve the wait. Treat it as a secret.
    pub fn to_text(&self) -> String {
        let mut bytes = [0u8; KeyId::LEN + WaitSecret::LEN];
        bytes[..KeyId::LEN].copy_from_slice(&self.key.0);
        bytes[KeyId::LEN..].copy_from_slice(&self.secret.0);
        format!("{WAIT_TOKEN_PREFIX}{}", hex::encode(bytes))
    }

    /// The token a text spells. The error names what is wrong, never the text.
    pub fn parse(text: &str) -> Result<WaitToken, BadWaitToken> {
        let digits = text.strip_prefix(WAIT_TOKEN_PREFIX).ok_or(BadWaitToken::Prefix)?;
        if text.len() != WAIT_TOKEN_LEN {
            return Err(BadWaitToken::Length(text.len()));
        }
        if !digits.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(BadWaitToken::Digits);
        }
        let mut bytes = [0u8; KeyId::LEN + WaitSecret::LEN];
        hex::decode_to_slice(digits, &mut bytes).map_err(|_| BadWaitToken::Digits)?;
        let mut key = [0u8; KeyId::LEN];
        let mut secret = [0u8; WaitSecret::LEN];
        key.copy_from_slice(&bytes[..KeyId::LEN]);
        secret.copy_from_slice(&bytes[KeyId::LEN..]);
        Ok(WaitToken { key: KeyId(key), secret: WaitSecret(secret) })
    }
}

impl fmt::Debug for WaitToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WaitToken").field("key", &self.key).finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_round_trips_through_its_text() {
        let token = WaitToken { key: KeyId::of(b"user-7"), secret: WaitSecret::random() };
        let text = token.to_text();
        assert_eq!(text.len(), WAIT_TOKEN_LEN);
        assert!(text.starts_with(WAIT_TOKEN_PREFIX));
        assert_eq!(WaitToken::parse(&text), Ok(token));
    }

    #[test]
    fn malformed_tokens_are_refused_by_what_is_wrong() {
        let text = WaitToken { key: KeyId::of(b"k"), secret: WaitSecret([7; 16]) }.to_text();
        assert_eq!(WaitToken::parse(&text[1..]), Err(BadWaitToken::Prefix));
        assert_eq!(WaitToken::parse(&text[..text.len() - 1]), Err(BadWaitToken::Length(WAIT_TOKEN_LEN - 1)));
        assert_eq!(WaitToken::parse(&text.to_uppercase().replace("ASW1-", "asw1-")), Err(BadWaitToken::Digits));
        assert_eq!(WaitToken::parse(&format!("{}g", &text[..text.len() - 1])), Err(BadWaitToken::Digits));
    }

    #[test]
    fn secrets_are_fresh_and_debug_never_shows_a_secret_or_a_reply() {
        let (a, b) = (WaitSecret::random(), WaitSecret::random());
        assert_ne!(a, b);
        let token = WaitToken { key: KeyId::of(b"k"), secret: a };
        let shown = format!("{token:?} {a:?} {:?}", WaitSlot { secret: a, since_ms: 1, deadline_ms: None });
        let secret_hex = hex::encode(a.0);
        assert!(!shown.contains(&secret_hex), "{shown}");
        assert_eq!(format!("{:?}", WaitOutcome::Reply(b"approve".to_vec())), "Reply(<7 bytes>)");
    }
}
