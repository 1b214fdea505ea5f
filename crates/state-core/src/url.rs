//! Naming a log by one URL: the parts every backend's grammar shares.
//!
//! A log URL is `SCHEME:REST[?NAME=VALUE&...]`. Each backend crate owns its scheme's grammar
//! (`FileConfig::from_url`, `KafkaConfig::from_url`, `FlussConfig::from_url`) and builds it
//! from [`LogUrl`]: the scheme, the servers of a `SCHEME://HOST:PORT[,HOST:PORT]/PATH` form,
//! the path, and the query parameters, each taken once; [`LogUrl::finish`] refuses any the
//! grammar did not take, naming the ones it knows.
//!
//! Secrets never travel in a URL. A parameter such as `password_env=VAR` or
//! `password_file=PATH` names where the secret is ([`SecretSource`]); a parameter that would
//! carry one itself (`password=...`) is refused, and its value is shown as `***` in every
//! error. A resolved [`Secret`] prints as `***` in `Debug` and `Display`.
//!
//! Values are taken literally (no percent-decoding): a value cannot contain `&`.

use crate::Error;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

/// Parameter names whose values are never shown, whatever the grammar.
const SECRET_WORDS: [&str; 4] = ["password", "secret", "token", "credential"];

/// A log URL split into its parts; see the [module documentation](self).
#[derive(Clone, PartialEq, Eq)]
pub struct LogUrl {
    /// The URL as given, with the values of secret-looking parameters replaced by `***`.
    shown: String,
    scheme: String,
    /// `HOST:PORT` list of a `SCHEME://` URL (empty for `SCHEME:PATH`).
    servers: String,
    path: String,
    params: Vec<(String, String)>,
    taken: Vec<&'static str>,
}

impl fmt::Debug for LogUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown)
    }
}

impl fmt::Display for LogUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown)
    }
}

fn is_secret_name(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    // `password_env` and `password_file` name where a secret is: not secret themselves.
    let reference = name.ends_with("_env") || name.ends_with("_file");
    !reference && SECRET_WORDS.iter().any(|w| name.contains(w))
}

/// `text`, a log URL as an operator typed it (valid or not), with every secret it may carry
/// replaced by `***`: the value of each secret-looking query parameter (`password=`,
/// `sasl.password=`, `token=`, ...) and the password of a `SCHEME://USER:PASSWORD@HOST`
/// form, which no grammar accepts but a user may still type. Every error and context line
/// that repeats a URL shows it through this.
pub fn redact(text: &str) -> String {
    let text = redact_userinfo(text);
    let Some((head, query)) = text.split_once('?') else { return text };
    let params: Vec<String> = query
        .split('&')
        .map(|p| match p.split_once('=') {
            Some((name, _)) if is_secret_name(name) => format!("{name}=***"),
            _ => p.to_owned(),
        })
        .collect();
    format!("{head}?{}", params.join("&"))
}

/// `SCHEME://USER:PASSWORD@HOST...` with the password replaced by `***`.
fn redact_userinfo(text: &str) -> String {
    let Some((scheme, rest)) = text.split_once("://") else { return text.to_owned() };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split_once(':').map_or(userinfo, |(user, _)| user);
            let hidden = if userinfo.contains(':') { format!("{user}:***") } else { user.to_owned() };
            format!("{scheme}://{hidden}@{host}{tail}")
        }
        None => text.to_owned(),
    }
}

