//! The error type of the core crate: codec failures and backend-contract failures.

use crate::kind::RecordKind;
use std::fmt;

/// Everything that can go wrong in the core crate or behind the [`crate::StateLog`] contract.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The envelope is shorter than its header or its declared payload.
    #[error("record truncated: need {needed} bytes, have {available}")]
    Truncated {
        /// Bytes the envelope declares.
        needed: usize,
        /// Bytes present.
        available: usize,
    },
    /// The value does not start with the envelope magic.
    #[error("bad magic {found:02x?}: not an actionstate record")]
    BadMagic {
        /// The first four bytes found.
        found: [u8; 4],
    },
    /// The envelope was written by a format version this build does not read.
    #[error("unknown record format version {found} (this build reads versions {oldest} to {newest})")]
    UnknownVersion {
        /// Version byte found.
        found: u8,
        /// Oldest version this build reads.
        oldest: u8,
        /// Newest version this build reads (the one it writes).
        newest: u8,
    },
    /// The envelope names a record kind this build does not know.
    #[error("unknown record kind {found}")]
    UnknownKind {
        /// Kind byte found.
        found: u8,
    },
    /// The payload does not match its checksum.
    #[error("record checksum mismatch: payload corrupted")]
    BadChecksum,
    /// Bytes follow the declared payload.
    #[error("{extra} trailing bytes after the record")]
    TrailingBytes {
        /// Number of extra bytes.
        extra: usize,
    },
    /// The payload passed its checksum but is not a valid record.
    #[error("malformed record payload: {detail}")]
    Payload {
        /// What the decoder reported.
        detail: String,
    },
    /// The envelope kind and the payload disagree.
    #[error("record kind mismatch: header says {header:?}, payload is {payload:?}")]
    KindMismatch {
        /// Kind in the header.
        header: RecordKind,
        /// Kind of the decoded payload.
        payload: RecordKind,
    },
    /// The log key does not match the record's payload.
    #[error("log key does not match the {kind:?} record it carries")]
    KeyMismatch {
        /// Kind of the record.
        kind: RecordKind,
    },
    /// A state key of the wrong length or layout.
    #[error("bad state key: {len} bytes, layout byte {layout:?}")]
    BadStateKey {
        /// Length found.
        len: usize,
        /// First byte, if any.
        layout: Option<u8>,
    },
    /// A payload too large for the envelope's u32 length.
    #[error("record payload of {len} bytes exceeds the 4 GiB envelope limit")]
    TooLarge {
        /// Payload length.
        len: usize,
    },
    /// An operator's reason text is longer than the codec writes
    /// ([`crate::MAX_OPERATOR_TEXT`]).
    #[error("operator reason text of {len} bytes exceeds the limit of {max} bytes")]
    OperatorTextTooLong {
        /// Length of the text, in bytes of UTF-8.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A checkpoint's user metadata is longer than the codec writes
    /// ([`crate::MAX_CHECKPOINT_METADATA`]).
    #[error("checkpoint metadata of {len} bytes exceeds the limit of {max} bytes")]
    MetadataTooLarge {
        /// Length of the metadata.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A resolve request's reply or rejection is longer than a wait records
    /// ([`crate::MAX_WAIT_REPLY`]).
    #[error("a wait's reply of {len} bytes exceeds the limit of {max} bytes")]
    WaitReplyTooLarge {
        /// Length of the reply.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A resolve request asked for a timeout, which only the owner of the wait records.
    #[error("a resolve request asks for a reply or a rejection; a timeout is the owner's to record")]
    TimeoutRequested,
    /// A record read from the log failed to decode.
    #[error("corrupt record at partition {partition} offset {offset}: {source}")]
    Corrupt {
        /// Partition of the record.
        partition: u32,
        /// Offset of the record.
        offset: u64,
        /// The decode failure.
        source: Box<Error>,
    },
    /// A marker or the log names a partition the log does not have.
    #[error("unknown partition {partition}: log {log} has {partitions} partitions")]
    UnknownPartition {
        /// The log.
        log: String,
        /// Partition asked for.
        partition: u32,
        /// Partitions the log has.
        partitions: u32,
    },
    /// The log's identity or partition set changed since the marker or handle was made.
    #[error("log changed: expected {expected}, found {found}")]
    LogChanged {
        /// Identity expected.
        expected: String,
        /// Identity found.
        found: String,
    },
    /// A marker points past the end of a partition.
    #[error("marker offset {offset} is beyond the end {end} of partition {partition}")]
    OffsetBeyondEnd {
        /// The partition.
        partition: u32,
        /// Marker offset.
        offset: u64,
        /// End offset of the partition.
        end: u64,
    },
    /// A marker points below the earliest retained offset: records it needs are gone.
    #[error(
        "data loss: marker offset {offset} of partition {partition} is below the earliest retained offset {earliest}"
    )]
    DataLoss {
        /// The partition.
        partition: u32,
        /// Marker offset.
        offset: u64,
        /// Earliest retained offset.
        earliest: u64,
    },
    /// Markers from different logs were merged.
    #[error("markers belong to different logs: {first} and {second}")]
    MixedMarkers {
        /// First log.
        first: String,
        /// Second log.
        second: String,
    },
    /// A read of a partition range returned an empty batch that does not advance: the backend
    /// broke the [`crate::StateLog::read`] progress rule. Reading again from the same offset
    /// could loop forever, and skipping it could lose a record.
    #[error(
        "read of partition {partition} made no progress at offset {offset} (range ends at {end}): \
         an empty batch that does not advance breaks the StateLog contract"
    )]
    NoProgress {
        /// The partition.
        partition: u32,
        /// The offset the read started at (and did not pass).
        offset: u64,
        /// The exclusive end of the range read.
        end: u64,
    },
    /// A read returned a batch that breaks the [`crate::StateLog::read`] contract: a record out
    /// of its range or out of order, more records than asked for, or a `next` offset at or
    /// below a returned record.
    #[error("bad read of partition {partition} at offset {offset}: {detail}")]
    BadRead {
        /// The partition.
        partition: u32,
        /// The offset the read started at.
        offset: u64,
        /// What was wrong, with the offsets involved.
        detail: String,
    },
    /// The backend does not offer an optional operation (see [`crate::Capabilities`]).
    #[error("the {backend} backend does not support {operation}")]
    Unsupported {
        /// The backend's name.
        backend: String,
        /// The operation asked for.
        operation: &'static str,
    },
    /// A log URL that does not name a log (see [`crate::url`]). Secret-looking values in
    /// `url` are shown as `***`.
    #[error("log URL `{url}`: {detail}")]
    BadUrl {
        /// The URL, secrets hidden.
        url: String,
        /// What is wrong with it.
        detail: String,
    },
    /// The backend failed; see [`BackendError::is_retryable`].
    #[error(transparent)]
    Backend(#[from] BackendError),
}

