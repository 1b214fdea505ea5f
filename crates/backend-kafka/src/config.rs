//! [`KafkaConfig`]: where the log lives, how clients reach it, and its URL grammar.

use actionstate_core::url::{LogUrl, SecretSource};
use actionstate_core::{DEFAULT_PARTITIONS, Error as CoreError};
use rdkafka::config::ClientConfig;
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// How clients authenticate: passed to librdkafka as `security.protocol`, `sasl.mechanism`,
/// `sasl.username` and `sasl.password`. `Debug` prints the password as `***`.
#[derive(Clone, PartialEq, Eq)]
pub struct Security {
    /// `security.protocol`, e.g. `SASL_PLAINTEXT` or `SASL_SSL`.
    pub protocol: String,
    /// `sasl.mechanism`, e.g. `PLAIN`.
    pub mechanism: String,
    /// `sasl.username`.
    pub username: String,
    /// `sasl.password`; never printed.
    pub password: String,
    /// Where the password came from (`password_env=VAR` or `password_file=PATH` of a log
    /// URL), so that the configuration's URL ([`KafkaConfig`]'s `Display`) names it by
    /// reference; `None` for a password given in code, which the URL then shows as
    /// `password=***`.
    pub password_source: Option<SecretSource>,
}

impl Security {
    /// SASL/PLAIN over a plaintext connection (`SASL_PLAINTEXT`, `PLAIN`).
    pub fn sasl_plain(username: impl Into<String>, password: impl Into<String>) -> Self {
        Security {
            protocol: "SASL_PLAINTEXT".to_owned(),
            mechanism: "PLAIN".to_owned(),
            username: username.into(),
            password: password.into(),
            password_source: None,
        }
    }

    /// The same credentials, noting that the password came from `source`.
    pub fn with_password_source(self, source: SecretSource) -> Self {
        Security { password_source: Some(source), ..self }
    }
}

impl fmt::Debug for Security {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Security")
            .field("protocol", &self.protocol)
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .field("password", &"***")
            .field("password_source", &self.password_source)
            .finish()
    }
}

/// Where the log lives and how clients reach it.
#[derive(Clone, PartialEq, Eq)]
pub struct KafkaConfig {
    /// `bootstrap.servers`: comma-separated `host:port` list.
    pub bootstrap: String,
    /// The topic holding the log.
    pub topic: String,
    /// Partition count of the topic; used when creating it and checked when it exists.
    pub partitions: u32,
    /// Replication factor used when creating the topic; `None` takes the broker's default.
    pub replication: Option<i32>,
    /// Authentication, if the listener needs it.
    pub security: Option<Security>,
    /// How long an append may wait for its delivery report (`message.timeout.ms`); an append
    /// without one fails at the latest a second after it.
    pub delivery_timeout: Duration,
    /// How long a read may go without receiving a record before it fails.
    pub read_stall_timeout: Duration,
    /// Timeout of metadata, watermark and admin requests, and of waiting for a created topic.
    pub request_timeout: Duration,
    /// Further librdkafka properties set on every client (TLS settings, for example). `Debug`
    /// prints their names only.
    pub client_properties: BTreeMap<String, String>,
    /// Opens an existing topic whose `cleanup.policy` includes `delete` with a finite
    /// `retention.ms` or `retention.bytes` (default `false`: such a topic is refused with
    /// [`KafkaError::TopicRetention`](crate::KafkaError::TopicRetention)). With it, Kafka deletes records older or further back
    /// than the topic's retention whether a checkpoint needs them or not, and restoring a
    /// checkpoint that does then fails with [`actionstate_core::Error::DataLoss`]. See
    /// [topic configuration](crate#topic-configuration).
    pub allow_retention: bool,
    /// Further settings a topic gets when the log creates it (`segment.bytes`,
    /// `min.insync.replicas`, ...), over the crate's own segment settings. `cleanup.policy`,
    /// `retention.ms` and `retention.bytes` are the crate's to choose (see
    /// [topic configuration](crate#topic-configuration)) and are refused here. An existing
    /// topic is not altered to match.
    pub topic_settings: BTreeMap<String, String>,
    /// Opens an existing topic as it is, for tools that only read (`actionstate inspect`):
    /// the topic is never created or migrated, its partition count is taken as found
    /// (`partitions` is not checked), and [`append`](actionstate_core::StateLog::append) and
    /// [`reclaim`](actionstate_core::StateLog::reclaim) fail with
    /// [`actionstate_core::Error::Unsupported`]. Default `false`.
    pub read_only: bool,
}

