//! Checkpoints kept in the log: `checkpoint` writes them, `restore` finds them again, a crash
//! inside one leaves the previous one in force, a replaced owner's late checkpoint does not
//! count, and finding one reads only the tail of the checkpoint partition.
#![allow(clippy::unwrap_used, reason = "tests")]

mod common;

use actionstate_core::{
    CHECKPOINT_PART_ENTRIES, CheckpointCommit, CheckpointEntry, CheckpointRecord, LogRecord, Ownership, StateLog,
    checkpoint_key_id, codec,
};
use actionstate_recovery::{ActionStateStore, RestoreFrom, Restored, StoreConfig, StoreError};
use common::{Backend, Env, Faulty, PARTITIONS, STATES_PER_ROUND, finish_round, input, key, process, replayed};

fn groups(owned: std::ops::Range<u16>) -> Ownership {
    Ownership::Groups { max_groups: 8, owned }
}

/// Processes inputs `seqs` of `name` and reports each round completed, as a service does.
async fn serve<L: StateLog>(store: &ActionStateStore<L>, name: &str, seqs: std::ops::Range<u64>) -> usize {
    let mut fresh = 0;
    for seq in seqs {
        let outcome = process(store, key(name), seq, &input(seq as i64)).await.unwrap();
        finish_round(store, key(name), seq);
        fresh += outcome.fresh;
    }
    fresh
}

/// Replays inputs `seqs` of `name` with new event ids; returns the actions reused.
async fn replay<L: StateLog>(store: &ActionStateStore<L>, name: &str, seqs: std::ops::Range<u64>) -> usize {
    let mut reused = 0;
    for seq in seqs {
        let outcome = process(store, key(name), seq, &replayed(&input(seq as i64))).await.unwrap();
        assert_eq!(outcome.fresh, 0, "round {seq} of {name} ran again");
        reused += outcome.reused;
    }
    reused
}

async fn restore_all(env: &Env) -> (ActionStateStore<actionstate_recovery::AnyLog>, Restored) {
    ActionStateStore::restore(env.open().await, StoreConfig::default(), &Ownership::All, RestoreFrom::Latest)
        .await
        .unwrap()
}

async fn a_service_restores_its_checkpoint_and_reuses_what_followed(backend: Backend) {
    let env = Env::new(backend);
    let (store, restored) = restore_all(&env).await;
    assert!(restored.from.is_empty() && restored.from_earliest && restored.metadata().is_none(), "{restored:?}");
    assert_eq!(serve(&store, "svc", 0..4).await, 4 * STATES_PER_ROUND);
    let written = store.checkpoint(b"next input 4").await.unwrap();
    assert_eq!((written.id, written.parts), (1, 0));
    assert_eq!(written.pruned, 4 * STATES_PER_ROUND, "the completed rounds leave memory");
    serve(&store, "svc", 4..6).await;
    drop(store);

    let (store, restored) = restore_all(&env).await;
    assert_eq!(restored.metadata(), Some(&b"next input 4"[..]));
    assert!(!restored.from_earliest);
    assert_eq!(restored.from[0].id, 1);
    assert_eq!(store.stats().states, 2 * STATES_PER_ROUND, "only the rounds after the checkpoint are replayed");
    assert_eq!(replay(&store, "svc", 4..6).await, 2 * STATES_PER_ROUND);
    assert_eq!(store.checkpoint(b"next input 6").await.unwrap().id, 2, "ids go on from the restored one");
}
on_every_backend!(service_restore, a_service_restores_its_checkpoint_and_reuses_what_followed);

async fn without_a_checkpoint_the_restore_replays_the_log(backend: Backend) {
    let env = Env::new(backend);
    let (store, _) = restore_all(&env).await;
    serve(&store, "early", 0..3).await;
    drop(store);
    // The process died before its first checkpoint: its inputs start over, and reuse.
    let (store, restored) = restore_all(&env).await;
    assert!(restored.from.is_empty() && restored.from_earliest);
    assert_eq!(replay(&store, "early", 0..3).await, 3 * STATES_PER_ROUND);
}
on_every_backend!(no_checkpoint, without_a_checkpoint_the_restore_replays_the_log);

