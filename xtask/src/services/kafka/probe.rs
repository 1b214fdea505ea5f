//! The broker's readiness probe: a few requests of the Kafka wire protocol, enough to tell that the
//! broker serves clients.

use super::config::NODE_ID;
use crate::services::probe::{ServerNode, connect, plain_token, read_frame, server_error};
use anyhow::{Context, Result, bail};
use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

/// Per-request timeout of the readiness probe.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

const API_METADATA: i16 = 3;
const API_SASL_HANDSHAKE: i16 = 17;
const API_API_VERSIONS: i16 = 18;
const API_SASL_AUTHENTICATE: i16 = 36;
/// The oldest Metadata version Kafka 4 still serves, and the last one without tagged fields.
const METADATA_VERSION: i16 = 4;
const CLIENT_ID: &str = "actionstate-xtask";

/// What a `Metadata` answer says of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct MetadataAnswer {
    cluster_id: Option<String>,
    controller_id: i32,
    brokers: Vec<ServerNode>,
}

impl MetadataAnswer {
    pub(super) fn summary(&self) -> String {
        let brokers: Vec<String> = self.brokers.iter().map(ServerNode::to_string).collect();
        format!(
            "cluster {}, controller {}, brokers {}",
            self.cluster_id.as_deref().unwrap_or("?"),
            self.controller_id,
            brokers.join(" ")
        )
    }
}

/// Connects to `addr`, optionally authenticates with SASL/PLAIN, and asks for the cluster
/// metadata; succeeds only when our node is among the brokers.
pub(super) fn probe(addr: &str, plain: Option<(&str, &str)>) -> Result<MetadataAnswer> {
    probe_nodes(addr, plain, &[NODE_ID])
}

/// [`probe`], succeeding only when every node of `expected` is among the brokers.
pub(super) fn probe_nodes(addr: &str, plain: Option<(&str, &str)>, expected: &[i32]) -> Result<MetadataAnswer> {
    let mut stream = connect(addr, PROBE_TIMEOUT)?;

    let versions = decode_api_versions(&exchange(&mut stream, API_API_VERSIONS, 0, 1, &[])?)?;
    let supports =
        |key: i16, version: i16| versions.iter().any(|&(k, min, max)| k == key && (min..=max).contains(&version));
    if !supports(API_METADATA, METADATA_VERSION) {
        bail!("the broker does not serve Metadata v{METADATA_VERSION}");
    }
    if let Some((username, password)) = plain {
        if !supports(API_SASL_HANDSHAKE, 1) || !supports(API_SASL_AUTHENTICATE, 0) {
            bail!("the broker does not offer SASL on {addr}");
        }
        let mut body = Vec::new();
        put_string(&mut body, "PLAIN");
        decode_sasl_handshake(&exchange(&mut stream, API_SASL_HANDSHAKE, 1, 2, &body)?)?;
        let mut body = Vec::new();
        put_bytes(&mut body, &plain_token(username, password));
        decode_sasl_authenticate(&exchange(&mut stream, API_SASL_AUTHENTICATE, 0, 3, &body)?)?;
    }
    // No topics: only the brokers and the cluster id. Then allow_auto_topic_creation = false.
    let body = [0, 0, 0, 0, 0];
    let answer = decode_metadata(&exchange(&mut stream, API_METADATA, METADATA_VERSION, 4, &body)?)?;
    if let Some(missing) = expected.iter().find(|id| !answer.brokers.iter().any(|b| b.id == **id)) {
        bail!("node {missing} is not among the brokers yet ({})", answer.summary());
    }
    Ok(answer)
}

/// A request with header v1: api key, version, correlation id, client id.
fn request(api_key: i16, api_version: i16, correlation_id: i32, body: &[u8]) -> Vec<u8> {
    let mut message = Vec::new();
    message.extend_from_slice(&api_key.to_be_bytes());
    message.extend_from_slice(&api_version.to_be_bytes());
    message.extend_from_slice(&correlation_id.to_be_bytes());
    put_string(&mut message, CLIENT_ID);
    message.extend_from_slice(body);
    let mut frame = (message.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(&message);
    frame
}

/// Sends one request and returns the response body after the correlation id (header v0).
fn exchange(
    stream: &mut TcpStream,
    api_key: i16,
    api_version: i16,
    correlation_id: i32,
    body: &[u8],
) -> Result<Vec<u8>> {
    stream.write_all(&request(api_key, api_version, correlation_id, body)).context("sending a request")?;
    let response = read_frame(stream, 4, &format!("api key {api_key}"))?;
    let mut reader = Reader(&response);
    let got = reader.i32()?;
    if got != correlation_id {
        bail!("response correlation id {got}, expected {correlation_id}");
    }
    Ok(reader.0.to_vec())
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u16).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    out.extend_from_slice(bytes);
}

