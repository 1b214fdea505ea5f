//! `bench tracing`: what the store's spans (docs/design.md, section 5.8) cost on the put and
//! rebuild paths. One run measures three builds of `actionstate bench`, on a memory log (a put
//! is the store's own work, a few µs) and on the embedded store (a put waits for its commit):
//!
//! - **without**: the command line built without `otlp`, so `actionstate-recovery` has no
//!   `otel` feature: the baseline;
//! - **off**: built with `otlp` (and so `otel`), run without `--otlp`: the spans are compiled
//!   in, and no layer records them;
//! - **on**: the same binary with `--otlp` to a local OTLP/HTTP endpoint: every attempt's span
//!   is an OpenTelemetry span, batched, encoded and sent.
//!
//! The three alternate, in a rotating order, some rounds per log ([`LOGS`]), so that a drift of the machine
//! (page cache, other work, thermal) falls on all of them alike. Each figure is the median,
//! over the rounds, of the variant's cost against the baseline of the same round: time per put
//! (from puts per second, `begin` and `complete`) and time per rebuilt record. 1.00 is no cost.
//!
//! The endpoint takes every export and answers it as a collector does; it keeps only counts.
//! What a collector does with the spans is not the store's cost; what the exporter does in the
//! measured process (building, batching, encoding, sending) is, and it runs for real.

use anyhow::{Context, Result, bail};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The logs measured, each with its alternations of the three builds and its run's arguments:
/// `memory`, where a put is the store's own work (a few µs, so what a span adds shows, and a
/// run's figure varies by a third with where the runtime's threads land: many short runs), and
/// the embedded store, where a put waits for its durable commit (fewer, longer runs).
const LOGS: [Log; 2] = [
    Log { name: "memory", rounds: 41, args: &["--log", "memory", "--puts", "50000", "--records", "100000"] },
    Log { name: "file", rounds: 9, args: &["--puts", "5000", "--records", "300000"] },
];

/// A log `bench tracing` measures.
struct Log {
    name: &'static str,
    rounds: usize,
    args: &'static [&'static str],
}

/// One build of the command line, run with or without an exporter.
struct Variant {
    name: &'static str,
    binary: PathBuf,
    export: bool,
}

/// One run's figures, from `actionstate bench --json`.
#[derive(Clone, Copy)]
struct Figures {
    puts_per_s: f64,
    put_median_us: f64,
    rebuild_per_s: f64,
}

pub(crate) fn run() -> Result<()> {
    let without = build("without", &[])?;
    let with = build("otel", &["--features", "otlp"])?;
    let sink = Sink::start()?;
    let variants = [
        Variant { name: "without", binary: without, export: false },
        Variant { name: "off", binary: with.clone(), export: false },
        Variant { name: "on", binary: with, export: true },
    ];
    let mut report = Vec::new();
    for Log { name: log, rounds, args } in LOGS {
        let mut runs: Vec<[Figures; 3]> = Vec::new();
        for round in 0..rounds {
            let mut figures = [None; 3];
            for i in 0..variants.len() {
                let v = (round + i) % variants.len();
                let f = measure(&variants[v], args, &sink.url())?;
                eprintln!(
                    "==> bench tracing {log}: round {}/{rounds}, {}: {:.0} puts/s (median {:.1} µs), rebuild {:.0} records/s",
                    round + 1,
                    variants[v].name,
                    f.puts_per_s,
                    f.put_median_us,
                    f.rebuild_per_s
                );
                figures[v] = Some(f);
            }
            runs.push(figures.map(|f| f.expect("every variant runs in every round")));
        }
        report.push((log, runs));
    }
    let (requests, bytes) = sink.received();
    if requests == 0 {
        bail!("bench tracing: the runs with --otlp exported nothing to {}", sink.url());
    }
    print(&variants, &report, requests, bytes);
    Ok(())
}

/// Builds `actionstate` in release with `features` and keeps a copy under `name`, since the
/// next build overwrites `target/release/actionstate`.
fn build(name: &str, features: &[&str]) -> Result<PathBuf> {
    let args = ["build", "--release", "--locked", "-p", "actionstate"];
    crate::run(&format!("bench tracing: build {name}"), crate::cargo().args(args).args(features))?;
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| PathBuf::from("target"), PathBuf::from);
    let dir = target.join("bench-tracing");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let copy = dir.join(format!("actionstate-{name}"));
    let built = target.join("release").join(format!("actionstate{}", std::env::consts::EXE_SUFFIX));
    std::fs::copy(&built, &copy).with_context(|| format!("copying {} to {}", built.display(), copy.display()))?;
    Ok(copy)
}

