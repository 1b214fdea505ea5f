//! `actionstate demo --otlp`: the demo's crashes and replays reach an OTLP receiver. The
//! receiver here is real: it serves OTLP/HTTP on a local port and decodes every request with
//! the protocol's own types (`opentelemetry-proto`), as a collector does; nothing stands in
//! for the exporter.
#![allow(clippy::unwrap_used, reason = "tests")]

use actionstate_testkit::services::skip_because;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

/// Serves OTLP/HTTP requests on `listener` until the test ends; every decoded span goes to
/// `spans`, every request that does not decode to `bad`.
fn receive(listener: TcpListener, spans: Arc<Mutex<Vec<Span>>>, bad: Arc<Mutex<Vec<String>>>) {
    for stream in listener.incoming() {
        let Ok(stream) = stream else { return };
        let (spans, bad) = (Arc::clone(&spans), Arc::clone(&bad));
        std::thread::spawn(move || serve(stream, &spans, &bad));
    }
}

/// The requests of one connection (HTTP/1.1, kept alive), each answered `200 OK`.
fn serve(stream: TcpStream, spans: &Mutex<Vec<Span>>, bad: &Mutex<Vec<String>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let mut length = 0;
        let mut content_type = String::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                match name.to_ascii_lowercase().as_str() {
                    "content-length" => length = value.trim().parse().unwrap(),
                    "content-type" => content_type = value.trim().to_owned(),
                    _ => {}
                }
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        if !request_line.starts_with("POST /v1/traces ") || content_type != "application/x-protobuf" {
            bad.lock().unwrap().push(format!("{} ({content_type})", request_line.trim_end()));
        }
        match ExportTraceServiceRequest::decode(body.as_slice()) {
            Ok(request) => {
                let mut seen = spans.lock().unwrap();
                for resource in request.resource_spans {
                    for scope in resource.scope_spans {
                        seen.extend(scope.spans);
                    }
                }
            }
            Err(e) => bad.lock().unwrap().push(format!("undecodable request: {e}")),
        }
        let response = "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

fn attribute(span: &Span, key: &str) -> Option<String> {
    let value = span.attributes.iter().find(|kv| kv.key == key)?.value.as_ref()?.value.as_ref()?;
    Some(match value {
        Value::StringValue(s) => s.clone(),
        Value::BoolValue(b) => b.to_string(),
        Value::IntValue(i) => i.to_string(),
        other => format!("{other:?}"),
    })
}

/// The demo on the embedded store, exporting to the receiver: every attempt after the crash
/// that resumed or reused an action links to the span of the attempt that first wrote it, which
/// the receiver holds too; calls replayed from the journal say so, and each was executed by an
/// attempt of the same input; the crash's restores are there. One input's attempts and their
/// calls are printed, across the crash.
#[test]
fn the_demos_crash_and_replay_reach_an_otlp_receiver() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let (spans, bad) = (Arc::default(), Arc::default());
    {
        let (spans, bad) = (Arc::clone(&spans), Arc::clone(&bad));
        std::thread::spawn(move || receive(listener, spans, bad));
    }
    run_demo(&endpoint);
    assert!(bad.lock().unwrap().is_empty(), "requests the receiver refused: {:?}", bad.lock().unwrap());
    check(&spans.lock().unwrap());
}

