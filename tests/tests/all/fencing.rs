//! Fencing zombie writers on every backend: two live stores on the same key groups, the old
//! one (the zombie) still completing actions after the new one restored them. No later
//! rebuild — from a checkpoint before the restore, or from one after it whose marker lies past
//! the fence records — holds a state the zombie wrote after the fence; the zombie's next
//! snapshot fails with `Fenced`, and so does every write after it. A rescale (2 owners → 3)
//! fences exactly the groups each new owner took.
//!
//! The stores share one handle on the log (the file backend allows one process per
//! directory; the records, and so the mechanism, are the same as with two processes).

use actionstate_core::{ActionId, Attributes, Event, KeyId, LogRecord, Ownership, StateKey, StateLog, Trigger, Value};
use actionstate_recovery::{
    ActionStateStore, AnyLog, Begin, RebuildReport, Retention, Round, Snapshot, StoreConfig, StoreError, TwoPhase,
};
use actionstate_tests::{Backend, Env, read_records};
use std::collections::BTreeSet;
use std::sync::Arc;

on_every_backend!("fencing":
    a_zombie_is_fenced_out_of_every_later_rebuild,
    a_rescale_fences_exactly_the_groups_each_new_owner_took,
);

/// Two-phase stores: the test keeps the snapshots a runtime would, and restores from them.
type Store = ActionStateStore<Arc<AnyLog>, TwoPhase>;

fn question(seq: u64) -> Event {
    let mut attributes = Attributes::new();
    attributes.insert("n".into(), Value::Int(i64::try_from(seq).unwrap()));
    Event::new("question", attributes)
}

/// Runs the one action of round `seq` of `key` unless it is reused: `Ok(Some(state))` when it
/// ran and its completion was acknowledged, `Ok(None)` when it was reused.
async fn answer(store: &Store, key: KeyId, seq: u64) -> Result<Option<StateKey>, StoreError> {
    let input = question(seq);
    let round = Round::new(key, seq, &input);
    match store.begin(&round, &ActionId::new("answer"), &input, &Trigger::Input).await? {
        Begin::Reuse(_) => Ok(None),
        Begin::Resume(handle) | Begin::Fresh(handle, _) => {
            let key = *handle.key();
            store.complete(handle, vec![Event::new("reply", Attributes::new())], Vec::new()).await?;
            Ok(Some(key))
        }
    }
}

/// Every action of round `seq` of `key` (its input [`question`]) is done.
fn finish(store: &Store, key: KeyId, seq: u64) {
    store.round(Round::new(key, seq, &question(seq))).finish();
}

fn config() -> StoreConfig {
    StoreConfig { retention: Retention::KeepAll, ..StoreConfig::default() }
}

/// An owner of `ownership` restored from `from` (none: a fresh start), and its rebuild.
async fn owner(log: &Arc<AnyLog>, ownership: &Ownership, from: &[Snapshot]) -> (Store, RebuildReport) {
    let (store, restored) = ActionStateStore::restore(Arc::clone(log), config(), ownership, from).await.unwrap();
    (store, restored.rebuild)
}

/// A store that replays `from` without becoming an owner: what any later restore would see.
async fn observer(log: &Arc<AnyLog>, from: &[Snapshot]) -> (Store, RebuildReport) {
    let config = StoreConfig { fence_on_rebuild: false, ..config() };
    let (store, restored) = ActionStateStore::restore(Arc::clone(log), config, &Ownership::All, from).await.unwrap();
    (store, restored.rebuild)
}

/// Which of `states` the store's index holds.
fn indexed(store: &Store, states: &BTreeSet<StateKey>) -> BTreeSet<StateKey> {
    store.with_index(|ix| states.iter().filter(|s| ix.get(s).is_some()).copied().collect())
}

fn assert_fenced(err: StoreError, old: u64, new: u64, what: &str) {
    match err {
        StoreError::Fenced { epoch, fenced_by, .. } => {
            assert_eq!((epoch, fenced_by), (old, Some(new)), "{what}: the epochs named");
        }
        other => panic!("{what}: expected Fenced, got {other}"),
    }
}

