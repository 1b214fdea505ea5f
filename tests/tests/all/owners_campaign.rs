//! The crash campaign of owners that share one log and checkpoint into it, retention on
//! (docs/design.md, sections 5.6 and 6): seeded runs of two to four owners, each processing
//! the rounds of its keys with one external effect per round (a reconciled durable call
//! against an effect ledger outside the store), checkpointing into the log every second
//! round with its input position as metadata. Owners crash at random appends (an append that
//! fails, or one whose acknowledgement is lost), inside checkpoints too, and a successor of
//! the same key groups restores; now and then every owner is replaced by a new split (a
//! rescale); crashed owners live on as zombies that must find themselves fenced.
//!
//! After every run, all owners are dropped and a new split restores and replays the rounds
//! after its checkpoints: every effect happened exactly once (0 duplicates, none missing) and
//! every acknowledged completion is reused (0 lost). No restore meets reclaimed history, and
//! across the runs the owners reclaimed.
//!
//! The same campaign runs in the two-phase form: the campaign is the runtime that keeps each
//! owner's snapshots with its input position (`snapshot`, then `checkpoint_complete`), and a
//! successor or a new split is rebuilt from the newest snapshots of its groups' former owners.
//!
//! `ACTIONSTATE_OWNERS_RUNS` sets the runs on memory and file (default 40 and 12); Kafka runs 4
//! on fresh topics of the configured broker.

use actionstate_core::{ActionId, Attributes, Event, KeyId, Marker, Ownership, StateLog, Trigger, Value};
use actionstate_recovery::{
    ActionStateStore, AnyLog, Begin, CheckpointForm, DurableCall, ReclaimStatus, RestoreFrom, Retention, Snapshot,
    StoreConfig, StoreError, TwoPhase,
};
use actionstate_testkit::Faulty;
use actionstate_tests::{Backend, Env, Rng};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Range;
use std::sync::{Arc, Mutex};

const GROUPS: u16 = 16;

type Log = Faulty<Arc<AnyLog>>;

/// An owner's store, of the campaign's checkpoint form.
enum Store {
    /// Checkpoints written into the log.
    InLog(ActionStateStore<Log>),
    /// Checkpoints kept by the campaign, as a runtime keeps them.
    TwoPhase(ActionStateStore<Log, TwoPhase>),
}

impl Store {
    fn log(&self) -> &Log {
        match self {
            Store::InLog(s) => s.log(),
            Store::TwoPhase(s) => s.log(),
        }
    }

    async fn check_fenced(&self) -> Result<(), StoreError> {
        match self {
            Store::InLog(s) => s.check_fenced().await,
            Store::TwoPhase(s) => s.check_fenced().await,
        }
    }

    async fn wait_for_reclaim(&self) -> ReclaimStatus {
        match self {
            Store::InLog(s) => s.wait_for_reclaim().await,
            Store::TwoPhase(s) => s.wait_for_reclaim().await,
        }
    }

    /// Round `seq` of `key` (see [`round`]).
    async fn round(&self, ledger: &Ledger, key: &str, seq: u64) -> Result<bool, StoreError> {
        match self {
            Store::InLog(s) => round(s, ledger, key, seq).await,
            Store::TwoPhase(s) => round(s, ledger, key, seq).await,
        }
    }
}

/// The effects the outside world saw, and the completions the store acknowledged.
#[derive(Default)]
struct Ledger {
    effects: Mutex<BTreeMap<(String, u64), u32>>,
    acked: Mutex<BTreeSet<(String, u64)>>,
}

impl Ledger {
    fn effect(&self, id: &(String, u64)) -> Vec<u8> {
        *self.effects.lock().unwrap().entry(id.clone()).or_default() += 1;
        format!("effect {} {}", id.0, id.1).into_bytes()
    }

    fn happened(&self, id: &(String, u64)) -> bool {
        self.effects.lock().unwrap().contains_key(id)
    }
}

/// One owner: its store, its key groups and the next round of each of its keys.
struct Owner {
    store: Store,
    owned: Ownership,
    next: BTreeMap<usize, u64>,
    steps: u64,
    /// Two-phase: the snapshots its rebuild took each of its groups from (disjoint ranges),
    /// with the input positions kept beside them, then its own newest completed checkpoint.
    serving: Vec<(Range<u16>, Snapshot, BTreeMap<usize, u64>)>,
}

fn range(owned: &Ownership) -> Range<u16> {
    match owned {
        Ownership::Groups { owned, .. } => owned.clone(),
        Ownership::All => 0..GROUPS,
    }
}

