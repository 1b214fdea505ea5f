//! What a run produces, per round and per key: shared by the runtime, its checkpoints and the
//! ledger.

use actionstate_core::{Attributes, KeyId};
use std::collections::BTreeMap;

/// Per round, the actions and the attributes of what they emitted (ids differ between runs).
pub type RoundResults = BTreeMap<(KeyId, u64), Vec<(String, Vec<Attributes>)>>;
/// Per key, the agent memory.
pub type Memory = BTreeMap<KeyId, BTreeMap<String, Vec<u8>>>;
