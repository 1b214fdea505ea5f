//! Claiming an empty log for a command that writes a history of its own into it (`demo`,
//! `soak`), and an empty directory for one that writes scratch files (`bench`).
//!
//! Such a command must never mix its records with a log's history, nor delete what it did not
//! create. So it checks that the log is empty and holds it from that check on: it appends a
//! fence record to every partition (what a store's first rebuild writes anyway) and then reads
//! the log back. If anything but its own fences is there, another process wrote into the log
//! between the check and the claim, and the command refuses. Two commands racing for one log
//! therefore never both proceed: each sees the other's fence, or the later one finds the log
//! already claimed. A data directory is also held by its lock while it is open.

use actionstate_core::{LogRecord, RangeRead, StateLog, codec};
use actionstate_recovery::{ActionStateStore, AnyLog, LogConfig, Ownership, Retention, Snapshot, StoreConfig};
use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Opens the log `config` names for `command` and claims it, or refuses, naming what it found,
/// when the log already holds anything (records, or for a data directory, files). Nothing is
/// written to a log that is not empty.
pub async fn claim_empty(config: &LogConfig, command: &str) -> Result<Arc<AnyLog>> {
    if let LogConfig::File(file) = config {
        refuse_foreign_files(&file.dir, command)?;
    }
    // A look that writes nothing first: opening an existing log for writing may migrate its
    // settings (a Kafka topic's cleanup policy), which a command refusing it must not do.
    refuse_if_holding(config, command).await?;
    let log = actionstate_recovery::open(config)
        .await
        .map_err(|e| crate::hint::with_hint(anyhow::Error::new(e).context(format!("cannot open {config}")), config))?;
    // Checked again on the handle that writes: the log may have been created or written since.
    refuse_records(&log, config, command).await?;
    let log = Arc::new(log);
    // A restore from no snapshot: it replays nothing (the log is empty) and writes only the
    // fences of the store's new owner epoch.
    let (store, _) = ActionStateStore::restore(
        Arc::clone(&log),
        StoreConfig { retention: Retention::KeepAll, ..StoreConfig::default() },
        &Ownership::All,
        Vec::<Snapshot>::new(),
    )
    .await
    .with_context(|| format!("claiming {config}"))?;
    let epoch = store.epoch();
    drop(store);
    let foreign = foreign_records(&log, epoch).await?;
    if foreign > 0 {
        bail!(
            "another process wrote {foreign} records into {config} while {command} claimed it; {command} needs a \
             log of its own (a new directory, topic or table) and writes nothing more"
        );
    }
    Ok(log)
}

/// Whether the log `config` names exists: it opens read-only, which creates and changes
/// nothing (an unreachable server counts as absent; the open that follows reports it).
pub async fn exists(config: &LogConfig) -> bool {
    actionstate_recovery::open(&config.clone().read_only()).await.is_ok()
}

/// Refuses, for `command`, a log that exists and holds records; writes nothing either way.
pub async fn refuse_if_holding(config: &LogConfig, command: &str) -> Result<()> {
    match actionstate_recovery::open(&config.clone().read_only()).await {
        Ok(existing) => refuse_records(&existing, config, command).await,
        Err(_) => Ok(()),
    }
}

/// Refuses a log that holds records (or held them: Kafka may have deleted some).
async fn refuse_records<L: StateLog>(log: &L, config: &LogConfig, command: &str) -> Result<()> {
    let earliest = log.earliest_offsets().await?;
    let end = log.end_offsets().await?;
    let held: u64 = end.iter().sum();
    if held == 0 {
        return Ok(());
    }
    let retained: u64 = earliest.iter().zip(&end).map(|(e, n)| n.saturating_sub(*e)).sum();
    let partitions = end.iter().filter(|&&n| n > 0).count();
    bail!(
        "{config} is not empty: it holds {retained} records in {partitions} of its {} partitions; {command} writes \
         a history of its own and needs an empty log (a new directory, topic or table), so it wrote nothing",
        end.len()
    )
}

