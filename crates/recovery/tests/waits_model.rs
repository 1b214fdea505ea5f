//! Property: over random interleavings of durable waits (an action of a few keys waits for an
//! approval in every round), resolves and rejects (with the current token or a voided one),
//! deadlines (the clock moves, `expire_waits`, a wait re-entered after its deadline), in-log
//! checkpoints with retention on, crashes and restores, rescales between one owner and two,
//! resolve requests from another process (settled by the owner's polls and restores), and
//! operator repairs that invalidate a waiting action, every wait's outcome is delivered exactly
//! once to the action's resumed run:
//!
//! - the first outcome recorded for a wait is the only one: a later resolve writes nothing and
//!   returns it; the resumed action receives it, and a wait whose deadline passed ends as timed
//!   out the first time that is noticed; a request counts when the owner reads it, in log
//!   order, and one for a voided or ended wait changes nothing;
//! - a token is the same through re-entries and restores, and new once a repair voided the
//!   wait; a voided token, or one whose action completed, resolves nothing (`UnknownWait`);
//! - after every restore the store lists exactly the live waits, pending or resolved, so
//!   retention removed none of them (with states carried forward at checkpoints once they lag
//!   a few records behind, so that retention passes their old records);
//! - at the end every live wait is resolved and its action completes with the outcome: none is
//!   lost, none is delivered twice.
#![allow(clippy::unwrap_used, reason = "tests")]

use actionstate_core::{ActionId, Attributes, Event, KeyId, Trigger, Value, WaitOutcome, WaitToken};
use actionstate_memory::MemoryLog;
use actionstate_recovery::{
    ActionStateStore, Begin, Clock, Ownership, RestoreFrom, Round, StoreConfig, StoreError, Wait, WaitStatus, Waited,
};
use proptest::prelude::*;
use std::time::Duration;

const KEYS: usize = 2;
const TIMEOUT_MS: u64 = 10_000;

#[derive(Clone, Debug)]
enum Step {
    /// The runtime (re-)enters key `k`'s waiting action.
    Enter(usize),
    /// A resolve of key `k`'s current wait (or, `stale`, of one a repair voided or whose action
    /// completed) with reply `r`.
    Resolve {
        k: usize,
        stale: bool,
        r: u8,
    },
    /// A rejection of key `k`'s current wait.
    Reject(usize),
    /// The clock moves `s` seconds.
    Advance(u64),
    Expire,
    Checkpoint,
    Crash,
    /// An operator's repair of key `k`'s current round.
    Repair(usize),
    /// Another process asks to resolve key `k`'s current wait (or, `stale`, a voided or ended
    /// one) with reply `r`, through the log.
    Request {
        k: usize,
        stale: bool,
        r: u8,
    },
    /// The owners poll for resolve requests.
    Poll,
    /// The owners stop (after a checkpoint each, or crashing) and the other split of the key
    /// groups (one owner, or two) restores from the log.
    Rescale {
        checkpoint: bool,
    },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..KEYS).prop_map(Step::Enter),
        3 => (0..KEYS, prop::bool::weighted(0.2), any::<u8>()).prop_map(|(k, stale, r)| Step::Resolve { k, stale, r }),
        1 => (0..KEYS).prop_map(Step::Reject),
        2 => (1..8u64).prop_map(Step::Advance),
        1 => Just(Step::Expire),
        2 => Just(Step::Checkpoint),
        2 => Just(Step::Crash),
        1 => (0..KEYS).prop_map(Step::Repair),
        2 => (0..KEYS, prop::bool::weighted(0.2), any::<u8>()).prop_map(|(k, stale, r)| Step::Request { k, stale, r }),
        2 => Just(Step::Poll),
        1 => any::<bool>().prop_map(|checkpoint| Step::Rescale { checkpoint }),
    ]
}

/// What the model knows of one key.
#[derive(Debug, Default)]
struct Key {
    seq: u64,
    /// The current round's wait, once its action suspended: token, deadline, first outcome.
    wait: Option<(WaitToken, u64, Option<WaitOutcome>)>,
    /// Tokens voided by a repair or whose action completed.
    dead: Vec<WaitToken>,
    delivered: u64,
}