/// The same through a receiver installed from the Python package index: `oteltest`'s
/// `HttpSink` (`tests/otlp_sink.py`; `cargo xtask ci` installs the package) takes the demo's
/// exports and hands back each request as it parsed it.
#[test]
fn the_demos_crash_and_replay_reach_oteltests_receiver() {
    let Some(python) = sink_python() else {
        skip_because(
            "otlp-sink",
            "the_demos_crash_and_replay_reach_oteltests_receiver",
            "no Python with the oteltest package: set ACTIONSTATE_OTLP_SINK_PYTHON (cargo xtask ci does)",
        );
        return;
    };
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let (requests, log) = (dir.path().join("requests.bin"), dir.path().join("sink.log"));
    let mut sink = Command::new(&python)
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/otlp_sink.py"))
        .arg(port.to_string())
        .arg(&requests)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let said = |what: &str| format!("{what}: {}", std::fs::read_to_string(&log).unwrap_or_default());
    let mut ready = String::new();
    BufReader::new(sink.stdout.take().unwrap()).read_line(&mut ready).unwrap();
    assert_eq!(ready.trim(), "ready", "{}", said("the receiver did not start"));
    run_demo(&format!("http://127.0.0.1:{port}"));
    // Its standard input closed, the receiver stops.
    drop(sink.stdin.take());
    assert!(sink.wait().unwrap().success(), "{}", said("the receiver failed"));
    let bytes = std::fs::read(&requests).unwrap();
    let (mut spans, mut rest) = (Vec::new(), bytes.as_slice());
    while let Some((len, body)) = rest.split_first_chunk::<4>() {
        let (request, after) = body.split_at(u32::from_le_bytes(*len) as usize);
        for resource in ExportTraceServiceRequest::decode(request).unwrap().resource_spans {
            spans.extend(resource.scope_spans.into_iter().flat_map(|scope| scope.spans));
        }
        rest = after;
    }
    assert!(rest.is_empty(), "a request cut short");
    check(&spans);
}

/// The Python that runs `oteltest`'s receiver: `ACTIONSTATE_OTLP_SINK_PYTHON`, else the
/// environment `cargo xtask ci` makes, if it is there.
fn sink_python() -> Option<std::path::PathBuf> {
    if let Some(python) = std::env::var_os("ACTIONSTATE_OTLP_SINK_PYTHON") {
        return Some(python.into());
    }
    let made = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/services/otlp-sink/venv/bin/python");
    made.exists().then_some(made)
}

/// `actionstate demo --otlp ENDPOINT`, which must succeed.
fn run_demo(endpoint: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_actionstate"))
        .args(["demo", "--inputs", "30", "--json", "--otlp", endpoint])
        .output()
        .unwrap();
    assert!(out.status.success(), "demo failed: {}", String::from_utf8_lossy(&out.stderr));
}

/// What a receiver got of the demo: see the tests.
fn check(spans: &[Span]) {
    let named = |name: &str| spans.iter().filter(|s| s.name == name).count();
    println!(
        "received {} spans: {} restores, {} rebuilds, {} attempts, {} calls",
        spans.len(),
        named("actionstate.restore"),
        named("actionstate.rebuild"),
        named("actionstate.action"),
        spans.iter().filter(|s| attribute(s, "actionstate.call.source").is_some()).count(),
    );
    assert!(named("actionstate.restore") >= 2, "the start and the restore after the crash");
    let attempts: Vec<&Span> = spans.iter().filter(|s| s.name == "actionstate.action").collect();
    let by_span: HashMap<&[u8], &Span> = attempts.iter().map(|s| (s.span_id.as_slice(), *s)).collect();
    let mut linked = 0;
    // The attempts after the first, by the first attempt they link to.
    let mut chains: HashMap<&[u8], Vec<&Span>> = HashMap::new();
    for later in
        attempts.iter().filter(|s| matches!(attribute(s, "actionstate.decision").as_deref(), Some("resume" | "reuse")))
    {
        let Some(link) = later.links.first() else { continue };
        let first = by_span.get(link.span_id.as_slice()).expect("a link to a span the receiver never got");
        chains.entry(first.span_id.as_slice()).or_default().push(later);
        assert_eq!(first.trace_id, link.trace_id, "the link names the first attempt's trace");
        assert_eq!(attribute(first, "actionstate.decision").as_deref(), Some("fresh"));
        assert_eq!(attribute(first, "actionstate.key"), attribute(later, "actionstate.key"), "the same action");
        assert_eq!(attribute(first, "actionstate.action"), attribute(later, "actionstate.action"));
        if linked < 3 {
            println!(
                "{} {} of {} links to fresh attempt {} in trace {}",
                attribute(later, "actionstate.decision").unwrap(),
                attribute(later, "actionstate.action").unwrap(),
                attribute(later, "actionstate.key").unwrap(),
                hex(&first.span_id),
                hex(&first.trace_id),
            );
        }
        linked += 1;
    }
    assert!(linked > 0, "no attempt after the crash linked to its first attempt");
    replays_were_executed(spans, &by_span, &chains);
    // The demo's calls are a model's and tools': an executed one is that GenAI operation, by
    // name too; a replay from the journal is none.
    for call in spans.iter().filter(|s| attribute(s, "actionstate.call.source").is_some()) {
        let operation = attribute(call, "gen_ai.operation.name");
        match attribute(call, "actionstate.call.source").as_deref() {
            Some("executed") => {
                let operation = operation.expect("an executed call with no GenAI operation");
                assert!(["execute_tool", "chat"].contains(&operation.as_str()), "{operation}");
                assert!(call.name.starts_with(&format!("{operation} ")), "span name {}", call.name);
            }
            Some("journal") => assert_eq!((operation, call.name.as_str()), (None, "actionstate.call")),
            _ => {}
        }
    }
    let replayed = spans
        .iter()
        .filter(|s| attribute(s, "actionstate.call.source").as_deref() == Some("journal"))
        .inspect(|s| assert_eq!(attribute(s, "actionstate.replayed").as_deref(), Some("true")))
        .count();
    println!("{linked} later attempts linked to their first; {replayed} calls replayed from the journal");
}

