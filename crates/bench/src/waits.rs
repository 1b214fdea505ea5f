//! `actionstate-bench --waits`: what a durable wait costs against a plain durable call, and a
//! store that holds many pending waits.
//!
//! - **Ratios.** For each of `--puts` actions (at most 500), one after the other, on fresh keys:
//!   a plain action (`begin`, one durable call that runs, `complete`) and a waiting one
//!   (`begin`, `wait` until it suspends, `resolve`, `begin` again, `wait` returning the reply,
//!   `complete`), alternating so that both sides meet the same moments of the machine. The
//!   medians per action, and the waiting action's over the plain one's.
//! - **Pending waits** (file only): `--pending-waits` keys (100,000 by default) each suspend on
//!   a wait, 256 at a time; the process's resident memory before and after gives the bytes per
//!   pending wait (the action's state in the index and the wait in the store's map), then the
//!   store is dropped and restored from the log, which must list them all again.

use crate::args::BenchArgs;
use actionstate_cli::claim;
use actionstate_cli::measure::median;
use actionstate_core::{ActionId, Attributes, Event, StateLog, Trigger, Value, WaitOutcome};
use actionstate_file::{FileConfig, FileLog};
use actionstate_recovery::{
    ActionHandle, ActionStateStore, Begin, CheckpointForm, DurableCall, InLog, LogConfig, Ownership, RestoreFrom,
    Round, StoreConfig, Wait, Waited,
};
use actionstate_sim::soak::resident_bytes;
use anyhow::{Result, bail};
use serde::Serialize;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

/// Keys suspended at once while the pending waits are made.
const IN_FLIGHT: u64 = 256;

#[derive(Serialize, Debug, Default)]
struct Report {
    backend: &'static str,
    actions: usize,
    plain_call_ms: f64,
    wait_suspend_ms: f64,
    resolve_ms: f64,
    resume_ms: f64,
    wait_resolve_resume_ms: f64,
    /// `wait_resolve_resume_ms` over `plain_call_ms`.
    ratio: f64,
    pending_waits: u64,
    bytes_per_pending_wait: f64,
    restore_ms: f64,
    restored_waits: usize,
}

fn input(key: &str) -> Event {
    let mut attributes = Attributes::new();
    attributes.insert("key".into(), Value::from(key));
    Event::new("input", attributes)
}

