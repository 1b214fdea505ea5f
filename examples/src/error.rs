//! The errors of the examples' shared parts: a record that is not an input, checkpoint
//! metadata that is not a position list, and a ledger that cannot be read or written.

use std::path::PathBuf;

/// What went wrong in an example's inputs, positions or ledger.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A record of the input topic is not an input (see [`Input::from_record`](crate::Input::from_record)).
    #[error("input record at partition {partition}, offset {offset}: {detail}")]
    BadInput {
        /// The record's partition.
        partition: i32,
        /// The record's offset.
        offset: i64,
        /// What is wrong with it.
        detail: String,
    },
    /// A checkpoint's metadata is not the position list [`Positions::encode`](crate::Positions::encode) writes.
    #[error("checkpoint metadata is not a position list: {0}")]
    BadPositions(String),
    /// The positions do not fit into a checkpoint's metadata.
    #[error("the positions of {partitions} partitions take {len} bytes, more than the {max} a checkpoint holds")]
    PositionsTooLarge {
        /// Partitions listed.
        partitions: usize,
        /// Their encoded length.
        len: usize,
        /// [`MAX_CHECKPOINT_METADATA`](actionstate_core::MAX_CHECKPOINT_METADATA).
        max: usize,
    },
    /// The ledger file could not be read or appended to.
    #[error("ledger {path}: {source}")]
    Ledger {
        /// The ledger file.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
    /// A complete line of the ledger is not an entry.
    #[error("ledger {path}, line {line}: {text:?} is not an entry")]
    BadLedgerLine {
        /// The ledger file.
        path: PathBuf,
        /// The line number, from 1.
        line: usize,
        /// The line.
        text: String,
    },
}
