//! [`FlussConfig`]: where the log lives and how the client reaches it (its URL grammar is in
//! `url`).

use crate::FlussLog;
use actionstate_core::url::SecretSource;
use actionstate_core::{BackendConfig, Error as CoreError};
use fluss::config::Config;
use std::fmt;
use std::time::Duration;

/// SASL/PLAIN credentials. `Debug` prints the password as `***`.
#[derive(Clone, PartialEq, Eq)]
pub struct Security {
    /// The user name.
    pub username: String,
    /// The password; never printed.
    pub password: String,
    /// Where the password came from (`password_env=VAR` or `password_file=PATH` of a log
    /// URL), so that the configuration's URL ([`FlussConfig`]'s `Display`) names it by
    /// reference; `None` for a password given in code, which the URL then shows as
    /// `password=***`.
    pub password_source: Option<SecretSource>,
}

impl Security {
    /// SASL/PLAIN with these credentials.
    pub fn sasl_plain(username: impl Into<String>, password: impl Into<String>) -> Self {
        Security { username: username.into(), password: password.into(), password_source: None }
    }

    /// The same credentials, noting that the password came from `source`.
    pub fn with_password_source(self, source: SecretSource) -> Self {
        Security { password_source: Some(source), ..self }
    }
}

impl fmt::Debug for Security {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Security")
            .field("mechanism", &"PLAIN")
            .field("username", &self.username)
            .field("password", &"***")
            .field("password_source", &self.password_source)
            .finish()
    }
}

/// Where the log lives and how the client reaches it.
#[derive(Clone, PartialEq, Eq)]
pub struct FlussConfig {
    /// Bootstrap servers: comma-separated `host:port` list of coordinator or tablet servers.
    pub bootstrap: String,
    /// The database holding the table.
    pub database: String,
    /// The log table.
    pub table: String,
    /// Bucket count of the table; used when creating it and checked when it exists.
    pub buckets: u32,
    /// Replication factor of a table the log creates (`table.replication.factor`); `None`
    /// (the default) takes the cluster's `default.replication.factor`. An existing table is
    /// used with the replication it has.
    pub replication: Option<i32>,
    /// SASL/PLAIN credentials, if the listener needs them.
    pub security: Option<Security>,
    /// How long an append may wait for its acknowledgement.
    pub delivery_timeout: Duration,
    /// How long a read may go without receiving a record before it fails.
    pub read_stall_timeout: Duration,
    /// Timeout of connecting and of every metadata, admin and offset request.
    pub request_timeout: Duration,
    /// The writer's batch timeout (`writer_batch_timeout_ms`); values below 1 ms are raised to
    /// 1 ms, since 0 stops fluss-rs 1.0.0's sender task.
    pub batch_timeout: Duration,
    /// Whether each append flushes the writer before awaiting its acknowledgement, instead of
    /// waiting out the batch timeout.
    pub flush_on_append: bool,
    /// How old a record may get before the server may delete it by age, or `None` (the
    /// default) for never: a table the log creates gets `table.log.ttl` set to this (`0 ms`
    /// for `None`, which Fluss reads as no deletion by age), and an existing table whose TTL
    /// is shorter is refused ([`FlussError::LogRetention`](crate::FlussError::LogRetention)). With a bound, a checkpoint older
    /// than it may no longer be restorable (a rebuild from it fails as data loss); see the
    /// [`retention`](crate::retention) module.
    pub log_ttl: Option<Duration>,
    /// Opens an existing table as it is, for tools that only read (`actionstate inspect`):
    /// neither the database nor the table is created, the bucket count is taken as found
    /// (`buckets` is not checked), the TTL is not checked, and
    /// [`append`](actionstate_core::StateLog::append) fails with
    /// [`Error::Unsupported`](actionstate_core::Error::Unsupported). Default `false`.
    pub read_only: bool,
}

impl FlussConfig {
    /// A configuration with default timeouts (30 s delivery, 30 s read stall, 30 s requests),
    /// a 1 ms batch timeout, a flush after every append, the cluster's replication factor, no
    /// authentication and no deletion by age (`log_ttl: None`).
    pub fn new(
        bootstrap: impl Into<String>,
        database: impl Into<String>,
        table: impl Into<String>,
        buckets: u32,
    ) -> Self {
        FlussConfig {
            bootstrap: bootstrap.into(),
            database: database.into(),
            table: table.into(),
            buckets,
            replication: None,
            security: None,
            delivery_timeout: Duration::from_secs(30),
            read_stall_timeout: Duration::from_secs(30),
            request_timeout: Duration::from_secs(30),
            batch_timeout: Duration::from_millis(1),
            flush_on_append: true,
            log_ttl: None,
            read_only: false,
        }
    }

