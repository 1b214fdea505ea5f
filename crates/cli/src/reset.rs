//! `actionstate reset`: an operator's repair of one business key, offline. The log is opened
//! as the other offline commands open it, an index is rebuilt over the whole log (owning every
//! key), and every state of the key's rounds from `--from-seq` on is invalidated through
//! `ActionStateStore::invalidate`: an audit record with the operator's reason, then one
//! tombstone per removed state. The runtime re-executes those rounds when it next replays
//! them, and every later rebuild replays the repair.
//!
//! What would be removed is printed first; nothing is written without `--yes`, and
//! `--dry-run` only prints.

use actionstate_core::{InvalidationReason, KeyId, Progress, StateLog};
use actionstate_recovery::{ActionStateStore, CheckpointForm, OperatorInvalidation, TwoPhase};
use anyhow::{Context, Result, bail};
use serde::Serialize;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub(crate) struct ResetArgs {
    /// The log to repair (see docs/logs.md, "Naming a log"); it must exist. Stop the runtime
    /// that writes it first: a repair is an offline operation (and a data directory admits one
    /// process at a time).
    #[arg(long, value_name = "URL", default_value = crate::DEFAULT_LOG)]
    log: String,
    /// The business key (the runtime's key bytes as text, e.g. `sim-key-0`).
    #[arg(long)]
    key: String,
    /// The first round to invalidate: its states and those of every later round of the key
    /// are removed.
    #[arg(long, value_name = "SEQ")]
    from_seq: u64,
    /// Why, in at most 1024 bytes: written into the audit record and every tombstone, shown by
    /// `inspect` and `explain`.
    #[arg(long, value_name = "TEXT")]
    reason: String,
    /// Write the invalidation. Without it (and without `--dry-run`), reset prints what it
    /// would remove and exits with an error, writing nothing.
    #[arg(long)]
    yes: bool,
    /// Print what would be removed and write nothing.
    #[arg(long, conflicts_with = "yes")]
    dry_run: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

impl ResetArgs {
    fn writes(&self) -> bool {
        self.yes && !self.dry_run
    }
}

/// One state the reset removes (or removed).
#[derive(Serialize, Debug)]
struct Planned {
    round: u64,
    action: String,
    status: &'static str,
    state_key: String,
    position: String,
}

pub(crate) async fn run(args: ResetArgs) -> Result<ExitCode> {
    // A reason the log cannot hold, or none at all, is refused before anything is opened: the
    // audit record is the only account of why history was removed.
    if args.reason.trim().is_empty() {
        bail!("--reason is empty: say why the key's history is removed (it is written into the audit record)");
    }
    InvalidationReason::operator(args.reason.as_str()).context("--reason")?;
    // The plan is made on the log opened read-only, which creates, migrates and writes nothing:
    // a refused reset (nothing to remove, no `--yes`) leaves every byte as it was.
    let log = crate::inspect::open(&args.log).await?;
    let partitions = log.identity().partitions;
    let (store, planned) = rebuild_and_plan(log, &args).await?;
    if planned.states.is_empty() {
        // An audit record that removes nothing would report a repair that did not happen
        // (often a mistyped key): refused, whatever the flags.
        return Err(nothing_to_remove(&store, &args, &planned));
    }
    if !args.writes() {
        return report(&args, &planned, None);
    }
    // A data directory admits one handle at a time.
    drop(store);
    let (store, planned) =
        rebuild_and_plan(crate::offline::open_for_writing(&args.log, partitions).await?, &args).await?;
    if planned.states.is_empty() {
        return Err(nothing_to_remove(&store, &args, &planned));
    }
    if !args.json {
        // What it removes is on the screen before anything is written.
        print_plan(&args, &planned, true);
    }
    let key = planned.key;
    let written = store.invalidate(key, args.from_seq, &args.reason).await.context("writing the invalidation")?;
    report(&args, &planned, Some(&written))
}

/// An index of the whole `log` (every key, every retained record, nothing pruned; the store
/// takes no checkpoint, so it never reclaims), and what the reset would remove from it.
async fn rebuild_and_plan<L: StateLog>(log: L, args: &ResetArgs) -> Result<(ActionStateStore<L, TwoPhase>, Plan)> {
    let (store, records_read) = crate::offline::whole(log).await?;
    let key = KeyId::of(args.key.as_bytes());
    let states = plan(&store, &key, args.from_seq)?;
    let rounds = states.iter().map(|p| p.round).collect::<std::collections::BTreeSet<u64>>().len();
    Ok((store, Plan { key, states, rounds, records_read }))
}

/// Prints what the reset removed (`written`) or would remove, and refuses a run that would
/// write without `--yes`.
fn report(args: &ResetArgs, planned: &Plan, written: Option<&OperatorInvalidation>) -> Result<ExitCode> {
    if args.json {
        print_json(args, planned, written)?;
    } else if written.is_none() {
        print_plan(args, planned, false);
    }
    match written {
        Some(w) if !args.json => outln!(
            "wrote an audit record (operator: {:?}) and {} tombstones: a replay of round {} and later rounds runs \
             their actions again",
            args.reason,
            w.records - 1,
            args.from_seq
        ),
        None if args.dry_run && !args.json => outln!("dry run: nothing written"),
        _ => {}
    }
    if written.is_none() && !args.dry_run {
        bail!(
            "refusing to write without --yes: reset would remove {} states of key {} from round {} (pass --yes \
             to write the invalidation, or --dry-run to only print); nothing written",
            planned.states.len(),
            args.key,
            args.from_seq
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// What a reset removes: the states of the key's rounds from `--from-seq` on, found in an
/// index rebuilt from `records_read` records.
struct Plan {
    key: KeyId,
    states: Vec<Planned>,
    /// The number of rounds the states belong to.
    rounds: usize,
    records_read: u64,
}

/// The refusal of a reset that would remove nothing: the rounds the key has, or that it has
/// none (most often a mistyped key).
fn nothing_to_remove<L: StateLog, F: CheckpointForm>(
    store: &ActionStateStore<L, F>,
    args: &ResetArgs,
    planned: &Plan,
) -> anyhow::Error {
    let known = store.with_index(|ix| ix.rounds_of(&planned.key).into_iter().map(|(seq, _)| seq).collect::<Vec<_>>());
    match (known.iter().min(), known.iter().max()) {
        (Some(first), Some(last)) => anyhow::anyhow!(
            "key {} has no state from round {} on (its recorded rounds are {first} to {last}); nothing written",
            args.key,
            args.from_seq
        ),
        _ => anyhow::anyhow!(
            "key {} ({}) has no recorded state in {} records read; nothing written (check the key's name: \
             `actionstate inspect` lists the keys)",
            args.key,
            crate::inspect::short(planned.key),
            planned.records_read
        ),
    }
}

/// The table of what the reset removes (`write`) or would remove.
fn print_plan(args: &ResetArgs, planned: &Plan, write: bool) {
    outln!(
        "reset of key {} ({}) from round {}: {} {} states in {} rounds (index rebuilt from {} records)",
        args.key,
        crate::inspect::short(planned.key),
        args.from_seq,
        if write { "removes" } else { "would remove" },
        planned.states.len(),
        planned.rounds,
        planned.records_read
    );
    for p in &planned.states {
        outln!("  round {:<6} {:<16} {:<9} {:<10} state {}", p.round, p.action, p.status, p.position, p.state_key);
    }
}

/// `reset --json`: the plan, and what was written if anything was.
fn print_json(args: &ResetArgs, planned: &Plan, written: Option<&OperatorInvalidation>) -> Result<()> {
    let out = serde_json::json!({
        "key": args.key,
        "key_id": planned.key.to_string(),
        "from_seq": args.from_seq,
        "reason": args.reason,
        "records_read": planned.records_read,
        "states": planned.states,
        "rounds": planned.rounds,
        "dry_run": args.dry_run,
        "written": written.is_some(),
        "records_written": written.map_or(0, |w| w.records),
    });
    outln!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}

/// The states of `key`'s rounds `seq >= from_seq`, by round and then by log position.
fn plan<L: StateLog, F: CheckpointForm>(
    store: &ActionStateStore<L, F>,
    key: &KeyId,
    from_seq: u64,
) -> Result<Vec<Planned>> {
    let rounds = store.with_index(|ix| {
        ix.rounds_of(key)
            .into_iter()
            .filter(|(seq, _)| *seq >= from_seq)
            .map(|(seq, states)| {
                let states: Vec<_> = states.into_iter().map(|s| (ix.position(s.key()), s)).collect();
                (seq, states)
            })
            .collect::<Vec<_>>()
    });
    let mut out = Vec::new();
    for (round, mut states) in rounds {
        states.sort_by_key(|(at, _)| at.map(|p| (p.partition, p.offset)));
        for (at, recorded) in states {
            let state = recorded.state().with_context(|| format!("decoding a state of round {round}"))?;
            out.push(Planned {
                round,
                action: state.action.to_string(),
                status: match state.progress {
                    Progress::Pending { .. } => "pending",
                    Progress::Completed { .. } => "completed",
                },
                state_key: crate::inspect::hex_key(&state.key),
                position: at.map_or_else(|| "-".into(), |p| format!("p{}:{}", p.partition, p.offset)),
            });
        }
    }
    Ok(out)
}
