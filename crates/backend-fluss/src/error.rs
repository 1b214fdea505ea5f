//! [`FlussError`]: what fails, and whether a retry may pass.

use crate::retention::RetentionProblem;
use actionstate_core::{BackendError, Error as CoreError};
use fluss::error::Error as ClientError;
use fluss::rpc::FlussError as ApiError;
use std::time::Duration;

/// Backend name used in [`LogIdentity`](actionstate_core::LogIdentity) and [`BackendError`].
pub const BACKEND: &str = "fluss";

/// Failures of the Fluss backend.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FlussError {
    /// The cluster could not be reached or the connection failed.
    #[error("connecting to the Fluss cluster at {bootstrap}: {source}")]
    Connect {
        /// The bootstrap servers.
        bootstrap: String,
        /// The client error.
        source: Box<ClientError>,
    },
    /// The cluster rejected the SASL credentials, or needs some and got none.
    #[error("{operation} on the Fluss cluster at {bootstrap}: authentication failed: {detail}; {}", authentication_hint(*.credentials))]
    Authentication {
        /// What was being done.
        operation: &'static str,
        /// The bootstrap servers.
        bootstrap: String,
        /// The client's description.
        detail: String,
        /// Whether the configuration had credentials (`username=` and a password).
        credentials: bool,
    },
    /// A request did not complete in time.
    #[error("{operation} on {table} at {bootstrap}: no answer after {waited:?}")]
    Timeout {
        /// What was being done.
        operation: &'static str,
        /// `database.table`.
        table: String,
        /// The bootstrap servers.
        bootstrap: String,
        /// How long was waited.
        waited: Duration,
    },
    /// A client request failed.
    #[error("{operation} on {table}: {source}")]
    Client {
        /// What was being done.
        operation: &'static str,
        /// `database.table`.
        table: String,
        /// The client error.
        source: Box<ClientError>,
    },
    /// An append was not acknowledged within the delivery timeout.
    #[error("append to {table} bucket {bucket} not acknowledged after {waited:?}")]
    DeliveryTimeout {
        /// `database.table`.
        table: String,
        /// The bucket.
        bucket: u32,
        /// How long was waited.
        waited: Duration,
    },
    /// An append failed.
    #[error("append to {table} bucket {bucket}: {source}")]
    Append {
        /// `database.table`.
        table: String,
        /// The bucket.
        bucket: u32,
        /// The client error.
        source: Box<ClientError>,
    },
    /// The table does not exist (any more).
    #[error("table {table} does not exist")]
    TableMissing {
        /// `database.table`.
        table: String,
    },
    /// The table's buckets had no leader within the request timeout (right after it was
    /// created, or while its tablet servers are down). When open created the table itself, it
    /// dropped it and created it again once before failing with this; `detail` then says so.
    #[error("table {table} not ready after {waited:?}: {detail}")]
    TableNotReady {
        /// `database.table`.
        table: String,
        /// How long was waited.
        waited: Duration,
        /// The last error seen.
        detail: String,
    },
    /// The table exists with another bucket count than configured.
    #[error("table {table} has {found} buckets, configured {configured}")]
    BucketsChanged {
        /// `database.table`.
        table: String,
        /// Buckets configured.
        configured: u32,
        /// Buckets the table has.
        found: u32,
    },
    /// The table exists but is not a log table of this backend's layout.
    #[error("table {table} is not an actionstate log table: {detail}")]
    IncompatibleTable {
        /// `database.table`.
        table: String,
        /// What differs.
        detail: String,
    },
    /// The table deletes records by age sooner than [`FlussConfig::log_ttl`](crate::FlussConfig::log_ttl) accepts (Fluss's
    /// default TTL of 7 days applies to a table created without `table.log.ttl`, as earlier
    /// versions of this backend created them), or its TTL cannot be read.
    #[error(
        "table {table} has {property} = {value}: {problem}. To keep every record, use a new \
         table (this backend creates it with {property} = '0 ms', no deletion by age; the Fluss \
         0.9 server cannot alter {property} of an existing table); to accept deletion by age, \
         add {} to the log URL (a checkpoint older than that may then fail to restore as data \
         loss)",
        accept_hint(.problem)
    )]
    LogRetention {
        /// `database.table`.
        table: String,
        /// The table property, [`retention::LOG_TTL_PROPERTY`](crate::retention::LOG_TTL_PROPERTY).
        property: &'static str,
        /// Its value as the table holds it (`not set (Fluss's default: 7 d)` when absent).
        value: String,
        /// What is wrong with it.
        problem: RetentionProblem,
    },
    /// A read received no record for the stall timeout.
    #[error("read of {table} bucket {bucket} stalled at offset {offset} (target {to}) for {waited:?}")]
    ReadStalled {
        /// `database.table`.
        table: String,
        /// The bucket.
        bucket: u32,
        /// The offset the read waited for.
        offset: u64,
        /// The end of the requested range.
        to: u64,
        /// How long no record arrived.
        waited: Duration,
    },
    /// A read failed at a known position.
    #[error("read of {table} bucket {bucket} at offset {offset}: {source}")]
    Read {
        /// `database.table`.
        table: String,
        /// The bucket.
        bucket: u32,
        /// The offset being read.
        offset: u64,
        /// The client error.
        source: Box<ClientError>,
    },
    /// A bucket outside `0..buckets` was asked for.
    #[error("bucket {bucket} out of range: table {table} has {buckets} buckets")]
    NoSuchBucket {
        /// `database.table`.
        table: String,
        /// Bucket asked for.
        bucket: u32,
        /// Buckets of the table.
        buckets: u32,
    },
    /// The thread a writer's client tasks run on could not be started.
    #[error("starting the writer thread for {table}: {source}")]
    WriterThread {
        /// `database.table`.
        table: String,
        /// Why.
        source: std::io::Error,
    },
    /// The configuration cannot work.
    #[error("invalid Fluss configuration: {0}")]
    InvalidConfig(String),
    /// The cluster reported a value that cannot be an offset or a bucket count.
    #[error("unexpected value from the Fluss cluster: {0}")]
    Unexpected(String),
}