impl KafkaConfig {
    /// A configuration with default timeouts (30 s delivery, 30 s read stall, 30 s requests),
    /// the broker's default replication factor, no authentication, and topics with time or size
    /// retention refused.
    pub fn new(bootstrap: impl Into<String>, topic: impl Into<String>, partitions: u32) -> Self {
        KafkaConfig {
            bootstrap: bootstrap.into(),
            topic: topic.into(),
            partitions,
            replication: None,
            security: None,
            delivery_timeout: Duration::from_secs(30),
            read_stall_timeout: Duration::from_secs(30),
            request_timeout: Duration::from_secs(30),
            client_properties: BTreeMap::new(),
            allow_retention: false,
            topic_settings: BTreeMap::new(),
            read_only: false,
        }
    }

    /// The librdkafka settings shared by every client of the log.
    pub(crate) fn client_config(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &self.bootstrap);
        c.set("socket.timeout.ms", millis(self.request_timeout.max(Duration::from_millis(10))));
        if let Some(s) = &self.security {
            c.set("security.protocol", &s.protocol);
            c.set("sasl.mechanism", &s.mechanism);
            c.set("sasl.username", &s.username);
            c.set("sasl.password", &s.password);
        }
        for (k, v) in &self.client_properties {
            c.set(k, v);
        }
        c
    }
}

impl fmt::Debug for KafkaConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KafkaConfig")
            .field("bootstrap", &self.bootstrap)
            .field("topic", &self.topic)
            .field("partitions", &self.partitions)
            .field("replication", &self.replication)
            .field("security", &self.security)
            .field("delivery_timeout", &self.delivery_timeout)
            .field("read_stall_timeout", &self.read_stall_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("client_properties", &self.client_properties.keys().collect::<Vec<_>>())
            .field("allow_retention", &self.allow_retention)
            .field("topic_settings", &self.topic_settings)
            .field("read_only", &self.read_only)
            .finish()
    }
}

/// The log URL naming this configuration, as an operator passes it back to any command:
/// `kafka://SERVERS/TOPIC` and every parameter whose value differs from its default, so that
/// [`KafkaConfig::from_url`] reads it back to an equal configuration. The password is named
/// by reference (`password_env=VAR` or `password_file=PATH`), never shown; a password given
/// in code without one shows as `password=***`, which `from_url` refuses with a hint. Not
/// shown, since no URL parameter sets them: `read_only`, and client properties other than
/// `security.protocol` and `ssl.ca.location` (they may hold secrets, as `ssl.key.password`).
impl fmt::Display for KafkaConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "kafka://{}/{}", self.bootstrap, self.topic)?;
        let defaults = KafkaConfig::new("", "", DEFAULT_PARTITIONS);
        let mut params: Vec<String> = Vec::new();
        if self.partitions != defaults.partitions {
            params.push(format!("partitions={}", self.partitions));
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
        let ca_file = self.client_properties.get("ssl.ca.location");
        let protocol = match &self.security {
            Some(s) => s.protocol.as_str(),
            None => self.client_properties.get("security.protocol").map_or("PLAINTEXT", String::as_str),
        };
        // What `from_url` takes when `security=` is left out.
        let implied = match (self.security.is_some(), ca_file.is_some()) {
            (true, true) => "SASL_SSL",
            (true, false) => "SASL_PLAINTEXT",
            (false, true) => "SSL",
            (false, false) => "PLAINTEXT",
        };
        if !protocol.eq_ignore_ascii_case(implied) {
            params.push(format!("security={}", protocol.to_ascii_lowercase()));
        }
        if let Some(s) = &self.security {
            if s.mechanism != "PLAIN" {
                params.push(format!("sasl_mechanism={}", s.mechanism));
            }
            params.push(format!("username={}", s.username));
            params.push(password_reference(s.password_source.as_ref()));
        }
        if let Some(ca) = ca_file {
            params.push(format!("ca_file={ca}"));
        }
        if self.allow_retention {
            params.push("allow_retention=true".to_owned());
        }
        for (name, value) in &self.topic_settings {
            params.push(format!("topic.{name}={value}"));
        }
        if !params.is_empty() {
            write!(f, "?{}", params.join("&"))?;
        }
        Ok(())
    }
}

