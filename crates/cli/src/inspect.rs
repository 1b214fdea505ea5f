//! `inspect`, `explain` and `verify`: read any log a URL names (a data directory of the
//! embedded store, a Kafka topic, a Fluss table).
//!
//! They are safe beside a live writer: the log is opened read-only (nothing is created,
//! migrated or written; see `LogConfig::read_only`), and each reads only up to the end offsets
//! it captured when it started. (The embedded store admits one process per directory, so on
//! `file:` the writer must be stopped first; the error says so.)

use actionstate_core::{
    ActionState, Audit, AuditDetail, CallStatus, CheckpointEntry, CheckpointRecord, EventId, IdempotencyKey,
    InvalidationReason, KeyId, LogRecord, Ownership, Position, Progress, RangeRead, StateLog, Trigger, codec,
};
use actionstate_index::{Decision, Fences, Index, Probe, allow_scans};
use actionstate_recovery::{AnyLog, LogConfig};
use anyhow::{Context, Result};
use serde::Serialize;
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;

/// Everything read from a log: the index of its latest view, audits, and undecodable records.
struct Loaded {
    index: Index,
    audits: Vec<(Position, Audit)>,
    corrupt: Vec<(u32, u64, String)>,
    records: u64,
    partitions: u32,
    /// The first offset retained in each partition: above 0 once retention reclaimed history.
    earliest: Vec<u64>,
    /// The fence records read: where, the keys fenced, the epoch.
    fences: Vec<(Position, Ownership, u64)>,
    /// Records skipped as a fenced writer's.
    fenced: u64,
    /// The checkpoint commits read: where, and the commit.
    checkpoints: Vec<(Position, CheckpointRecord)>,
}

/// The log `url` names, parsed (errors say what is wrong with the URL).
pub(crate) fn config(url: &str) -> Result<LogConfig> {
    // The error repeats the URL, redacted: a URL as typed may carry a secret the grammar refuses.
    url.parse().context("--log")
}

/// Opens the log `url` names as it is, for reading only: nothing is created, migrated or
/// written. A failure carries the hint its kind calls for (`hint`).
pub(crate) async fn open(url: &str) -> Result<AnyLog> {
    let config = config(url)?.read_only();
    actionstate_recovery::open(&config)
        .await
        .map_err(|e| crate::hint::with_hint(anyhow::Error::new(e).context(format!("cannot open {config}")), &config))
}

/// Records above which `inspect` and `verify` show a progress bar (on a terminal).
const PROGRESS_ABOVE: u64 = 5_000;

