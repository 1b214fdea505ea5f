//! # actionstate-core
//!
//! The pure data model of actionstate: identities, the canonical attribute tree and its
//! fingerprints, events and triggers, occurrence-aware state keys, action states with their
//! durable-call journal, log records and their checksummed envelope, the [`StateLog`]
//! backend contract, and [`RangeRead`], which reads a partition range checking every batch
//! against that contract.
//!
//! Nothing here performs I/O or depends on an async runtime; backends implement [`StateLog`],
//! and [`BackendConfig`] for the configuration a log URL names. Even the secret a log URL names
//! is read by the backend that needs it ([`url::SecretSource::resolve_with`]).
//!
//! ```
//! use actionstate_core::*;
//!
//! let key = KeyId::of(b"customer-42");
//! let action = ActionId::new("summarize");
//! let mut attrs = Attributes::new();
//! attrs.insert("text".into(), Value::from("hello"));
//! let input = Event::new("input", attrs);
//! let sk = StateKey::new(key, 0, &action, &input, &Trigger::Input);
//! assert_eq!(StateKey::from_bytes(&sk.to_bytes()).unwrap(), sk);
//!
//! let state = ActionState {
//!     label: None,
//!     trace: None,
//!     key: sk,
//!     action,
//!     trigger: Trigger::Input,
//!     trigger_event: input.id,
//!     input: input.fingerprint(),
//!     progress: Progress::Completed { outputs: vec![], memory: vec![] },
//! };
//! let wire = codec::encode(&LogRecord::Upsert(state.clone())).unwrap();
//! assert_eq!(codec::decode(&wire.key, &wire.value).unwrap(), LogRecord::Upsert(state));
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![deny(clippy::unwrap_used)]
#![warn(missing_docs)]

pub mod backend;
mod canonical;
pub mod checkpoint;
pub mod codec;
mod error;
mod event;
pub mod fence;
mod id;
mod idempotency;
mod key;
mod kind;
mod log;
mod range;
mod record;
mod state;
mod trace;
pub mod url;
mod value;
mod view;
mod wait;

pub use backend::{BackendConfig, DEFAULT_PARTITIONS};
pub use checkpoint::{
    CHECKPOINT_KEY_LAYOUT, CHECKPOINT_PART_ENTRIES, CHECKPOINT_PARTITION, CheckpointCommit, CheckpointEntry,
    CheckpointRecord, CheckpointRollback, ExternalCheckpoint, MAX_CHECKPOINT_METADATA, checkpoint_key_id,
};
pub use error::{BackendError, Error};
pub use event::Event;
pub use fence::{FENCE_KEY_LAYOUT, Fence, FenceMark, Ownership, fence_key_id, fence_log_key};
pub use id::{ActionDigest, ActionId, EventId, Fingerprint, KeyId, OccurrenceId};
pub use idempotency::{IDEMPOTENCY_KEY_LEN, IDEMPOTENCY_KEY_PREFIX, IdempotencyKey};
pub use key::{LocalKey, StateKey, Trigger};
pub use kind::RecordKind;
pub use log::{Capabilities, LogIdentity, Marker, Position, ReadBatch, ReadRecord, StateLog, WireRecord};
pub use range::RangeRead;
pub use record::{
    AUDIT_KEY_LAYOUT, Audit, AuditDetail, Evidence, InvalidationReason, LogRecord, MAX_OPERATOR_TEXT, MissReason,
    audit_log_key,
};
pub use state::{
    ActionState, CallResult, CallStatus, KeyLabel, MAX_KEY_LABEL, MemoryOp, MemoryUpdate, Progress, TaggedBytes,
};
pub use trace::TraceContext;
pub use value::{Attributes, Value, normalize_float};
pub use wait::{
    BadWaitToken, MAX_WAIT_REPLY, RESOLVE_KEY_LAYOUT, ResolveRequest, WAIT_TOKEN_LEN, WAIT_TOKEN_PREFIX, WaitOutcome,
    WaitSecret, WaitSlot, WaitToken, resolve_log_key,
};