async fn a_zombie_is_fenced_out_of_every_later_rebuild(backend: Backend) {
    let env = Env::new(backend).unwrap();
    let log = Arc::new(env.open().await.unwrap());
    let (zombie_key, owner_key) = (KeyId::of(b"zombie's"), KeyId::of(b"new owner's"));

    // The first owner restores (nothing yet), answers rounds 0..3 of both keys, checkpoints.
    let (old, first) = owner(&log, &Ownership::All, &[]).await;
    assert!(first.epoch > 0, "a restore takes an epoch");
    let mut before = BTreeSet::new();
    for seq in 0..3 {
        before.insert(answer(&old, zombie_key, seq).await.unwrap().unwrap());
        before.insert(answer(&old, owner_key, seq).await.unwrap().unwrap());
    }
    let checkpoint = old.snapshot(1).await.unwrap();

    // It is presumed dead; the new owner restores the checkpoint and reuses all of it. (The
    // first owner finished no round: the checkpoint is its marker alone.)
    let (new, restored) = owner(&log, &Ownership::All, std::slice::from_ref(&checkpoint)).await;
    assert!(restored.epoch > first.epoch, "{} then {}", first.epoch, restored.epoch);
    assert_eq!(restored.fenced, 0);
    for seq in 0..3 {
        assert_eq!(answer(&new, zombie_key, seq).await.unwrap(), None, "round {seq} is reused");
    }

    // The zombie keeps going: its puts are acknowledged, as the backend took them.
    let mut zombie = BTreeSet::new();
    for seq in 3..6 {
        zombie.insert(answer(&old, zombie_key, seq).await.unwrap().expect("the zombie ran the action"));
    }
    let mut owned = BTreeSet::new();
    for seq in 3..5 {
        owned.insert(answer(&new, owner_key, seq).await.unwrap().unwrap());
    }
    // The new owner's checkpoint, with every round completed and pruned: its marker lies past
    // the fences, which it carries.
    for seq in 0..5 {
        finish(&new, owner_key, seq);
        finish(&new, zombie_key, seq.min(2));
    }
    let second = new.snapshot(2).await.unwrap();
    new.checkpoint_complete(2);
    let later = new.snapshot(3).await.unwrap();
    assert!(!later.marker.fences.is_empty(), "a marker past a fence carries it");
    // More of the zombie's writes, after that marker too.
    for seq in 6..8 {
        zombie.insert(answer(&old, zombie_key, seq).await.unwrap().expect("the zombie ran the action"));
    }
    let mine_later = answer(&new, owner_key, 5).await.unwrap().unwrap();

    // The zombie learns it at its next snapshot, and writes nothing more.
    assert_fenced(old.snapshot(4).await.unwrap_err(), first.epoch, restored.epoch, "the zombie's snapshot");
    assert_fenced(answer(&old, zombie_key, 8).await.unwrap_err(), first.epoch, restored.epoch, "a later put");
    assert_fenced(old.check_fenced().await.unwrap_err(), first.epoch, restored.epoch, "a check");

    // A third restore, from the first checkpoint: the first owner's history before the fence
    // and the new owner's, none of the zombie's.
    let (third, report) = observer(&log, &[checkpoint]).await;
    assert_eq!(report.fenced, zombie.len() as u64, "{}: every zombie record is skipped", backend.name());
    assert!(indexed(&third, &zombie).is_empty(), "{}: a zombie state was replayed", backend.name());
    assert_eq!(indexed(&third, &before), before, "{}: the history before the restore is kept", backend.name());
    owned.insert(mine_later);
    assert_eq!(indexed(&third, &owned), owned, "{}: the new owner's states", backend.name());
    assert_eq!(report.epoch, restored.epoch, "an observer writes with the newest epoch");

    // From the later checkpoints, whose markers lie past the fence records.
    for (name, snapshot) in [("second", &second), ("later", &later)] {
        let (restore, _) = observer(&log, std::slice::from_ref(snapshot)).await;
        let zombies = indexed(&restore, &zombie);
        assert!(zombies.is_empty(), "{}: the {name} checkpoint replays a zombie state", backend.name());
        let kept = indexed(&restore, &BTreeSet::from([mine_later]));
        assert_eq!(kept.len(), 1, "{}: the {name} checkpoint keeps the owner's state", backend.name());
    }
}

