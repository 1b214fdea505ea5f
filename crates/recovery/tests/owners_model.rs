//! Random histories of one to four owners sharing a log and checkpointing into it, with
//! crashes inside checkpoints, failovers, rescales, zombies (their writes, their checkpoints
//! and late commits of theirs) and 1 to 3 retained checkpoints. After every step, once every
//! reclaim is done, no reclaim has removed a record that a current owner's retained
//! checkpoints, or the restore of an owner that has not checkpointed yet, need. At the end,
//! restoring each owner's newest checkpoint reproduces its index, and restoring each of its
//! retained ones succeeds and holds everything its index holds.
//!
//! The same histories run in the two-phase form too: the test is the runtime that keeps each
//! owner's snapshots (`snapshot`, `checkpoint_complete`), restores a failover or a rescale
//! with `rebuild` from the newest snapshots of the groups' former owners, and checks each
//! retained snapshot the same way; a crash inside a checkpoint is a snapshot never
//! completed, and a zombie's late commit is a late completion published after the fence.
#![allow(clippy::unwrap_used, reason = "tests")]

mod common;

use actionstate_core::{
    CheckpointCommit, CheckpointEntry, CheckpointRecord, ExternalCheckpoint, KeyId, LogRecord, Marker, Ownership,
    StateLog, checkpoint_key_id, codec,
};
use actionstate_memory::MemoryLog;
use actionstate_recovery::{ActionStateStore, RestoreFrom, Retention, Snapshot, StoreConfig, TwoPhase};
use common::{Dump, Faulty, PARTITIONS, dump, finish_round, input, key, process};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Range;
use std::sync::Arc;

const GROUPS: u16 = 8;
const KEYS: usize = 12;

type Log = Faulty<Arc<MemoryLog>>;
/// An owner's store, of the checkpoint form the history runs.
enum Store {
    InLog(ActionStateStore<Log>),
    TwoPhase(ActionStateStore<Log, TwoPhase>),
}

/// `$body` with `$s` bound to the store, whichever its form.
macro_rules! on {
    ($store:expr, $s:ident => $body:expr) => {
        match $store {
            Store::InLog($s) => $body,
            Store::TwoPhase($s) => $body,
        }
    };
}

impl Store {
    fn in_log(&self) -> &ActionStateStore<Log> {
        match self {
            Store::InLog(s) => s,
            Store::TwoPhase(_) => unreachable!("an in-log history has in-log stores"),
        }
    }

    fn two_phase(&self) -> &ActionStateStore<Log, TwoPhase> {
        match self {
            Store::TwoPhase(s) => s,
            Store::InLog(_) => unreachable!("a two-phase history has two-phase stores"),
        }
    }

    fn log(&self) -> &Log {
        on!(self, s => s.log())
    }

    fn epoch(&self) -> u64 {
        on!(self, s => s.epoch())
    }

    fn dump(&self) -> Dump {
        on!(self, s => dump(s))
    }
}

#[derive(Clone, Debug)]
enum Step {
    /// The owner runs the next round of some of its keys.
    Work { owner: usize, keys: u16 },
    /// The owner checkpoints; with `crash`, its process dies at the commit.
    Checkpoint { owner: usize, crash: bool },
    /// The owner is replaced by a successor of the same groups; it lives on as a zombie.
    Failover { owner: usize },
    /// Every owner is replaced by `owners` new ones splitting the groups anew; the old ones
    /// live on as zombies.
    Rescale { owners: usize },
    /// A zombie writes a round and tries to checkpoint.
    Zombie { which: usize },
    /// A zombie's slow checkpoint lands after its successor's fence.
    LateCommit { which: usize },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0usize..4, any::<u16>()).prop_map(|(owner, keys)| Step::Work { owner, keys }),
        4 => (0usize..4, prop::bool::weighted(0.2)).prop_map(|(owner, crash)| Step::Checkpoint { owner, crash }),
        1 => (0usize..4).prop_map(|owner| Step::Failover { owner }),
        1 => (1usize..=4).prop_map(|owners| Step::Rescale { owners }),
        1 => (0usize..8).prop_map(|which| Step::Zombie { which }),
        1 => (0usize..8).prop_map(|which| Step::LateCommit { which }),
    ]
}

/// A checkpoint of an owner: its id and marker, and in the two-phase form the snapshot the
/// runtime keeps.
#[derive(Clone)]
struct Cp {
    id: u64,
    marker: Marker,
    snapshot: Option<Snapshot>,
}

struct Owner {
    store: Store,
    owned: Ownership,
    /// Its checkpoints since it restored, newest last, at most `keep` of them.
    checkpoints: VecDeque<Cp>,
    /// What its restore read from: needed until it checkpoints.
    restored: Vec<Marker>,
    /// Two-phase: the snapshots its rebuild took each of its groups from (disjoint ranges).
    basis: Vec<(Range<u16>, Snapshot)>,
}

