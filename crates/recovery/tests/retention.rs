//! Checkpoint-aligned retention (docs/design.md, section 6): the log keeps what the last completed
//! checkpoints need and no more, a restore of an older checkpoint is the typed data-loss
//! error, and what the store remembers per key follows the live keys only.
#![allow(clippy::unwrap_used, reason = "tests")]

mod common;

use actionstate_core::{Error, KeyId, StateLog};
use actionstate_memory::MemoryLog;
use actionstate_recovery::{ActionStateStore, Ownership, Retention, Snapshot, StoreConfig, StoreError, TwoPhase};
use common::{Backend, Env, dump, finish_round, input, key, process};
use proptest::prelude::*;
use std::collections::HashMap;
use std::sync::Arc;

fn keep(n: u32) -> StoreConfig {
    StoreConfig { retention: Retention::LastCheckpoints(n), ..StoreConfig::default() }
}

/// Processes one round of `k`, marks it completed, snapshots and completes checkpoint `id`,
/// and waits for the reclaim it may start.
async fn round_and_checkpoint<L: StateLog>(
    store: &ActionStateStore<L, TwoPhase>,
    k: KeyId,
    seq: u64,
    id: u64,
) -> Snapshot {
    process(store, k, seq, &input(i64::try_from(seq).unwrap())).await.unwrap();
    finish_round(store, k, seq);
    let snap = store.snapshot(id).await.unwrap();
    store.checkpoint_complete(id);
    store.wait_for_reclaim().await;
    snap
}

async fn reclaims_behind_the_retained_checkpoints(backend: Backend) {
    let env = Env::new(backend);
    let store = ActionStateStore::new_two_phase(env.open().await, keep(3));
    let mut snaps = Vec::new();
    // Conversations of two rounds each: every checkpoint leaves earlier keys with nothing live.
    for id in 0..12u64 {
        let k = key(&format!("conversation-{}", id / 2));
        snaps.push(round_and_checkpoint(&store, k, id % 2, id).await);
    }
    let status = store.reclaim_status();
    assert_eq!(status.disabled, None);
    assert_eq!(status.failures, 0, "{status:?}");
    assert!(status.reclaims > 0 && status.records_reclaimed > 0, "{status:?}");
    let earliest = store.log().earliest_offsets().await.unwrap();
    // The last three completed checkpoints are restorable; their markers are not reclaimed.
    for snap in &snaps[9..] {
        assert!(snap.marker.offsets.iter().zip(&earliest).all(|(m, e)| m >= e), "{snap:?} vs {earliest:?}");
    }
    let oldest_kept = &snaps[9].marker;
    assert_eq!(earliest, oldest_kept.offsets, "reclaimed exactly below the oldest retained marker");
    drop(store);

    for (i, snap) in snaps.iter().enumerate() {
        let from = std::slice::from_ref(snap);
        let got = ActionStateStore::restore(env.open().await, keep(3), &Ownership::All, from).await;
        let reclaimed = snap.marker.offsets.iter().zip(&earliest).any(|(m, e)| m < e);
        match got {
            Ok(_) => assert!(!reclaimed, "checkpoint {i} restored although its history was reclaimed"),
            Err(StoreError::Log(Error::DataLoss { partition, offset, earliest: e })) => {
                assert!(reclaimed, "checkpoint {i} refused although retained");
                assert_eq!(offset, snap.marker.offsets[partition as usize]);
                assert_eq!(e, earliest[partition as usize]);
            }
            Err(e) => panic!("checkpoint {i}: expected the data-loss error, got {e}"),
        }
        assert!(i < 9 || !reclaimed, "retained checkpoint {i} was reclaimed");
    }
}
on_every_backend!(retention_reclaims_what_no_retained_checkpoint_needs, reclaims_behind_the_retained_checkpoints);

async fn follows_live_keys(backend: Backend) {
    let env = Env::new(backend);
    let store = ActionStateStore::new_two_phase(env.open().await, StoreConfig::default());
    let mut largest = 0;
    for id in 0..40u64 {
        // Four new conversations per checkpoint, each of one round, then idle for good.
        for c in 0..4 {
            let k = key(&format!("idle-{id}-{c}"));
            process(&store, k, 0, &input(0)).await.unwrap();
            finish_round(&store, k, 0);
        }
        let snap = store.snapshot(id).await.unwrap();
        largest = largest.max(snap.completed.len());
        store.checkpoint_complete(id);
    }
    // A snapshot holds the keys completed since the checkpoint before it, and those still
    // draining from it: never the 160 keys seen.
    assert!(largest <= 8, "a snapshot held {largest} keys");
    assert!(store.completed_keys() <= 8, "{} completed keys remembered", store.completed_keys());
    store.wait_for_reclaim().await;
}
on_every_backend!(completed_rounds_are_remembered_only_for_live_keys, follows_live_keys);