/// What to change in the log URL after an authentication failure.
fn authentication_hint(credentials: bool) -> &'static str {
    if credentials {
        "check the log URL's `username=` and the password its `password_env=` or `password_file=` names"
    } else {
        "the listener needs authentication: add `username=U&password_env=VAR` to the log URL"
    }
}

/// The `log_ttl=` parameter that accepts the table's TTL.
fn accept_hint(problem: &RetentionProblem) -> String {
    match problem.table_ttl() {
        Some(ttl) => format!("`log_ttl={}` (the table's TTL) or less", actionstate_core::url::duration_text(ttl)),
        None => "`log_ttl=` with the table's TTL or less".to_owned(),
    }
}

impl FlussError {
    /// Whether retrying the operation may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            FlussError::Connect { source, .. }
            | FlussError::Client { source, .. }
            | FlussError::Append { source, .. }
            | FlussError::Read { source, .. } => {
                source.is_retriable() || metadata_incomplete(source) || writer_dead(source)
            }
            FlussError::Timeout { .. }
            | FlussError::TableNotReady { .. }
            | FlussError::DeliveryTimeout { .. }
            | FlussError::ReadStalled { .. } => true,
            FlussError::Authentication { .. }
            | FlussError::TableMissing { .. }
            | FlussError::BucketsChanged { .. }
            | FlussError::IncompatibleTable { .. }
            | FlussError::LogRetention { .. }
            | FlussError::NoSuchBucket { .. }
            | FlussError::WriterThread { .. }
            | FlussError::InvalidConfig(_)
            | FlussError::Unexpected(_) => false,
        }
    }
}

pub(crate) fn with_operation(e: FlussError, operation: &'static str) -> CoreError {
    if e.is_retryable() {
        CoreError::Backend(BackendError::retryable(BACKEND, operation, e))
    } else {
        CoreError::Backend(BackendError::terminal(BACKEND, operation, e))
    }
}

pub(crate) fn is_authentication(e: &ClientError) -> bool {
    matches!(e.api_error(), Some(ApiError::AuthenticateException | ApiError::RetriableAuthenticateException))
}

/// Whether a failed request hit a bucket without a (known) leader: none elected yet, or a
/// server that has not yet taken up the leadership the metadata gives it (a table just created
/// on a cluster of several tablet servers: `UnknownTableOrBucketException` from the bucket's
/// leader, which has not yet heard of the table).
pub(crate) fn leader_moving(e: &ClientError) -> bool {
    match e.api_error() {
        Some(
            ApiError::NotLeaderOrFollower
            | ApiError::LeaderNotAvailableException
            | ApiError::UnknownTableOrBucketException,
        ) => true,
        Some(_) => false,
        None => matches!(e, ClientError::UnexpectedError { message, .. } if message.contains("No leader found")),
    }
}