impl Owner {
    /// Two-phase: the snapshot a restore of each of its groups takes now.
    fn serving(&self) -> Vec<(Range<u16>, Snapshot)> {
        match (self.checkpoints.back().and_then(|c| c.snapshot.clone()), &self.owned) {
            (Some(s), Ownership::Groups { owned, .. }) => vec![(owned.clone(), s)],
            _ => self.basis.clone(),
        }
    }

    fn retain(&mut self, cp: Cp, keep: u32) {
        self.checkpoints.push_back(cp);
        while self.checkpoints.len() > keep as usize {
            self.checkpoints.pop_front();
        }
    }
}

struct World {
    log: Arc<MemoryLog>,
    keep: u32,
    two_phase: bool,
    /// Two-phase: the next checkpoint id the runtime hands out.
    next_id: u64,
    owners: Vec<Owner>,
    /// Replaced owners that still run, with their groups.
    zombies: Vec<(Store, Ownership)>,
    /// The next round of each key.
    next: BTreeMap<usize, u64>,
}

fn split(owners: usize) -> Vec<Range<u16>> {
    let n = owners.clamp(1, 4) as u16;
    (0..n).map(|i| i * GROUPS / n..(i + 1) * GROUPS / n).collect()
}

fn name(k: usize) -> String {
    format!("model-key-{k}")
}

impl World {
    /// An owner of `range` restored from what `former` owners leave: the log's checkpoints,
    /// or in the two-phase form the snapshots the runtime kept of them.
    async fn restore(&self, range: Range<u16>, former: &[Owner]) -> Owner {
        let owned = Ownership::Groups { max_groups: GROUPS, owned: range.clone() };
        let config = StoreConfig { retention: Retention::LastCheckpoints(self.keep), ..StoreConfig::default() };
        let log = Faulty::wrap(Arc::clone(&self.log));
        if self.two_phase {
            let mut basis = Vec::new();
            for (serves, snapshot) in former.iter().flat_map(Owner::serving) {
                let from = serves.start.max(range.start)..serves.end.min(range.end);
                if from.start < from.end {
                    basis.push((from, snapshot));
                }
            }
            // Each snapshot restores the completed rounds of the groups it serves.
            let mut snapshots: Vec<Snapshot> = basis
                .iter()
                .map(|(from, s)| {
                    let completed: HashMap<KeyId, u64> = s
                        .completed
                        .iter()
                        .filter(|(k, _)| from.contains(&k.key_group(GROUPS)))
                        .map(|(k, q)| (*k, *q))
                        .collect();
                    Snapshot { completed: Arc::new(completed), ..s.clone() }
                })
                .collect();
            // Groups no snapshot holds start over from the earliest record, as a runtime
            // restarts the input of a job that never completed a checkpoint.
            if range.clone().any(|g| !basis.iter().any(|(from, _)| from.contains(&g))) {
                let earliest = Marker::new(self.log.identity().clone(), self.log.earliest_offsets().await.unwrap());
                snapshots.push(Snapshot { checkpoint: 0, marker: earliest, completed: Arc::default() });
            }
            let markers: Vec<Marker> = snapshots.iter().map(|s| s.marker.clone()).collect();
            let (store, _) = ActionStateStore::restore(log, config, &owned, snapshots).await.unwrap();
            return Owner {
                store: Store::TwoPhase(store),
                owned,
                checkpoints: VecDeque::new(),
                restored: markers,
                basis,
            };
        }
        let (store, restored) = ActionStateStore::restore(log, config, &owned, RestoreFrom::Latest).await.unwrap();
        let mut markers: Vec<Marker> = restored.from.iter().map(|c| c.marker.clone()).collect();
        if restored.from_earliest {
            markers.push(Marker::new(self.log.identity().clone(), vec![0; PARTITIONS as usize]));
        }
        Owner { store: Store::InLog(store), owned, checkpoints: VecDeque::new(), restored: markers, basis: Vec::new() }
    }

    /// Owner `i` checkpoints: into the log, or as its runtime does in the two-phase form.
    async fn checkpoint(&mut self, i: usize, metadata: &[u8]) {
        let cp = if self.two_phase {
            self.next_id += 1;
            let id = self.next_id;
            let o = &self.owners[i];
            let snapshot = o.store.two_phase().snapshot(id).await.unwrap();
            o.store.two_phase().checkpoint_complete(id);
            Cp { id, marker: snapshot.marker.clone(), snapshot: Some(snapshot) }
        } else {
            let written = self.owners[i].store.in_log().checkpoint(metadata).await.unwrap();
            Cp { id: written.id, marker: written.marker, snapshot: None }
        };
        self.owners[i].retain(cp, self.keep);
    }