/// `password_env=VAR`, `password_file=PATH`, or `password=***` for a password without a
/// reference: never the password itself.
fn password_reference(source: Option<&SecretSource>) -> String {
    match source {
        Some(SecretSource::Env(var)) => format!("password_env={var}"),
        Some(SecretSource::File(path)) => format!("password_file={}", path.display()),
        None => "password=***".to_owned(),
    }
}

// The settings a topic gets from the crate: created with them, and checked (and migrated) against
// them on open by `topic_config.rs`.

/// The topic setting that decides whether Kafka compacts and whether it deletes.
pub(crate) const CLEANUP_POLICY: &str = "cleanup.policy";
/// How long Kafka keeps records under a `delete` policy.
pub(crate) const RETENTION_MS: &str = "retention.ms";
/// How many bytes per partition Kafka keeps under a `delete` policy.
pub(crate) const RETENTION_BYTES: &str = "retention.bytes";
/// Compaction removes upserts behind tombstones; `delete` lets `DeleteRecords` run.
pub(crate) const POLICY: &str = "compact,delete";
/// No time or size limit.
pub(crate) const UNLIMITED: &str = "-1";

/// The settings a created topic gets, and a migrated one is altered to.
pub(crate) const SETTINGS: [(&str, &str); 3] =
    [(CLEANUP_POLICY, POLICY), (RETENTION_MS, UNLIMITED), (RETENTION_BYTES, UNLIMITED)];

/// The settings the crate chooses itself, which [`KafkaConfig::topic_settings`] may not set.
pub(crate) const CRATE_CHOSEN: [&str; 3] = [CLEANUP_POLICY, RETENTION_MS, RETENTION_BYTES];

/// The segment size and age a created topic gets, so that reclaimed records give their disk
/// back soon (see the crate documentation's "Topic configuration"). Not migrated: an existing
/// topic keeps its segments, which bound the disk it holds less tightly but still.
pub(crate) const SEGMENTS: [(&str, &str); 2] = [("segment.bytes", "67108864"), ("segment.ms", "3600000")];

pub(crate) fn millis(d: Duration) -> String {
    d.as_millis().max(1).to_string()
}