#[tokio::test]
async fn a_failed_reclaim_is_reported_and_retried() {
    let log = common::faulty_memory(2);
    let store = ActionStateStore::new_two_phase(common::Reopen::reopen(&log), keep(1));
    log.faults().fail_reclaims(true);
    round_and_checkpoint(&store, key("a"), 0, 0).await;
    round_and_checkpoint(&store, key("b"), 0, 1).await;
    let status = store.reclaim_status();
    assert!(status.failures >= 1 && status.last_error.as_deref().is_some_and(|e| e.contains("reclaim")), "{status:?}");
    assert_eq!(log.earliest_offsets().await.unwrap(), vec![0, 0], "a failed reclaim removed nothing");
    log.faults().fail_reclaims(false);
    round_and_checkpoint(&store, key("c"), 0, 2).await;
    let status = store.reclaim_status();
    assert_eq!(status.last_error, None, "{status:?}");
    assert!(status.records_reclaimed > 0, "{status:?}");
}

/// A log whose owner owned part of the keys, restored by one owner of all of them (a rescale to
/// one owner): the new owner reclaims again. (A store's ownership is fixed when it is restored,
/// so the owner of part of the keys and the owner of all of them are two stores, one after the
/// other on the same log.)
#[tokio::test]
async fn a_store_that_comes_to_own_every_key_reclaims_again() {
    let log = MemoryLog::new(2);
    let part = Ownership::Groups { max_groups: 4, owned: 0..2 };
    let (partial, _) = ActionStateStore::restore(log.reopen(), keep(1), &part, Vec::<Snapshot>::new()).await.unwrap();
    for id in 0..2u64 {
        let k = (0..).map(|i| key(&format!("k{id}-{i}"))).find(|k| part.owns(k)).unwrap();
        round_and_checkpoint(&partial, k, 0, id).await;
    }
    // The owner of groups 2..4 has not checkpointed (there is none): it holds reclaim back.
    let status = partial.wait_for_reclaim().await;
    assert_eq!(status.waiting, vec![Ownership::Groups { max_groups: 4, owned: 2..4 }], "{status:?}");
    assert_eq!((status.reclaims, status.disabled), (0, None), "{status:?}");
    drop(partial);
    let (store, _) =
        ActionStateStore::restore(log.reopen(), keep(1), &Ownership::All, Vec::<Snapshot>::new()).await.unwrap();
    assert_eq!(store.reclaim_status().disabled, None);
    round_and_checkpoint(&store, key("a"), 0, 0).await;
    round_and_checkpoint(&store, key("b"), 0, 1).await;
    assert!(store.reclaim_status().records_reclaimed > 0, "{:?}", store.reclaim_status());
}

#[tokio::test]
async fn stores_that_must_not_reclaim_do_not() {
    for (config, ownership, why) in [
        (StoreConfig { retention: Retention::KeepAll, ..StoreConfig::default() }, Ownership::All, "keeps everything"),
        (
            StoreConfig { retention: Retention::KeepAll, ..StoreConfig::default() },
            Ownership::Groups { max_groups: 4, owned: 0..2 },
            "keeps everything",
        ),
    ] {
        let log = MemoryLog::new(2);
        let (store, _) =
            ActionStateStore::restore(log.reopen(), config, &ownership, Vec::<Snapshot>::new()).await.unwrap();
        for id in 0..4u64 {
            let k = (0..).map(|i| key(&format!("k{id}-{i}"))).find(|k| ownership.owns(k)).unwrap();
            round_and_checkpoint(&store, k, 0, id).await;
        }
        let status = store.reclaim_status();
        assert!(status.disabled.is_some_and(|d| d.contains(why)), "{status:?}");
        assert_eq!(status.reclaims, 0);
        assert_eq!(log.earliest_offsets().await.unwrap(), vec![0, 0]);
    }
}

/// One step of a random history.
#[derive(Clone, Debug)]
enum Step {
    /// A round of key `k`; its input changes (`change`) to make a divergence.
    Round { k: u8, change: bool },
    /// A checkpoint that completes, or aborts.
    Checkpoint { complete: bool },
    /// The writer crashes and a new one restores the checkpoint `back` completed checkpoints
    /// before the newest (clamped to what is retained).
    Crash { back: u8 },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0u8..6, prop::bool::weighted(0.1)).prop_map(|(k, change)| Step::Round { k, change }),
        3 => prop::bool::weighted(0.8).prop_map(|complete| Step::Checkpoint { complete }),
        1 => (0u8..3).prop_map(|back| Step::Crash { back }),
    ]
}

/// One writer of the history: its log, its store, and the checkpoints it completed.
struct Writer {
    log: MemoryLog,
    store: ActionStateStore<MemoryLog, TwoPhase>,
    config: StoreConfig,
    completed: Vec<Snapshot>,
}

impl Writer {
    fn new(config: StoreConfig) -> Self {
        let log = MemoryLog::new(2);
        let store = ActionStateStore::new_two_phase(log.reopen(), config.clone());
        Writer { log, store, config, completed: Vec::new() }
    }