/// Replays every retained record of every partition, in order, into a fresh index, up to the
/// end offsets captured first. With `progress`, a bar on standard error counts the records
/// when there are more than a few thousand.
async fn load<L: StateLog>(log: &L, progress: bool) -> Result<Loaded> {
    let earliest = log.earliest_offsets().await?;
    let end = log.end_offsets().await?;
    let total: u64 = earliest.iter().zip(&end).map(|(e, n)| n.saturating_sub(*e)).sum();
    let bar = if progress && total > PROGRESS_ABOVE {
        let bar = indicatif::ProgressBar::new(total);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{spinner} reading [{bar:40}] {pos}/{len} records ({per_sec})")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        bar
    } else {
        indicatif::ProgressBar::hidden()
    };
    let mut loaded = Loaded {
        index: Index::new(),
        audits: Vec::new(),
        corrupt: Vec::new(),
        records: 0,
        partitions: log.identity().partitions,
        earliest: earliest.clone(),
        fences: Vec::new(),
        fenced: 0,
        checkpoints: Vec::new(),
    };
    for (p, (&from, &to)) in (0u32..).zip(earliest.iter().zip(&end)) {
        // The replay rule of a rebuild: a fenced writer's records are not applied.
        let mut fences = Fences::new();
        let mut range = RangeRead::new(p, from, to, 4096);
        while let Some(records) = range.next_batch(log).await? {
            bar.inc(records.len() as u64);
            for r in records {
                loaded.records += 1;
                let position = Position { partition: p, offset: r.offset, exact: true };
                let decoded = codec::decode(&r.key, &r.value);
                if let Ok(record) = &decoded
                    // A fence governs the records after it; a resolve request is no state
                    // write, and no fence refuses it (a rebuild reads it whatever its epoch).
                    && !matches!(record, LogRecord::Fence(_) | LogRecord::Resolve(_))
                    && !fences.is_empty()
                    && codec::writer_epoch(&r.value).is_ok_and(|epoch| !fences.admits(&record.key_id(), epoch))
                {
                    loaded.fenced += 1;
                    continue;
                }
                match decoded {
                    Ok(LogRecord::Fence(f)) => {
                        fences.observe(&f);
                        loaded.fences.push((position, f.groups, f.epoch));
                    }
                    Ok(LogRecord::Checkpoint(c)) => {
                        if matches!(c.entry, CheckpointEntry::Commit(_)) {
                            loaded.checkpoints.push((position, c));
                        }
                    }
                    Ok(LogRecord::Audit(a)) => {
                        // Replayed as a rebuild replays it: an invalidation whose tombstones a
                        // crash cut short is whole here too.
                        loaded.index.apply(LogRecord::Audit(a.clone()), position, r.key.len() + r.value.len());
                        loaded.audits.push((position, a));
                    }
                    Ok(record) => {
                        loaded.index.apply(record, position, r.key.len() + r.value.len());
                    }
                    Err(e) => loaded.corrupt.push((p, r.offset, e.to_string())),
                }
            }
        }
    }
    Ok(loaded)
}

#[derive(Serialize)]
struct StateView {
    state_key: String,
    action: String,
    trigger: String,
    status: &'static str,
    outputs: Vec<String>,
    memory: Vec<String>,
    journal: Vec<String>,
    position: String,
    #[serde(skip)]
    offset: (u32, u64),
}

#[derive(Serialize)]
struct RoundView {
    seq: u64,
    states: Vec<StateView>,
}

#[derive(Serialize)]
struct KeyView {
    key: String,
    /// The key's readable name, as its states record it (`Round::named`).
    label: Option<String>,
    rounds: Vec<RoundView>,
}

#[derive(Serialize)]
struct AuditView {
    key: String,
    seq: u64,
    action: Option<String>,
    /// The reason's name (`miss:root_changed`, `operator`, ...).
    reason: String,
    /// The operator's words, for an operator's invalidation.
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<String>,
    removed: u64,
    detail: String,
    position: String,
}

impl AuditView {
    /// The reason as the table shows it: its name, and an operator's words quoted.
    fn reason_text(&self) -> String {
        match &self.text {
            Some(text) => format!("{} {text:?}", self.reason),
            None => self.reason.clone(),
        }
    }
}

pub(crate) fn short(hex: impl std::fmt::Display) -> String {
    let s = hex.to_string();
    s.chars().take(16).collect()
}

/// The producer of an emitted trigger, by action name when it is indexed.
fn trigger_text(t: &Trigger, index: &Index) -> String {
    match t {
        Trigger::Input => "input".into(),
        Trigger::Emitted { producer, index: i } => match index.get(producer).map(|p| p.state()) {
            Some(Ok(p)) => format!("output {i} of {}", p.action),
            Some(Err(_)) => format!("output {i} of {} (its record does not decode)", short(hex_key(producer))),
            None => format!("output {i} of {}", short(hex_key(producer))),
        },
        Trigger::Bootstrap { label } => format!("bootstrap {label}"),
    }
}

pub(crate) fn hex_key(k: &actionstate_core::StateKey) -> String {
    k.to_bytes()[33..].iter().map(|b| format!("{b:02x}")).collect()
}