impl LogUrl {
    /// Splits `text` into scheme, servers, path and parameters. Fails on a missing scheme, an
    /// empty or repeated parameter name, or a parameter that would carry a secret itself.
    pub fn parse(text: &str) -> Result<LogUrl, Error> {
        let shown = redact(text.trim());
        let bad = |detail: String| Error::BadUrl { url: shown.clone(), detail };
        let text = text.trim();
        let (scheme, rest) = text
            .split_once(':')
            .filter(|(s, _)| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b)))
            .ok_or_else(|| {
                bad("a log URL starts with its scheme, e.g. `file:DIR` or `kafka://HOST:PORT/TOPIC`".into())
            })?;
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (servers, path) = match rest.strip_prefix("//") {
            // `SCHEME:///PATH`: no servers, an absolute path.
            Some(after) if after.starts_with('/') => (String::new(), after.to_owned()),
            Some(after) => match after.split_once('/') {
                Some((servers, path)) => (servers.to_owned(), path.to_owned()),
                None => (after.to_owned(), String::new()),
            },
            None => (String::new(), rest.to_owned()),
        };
        if servers.contains('@') {
            return Err(bad(
                "credentials in the host part (`USER:PASSWORD@HOST`) are refused: give `username=USER` and \
                 name where the password is with `password_env=VARIABLE` or `password_file=PATH`"
                    .into(),
            ));
        }
        let mut params: Vec<(String, String)> = Vec::new();
        for param in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = param.split_once('=').unwrap_or((param, ""));
            if name.is_empty() {
                return Err(bad(format!("a query parameter without a name: `{param}`")));
            }
            if is_secret_name(name) {
                return Err(bad(format!(
                    "`{name}` would put a secret on the command line; name where it is instead \
                     with `{name}_env=VARIABLE` or `{name}_file=PATH`"
                )));
            }
            if params.iter().any(|(n, _)| n == name) {
                return Err(bad(format!("`{name}` is given twice")));
            }
            params.push((name.to_owned(), value.to_owned()));
        }
        Ok(LogUrl { shown, scheme: scheme.to_ascii_lowercase(), servers, path, params, taken: Vec::new() })
    }

    /// The scheme, in lower case.
    pub fn scheme(&self) -> &str {
        &self.scheme
    }

    /// The path: what follows `SCHEME:` (or `SCHEME://SERVERS/`) up to the query.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// What a `SCHEME://AUTHORITY/PATH` URL names between `//` and the path, unchecked: the
    /// host of `file://HOST/DIR`. Empty for `SCHEME:PATH` and `SCHEME:///PATH`.
    pub fn authority(&self) -> &str {
        &self.servers
    }

    /// The `HOST:PORT[,HOST:PORT]` list of a `SCHEME://` URL, each checked to be a non-empty
    /// host and a port from 1 to 65535.
    pub fn servers(&self) -> Result<&str, Error> {
        if self.servers.is_empty() {
            return Err(self.error(format!("`{}://` needs a server `HOST:PORT`", self.scheme)));
        }
        for server in self.servers.split(',') {
            match server.rsplit_once(':') {
                Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0) => {}
                _ => {
                    return Err(self.error(format!("server `{server}` is not `HOST:PORT` with a numeric port")));
                }
            }
        }
        Ok(&self.servers)
    }

    /// An error about this URL.
    pub fn error(&self, detail: impl Into<String>) -> Error {
        Error::BadUrl { url: self.shown.clone(), detail: detail.into() }
    }

    /// Takes parameter `name`'s value, if given.
    pub fn take(&mut self, name: &'static str) -> Option<String> {
        self.taken.push(name);
        let at = self.params.iter().position(|(n, _)| n == name)?;
        Some(self.params.remove(at).1)
    }

    /// Takes parameter `name` parsed as `T`; `expected` says what it must be.
    pub fn take_parsed<T: FromStr>(&mut self, name: &'static str, expected: &str) -> Result<Option<T>, Error> {
        match self.take(name) {
            None => Ok(None),
            Some(v) => v.parse().map(Some).map_err(|_| self.error(format!("`{name}={v}`: {name} must be {expected}"))),
        }
    }

    /// Takes a positive count.
    pub fn take_count(&mut self, name: &'static str) -> Result<Option<u32>, Error> {
        match self.take_parsed::<u32>(name, "a positive integer")? {
            Some(0) => Err(self.error(format!("`{name}=0`: {name} must be a positive integer"))),
            n => Ok(n),
        }
    }

    /// Takes a flag: `true` or `false` (a bare `name` is `true`).
    pub fn take_flag(&mut self, name: &'static str) -> Result<Option<bool>, Error> {
        match self.take(name).as_deref() {
            None => Ok(None),
            Some("" | "true") => Ok(Some(true)),
            Some("false") => Ok(Some(false)),
            Some(v) => Err(self.error(format!("`{name}={v}`: {name} must be `true` or `false`"))),
        }
    }

    /// Takes a duration written with its unit: `250ms`, `10s`, `5m`, `2h` or `7d`.
    pub fn take_duration(&mut self, name: &'static str) -> Result<Option<Duration>, Error> {
        let Some(v) = self.take(name) else { return Ok(None) };
        parse_duration(&v).map(Some).ok_or_else(|| {
            self.error(format!("`{name}={v}`: {name} must be a whole number with a unit: ms, s, m, h or d (e.g. 30s)"))
        })
    }

    /// Takes where the secret `name` is: `NAME_env=VARIABLE` or `NAME_file=PATH` (not both).
    pub fn take_secret(
        &mut self,
        name: &'static str,
        env: &'static str,
        file: &'static str,
    ) -> Result<Option<SecretSource>, Error> {
        match (self.take(env), self.take(file)) {
            (None, None) => Ok(None),
            (Some(var), None) if !var.is_empty() => Ok(Some(SecretSource::Env(var))),
            (None, Some(path)) if !path.is_empty() => Ok(Some(SecretSource::File(PathBuf::from(path)))),
            (Some(_), Some(_)) => Err(self.error(format!("{name}: give `{env}` or `{file}`, not both"))),
            _ => Err(self.error(format!("{name}: `{env}` names a variable and `{file}` a file; neither may be empty"))),
        }
    }

    /// Takes every parameter whose name starts with `prefix`, by the rest of its name.
    pub fn take_prefixed(&mut self, prefix: &'static str) -> std::collections::BTreeMap<String, String> {
        self.taken.push(prefix);
        let (taken, kept) = std::mem::take(&mut self.params).into_iter().partition(|(n, _)| n.starts_with(prefix));
        self.params = kept;
        taken.into_iter().map(|(n, v): (String, String)| (n[prefix.len()..].to_owned(), v)).collect()
    }

    /// Fails if a parameter was given that the grammar did not take, naming those it takes.
    pub fn finish(self) -> Result<(), Error> {
        match self.params.first() {
            None => Ok(()),
            Some((name, _)) => {
                let known = if self.taken.is_empty() { "none".to_owned() } else { self.taken.join(", ") };
                Err(self.error(format!("unknown parameter `{name}` for `{}:` (known: {known})", self.scheme)))
            }
        }
    }
}

