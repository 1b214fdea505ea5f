//! What to simulate ([`SimConfig`]), the input source it derives, and how a run goes
//! ([`RunPlan`]: where it crashes, how it restores, what changes).

use crate::crash::CrashPoint;
use actionstate_core::KeyId;

/// What to simulate.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Seed of everything random (inputs, event ids, aborted checkpoints).
    pub seed: u64,
    /// Distinct business keys.
    pub keys: u32,
    /// Inputs in the source.
    pub inputs: usize,
    /// A checkpoint is taken after every this many inputs.
    pub checkpoint_every: usize,
    /// Every this-many-th checkpoint is aborted instead of completed (0: never).
    pub abort_every: u64,
    /// Owners (workers) at the start; keys are split among them by key group.
    pub owners: u32,
    /// Whether `work` uses reconcile mode for its second call.
    pub reconcile: bool,
    /// About one round in this many asks for a person's approval, which the `approve` action
    /// waits for durably (0: none; see `approvals.rs`).
    pub approval_every: u32,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            seed: 1,
            keys: 4,
            inputs: 24,
            checkpoint_every: 4,
            abort_every: 3,
            owners: 1,
            reconcile: false,
            approval_every: 0,
        }
    }
}

/// Which checkpoint a restore goes back to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestoreFrom {
    /// The newest completed checkpoint.
    Latest,
    /// The `n`-th newest completed checkpoint (0 = latest), or the oldest if there are fewer.
    Back(usize),
}

/// A change to the input source seen after the first restore.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputChange {
    /// The first input replayed after the restore gets another value (+1000, which also
    /// changes `v % 3` and with it the attributes of the `task` events `plan` emits).
    ChangeFirstReplayed,
    /// The first input replayed after the restore gets another value with the same `v % 3`
    /// (+999): the changed root emits `task` events with the same attributes as before, so
    /// only their producer tells the new children from the old ones.
    ChangeFirstReplayedSameChildren,
    /// The first two replayed inputs of one key swap places.
    SwapFirstReplayed,
}

/// How a run goes: where it crashes and how it restores.
#[derive(Clone, Debug)]
pub struct RunPlan {
    /// Injected crashes.
    pub crashes: Vec<CrashPoint>,
    /// Restore policy per restore, in order; the last one repeats.
    pub restore_from: Vec<RestoreFrom>,
    /// Owners after each restore, in order; the last one repeats (empty: keep).
    pub owners_after_restore: Vec<u32>,
    /// Input change after the first restore.
    pub change: Option<InputChange>,
    /// Keep only the first `n` inputs of the source after the first restore (a truncated
    /// replay).
    pub truncate_after_restore: Option<usize>,
    /// Per crash, in order, how many rounds the crashed attempt keeps processing after the
    /// next attempt restored (0 or missing: it is dead). Such an attempt was only presumed
    /// dead: a zombie, which the restore fenced. Its side effects are counted apart
    /// ([`Ledger::zombie_effects`](crate::Ledger::zombie_effects)), none of its records may be
    /// replayed ([`Outcome::zombie_appends_replayed`](crate::Outcome::zombie_appends_replayed)),
    /// and its snapshot must fail with
    /// [`StoreError::Fenced`](actionstate_recovery::StoreError::Fenced).
    pub zombie_rounds: Vec<u64>,
}

impl RunPlan {
    /// A run without crashes.
    pub fn clean() -> Self {
        RunPlan {
            crashes: Vec::new(),
            restore_from: vec![RestoreFrom::Latest],
            owners_after_restore: Vec::new(),
            change: None,
            truncate_after_restore: None,
            zombie_rounds: Vec::new(),
        }
    }

    /// Crashes at `points`, restoring from the latest checkpoint each time.
    pub fn crashing(points: impl IntoIterator<Item = CrashPoint>) -> Self {
        RunPlan { crashes: points.into_iter().collect(), ..RunPlan::clean() }
    }
}

/// The seeded hash behind everything random in a run: `a` names the use, `b` the instance.
pub(crate) fn mix(seed: u64, a: u64, b: u64) -> u64 {
    let mut h = blake3::Hasher::new();
    h.update(&seed.to_le_bytes());
    h.update(&a.to_le_bytes());
    h.update(&b.to_le_bytes());
    let mut w = [0u8; 8];
    w.copy_from_slice(&h.finalize().as_bytes()[..8]);
    u64::from_le_bytes(w)
}

/// The input source: (key number, value).
pub fn inputs(config: &SimConfig) -> Vec<(u32, i64)> {
    (0..config.inputs as u64)
        .map(|i| {
            let r = mix(config.seed, 0x1, i);
            ((r % u64::from(config.keys.max(1))) as u32, ((r >> 32) % 1000) as i64)
        })
        .collect()
}

/// The name the simulated application gives key number `k`: its states carry it as their
/// label.
pub fn key_name(k: u32) -> String {
    format!("sim-key-{k}")
}

/// The business key of key number `k`.
pub fn key_id(k: u32) -> KeyId {
    KeyId::of(key_name(k).as_bytes())
}