    /// `database.table`.
    pub fn table_name(&self) -> String {
        format!("{}.{}", self.database, self.table)
    }

    /// The fluss-rs client settings the log connects with (acks, idempotence, the batch
    /// timeout of at least 1 ms, the connect timeout, credentials), for a tool that opens a
    /// connection of its own to the same cluster.
    pub fn client_config(&self) -> Config {
        let mut c = Config {
            bootstrap_servers: self.bootstrap.clone(),
            writer_acks: "all".to_owned(),
            writer_enable_idempotence: true,
            writer_batch_timeout_ms: i64::try_from(self.batch_timeout.as_millis()).unwrap_or(i64::MAX).max(1),
            connect_timeout_ms: u64::try_from(self.request_timeout.as_millis()).unwrap_or(u64::MAX).max(1),
            ..Config::default()
        };
        if let Some(s) = &self.security {
            c.security_protocol = "sasl".to_owned();
            c.security_sasl_mechanism = "PLAIN".to_owned();
            c.security_sasl_username = s.username.clone();
            c.security_sasl_password = s.password.clone();
        }
        c
    }
}

impl fmt::Debug for FlussConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FlussConfig")
            .field("bootstrap", &self.bootstrap)
            .field("database", &self.database)
            .field("table", &self.table)
            .field("buckets", &self.buckets)
            .field("replication", &self.replication)
            .field("security", &self.security)
            .field("delivery_timeout", &self.delivery_timeout)
            .field("read_stall_timeout", &self.read_stall_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("batch_timeout", &self.batch_timeout)
            .field("flush_on_append", &self.flush_on_append)
            .field("log_ttl", &self.log_ttl)
            .field("read_only", &self.read_only)
            .finish()
    }
}

/// The log URL naming this configuration, as an operator passes it back to any command:
/// `fluss://SERVERS/DATABASE/TABLE` and every parameter whose value differs from its default,
/// so that [`FlussConfig::from_url`] reads it back to an equal configuration. The password is
/// named by reference (`password_env=VAR` or `password_file=PATH`), never shown; a password
/// given in code without one shows as `password=***`, which `from_url` refuses with a hint.
/// Not shown, since no URL parameter sets them: `read_only`, `batch_timeout` and
/// `flush_on_append`.
impl fmt::Display for FlussConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "fluss://{}/{}/{}", self.bootstrap, self.database, self.table)?;
        let defaults = FlussConfig::new("", "", "", crate::DEFAULT_BUCKETS);
        let mut params: Vec<String> = Vec::new();
        if self.buckets != defaults.buckets {
            params.push(format!("buckets={}", self.buckets));
        }
        if let Some(r) = self.replication.filter(|r| *r > 0) {
            params.push(format!("replication={r}"));
        }
        for (name, value, default) in [
            ("request_timeout", self.request_timeout, defaults.request_timeout),
            ("delivery_timeout", self.delivery_timeout, defaults.delivery_timeout),
            ("read_stall_timeout", self.read_stall_timeout, defaults.read_stall_timeout),
        ] {
            if value != default {
                params.push(format!("{name}={}", actionstate_core::url::duration_text(value)));
            }
        }
        if let Some(ttl) = self.log_ttl.filter(|t| !t.is_zero()) {
            params.push(format!("log_ttl={}", actionstate_core::url::duration_text(ttl)));
        }
        if let Some(s) = &self.security {
            params.push(format!("username={}", s.username));
            params.push(match &s.password_source {
                Some(SecretSource::Env(var)) => format!("password_env={var}"),
                Some(SecretSource::File(path)) => format!("password_file={}", path.display()),
                None => "password=***".to_owned(),
            });
        }
        if !params.is_empty() {
            write!(f, "?{}", params.join("&"))?;
        }
        Ok(())
    }
}

/// The Fluss backend as `actionstate-recovery` chooses it by a log URL's scheme; its
/// partitions are the table's buckets.
impl BackendConfig for FlussConfig {
    type Log = FlussLog;
    const SCHEME: &'static str = "fluss";
    const URL_FORM: &'static str = "fluss://HOST:PORT/DATABASE/TABLE";

    fn from_url(url: &str) -> Result<Self, CoreError> {
        FlussConfig::from_url(url)
    }

    fn read_only(self) -> Self {
        FlussConfig { read_only: true, ..self }
    }

    fn with_partitions(self, buckets: u32) -> Self {
        FlussConfig { buckets, ..self }
    }

    fn partitions(&self) -> u32 {
        self.buckets
    }

    fn open(&self) -> impl Future<Output = Result<FlussLog, CoreError>> + Send {
        FlussLog::open(self.clone())
    }
}
