//! Property: over random histories of a service (rounds of a few keys, each one action making
//! up to three durable calls; checkpoints in the log; crashes after a call's effect and before
//! its result; restores from any retained checkpoint; changed inputs on replay; operator
//! repairs), a call's idempotency key is the same whenever it is the same logical call and
//! different otherwise, on memory and file:
//!
//! - keys are equal exactly when (key, round, input, position, incarnation) are;
//! - the call a crash interrupted gets the key it had, unless its history was invalidated (by a
//!   repair, a changed input, or a round found absent, which invalidates the later ones; the
//!   last two are appended before the key's next write, so a crash before it loses them);
//! - a call whose recorded state a repair or a divergence removed gets a key it never had;
//! - every restore, from any retained checkpoint, gives each pending state the incarnation the
//!   live store had for it.
#![allow(clippy::unwrap_used, reason = "tests")]

mod common;

use actionstate_core::{ActionId, Attributes, Event, IdempotencyKey, MissReason, Trigger, Value};
use actionstate_recovery::{ActionStateStore, AnyLog, Begin, CallOutput, DurableCall, RestoreFrom, Round, StoreConfig};
use common::{Backend, Env};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

const KEYS: usize = 3;
/// The checkpoints the store's default retention keeps.
const RETAINED: usize = actionstate_recovery::DEFAULT_RETAINED_CHECKPOINTS as usize;

#[derive(Clone, Debug)]
enum Step {
    /// The next round of key `k`: `calls` calls; with `crash_at`, the process dies after that
    /// call's effect, before its result is durable; `change` gives the round another input
    /// than it had (a divergence, when it ran before).
    Round {
        k: usize,
        calls: usize,
        crash_at: Option<usize>,
        change: bool,
    },
    Checkpoint,
    /// The process dies; the service restores the `back`-th newest retained checkpoint.
    Restore {
        back: usize,
    },
    /// An operator repairs key `k` from `back` rounds before its next one, and the service
    /// replays those rounds at once. (Not past the position of the checkpoint the store last
    /// wrote or restored: rounds before it may be pruned, and such rounds run again only after
    /// a restore from a checkpoint before them, docs/design.md section 5.2.)
    Repair {
        k: usize,
        back: u64,
    },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        5 => (0..KEYS, 1usize..4, prop::option::weighted(0.25, 0usize..3), prop::bool::weighted(0.15))
            .prop_map(|(k, calls, crash_at, change)| Step::Round { k, calls, crash_at, change }),
        2 => Just(Step::Checkpoint),
        1 => (0usize..3).prop_map(|back| Step::Restore { back }),
        1 => (0..KEYS, 0u64..3).prop_map(|(k, back)| Step::Repair { k, back }),
    ]
}

/// A logical call: key, round, input variant, place in the journal.
type Logical = (usize, u64, u8, usize);

fn name(k: usize) -> String {
    format!("idem-{k}")
}

fn input(k: usize, seq: u64, variant: u8) -> Event {
    let mut attributes = Attributes::new();
    attributes.insert("round".into(), Value::from(format!("{k}/{seq}")));
    attributes.insert("variant".into(), Value::Int(i64::from(variant)));
    Event::new("input", attributes)
}

struct World {
    env: Env,
    store: Option<ActionStateStore<AnyLog>>,
    next: Vec<u64>,
    /// Per key, the position of the checkpoint the store last wrote or restored.
    floor: Vec<u64>,
    /// The input variant each round had when it last ran.
    variant: BTreeMap<(usize, u64), u8>,
    /// The checkpoints a restore may take: id and the positions they saved, oldest first.
    /// Retention keeps the last three once three completed since the store was restored;
    /// a restore of an older one abandons the newer ones.
    checkpoints: Vec<(u64, Vec<u64>)>,
    /// Checkpoints completed since the store was restored.
    since_restore: usize,
    /// Every key handed out: the logical call and the incarnation it was made in.
    seen: BTreeMap<IdempotencyKey, (Logical, u32)>,
    /// The call a crash interrupted, with its key, and whether its history was invalidated since.
    interrupted: BTreeMap<Logical, (IdempotencyKey, bool)>,
    /// Calls whose recorded state was invalidated: the keys they may not get again.
    burnt: BTreeMap<Logical, BTreeSet<IdempotencyKey>>,
}

impl World {
    fn store(&self) -> &ActionStateStore<AnyLog> {
        self.store.as_ref().unwrap()
    }

    async fn restore(&mut self, from: RestoreFrom) {
        if let Some(store) = self.store.take() {
            // A reclaim in flight holds the log open.
            store.wait_for_reclaim().await;
        }
        let (store, restored) = ActionStateStore::restore(
            self.env.open().await,
            StoreConfig::default(),
            &actionstate_core::Ownership::All,
            from,
        )
        .await
        .unwrap();
        self.next = restored
            .metadata()
            .map_or(vec![0; KEYS], |m| m.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect());
        self.floor = self.next.clone();
        self.store = Some(store);
        self.since_restore = 0;
    }