impl Error {
    /// Whether retrying the operation may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Backend(e) => e.is_retryable(),
            _ => false,
        }
    }

    /// Attaches the log position a decode failure happened at.
    pub fn at(self, partition: u32, offset: u64) -> Error {
        Error::Corrupt { partition, offset, source: Box::new(self) }
    }
}

/// A backend failure with its cause hidden behind a box, so backend client types do not leak
/// into the contract.
pub struct BackendError {
    backend: &'static str,
    operation: &'static str,
    retryable: bool,
    source: Box<dyn std::error::Error + Send + Sync + 'static>,
}

impl BackendError {
    /// A failure that may succeed when retried (timeouts, unreachable servers, leader moves).
    pub fn retryable(
        backend: &'static str,
        operation: &'static str,
        source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    ) -> Self {
        BackendError { backend, operation, retryable: true, source: source.into() }
    }

    /// A failure that will not go away by retrying (rejected record, bad configuration).
    pub fn terminal(
        backend: &'static str,
        operation: &'static str,
        source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    ) -> Self {
        BackendError { backend, operation, retryable: false, source: source.into() }
    }

    /// Whether retrying may succeed.
    pub fn is_retryable(&self) -> bool {
        self.retryable
    }

    /// The backend's name (`"file"`, `"kafka"`, ...).
    pub fn backend(&self) -> &'static str {
        self.backend
    }

    /// The operation that failed (`"append"`, `"read"`, ...).
    pub fn operation(&self) -> &'static str {
        self.operation
    }
}

impl fmt::Debug for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BackendError")
            .field("backend", &self.backend)
            .field("operation", &self.operation)
            .field("retryable", &self.retryable)
            .field("source", &self.source)
            .finish()
    }
}

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let class = if self.retryable { "retryable" } else { "terminal" };
        write!(f, "[{class}] {} {} failed: {}", self.backend, self.operation, self.source)
    }
}

impl std::error::Error for BackendError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.source)
    }
}