/// `250ms`, `10s`, `5m`, `2h`, `7d`.
/// `d` as a URL parameter writes it: the largest unit that divides it exactly (`7d`, `90m`,
/// `1500ms`), rounded up to whole milliseconds; what [`LogUrl::take_duration`] reads back.
pub fn duration_text(d: Duration) -> String {
    let ms = d.as_nanos().div_ceil(1_000_000);
    for (unit, per) in [("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1_000)] {
        if ms >= per && ms.is_multiple_of(per) {
            return format!("{}{unit}", ms / per);
        }
    }
    format!("{ms}ms")
}

fn parse_duration(text: &str) -> Option<Duration> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (n, unit) = text.split_at(digits);
    let n: u64 = n.parse().ok()?;
    let seconds = |per: u64| n.checked_mul(per).map(Duration::from_secs);
    match unit {
        "ms" => Some(Duration::from_millis(n)),
        "s" => seconds(1),
        "m" | "min" => seconds(60),
        "h" => seconds(3_600),
        "d" => seconds(86_400),
        _ => None,
    }
}

/// Where a secret named by a URL is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SecretSource {
    /// An environment variable, by name.
    Env(String),
    /// A file, whose contents (without a trailing newline) are the secret.
    File(PathBuf),
}

impl SecretSource {
    /// The secret this source names, read by the caller: `env` reads an environment variable
    /// by name, `file` reads a file whole (typically `|v| std::env::var(v).ok()` and
    /// `|p| std::fs::read_to_string(p)`). This crate does no I/O, so the reading is the
    /// caller's; the rules are here: a secret is never empty, a file's trailing newline is
    /// not part of it, and errors name the variable or the file, never the secret.
    pub fn resolve_with(
        &self,
        url: &LogUrl,
        env: impl FnOnce(&str) -> Option<String>,
        file: impl FnOnce(&Path) -> std::io::Result<String>,
    ) -> Result<Secret, Error> {
        match self {
            SecretSource::Env(var) => match env(var) {
                Some(v) if !v.is_empty() => Ok(Secret(v)),
                _ => Err(url.error(format!("environment variable `{var}` is not set (or empty)"))),
            },
            SecretSource::File(path) => match file(path) {
                Ok(v) if !v.trim_end_matches(['\r', '\n']).is_empty() => {
                    Ok(Secret(v.trim_end_matches(['\r', '\n']).to_owned()))
                }
                Ok(_) => Err(url.error(format!("secret file {} is empty", path.display()))),
                Err(e) => Err(url.error(format!("reading secret file {}: {e}", path.display()))),
            },
        }
    }
}