fn state_view(s: &ActionState, position: Option<Position>, index: &Index) -> StateView {
    let (status, outputs, memory, journal) = match &s.progress {
        Progress::Pending { calls } => {
            // Each call's idempotency key: the one its PENDING slot recorded, else derived as
            // the store derives it (the default, empty scope).
            let incarnation = index.incarnation(&s.key);
            let journal = (0..)
                .zip(calls)
                .map(|(i, c)| {
                    let derived = || IdempotencyKey::derive("", &s.key, incarnation, i, &c.function_id, &c.args_digest);
                    // A wait shows where it stands, never its secret (the token) or its reply.
                    let wait = |w: &actionstate_core::WaitSlot, what: String| {
                        let deadline = w.deadline_ms.map_or_else(String::new, |d| format!(" deadline {d}"));
                        format!("{} wait {what} since {}{deadline}", c.function_id, w.since_ms)
                    };
                    let (what, key) = match &c.status {
                        CallStatus::Pending { key } => ("pending".to_owned(), key.clone().unwrap_or_else(derived)),
                        CallStatus::Succeeded { result } => (format!("ok ({} bytes)", result.len()), derived()),
                        CallStatus::Failed { error } => (format!("failed ({} bytes)", error.len()), derived()),
                        CallStatus::Waiting { wait: w } => return wait(w, "pending".to_owned()),
                        CallStatus::Resolved { wait: w, outcome } => {
                            return wait(w, format!("resolved ({})", outcome.name()));
                        }
                    };
                    format!("{} {what} key {key}", c.function_id)
                })
                .collect();
            ("pending", Vec::new(), Vec::new(), journal)
        }
        Progress::Completed { outputs, memory } => (
            "completed",
            outputs.iter().map(|e| format!("{} {}", e.event_type, e.id)).collect(),
            memory.iter().map(|m| m.path.clone()).collect(),
            Vec::new(),
        ),
    };
    StateView {
        state_key: hex_key(&s.key),
        action: s.action.to_string(),
        trigger: trigger_text(&s.trigger, index),
        status,
        outputs,
        memory,
        journal,
        position: position.map_or_else(|| "-".into(), |p| format!("p{}:{}", p.partition, p.offset)),
        offset: position.map_or((0, 0), |p| (p.partition, p.offset)),
    }
}

fn audit_view(position: &Position, a: &Audit) -> AuditView {
    let detail = match &a.detail {
        AuditDetail::Absent => "no recorded state for the lookup".to_owned(),
        AuditDetail::RootChanged { recorded, current } => format!(
            "input changed: recorded {} now {}",
            recorded.iter().map(short).collect::<Vec<_>>().join(","),
            short(current)
        ),
        AuditDetail::OccurrenceConflict { recorded, current } => {
            format!("trigger event {recorded} was a completed output; now {current}")
        }
        AuditDetail::ProducerReplaced { producer } => format!("producer {} re-ran", short(hex_key(producer))),
        AuditDetail::Operator => format!("an operator invalidated round {} and every later round", a.seq),
    };
    AuditView {
        key: short(a.key),
        seq: a.seq,
        action: a.action.as_ref().map(ToString::to_string),
        reason: a.reason.name().to_owned(),
        text: a.reason.text().map(str::to_owned),
        removed: a.removed,
        detail,
        position: format!("p{}:{}", position.partition, position.offset),
    }
}

pub(crate) async fn inspect(url: &str, key: Option<&str>, json: bool) -> Result<ExitCode> {
    let log = open(url).await?;
    let loaded = load(&log, true).await?;
    let filter = key.map(|k| KeyId::of(k.as_bytes()));
    let views = key_views(&loaded.index, filter)?;
    let audits: Vec<AuditView> = loaded
        .audits
        .iter()
        .filter(|(_, a)| filter.is_none_or(|f| f == a.key))
        .map(|(p, a)| audit_view(p, a))
        .collect();
    if json {
        print_inspect_json(&loaded, &views, &audits)?;
    } else {
        print_inspect(&loaded, &views, &audits);
    }
    Ok(ExitCode::SUCCESS)
}

