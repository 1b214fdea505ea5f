//! [`FlussConfig`]: where the log lives, how the client reaches it, and its URL grammar.

use actionstate_core::Error as CoreError;
use actionstate_core::url::{LogUrl, SecretSource};
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
    /// How long an append waits for its acknowledgement before it checks whether its bucket's
    /// leader moved, and if so replaces the writer and appends again (within the delivery
    /// timeout; see [`FlussLog`](crate::FlussLog)'s failover). Default 2 s.
    pub stall_timeout: Duration,
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
    /// A configuration with default timeouts (30 s delivery, 2 s stall, 30 s read stall, 30 s
    /// requests),
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
            stall_timeout: Duration::from_secs(2),
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
            .field("stall_timeout", &self.stall_timeout)
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
        let defaults = FlussConfig::new("", "", "", DEFAULT_BUCKETS);
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
            ("stall_timeout", self.stall_timeout, defaults.stall_timeout),
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

/// Buckets of a table created from a URL without `buckets=N`: the partitions of every
/// backend's log created without a count.
pub const DEFAULT_BUCKETS: u32 = actionstate_core::DEFAULT_PARTITIONS;

impl FlussConfig {
    /// The configuration a log URL names:
    ///
    /// `fluss://HOST:PORT[,HOST:PORT...]/DATABASE/TABLE[?PARAMETER=VALUE&...]`
    ///
    /// Database and table names are ASCII letters, digits, `_` and `-`. Parameters:
    ///
    /// | parameter | meaning | default |
    /// |---|---|---|
    /// | `buckets=N` | buckets of a created table; an existing one must have `N` | 8 |
    /// | `replication=R` | replication factor of a created table (`table.replication.factor`) | the cluster's |
    /// | `request_timeout=30s` | connecting, metadata, admin and offset requests | 30 s |
    /// | `delivery_timeout=30s` | an append's acknowledgement | 30 s |
    /// | `stall_timeout=2s` | an append unacknowledged this long checks for a moved leader ([`FlussConfig::stall_timeout`]) | 2 s |
    /// | `read_stall_timeout=30s` | a read that receives nothing | 30 s |
    /// | `log_ttl=7d` | the age after which the server may delete records ([`FlussConfig::log_ttl`]) | never |
    /// | `username=U` | SASL/PLAIN user name | none |
    /// | `password_env=VAR` or `password_file=PATH` | where the SASL password is | none |
    ///
    /// Durations take a unit (`ms`, `s`, `m`, `h`, `d`). The password itself is never part of
    /// the URL: `password=...` is refused. `ca_file` is refused: the Fluss client this crate
    /// uses (fluss-rs 1.0) has no TLS. Errors are [`CoreError::BadUrl`].
    pub fn from_url(text: &str) -> Result<FlussConfig, CoreError> {
        let mut url = LogUrl::parse(text)?;
        let example = "expected `fluss://HOST:PORT/DATABASE/TABLE`";
        if url.scheme() != "fluss" {
            return Err(url.error(example));
        }
        let bootstrap = url.servers()?.to_owned();
        let Some((database, table)) = url.path().split_once('/') else { return Err(url.error(example)) };
        let name_ok = |n: &str| {
            !n.is_empty() && n.len() <= 200 && n.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-".contains(&b))
        };
        if !name_ok(database) || !name_ok(table) {
            return Err(url.error("database and table names are 1 to 200 ASCII letters, digits, `_` and `-`"));
        }
        let (database, table) = (database.to_owned(), table.to_owned());
        let buckets = url.take_count("buckets")?.unwrap_or(DEFAULT_BUCKETS);
        if i32::try_from(buckets).is_err() {
            return Err(url.error(format!("`buckets={buckets}` is more than a table can have")));
        }
        let mut config = FlussConfig::new(bootstrap, database, table, buckets);
        config.replication = match url.take_count("replication")? {
            Some(r) => Some(
                i32::try_from(r)
                    .map_err(|_| url.error(format!("`replication={r}` is more than a cluster can have")))?,
            ),
            None => None,
        };
        config.request_timeout = url.take_duration("request_timeout")?.unwrap_or(config.request_timeout);
        config.delivery_timeout = url.take_duration("delivery_timeout")?.unwrap_or(config.delivery_timeout);
        config.stall_timeout = match url.take_duration("stall_timeout")? {
            Some(t) if t.is_zero() => return Err(url.error("`stall_timeout=0`: it must be positive")),
            t => t.unwrap_or(config.stall_timeout),
        };
        config.read_stall_timeout = url.take_duration("read_stall_timeout")?.unwrap_or(config.read_stall_timeout);
        match url.take_duration("log_ttl")? {
            Some(t) if t.is_zero() => {
                return Err(url.error("`log_ttl=0`: leave log_ttl out for no deletion by age"));
            }
            ttl => config.log_ttl = ttl,
        }
        let username = url.take("username");
        let password = url.take_secret("password", "password_env", "password_file")?;
        if url.take("ca_file").is_some() || url.take("security").is_some_and(|s| s.contains("ssl")) {
            return Err(url.error("TLS is not available: the Fluss client (fluss-rs 1.0) has none"));
        }
        match (username, password) {
            (Some(username), Some(password)) => {
                // Core does no I/O: the variable or file is read here.
                let secret = password.resolve_with(&url, |v| std::env::var(v).ok(), |p| std::fs::read_to_string(p))?;
                config.security = Some(Security::sasl_plain(username, secret.expose()).with_password_source(password));
            }
            (None, None) => {}
            _ => return Err(url.error("SASL needs both `username=` and `password_env=` or `password_file=`")),
        }
        url.finish()?;
        Ok(config)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    #[test]
    fn a_plain_url_takes_the_crate_defaults() {
        let c = FlussConfig::from_url("fluss://127.0.0.1:9123/agents/state").unwrap();
        assert_eq!(c, FlussConfig::new("127.0.0.1:9123", "agents", "state", DEFAULT_BUCKETS));
    }

    #[test]
    fn parameters_set_buckets_timeouts_ttl_and_credentials() {
        let dir = std::env::temp_dir().join(format!("actionstate-fluss-url-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("password");
        std::fs::write(&file, "fluss-pa55\n").unwrap();
        let c = FlussConfig::from_url(&format!(
            "fluss://a:1,b:2/db/t?buckets=3&replication=3&request_timeout=5s&delivery_timeout=2s&stall_timeout=500ms&read_stall_timeout=1m\
             &log_ttl=7d&username=agent&password_file={}",
            file.display()
        ))
        .unwrap();
        assert_eq!((c.bootstrap.as_str(), c.buckets, c.replication), ("a:1,b:2", 3, Some(3)));
        assert_eq!(c.request_timeout, Duration::from_secs(5));
        assert_eq!(c.delivery_timeout, Duration::from_secs(2));
        assert_eq!(c.stall_timeout, Duration::from_millis(500));
        assert_eq!(c.read_stall_timeout, Duration::from_secs(60));
        assert_eq!(c.log_ttl, Some(Duration::from_secs(7 * 86_400)));
        assert_eq!(
            c.security,
            Some(Security::sasl_plain("agent", "fluss-pa55").with_password_source(SecretSource::File(file.clone())))
        );
        assert!(!format!("{c:?}").contains("fluss-pa55"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Every parameter of the grammar: the URL a configuration shows is the whole
    /// configuration (parse(display(c)) == c), with the password by reference.
    #[test]
    fn the_url_a_configuration_shows_reads_back_to_it() {
        let dir = std::env::temp_dir().join(format!("actionstate-fluss-display-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("password");
        std::fs::write(&file, "fluss-pa55\n").unwrap();
        let file = file.display();
        // `PATH` is set wherever tests run: its value stands in for a password.
        for url in [
            "fluss://h:1/db/t".to_owned(),
            "fluss://a:1,b:2/db_1/log-2?buckets=3&replication=2".to_owned(),
            "fluss://h:1/db/t?request_timeout=5s&delivery_timeout=250ms&read_stall_timeout=2m".to_owned(),
            "fluss://h:1/db/t?log_ttl=7d".to_owned(),
            "fluss://h:1/db/t?log_ttl=90m".to_owned(),
            "fluss://h:1/db/t?log_ttl=1500ms".to_owned(),
            "fluss://h:1/db/t?username=agent&password_env=PATH".to_owned(),
            format!("fluss://h:1/db/t?buckets=16&log_ttl=1h&username=agent&password_file={file}"),
        ] {
            let config = FlussConfig::from_url(&url).unwrap();
            let shown = config.to_string();
            assert_eq!(FlussConfig::from_url(&shown).unwrap(), config, "{url} shown as {shown}");
            assert!(!shown.contains("fluss-pa55"), "{shown}");
        }
        assert_eq!(
            FlussConfig::from_url("fluss://h:1/db/t?buckets=8&request_timeout=30s").unwrap().to_string(),
            "fluss://h:1/db/t"
        );
        assert_eq!(
            FlussConfig::from_url("fluss://h:1/db/t?log_ttl=168h&username=u&password_env=PATH").unwrap().to_string(),
            "fluss://h:1/db/t?log_ttl=7d&username=u&password_env=PATH"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_password_set_in_code_is_never_shown() {
        let mut c = FlussConfig::new("h:1", "db", "t", 8);
        c.security = Some(Security::sasl_plain("u", "hunter2-in-code"));
        let (shown, debug) = (c.to_string(), format!("{c:?}"));
        assert_eq!(shown, "fluss://h:1/db/t?username=u&password=***");
        assert!(!shown.contains("hunter2") && !debug.contains("hunter2"), "{shown} {debug}");
        let err = FlussConfig::from_url(&shown).unwrap_err().to_string();
        assert!(err.contains("password_env=") && !err.contains("hunter2"), "{err}");
    }

    #[test]
    fn bad_urls_are_refused_with_what_is_wrong() {
        for (url, says) in [
            ("fluss://h:1/db", "DATABASE/TABLE"),
            ("fluss://h:1/db/t.x", "ASCII letters"),
            ("fluss://h/db/t", "numeric port"),
            ("kafka://h:1/db/t", "expected `fluss://"),
            ("fluss://h:1/db/t?buckets=0", "positive integer"),
            ("fluss://h:1/db/t?replication=0", "positive integer"),
            ("fluss://h:1/db/t?replication=4294967296", "positive integer"),
            ("fluss://h:1/db/t?replication=2147483648", "more than a cluster can have"),
            ("fluss://h:1/db/t?log_ttl=0s", "leave log_ttl out"),
            ("fluss://h:1/db/t?log_ttl=7", "unit"),
            ("fluss://h:1/db/t?ca_file=/ca", "TLS is not available"),
            ("fluss://h:1/db/t?username=u", "needs both"),
            ("fluss://h:1/db/t?partitions=2", "unknown parameter `partitions`"),
            ("fluss://h:1/db/t?username=u&password=hunter2", "password_env"),
        ] {
            let err = FlussConfig::from_url(url).unwrap_err();
            let text = err.to_string();
            assert!(matches!(err, CoreError::BadUrl { .. }), "{url}: {err:?}");
            assert!(text.contains(says), "{url}: {text}");
            assert!(!text.contains("hunter2"), "{text}");
        }
    }
}