/// One `actionstate bench --json` of `variant` on a fresh `log` (its arguments).
fn measure(variant: &Variant, log: &[&str], endpoint: &str) -> Result<Figures> {
    let mut cmd = Command::new(&variant.binary);
    cmd.args(["bench", "--json"]).args(log);
    if variant.export {
        cmd.args(["--otlp", endpoint]);
    }
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!("{cmd:?} failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr));
    }
    let json: serde_json::Value = serde_json::from_slice(&out.stdout)
        .with_context(|| format!("{cmd:?} printed no JSON report: {}", String::from_utf8_lossy(&out.stdout)))?;
    let field = |name: &str| json[name].as_f64().with_context(|| format!("{cmd:?}: no `{name}` in its report"));
    Ok(Figures {
        puts_per_s: field("puts_per_s")?,
        put_median_us: field("put_median_us")?,
        rebuild_per_s: field("rebuild_records_per_s")?,
    })
}

/// The median over the rounds of `cost(variant's figures, baseline's figures)`.
fn median_cost(runs: &[[Figures; 3]], v: usize, cost: impl Fn(&Figures, &Figures) -> f64) -> f64 {
    let mut costs: Vec<f64> = runs.iter().map(|r| cost(&r[v], &r[0])).collect();
    costs.sort_by(f64::total_cmp);
    costs[costs.len() / 2]
}

/// Prints each log's costs, a line of the baseline's figures and of what was exported, and
/// one JSON object of it all.
fn print(variants: &[Variant; 3], report: &[(&str, Vec<[Figures; 3]>)], requests: u64, bytes: u64) {
    let put = |f: &Figures, base: &Figures| base.puts_per_s / f.puts_per_s;
    let median_us = |f: &Figures, base: &Figures| f.put_median_us / base.put_median_us;
    let rebuild = |f: &Figures, base: &Figures| base.rebuild_per_s / f.rebuild_per_s;
    println!("tracing overhead, median of alternating rounds (cost against `without`; 1.00 is none):");
    println!("{:<8} {:<8} {:>10} {:>16} {:>13}", "log", "build", "time/put", "put median µs", "time/record");
    let mut json = Vec::new();
    for (log, runs) in report {
        let mut costs = Vec::new();
        for (v, variant) in variants.iter().enumerate().skip(1) {
            let (p, m, r) = (median_cost(runs, v, put), median_cost(runs, v, median_us), median_cost(runs, v, rebuild));
            println!("{log:<8} {:<8} {p:>10.3} {m:>16.3} {r:>13.3}   ({} rounds)", variant.name, runs.len());
            costs.push(format!(
                "\"{}\":{{\"put_cost\":{p:.4},\"put_median_cost\":{m:.4},\"rebuild_cost\":{r:.4}}}",
                variant.name
            ));
        }
        let base = |get: fn(&Figures) -> f64| {
            let mut all: Vec<f64> = runs.iter().map(|r| get(&r[0])).collect();
            all.sort_by(f64::total_cmp);
            all[all.len() / 2]
        };
        let (puts, median, records) = (base(|f| f.puts_per_s), base(|f| f.put_median_us), base(|f| f.rebuild_per_s));
        println!("{log:<8} without: {puts:.0} puts/s (median {median:.1} µs), rebuild {records:.0} records/s");
        json.push(format!(
            "\"{log}\":{{\"rounds\":{},{},\"without\":{{\"puts_per_s\":{puts:.0},\"put_median_us\":{median:.2},\"rebuild_records_per_s\":{records:.0}}}}}",
            runs.len(),
            costs.join(",")
        ));
    }
    println!("exported with --otlp: {requests} requests, {bytes} bytes");
    println!("{{{},\"otlp_requests\":{requests},\"otlp_bytes\":{bytes}}}", json.join(","));
}

/// A local OTLP/HTTP endpoint: it reads each request whole and answers `200` with an empty
/// `ExportTraceServiceResponse` (an empty protobuf message), counting requests and bytes.
struct Sink {
    port: u16,
    requests: Arc<AtomicU64>,
    bytes: Arc<AtomicU64>,
}

impl Sink {
    fn start() -> Result<Sink> {
        let listener = TcpListener::bind("127.0.0.1:0").context("binding the OTLP endpoint")?;
        let port = listener.local_addr()?.port();
        let (requests, bytes) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let counts = (Arc::clone(&requests), Arc::clone(&bytes));
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let (requests, bytes) = (Arc::clone(&counts.0), Arc::clone(&counts.1));
                // A connection that breaks ends its thread; the exporter reconnects.
                std::thread::spawn(move || serve(conn, &requests, &bytes));
            }
        });
        Ok(Sink { port, requests, bytes })
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn received(&self) -> (u64, u64) {
        (self.requests.load(Ordering::Relaxed), self.bytes.load(Ordering::Relaxed))
    }
}

/// Serves the HTTP/1.1 requests of one connection until the client closes it.
fn serve(conn: TcpStream, requests: &AtomicU64, bytes: &AtomicU64) -> std::io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut out = conn;
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let mut length = 0usize;
        loop {
            line.clear();
            reader.read_line(&mut line)?;
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        requests.fetch_add(1, Ordering::Relaxed);
        bytes.fetch_add(length as u64, Ordering::Relaxed);
        out.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n")?;
    }
}
