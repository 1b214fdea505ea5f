//! `actionstate waits` and `actionstate resolve`: an operator's view of the durable waits of a
//! log, and an outside resolve of one (docs/design.md, section 5.7).
//!
//! Both rebuild an index of the whole log (`offline.rs`). `waits` only reads: the log is opened
//! read-only, so a data directory stays byte-identical. `resolve` checks everything it can
//! before it opens the log for writing (the token's form, the reply's size, and that the
//! rebuilt index has the wait, pending), so a refusal writes nothing. Then:
//!
//! - on a data directory (one process holds it, so the owner is stopped) it records the
//!   outcome as the owner does, through `ActionStateStore::resolve`, and the owner receives
//!   it when it restores (its replay reads the record);
//! - on a server log (Kafka, Fluss), where the owner may be running, it appends a resolve
//!   request to the key's partition (`ActionStateStore::request_resolve`), which the owner
//!   records at its next poll or when it restores, and reads the partition until the owner
//!   has recorded an outcome, to report which one stands (`--owner-stopped`: it does not
//!   wait).
//!
//! Neither prints a token or a reply: whoever holds a token can approve what it guards.

use actionstate_core::{
    CallStatus, KeyId, LogRecord, MAX_WAIT_REPLY, Position, RangeRead, ResolveRequest, StateLog, WaitOutcome,
    WaitToken, codec,
};
use actionstate_recovery::{ActionStateStore, AnyLog, CheckpointForm, LogConfig, WaitInfo, WaitStatus};
use anyhow::{Context, Result, bail};
use serde::Serialize;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub(crate) struct WaitsArgs {
    /// The log (see docs/logs.md, "Naming a log").
    #[arg(long, value_name = "URL", default_value = crate::DEFAULT_LOG)]
    log: String,
    /// Only this business key (the runtime's key bytes as text).
    #[arg(long)]
    key: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("outcome").required(true).args(["payload_file", "reject"])))]
pub(crate) struct ResolveArgs {
    /// The log holding the wait. On a data directory, stop the runtime that owns the key
    /// first (one process holds it at a time); on a server log the owner may run.
    #[arg(long, value_name = "URL", default_value = crate::DEFAULT_LOG)]
    log: String,
    /// The wait's token, as the suspended action handed it out (`asw1-…`). Pass `-` to read it
    /// from standard input, so that it stays out of the shell's history.
    #[arg(long, value_name = "TOKEN")]
    token: String,
    /// Resolve with the bytes of this file as the reply (at most 64 KiB).
    #[arg(long, value_name = "FILE")]
    payload_file: Option<PathBuf>,
    /// Reject the wait, with this reason (at most 64 KiB).
    #[arg(long, value_name = "TEXT")]
    reject: Option<String>,
    /// On a server log: the owner is stopped, so do not wait for it to record the outcome (it
    /// records it when it restores).
    #[arg(long)]
    owner_stopped: bool,
    /// On a server log: how long to wait for the running owner to record the outcome.
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    confirm_within: u64,
    /// Print JSON instead of a line.
    #[arg(long)]
    json: bool,
}

/// One wait as `waits` lists it.
#[derive(Serialize, Debug)]
struct WaitView {
    key: String,
    key_id: String,
    seq: u64,
    action: String,
    name: String,
    /// `pending`, or the outcome of a wait resolved whose action has not resumed.
    status: String,
    since_ms: u64,
    /// How long ago the action first waited, in milliseconds (0 for a clock behind the wait).
    age_ms: u64,
    deadline_ms: Option<u64>,
}

fn now_ms() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}

fn view(w: &WaitInfo, now: u64) -> WaitView {
    WaitView {
        key: w.label.as_ref().map_or_else(|| crate::inspect::short(w.key), |l| l.as_str().to_owned()),
        key_id: w.key.to_string(),
        seq: w.seq,
        action: w.action.to_string(),
        name: w.name.clone(),
        status: match &w.status {
            WaitStatus::Pending => "pending".to_owned(),
            WaitStatus::Resolved { outcome } => format!("resolved ({outcome})"),
        },
        since_ms: w.since_ms,
        age_ms: now.saturating_sub(w.since_ms),
        deadline_ms: w.deadline_ms,
    }
}