impl KafkaConfig {
    /// The configuration a log URL names:
    ///
    /// `kafka://HOST:PORT[,HOST:PORT...]/TOPIC[?PARAMETER=VALUE&...]`
    ///
    /// The topic name is 1 to 249 ASCII letters, digits, `.`, `_` and `-`. Parameters:
    ///
    /// | parameter | meaning | default |
    /// |---|---|---|
    /// | `partitions=N` | partitions of a created topic; an existing one must have `N` | 8 |
    /// | `replication=R` | replication factor of a created topic | the broker's |
    /// | `request_timeout=30s` | metadata, watermark and admin requests | 30 s |
    /// | `delivery_timeout=30s` | an append's delivery report | 30 s |
    /// | `read_stall_timeout=30s` | a read that receives nothing | 30 s |
    /// | `security=P` | `plaintext`, `ssl`, `sasl_plaintext` or `sasl_ssl` | `plaintext`, or `sasl_plaintext` with a user name (`sasl_ssl` with `ca_file` too) |
    /// | `sasl_mechanism=M` | `PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512` | `PLAIN` |
    /// | `username=U` | SASL user name | none |
    /// | `password_env=VAR` or `password_file=PATH` | where the SASL password is | none |
    /// | `ca_file=PATH` | CA certificates to verify the brokers (`ssl.ca.location`) | the system's |
    /// | `allow_retention=true` | see [`KafkaConfig::allow_retention`] | `false` |
    /// | `topic.SETTING=VALUE` | see [`KafkaConfig::topic_settings`] | none |
    ///
    /// Durations take a unit (`ms`, `s`, `m`, `h`, `d`). The password itself is never part of
    /// the URL: `password=...` is refused. Errors are [`CoreError::BadUrl`], naming what is
    /// wrong and showing no secret.
    pub fn from_url(text: &str) -> Result<KafkaConfig, CoreError> {
        let mut url = LogUrl::parse(text)?;
        let (bootstrap, topic) = servers_and_topic(&url)?;
        let partitions = url.take_count("partitions")?.unwrap_or(DEFAULT_PARTITIONS);
        let mut config = KafkaConfig::new(bootstrap, topic, partitions);
        config.replication = url.take_count("replication")?.map(|r| i32::try_from(r).unwrap_or(i32::MAX));
        config.request_timeout = url.take_duration("request_timeout")?.unwrap_or(config.request_timeout);
        config.delivery_timeout = url.take_duration("delivery_timeout")?.unwrap_or(config.delivery_timeout);
        config.read_stall_timeout = url.take_duration("read_stall_timeout")?.unwrap_or(config.read_stall_timeout);
        config.allow_retention = url.take_flag("allow_retention")?.unwrap_or(false);
        let protocol = url.take("security");
        let mechanism = url.take("sasl_mechanism");
        let username = url.take("username");
        let password = url.take_secret("password", "password_env", "password_file")?;
        let ca_file = url.take("ca_file");
        config.topic_settings = url.take_prefixed("topic.");
        let protocol = security_protocol(&url, protocol.as_deref(), username.is_some(), ca_file.is_some())?;
        check_credentials(&url, &protocol, username.is_some(), password.is_some(), mechanism.is_some())?;
        if let (Some(username), Some(password)) = (username, password) {
            let mechanism = sasl_mechanism(&url, mechanism.as_deref())?;
            // Core does no I/O: the variable or file is read here.
            let secret = password.resolve_with(&url, |v| std::env::var(v).ok(), |p| std::fs::read_to_string(p))?;
            config.security = Some(Security {
                protocol: protocol.clone(),
                mechanism: mechanism.to_owned(),
                username,
                password: secret.expose().to_owned(),
                password_source: Some(password),
            });
        } else if protocol != "PLAINTEXT" {
            config.client_properties.insert("security.protocol".to_owned(), protocol.clone());
        }
        if let Some(ca) = ca_file {
            if !protocol.ends_with("SSL") {
                return Err(url.error(format!("`ca_file` needs security ssl or sasl_ssl, not {protocol}")));
            }
            config.client_properties.insert("ssl.ca.location".to_owned(), ca);
        }
        for setting in config.topic_settings.keys() {
            if CRATE_CHOSEN.contains(&setting.as_str()) {
                return Err(url.error(format!(
                    "`topic.{setting}` is chosen by the backend (see the crate's topic configuration)"
                )));
            }
        }
        url.finish()?;
        Ok(config)
    }
}

/// The bootstrap servers and the topic of a `kafka://` URL.
fn servers_and_topic(url: &LogUrl) -> Result<(String, String), CoreError> {
    if url.scheme() != "kafka" {
        return Err(url.error("expected `kafka://HOST:PORT/TOPIC`"));
    }
    let bootstrap = url.servers()?.to_owned();
    let topic = url.path().to_owned();
    if topic.is_empty() || topic.len() > 249 || topic == "." || topic == ".." {
        return Err(url.error("`kafka://HOST:PORT/TOPIC` needs a topic name of 1 to 249 characters"));
    }
    if !topic.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)) {
        return Err(url.error("a topic name consists of ASCII letters, digits, `.`, `_` and `-`"));
    }
    Ok((bootstrap, topic))
}

/// librdkafka's `security.protocol` for `security=`, or when absent the one that a user name
/// (SASL) and a CA file (TLS) imply.
fn security_protocol(url: &LogUrl, protocol: Option<&str>, username: bool, ca_file: bool) -> Result<String, CoreError> {
    Ok(match protocol {
        Some(p @ ("plaintext" | "ssl" | "sasl_plaintext" | "sasl_ssl")) => p.to_ascii_uppercase(),
        Some(other) => {
            return Err(url.error(format!("`security={other}`: expected plaintext, ssl, sasl_plaintext or sasl_ssl")));
        }
        None => match (username, ca_file) {
            (true, true) => "SASL_SSL".to_owned(),
            (true, false) => "SASL_PLAINTEXT".to_owned(),
            (false, true) => "SSL".to_owned(),
            (false, false) => "PLAINTEXT".to_owned(),
        },
    })
}