/// Begins the action `pay` of round 0 of `key`: a fresh or a resumed handle.
async fn begin<L: StateLog, F: CheckpointForm>(store: &ActionStateStore<L, F>, key: &str) -> Result<ActionHandle> {
    let event = input(key);
    let round = store.round(Round::named(key, 0, &event));
    let begun = store.begin(&round, &ActionId::new("pay"), &event, &Trigger::Input).await?;
    round.suspend();
    match begun {
        Begin::Fresh(h, _) | Begin::Resume(h) => Ok(h),
        Begin::Reuse(_) => bail!("benchmark action of {key} unexpectedly completed"),
    }
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// One plain action: a durable call that runs, then the completion. Returns its milliseconds.
async fn plain<L: StateLog, F: CheckpointForm>(store: &ActionStateStore<L, F>, key: &str) -> Result<f64> {
    let t = Instant::now();
    let mut h = begin(store, key).await?;
    store.call(&mut h, DurableCall::new("approve").args(key)?, |_| async { Ok(b"yes".to_vec()) }).await?;
    store.complete(h, vec![], vec![]).await?;
    Ok(ms(t))
}

/// One waiting action: suspend, resolve, resume and complete. Returns the milliseconds of each.
async fn waiting<L: StateLog, F: CheckpointForm>(store: &ActionStateStore<L, F>, key: &str) -> Result<[f64; 3]> {
    let wait = Wait::new("approve").args(key)?;
    let t = Instant::now();
    let mut h = begin(store, key).await?;
    let Waited::Suspended(token) = store.wait(&mut h, wait.clone()).await? else { bail!("a fresh wait ended") };
    let suspend = ms(t);
    let t = Instant::now();
    store.resolve(&token, b"yes").await?;
    let resolve = ms(t);
    let t = Instant::now();
    let mut h = begin(store, key).await?;
    let Waited::Done(WaitOutcome::Reply(_)) = store.wait(&mut h, wait).await? else {
        bail!("a resolved wait did not return its reply")
    };
    store.complete(h, vec![], vec![]).await?;
    Ok([suspend, resolve, ms(t)])
}

async fn ratios<L: StateLog>(log: L, actions: usize, report: &mut Report) -> Result<()> {
    let (store, _) =
        ActionStateStore::restore(log, StoreConfig::default(), &Ownership::All, RestoreFrom::Latest).await?;
    // A few of each first: connections, caches, the first pages.
    for n in 0..20 {
        plain(&store, &format!("warm-plain-{n}")).await?;
        waiting(&store, &format!("warm-wait-{n}")).await?;
    }
    let (mut p, mut s, mut r, mut u, mut w) = (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for n in 0..actions {
        p.push(plain(&store, &format!("plain-{n}")).await?);
        let [suspend, resolve, resume] = waiting(&store, &format!("wait-{n}")).await?;
        s.push(suspend);
        r.push(resolve);
        u.push(resume);
        w.push(suspend + resolve + resume);
    }
    report.actions = actions;
    report.plain_call_ms = median(p);
    report.wait_suspend_ms = median(s);
    report.resolve_ms = median(r);
    report.resume_ms = median(u);
    report.wait_resolve_resume_ms = median(w);
    report.ratio = report.wait_resolve_resume_ms / report.plain_call_ms.max(1e-9);
    Ok(())
}

/// `count` keys suspended on a wait in `dir`, the bytes each takes, and the restore that finds
/// them.
async fn pending(dir: &std::path::Path, count: u64, report: &mut Report) -> Result<()> {
    let open = || FileLog::open(FileConfig::new(dir.to_path_buf(), 8));
    let before = resident_bytes();
    let (store, _) =
        ActionStateStore::restore(open()?, StoreConfig::default(), &Ownership::All, RestoreFrom::Latest).await?;
    let store: Arc<ActionStateStore<FileLog, InLog>> = Arc::new(store);
    let mut made = 0;
    while made < count {
        let batch = IN_FLIGHT.min(count - made);
        let mut tasks = tokio::task::JoinSet::new();
        for k in made..made + batch {
            let store = Arc::clone(&store);
            tasks.spawn(async move {
                let key = format!("pending-{k}");
                let mut h = begin(&*store, &key).await?;
                match store.wait(&mut h, Wait::new("approve").args(&key)?).await? {
                    Waited::Suspended(_) => anyhow::Ok(()),
                    Waited::Done(o) => bail!("a fresh wait of {key} ended: {}", o.name()),
                }
            });
        }
        while let Some(done) = tasks.join_next().await {
            done??;
        }
        made += batch;
    }
    let held = resident_bytes();
    let listed = store.waits().len();
    if listed as u64 != count {
        bail!("{listed} waits listed after {count} were made");
    }
    drop(store);
    let t = Instant::now();
    let (restored, _) =
        ActionStateStore::restore(open()?, StoreConfig::default(), &Ownership::All, RestoreFrom::Latest).await?;
    report.restore_ms = ms(t);
    report.restored_waits = restored.waits().len();
    report.pending_waits = count;
    report.bytes_per_pending_wait = held.saturating_sub(before) as f64 / count as f64;
    if report.restored_waits as u64 != count {
        bail!("the restore listed {} of the {count} pending waits", report.restored_waits);
    }
    Ok(())
}

/// Measures on the log `log` names: a fresh data directory under its directory (which must be
/// absent or empty, and loses only what this created), or a fresh topic beside its topic.
pub(crate) async fn run(args: &BenchArgs, log: LogConfig) -> Result<ExitCode> {
    let actions = args.puts.min(500);
    let mut report = Report::default();
    match log {
        LogConfig::File(c) => {
            report.backend = "file";
            let scratch = claim::Scratch::claim(&c.dir, "waits", "bench")?;
            let measured = async {
                let ratio_dir = scratch.path.join("ratios");
                ratios(FileLog::open(FileConfig::new(ratio_dir, 8))?, actions, &mut report).await?;
                pending(&scratch.path.join("pending"), args.pending_waits, &mut report).await
            }
            .await;
            scratch.remove()?;
            measured?;
        }
        #[cfg(feature = "kafka")]
        LogConfig::Kafka(mut c) => {
            report.backend = "kafka";
            c.topic = format!("{}-waits-{}", c.topic, std::process::id());
            let log: actionstate_recovery::AnyLog = actionstate_recovery::open(&LogConfig::Kafka(c))
                .await
                .map_err(|e| anyhow::anyhow!(e).context("opening the benchmark's topic"))?;
            ratios(log, actions, &mut report).await?;
        }
        other => bail!("--waits runs on file or kafka logs, not {other}"),
    }
    if args.json {
        outln!("{}", serde_json::to_string(&report)?);
    } else {
        outln!(
            "{} backend, {} actions each: plain call {:.3} ms; wait {:.3} + resolve {:.3} + resume {:.3} = {:.3} ms \
             ({:.2}x)",
            report.backend,
            report.actions,
            report.plain_call_ms,
            report.wait_suspend_ms,
            report.resolve_ms,
            report.resume_ms,
            report.wait_resolve_resume_ms,
            report.ratio
        );
        if report.pending_waits > 0 {
            outln!(
                "{} pending waits: {:.0} bytes each; a restore found {} in {:.1} ms",
                report.pending_waits,
                report.bytes_per_pending_wait,
                report.restored_waits,
                report.restore_ms
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