/// Keys of every group of `max_groups`, one each.
fn one_key_per_group(max_groups: u16) -> Vec<KeyId> {
    (0..max_groups)
        .map(|g| {
            (0u32..).map(|i| KeyId::of(format!("k{i}").as_bytes())).find(|k| k.key_group(max_groups) == g).unwrap()
        })
        .collect()
}

// Long: one rescale scenario read top to bottom: each new owner's fences checked against the groups it took.
async fn a_rescale_fences_exactly_the_groups_each_new_owner_took(backend: Backend) {
    const GROUPS: u16 = 12;
    let groups = |owned: std::ops::Range<u16>| Ownership::Groups { max_groups: GROUPS, owned };
    let env = Env::new(backend).unwrap();
    let log = Arc::new(env.open().await.unwrap());
    let keys = one_key_per_group(GROUPS);

    // Two owners, six groups each.
    let before = [groups(0..6), groups(6..12)];
    let mut old = Vec::new();
    // Their checkpoints: markers alone, as the owners finish no round.
    let mut checkpoints = Vec::new();
    for ownership in &before {
        let (store, _) = owner(&log, ownership, &[]).await;
        for key in keys.iter().filter(|k| ownership.owns(k)) {
            answer(&store, *key, 0).await.unwrap().unwrap();
        }
        checkpoints.push(store.snapshot(1).await.unwrap());
        old.push(store);
    }

    // Three new owners restore both checkpoints, each its third of the groups.
    let after = [groups(0..4), groups(4..8), groups(8..12)];
    let mut new = Vec::new();
    for ownership in &after {
        new.push(owner(&log, ownership, &checkpoints).await.0);
    }
    // Every partition holds one fence of each new owner, of exactly its groups and epoch.
    let records = read_records(&*log).await.unwrap();
    let partitions = log.identity().partitions;
    for (ownership, store) in after.iter().zip(&new) {
        let mut found: Vec<u32> = records
            .iter()
            .filter_map(|(p, _, r)| match r {
                LogRecord::Fence(f) if f.epoch == store.epoch() => {
                    assert_eq!(&f.groups, ownership, "{}: a fence of other groups", backend.name());
                    Some(*p)
                }
                _ => None,
            })
            .collect();
        found.sort_unstable();
        assert_eq!(found, (0..partitions).collect::<Vec<_>>(), "{}: {ownership}", backend.name());
    }

    // The old owners keep writing every key they held; the new ones write theirs.
    let mut zombie = BTreeSet::new();
    for (ownership, store) in before.iter().zip(&old) {
        for key in keys.iter().filter(|k| ownership.owns(k)) {
            zombie.insert(answer(store, *key, 1).await.unwrap().unwrap());
        }
    }
    let mut owned = BTreeSet::new();
    for (ownership, store) in after.iter().zip(&new) {
        for key in keys.iter().filter(|k| ownership.owns(k)) {
            assert_eq!(answer(store, *key, 0).await.unwrap(), None, "round 0 is reused");
            owned.insert(answer(store, *key, 2).await.unwrap().unwrap());
        }
        store.snapshot(2).await.expect("a new owner is not fenced by another new owner");
    }
    // Each old owner is fenced by a new owner over its groups.
    for (i, store) in old.iter().enumerate() {
        match store.snapshot(3).await.unwrap_err() {
            StoreError::Fenced { groups: fenced, fenced_by, .. } => {
                let by = new.iter().position(|n| Some(n.epoch()) == fenced_by).expect("fenced by a new owner");
                assert!(after[by].overlaps(&before[i]), "{}: fenced by an owner of other groups", backend.name());
                assert_eq!(fenced, before[i].within(&after[by]), "{}: the groups named", backend.name());
            }
            other => panic!("{}: old owner {i} is not fenced: {other}", backend.name()),
        }
    }

    // A replay of everything holds the new owners' states and none of the zombies'.
    let (all, report) = observer(&log, &checkpoints).await;
    assert_eq!(report.fenced, zombie.len() as u64, "{}", backend.name());
    assert!(indexed(&all, &zombie).is_empty(), "{}: a zombie state was replayed", backend.name());
    assert_eq!(indexed(&all, &owned), owned, "{}: a new owner's state is missing", backend.name());
}