struct World {
    log: MemoryLog,
    clock: Clock,
    /// The owners of the current split, each with its key groups.
    stores: Vec<(Ownership, ActionStateStore<MemoryLog>)>,
    /// How many owners the next restore splits the key groups among (1 or 2).
    owners: u16,
    /// Another process's store, which only appends resolve requests.
    outsider: ActionStateStore<MemoryLog>,
    /// The resolve requests appended, not yet read by an owner, in log order.
    requested: Vec<(WaitToken, WaitOutcome)>,
    keys: Vec<Key>,
}

/// `n` owners' shares of 128 key groups.
fn split(n: u16) -> Vec<Ownership> {
    if n == 1 {
        return vec![Ownership::All];
    }
    (0..n).map(|i| Ownership::Groups { max_groups: 128, owned: i * 128 / n..(i + 1) * 128 / n }).collect()
}

fn key_id(k: usize) -> KeyId {
    KeyId::of(format!("payer-{k}").as_bytes())
}

fn input(k: usize, seq: u64) -> Event {
    let mut attributes = Attributes::new();
    attributes.insert("amount".into(), Value::Int(i64::try_from(k as u64 * 1000 + seq).unwrap()));
    Event::new("invoice", attributes)
}

type Check = Result<(), String>;

fn ensure(ok: bool, what: impl FnOnce() -> String) -> Check {
    if ok { Ok(()) } else { Err(what()) }
}

impl World {
    /// The owner of key `k`.
    fn store_of(&self, k: usize) -> &ActionStateStore<MemoryLog> {
        let key = key_id(k);
        &self.stores.iter().find(|(owned, _)| owned.owns(&key)).unwrap().1
    }

    /// The owners stop, and the current split restores from the log: each owner settles the
    /// requests its rebuild read, as the model does.
    async fn restore(&mut self) -> Check {
        self.stores.clear();
        for owned in split(self.owners) {
            // States that live past a few records are carried forward at checkpoints.
            let config = StoreConfig { clock: self.clock.clone(), carry_forward_after: 6, ..StoreConfig::default() };
            let (store, _) = ActionStateStore::restore(self.log.reopen(), config, &owned, RestoreFrom::Latest)
                .await
                .map_err(|e| format!("restore of {owned}: {e}"))?;
            self.stores.push((owned, store));
        }
        self.read_requests();
        // Exactly the live waits are listed, as pending or resolved.
        let mut listed: Vec<(KeyId, u64, bool)> = self
            .stores
            .iter()
            .flat_map(|(_, s)| s.waits())
            .map(|w| (w.key, w.seq, w.status == WaitStatus::Pending))
            .collect();
        listed.sort();
        let mut live: Vec<(KeyId, u64, bool)> = (0..KEYS)
            .filter_map(|k| {
                self.keys[k].wait.as_ref().map(|(_, _, first)| (key_id(k), self.keys[k].seq, first.is_none()))
            })
            .collect();
        live.sort();
        ensure(listed == live, || format!("after a restore the store lists {listed:?}, the live waits are {live:?}"))
    }

    /// The outcome `k`'s current wait must have, recorded now by `outcome` unless it has one.
    fn record(&mut self, k: usize, outcome: &WaitOutcome) {
        if let Some((_, _, first)) = &mut self.keys[k].wait
            && first.is_none()
        {
            *first = Some(outcome.clone());
        }
    }

    /// The owners read the requests appended so far: in log order, each that names a current
    /// wait without an outcome gives it its outcome; the others change nothing. Returns how
    /// many outcomes they gave.
    fn read_requests(&mut self) -> usize {
        let mut given = 0;
        for (token, outcome) in std::mem::take(&mut self.requested) {
            if let Some(k) =
                (0..KEYS).find(|&k| self.keys[k].wait.as_ref().is_some_and(|(t, _, f)| *t == token && f.is_none()))
            {
                self.record(k, &outcome);
                given += 1;
            }
        }
        given
    }

