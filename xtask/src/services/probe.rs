//! What the servers' readiness probes have in common: a TCP connection with timeouts, reading one
//! length-prefixed response frame, the SASL/PLAIN token, a server as a metadata answer names it,
//! and the wait that polls a probe until the server answers, exits or times out. Knows nothing
//! of Kafka or Fluss; their wire protocols are in `kafka/probe.rs` and `fluss/probe.rs`.

use crate::services::process::{POLL, READY_TIMEOUT};
use anyhow::{Context, Result, bail};
use std::fmt;
use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Connects to `addr` (`host:port`) within `timeout`, and makes reads and writes give up after it.
pub(crate) fn connect(addr: &str, timeout: Duration) -> Result<TcpStream> {
    let socket: SocketAddr = addr.parse().with_context(|| format!("`{addr}` is not an address"))?;
    let stream = TcpStream::connect_timeout(&socket, timeout).with_context(|| format!("connecting to {addr}"))?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    Ok(stream)
}

/// Reads one response frame: a 4-byte big-endian size, at least `min_size` and at most 16 MiB,
/// then that many bytes. `what` names the request in the error, e.g. `api key 18`.
pub(crate) fn read_frame(stream: &mut impl Read, min_size: usize, what: &str) -> Result<Vec<u8>> {
    let mut size = [0u8; 4];
    stream.read_exact(&mut size).with_context(|| format!("reading the answer to {what}"))?;
    let size = u32::from_be_bytes(size) as usize;
    if !(min_size..=16 << 20).contains(&size) {
        bail!("implausible response size {size}");
    }
    let mut response = vec![0u8; size];
    stream.read_exact(&mut response).context("reading a response")?;
    Ok(response)
}

/// The SASL/PLAIN initial response (RFC 4616): no authorization id, user name, password.
pub(crate) fn plain_token(username: &str, password: &str) -> Vec<u8> {
    format!("\0{username}\0{password}").into_bytes()
}

/// The error a server answered: `{api}: {name} ({code})`, then `: {message}` if it sent one.
pub(crate) fn server_error(api: &str, name: &str, code: i32, message: Option<String>) -> anyhow::Error {
    anyhow::anyhow!("{api}: {name} ({code}){}", message.map(|m| format!(": {m}")).unwrap_or_default())
}

/// A server as a metadata answer names it; shown as `id@host:port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServerNode {
    pub(crate) id: i32,
    pub(crate) host: String,
    pub(crate) port: i32,
}

impl fmt::Display for ServerNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}:{}", self.id, self.host, self.port)
    }
}

/// Polls until `ready` succeeds, `exited` says why the server cannot come up any more (its
/// error is returned), or [`READY_TIMEOUT`] passes (`timed_out` turns the last probe's error
/// into the one returned), looking again every [`POLL`].
pub(crate) fn wait_until_ready(
    exited: &mut dyn FnMut() -> Option<anyhow::Error>,
    ready: &mut dyn FnMut() -> Result<()>,
    timed_out: &dyn Fn(anyhow::Error) -> anyhow::Error,
) -> Result<()> {
    let started = Instant::now();
    loop {
        if let Some(why) = exited() {
            return Err(why);
        }
        let last_error = match ready() {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        if started.elapsed() >= READY_TIMEOUT {
            return Err(timed_out(last_error));
        }
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_tokens_and_errors() {
        let mut frame: &[u8] = &[0, 0, 0, 2, 7, 8, 9];
        assert_eq!(read_frame(&mut frame, 1, "api 1").expect("frame"), [7, 8]);
        let mut small: &[u8] = &[0, 0, 0, 2, 7, 8];
        assert!(read_frame(&mut small, 4, "api 1").is_err(), "below the minimum size");
        let mut cut: &[u8] = &[0, 0];
        let err = read_frame(&mut cut, 1, "api key 3").expect_err("cut").to_string();
        assert!(err.contains("api key 3"), "{err}");
        assert_eq!(plain_token("u", "p"), b"\0u\0p");
        assert_eq!(server_error("api 1", "X", 2, Some("m".into())).to_string(), "api 1: X (2): m");
        assert_eq!(server_error("Api", "X", 2, None).to_string(), "Api: X (2)");
        assert_eq!(ServerNode { id: 1, host: "h".into(), port: 2 }.to_string(), "1@h:2");
    }

    #[test]
    fn the_wait_ends_on_an_answer_or_an_exit() {
        let mut tries = 0;
        let mut ready = || {
            tries += 1;
            if tries < 2 { bail!("not yet") } else { Ok(()) }
        };
        wait_until_ready(&mut || None, &mut ready, &|e| e).expect("ready on the second try");
        let err = wait_until_ready(&mut || Some(anyhow::anyhow!("gone")), &mut || Ok(()), &|e| e).expect_err("exit");
        assert_eq!(err.to_string(), "gone");
    }
}