async fn a_crash_inside_a_checkpoint_leaves_the_previous_one_in_force(backend: Backend) {
    let env = Env::new(backend);
    let faulty = Faulty::wrap(env.open().await);
    let faults = faulty.faults().clone();
    let (store, _) =
        ActionStateStore::restore(faulty, StoreConfig::default(), &Ownership::All, RestoreFrom::Latest).await.unwrap();
    serve(&store, "k", 0..2).await;
    store.checkpoint(b"first").await.unwrap();
    serve(&store, "k", 2..4).await;
    // The commit is the checkpoint's only append: the writer dies right there.
    faults.fail_appends_after(Some(0));
    let err = store.checkpoint(b"second").await.unwrap_err();
    assert!(err.is_retryable(), "{err}");
    assert_eq!(store.pending_checkpoints(), 0, "the failed checkpoint was aborted");
    drop(store);
    let (store, restored) = restore_all(&env).await;
    assert_eq!(restored.metadata(), Some(&b"first"[..]));
    assert_eq!(replay(&store, "k", 2..4).await, 2 * STATES_PER_ROUND);
}
on_every_backend!(crash_in_checkpoint, a_crash_inside_a_checkpoint_leaves_the_previous_one_in_force);

/// A checkpoint of more live keys than one record holds is written in parts; a crash between
/// the parts and the commit leaves the previous checkpoint in force, and a restore of the
/// complete one prunes every round it completed.
#[tokio::test]
async fn a_large_checkpoint_is_written_in_parts_and_counts_only_with_its_commit() {
    let env = Env::new(Backend::Memory);
    let faulty = Faulty::wrap(env.open().await);
    let faults = faulty.faults().clone();
    let (store, _) =
        ActionStateStore::restore(faulty, StoreConfig::default(), &Ownership::All, RestoreFrom::Latest).await.unwrap();
    let keys = CHECKPOINT_PART_ENTRIES + 10;
    let all_keys = |seq: u64| {
        let store = &store;
        async move {
            for k in 0..keys {
                common::process(store, key(&format!("k{k}")), seq, &input(seq as i64)).await.unwrap();
                finish_round(store, key(&format!("k{k}")), seq);
            }
        }
    };
    all_keys(0).await;
    let written = store.checkpoint(b"whole").await.unwrap();
    assert_eq!(written.parts, 2);
    all_keys(1).await;
    // Two parts, then the commit: the writer dies after the first part.
    faults.fail_appends_after(Some(1));
    store.checkpoint(b"torn").await.unwrap_err();
    drop(store);
    let (store, restored) = restore_all(&env).await;
    assert_eq!(restored.metadata(), Some(&b"whole"[..]), "the parts alone are no checkpoint");
    assert_eq!(
        store.stats().states,
        keys * STATES_PER_ROUND,
        "round 0 of every key is pruned by the checkpoint's parts; round 1 is replayed"
    );
}

async fn a_named_checkpoint_is_restored_and_a_missing_one_is_an_error(backend: Backend) {
    let env = Env::new(backend);
    let keep_all = StoreConfig { retention: actionstate_recovery::Retention::KeepAll, ..StoreConfig::default() };
    let (store, _) =
        ActionStateStore::restore(env.open().await, keep_all.clone(), &Ownership::All, RestoreFrom::Latest)
            .await
            .unwrap();
    for n in 0..3u64 {
        serve(&store, "k", n * 2..n * 2 + 2).await;
        store.checkpoint(format!("checkpoint {}", n + 1).as_bytes()).await.unwrap();
    }
    drop(store);
    let (store, restored) =
        ActionStateStore::restore(env.open().await, keep_all.clone(), &Ownership::All, RestoreFrom::Checkpoint(2))
            .await
            .unwrap();
    assert_eq!(restored.metadata(), Some(&b"checkpoint 2"[..]));
    assert_eq!(replay(&store, "k", 4..6).await, 2 * STATES_PER_ROUND, "the rounds after checkpoint 2 are reused");
    drop(store);
    let err = ActionStateStore::restore(env.open().await, keep_all, &Ownership::All, RestoreFrom::Checkpoint(9))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::CheckpointNotFound { id: 9, partition: 0, .. }), "{err}");
}
on_every_backend!(named_checkpoint, a_named_checkpoint_is_restored_and_a_missing_one_is_an_error);