/// Whether a request failed because a server did not (yet) know what the request needs: the
/// client's cluster metadata did not name the coordinator, while it is refreshed after a server
/// of the cluster went away; or a tablet server that just restarted had not yet loaded the
/// table (`InvalidTableException`, "Table info not found for …"). Both seen on a three-server
/// cluster when a tablet server is killed. The client reports them as terminal, but the next
/// metadata refresh, or the server a moment later, answers.
pub(crate) fn metadata_incomplete(e: &ClientError) -> bool {
    match e {
        ClientError::UnexpectedError { message, .. } => message.contains("not found in cluster metadata"),
        ClientError::FlussAPIError { api_error } => {
            e.api_error() == Some(ApiError::InvalidTableException) && api_error.message.contains("Table info not found")
        }
        _ => false,
    }
}

/// Whether a failure says the writer can never send again: fluss-rs 1.0.0 closes a writer for
/// good when it cannot get a writer ID (no tablet server answered, as when two of three are
/// down): it fails what it holds ("Writer ID allocation failed: …") and every later append
/// ("Fluss writer closed: Memory limiter is closed"). A new writer, on a connection of its own,
/// asks again; so the failure is retryable, and the append replaces the writer (the `writer`
/// module).
pub(crate) fn writer_dead(e: &ClientError) -> bool {
    match e {
        ClientError::WriterClosed { .. } => true,
        ClientError::UnexpectedError { message, .. } => message.starts_with("Writer ID allocation failed"),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(error: ApiError) -> ClientError {
        api_saying(error, "")
    }

    fn api_saying(error: ApiError, message: &str) -> ClientError {
        ClientError::FlussAPIError {
            api_error: fluss::rpc::ApiError { code: error.code(), message: message.to_owned() },
        }
    }

    fn unexpected(message: &str) -> ClientError {
        ClientError::UnexpectedError { message: message.to_owned(), source: None }
    }

    /// `source` as the failure of a client request.
    fn client(source: ClientError) -> FlussError {
        FlussError::Client { operation: "current_identity", table: "db.t".to_owned(), source: Box::new(source) }
    }

    #[test]
    fn a_writer_closed_for_good_is_retried_on_a_new_one_and_other_client_failures_are_not() {
        let dead = [
            ClientError::WriterClosed { message: "Memory limiter is closed".to_owned() },
            unexpected("Writer ID allocation failed: connection refused"),
        ];
        for e in dead {
            assert!(writer_dead(&e), "{e}");
            let error = FlussError::Append { table: "db.t".to_owned(), bucket: 1, source: Box::new(e) };
            assert!(error.is_retryable(), "{error}");
        }
        for other in [unexpected("No tablet server available to allocate writer ID"), api(ApiError::TableNotExist)] {
            assert!(!writer_dead(&other), "{other}");
        }
    }

    #[test]
    fn a_bucket_whose_leader_has_not_taken_it_up_yet_counts_as_a_moving_leader() {
        for moving in [
            ApiError::NotLeaderOrFollower,
            ApiError::LeaderNotAvailableException,
            ApiError::UnknownTableOrBucketException,
        ] {
            assert!(leader_moving(&api(moving)), "{moving:?}");
        }
        for other in [ApiError::TableNotExist, ApiError::NotEnoughReplicasException, ApiError::AuthenticateException] {
            assert!(!leader_moving(&api(other)), "{other:?}");
        }
    }

    #[test]
    fn a_server_that_does_not_know_the_coordinator_or_the_table_yet_is_retried_and_an_invalid_table_is_not() {
        for retried in [
            unexpected("Coordinator server not found in cluster metadata"),
            api_saying(ApiError::InvalidTableException, "Table info not found for db.t"),
        ] {
            let error = client(retried);
            assert!(error.is_retryable(), "{error}");
        }
        for terminal in [
            api_saying(ApiError::InvalidTableException, "Table name is invalid"),
            unexpected("Invalid record batch: crc mismatch"),
        ] {
            let error = client(terminal);
            assert!(!error.is_retryable(), "{error}");
        }
    }
}
