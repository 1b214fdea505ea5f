//! The outside world the simulated agent's durable calls reach: a local HTTP service with a
//! ledger of effects ([`ExternalService`]), and the agent's client of it ([`ExternalClient`]).
//!
//! The service offers two kinds of API, as real ones do:
//!
//! - `POST /v1/calls/{function}` deduplicates by the request's `Idempotency-Key` header, as
//!   payment APIs do: a request with a key the service applied before gets the first answer
//!   again, and no effect. A request without the header is applied every time.
//! - `POST /v1/records/{function}` cannot deduplicate: it applies every request. It keeps the
//!   `Idempotency-Key` the request names as a reference, and `GET /v1/records/{key}` answers
//!   whether (and with what) a request of that key was applied: what a reconciler asks.
//!
//! Each request also names the logical call it makes (`X-Logical-Call`: the caller's own
//! identity of the call, which the service uses for nothing but its report), so that the
//! report counts the effects applied twice for one logical call: what a customer charged twice
//! would see. The answer to a call is [`agent::external`] of its function and body, as the
//! simulator computes it without the service, so runs with and without it agree.
//!
//! The service lives in the process that starts it (a test, the demo) on 127.0.0.1; agents in
//! other processes reach it by its URL, so its ledger outlives the processes a campaign kills.

use crate::agent;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::Arc;

/// The header a request's idempotency key travels in.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
/// The header naming the logical call a request makes (for the service's report only).
pub const LOGICAL_CALL: &str = "x-logical-call";

/// What the service saw, for a run's report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ExternalReport {
    /// Requests that asked for an effect (`POST`).
    pub requests: u64,
    /// Effects applied.
    pub effects: u64,
    /// Requests answered from the ledger without an effect: their key was applied before.
    pub deduplicated: u64,
    /// Effects applied for a logical call that already had one: what deduplication exists to
    /// prevent.
    pub duplicates: u64,
    /// Questions whether a key was applied (`GET /v1/records/{key}`).
    pub lookups: u64,
}

#[derive(Debug, Default)]
struct Ledger {
    report: ExternalReport,
    /// Answers by idempotency key: of the deduplicating API, and the records of the other.
    by_key: HashMap<String, Vec<u8>>,
    records: HashMap<String, Vec<u8>>,
    applied: HashSet<String>,
}

impl Ledger {
    /// Applies the effect of a call to `function` with `body`, once per request.
    fn apply(&mut self, function: &str, body: &[u8], logical: Option<&str>) -> Vec<u8> {
        self.report.effects += 1;
        if let Some(call) = logical
            && !self.applied.insert(call.to_owned())
        {
            self.report.duplicates += 1;
        }
        agent::external(function, body)
    }
}

/// A running external service. Dropping it stops it.
#[derive(Debug)]
pub struct ExternalService {
    addr: SocketAddr,
    ledger: Arc<Mutex<Ledger>>,
    task: tokio::task::JoinHandle<()>,
}

impl ExternalService {
    /// Starts the service on a free port of 127.0.0.1, in the current tokio runtime.
    pub async fn start() -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let ledger = Arc::new(Mutex::new(Ledger::default()));
        let shared = Arc::clone(&ledger);
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                let ledger = Arc::clone(&shared);
                tokio::spawn(async move {
                    let serve = hyper::service::service_fn(move |req| answer(req, Arc::clone(&ledger)));
                    // A client that goes away mid-request (a killed agent) ends its connection.
                    let _ =
                        hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), serve).await;
                });
            }
        });
        Ok(ExternalService { addr, ledger, task })
    }

    /// Its base URL, `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// What it saw so far.
    pub fn report(&self) -> ExternalReport {
        self.ledger.lock().report
    }
}

impl Drop for ExternalService {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Answers one request.
async fn answer(req: Request<Incoming>, ledger: Arc<Mutex<Ledger>>) -> Result<Response<Full<Bytes>>, hyper::Error> {
    let header = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let (key, logical) = (header(IDEMPOTENCY_KEY), header(LOGICAL_CALL));
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let body = req.into_body().collect().await?.to_bytes();
    let mut l = ledger.lock();
    let reply = match (method, path.split('/').collect::<Vec<_>>().as_slice()) {
        (Method::POST, ["", "v1", "calls", function]) => {
            l.report.requests += 1;
            match key {
                Some(key) => {
                    if let Some(first) = l.by_key.get(&key).cloned() {
                        l.report.deduplicated += 1;
                        Ok(first)
                    } else {
                        let out = l.apply(function, &body, logical.as_deref());
                        l.by_key.insert(key, out.clone());
                        Ok(out)
                    }
                }
                None => Ok(l.apply(function, &body, logical.as_deref())),
            }
        }
        (Method::POST, ["", "v1", "records", function]) => {
            l.report.requests += 1;
            let out = l.apply(function, &body, logical.as_deref());
            if let Some(key) = key {
                l.records.insert(key, out.clone());
            }
            Ok(out)
        }
        (Method::GET, ["", "v1", "records", key]) => {
            l.report.lookups += 1;
            l.records.get(*key).cloned().ok_or(StatusCode::NOT_FOUND)
        }
        _ => Err(StatusCode::BAD_REQUEST),
    };
    drop(l);
    Ok(match reply {
        Ok(bytes) => Response::new(Full::new(Bytes::from(bytes))),
        Err(status) => {
            let mut response = Response::new(Full::new(Bytes::new()));
            *response.status_mut() = status;
            response
        }
    })
}

/// Why a request to the external service failed.
#[derive(Debug, thiserror::Error)]
#[error("external service {url}: {detail}")]
pub struct ExternalError {
    /// The request's URL.
    pub url: String,
    /// What went wrong.
    pub detail: String,
}

/// Which API of the service a call uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    /// `POST /v1/calls/{function}`: deduplicates by the key.
    Deduplicating,
    /// `POST /v1/records/{function}`: applies every request; `GET /v1/records/{key}` answers
    /// whether a key was applied.
    Records,
}

