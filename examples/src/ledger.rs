//! The ledger: the outside world as the Kafka service sees it, a file of lines it appends to.
//! `effect KEY SEQ` is the side effect of an input (what a message sent or a payment made
//! would be), `ack KEY SEQ` says the service acknowledged the input after its state was
//! durable. The file lives outside the process, so it survives a SIGKILL, and the service's
//! reconciler reads it to find out whether an effect happened before a crash.

use crate::error::Error;
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

/// What a ledger line says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// The input's side effect happened.
    Effect,
    /// The service acknowledged the input.
    Ack,
}

/// One ledger line.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Entry {
    /// What it says.
    pub kind: Kind,
    /// The input's business key.
    pub key: String,
    /// The input's sequence number.
    pub seq: u64,
}

impl Entry {
    /// `effect KEY SEQ`.
    pub fn effect(key: &str, seq: u64) -> Entry {
        Entry { kind: Kind::Effect, key: key.to_owned(), seq }
    }

    /// `ack KEY SEQ`.
    pub fn ack(key: &str, seq: u64) -> Entry {
        Entry { kind: Kind::Ack, key: key.to_owned(), seq }
    }

    fn parse(line: &str) -> Option<Entry> {
        let mut words = line.split(' ');
        let kind = match words.next()? {
            "effect" => Kind::Effect,
            "ack" => Kind::Ack,
            _ => return None,
        };
        let (key, seq) = (words.next()?, words.next()?.parse().ok()?);
        words.next().is_none().then(|| Entry { kind, key: key.to_owned(), seq })
    }
}

impl fmt::Display for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            Kind::Effect => "effect",
            Kind::Ack => "ack",
        };
        write!(f, "{kind} {} {}", self.key, self.seq)
    }
}

/// The ledger file at a path.
#[derive(Clone, Debug)]
pub struct Ledger {
    path: PathBuf,
}

impl Ledger {
    /// The ledger at `path` (created by the first append).
    pub fn new(path: impl Into<PathBuf>) -> Ledger {
        Ledger { path: path.into() }
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `entry` as one line, in one write to a file opened for appending: a kill
    /// leaves the line whole or absent.
    pub fn append(&self, entry: &Entry) -> Result<(), Error> {
        let line = format!("{entry}\n");
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .and_then(|mut file| file.write_all(line.as_bytes()))
            .map_err(|source| Error::Ledger { path: self.path.clone(), source })
    }

    /// Whether the ledger holds `entry`.
    pub fn contains(&self, entry: &Entry) -> Result<bool, Error> {
        Ok(self.entries()?.contains(entry))
    }

    /// Every entry, in the order they were appended; a last line without its newline is not
    /// one. No ledger yet is an empty one.
    pub fn entries(&self) -> Result<Vec<Entry>, Error> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(source) => return Err(Error::Ledger { path: self.path.clone(), source }),
        };
        let complete = text.rfind('\n').map_or("", |end| &text[..end]);
        complete
            .lines()
            .enumerate()
            .map(|(i, line)| {
                Entry::parse(line).ok_or_else(|| Error::BadLedgerLine {
                    path: self.path.clone(),
                    line: i + 1,
                    text: line.to_owned(),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn entries_read_back_and_a_cut_line_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::new(dir.path().join("ledger"));
        assert_eq!(ledger.entries().unwrap(), vec![]);
        ledger.append(&Entry::effect("key-1", 0)).unwrap();
        ledger.append(&Entry::ack("key-1", 0)).unwrap();
        assert!(ledger.contains(&Entry::effect("key-1", 0)).unwrap());
        assert!(!ledger.contains(&Entry::effect("key-1", 1)).unwrap());
        std::fs::OpenOptions::new().append(true).open(ledger.path()).unwrap().write_all(b"effect key-1 1").unwrap();
        assert_eq!(ledger.entries().unwrap(), vec![Entry::effect("key-1", 0), Entry::ack("key-1", 0)]);
    }

    #[test]
    fn a_line_that_is_no_entry_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::new(dir.path().join("ledger"));
        std::fs::write(ledger.path(), "effect key-1 0\nsent key-1 0\n").unwrap();
        assert!(matches!(ledger.entries(), Err(Error::BadLedgerLine { line: 2, .. })));
    }
}