/// A checkpoint's metadata: the next round of each key the owner holds (key index, round).
fn encode(next: &BTreeMap<usize, u64>) -> Vec<u8> {
    next.iter().flat_map(|(k, n)| (*k as u32).to_le_bytes().into_iter().chain(n.to_le_bytes())).collect()
}

fn decode(metadata: &[u8]) -> BTreeMap<usize, u64> {
    metadata
        .chunks_exact(12)
        .map(|c| {
            (u32::from_le_bytes(c[..4].try_into().unwrap()) as usize, u64::from_le_bytes(c[4..].try_into().unwrap()))
        })
        .collect()
}

fn split(owners: u64) -> Vec<Ownership> {
    let n = owners.clamp(1, 4) as u16;
    (0..n).map(|i| Ownership::Groups { max_groups: GROUPS, owned: i * GROUPS / n..(i + 1) * GROUPS / n }).collect()
}

fn input(key: &str, seq: u64) -> Event {
    let mut attributes = Attributes::new();
    attributes.insert("round".into(), Value::from(format!("{key}/{seq}")));
    Event::new("input", attributes)
}

/// Round `seq` of `key`: one action making one effect through a reconciled durable call.
/// Returns whether the action was reused.
async fn round<F: CheckpointForm>(
    store: &ActionStateStore<Log, F>,
    ledger: &Ledger,
    key: &str,
    seq: u64,
) -> Result<bool, StoreError> {
    let event = input(key, seq);
    // Finished once its action is done; a round cut short by an error is not.
    let round = store.round(actionstate_recovery::Round::named(key, seq, &event));
    let reused = match store.begin(&round, &ActionId::new("effect"), &event, &Trigger::Input).await? {
        Begin::Reuse(_) => true,
        Begin::Resume(mut handle) | Begin::Fresh(mut handle, _) => {
            let id = (key.to_owned(), seq);
            let digest = KeyId::of(key.as_bytes()).0;
            // Asked after a crash between the effect and its result: did it happen?
            let call = DurableCall::new("effect").args_digest(digest).reconcile(|_| async {
                if ledger.happened(&id) {
                    Ok(format!("effect {} {}", id.0, id.1).into_bytes())
                } else {
                    Ok(ledger.effect(&id))
                }
            });
            store.call(&mut handle, call, |_| async { Ok(ledger.effect(&id)) }).await?;
            store.complete(handle, Vec::new(), Vec::new()).await?;
            ledger.acked.lock().unwrap().insert(id);
            false
        }
    };
    round.finish();
    Ok(reused)
}

struct World {
    log: Arc<AnyLog>,
    keep: u32,
    two_phase: bool,
    next_id: u64,
    keys: Vec<String>,
    rounds: u64,
    owners: Vec<Owner>,
    zombies: Vec<Store>,
    ledger: Ledger,
}

impl World {
    /// An owner of `owned` restored from what the `former` owners of its groups leave.
    async fn restore(&self, owned: &Ownership, former: &[Owner]) -> Owner {
        let config = StoreConfig { retention: Retention::LastCheckpoints(self.keep), ..StoreConfig::default() };
        let log = Faulty::wrap(Arc::clone(&self.log));
        if self.two_phase {
            let r = range(owned);
            let mut serving = Vec::new();
            for (serves, snapshot, next) in former.iter().flat_map(|o| o.serving.iter()) {
                let from = serves.start.max(r.start)..serves.end.min(r.end);
                if from.start < from.end {
                    serving.push((from, snapshot.clone(), next.clone()));
                }
            }
            // Each snapshot gives the rounds completed of the groups it serves here only.
            let mut snapshots: Vec<Snapshot> = serving
                .iter()
                .map(|(from, s, _)| {
                    let completed: HashMap<KeyId, u64> = s
                        .completed
                        .iter()
                        .filter(|(k, _)| from.contains(&k.key_group(GROUPS)))
                        .map(|(k, v)| (*k, *v))
                        .collect();
                    Snapshot { checkpoint: s.checkpoint, marker: s.marker.clone(), completed: Arc::new(completed) }
                })
                .collect();
            // Groups no checkpoint holds yet start their input over: their replay starts at
            // the earliest record, which their waiting kept from being reclaimed.
            if r.clone().any(|g| !serving.iter().any(|(from, _, _)| from.contains(&g))) {
                let earliest = self.log.earliest_offsets().await.unwrap();
                let marker = Marker::new(self.log.identity().clone(), earliest);
                snapshots.push(Snapshot { checkpoint: 0, marker, completed: Arc::default() });
            }
            let (store, _) = ActionStateStore::restore(log, config, owned, snapshots)
                .await
                .unwrap_or_else(|e| panic!("rebuilding {owned}: {e}"));
            let store = Store::TwoPhase(store);
            let next = self
                .mine(owned)
                .into_iter()
                .map(|k| {
                    let group = KeyId::of(self.keys[k].as_bytes()).key_group(GROUPS);
                    let from = serving.iter().find(|(r, _, _)| r.contains(&group));
                    (k, from.and_then(|(_, _, next)| next.get(&k).copied()).unwrap_or(0))
                })
                .collect();
            return Owner { store, owned: owned.clone(), next, steps: 0, serving };
        }
        let (store, restored) = ActionStateStore::restore(log, config, owned, RestoreFrom::Latest)
            .await
            .unwrap_or_else(|e| panic!("restoring {owned}: {e}"));
        // A key resumes where the checkpoint that restored it left it: the first of them
        // (newest first) whose owner held it; a key of a group without one, from the start.
        let next = self
            .mine(owned)
            .into_iter()
            .map(|k| {
                let key = KeyId::of(self.keys[k].as_bytes());
                let from = restored.from.iter().find(|c| c.owner.owns(&key));
                (k, from.and_then(|c| decode(&c.metadata).get(&k).copied()).unwrap_or(0))
            })
            .collect();
        Owner { store: Store::InLog(store), owned: owned.clone(), next, steps: 0, serving: Vec::new() }
    }