/// The agent's client of an [`ExternalService`].
#[derive(Clone, Debug)]
pub struct ExternalClient {
    base: String,
    addr: String,
    keys: bool,
}

impl ExternalClient {
    /// A client of the service at `url` (`http://HOST:PORT`). With `keys` off it sends no
    /// idempotency keys: the service cannot deduplicate, and a call a crash made run again
    /// takes effect again.
    pub fn new(url: &str, keys: bool) -> Result<Self, ExternalError> {
        let addr = url.strip_prefix("http://").filter(|a| !a.is_empty() && !a.contains('/'));
        let addr =
            addr.ok_or_else(|| ExternalError { url: url.to_owned(), detail: "expected http://HOST:PORT".to_owned() })?;
        Ok(ExternalClient { base: url.to_owned(), addr: addr.to_owned(), keys })
    }

    /// Whether it sends idempotency keys.
    pub fn sends_keys(&self) -> bool {
        self.keys
    }

    /// Makes call `function` with `body` through `api`, under `key` when the client sends
    /// keys; `logical` names the call for the service's report.
    pub async fn call(
        &self,
        api: Api,
        function: &str,
        body: &[u8],
        key: &str,
        logical: &str,
    ) -> Result<Vec<u8>, ExternalError> {
        let path = match api {
            Api::Deduplicating => format!("/v1/calls/{function}"),
            Api::Records => format!("/v1/records/{function}"),
        };
        let mut req = Request::post(&path).header("host", &self.addr).header(LOGICAL_CALL, logical);
        if self.keys {
            req = req.header(IDEMPOTENCY_KEY, key);
        }
        let req = req.body(Full::new(Bytes::copy_from_slice(body))).map_err(|e| self.error(&path, e))?;
        match self.send(&path, req).await? {
            (StatusCode::OK, out) => Ok(out),
            (status, _) => Err(self.error(&path, format!("answered {status}"))),
        }
    }

    /// Asks the records API whether a request of `key` was applied: its answer if it was.
    pub async fn lookup(&self, key: &str) -> Result<Option<Vec<u8>>, ExternalError> {
        let path = format!("/v1/records/{key}");
        let req = Request::get(&path)
            .header("host", &self.addr)
            .body(Full::new(Bytes::new()))
            .map_err(|e| self.error(&path, e))?;
        match self.send(&path, req).await? {
            (StatusCode::OK, out) => Ok(Some(out)),
            (StatusCode::NOT_FOUND, _) => Ok(None),
            (status, _) => Err(self.error(&path, format!("answered {status}"))),
        }
    }

    /// Sends `req` on a connection of its own (the service is local; a connection costs
    /// less than the round trip a pool would save).
    async fn send(&self, path: &str, req: Request<Full<Bytes>>) -> Result<(StatusCode, Vec<u8>), ExternalError> {
        let stream = tokio::net::TcpStream::connect(&self.addr).await.map_err(|e| self.error(path, e))?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| self.error(path, e))?;
        let conn = tokio::spawn(conn);
        let response = sender.send_request(req).await.map_err(|e| self.error(path, e))?;
        let status = response.status();
        let body = response.into_body().collect().await.map_err(|e| self.error(path, e))?.to_bytes();
        drop(sender);
        let _ = conn.await;
        Ok((status, body.to_vec()))
    }

    fn error(&self, path: &str, e: impl std::fmt::Display) -> ExternalError {
        ExternalError { url: format!("{}{path}", self.base), detail: e.to_string() }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_service_deduplicates_by_key_and_answers_lookups() {
        let service = ExternalService::start().await.unwrap();
        let keyed = ExternalClient::new(&service.url(), true).unwrap();
        let first = keyed.call(Api::Deduplicating, "tool.search", b"q", "as1-a", "call-1").await.unwrap();
        assert_eq!(first, agent::external("tool.search", b"q"));
        let again = keyed.call(Api::Deduplicating, "tool.search", b"q", "as1-a", "call-1").await.unwrap();
        assert_eq!(again, first);
        let r = service.report();
        assert_eq!((r.requests, r.effects, r.deduplicated, r.duplicates), (2, 1, 1, 0));

        let unkeyed = ExternalClient::new(&service.url(), false).unwrap();
        unkeyed.call(Api::Deduplicating, "tool.search", b"q", "as1-b", "call-2").await.unwrap();
        unkeyed.call(Api::Deduplicating, "tool.search", b"q", "as1-b", "call-2").await.unwrap();
        assert_eq!(service.report().duplicates, 1, "without keys the second request takes effect again");

        assert_eq!(keyed.lookup("as1-c").await.unwrap(), None);
        let recorded = keyed.call(Api::Records, "tool.fetch", b"x", "as1-c", "call-3").await.unwrap();
        assert_eq!(keyed.lookup("as1-c").await.unwrap(), Some(recorded));
        assert_eq!(service.report().lookups, 2);
    }

    #[tokio::test]
    async fn a_bad_url_or_a_gone_service_is_an_error_that_names_it() {
        let err = ExternalClient::new("https://example.com/x", true).unwrap_err();
        assert!(err.to_string().contains("expected http://HOST:PORT"), "{err}");
        let service = ExternalService::start().await.unwrap();
        let client = ExternalClient::new(&service.url(), true).unwrap();
        drop(service);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        let err = client.call(Api::Deduplicating, "f", b"", "k", "c").await.unwrap_err();
        assert!(err.url.ends_with("/v1/calls/f"), "{err}");
    }
}