/// A secret: printed as `***` by `Debug` and `Display`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// A secret from its text.
    pub fn new(text: impl Into<String>) -> Self {
        Secret(text.into())
    }

    /// The secret itself, for the client that needs it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    #[test]
    fn splits_scheme_servers_path_and_parameters() {
        let mut url = LogUrl::parse("kafka://a:9092,b:9093/agent-state?partitions=4&allow_retention").unwrap();
        assert_eq!((url.scheme(), url.servers().unwrap(), url.path()), ("kafka", "a:9092,b:9093", "agent-state"));
        assert_eq!(url.take_count("partitions").unwrap(), Some(4));
        assert_eq!(url.take_flag("allow_retention").unwrap(), Some(true));
        assert_eq!(url.take("absent"), None);
        url.finish().unwrap();

        let url = LogUrl::parse("file:./data").unwrap();
        assert_eq!((url.scheme(), url.path()), ("file", "./data"));
        assert!(url.servers().is_err());
        let url = LogUrl::parse("file:///var/lib/state").unwrap();
        assert_eq!((url.scheme(), url.path()), ("file", "/var/lib/state"));
    }

    #[test]
    fn unknown_repeated_and_malformed_parameters_are_refused_by_name() {
        let mut url = LogUrl::parse("file:d?partitions=2&colour=red").unwrap();
        url.take_count("partitions").unwrap();
        assert!(url.take_prefixed("topic.").is_empty());
        let text = url.finish().unwrap_err().to_string();
        assert!(text.contains("unknown parameter `colour`") && text.contains("known: partitions, topic."), "{text}");
        let text = LogUrl::parse("file:d?a=1&a=2").unwrap_err().to_string();
        assert!(text.contains("`a` is given twice"), "{text}");
        let mut url = LogUrl::parse("file:d?partitions=0&n=x&t=10").unwrap();
        assert!(url.take_count("partitions").unwrap_err().to_string().contains("positive integer"));
        assert!(url.take_count("n").is_err());
        assert!(url.take_duration("t").unwrap_err().to_string().contains("unit"));
        assert!(LogUrl::parse("no-scheme").is_err());
        let url = LogUrl::parse("kafka://host/topic").unwrap();
        assert!(url.servers().unwrap_err().to_string().contains("`host`"));
    }

    #[test]
    fn durations_are_shown_as_they_are_read() {
        for (ms, text) in [(1, "1ms"), (1500, "1500ms"), (30_000, "30s"), (5_400_000, "90m"), (604_800_000, "7d")] {
            let d = Duration::from_millis(ms);
            assert_eq!(duration_text(d), text);
            assert_eq!(parse_duration(text), Some(d));
        }
    }

    #[test]
    fn durations_carry_their_unit() {
        let mut url = LogUrl::parse("x:p?a=250ms&b=10s&c=5m&d=2h&e=7d").unwrap();
        let mut d = |n| url.take_duration(n).unwrap().unwrap();
        assert_eq!(d("a"), Duration::from_millis(250));
        assert_eq!(d("b"), Duration::from_secs(10));
        assert_eq!(d("c"), Duration::from_secs(300));
        assert_eq!(d("d"), Duration::from_secs(7_200));
        assert_eq!(d("e"), Duration::from_secs(604_800));
    }

    #[test]
    fn redact_hides_every_secret_an_operator_may_type() {
        for (typed, shown) in [
            ("kafka://h:1/t?username=u&password=s", "kafka://h:1/t?username=u&password=***"),
            ("kafak://h:1/t?sasl.password=s&token=t", "kafak://h:1/t?sasl.password=***&token=***"),
            ("kafka://u:s@h:1/t?x=1", "kafka://u:***@h:1/t?x=1"),
            ("fluss://u@h:1/d/t", "fluss://u@h:1/d/t"),
            ("kafka://h:1/t?password_env=V&password_file=/f", "kafka://h:1/t?password_env=V&password_file=/f"),
            ("file:/d", "file:/d"),
        ] {
            assert_eq!(redact(typed), shown);
        }
        let e = LogUrl::parse("kafka://u:s3cret@h:1/t").unwrap_err().to_string();
        assert!(!e.contains("s3cret") && e.contains("username=USER"), "{e}");
    }

    #[test]
    fn a_secret_in_the_url_is_refused_and_never_shown() {
        let err = LogUrl::parse("kafka://h:1/t?username=u&password=hunter2").unwrap_err();
        let text = format!("{err} {err:?}");
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains("password_env") && text.contains("password=***"), "{text}");
        let err = LogUrl::parse("kafka://h:1/t?sasl_token=abc123").unwrap_err();
        assert!(!format!("{err} {err:?}").contains("abc123"));
    }

    /// The rules of resolving, with the reading stood in for (the real reads are the
    /// backends', checked by `recovery/tests/secrets.rs`).
    #[test]
    fn secrets_are_never_empty_lose_a_trailing_newline_and_errors_name_where_they_are() {
        let no_env = |_: &str| None;
        let no_file =
            |p: &Path| Err(std::io::Error::new(std::io::ErrorKind::NotFound, format!("{} absent", p.display())));
        let mut url = LogUrl::parse("kafka://h:1/t?password_file=/run/secrets/password").unwrap();
        let source = url.take_secret("password", "password_env", "password_file").unwrap().unwrap();
        assert_eq!(source, SecretSource::File(PathBuf::from("/run/secrets/password")));
        let secret = source.resolve_with(&url, no_env, |_| Ok("s3cret-from-file\r\n".to_owned())).unwrap();
        assert_eq!(secret.expose(), "s3cret-from-file");
        assert_eq!((format!("{secret:?}"), secret.to_string()), ("***".to_owned(), "***".to_owned()));
        let text = source.resolve_with(&url, no_env, |_| Ok("\n".to_owned())).unwrap_err().to_string();
        assert!(text.contains("/run/secrets/password") && text.contains("empty"), "{text}");
        let text = source.resolve_with(&url, no_env, no_file).unwrap_err().to_string();
        assert!(text.contains("reading secret file /run/secrets/password"), "{text}");

        let mut url = LogUrl::parse("kafka://h:1/t?password_env=ACTIONSTATE_URL_TEST_VARIABLE").unwrap();
        let source = url.take_secret("password", "password_env", "password_file").unwrap().unwrap();
        let read = |v: &str| (v == "ACTIONSTATE_URL_TEST_VARIABLE").then(|| "s3cret-from-env".to_owned());
        assert_eq!(source.resolve_with(&url, read, no_file).unwrap().expose(), "s3cret-from-env");
        let unset: [fn(&str) -> Option<String>; 2] = [|_| None, |_| Some(String::new())];
        for env in unset {
            let text = source.resolve_with(&url, env, no_file).unwrap_err().to_string();
            assert!(text.contains("ACTIONSTATE_URL_TEST_VARIABLE") && text.contains("not set"), "{text}");
        }

        let mut both = LogUrl::parse("kafka://h:1/t?password_env=A&password_file=/f").unwrap();
        assert!(both.take_secret("password", "password_env", "password_file").is_err());
    }
}