    /// The indexes of the keys `owned` holds.
    fn mine(&self, owned: &Ownership) -> Vec<usize> {
        (0..self.keys.len()).filter(|k| owned.owns(&KeyId::of(self.keys[*k].as_bytes()))).collect()
    }

    fn done(&self) -> bool {
        self.owners.iter().all(|o| o.next.values().all(|n| *n >= self.rounds))
    }

    /// The next round of each key of owner `i` not done yet, and a checkpoint after every
    /// second step.
    async fn step(&mut self, i: usize) -> Result<(), StoreError> {
        let o = &mut self.owners[i];
        for (k, next) in o.next.iter_mut().filter(|(_, n)| **n < self.rounds) {
            o.store.round(&self.ledger, &self.keys[*k], *next).await?;
            *next += 1;
        }
        o.steps += 1;
        if o.steps.is_multiple_of(2) || o.next.values().all(|n| *n >= self.rounds) {
            match &o.store {
                Store::TwoPhase(store) => {
                    self.next_id += 1;
                    let snapshot = store.snapshot(self.next_id).await?;
                    store.checkpoint_complete(self.next_id);
                    // The runtime's checkpoint holds the snapshot and the input positions.
                    o.serving = vec![(range(&o.owned), snapshot, o.next.clone())];
                }
                Store::InLog(store) => {
                    store.checkpoint(&encode(&o.next)).await?;
                }
            }
        }
        Ok(())
    }

    /// Owner `i`'s process died: a successor of its groups restores, and it lives on.
    async fn crash(&mut self, i: usize) {
        let owned = self.owners[i].owned.clone();
        let successor = self.restore(&owned, std::slice::from_ref(&self.owners[i])).await;
        let old = std::mem::replace(&mut self.owners[i], successor);
        self.zombies.push(old.store);
    }

    async fn rescale(&mut self, owners: u64) {
        let old = std::mem::take(&mut self.owners);
        for owned in split(owners) {
            let o = self.restore(&owned, &old).await;
            self.owners.push(o);
        }
        self.zombies.extend(old.into_iter().map(|o| o.store));
    }
}

/// What one run found.
#[derive(Debug, Default)]
struct Found {
    crashes: u64,
    rescales: u64,
    duplicates: usize,
    missing: usize,
    lost: usize,
    reclaimed: u64,
}

