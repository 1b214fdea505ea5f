//! What a backend crate gives the crates that choose a log at run time: [`BackendConfig`], its
//! configuration named by a log URL, and [`DEFAULT_PARTITIONS`].
//!
//! The recovery crate lists each backend once, with its cargo feature and its configuration
//! type, and builds its `LogConfig` and `AnyLog` from this trait alone: a new backend needs no
//! other code there.

use crate::{Error, StateLog};
use std::fmt;
use std::future::Future;

/// Partitions of a log created from a URL that names no count (`partitions=N`, `buckets=N`,
/// `memory:N`).
pub const DEFAULT_PARTITIONS: u32 = 8;

/// The configuration of one backend's log: parsed from a log URL of the backend's scheme,
/// shown as one, and opened into the backend's [`StateLog`].
///
/// Implementations:
///
/// - MUST parse in [`from_url`](BackendConfig::from_url) exactly the URLs whose scheme is
///   [`SCHEME`](BackendConfig::SCHEME) and refuse every other with [`Error::BadUrl`], naming
///   what is wrong with the URL, its secrets shown as `***` (build on [`crate::url::LogUrl`]);
/// - MUST show as (`Display`) a URL that [`from_url`](BackendConfig::from_url) reads back to a
///   configuration naming the same log, and MUST NOT show a secret in `Display` or `Debug`
///   (name it by reference: `password_env=VAR`, `password_file=PATH`);
/// - MUST give, from [`read_only`](BackendConfig::read_only), a configuration whose log
///   creates, migrates and writes nothing: it takes the partition count as found, and its
///   appends and reclaims fail with [`Error::Unsupported`] (a backend whose every open is a
///   new, empty log, like the in-memory one, has nothing to protect and may return itself);
/// - MUST create a log with [`partitions`](BackendConfig::partitions) partitions (buckets,
///   ...) when [`open`](BackendConfig::open) finds none, and SHOULD default to
///   [`DEFAULT_PARTITIONS`] when the URL names no count;
/// - SHOULD open in [`open`](BackendConfig::open) without blocking the executor for long
///   (a backend whose open does blocking I/O says so in its documentation).
pub trait BackendConfig: Clone + fmt::Debug + fmt::Display + PartialEq + Send + Sync + 'static {
    /// The log [`open`](BackendConfig::open) returns.
    type Log: StateLog;

    /// The scheme of the backend's log URLs (`file`, `kafka`, ...): also the name of the
    /// cargo feature that compiles the backend in where logs are chosen at run time.
    const SCHEME: &'static str;

    /// The shape of the backend's URLs, for an error that lists the backends: `file:DIR`,
    /// `kafka://HOST:PORT/TOPIC`, ...
    const URL_FORM: &'static str;

    /// The configuration `url` names, by the backend's own grammar.
    fn from_url(url: &str) -> Result<Self, Error>;

    /// The same log, opened as it is for tools that only read; see the trait's contract.
    #[must_use]
    fn read_only(self) -> Self;

    /// The same log with `partitions` partitions: for a tool that learnt the count of an
    /// existing log and opens it for writing.
    #[must_use]
    fn with_partitions(self, partitions: u32) -> Self;

    /// The partitions a log created from this configuration gets.
    fn partitions(&self) -> u32;

    /// Opens the log, creating it if absent (unless [`read_only`](BackendConfig::read_only)).
    fn open(&self) -> impl Future<Output = Result<Self::Log, Error>> + Send;
}
