#![allow(clippy::unwrap_used, reason = "tests")]
//! No secret is ever printed: a table of log URLs that carry a secret inline (refused) or name
//! one by reference (`password_env`, `password_file`, resolved to a secret), each pushed
//! through every error path of `LogConfig::from_str` and `open`, with `Display` and `Debug` of
//! every value and error and everything `tracing` logged checked for the secret. Runs for
//! every backend compiled in; the names of backends that are not still go through parsing.

use actionstate_recovery::{LogConfig, open};
use std::io::Write;
use std::sync::{Arc, Mutex};

const SECRET: &str = "pa55-9f3e-never-printed";
const ENV: &str = "ACTIONSTATE_SECRETS_TEST_PASSWORD";

/// Everything `tracing` wrote while the test ran.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn urls(secret_file: &str) -> Vec<String> {
    let inline = [
        format!("file:/tmp/x?password={SECRET}"),
        format!("file:/tmp/x?partitions=2&sasl.password={SECRET}"),
        format!("kafka://127.0.0.1:1/t?username=u&password={SECRET}"),
        format!("kafka://u:{SECRET}@127.0.0.1:1/t"),
        format!("kafak://127.0.0.1:1/t?username=u&password={SECRET}"),
        format!("fluss://127.0.0.1:1/db/t?username=u&token={SECRET}"),
        format!("fluss://u:{SECRET}@127.0.0.1:1/db/t"),
        format!("nosuch://u:{SECRET}@x?secret={SECRET}"),
        format!("file://u:{SECRET}@localhost/tmp/x"),
    ];
    // By reference: parse, then fail to connect (nothing listens on port 1) or to resolve.
    let referenced = [
        format!(
            "kafka://127.0.0.1:1/t?security=sasl_plaintext&username=u&password_env={ENV}&request_timeout=1s&\
             delivery_timeout=1s"
        ),
        format!(
            "kafka://127.0.0.1:1/t?security=sasl_plaintext&username=u&password_file={secret_file}&\
             request_timeout=1s&delivery_timeout=1s"
        ),
        format!("fluss://127.0.0.1:1/db/t?username=u&password_env={ENV}&request_timeout=1s"),
        format!("fluss://127.0.0.1:1/db/t?username=u&password_file={secret_file}&request_timeout=1s"),
        format!("kafka://127.0.0.1:1/t?username=u&password_env={ENV}&no_such_parameter=1"),
    ];
    inline.into_iter().chain(referenced).collect()
}

/// Runs the check in a child process of this test binary with the secret in `ENV` (setting a
/// variable in this process would race with other threads reading the environment).
#[test]
fn no_error_debug_or_log_line_shows_a_secret() {
    if std::env::var_os(ENV).is_some() {
        return check();
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "no_error_debug_or_log_line_shows_a_secret", "--nocapture", "--test-threads=1"])
        .env(ENV, SECRET)
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the check failed:\n{text}");
    assert!(text.contains("1 passed"), "the check did not run:\n{text}");
}

#[tokio::main(flavor = "multi_thread")]
async fn check() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber =
        tracing_subscriber::fmt().with_max_level(tracing::Level::TRACE).with_writer(move || writer.clone()).finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let dir = tempfile::tempdir().unwrap();
    let secret_file = dir.path().join("secret");
    std::fs::write(&secret_file, SECRET).unwrap();

    let mut checked = 0;
    for url in urls(&secret_file.display().to_string()) {
        let mut shown = Vec::new();
        match url.parse::<LogConfig>() {
            Err(e) => shown.extend([e.to_string(), format!("{e:?}")]),
            Ok(config) => {
                shown.extend([config.to_string(), format!("{config:?}")]);
                let opened =
                    tokio::time::timeout(std::time::Duration::from_secs(60), open(&config)).await.expect("open hung");
                match opened {
                    Err(e) => shown.extend([e.to_string(), format!("{e:?}")]),
                    Ok(log) => shown.push(format!("{log:?}")),
                }
            }
        }
        for text in &shown {
            assert!(!text.contains(SECRET), "{url} printed its secret: {text}");
        }
        checked += shown.len();
    }
    let logged = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(!logged.contains(SECRET), "tracing printed a secret:\n{logged}");
    assert!(checked >= urls("f").len() * 2, "every URL was checked");
}

/// A password named by reference is read when its URL is parsed, from its file (less the
/// trailing newline) or its variable, and shown by no `Debug` or `Display`; an unset variable
/// or a missing file is an error naming it. Each server backend does the reading (core does
/// no I/O), so this runs on every one compiled in.
#[cfg(any(feature = "kafka", feature = "fluss"))]
#[test]
fn secrets_come_from_a_variable_or_a_file_and_print_as_stars() {
    // Per backend: a URL with a user name, and its password as parsed (or the error).
    type Parse = fn(&str) -> Result<(String, String), String>;
    let backends: Vec<(&str, Parse)> = vec![
        #[cfg(feature = "kafka")]
        ("kafka://h:1/t?username=u", |url| {
            let config = actionstate_kafka::KafkaConfig::from_url(url).map_err(|e| e.to_string())?;
            let shown = format!("{config} {config:?}");
            Ok((config.security.map(|s| s.password).unwrap_or_default(), shown))
        }),
        #[cfg(feature = "fluss")]
        ("fluss://h:1/db/t?username=u", |url| {
            let config = actionstate_fluss::FlussConfig::from_url(url).map_err(|e| e.to_string())?;
            let shown = format!("{config} {config:?}");
            Ok((config.security.map(|s| s.password).unwrap_or_default(), shown))
        }),
    ];
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("password");
    std::fs::write(&file, "s3cret-from-file\n").unwrap();
    // `PATH` is set wherever tests run: its value stands in for a password.
    let path = std::env::var("PATH").unwrap();
    assert!(!backends.is_empty());
    for (base, parse) in backends {
        let (password, shown) = parse(&format!("{base}&password_file={}", file.display())).unwrap();
        assert_eq!(password, "s3cret-from-file", "{base}");
        assert!(!shown.contains("s3cret") && shown.contains("password_file="), "{shown}");
        let (password, shown) = parse(&format!("{base}&password_env=PATH")).unwrap();
        assert_eq!(password, path, "{base}");
        assert!(!shown.contains(&path), "{shown}");

        let text = parse(&format!("{base}&password_env=ACTIONSTATE_URL_TEST_UNSET_VARIABLE")).unwrap_err();
        assert!(text.contains("ACTIONSTATE_URL_TEST_UNSET_VARIABLE") && text.contains("not set"), "{text}");
        let text = parse(&format!("{base}&password_file={}", dir.path().join("absent").display())).unwrap_err();
        assert!(text.contains("absent"), "{text}");
    }
}
