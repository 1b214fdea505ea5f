//! The durable state of a simulated run whose attempts are separate processes
//! ([`Sim::run_attempt`](crate::Sim::run_attempt)), kept in one directory:
//!
//! - `ledger` — the side-effect ledger's journal (see [`Ledger::journaled`]), appended by every
//!   attempt;
//! - `checkpoint-<id>` — each completed checkpoint, written to a temporary file and renamed, so
//!   a killed process leaves either the whole checkpoint or none of it;
//! - `final-memory` — the agent memory once the whole input source was processed.
//!
//! Nothing is fsynced: the processes are killed, the machine is not, and the kernel keeps what
//! was written before a kill.

use crate::checkpoint::{Checkpoint, KeepCheckpoints};
use crate::ledger::{Ledger, ReplayedJournal};
use crate::results::Memory;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

const JOURNAL: &str = "ledger";
const CHECKPOINT: &str = "checkpoint-";
const FINAL_MEMORY: &str = "final-memory";
const TMP: &str = ".tmp";

/// The directory holding the durable state of one simulated run.
#[derive(Clone, Debug)]
pub struct RunDir {
    dir: PathBuf,
}

fn invalid(path: &Path, e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("{}: {e}", path.display()))
}

fn with_path(path: &Path) -> impl FnOnce(io::Error) -> io::Error + '_ {
    move |e| io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

impl RunDir {
    /// The run state in `dir`, created if absent.
    pub fn new(dir: impl Into<PathBuf>) -> io::Result<RunDir> {
        let dir = dir.into();
        fs::create_dir_all(&dir).map_err(with_path(&dir))?;
        Ok(RunDir { dir })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The ledger journal's file (it grows as soon as an attempt records anything).
    pub fn journal_path(&self) -> PathBuf {
        self.dir.join(JOURNAL)
    }

    /// The ledger journal opened for appending. A last line cut by a kill is dropped first,
    /// so the next entry starts on a line of its own.
    pub(crate) fn open_journal(&self) -> io::Result<File> {
        let path = self.journal_path();
        let mut file = OpenOptions::new().read(true).append(true).create(true).open(&path).map_err(with_path(&path))?;
        let mut text = Vec::new();
        file.read_to_end(&mut text).map_err(with_path(&path))?;
        let keep = text.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        if keep < text.len() {
            file.set_len(keep as u64).map_err(with_path(&path))?;
        }
        Ok(file)
    }

    /// Reads the ledger journal back: the run's whole ledger and each round's latest outputs.
    pub fn journal(&self) -> io::Result<ReplayedJournal> {
        let path = self.journal_path();
        let text = match fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(with_path(&path)(e)),
        };
        Ledger::replay_journal(&text).map_err(with_path(&path))
    }

    /// Ids of the completed checkpoints kept, ascending.
    pub fn checkpoints(&self) -> io::Result<Vec<u64>> {
        let mut ids = Vec::new();
        for entry in fs::read_dir(&self.dir).map_err(with_path(&self.dir))? {
            let name = entry.map_err(with_path(&self.dir))?.file_name();
            let Some(name) = name.to_str() else { continue };
            if let Some(id) = name.strip_prefix(CHECKPOINT).filter(|n| !n.ends_with(TMP))
                && let Ok(id) = id.parse::<u64>()
            {
                ids.push(id);
            }
        }
        ids.sort_unstable();
        Ok(ids)
    }

    pub(crate) fn latest_checkpoint(&self) -> io::Result<Option<Checkpoint>> {
        let Some(id) = self.checkpoints()?.last().copied() else { return Ok(None) };
        self.checkpoint(id)
    }

    /// The completed checkpoint `id`, if the directory holds it.
    pub(crate) fn checkpoint(&self, id: u64) -> io::Result<Option<Checkpoint>> {
        let path = self.dir.join(format!("{CHECKPOINT}{id:020}"));
        if !path.exists() {
            return Ok(None);
        }
        let bytes = fs::read(&path).map_err(with_path(&path))?;
        let checkpoint: Checkpoint = postcard::from_bytes(&bytes).map_err(|e| invalid(&path, e))?;
        if checkpoint.id != id {
            return Err(invalid(&path, format!("holds checkpoint {}", checkpoint.id)));
        }
        Ok(Some(checkpoint))
    }

    pub(crate) fn save_checkpoint(&self, checkpoint: &Checkpoint) -> io::Result<()> {
        let bytes = postcard::to_allocvec(checkpoint).map_err(|e| invalid(&self.dir, e))?;
        self.write_atomically(&format!("{CHECKPOINT}{:020}", checkpoint.id), &bytes)
    }

    /// The agent memory after the whole input source, once an attempt got there.
    pub fn final_memory(&self) -> io::Result<Option<Memory>> {
        let path = self.dir.join(FINAL_MEMORY);
        match fs::read(&path) {
            Ok(bytes) => postcard::from_bytes(&bytes).map(Some).map_err(|e| invalid(&path, e)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(with_path(&path)(e)),
        }
    }

    pub(crate) fn save_final_memory(&self, memory: &Memory) -> io::Result<()> {
        let bytes = postcard::to_allocvec(memory).map_err(|e| invalid(&self.dir, e))?;
        self.write_atomically(FINAL_MEMORY, &bytes)
    }

    fn write_atomically(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        let tmp = self.dir.join(format!("{name}{TMP}"));
        let path = self.dir.join(name);
        fs::write(&tmp, bytes).map_err(with_path(&tmp))?;
        fs::rename(&tmp, &path).map_err(with_path(&path))
    }
}

impl KeepCheckpoints for &RunDir {
    fn keep(&mut self, checkpoint: &Checkpoint) -> std::io::Result<()> {
        self.save_checkpoint(checkpoint)
    }
}