    async fn apply(&mut self, step: &Step) {
        match *step {
            Step::Work { owner, keys } => {
                let o = &self.owners[owner % self.owners.len()];
                for k in (0..KEYS).filter(|k| keys & (1 << k) != 0) {
                    if !o.owned.owns(&key(&name(k))) {
                        continue;
                    }
                    let seq = *self.next.entry(k).or_default();
                    on!(&o.store, s => {
                        process(s, key(&name(k)), seq, &input(seq as i64)).await.unwrap();
                        finish_round(s, key(&name(k)), seq);
                    });
                    self.next.insert(k, seq + 1);
                }
            }
            Step::Checkpoint { owner, crash } => {
                let i = owner % self.owners.len();
                if crash && self.two_phase {
                    // The process dies between the barrier and the completion.
                    self.owners[i].store.log().faults().fail_appends_after(Some(0));
                    self.next_id += 1;
                    let _ = self.owners[i].store.two_phase().snapshot(self.next_id).await;
                    self.fail_over(i).await;
                } else if crash {
                    self.owners[i].store.log().faults().fail_appends_after(Some(0));
                    assert!(self.owners[i].store.in_log().checkpoint(b"torn").await.is_err());
                    // The process died: its successor takes over.
                    self.fail_over(i).await;
                } else {
                    self.checkpoint(i, b"model").await;
                }
            }
            Step::Failover { owner } => {
                let i = owner % self.owners.len();
                self.fail_over(i).await;
            }
            Step::Rescale { owners } => {
                let old: Vec<Owner> = std::mem::take(&mut self.owners);
                for range in split(owners) {
                    let new = self.restore(range, &old).await;
                    self.owners.push(new);
                }
                self.zombies.extend(old.into_iter().map(|o| (o.store, o.owned)));
            }
            Step::Zombie { which } => {
                if self.zombies.is_empty() {
                    return;
                }
                let (z, owned) = &self.zombies[which % self.zombies.len()];
                // Its writes (of its own keys) may be acknowledged, but no replay applies them;
                // its checkpoint fails once it sees its successor's fence.
                if let Some(k) = (0..KEYS).map(|k| (k + which) % KEYS).find(|k| owned.owns(&key(&name(*k)))) {
                    let _ = on!(z, s => process(s, key(&name(k)), 0, &input(-1)).await);
                }
                if self.two_phase {
                    assert!(z.two_phase().snapshot(u64::MAX).await.is_err(), "a replaced owner took a snapshot");
                } else {
                    assert!(z.in_log().checkpoint(b"zombie").await.is_err(), "a replaced owner checkpointed");
                }
            }
            Step::LateCommit { which } => self.late_commit(which).await,
        }
    }

    /// A zombie's slow checkpoint lands after its successor's fence.
    async fn late_commit(&self, which: usize) {
        if self.zombies.is_empty() {
            return;
        }
        let (z, owner) = &self.zombies[which % self.zombies.len()];
        // A marker as old as a snapshot taken before the successor restored.
        let marker = Marker::new(self.log.identity().clone(), vec![0; PARTITIONS as usize]);
        let entry = if self.two_phase {
            // Its runtime completed that snapshot late, and the store published it.
            CheckpointEntry::External(ExternalCheckpoint { marker, from: 0 })
        } else {
            CheckpointEntry::Commit(CheckpointCommit {
                marker,
                metadata: b"late".to_vec(),
                completed: Vec::new(),
                parts: 0,
                from: 0,
            })
        };
        let late = LogRecord::Checkpoint(CheckpointRecord {
            key: checkpoint_key_id(PARTITIONS),
            owner: owner.clone(),
            epoch: z.epoch(),
            id: u64::MAX - which as u64,
            entry,
        });
        self.log.append(codec::encode_by(&late, z.epoch()).unwrap()).await.unwrap();
    }

    async fn fail_over(&mut self, i: usize) {
        let Ownership::Groups { owned, .. } = self.owners[i].owned.clone() else { unreachable!("owners own groups") };
        let successor = self.restore(owned, std::slice::from_ref(&self.owners[i])).await;
        let old = std::mem::replace(&mut self.owners[i], successor);
        self.zombies.push((old.store, old.owned));
    }

    /// No reclaim removed what a current owner needs.
    async fn check_needs(&self) -> Result<(), TestCaseError> {
        for store in self.owners.iter().map(|o| &o.store).chain(self.zombies.iter().map(|(z, _)| z)) {
            on!(store, s => s.wait_for_reclaim().await);
        }
        let earliest = self.log.earliest_offsets().await.unwrap();
        for o in &self.owners {
            let needed: Vec<&Marker> = if o.checkpoints.is_empty() {
                o.restored.iter().collect()
            } else {
                o.checkpoints.iter().map(|c| &c.marker).collect()
            };
            for m in needed {
                prop_assert!(
                    m.offsets.iter().zip(&earliest).all(|(m, e)| m >= e),
                    "{} needs {:?}, the log starts at {:?}",
                    o.owned,
                    m.offsets,
                    earliest
                );
            }
        }
        Ok(())
    }

