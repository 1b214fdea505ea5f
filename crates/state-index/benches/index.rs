//! Replay-index benchmarks, side by side with the naive design Flink Agents replaced (one map
//! keyed by state key, scanned to answer a lookup).
//!
//! `cargo xtask bench index` runs the criterion groups and then prints one summary line:
//! `index-bench lookup_growth=.. naive_speedup=.. bytes_per_state=..`.
#![allow(clippy::unwrap_used, missing_docs, reason = "benchmark harness")]
#![allow(unsafe_code, reason = "a counting global allocator must implement GlobalAlloc")]

use actionstate_core::{
    ActionId, ActionState, Attributes, Event, EventId, Fingerprint, KeyId, LogRecord, Position, Progress, StateKey,
    Trigger, Value,
};
use actionstate_index::{Decision, Index, Probe};
use criterion::{BatchSize, BenchmarkId, Criterion};
use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::HashMap;
use std::hint::black_box;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Instant;

/// Counts live heap bytes, so the index's own memory can be measured.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged; only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same layout contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: `ptr` was allocated by `System` with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as isize - layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const TOTAL: u64 = 1_000_000;

struct Fixture {
    keys: Vec<KeyId>,
    action: ActionId,
    rounds: u64,
}

impl Fixture {
    fn new(rounds: u64, total: u64) -> Self {
        let keys = (0..(total / rounds)).map(|k| KeyId::of(&k.to_le_bytes())).collect();
        Fixture { keys, action: ActionId::new("act"), rounds }
    }

    fn input(seq: u64) -> Event {
        let mut a = Attributes::new();
        a.insert("n".into(), Value::Int(seq as i64));
        Event { id: EventId(u128::from(seq) + 1), event_type: "input".into(), attributes: a }
    }

    fn key_of(&self, k: usize, seq: u64) -> (StateKey, Event) {
        let ev = Self::input(seq);
        (StateKey::new(self.keys[k], seq, &self.action, &ev, &Trigger::Input), ev)
    }

    fn state(&self, k: usize, seq: u64) -> ActionState {
        let (sk, ev) = self.key_of(k, seq);
        let out = Event {
            id: EventId((u128::from(seq) << 32) | k as u128),
            event_type: "out".into(),
            attributes: Attributes::new(),
        };
        ActionState {
            label: None,
            trace: None,
            key: sk,
            action: self.action.clone(),
            trigger: Trigger::Input,
            trigger_event: ev.id,
            input: ev.fingerprint(),
            progress: Progress::Completed { outputs: vec![out], memory: vec![] },
        }
    }

    fn build(&self) -> Index {
        let mut ix = Index::new();
        let mut offset = 0;
        for seq in 0..self.rounds {
            for k in 0..self.keys.len() {
                ix.apply(LogRecord::Upsert(self.state(k, seq)), Position { partition: 0, offset, exact: true }, 200);
                offset += 1;
            }
        }
        ix
    }

    /// Hit probes spread over keys and rounds (deterministic pseudo-random).
    fn probes(&self, n: usize) -> Vec<(StateKey, Fingerprint)> {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let k = (x % self.keys.len() as u64) as usize;
                let seq = (x >> 20) % self.rounds;
                let (sk, ev) = self.key_of(k, seq);
                (sk, ev.fingerprint())
            })
            .collect()
    }
}

fn lookup_once(ix: &mut Index, sk: StateKey, input: Fingerprint) -> bool {
    // A restored input: same fingerprint, new event id.
    let probe = Probe { key: sk, trigger: &Trigger::Input, event: EventId(u128::MAX), input };
    matches!(ix.lookup(&probe).decision, Decision::Hit(_))
}

/// The naive design: one map keyed by state key; a lookup scans it to count the states of
/// the round and to find later rounds of the key (the pre-#1306 divergence check).
struct Naive {
    states: HashMap<StateKey, ActionState>,
}

impl Naive {
    fn build(f: &Fixture) -> Self {
        let mut states = HashMap::new();
        for seq in 0..f.rounds {
            for k in 0..f.keys.len() {
                let s = f.state(k, seq);
                states.insert(s.key, s);
            }
        }
        Naive { states }
    }

    fn lookup(&mut self, sk: &StateKey) -> bool {
        let in_round = self.states.keys().filter(|k| k.key == sk.key && k.seq == sk.seq).count();
        let hit = self.states.contains_key(sk);
        if !hit || in_round > 1 {
            self.states.retain(|k, _| !(k.key == sk.key && k.seq > sk.seq));
        }
        hit
    }
}

