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