/// A restore of an older checkpoint abandons the newer ones: a `Latest` restore after a crash,
/// before the restored owner checkpointed, takes the checkpoint restored, not the abandoned
/// line's newest; and checkpoint ids stay unique.
async fn a_latest_restore_after_a_rollback_stays_on_the_restored_line(backend: Backend) {
    let env = Env::new(backend);
    let keep_all = StoreConfig { retention: actionstate_recovery::Retention::KeepAll, ..StoreConfig::default() };
    let (env, keep_all) = (&env, &keep_all);
    let restore = |from| async move {
        ActionStateStore::restore(env.open().await, keep_all.clone(), &Ownership::All, from).await.unwrap()
    };
    let (store, _) = restore(RestoreFrom::Latest).await;
    for n in 0..3u64 {
        serve(&store, "k", n * 2..n * 2 + 2).await;
        store.checkpoint(format!("checkpoint {}", n + 1).as_bytes()).await.unwrap();
    }
    drop(store);
    let (store, restored) = restore(RestoreFrom::Checkpoint(1)).await;
    assert_eq!(restored.metadata(), Some(&b"checkpoint 1"[..]));
    drop(store);
    for _ in 0..2 {
        let (store, restored) = restore(RestoreFrom::Latest).await;
        assert_eq!(
            (restored.from.len(), restored.metadata()),
            (1, Some(&b"checkpoint 1"[..])),
            "a crash before the restored owner checkpointed keeps it on the restored line"
        );
        assert_eq!(replay(&store, "k", 2..4).await, 2 * STATES_PER_ROUND, "the rounds after checkpoint 1 are reused");
        drop(store);
    }
    let (store, _) = restore(RestoreFrom::Latest).await;
    let written = store.checkpoint(b"checkpoint 4").await.unwrap();
    assert_eq!(written.id, 4, "the abandoned checkpoints' ids are not handed out again");
    drop(store);
    let (_, restored) = restore(RestoreFrom::Latest).await;
    assert_eq!(restored.metadata(), Some(&b"checkpoint 4"[..]));
    let err =
        ActionStateStore::restore(env.open().await, keep_all.clone(), &Ownership::All, RestoreFrom::Checkpoint(3))
            .await
            .unwrap_err();
    assert!(matches!(err, StoreError::CheckpointNotFound { id: 3, .. }), "an abandoned checkpoint is gone: {err}");
}
on_every_backend!(rollback_restore, a_latest_restore_after_a_rollback_stays_on_the_restored_line);

/// After a rescale, an owner of groups two former owners held restores both of their
/// checkpoints: each for its own groups.
async fn a_rescaled_owner_restores_the_checkpoints_of_both_former_owners(backend: Backend) {
    let env = Env::new(backend);
    let log = env.shared().await;
    let (left, _) = ActionStateStore::restore(log.clone(), StoreConfig::default(), &groups(0..4), RestoreFrom::Latest)
        .await
        .unwrap();
    let (right, _) = ActionStateStore::restore(log.clone(), StoreConfig::default(), &groups(4..8), RestoreFrom::Latest)
        .await
        .unwrap();
    let names: Vec<String> = (0..16).map(|n| format!("key-{n}")).collect();
    let owner_of = |name: &str| if groups(0..4).owns(&key(name)) { &left } else { &right };
    for name in &names {
        serve(owner_of(name), name, 0..2).await;
    }
    left.checkpoint(b"left").await.unwrap();
    right.checkpoint(b"right").await.unwrap();
    for name in &names {
        serve(owner_of(name), name, 2..3).await;
    }
    drop((left, right, log));

    let (middle, restored) =
        ActionStateStore::restore(env.open().await, StoreConfig::default(), &groups(2..6), RestoreFrom::Latest)
            .await
            .unwrap();
    let mut metadata: Vec<&[u8]> = restored.from.iter().map(|c| c.metadata.as_slice()).collect();
    metadata.sort();
    assert_eq!(metadata, [&b"left"[..], &b"right"[..]]);
    assert_eq!(restored.metadata(), None, "two checkpoints: the caller combines their metadata");
    let mine: Vec<&String> = names.iter().filter(|n| groups(2..6).owns(&key(n))).collect();
    assert!(!mine.is_empty());
    assert_eq!(
        middle.stats().states,
        mine.len() * STATES_PER_ROUND,
        "the keys of groups 2..6, their rounds after the checkpoints only"
    );
    for name in mine {
        assert_eq!(replay(&middle, name, 2..3).await, STATES_PER_ROUND, "{name}");
    }
}
on_every_backend!(rescale_restore, a_rescaled_owner_restores_the_checkpoints_of_both_former_owners);

/// A commit that lands after a newer owner's fence, from a snapshot taken before it (a zombie
/// whose checkpoint was slow), is void: the restore takes the newer owner's state instead.
#[tokio::test]
async fn a_replaced_owners_late_checkpoint_is_void() {
    let env = Env::new(Backend::Memory);
    let (old, _) = restore_all(&env).await;
    serve(&old, "k", 0..2).await;
    let good = old.checkpoint(b"old owner").await.unwrap();
    let from = old.log().end_offsets().await.unwrap()[0];
    let (new, _) = restore_all(&env).await;
    assert!(new.epoch() > old.epoch());
    // The zombie's checkpoint, snapshotted before the new owner's fence, lands after it.
    let late = LogRecord::Checkpoint(CheckpointRecord {
        key: checkpoint_key_id(PARTITIONS),
        owner: Ownership::All,
        epoch: old.epoch(),
        id: good.id + 1,
        entry: CheckpointEntry::Commit(CheckpointCommit {
            marker: good.marker.clone(),
            metadata: b"zombie".to_vec(),
            completed: Vec::new(),
            parts: 0,
            from,
        }),
    });
    old.log().append(codec::encode_by(&late, old.epoch()).unwrap()).await.unwrap();
    drop((old, new));
    let (_, restored) = restore_all(&env).await;
    assert_eq!(restored.metadata(), Some(&b"old owner"[..]), "{:?}", restored.from);
}

