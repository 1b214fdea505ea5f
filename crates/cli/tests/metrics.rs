#![allow(clippy::unwrap_used, reason = "tests")]
//! `--metrics ADDR`: `actionstate demo` serves the store's metrics in the Prometheus text
//! format while it runs, scraped here over plain HTTP, and keeps serving them for `--linger`
//! seconds once it has finished, so the final values can be compared with its summary.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long any wait of these tests lasts at most: a debug build on a loaded machine runs the
/// demo's few hundred inputs in well under a minute.
const PATIENCE: Duration = Duration::from_secs(120);

/// Kills the demo when a test ends, passed or not: it would linger otherwise.
struct Demo(Child);

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One `GET /metrics`: the body of a 200 answer, or `None` while nothing answers.
fn scrape(addr: SocketAddr) -> Option<String> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(stream, "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    let (head, body) = answer.split_once("\r\n\r\n")?;
    assert!(head.starts_with("HTTP/1.1 200"), "the metrics endpoint answered {head}");
    Some(body.to_owned())
}

/// The sum of every series of the metric `name` (any labels), `0` when it has none.
fn total(body: &str, name: &str) -> f64 {
    body.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' '))
        .filter(|(series, _)| series.split('{').next() == Some(name))
        .map(|(_, value)| value.parse::<f64>().unwrap())
        .sum()
}

/// The value of one series, written as the exporter writes it (`name{label="value"}`).
fn series(body: &str, series: &str) -> Option<f64> {
    body.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn demo_serves_hits_and_puts_while_it_runs_and_lingers_with_the_final_values() {
    // The demo's data directory goes under the system temp dir, here a directory of the test's.
    let tmp = tempfile::tempdir().unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_actionstate"))
        .args(["demo", "--inputs", "300", "--json", "--metrics", "127.0.0.1:0", "--linger", "120"])
        .env("TMPDIR", tmp.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut demo = Demo(child);

    // The address comes on standard error; the rest of it is kept for a failure's message.
    let (addr_tx, addr_rx) = mpsc::channel();
    let stderr = BufReader::new(demo.0.stderr.take().unwrap());
    let errors = std::thread::spawn(move || {
        let mut text = String::new();
        for line in stderr.lines().map_while(Result::ok) {
            if let Some(url) = line.strip_prefix("metrics: http://") {
                let _ = addr_tx.send(url.trim_end_matches("/metrics").parse::<SocketAddr>().unwrap());
            }
            text.push_str(&line);
            text.push('\n');
        }
        text
    });
    let (summary_tx, summary_rx) = mpsc::channel();
    let stdout = BufReader::new(demo.0.stdout.take().unwrap());
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            let _ = summary_tx.send(line);
        }
    });
    let Ok(addr) = addr_rx.recv_timeout(PATIENCE) else {
        let _ = demo.0.kill();
        panic!("the demo printed no metrics address; its standard error:\n{}", errors.join().unwrap())
    };
    assert!(addr.port() != 0, "port 0 is resolved to the port bound: {addr}");

    // While it runs: retry until the endpoint answers with hits and puts counted, and give up
    // one scrape after the run has finished without them.
    let started = Instant::now();
    let (mut scrapes, mut last, mut finished) = (0, String::new(), None);
    let running = loop {
        if let Some(body) = scrape(addr) {
            scrapes += 1;
            if total(&body, "actionstate_hits_total") > 0.0 && total(&body, "actionstate_put_seconds_count") > 0.0 {
                break body;
            }
            last = body;
        }
        if let Some(status) = demo.0.try_wait().unwrap() {
            panic!("the demo exited ({status}) instead of lingering; its standard error:\n{}", errors.join().unwrap())
        }
        assert!(finished.is_none(), "the demo finished with no hits or no puts counted ({scrapes} scrapes):\n{last}");
        finished = summary_rx.try_recv().ok();
        assert!(started.elapsed() < PATIENCE, "no hits and puts counted after {scrapes} scrapes:\n{last}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(running.contains("# TYPE actionstate_hits_total counter"), "{running}");
    assert!(running.contains("# TYPE actionstate_put_seconds histogram"), "put latency has buckets:\n{running}");
    assert!(running.contains("actionstate_put_seconds_bucket{le=\"0.001\"}"), "{running}");
    assert!(total(&running, "actionstate_misses_total") > 0.0, "{running}");

    // Finished, and lingering: the final values are the run's, as its summary counts them.
    let line = finished.unwrap_or_else(|| summary_rx.recv_timeout(PATIENCE).expect("the demo's summary"));
    let summary: serde_json::Value = serde_json::from_str(&line).unwrap();
    let last = scrape(addr).expect("the endpoint is up for --linger after the run");
    let count = |field: &str| summary[field].as_u64().unwrap() as f64;
    assert_eq!(series(&last, "actionstate_hits_total{kind=\"reuse\"}"), Some(count("reused")), "{last}");
    assert_eq!(series(&last, "actionstate_hits_total{kind=\"resume\"}"), Some(count("resumed")), "{last}");
    assert_eq!(series(&last, "actionstate_rebuild_records_total"), Some(count("rebuild_records")), "{last}");
    assert_eq!(total(&last, "actionstate_rebuild_seconds_count"), count("rebuilds"), "{last}");
    assert!(count("rebuilds") > count("restores"), "every attempt's store rebuilds, restored or not");
    // Every action ran or was reused; every one that ran made at least its completion durable.
    assert!(total(&last, "actionstate_put_seconds_count") >= count("executed"), "{last}");
    assert!(total(&last, "actionstate_hits_total") >= total(&running, "actionstate_hits_total"));
}

#[test]
fn a_metrics_address_in_use_fails_the_command_and_linger_needs_metrics() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_actionstate"))
        .args(["demo", "--inputs", "5", "--json", "--metrics", &addr])
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains(&format!("--metrics {addr}")), "{stderr}");

    let out = Command::new(env!("CARGO_BIN_EXE_actionstate")).args(["demo", "--linger", "5"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("--metrics"), "{stderr}");
}