    async fn enter(&mut self, k: usize) -> Check {
        let (kid, seq) = (key_id(k), self.keys[k].seq);
        let event = input(k, seq);
        let store = self.store_of(k);
        let round = store.round(Round::new(kid, seq, &event));
        let begun =
            store.begin(&round, &ActionId::new("pay"), &event, &Trigger::Input).await.map_err(|e| e.to_string())?;
        let mut handle = match begun {
            Begin::Fresh(h, _) | Begin::Resume(h) => h,
            Begin::Reuse(_) => return Err(format!("round {seq} of key {k} is reused before its wait was delivered")),
        };
        let wait = Wait::new("approval").args(&(k, seq)).unwrap().timeout(Duration::from_millis(TIMEOUT_MS));
        let now = self.clock.now_ms();
        match store.wait(&mut handle, wait).await.map_err(|e| e.to_string())? {
            Waited::Suspended(token) => {
                round.suspend();
                match &self.keys[k].wait {
                    Some((known, deadline, first)) => {
                        ensure(token == *known, || format!("key {k}: the token changed on re-entry"))?;
                        ensure(first.is_none(), || format!("key {k}: suspended again though {first:?} was recorded"))?;
                        ensure(now < *deadline, || format!("key {k}: re-entered past its deadline and suspended"))?;
                    }
                    None => {
                        ensure(!self.keys[k].dead.contains(&token), || format!("key {k}: a dead token came back"))?;
                        self.keys[k].wait = Some((token, now + TIMEOUT_MS, None));
                    }
                }
                Ok(())
            }
            Waited::Done(outcome) => {
                let Some((token, deadline, first)) = self.keys[k].wait.clone() else {
                    return Err(format!("key {k}: a fresh wait returned {outcome:?}"));
                };
                match first {
                    Some(first) => {
                        ensure(outcome == first, || format!("key {k}: delivered {outcome:?}, recorded {first:?}"))?
                    }
                    // Only a deadline passed ends a wait the model has no outcome for.
                    None => ensure(outcome == WaitOutcome::TimedOut && now >= deadline, || {
                        format!("key {k}: delivered {outcome:?} that nobody recorded")
                    })?,
                }
                store.complete(handle, vec![], vec![]).await.map_err(|e| e.to_string())?;
                round.finish();
                let key = &mut self.keys[k];
                key.dead.push(token);
                key.wait = None;
                key.delivered += 1;
                key.seq += 1;
                Ok(())
            }
        }
    }

    async fn resolve(&mut self, k: usize, stale: bool, outcome: WaitOutcome) -> Check {
        let token = if stale {
            match self.keys[k].dead.last() {
                Some(t) => *t,
                None => return Ok(()),
            }
        } else {
            match &self.keys[k].wait {
                Some((t, _, _)) => *t,
                None => return Ok(()),
            }
        };
        let store = self.store_of(k);
        let end = self.log.appends();
        let done = match &outcome {
            WaitOutcome::Reply(r) => store.resolve(&token, r).await,
            WaitOutcome::Rejected(r) => store.reject(&token, r).await,
            WaitOutcome::TimedOut => unreachable!("a resolve records a reply or a rejection"),
        };
        if stale {
            ensure(matches!(done, Err(StoreError::UnknownWait { .. })), || {
                format!("key {k}: a dead token gave {done:?}")
            })?;
            return ensure(self.log.appends() == end, || format!("key {k}: a dead token's resolve wrote"));
        }
        let done = done.map_err(|e| e.to_string())?;
        let first = self.keys[k].wait.as_ref().and_then(|(_, _, f)| f.clone());
        match first {
            None => {
                ensure(done.recorded && done.outcome == outcome, || format!("key {k}: first resolve gave {done:?}"))?
            }
            Some(first) => {
                ensure(!done.recorded && done.outcome == first, || format!("key {k}: later resolve gave {done:?}"))?;
                ensure(self.log.appends() == end, || format!("key {k}: a later resolve wrote"))?;
            }
        }
        self.record(k, &outcome);
        Ok(())
    }

