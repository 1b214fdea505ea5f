//! The kind byte of a record's envelope. It has a module of its own because both the records
//! and the errors name it, and the errors are below everything else.

/// The kind byte of an envelope.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RecordKind {
    /// [`LogRecord::Upsert`](crate::LogRecord::Upsert).
    Upsert = 1,
    /// [`LogRecord::Delete`](crate::LogRecord::Delete).
    Delete = 2,
    /// [`LogRecord::Audit`](crate::LogRecord::Audit).
    Audit = 3,
    /// [`LogRecord::Fence`](crate::LogRecord::Fence) (format 3 and later).
    Fence = 4,
    /// [`LogRecord::Checkpoint`](crate::LogRecord::Checkpoint) (format 4, written since 0.2).
    Checkpoint = 5,
    /// [`LogRecord::Resolve`](crate::LogRecord::Resolve) (format 4, written since 0.3 by
    /// processes that resolve a wait they do not own).
    Resolve = 6,
}

impl RecordKind {
    /// Parses a kind byte.
    pub fn from_byte(b: u8) -> Option<Self> {
        match b {
            1 => Some(RecordKind::Upsert),
            2 => Some(RecordKind::Delete),
            3 => Some(RecordKind::Audit),
            4 => Some(RecordKind::Fence),
            5 => Some(RecordKind::Checkpoint),
            6 => Some(RecordKind::Resolve),
            _ => None,
        }
    }
}