/// A duration in milliseconds as an operator reads it: `42s`, `3m12s`, `5h02m`, `2d03h`.
fn age(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        3600..86_400 => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d{:02}h", s / 86_400, (s % 86_400) / 3600),
    }
}

pub(crate) async fn list(args: WaitsArgs) -> Result<ExitCode> {
    let log = crate::inspect::open(&args.log).await?;
    let (store, records) = crate::offline::whole(log).await?;
    let only = args.key.as_deref().map(|k| KeyId::of(k.as_bytes()));
    let now = now_ms();
    let waits: Vec<WaitView> =
        store.waits().iter().filter(|w| only.is_none_or(|k| w.key == k)).map(|w| view(w, now)).collect();
    if args.json {
        let out = serde_json::json!({ "log": args.log, "records_read": records, "waits": waits });
        outln!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    outln!("{} waits (index rebuilt from {records} records)", waits.len());
    for w in &waits {
        let deadline = match w.deadline_ms {
            Some(d) if d > now => format!("times out in {}", age(d - now)),
            Some(_) => "deadline passed".to_owned(),
            None => "no deadline".to_owned(),
        };
        outln!(
            "  {:<20} round {:<6} {:<16} {:<16} {:<18} age {:<8} {deadline}",
            w.key,
            w.seq,
            w.action,
            w.name,
            w.status,
            age(w.age_ms)
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// What `resolve` records, checked before anything is opened: whether it rejects, and the
/// reply's or the reason's bytes.
fn outcome(args: &ResolveArgs) -> Result<(bool, Vec<u8>)> {
    let (reject, bytes, what) = match (&args.payload_file, &args.reject) {
        (Some(file), None) => {
            let bytes = std::fs::read(file).with_context(|| format!("reading --payload-file {}", file.display()))?;
            (false, bytes, format!("--payload-file {}", file.display()))
        }
        (None, Some(text)) => (true, text.clone().into_bytes(), "--reject".to_owned()),
        _ => bail!("pass one of --payload-file and --reject"),
    };
    if bytes.len() > MAX_WAIT_REPLY {
        bail!("{what} holds {} bytes, more than a wait records ({MAX_WAIT_REPLY}); nothing written", bytes.len());
    }
    Ok((reject, bytes))
}

/// The token `--token` gives, or standard input's first line for `-`.
fn token(args: &ResolveArgs) -> Result<WaitToken> {
    let text = if args.token == "-" {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).context("reading the token from standard input")?;
        line.trim().to_owned()
    } else {
        args.token.clone()
    };
    // The error says what is wrong with it, never what it is.
    WaitToken::parse(&text).context("--token")
}

/// Where the wait `token` names stands in `store`: `None` pending, or its outcome; an unknown
/// wait is an error that says what an operator can check.
fn standing<L: StateLog, F: CheckpointForm>(
    store: &ActionStateStore<L, F>,
    token: &WaitToken,
    records: u64,
) -> Result<Option<WaitOutcome>> {
    store.wait_outcome(token).with_context(|| {
        format!(
            "no wait of key {} has this token in {records} records read (its action completed, an invalidation \
             voided it, or it belongs to another log: `actionstate waits` lists the waits); nothing written",
            crate::inspect::short(token.key)
        )
    })
}

pub(crate) async fn resolve(args: ResolveArgs) -> Result<ExitCode> {
    let token = token(&args)?;
    let (reject, bytes) = outcome(&args)?;
    let wanted = if reject { WaitOutcome::Rejected(bytes) } else { WaitOutcome::Reply(bytes) };
    let config = crate::inspect::config(&args.log)?;
    let local = matches!(config, LogConfig::File(_) | LogConfig::Memory(_));
    // The plan on the read-only log: a refusal leaves every byte as it was.
    let log = crate::inspect::open(&args.log).await?;
    let partitions = log.identity().partitions;
    let (store, records) = crate::offline::whole(log).await?;
    if let Some(first) = standing(&store, &token, records)? {
        return report(&args, &first, false, "the wait already ended; nothing written");
    }
    drop(store);
    let log = crate::offline::open_for_writing(&args.log, partitions).await?;
    if local {
        let (store, records) = crate::offline::whole(log).await?;
        standing(&store, &token, records)?;
        let done = match &wanted {
            WaitOutcome::Rejected(reason) => store.reject(&token, reason).await,
            _ => store.resolve(&token, &bytes_of(&wanted)).await,
        }
        .context("writing the resolution")?;
        let note = if done.recorded {
            "the owner receives it when it restores"
        } else {
            "the wait already ended; nothing written"
        };
        return report(&args, &done.outcome, done.recorded, note);
    }
    let request = LogRecord::Resolve(ResolveRequest::new(&token, wanted.clone()));
    let at = log.append(codec::encode(&request)?).await.context("appending the resolve request")?;
    if args.owner_stopped {
        return report(&args, &wanted, true, "requested: the owner records it when it restores");
    }
    let first = confirm(&log, &token, at, Duration::from_secs(args.confirm_within)).await?;
    let ours = first == wanted;
    let note = if ours { "the owner recorded it" } else { "another outcome came first; the request changed nothing" };
    report(&args, &first, ours, note)
}

/// Reads the key's partition from the request on until the owner records an outcome for the
/// wait, for at most `within`; returns the outcome.
async fn confirm(log: &AnyLog, token: &WaitToken, at: Position, within: Duration) -> Result<WaitOutcome> {
    let deadline = Instant::now() + within;
    let mut next = at.offset;
    loop {
        let end = log.end_offsets().await?.get(at.partition as usize).copied().unwrap_or(0);
        let mut range = RangeRead::new(at.partition, next, end, 1000);
        while let Some(records) = range.next_batch(log).await? {
            for r in records {
                // Every state's log key carries the key id at bytes 1..33.
                if r.key.get(1..33) != Some(&token.key.0[..]) {
                    continue;
                }
                if let Ok(LogRecord::Upsert(state)) = codec::decode(&r.key, &r.value)
                    && let Some(CallStatus::Resolved { outcome, .. }) = state
                        .calls()
                        .iter()
                        .map(|c| &c.status)
                        .find(|s| s.wait().is_some_and(|w| w.secret == token.secret))
                {
                    return Ok(outcome.clone());
                }
            }
        }
        next = next.max(end);
        if Instant::now() >= deadline {
            bail!(
                "the resolve request is durable (partition {}, offset {}), and the owner has not recorded an outcome \
                 within {}s: it records it at its next poll of resolve requests, or when it restores; `actionstate \
                 waits` shows whether it did",
                at.partition,
                at.offset,
                within.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The bytes of a reply or a rejection.
fn bytes_of(outcome: &WaitOutcome) -> Vec<u8> {
    match outcome {
        WaitOutcome::Reply(b) | WaitOutcome::Rejected(b) => b.clone(),
        WaitOutcome::TimedOut => Vec::new(),
    }
}

/// Prints what the resolve did: the outcome's kind and size, never its bytes.
fn report(args: &ResolveArgs, outcome: &WaitOutcome, recorded: bool, note: &str) -> Result<ExitCode> {
    let len = match outcome {
        WaitOutcome::Reply(b) | WaitOutcome::Rejected(b) => b.len(),
        WaitOutcome::TimedOut => 0,
    };
    if args.json {
        let out = serde_json::json!({ "recorded": recorded, "outcome": outcome.name(), "bytes": len, "note": note });
        outln!("{}", serde_json::to_string(&out)?);
    } else if recorded {
        outln!("recorded: {} ({len} bytes); {note}", outcome.name());
    } else {
        outln!("{} ({len} bytes) stands: {note}", outcome.name());
    }
    Ok(ExitCode::SUCCESS)
}