/// Records in `log` that are not the fences of the claim with `epoch`.
async fn foreign_records<L: StateLog>(log: &L, epoch: u64) -> Result<u64> {
    let earliest = log.earliest_offsets().await?;
    let end = log.end_offsets().await?;
    let mut foreign = 0u64;
    for (p, (&from, &to)) in (0u32..).zip(earliest.iter().zip(&end)) {
        let mut range = RangeRead::new(p, from, to, 1024);
        while let Some(records) = range.next_batch(log).await? {
            for r in records {
                let ours = matches!(codec::decode(&r.key, &r.value), Ok(LogRecord::Fence(f)) if f.epoch == epoch);
                foreign += u64::from(!ours);
            }
        }
    }
    Ok(foreign)
}

/// Refuses a data directory that holds anything but an actionstate store's file.
fn refuse_foreign_files(dir: &Path, command: &str) -> Result<()> {
    let names = entries(dir)?;
    let foreign: Vec<&String> = names.iter().filter(|n| n.as_str() != actionstate_file::DB_FILE_NAME).collect();
    if !foreign.is_empty() {
        bail!(
            "{} is not empty: it holds {} that {command} did not create ({}); {command} needs a new or empty \
             directory, so it wrote nothing",
            dir.display(),
            plural(foreign.len(), "entry", "entries"),
            shown(&foreign)
        );
    }
    Ok(())
}

/// The names in `dir` (none when it does not exist).
fn entries(dir: &Path) -> Result<Vec<String>> {
    let read = match std::fs::read_dir(dir) {
        Ok(read) => read,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", dir.display())),
    };
    let mut names = Vec::new();
    for entry in read {
        let entry = entry.with_context(|| format!("reading {}", dir.display()))?;
        names.push(entry.file_name().to_string_lossy().into_owned());
    }
    names.sort();
    Ok(names)
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The first few names, quoted.
fn shown(names: &[&String]) -> String {
    let mut out: Vec<String> = names.iter().take(5).map(|n| format!("`{n}`")).collect();
    if names.len() > 5 {
        out.push(format!("and {} more", names.len() - 5));
    }
    out.join(", ")
}

/// A scratch directory a command holds exclusively and removes when done: `DIR/NAME` inside a
/// `DIR` that was absent or empty. Only what the command created is removed: `DIR/NAME`, and
/// `DIR` itself when the command created it and it is empty again.
#[derive(Debug)]
pub struct Scratch {
    /// The directory the command writes into (`DIR/NAME`).
    pub path: PathBuf,
    parent: PathBuf,
    created_parent: bool,
}

impl Scratch {
    /// Claims `dir` for `command`: refuses a path that is not a directory or a directory that
    /// holds anything. Creating `DIR/NAME` is the exclusive step: of two commands that both
    /// found `dir` empty, one fails to create it and refuses.
    pub fn claim(dir: &Path, name: &str, command: &str) -> Result<Scratch> {
        if dir.exists() && !dir.is_dir() {
            bail!(
                "{} is not a directory; {command} needs a new or empty directory, so it wrote nothing",
                dir.display()
            );
        }
        let found = entries(dir)?;
        if !found.is_empty() {
            let found: Vec<&String> = found.iter().collect();
            bail!(
                "{} is not empty: it holds {} ({}); {command} writes scratch files and removes them after, so it \
                 needs a new or empty directory and wrote nothing",
                dir.display(),
                plural(found.len(), "entry", "entries"),
                shown(&found)
            );
        }
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        let created_parent = match std::fs::create_dir(dir) {
            Ok(()) => true,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => false,
            Err(e) => return Err(e).with_context(|| format!("creating {}", dir.display())),
        };
        let path = dir.join(name);
        match std::fs::create_dir(&path) {
            Ok(()) => Ok(Scratch { path, parent: dir.to_path_buf(), created_parent }),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                bail!("{} was taken by another process after the check; {command} wrote nothing", dir.display())
            }
            Err(e) => Err(e).with_context(|| format!("creating {}", path.display())),
        }
    }

    /// Removes what the command created.
    pub fn remove(self) -> Result<()> {
        std::fs::remove_dir_all(&self.path).with_context(|| format!("removing {}", self.path.display()))?;
        if self.created_parent {
            // Not recursive: whatever someone else put there stays.
            let _ = std::fs::remove_dir(&self.parent);
        }
        Ok(())
    }
}