/// Which attempt executed each call a later attempt replayed: one of the same input's attempts,
/// the first or another that links to it, ran the call at that index, and the replay names the
/// same function. Prints one input's attempts across the crash.
fn replays_were_executed(spans: &[Span], by_span: &HashMap<&[u8], &Span>, chains: &HashMap<&[u8], Vec<&Span>>) {
    let mut shown = false;
    for (first, later) in chains {
        let first = by_span[first];
        let chain: Vec<&Span> = std::iter::once(first).chain(later.iter().copied()).collect();
        for attempt in later {
            for (index, (function, source)) in calls_of(spans, attempt) {
                if source != "journal" {
                    continue;
                }
                let executed = chain.iter().filter(|a| a.span_id != attempt.span_id).any(|a| {
                    calls_of(spans, a)
                        .get(&index)
                        .is_some_and(|(f, s)| *f == function && matches!(s.as_str(), "executed" | "reconciled"))
                });
                assert!(executed, "call {index} ({function}) replayed, but no attempt of its input executed it");
            }
        }
        if !shown && later.iter().any(|a| calls_of(spans, a).values().any(|(_, s)| s == "journal")) {
            println!("one input across the crash:");
            for attempt in &chain {
                print_attempt(spans, attempt);
            }
            shown = true;
        }
    }
    assert!(shown, "no attempt after the crash replayed a call from the journal");
}

/// The call spans inside `attempt`, by their index in its journal: function and source.
fn calls_of(spans: &[Span], attempt: &Span) -> BTreeMap<u64, (String, String)> {
    spans
        .iter()
        .filter(|s| s.parent_span_id == attempt.span_id && s.trace_id == attempt.trace_id)
        .filter_map(|s| {
            let index = attribute(s, "actionstate.call.index")?.parse().ok()?;
            Some((index, (attribute(s, "actionstate.call.function")?, attribute(s, "actionstate.call.source")?)))
        })
        .collect()
}

/// One attempt of an input and its calls, as a line each.
fn print_attempt(spans: &[Span], attempt: &Span) {
    let links: Vec<String> = attempt.links.iter().map(|l| format!(" links to {}", hex(&l.span_id))).collect();
    println!(
        "  trace {} span {}: {} attempt of {} for key {}{}",
        hex(&attempt.trace_id),
        hex(&attempt.span_id),
        attribute(attempt, "actionstate.decision").unwrap_or_default(),
        attribute(attempt, "actionstate.action").unwrap_or_default(),
        attribute(attempt, "actionstate.key").unwrap_or_default(),
        links.concat(),
    );
    for (index, (function, source)) in calls_of(spans, attempt) {
        let how = if source == "journal" { "replayed from the journal" } else { source.as_str() };
        println!("    call {index} {function}: {how}");
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
