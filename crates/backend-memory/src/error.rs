//! [`MemoryError`]: what an in-memory log fails with, and how it becomes a core [`Error`].

use actionstate_core::{BackendError, Error};
use std::fmt;

/// Backend name used in [`LogIdentity::backend`](actionstate_core::LogIdentity::backend) and
/// in [`BackendError`]s.
pub const BACKEND: &str = "memory";

/// Why an operation on a [`MemoryLog`](crate::MemoryLog) failed: the source of the retryable
/// [`Error::Backend`] it returns. (Its other failures are core errors: a changed log, data
/// loss, an unknown partition, an offset beyond the end.)
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MemoryError {
    /// A read starting at or past the end of its partition.
    PastTheEnd {
        /// The partition.
        partition: u32,
        /// Where the read started.
        offset: u64,
        /// The partition's end offset.
        end: u64,
    },
}

impl fmt::Display for MemoryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MemoryError::PastTheEnd { partition, offset, end } => {
                write!(f, "nothing to read at offset {offset} of partition {partition}: it ends at {end}")
            }
        }
    }
}

impl std::error::Error for MemoryError {}

impl MemoryError {
    /// The retryable backend error of `operation` this is the source of: every failure of an
    /// in-memory log may pass (a test lifts the fault, a record arrives).
    pub(crate) fn during(self, operation: &'static str) -> Error {
        BackendError::retryable(BACKEND, operation, self).into()
    }
}