/// Refuses SASL without a user name and password, and a user name, password or mechanism
/// without SASL.
fn check_credentials(
    url: &LogUrl,
    protocol: &str,
    username: bool,
    password: bool,
    mechanism: bool,
) -> Result<(), CoreError> {
    let sasl = protocol.starts_with("SASL");
    match (sasl, username, password) {
        (true, true, true) => Ok(()),
        (true, _, _) => {
            Err(url.error(format!("security {protocol} needs `username=` and `password_env=` or `password_file=`")))
        }
        (false, false, false) if !mechanism => Ok(()),
        (false, _, _) => Err(url.error(format!(
            "a user name, password or SASL mechanism needs security sasl_plaintext or sasl_ssl, not {protocol}"
        ))),
    }
}

/// The SASL mechanism `sasl_mechanism=` names, `PLAIN` when absent.
fn sasl_mechanism(url: &LogUrl, mechanism: Option<&str>) -> Result<&'static str, CoreError> {
    match mechanism {
        None | Some("PLAIN") => Ok("PLAIN"),
        Some("SCRAM-SHA-256") => Ok("SCRAM-SHA-256"),
        Some("SCRAM-SHA-512") => Ok("SCRAM-SHA-512"),
        Some(other) => {
            Err(url.error(format!("`sasl_mechanism={other}`: expected PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")))
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    #[test]
    fn a_plain_url_takes_the_crate_defaults() {
        let c = KafkaConfig::from_url("kafka://127.0.0.1:9092,b:9093/agent-state").unwrap();
        let d = KafkaConfig::new("127.0.0.1:9092,b:9093", "agent-state", DEFAULT_PARTITIONS);
        assert_eq!(format!("{c:?}"), format!("{d:?}"));
    }

    #[test]
    fn parameters_set_timeouts_security_and_topic_settings() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("password");
        std::fs::write(&file, "pa55-from-file\n").unwrap();
        let c = KafkaConfig::from_url(&format!(
            "kafka://h:1/t?partitions=3&replication=2&request_timeout=10s&delivery_timeout=250ms\
             &read_stall_timeout=1m&username=agent&password_file={}&sasl_mechanism=SCRAM-SHA-512\
             &ca_file=/etc/ca.pem&allow_retention=true&topic.segment.bytes=4194304",
            file.display()
        ))
        .unwrap();
        assert_eq!((c.partitions, c.replication), (3, Some(2)));
        assert_eq!(c.request_timeout, Duration::from_secs(10));
        assert_eq!(c.delivery_timeout, Duration::from_millis(250));
        assert_eq!(c.read_stall_timeout, Duration::from_secs(60));
        let s = c.security.clone().unwrap();
        assert_eq!(
            (s.protocol.as_str(), s.mechanism.as_str(), s.username.as_str()),
            ("SASL_SSL", "SCRAM-SHA-512", "agent")
        );
        assert_eq!(s.password, "pa55-from-file");
        assert_eq!(c.client_properties.get("ssl.ca.location").map(String::as_str), Some("/etc/ca.pem"));
        assert!(c.allow_retention);
        assert_eq!(c.topic_settings.get("segment.bytes").map(String::as_str), Some("4194304"));
        assert!(!format!("{c:?}").contains("pa55-from-file"), "{c:?}");
    }

    /// Every parameter of the grammar, alone and together: the URL a configuration shows is
    /// the whole configuration (parse(display(c)) == c), with the password by reference.
    #[test]
    fn the_url_a_configuration_shows_reads_back_to_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("password");
        std::fs::write(&file, "pa55-from-file\n").unwrap();
        let file = file.display();
        // `PATH` is set wherever tests run: its value stands in for a password.
        for url in [
            "kafka://h:1/t".to_owned(),
            "kafka://a:9092,b:9093/agent.state-1?partitions=3".to_owned(),
            "kafka://h:1/t?replication=2&request_timeout=10s&delivery_timeout=250ms&read_stall_timeout=1m".to_owned(),
            "kafka://h:1/t?request_timeout=2h&delivery_timeout=7d&read_stall_timeout=1500ms".to_owned(),
            "kafka://h:1/t?username=agent&password_env=PATH".to_owned(),
            format!("kafka://h:1/t?username=agent&password_file={file}"),
            format!("kafka://h:1/t?sasl_mechanism=SCRAM-SHA-256&username=agent&password_file={file}"),
            format!("kafka://h:1/t?security=sasl_ssl&username=agent&password_file={file}"),
            format!("kafka://h:1/t?username=agent&password_file={file}&ca_file=/etc/ca.pem"),
            "kafka://h:1/t?ca_file=/etc/ca.pem".to_owned(),
            "kafka://h:1/t?security=ssl".to_owned(),
            "kafka://h:1/t?allow_retention=true&topic.min.insync.replicas=2&topic.segment.bytes=4194304".to_owned(),
            format!(
                "kafka://h:1/t?partitions=16&replication=3&request_timeout=5s&security=sasl_ssl\
                 &sasl_mechanism=SCRAM-SHA-512&username=u&password_file={file}&ca_file=/ca&allow_retention=true\
                 &topic.segment.ms=60000"
            ),
        ] {
            let config = KafkaConfig::from_url(&url).unwrap();
            let shown = config.to_string();
            assert_eq!(KafkaConfig::from_url(&shown).unwrap(), config, "{url} shown as {shown}");
            assert!(!shown.contains("pa55-from-file"), "{shown}");
        }
        // Parameters at their defaults are left out; those given are shown as typed.
        assert_eq!(
            KafkaConfig::from_url("kafka://h:1/t?partitions=8&request_timeout=30s").unwrap().to_string(),
            "kafka://h:1/t"
        );
        assert_eq!(
            KafkaConfig::from_url("kafka://h:1/t?username=u&password_env=PATH&allow_retention").unwrap().to_string(),
            "kafka://h:1/t?username=u&password_env=PATH&allow_retention=true"
        );
    }

    #[test]
    fn a_password_set_in_code_is_never_shown() {
        let mut c = KafkaConfig::new("h:1", "t", 8);
        c.security = Some(Security::sasl_plain("u", "hunter2-in-code"));
        c.client_properties.insert("ssl.key.password".into(), "hunter3-key".into());
        let (shown, debug) = (c.to_string(), format!("{c:?}"));
        assert_eq!(shown, "kafka://h:1/t?username=u&password=***");
        for text in [&shown, &debug] {
            assert!(!text.contains("hunter2") && !text.contains("hunter3"), "{text}");
        }
        // Read back, the URL is refused with the way to name a password.
        let err = KafkaConfig::from_url(&shown).unwrap_err().to_string();
        assert!(err.contains("password_env=") && !err.contains("hunter2"), "{err}");
    }

    #[test]
    fn bad_urls_are_refused_with_what_is_wrong() {
        for (url, says) in [
            ("kafka://h:1/", "topic name"),
            ("kafka://h:1/a b", "ASCII letters"),
            ("kafka://h/t", "numeric port"),
            ("kafka:/t", "needs a server"),
            ("file:/t", "expected `kafka://"),
            ("kafka://h:1/t?partitions=0", "positive integer"),
            ("kafka://h:1/t?security=tls", "expected plaintext"),
            ("kafka://h:1/t?username=u", "needs `username=` and `password_env=`"),
            ("kafka://h:1/t?security=plaintext&username=u&password_file=/p", "needs security sasl"),
            ("kafka://h:1/t?ca_file=/ca&security=plaintext", "needs security ssl"),
            ("kafka://h:1/t?topic.retention.ms=1", "chosen by the backend"),
            ("kafka://h:1/t?linger=5", "unknown parameter `linger`"),
            ("kafka://h:1/t?username=u&password=hunter2", "password_env"),
        ] {
            let err = KafkaConfig::from_url(url).unwrap_err();
            let text = err.to_string();
            assert!(matches!(err, CoreError::BadUrl { .. }), "{url}: {err:?}");
            assert!(text.contains(says), "{url}: {text}");
            assert!(!text.contains("hunter2"), "{text}");
        }
    }
}