fn median_ns(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

/// Median ns per lookup over `batches` batches of `per_batch` probes.
fn time_lookups(ix: &mut Index, probes: &[(StateKey, Fingerprint)], batches: usize) -> f64 {
    let per_batch = probes.len() / batches;
    let mut samples = Vec::new();
    for b in 0..batches {
        let chunk = &probes[b * per_batch..(b + 1) * per_batch];
        let t = Instant::now();
        for (sk, fp) in chunk {
            assert!(black_box(lookup_once(ix, *sk, *fp)));
        }
        samples.push(t.elapsed().as_nanos() as f64 / chunk.len() as f64);
    }
    median_ns(samples)
}

fn bench_lookup_and_index(c: &mut Criterion) {
    let mut group = c.benchmark_group("index-1M-states");
    for rounds in [10u64, 1_000, 100_000] {
        let f = Fixture::new(rounds, TOTAL);
        let mut ix = f.build();
        let probes = f.probes(4096);
        let mut i = 0;
        group.bench_function(BenchmarkId::new("lookup-hit", format!("R={rounds}")), |b| {
            b.iter(|| {
                let (sk, fp) = probes[i % probes.len()];
                i += 1;
                black_box(lookup_once(&mut ix, sk, fp))
            })
        });
        // Indexing: append a round past the end of one key's history, then remove it again.
        let mut j = 0usize;
        group.bench_function(BenchmarkId::new("apply-upsert+delete", format!("R={rounds}")), |b| {
            b.iter(|| {
                let k = j % f.keys.len();
                j += 1;
                let s = f.state(k, rounds);
                let sk = s.key;
                let pos = Position { partition: 0, offset: TOTAL + j as u64, exact: true };
                ix.apply(LogRecord::Upsert(s), pos, 200);
                ix.apply(
                    LogRecord::Delete { key: sk, reason: actionstate_core::InvalidationReason::ProducerReplaced },
                    pos,
                    0,
                )
            })
        });
    }
    group.finish();
}

fn bench_naive(c: &mut Criterion) {
    let mut group = c.benchmark_group("lookup-100k-states");
    group.sample_size(20);
    let f = Fixture::new(1_000, 100_000);
    let mut ix = f.build();
    let mut naive = Naive::build(&f);
    let probes = f.probes(1024);
    let mut i = 0;
    group.bench_function("ours", |b| {
        b.iter(|| {
            let (sk, fp) = probes[i % probes.len()];
            i += 1;
            black_box(lookup_once(&mut ix, sk, fp))
        })
    });
    let mut i = 0;
    group.bench_function("naive-scan", |b| {
        b.iter(|| {
            let (sk, _) = probes[i % probes.len()];
            i += 1;
            black_box(naive.lookup(&sk))
        })
    });
    group.finish();
}

fn bench_invalidation(c: &mut Criterion) {
    let mut group = c.benchmark_group("invalidate-later-rounds");
    group.sample_size(20);
    let f = Fixture::new(2_000, 20_000);
    let ix = f.build();
    let naive = Naive::build(&f);
    for removed in [1u64, 10, 100, 1_000] {
        // A miss at seq = rounds - removed - 1 removes exactly `removed` later rounds of key 0.
        let seq = f.rounds - removed - 1;
        let other = ActionId::new("other");
        let ev = Fixture::input(seq);
        let sk = StateKey::new(f.keys[0], seq, &other, &ev, &Trigger::Input);
        group.bench_function(BenchmarkId::new("ours", removed), |b| {
            b.iter_batched(
                || ix.clone(),
                |mut ix| {
                    let probe = Probe { key: sk, trigger: &Trigger::Input, event: ev.id, input: ev.fingerprint() };
                    let l = ix.lookup(&probe);
                    assert_eq!(l.invalidation.removed.len() as u64, removed);
                    ix
                },
                BatchSize::LargeInput,
            )
        });
        group.bench_function(BenchmarkId::new("naive-scan", removed), |b| {
            b.iter_batched(
                || Naive { states: naive.states.clone() },
                |mut n| {
                    black_box(n.lookup(&sk));
                    n
                },
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

/// Index bytes per state, excluding the records themselves, with the counting allocator.
fn bytes_per_state(rounds: u64) -> f64 {
    let f = Fixture::new(rounds, TOTAL);
    let before = LIVE.load(Ordering::Relaxed);
    let payload: Vec<std::sync::Arc<ActionState>> = (0..f.rounds)
        .flat_map(|seq| (0..f.keys.len()).map(move |k| (k, seq)))
        .map(|(k, seq)| std::sync::Arc::new(f.state(k, seq)))
        .collect();
    let payload_bytes = LIVE.load(Ordering::Relaxed) - before - (payload.capacity() * 8) as isize;
    drop(payload);
    let before = LIVE.load(Ordering::Relaxed);
    let ix = f.build();
    let total = LIVE.load(Ordering::Relaxed) - before;
    let per_state = (total - payload_bytes) as f64 / ix.stats().states as f64;
    drop(ix);
    per_state
}

fn summary() {
    let lookup_at = |rounds: u64| {
        let f = Fixture::new(rounds, TOTAL);
        let mut ix = f.build();
        let probes = f.probes(200_000);
        time_lookups(&mut ix, &probes, 20)
    };
    let r10 = lookup_at(10);
    let r100k = lookup_at(100_000);

    let f = Fixture::new(1_000, 100_000);
    let mut ix = f.build();
    let probes = f.probes(20_000);
    let ours = time_lookups(&mut ix, &probes, 20);
    let mut naive = Naive::build(&f);
    let mut samples = Vec::new();
    for (sk, _) in probes.iter().take(60) {
        let t = Instant::now();
        assert!(black_box(naive.lookup(sk)));
        samples.push(t.elapsed().as_nanos() as f64);
    }
    let naive_ns = median_ns(samples);
    let bps: Vec<f64> = [10, 1_000, 100_000].into_iter().map(bytes_per_state).collect();
    println!(
        "index-bench detail lookup_ns_r10={r10:.1} lookup_ns_r100000={r100k:.1} lookup_ns_100k_states={ours:.1} naive_ns_100k_states={naive_ns:.0} bytes_per_state_r10={:.0} bytes_per_state_r1000={:.0} bytes_per_state_r100000={:.0}",
        bps[0], bps[1], bps[2]
    );
    println!(
        "index-bench lookup_growth={:.2} naive_speedup={:.0} bytes_per_state={:.0}",
        r100k / r10,
        naive_ns / ours,
        // The worst of the three shapes.
        bps.iter().copied().fold(0.0, f64::max)
    );
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench_lookup_and_index(&mut c);
    bench_naive(&mut c);
    bench_invalidation(&mut c);
    c.final_summary();
    summary();
}