/// The live states of the index (of the one key `filter` names, if any), by key and round,
/// each round's states in log order.
fn key_views(index: &Index, filter: Option<KeyId>) -> Result<Vec<KeyView>> {
    let dump = {
        let _scan = allow_scans();
        index.dump()
    };
    let mut keys: BTreeMap<KeyId, BTreeMap<u64, Vec<StateView>>> = BTreeMap::new();
    let mut labels: BTreeMap<KeyId, String> = BTreeMap::new();
    for (sk, (state, position)) in &dump {
        if filter.is_some_and(|f| f != sk.key) {
            continue;
        }
        let state = state.state()?;
        if let Some(label) = &state.label {
            labels.insert(sk.key, label.to_string());
        }
        keys.entry(sk.key).or_default().entry(sk.seq).or_default().push(state_view(&state, Some(*position), index));
    }
    Ok(keys
        .into_iter()
        .map(|(k, rounds)| KeyView {
            key: short(k),
            label: labels.remove(&k),
            rounds: rounds
                .into_iter()
                .map(|(seq, mut states)| {
                    states.sort_by_key(|s| s.offset);
                    RoundView { seq, states }
                })
                .collect(),
        })
        .collect())
}

/// `inspect --json`: the counts, the fences, the index and the audit as one JSON document.
fn print_inspect_json(loaded: &Loaded, views: &[KeyView], audits: &[AuditView]) -> Result<()> {
    let stats = loaded.index.stats();
    let out = serde_json::json!({
        "records": loaded.records,
        "partitions": loaded.partitions,
        "keys": stats.keys,
        "rounds": stats.rounds,
        "states": stats.states,
        "corrupt_records": loaded.corrupt.len(),
        "fenced_records": loaded.fenced,
        "fences": loaded.fences.iter().map(|(at, groups, epoch)| serde_json::json!({
            "partition": at.partition,
            "offset": at.offset,
            "groups": groups.to_string(),
            "epoch": epoch,
        })).collect::<Vec<_>>(),
        "checkpoints": loaded.checkpoints.iter().map(|(at, c)| checkpoint_json(at, c)).collect::<Vec<_>>(),
        "index": views,
        "audit": audits,
    });
    outln!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}

/// A checkpoint commit as `inspect --json` shows it.
fn checkpoint_json(at: &Position, c: &CheckpointRecord) -> serde_json::Value {
    let CheckpointEntry::Commit(commit) = &c.entry else { return serde_json::Value::Null };
    serde_json::json!({
        "partition": at.partition,
        "offset": at.offset,
        "id": c.id,
        "owner": c.owner.to_string(),
        "epoch": c.epoch,
        "marker": commit.marker.offsets,
        "parts": commit.parts,
        "completed": commit.completed.len(),
        "metadata_bytes": commit.metadata.len(),
    })
}

/// `inspect` as text: the counts and fences, then each key's rounds and states, then the audit.
fn print_inspect(loaded: &Loaded, views: &[KeyView], audits: &[AuditView]) {
    let stats = loaded.index.stats();
    outln!(
        "{} records in {} partitions: {} keys, {} rounds, {} live states",
        loaded.records,
        loaded.partitions,
        stats.keys,
        stats.rounds,
        stats.states
    );
    if !loaded.fences.is_empty() {
        let newest = loaded.fences.iter().map(|(_, _, e)| *e).max().unwrap_or(0);
        outln!(
            "{} fence records (newest epoch {newest}); {} records of fenced writers not replayed",
            loaded.fences.len(),
            loaded.fenced
        );
    }
    if let Some((at, newest)) = loaded.checkpoints.last() {
        outln!(
            "{} checkpoints in the log; newest: {} of {} (epoch {}) at {}:{}",
            loaded.checkpoints.len(),
            newest.id,
            newest.owner,
            newest.epoch,
            at.partition,
            at.offset
        );
    }
    for k in views {
        print_key(k);
    }
    outln!("\naudit of divergences and repairs: {}", audits.len());
    for a in audits {
        outln!(
            "  key {} round {} {} {}: removed {} — {} ({})",
            a.key,
            a.seq,
            a.action.as_deref().unwrap_or("-"),
            a.reason_text(),
            a.removed,
            a.detail,
            a.position
        );
    }
    if !loaded.corrupt.is_empty() {
        outln!("\n{} corrupt records (run `actionstate verify`)", loaded.corrupt.len());
    }
}