async fn run_case(backend: Backend, seed: u64, two_phase: bool) -> Found {
    let mut rng = Rng::new(seed);
    let env = Env::new(backend).unwrap();
    let log = Arc::new(env.open().await.unwrap());
    let keep = rng.range(1, 3) as u32;
    let keys = (0..rng.range(6, 10)).map(|k| format!("owners-{seed}-{k}")).collect();
    let rounds = if backend == Backend::Memory { rng.range(6, 10) } else { rng.range(4, 6) };
    let mut world = World {
        log,
        keep,
        two_phase,
        next_id: 0,
        keys,
        rounds,
        owners: Vec::new(),
        zombies: Vec::new(),
        ledger: Ledger::default(),
    };
    let mut found = Found::default();
    world.rescale(rng.range(2, 4)).await;
    let mut steps = 0;
    while !world.done() {
        steps += 1;
        assert!(steps < 1_000, "seed {seed}: the run does not end");
        let i = rng.range(0, world.owners.len() as u64 - 1) as usize;
        match rng.range(0, 9) {
            0 => world.owners[i].store.log().faults().fail_appends_after(Some(rng.range(0, 4))),
            1 => world.owners[i].store.log().faults().lose_ack_of_nth_append(rng.range(1, 4)),
            2 if found.rescales < 2 => {
                found.rescales += 1;
                let before = world.zombies.len();
                world.rescale(rng.range(2, 4)).await;
                zombies_are_fenced(&world.zombies[before..], seed, two_phase).await;
                continue;
            }
            _ => {}
        }
        if world.step(i).await.is_err() {
            found.crashes += 1;
            world.crash(i).await;
            zombies_are_fenced(&world.zombies[world.zombies.len() - 1..], seed, two_phase).await;
        }
    }
    for o in world.owners.iter().map(|o| &o.store).chain(&world.zombies) {
        let status = o.wait_for_reclaim().await;
        found.reclaimed += status.records_reclaimed;
    }
    // Everything is dropped; a new split restores and replays the rounds after its checkpoints.
    world.rescale(rng.range(2, 4)).await;
    let acked = world.ledger.acked.lock().unwrap().clone();
    for o in &world.owners {
        for (k, next) in &o.next {
            let key = &world.keys[*k];
            for seq in *next..world.rounds {
                let reused = o.store.round(&world.ledger, key, seq).await.unwrap();
                if acked.contains(&(key.clone(), seq)) && !reused {
                    found.lost += 1;
                }
            }
        }
    }
    let effects = world.ledger.effects.lock().unwrap();
    found.duplicates = effects.values().filter(|n| **n > 1).count();
    found.missing = world.keys.len() * world.rounds as usize - effects.len();
    found
}

/// A replaced owner finds itself fenced before it would make an effect, and cannot checkpoint.
async fn zombies_are_fenced(zombies: &[Store], seed: u64, two_phase: bool) {
    for z in zombies {
        assert!(z.check_fenced().await.is_err(), "seed {seed}: a replaced owner is not fenced");
        match z {
            Store::TwoPhase(z) => {
                assert!(two_phase, "seed {seed}: a two-phase owner in the in-log campaign");
                assert!(z.snapshot(u64::MAX).await.is_err(), "seed {seed}: a replaced owner took a snapshot");
            }
            Store::InLog(z) => {
                assert!(!two_phase, "seed {seed}: an in-log owner in the two-phase campaign");
                assert!(z.checkpoint(b"zombie").await.is_err(), "seed {seed}: a replaced owner checkpointed");
            }
        }
    }
}

async fn campaign(backend: Backend, runs: u64, two_phase: bool) {
    let mut total = Found::default();
    for seed in 0..runs {
        let found = run_case(backend, 0x0aa5_0000 + seed, two_phase).await;
        assert_eq!((found.duplicates, found.missing, found.lost), (0, 0, 0), "seed {seed}: {found:?}");
        total.crashes += found.crashes;
        total.rescales += found.rescales;
        total.reclaimed += found.reclaimed;
    }
    let form = if two_phase { " (two-phase)" } else { "" };
    println!(
        "owners campaign{form} on {}: {runs} runs, {} crashes, {} rescales, 0 duplicates, 0 lost, {} records reclaimed",
        backend.name(),
        total.crashes,
        total.rescales,
        total.reclaimed
    );
    assert!(total.crashes > 0, "the campaign crashed nothing");
    assert!(total.reclaimed > 0, "retention reclaimed nothing");
}

fn runs(default: u64) -> u64 {
    std::env::var("ACTIONSTATE_OWNERS_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owners_campaign_on_memory() {
    campaign(Backend::Memory, runs(40), false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owners_campaign_on_file() {
    campaign(Backend::File, runs(12), false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owners_campaign_on_kafka() {
    if Backend::Kafka.available("owners_campaign::owners_campaign_on_kafka") {
        campaign(Backend::Kafka, 4, false).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_phase_owners_campaign_on_memory() {
    campaign(Backend::Memory, runs(40), true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_phase_owners_campaign_on_file() {
    campaign(Backend::File, runs(12), true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_phase_owners_campaign_on_kafka() {
    if Backend::Kafka.available("owners_campaign::two_phase_owners_campaign_on_kafka") {
        campaign(Backend::Kafka, 4, true).await;
    }
}
