//! The benchmark's records and what it measures through the store and the `StateLog` trait
//! alone, shared by `actionstate bench` (an operator's own log) and the benchmark crate (which
//! sets raw clients beside them). Both must build the same records and time the same calls,
//! or their figures stop being comparable.

use actionstate_core::{
    ActionId, ActionState, Attributes, Event, EventId, KeyId, LogRecord, MemoryOp, MemoryUpdate, Progress, RangeRead,
    StateKey, StateLog, TaggedBytes, Trigger, Value, codec,
};
use actionstate_recovery::{ActionStateStore, Begin, CheckpointForm, Round};
use anyhow::{Result, bail};
use std::sync::Arc;
use std::time::Instant;

/// The value at fraction `p` (0 to 1) of the `sorted` samples (0 when there are none).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(i).copied().unwrap_or(0.0)
}

/// The median of `values` (0 when there are none).
pub fn median(values: impl IntoIterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.into_iter().collect();
    v.sort_by(f64::total_cmp);
    percentile(&v, 0.5)
}

/// What a runtime holds when it runs benchmark action `n`: the action, its input event, and
/// the outputs and memory writes it completes with (one output event, one memory write).
struct Parts {
    action: ActionId,
    input: Event,
    outputs: Vec<Event>,
    memory: Vec<MemoryUpdate>,
}

fn parts(n: u64) -> Parts {
    let mut a = Attributes::new();
    a.insert("n".into(), Value::Int(n as i64));
    a.insert("text".into(), Value::String("a moderately long input text for the benchmark".into()));
    let input = Event { id: EventId(u128::from(n) + 1), event_type: "input".into(), attributes: a };
    let mut out = Attributes::new();
    out.insert("answer".into(), Value::Bytes(vec![7; 48]));
    let output = Event { id: EventId((u128::from(n) << 64) | 1), event_type: "answer".into(), attributes: out };
    let memory = vec![MemoryUpdate {
        path: "answers/last".into(),
        op: MemoryOp::Set(TaggedBytes { tag: "bytes".into(), bytes: vec![1; 32] }),
    }];
    Parts { action: ActionId::new("bench-action"), input, outputs: vec![output], memory }
}

/// The state the store records for benchmark action `n` of `key` in round `seq` (about 300
/// encoded bytes), and its input event. Raw clients that compare with the store send these
/// records.
pub fn state(key: KeyId, seq: u64, n: u64) -> (ActionState, Event) {
    let Parts { action, input, outputs, memory } = parts(n);
    let s = ActionState {
        label: None,
        trace: None,
        key: StateKey::new(key, seq, &action, &input, &Trigger::Input),
        action,
        trigger: Trigger::Input,
        trigger_event: input.id,
        input: input.fingerprint(),
        progress: Progress::Completed { outputs, memory },
    };
    (s, input)
}

/// One store put of benchmark action `n` of `key` in round `seq`, from what a runtime holds:
/// `begin` (a fresh action), then `complete`, which alone is timed. Returns the state put (the
/// record [`state`] builds) and the µs `complete` took. The round MUST not hold the action
/// yet.
pub async fn store_put<L: StateLog, F: CheckpointForm>(
    store: &ActionStateStore<L, F>,
    key: KeyId,
    seq: u64,
    n: u64,
) -> Result<(Arc<ActionState>, f64)> {
    let Parts { action, input, outputs, memory } = parts(n);
    let round = Round::new(key, seq, &input);
    let Begin::Fresh(handle, _) = store.begin(&round, &action, &input, &Trigger::Input).await? else {
        bail!("benchmark state {seq} of {key} unexpectedly recorded");
    };
    let t = Instant::now();
    let s = store.complete(handle, outputs, memory).await?;
    Ok((s, t.elapsed().as_secs_f64() * 1e6))
}

/// Writes `total` completed states through `log` from 256 concurrent tasks (so appends share
/// commits and batches), as written by the owner of writer `epoch`, and returns the bytes
/// written. On a log that holds fences, `epoch` MUST be the latest fence's, or a rebuild skips
/// the records as a fenced writer's; on one without, 0 (an unfenced writer).
pub async fn load<L: StateLog>(log: &Arc<L>, total: usize, epoch: u64) -> Result<u64> {
    let writers = 256usize;
    let per = total.div_ceil(writers);
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..writers {
        let log = Arc::clone(log);
        tasks.spawn(async move {
            let key = KeyId::of(format!("bench-key-{w}").as_bytes());
            let mut bytes = 0u64;
            for i in 0..per {
                let n = (w * per + i) as u64;
                if n as usize >= total {
                    break;
                }
                let wire = codec::encode_by(&LogRecord::Upsert(state(key, i as u64, n).0), epoch)?;
                bytes += (wire.key.len() + wire.value.len()) as u64;
                log.append(wire).await?;
            }
            anyhow::Ok(bytes)
        });
    }
    let mut bytes = 0;
    while let Some(r) = tasks.join_next().await {
        bytes += r??;
    }
    Ok(bytes)
}

/// Reads every partition to `end` through the backend's `StateLog::read`, partitions in
/// parallel, touching but not decoding the records; returns the records (not tombstones) per
/// second.
pub async fn log_read<L: StateLog>(log: &Arc<L>, end: &[u64]) -> Result<f64> {
    let t = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for (p, &e) in (0u32..).zip(end) {
        let log = Arc::clone(log);
        tasks.spawn(async move {
            let mut n = 0u64;
            let mut range = RangeRead::new(p, 0, e, 4096);
            while let Some(records) = range.next_batch(&*log).await? {
                n += records.iter().map(|r| u64::from(!r.value.is_empty())).sum::<u64>();
            }
            anyhow::Ok(n)
        });
    }
    let mut n = 0;
    while let Some(r) = tasks.join_next().await {
        n += r??;
    }
    Ok(n as f64 / t.elapsed().as_secs_f64())
}