/// One key of `inspect`'s text: its name, then a line per state of each round.
fn print_key(k: &KeyView) {
    match &k.label {
        Some(label) => outln!("\nkey {label} ({})", k.key),
        None => outln!("\nkey {}", k.key),
    }
    for r in &k.rounds {
        outln!("  round {}", r.seq);
        for s in &r.states {
            let what = if s.status == "pending" {
                format!("journal [{}]", s.journal.join(", "))
            } else {
                format!("{} outputs, {} memory writes", s.outputs.len(), s.memory.len())
            };
            outln!("    {:<10} {:<9} {:<28} {:<40} {}", s.action, s.status, s.trigger, what, s.position);
        }
    }
}

pub(crate) async fn explain(url: &str, key: &str, seq: u64, action: &str, json: bool) -> Result<ExitCode> {
    let log = open(url).await?;
    let loaded = load(&log, false).await?;
    let key_id = KeyId::of(key.as_bytes());
    let rounds = loaded.index.rounds_of(&key_id);
    let later: usize = rounds.iter().filter(|(s, _)| *s > seq).map(|(_, st)| st.len()).sum();
    let mut mine: Vec<Arc<ActionState>> = Vec::new();
    for recorded in rounds.iter().filter(|(s, _)| *s == seq).flat_map(|(_, st)| st) {
        let state = recorded.state()?;
        if state.action.name == action {
            mine.push(state);
        }
    }
    let lines: Vec<serde_json::Value> = mine.iter().map(|s| explain_state(&loaded.index, s)).collect();
    // The divergences found in this round, and the operator's repairs that covered it (an
    // operator invalidates a round and every later one).
    let covers = |a: &Audit| {
        a.key == key_id && (a.seq == seq || (matches!(a.reason, InvalidationReason::Operator { .. }) && a.seq <= seq))
    };
    let audits: Vec<AuditView> =
        loaded.audits.iter().filter(|(_, a)| covers(a)).map(|(p, a)| audit_view(p, a)).collect();
    let reclaimed = if mine.is_empty() { reclaimed_before(&loaded, &rounds, seq) } else { None };
    if json {
        let out = serde_json::json!({
            "key": key, "seq": seq, "action": action,
            "states": lines, "later_states": later, "audit": audits,
            "reclaimed": reclaimed.is_some(),
        });
        outln!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    outln!("key {key} ({}) round {seq} action {action}", short(key_id));
    if mine.is_empty() {
        print_no_state(seq, later, reclaimed, &loaded.earliest);
    }
    for l in &lines {
        outln!(
            "  state at {} ({}, trigger {})",
            l["state"]["position"].as_str().unwrap_or_default(),
            l["state"]["status"].as_str().unwrap_or_default(),
            l["state"]["trigger"].as_str().unwrap_or_default()
        );
        outln!("    → {}", l["decision"].as_str().unwrap_or_default());
        for call in l["state"]["journal"].as_array().into_iter().flatten() {
            outln!("    call {}", call.as_str().unwrap_or_default());
        }
        outln!("    because {}", l["why"].as_str().unwrap_or_default());
    }
    for a in &audits {
        outln!("  audit: {} removed {} — {} ({})", a.reason_text(), a.removed, a.detail, a.position);
    }
    Ok(ExitCode::SUCCESS)
}

/// What a replay would decide for the recorded state `s`, and why: the state's view, the
/// decision and its reason, as `explain` shows them.
fn explain_state(index: &Index, s: &ActionState) -> serde_json::Value {
    // A replay presents roots with a new event id and emitted events with the producer's
    // recorded output id; ask the index what it would decide for exactly that.
    let event = if s.trigger.is_input() || matches!(s.trigger, Trigger::Bootstrap { .. }) {
        EventId::random()
    } else {
        s.trigger_event
    };
    let probe = Probe { key: s.key, trigger: &s.trigger, event, input: s.input };
    let (decision, divergence, would) = index.explain(&probe);
    let verdict = match (&decision, s.is_completed()) {
        (Decision::Hit(_), true) => "reuse: completed, its outputs and memory writes are replayed".to_owned(),
        (Decision::Hit(_), false) => format!("resume: pending with {} journaled calls", s.calls().len()),
        (Decision::Miss(r), _) => format!("run again: miss ({r}), invalidating {would} states"),
    };
    let why = match (&s.trigger, divergence) {
        (_, Some((reason, detail))) => format!("{reason}: {detail:?}"),
        (Trigger::Input, None) => "root event: matched by fingerprint (restored inputs get new ids)".into(),
        (Trigger::Bootstrap { .. }, None) => "bootstrap event: matched by fingerprint".into(),
        (Trigger::Emitted { .. }, None) => {
            "emitted event: the producer's recorded output id matches the recorded trigger".into()
        }
    };
    serde_json::json!({
        "state": state_view(s, index.position(&s.key), index),
        "decision": verdict,
        "why": why,
    })
}

/// `explain`'s text when the round left no state of the action: reclaimed by retention (the
/// first retained round is `reclaimed`), or never recorded, so that a lookup misses.
fn print_no_state(seq: u64, later: usize, reclaimed: Option<u64>, earliest: &[u64]) {
    match reclaimed {
        Some(first) => outln!(
            "  no recorded state: round {seq} is older than the history this log retains (the first retained \
             round of this key is {first}; records below offsets {:?} were reclaimed once later checkpoints \
             completed), so a replay from a retained checkpoint starts after it and never looks it up",
            earliest
        ),
        None => outln!(
            "  no recorded state: a lookup misses (absent) and invalidates the {later} states of later rounds of \
             this key"
        ),
    }
}

/// The first retained round of a key whose round `seq` left no state, when `seq` lies before
/// it and the log has reclaimed history: the round was reclaimed, not never recorded.
fn reclaimed_before<T>(loaded: &Loaded, rounds: &[(u64, T)], seq: u64) -> Option<u64> {
    let first = rounds.iter().map(|(s, _)| *s).min()?;
    (seq < first && loaded.earliest.iter().any(|&e| e > 0)).then_some(first)
}

pub(crate) async fn verify(url: &str, json: bool) -> Result<ExitCode> {
    let log = open(url).await?;
    let loaded = load(&log, true).await?;
    let invariants = {
        let _scan = allow_scans();
        loaded.index.check_invariants()
    };
    if json {
        let corrupt: Vec<_> = loaded
            .corrupt
            .iter()
            .map(|(p, o, e)| serde_json::json!({"partition": p, "offset": o, "error": e}))
            .collect();
        let line = serde_json::json!({
            "log": config(url)?.to_string(),
            "records": loaded.records,
            "partitions": loaded.partitions,
            "corrupt": corrupt,
            "invariants": invariants.as_ref().err(),
            "ok": loaded.corrupt.is_empty() && invariants.is_ok(),
        });
        outln!("{line}");
        return Ok(if loaded.corrupt.is_empty() && invariants.is_ok() { ExitCode::SUCCESS } else { ExitCode::FAILURE });
    }
    for (p, o, e) in &loaded.corrupt {
        outln!("corrupt record at partition {p} offset {o}: {e}");
    }
    if let Err(e) = &invariants {
        outln!("index invariant violated: {e}");
    }
    outln!(
        "verified {} records in {} partitions: {} corrupt, index invariants {}",
        loaded.records,
        loaded.partitions,
        loaded.corrupt.len(),
        if invariants.is_ok() { "hold" } else { "VIOLATED" }
    );
    Ok(if loaded.corrupt.is_empty() && invariants.is_ok() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