    /// A new store over this log restored from completed checkpoint `i`, with the completed
    /// rounds its snapshot gave, or `completed`.
    async fn restore(
        &self,
        i: usize,
        completed: Option<&HashMap<KeyId, u64>>,
    ) -> Result<ActionStateStore<MemoryLog, TwoPhase>, StoreError> {
        let cp = &self.completed[i];
        let completed = completed.map_or_else(|| Arc::clone(&cp.completed), |c| Arc::new(c.clone()));
        let from = Snapshot { completed, ..cp.clone() };
        let (store, _) =
            ActionStateStore::restore(self.log.reopen(), self.config.clone(), &Ownership::All, &[from]).await?;
        Ok(store)
    }
}

/// Every round completed before a checkpoint, per key: what a snapshot that forgot no key
/// would say.
fn every_completed(next_seq: &HashMap<u8, u64>) -> HashMap<KeyId, u64> {
    next_seq.iter().filter(|(_, s)| **s > 0).map(|(k, s)| (key(&format!("h{k}")), s - 1)).collect()
}

/// What an index holds, by state key (event ids differ between two runs of one history).
fn keys<L: StateLog>(store: &ActionStateStore<L, TwoPhase>) -> Vec<actionstate_core::StateKey> {
    dump(store).into_keys().collect()
}

/// Runs `steps` twice, with retention keeping `retained` checkpoints and keeping everything,
/// and compares every restore.
///
/// Retention counts completions as they happen: a checkpoint is retained while it is one of
/// the last `retained` to complete, also after a restore of an older one (which does not undo
/// later completions). The runtime restores only retained checkpoints, as Flink restores only
/// the checkpoints it retains.
async fn history(retained: u32, steps: &[Step]) -> Result<(), TestCaseError> {
    let retained = retained as usize;
    let mut kept = Writer::new(keep(u32::try_from(retained).unwrap()));
    let mut all = Writer::new(StoreConfig { retention: Retention::KeepAll, ..StoreConfig::default() });
    let mut next_seq: HashMap<u8, u64> = HashMap::new();
    // The runtime's checkpoints: completion number and where each key's inputs stood.
    let mut saved: Vec<(usize, HashMap<u8, u64>)> = Vec::new();
    let mut completions = 0usize;
    let mut id = 0u64;
    for step in steps {
        match step {
            Step::Round { k, change } => {
                let seq = next_seq.entry(*k).or_default();
                let v = i64::try_from(*seq).unwrap() + if *change { 1_000 } else { 0 };
                for w in [&kept, &all] {
                    process(&w.store, key(&format!("h{k}")), *seq, &input(v)).await.unwrap();
                    finish_round(&w.store, key(&format!("h{k}")), *seq);
                }
                *seq += 1;
            }
            Step::Checkpoint { complete } => {
                id += 1;
                for w in [&mut kept, &mut all] {
                    let snap = w.store.snapshot(id).await.unwrap();
                    if *complete {
                        w.store.checkpoint_complete(id);
                        w.store.wait_for_reclaim().await;
                        w.completed.push(snap);
                    } else {
                        w.store.checkpoint_aborted(id);
                    }
                }
                if *complete {
                    saved.push((completions, next_seq.clone()));
                    completions += 1;
                }
            }
            Step::Crash { back } => {
                let restorable: Vec<usize> =
                    (0..saved.len()).filter(|&i| saved[i].0 + retained >= completions).collect();
                let Some(&i) = restorable.iter().rev().nth(usize::from(*back)).or(restorable.first()) else {
                    continue;
                };
                let full = every_completed(&saved[i].1);
                let (a, b) = (kept.restore(i, None).await, all.restore(i, Some(&full)).await.unwrap());
                let a = a.map_err(|e| TestCaseError::fail(format!("restoring retained checkpoint {i}: {e}")))?;
                prop_assert_eq!(keys(&a), keys(&b), "restoring checkpoint {} after a crash", i);
                next_seq = saved[i].1.clone();
                saved.truncate(i + 1);
                for (w, store) in [(&mut kept, a), (&mut all, b)] {
                    w.completed.truncate(i + 1);
                    w.store = store;
                }
            }
        }
    }
    // Every retained checkpoint gives what it gives without retention; an older one does too
    // unless its history was reclaimed, and then fails with the data-loss error.
    let earliest = kept.log.earliest_offsets().await.unwrap();
    for (i, (completion, next_seq)) in saved.iter().enumerate() {
        let retained_now = completion + retained >= completions;
        // The reference restores the log that keeps everything with every completed round: a
        // snapshot that forgets a key must lose nothing by it.
        let want = keys(&all.restore(i, Some(&every_completed(next_seq))).await.unwrap());
        match kept.restore(i, None).await {
            Ok(store) => prop_assert_eq!(keys(&store), want, "restoring checkpoint {}", i),
            Err(StoreError::Log(Error::DataLoss { .. })) => {
                prop_assert!(!retained_now, "retained checkpoint {} was reclaimed", i);
                prop_assert!(kept.completed[i].marker.offsets.iter().zip(&earliest).any(|(m, e)| m < e));
            }
            Err(e) => return Err(TestCaseError::fail(format!("restoring checkpoint {i}: {e}"))),
        }
    }
    Ok(())
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(256)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn retention_never_removes_what_a_retained_checkpoint_needs(
        retained in 1u32..=3,
        steps in prop::collection::vec(step(), 1..80),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(history(retained, &steps))?;
    }
}