    /// Every owner checkpoints once more; restoring its newest checkpoint gives its index, and
    /// restoring each retained one succeeds and holds at least that.
    async fn check_restores(&mut self) -> Result<(), TestCaseError> {
        for i in 0..self.owners.len() {
            self.checkpoint(i, b"final").await;
        }
        self.check_needs().await?;
        if self.two_phase {
            return self.check_rebuilds().await;
        }
        let look = StoreConfig { fence_on_rebuild: false, retention: Retention::KeepAll, ..StoreConfig::default() };
        for o in &self.owners {
            let want: Dump = o.store.dump();
            for (n, c) in o.checkpoints.iter().rev().enumerate() {
                let from = if n == 0 { RestoreFrom::Latest } else { RestoreFrom::Checkpoint(c.id) };
                let (check, restored) =
                    ActionStateStore::restore(Arc::clone(&self.log), look.clone(), &o.owned, from).await.map_err(
                        |e| TestCaseError::fail(format!("{}: restoring checkpoint {} failed: {e}", o.owned, c.id)),
                    )?;
                let got = dump(&check);
                if n == 0 {
                    prop_assert_eq!(restored.from.len(), 1);
                    prop_assert_eq!(restored.from[0].id, c.id);
                    prop_assert_eq!(&got, &want, "{}: the newest checkpoint does not reproduce the index", o.owned);
                } else {
                    for (k, (_, at)) in &want {
                        prop_assert_eq!(
                            got.get(k).map(|(_, p)| p),
                            Some(at),
                            "{}: checkpoint {} lost a state",
                            o.owned,
                            c.id
                        );
                    }
                }
            }
        }
        Ok(())
    }
}

impl World {
    /// Two-phase: rebuilding from each owner's newest kept snapshot gives its index, and
    /// rebuilding from each of its retained ones succeeds and holds at least that.
    async fn check_rebuilds(&self) -> Result<(), TestCaseError> {
        let look = StoreConfig { fence_on_rebuild: false, retention: Retention::KeepAll, ..StoreConfig::default() };
        {
            for o in &self.owners {
                let want: Dump = o.store.dump();
                for (n, c) in o.checkpoints.iter().rev().enumerate() {
                    let snapshot = c.snapshot.as_ref().unwrap();
                    let (check, _) = ActionStateStore::restore(
                        Arc::clone(&self.log),
                        look.clone(),
                        &o.owned,
                        std::slice::from_ref(snapshot),
                    )
                    .await
                    .map_err(|e| {
                        TestCaseError::fail(format!("{}: rebuilding checkpoint {} failed: {e}", o.owned, c.id))
                    })?;
                    let got = dump(&check);
                    if n == 0 {
                        prop_assert_eq!(&got, &want, "{}: the newest snapshot does not reproduce the index", o.owned);
                    } else {
                        for (k, (_, at)) in &want {
                            prop_assert_eq!(
                                got.get(k).map(|(_, p)| p),
                                Some(at),
                                "{}: checkpoint {} lost a state",
                                o.owned,
                                c.id
                            );
                        }
                    }
                }
            }
            Ok(())
        }
    }
}

async fn history(keep: u32, owners: usize, steps: &[Step], two_phase: bool) -> Result<(), TestCaseError> {
    let log = Arc::new(MemoryLog::new(PARTITIONS));
    let mut world =
        World { log, keep, two_phase, next_id: 0, owners: Vec::new(), zombies: Vec::new(), next: BTreeMap::new() };
    for range in split(owners) {
        let o = world.restore(range, &[]).await;
        world.owners.push(o);
    }
    for step in steps {
        world.apply(step).await;
        world.check_needs().await.map_err(|e| TestCaseError::fail(format!("after {step:?}: {e}")))?;
    }
    world.check_restores().await
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(1000)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn no_reclaim_removes_what_a_current_owner_needs_and_every_retained_checkpoint_restores(
        keep in 1u32..=3,
        owners in 1usize..=4,
        steps in prop::collection::vec(step(), 1..24),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(history(keep, owners, &steps, false))?;
    }

    #[test]
    fn two_phase_owners_reclaim_nothing_a_current_owner_needs_and_every_kept_snapshot_rebuilds(
        keep in 1u32..=3,
        owners in 1usize..=4,
        steps in prop::collection::vec(step(), 1..24),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(history(keep, owners, &steps, true))?;
    }
}
