//! The URL grammar of a Fluss log: [`FlussConfig::from_url`].

use crate::{FlussConfig, Security};
use actionstate_core::Error as CoreError;
use actionstate_core::url::LogUrl;

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
    use actionstate_core::url::SecretSource;
    use std::time::Duration;

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
            "fluss://a:1,b:2/db/t?buckets=3&replication=3&request_timeout=5s&delivery_timeout=2s&read_stall_timeout=1m\
             &log_ttl=7d&username=agent&password_file={}",
            file.display()
        ))
        .unwrap();
        assert_eq!((c.bootstrap.as_str(), c.buckets, c.replication), ("a:1,b:2", 3, Some(3)));
        assert_eq!(c.request_timeout, Duration::from_secs(5));
        assert_eq!(c.delivery_timeout, Duration::from_secs(2));
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