/// Reads big-endian fields off the front of a response.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.0.len() < n {
            bail!("response ends early: need {n} more bytes, have {}", self.0.len());
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn i16(&mut self) -> Result<i16> {
        Ok(i16::from_be_bytes(self.take(2)?.try_into()?))
    }

    fn i32(&mut self) -> Result<i32> {
        Ok(i32::from_be_bytes(self.take(4)?.try_into()?))
    }

    fn nullable_string(&mut self) -> Result<Option<String>> {
        let len = self.i16()?;
        if len < 0 {
            return Ok(None);
        }
        Ok(Some(String::from_utf8_lossy(self.take(len as usize)?).into_owned()))
    }

    fn string(&mut self) -> Result<String> {
        self.nullable_string()?.context("null where a string belongs")
    }

    fn count(&mut self) -> Result<usize> {
        let n = self.i32()?;
        usize::try_from(n.max(0)).context("array length")
    }
}

fn check_error(api: &str, code: i16, message: Option<String>) -> Result<()> {
    if code != 0 {
        let name = match code {
            33 => "UNSUPPORTED_SASL_MECHANISM",
            34 => "ILLEGAL_SASL_STATE",
            35 => "UNSUPPORTED_VERSION",
            58 => "SASL_AUTHENTICATION_FAILED",
            _ => "error",
        };
        return Err(server_error(api, name, code.into(), message));
    }
    Ok(())
}

/// ApiVersions v0: error code, then (api key, min version, max version) triples.
fn decode_api_versions(body: &[u8]) -> Result<Vec<(i16, i16, i16)>> {
    let mut r = Reader(body);
    check_error("ApiVersions", r.i16()?, None)?;
    (0..r.count()?).map(|_| Ok((r.i16()?, r.i16()?, r.i16()?))).collect()
}

/// SaslHandshake v1: error code and the enabled mechanisms.
fn decode_sasl_handshake(body: &[u8]) -> Result<()> {
    let mut r = Reader(body);
    let code = r.i16()?;
    let mechanisms = (0..r.count()?).map(|_| r.string()).collect::<Result<Vec<_>>>()?;
    check_error("SaslHandshake", code, Some(format!("mechanisms offered: {}", mechanisms.join(", "))))
}

/// SaslAuthenticate v0: error code and message (then server bytes, empty for PLAIN).
fn decode_sasl_authenticate(body: &[u8]) -> Result<()> {
    let mut r = Reader(body);
    let code = r.i16()?;
    let message = r.nullable_string()?;
    check_error("SaslAuthenticate", code, message)
}

/// Metadata v4: throttle time, brokers, cluster id, controller id (topics follow, unread).
fn decode_metadata(body: &[u8]) -> Result<MetadataAnswer> {
    let mut r = Reader(body);
    let _throttle_ms = r.i32()?;
    let brokers = (0..r.count()?)
        .map(|_| {
            let node_id = r.i32()?;
            let host = r.string()?;
            let port = r.i32()?;
            let _rack = r.nullable_string()?;
            Ok(ServerNode { id: node_id, host, port })
        })
        .collect::<Result<Vec<_>>>()?;
    let cluster_id = r.nullable_string()?;
    let controller_id = r.i32()?;
    Ok(MetadataAnswer { cluster_id, controller_id, brokers })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_framed_with_header_v1() {
        let frame = request(API_API_VERSIONS, 0, 7, &[]);
        let mut expected = vec![0, 0, 0, 27, 0, 18, 0, 0, 0, 0, 0, 7, 0, 17];
        expected.extend_from_slice(b"actionstate-xtask");
        assert_eq!(frame, expected);
        assert_eq!(plain_token("u", "p"), b"\0u\0p");
    }

    #[test]
    fn responses_decode() {
        // ApiVersions v0: no error, Metadata 4..=13 and ApiVersions 0..=4.
        let versions = [0, 0, 0, 0, 0, 2, 0, 3, 0, 4, 0, 13, 0, 18, 0, 0, 0, 4];
        assert_eq!(decode_api_versions(&versions).expect("versions"), vec![(3, 4, 13), (18, 0, 4)]);
        assert!(decode_api_versions(&[0, 35, 0, 0, 0, 0]).is_err());

        let mut metadata = vec![0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1];
        put_string(&mut metadata, "127.0.0.1");
        metadata.extend_from_slice(&[0, 0, 0x9c, 0x41, 0xff, 0xff]);
        put_string(&mut metadata, "abc");
        metadata.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0]);
        let answer = decode_metadata(&metadata).expect("metadata");
        assert_eq!(answer.brokers, vec![ServerNode { id: 1, host: "127.0.0.1".into(), port: 40001 }]);
        assert_eq!(answer.cluster_id.as_deref(), Some("abc"));
        assert_eq!(answer.controller_id, 1);
        assert!(decode_metadata(&metadata[..10]).is_err());

        let mut failed = vec![0, 58];
        put_string(&mut failed, "Authentication failed: Invalid username or password");
        failed.extend_from_slice(&[0, 0, 0, 0]);
        let err = decode_sasl_authenticate(&failed).expect_err("rejected").to_string();
        assert!(err.contains("SASL_AUTHENTICATION_FAILED") && err.contains("Invalid username"), "{err}");
        let mut handshake = vec![0, 0, 0, 0, 0, 1];
        put_string(&mut handshake, "PLAIN");
        decode_sasl_handshake(&handshake).expect("handshake");
    }
}
