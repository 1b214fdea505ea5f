//! [`FileConfig`]: where and how to open a data directory, and its URL grammar.

use crate::log::FileLog;
use actionstate_core::{BackendConfig, DEFAULT_PARTITIONS, Error};
use std::fmt;
use std::path::PathBuf;

/// Where and how to open a [`FileLog`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileConfig {
    /// The data directory; created if absent.
    pub dir: PathBuf,
    /// Number of partitions. Fixed when the directory is created; a later open must pass the
    /// same number.
    pub partitions: u32,
    /// Verify the checksum of every page when opening, so a file damaged while closed is
    /// reported as [`FileError::Corrupt`](crate::FileError::Corrupt) instead of being trusted (an unverified open of a
    /// damaged file may panic inside the engine). It reads the whole file: 0.25–0.55 s per
    /// million 300-byte records in `BENCHMARKS.md`. After a crash redb verifies and repairs
    /// the file whatever this says.
    pub verify_on_open: bool,
    /// Bytes of the engine's page cache (redb keeps read and written pages there). The
    /// process's memory stays within it however large the file grows; pages outside it are
    /// read through the operating system's cache. Default [`DEFAULT_CACHE_BYTES`].
    pub cache_bytes: usize,
    /// Opens an existing data directory as it is, for tools that only read (`actionstate
    /// inspect`): the file is opened with redb's read-only database, so nothing is written or
    /// created and read permission is enough; the partition count is the stored one
    /// (`partitions` is not checked); [`append`](actionstate_core::StateLog::append),
    /// [`reclaim`](actionstate_core::StateLog::reclaim) and [`FileLog::truncate_before`] fail with
    /// [`Error::Unsupported`]. A file that was not closed cleanly (its writer crashed) is
    /// recovered in memory and read as recovered, still without writing. Default `false`.
    pub read_only: bool,
}

/// The default page cache of a data directory: 256 MiB (redb's own default is 1 GiB).
pub const DEFAULT_CACHE_BYTES: usize = 256 << 20;

impl FileConfig {
    /// A configuration for `dir` with `partitions` partitions, verification on open and the
    /// default page cache.
    pub fn new(dir: impl Into<PathBuf>, partitions: u32) -> Self {
        FileConfig {
            dir: dir.into(),
            partitions,
            verify_on_open: true,
            cache_bytes: DEFAULT_CACHE_BYTES,
            read_only: false,
        }
    }
}

impl FileConfig {
    /// The configuration a log URL names:
    ///
    /// `file:DIR[?PARAMETER=VALUE&...]` (or `file:///ABSOLUTE/DIR`, or
    /// `file://localhost/ABSOLUTE/DIR`, the same directory)
    ///
    /// A `file://HOST/...` URL with any other host is refused: a file log is on this machine,
    /// and reading the host's path as a local one would open another directory.
    /// | parameter | meaning | default |
    /// |---|---|---|
    /// | `partitions=N` | partitions of a created directory; an existing one must have `N` | [`DEFAULT_PARTITIONS`] |
    /// | `cache_mb=N` | the page cache ([`FileConfig::cache_bytes`]), in MiB | 256 |
    /// | `verify_on_open=false` | skip the checksum pass of [`FileConfig::verify_on_open`] | `true` |
    ///
    /// Errors are [`Error::BadUrl`].
    pub fn from_url(text: &str) -> Result<FileConfig, Error> {
        let mut url = actionstate_core::url::LogUrl::parse(text)?;
        if url.scheme() != "file" {
            return Err(url.error("expected `file:DIR`"));
        }
        let dir = match url.authority() {
            "" => url.path().to_owned(),
            // `file://localhost/DIR` is `file:///DIR`; the path after the host is absolute.
            host if host.eq_ignore_ascii_case("localhost") && !url.path().is_empty() => format!("/{}", url.path()),
            host if host.eq_ignore_ascii_case("localhost") => String::new(),
            host => {
                // Only the host: what precedes an `@` would be credentials.
                let host = host.rsplit_once('@').map_or(host, |(_, host)| host);
                return Err(url.error(format!(
                    "`file://{host}/...` names host `{host}`, but a file log is a local directory; \
                     write `file:///ABSOLUTE/DIR` (or `file://localhost/ABSOLUTE/DIR`) or `file:DIR`"
                )));
            }
        };
        if dir.is_empty() {
            return Err(url.error("`file:` needs a directory, e.g. `file:./actionstate-data`"));
        }
        let mut config = FileConfig::new(dir, DEFAULT_PARTITIONS);
        config.partitions = url.take_count("partitions")?.unwrap_or(config.partitions);
        if let Some(mb) = url.take_count("cache_mb")? {
            config.cache_bytes = usize::try_from(mb).unwrap_or(usize::MAX).saturating_mul(1 << 20);
        }
        config.verify_on_open = url.take_flag("verify_on_open")?.unwrap_or(config.verify_on_open);
        url.finish()?;
        Ok(config)
    }
}

/// `file:DIR`, the log's name: the directory alone. Its partition count is stored in it, and
/// the page cache and the checksum pass are the settings of the process that opens it.
impl fmt::Display for FileConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "file:{}", self.dir.display())
    }
}

/// The file backend as `actionstate-recovery` chooses it by a log URL's scheme. Its open
/// blocks on disk I/O ([`FileLog::open`]).
impl BackendConfig for FileConfig {
    type Log = FileLog;
    const SCHEME: &'static str = "file";
    const URL_FORM: &'static str = "file:DIR";

    fn from_url(url: &str) -> Result<Self, Error> {
        FileConfig::from_url(url)
    }

    fn read_only(self) -> Self {
        FileConfig { read_only: true, ..self }
    }

    fn with_partitions(self, partitions: u32) -> Self {
        FileConfig { partitions, ..self }
    }

    fn partitions(&self) -> u32 {
        self.partitions
    }

    fn open(&self) -> impl Future<Output = Result<FileLog, Error>> + Send {
        std::future::ready(FileLog::open(self.clone()).map_err(Error::from))
    }
}