/// Finding the checkpoint reads the tail of the checkpoint partition, whatever the log's size.
#[tokio::test]
async fn finding_the_checkpoint_reads_the_same_whatever_the_history() {
    let mut scanned = Vec::new();
    for history in [100u64, 2_000] {
        let env = Env::new(Backend::Memory);
        let (store, _) = restore_all(&env).await;
        for k in 0..history {
            serve(&store, &format!("h{k}"), 0..1).await;
        }
        store.checkpoint(b"now").await.unwrap();
        serve(&store, "tail", 0..3).await;
        drop(store);
        let (_, restored) = restore_all(&env).await;
        assert_eq!(restored.metadata(), Some(&b"now"[..]));
        scanned.push(restored.scanned);
    }
    assert!(scanned.iter().all(|s| *s <= 256), "{scanned:?}");
}

#[tokio::test]
async fn metadata_beyond_the_limit_is_refused_and_writes_nothing() {
    let env = Env::new(Backend::Memory);
    let (store, _) = restore_all(&env).await;
    let before = store.log().end_offsets().await.unwrap();
    let err = store.checkpoint(&vec![0; actionstate_core::MAX_CHECKPOINT_METADATA + 1]).await.unwrap_err();
    assert!(
        matches!(err, StoreError::Log(actionstate_core::Error::MetadataTooLarge { len: 65537, max: 65536 })),
        "{err}"
    );
    assert_eq!(store.log().end_offsets().await.unwrap(), before);
}

/// After a rescale, each former owner's checkpoint governs its own groups from its own marker:
/// a key of the owner that checkpointed later, whose rounds that owner pruned and then forgot
/// (its records lie below its marker, so its checkpoint no longer names it), is not brought
/// back by the replay from the other owner's older marker, where it would pin retention.
async fn a_rescale_restore_replays_each_group_from_its_own_checkpoint(backend: Backend) {
    let env = Env::new(backend);
    let log = env.shared().await;
    let (left_groups, right_groups) = (groups(0..4), groups(4..8));
    let open = |owned| ActionStateStore::restore(log.clone(), StoreConfig::default(), owned, RestoreFrom::Latest);
    let (left, _) = open(&left_groups).await.unwrap();
    let (right, _) = open(&right_groups).await.unwrap();
    let names: Vec<String> = (0..32).map(|n| format!("idle-{n}")).collect();
    let (lefts, rights): (Vec<&String>, Vec<&String>) = names.iter().partition(|n| groups(0..4).owns(&key(n)));
    assert!(!lefts.is_empty() && !rights.is_empty());
    for name in &rights {
        serve(&right, name, 0..1).await;
    }
    // The right owner's only checkpoint: its marker lies before every record of the left's.
    right.checkpoint(b"right").await.unwrap();
    for name in &lefts {
        serve(&left, name, 0..2).await;
    }
    // The first prunes the left keys' rounds, the second's marker passes their records and
    // they leave what the store remembers: the third names none of them.
    for _ in 0..3 {
        left.checkpoint(b"left").await.unwrap();
    }
    assert_eq!(left.completed_keys(), 0);
    // A reclaim in flight holds the log open.
    left.wait_for_reclaim().await;
    drop((left, right, log));

    let (all, restored) =
        ActionStateStore::restore(env.open().await, StoreConfig::default(), &groups(0..8), RestoreFrom::Latest)
            .await
            .unwrap();
    assert_eq!(restored.from.len(), 2, "{:?}", restored.from);
    assert_eq!(all.stats().states, 0, "every round was completed and pruned before the checkpoints");
    let skipped = restored.rebuild.before_checkpoint;
    assert!(skipped >= (lefts.len() * 2 * STATES_PER_ROUND) as u64, "{skipped} records skipped");
    // Its own checkpoint's marker may lie below those records (here it is the right owner's):
    // it names the skipped keys' rounds completed again, so a restore of it prunes them too.
    assert_eq!(all.completed_keys(), names.len());
    serve(&all, "busy", 0..1).await;
    all.checkpoint(b"all").await.unwrap();
    all.wait_for_reclaim().await;
    drop(all);
    let (again, restored) =
        ActionStateStore::restore(env.open().await, StoreConfig::default(), &groups(0..8), RestoreFrom::Latest)
            .await
            .unwrap();
    assert_eq!(restored.metadata(), Some(&b"all"[..]));
    assert_eq!(again.stats().states, 0, "{:?}", restored.rebuild);
}
on_every_backend!(rescale_floors, a_rescale_restore_replays_each_group_from_its_own_checkpoint);