    async fn apply(&mut self, step: &Step) -> Check {
        match *step {
            Step::Enter(k) => self.enter(k).await,
            Step::Resolve { k, stale, r } => self.resolve(k, stale, WaitOutcome::Reply(vec![r])).await,
            Step::Reject(k) => self.resolve(k, false, WaitOutcome::Rejected(b"no".to_vec())).await,
            Step::Advance(s) => {
                self.clock.advance(s * 1000);
                Ok(())
            }
            Step::Expire => {
                let now = self.clock.now_ms();
                let due: Vec<usize> = (0..KEYS)
                    .filter(|&k| self.keys[k].wait.as_ref().is_some_and(|(_, d, f)| f.is_none() && now >= *d))
                    .collect();
                let mut ended = 0;
                for (_, store) in &self.stores {
                    ended += store.expire_waits().await.map_err(|e| e.to_string())?;
                }
                ensure(ended == due.len(), || format!("expire_waits ended {ended}, due {due:?}"))?;
                for k in due {
                    self.record(k, &WaitOutcome::TimedOut);
                }
                Ok(())
            }
            Step::Checkpoint => self.checkpoint().await,
            Step::Crash => self.restore().await,
            Step::Request { k, stale, r } => {
                let token =
                    if stale { self.keys[k].dead.last() } else { self.keys[k].wait.as_ref().map(|(t, _, _)| t) };
                let Some(token) = token.copied() else { return Ok(()) };
                let outcome = WaitOutcome::Reply(vec![r]);
                self.outsider.request_resolve(&token, outcome.clone()).await.map_err(|e| e.to_string())?;
                self.requested.push((token, outcome));
                Ok(())
            }
            Step::Poll => {
                let mut settled = 0;
                for (_, store) in &self.stores {
                    settled += store.poll_resolutions().await.map_err(|e| format!("poll: {e}"))?;
                }
                let given = self.read_requests();
                ensure(settled == given, || format!("the polls settled {settled} waits, the requests gave {given}"))
            }
            Step::Rescale { checkpoint } => {
                if checkpoint {
                    self.checkpoint().await?;
                }
                self.owners = 3 - self.owners;
                self.restore().await
            }
            Step::Repair(k) => {
                let Some((token, _, _)) = self.keys[k].wait.clone() else { return Ok(()) };
                let seq = self.keys[k].seq;
                self.store_of(k).invalidate(key_id(k), seq, "repair").await.map_err(|e| e.to_string())?;
                let key = &mut self.keys[k];
                key.dead.push(token);
                key.wait = None;
                Ok(())
            }
        }
    }

    /// Every owner checkpoints: one that has a pending wait reads the resolve requests first,
    /// and carries its lagging states forward.
    async fn checkpoint(&mut self) -> Check {
        for (_, store) in &self.stores {
            store.checkpoint(&[]).await.map_err(|e| e.to_string())?;
        }
        self.read_requests();
        Ok(())
    }

    /// Every live wait is resolved, and its action delivered: nothing is lost.
    async fn drain(&mut self) -> Check {
        for k in 0..KEYS {
            if self.keys[k].wait.is_none() {
                continue;
            }
            self.resolve(k, false, WaitOutcome::Reply(b"last".to_vec())).await?;
            let before = self.keys[k].delivered;
            self.enter(k).await?;
            ensure(self.keys[k].delivered == before + 1, || format!("key {k}: a resolved wait was not delivered"))?;
            self.resolve(k, true, WaitOutcome::Reply(b"again".to_vec())).await?;
        }
        Ok(())
    }
}

async fn history(steps: Vec<Step>) -> Result<(), TestCaseError> {
    let log = MemoryLog::new(2);
    let mut world = World {
        outsider: ActionStateStore::new(log.reopen(), StoreConfig::default()),
        log,
        clock: Clock::manual(1_800_000_000_000),
        stores: Vec::new(),
        owners: 1,
        requested: Vec::new(),
        keys: (0..KEYS).map(|_| Key::default()).collect(),
    };
    let fail = |step: &dyn std::fmt::Debug, e: String| TestCaseError::fail(format!("at {step:?}: {e}"));
    world.restore().await.map_err(|e| fail(&"the start", e))?;
    for step in &steps {
        world.apply(step).await.map_err(|e| fail(step, e))?;
    }
    world.restore().await.map_err(|e| fail(&"the last restore", e))?;
    world.drain().await.map_err(|e| fail(&"the drain", e))?;
    for (_, store) in std::mem::take(&mut world.stores) {
        store.wait_for_reclaim().await;
    }
    Ok(())
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(1000)
}

#[test]
fn every_wait_outcome_is_delivered_exactly_once() {
    let config = ProptestConfig { cases: cases(), ..ProptestConfig::default() };
    proptest!(config, |(steps in prop::collection::vec(step(), 1..50))| {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(history(steps))?;
    });
}