    /// The incarnation of every pending state of the rounds known, as `explain` gives it.
    fn pending_incarnations(&self) -> BTreeMap<(usize, u64, u8), u32> {
        let mut out = BTreeMap::new();
        for (&(k, seq), &variant) in &self.variant {
            let event = input(k, seq, variant);
            let round = Round::named(&name(k), seq, &event);
            let e = self.store().explain(&round, &ActionId::new("act"), &event, &Trigger::Input);
            if e.decision.hit().is_some_and(|s| !s.is_completed()) {
                out.insert((k, seq, variant), e.incarnation);
            }
        }
        out
    }

    fn saw(&mut self, l: Logical, incarnation: u32, key: IdempotencyKey) -> Result<(), TestCaseError> {
        if let Some((other, inc)) = self.seen.get(&key) {
            prop_assert_eq!((other, inc), (&l, &incarnation), "one key for two calls");
        }
        if let Some((before, invalidated)) = self.interrupted.remove(&l)
            && !invalidated
        {
            prop_assert_eq!(&key, &before, "{:?}: the interrupted call got another key", l);
        }
        if let Some(burnt) = self.burnt.get(&l) {
            prop_assert!(!burnt.contains(&key), "{:?}: an invalidated history's key came back", l);
        }
        self.seen.insert(key, (l, incarnation));
        Ok(())
    }

    /// Marks the calls of `k`'s rounds from `from` on as invalidated: recorded ones may not get
    /// their keys again, interrupted ones need not.
    fn invalidated(&mut self, k: usize, from: u64, recorded: &BTreeSet<(u64, u8)>) {
        for (l, (_, invalidated)) in self.interrupted.iter_mut() {
            if l.0 == k && l.1 >= from {
                *invalidated = true;
            }
        }
        let keys: Vec<(IdempotencyKey, Logical)> = self.seen.iter().map(|(key, (l, _))| (key.clone(), *l)).collect();
        for (key, l) in keys {
            if l.0 == k && recorded.contains(&(l.1, l.2)) {
                self.burnt.entry(l).or_default().insert(key);
            }
        }
    }

    // Long: one round of the model read top to bottom: its input, its lookup, its calls and the
    // crash, each with the key bookkeeping it changes.
    async fn round(
        &mut self,
        k: usize,
        calls: usize,
        crash_at: Option<usize>,
        change: bool,
    ) -> Result<(), TestCaseError> {
        let seq = self.next[k];
        let before = self.variant.get(&(k, seq)).copied();
        let variant = match before {
            Some(v) if change => 1 - v,
            Some(v) => v,
            None => 0,
        };
        // The invalidations a lookup makes are queued and appended before the key's next write:
        // a crash before that write loses them, and the history they would remove stands.
        let mut queued: Vec<(u64, BTreeSet<(u64, u8)>)> = Vec::new();
        if before.is_some_and(|v| v != variant) {
            // A changed input removes the round and the later ones of this key (if recorded).
            let recorded: BTreeSet<(u64, u8)> =
                self.pending_or_completed(k).into_iter().filter(|(s, _)| *s >= seq).collect();
            queued.push((seq, recorded));
        }
        self.variant.insert((k, seq), variant);
        // A round found absent invalidates the key's later rounds (lookup rule 2): a replay
        // that reaches it again after a restore from another line of history.
        let later: BTreeSet<(u64, u8)> = self.pending_or_completed(k).into_iter().filter(|(s, _)| *s > seq).collect();
        let event = input(k, seq, variant);
        let store = self.store.take().unwrap();
        // Held from the lookup until the round is done: a round left by a crash is never
        // finished, and a restore replays it.
        let round = store.round(Round::named(&name(k), seq, &event));
        let begun = store.begin(&round, &ActionId::new("act"), &event, &Trigger::Input).await.unwrap();
        if matches!(begun, Begin::Fresh(_, MissReason::Absent)) && !later.is_empty() {
            queued.push((seq + 1, later));
        }
        let mut handle = match begun {
            Begin::Reuse(_) => {
                round.finish();
                self.store = Some(store);
                self.next[k] += 1;
                return Ok(());
            }
            Begin::Resume(h) | Begin::Fresh(h, _) => h,
        };
        let incarnation = handle.incarnation();
        let first = handle.cursor();
        for pos in first..calls {
            let function = format!("f{pos}");
            let digest = [u8::try_from(pos).unwrap(); 32];
            if crash_at == Some(pos) {
                if pos == first
                    && let Some(before) = before
                {
                    // Nothing of this round was written: its input change died with it.
                    self.variant.insert((k, seq), before);
                }
                // The effect happens under this key; the process dies before the result.
                let key = handle.next_call_key(&function, &digest);
                self.saw((k, seq, variant, pos), incarnation, key.clone())?;
                self.interrupted.insert((k, seq, variant, pos), (key, false));
                drop((handle, round));
                self.store = Some(store);
                self.restore(RestoreFrom::Latest).await;
                return Ok(());
            }
            let mut got = None;
            let call = store.call(&mut handle, DurableCall::new(&function).args_digest(digest), |key| {
                got = Some(key);
                std::future::ready::<CallOutput>(Ok(vec![1]))
            });
            call.await.unwrap();
            for (from, recorded) in queued.drain(..) {
                self.invalidated(k, from, &recorded);
            }
            if let Some(key) = got {
                self.saw((k, seq, variant, pos), incarnation, key)?;
            }
        }
        for (from, recorded) in queued.drain(..) {
            self.invalidated(k, from, &recorded);
        }
        store.complete(handle, Vec::new(), Vec::new()).await.unwrap();
        round.finish();
        self.store = Some(store);
        self.next[k] += 1;
        Ok(())
    }

    /// The rounds of `k` whose state the store holds (pending or completed), with their inputs.
    fn pending_or_completed(&self, k: usize) -> Vec<(u64, u8)> {
        self.variant
            .iter()
            .filter(|((key, _), _)| *key == k)
            .filter(|((_, seq), v)| {
                let event = input(k, *seq, **v);
                let round = Round::named(&name(k), *seq, &event);
                self.store().explain(&round, &ActionId::new("act"), &event, &Trigger::Input).decision.hit().is_some()
            })
            .map(|((_, seq), v)| (*seq, *v))
            .collect()
    }

    async fn apply(&mut self, step: &Step) -> Result<(), TestCaseError> {
        match step {
            Step::Round { k, calls, crash_at, change } => self.round(*k, *calls, *crash_at, *change).await?,
            Step::Checkpoint => {
                let metadata: Vec<u8> = self.next.iter().flat_map(|n| n.to_le_bytes()).collect();
                let written = self.store().checkpoint(&metadata).await.unwrap();
                self.checkpoints.push((written.id, self.next.clone()));
                self.since_restore += 1;
                if self.since_restore >= RETAINED {
                    let reclaimed = self.checkpoints.len().saturating_sub(RETAINED);
                    self.checkpoints.drain(..reclaimed);
                }
                self.floor = self.next.clone();
            }
            Step::Restore { back } => {
                let live = self.pending_incarnations();
                let retained = self.checkpoints.len();
                let from = match self.checkpoints.len().checked_sub(1 + back % retained.max(1)) {
                    Some(i) if retained > 0 => {
                        // The newer checkpoints are the abandoned line's from now on.
                        self.checkpoints.truncate(i + 1);
                        RestoreFrom::Checkpoint(self.checkpoints[i].0)
                    }
                    _ => RestoreFrom::Latest,
                };
                self.store().wait_for_reclaim().await;
                self.restore(from).await;
                for (round, incarnation) in self.pending_incarnations() {
                    if let Some(before) = live.get(&round) {
                        prop_assert_eq!(incarnation, *before, "{:?} after restoring {:?}", round, from);
                    }
                }
            }
            Step::Repair { k, back } => {
                let from = self.next[*k].saturating_sub(*back).max(self.floor[*k]);
                let recorded: BTreeSet<(u64, u8)> =
                    self.pending_or_completed(*k).into_iter().filter(|(s, _)| *s >= from).collect();
                self.store()
                    .invalidate(actionstate_core::KeyId::of(name(*k).as_bytes()), from, "repair")
                    .await
                    .unwrap();
                self.invalidated(*k, from, &recorded);
                // The service replays the repaired rounds.
                self.next[*k] = from;
            }
        }
        Ok(())
    }
}

async fn history(backend: Backend, steps: Vec<Step>) -> Result<(), TestCaseError> {
    let env = Env::new(backend);
    let mut world = World {
        env,
        store: None,
        next: vec![0; KEYS],
        floor: vec![0; KEYS],
        variant: BTreeMap::new(),
        checkpoints: Vec::new(),
        since_restore: 0,
        seen: BTreeMap::new(),
        interrupted: BTreeMap::new(),
        burnt: BTreeMap::new(),
    };
    world.restore(RestoreFrom::Latest).await;
    for step in &steps {
        world.apply(step).await.map_err(|e| TestCaseError::fail(format!("at {step:?}: {e}")))?;
    }
    if let Some(store) = world.store.take() {
        store.wait_for_reclaim().await;
    }
    Ok(())
}

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn run(backend: Backend, default_cases: u32) {
    let config = ProptestConfig { cases: cases(default_cases), ..ProptestConfig::default() };
    proptest!(config, |(steps in prop::collection::vec(step(), 1..60))| {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(history(backend, steps))?;
    });
}

#[test]
fn keys_follow_logical_calls_on_memory() {
    run(Backend::Memory, 300);
}

#[test]
fn keys_follow_logical_calls_on_file() {
    run(Backend::File, 60);
}
