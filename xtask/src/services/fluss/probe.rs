//! The cluster's readiness probes: ZooKeeper's four-letter commands, and a few requests of the
//! Fluss RPC protocol (a length-prefixed frame with api key, version and request id, then a
//! protobuf message), so the xtask needs no Fluss client.

use crate::services::probe::{ServerNode, connect, plain_token, read_frame, server_error};
use anyhow::{Context, Result, bail};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Per-request timeout of the readiness probes.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Sends a four-letter command and returns ZooKeeper's answer (it closes the connection after it).
pub(super) fn zookeeper_command(addr: &str, command: &str) -> Result<String> {
    let mut stream = connect(addr, PROBE_TIMEOUT)?;
    stream.write_all(command.as_bytes())?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).with_context(|| format!("reading the answer to `{command}`"))?;
    Ok(answer.trim().to_owned())
}

const API_VERSIONS: i16 = 1000;
const API_CREATE_DATABASE: i16 = 1001;
const API_DROP_DATABASE: i16 = 1002;
const API_METADATA: i16 = 1012;
const API_AUTHENTICATE: i16 = 1038;
const CLIENT_NAME: &str = "actionstate-xtask";

/// One connection to a Fluss server (the coordinator or a tablet server), after `ApiVersions`
/// (and, on a SASL listener, `Authenticate`).
#[derive(Debug)]
pub(super) struct FlussConn {
    addr: String,
    stream: TcpStream,
    next_request_id: i32,
    /// `(api key, min version, max version)` of every api the server serves.
    versions: Vec<(i32, i32, i32)>,
}

impl FlussConn {
    pub(super) fn open(addr: &str, plain: Option<(&str, &str)>) -> Result<Self> {
        let stream = connect(addr, PROBE_TIMEOUT)?;
        let mut conn = Self { addr: addr.to_owned(), stream, next_request_id: 0, versions: Vec::new() };

        let mut body = Vec::new();
        put_string_field(&mut body, 1, CLIENT_NAME);
        put_string_field(&mut body, 2, env!("CARGO_PKG_VERSION"));
        conn.versions = decode_api_versions(&conn.call(API_VERSIONS, &body)?)?;
        conn.require(API_METADATA)?;
        if let Some((username, password)) = plain {
            let mut body = Vec::new();
            put_string_field(&mut body, 1, "PLAIN");
            put_bytes_field(&mut body, 2, &plain_token(username, password));
            conn.call(API_AUTHENTICATE, &body).context("SASL/PLAIN authentication")?;
        }
        Ok(conn)
    }

    /// Fails unless the server serves version 0 of api `key` (only the coordinator serves
    /// the database apis).
    fn require(&self, key: i16) -> Result<()> {
        if !self.versions.iter().any(|&(k, min, _)| k == i32::from(key) && min == 0) {
            bail!("{} does not serve version 0 of api {key}", self.addr);
        }
        Ok(())
    }

    pub(super) fn metadata(&mut self) -> Result<Metadata> {
        decode_metadata(&self.call(API_METADATA, &[])?)
    }

    pub(super) fn create_database(&mut self, name: &str) -> Result<()> {
        self.require(API_CREATE_DATABASE)?;
        let mut body = Vec::new();
        put_string_field(&mut body, 1, name);
        put_varint_field(&mut body, 2, 1); // ignore_if_exists
        self.call(API_CREATE_DATABASE, &body).map(drop)
    }

    pub(super) fn drop_database(&mut self, name: &str) -> Result<()> {
        self.require(API_DROP_DATABASE)?;
        let mut body = Vec::new();
        put_string_field(&mut body, 1, name);
        put_varint_field(&mut body, 2, 1); // ignore_if_not_exists
        put_varint_field(&mut body, 3, 1); // cascade
        self.call(API_DROP_DATABASE, &body).map(drop)
    }

    /// Sends one request (api version 0) and returns the body of a successful response.
    fn call(&mut self, api_key: i16, body: &[u8]) -> Result<Vec<u8>> {
        let request_id = self.next_request_id;
        self.next_request_id += 1;
        self.stream.write_all(&request_frame(api_key, request_id, body)).context("sending a request")?;
        let response = read_frame(&mut self.stream, 5, &format!("api {api_key}"))?;
        decode_response(&response, request_id, api_key)
    }
}

/// A request frame: length, api key, api version 0, request id, protobuf body.
fn request_frame(api_key: i16, request_id: i32, body: &[u8]) -> Vec<u8> {
    let mut frame = ((8 + body.len()) as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(&api_key.to_be_bytes());
    frame.extend_from_slice(&0i16.to_be_bytes());
    frame.extend_from_slice(&request_id.to_be_bytes());
    frame.extend_from_slice(body);
    frame
}

/// A response after its length: type (0 success, 1 error, 2 server failure), request id, then the
/// response message or an `ErrorResponse`.
fn decode_response(response: &[u8], request_id: i32, api_key: i16) -> Result<Vec<u8>> {
    let [kind, id @ ..] = response else { bail!("empty response") };
    let (id, body) = id.split_at_checked(4).context("response ends early")?;
    let id = i32::from_be_bytes(id.try_into()?);
    if id != request_id {
        bail!("response to request {id}, expected {request_id}");
    }
    if *kind == 0 {
        return Ok(body.to_vec());
    }
    let mut code = None;
    let mut message = None;
    for field in Fields(body) {
        match field? {
            (1, Value::Varint(v)) => code = Some(v as i32),
            (2, Value::Bytes(b)) => message = Some(String::from_utf8_lossy(b).into_owned()),
            _ => {}
        }
    }
    let code = code.context("error response without a code")?;
    Err(server_error(&format!("api {api_key}"), error_name(code), code, message))
}

fn error_name(code: i32) -> &'static str {
    match code {
        -1 => "UNKNOWN_SERVER_ERROR",
        1 => "NETWORK_EXCEPTION",
        2 => "UNSUPPORTED_VERSION",
        4 => "DATABASE_NOT_EXIST",
        6 => "DATABASE_ALREADY_EXIST",
        46 => "AUTHENTICATE_EXCEPTION",
        51 => "RETRIABLE_AUTHENTICATE_EXCEPTION",
        _ => "error",
    }
}

/// What a `Metadata` answer says of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Metadata {
    coordinator: Option<ServerNode>,
    pub(super) tablet_servers: Vec<ServerNode>,
}

impl Metadata {
    pub(super) fn summary(&self) -> String {
        let tablets: Vec<String> = self.tablet_servers.iter().map(ServerNode::to_string).collect();
        format!(
            "coordinator {}, tablet servers {}",
            self.coordinator.as_ref().map(ServerNode::to_string).unwrap_or_else(|| "?".into()),
            if tablets.is_empty() { "none".into() } else { tablets.join(" ") }
        )
    }
}

/// ApiVersionsResponse: repeated `PbApiVersion { api_key = 1, min_version = 2, max_version = 3 }`
/// in field 1.
fn decode_api_versions(body: &[u8]) -> Result<Vec<(i32, i32, i32)>> {
    let mut versions = Vec::new();
    for field in Fields(body) {
        if let (1, Value::Bytes(entry)) = field? {
            let (mut key, mut min, mut max) = (None, None, None);
            for inner in Fields(entry) {
                match inner? {
                    (1, Value::Varint(v)) => key = Some(v as i32),
                    (2, Value::Varint(v)) => min = Some(v as i32),
                    (3, Value::Varint(v)) => max = Some(v as i32),
                    _ => {}
                }
            }
            versions.push((key.context("api version without a key")?, min.unwrap_or(0), max.unwrap_or(0)));
        }
    }
    Ok(versions)
}

/// MetadataResponse: `coordinator_server = 1`, repeated `tablet_servers = 2`, both
/// `PbServerNode { node_id = 1, host = 2, port = 3 }`; the table fields that follow are skipped.
fn decode_metadata(body: &[u8]) -> Result<Metadata> {
    let node = |bytes: &[u8]| -> Result<ServerNode> {
        let (mut id, mut host, mut port) = (None, String::new(), 0);
        for field in Fields(bytes) {
            match field? {
                (1, Value::Varint(v)) => id = Some(v as i32),
                (2, Value::Bytes(b)) => host = String::from_utf8_lossy(b).into_owned(),
                (3, Value::Varint(v)) => port = v as i32,
                _ => {}
            }
        }
        Ok(ServerNode { id: id.context("server node without an id")?, host, port })
    };
    let mut metadata = Metadata { coordinator: None, tablet_servers: Vec::new() };
    for field in Fields(body) {
        match field? {
            (1, Value::Bytes(b)) => metadata.coordinator = Some(node(b)?),
            (2, Value::Bytes(b)) => metadata.tablet_servers.push(node(b)?),
            _ => {}
        }
    }
    Ok(metadata)
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn put_varint_field(out: &mut Vec<u8>, field: u32, value: u64) {
    put_varint(out, u64::from(field) << 3);
    put_varint(out, value);
}

fn put_bytes_field(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    put_varint(out, (u64::from(field) << 3) | 2);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn put_string_field(out: &mut Vec<u8>, field: u32, s: &str) {
    put_bytes_field(out, field, s.as_bytes());
}

/// A decoded protobuf field value; fixed-width fields are skipped as `Other`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Other,
}

/// Iterates the fields of a protobuf message as `(field number, value)`.
#[derive(Debug)]
struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    fn varint(&mut self) -> Result<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let [byte, rest @ ..] = self.0 else { bail!("message ends inside a varint") };
            self.0 = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        bail!("varint longer than ten bytes")
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let (head, rest) = self.0.split_at_checked(n).context("message ends inside a field")?;
        self.0 = rest;
        Ok(head)
    }

    fn field(&mut self) -> Result<(u32, Value<'a>)> {
        let key = self.varint()?;
        let number = u32::try_from(key >> 3).context("field number out of range")?;
        let value = match key & 7 {
            0 => Value::Varint(self.varint()?),
            1 => self.take(8).map(|_| Value::Other)?,
            2 => {
                let len = usize::try_from(self.varint()?).context("length out of range")?;
                Value::Bytes(self.take(len)?)
            }
            5 => self.take(4).map(|_| Value::Other)?,
            wire => bail!("unsupported wire type {wire} for field {number}"),
        };
        Ok((number, value))
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, Value<'a>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.0.is_empty() {
            return None;
        }
        let item = self.field();
        if item.is_err() {
            self.0 = &[];
        }
        Some(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_framed() {
        let mut body = Vec::new();
        put_string_field(&mut body, 1, "db");
        put_varint_field(&mut body, 2, 1);
        assert_eq!(body, [0x0a, 2, b'd', b'b', 0x10, 1]);
        let frame = request_frame(API_CREATE_DATABASE, 7, &body);
        assert_eq!(frame, [0, 0, 0, 14, 0x03, 0xe9, 0, 0, 0, 0, 0, 7, 0x0a, 2, b'd', b'b', 0x10, 1]);
        let mut long = Vec::new();
        put_varint(&mut long, 300);
        assert_eq!(long, [0xac, 0x02]);
    }

    #[test]
    fn responses_decode() {
        let mut ok = vec![0, 0, 0, 0, 3];
        ok.extend_from_slice(&[0x08, 1]);
        assert_eq!(decode_response(&ok, 3, API_METADATA).expect("ok"), [0x08, 1]);
        assert!(decode_response(&ok, 4, API_METADATA).is_err());

        let mut failed = vec![1, 0, 0, 0, 3];
        put_varint_field(&mut failed, 1, 46);
        put_string_field(&mut failed, 2, "Authentication failed");
        let err = decode_response(&failed, 3, API_AUTHENTICATE).expect_err("error").to_string();
        assert!(err.contains("AUTHENTICATE_EXCEPTION (46)") && err.contains("Authentication failed"), "{err}");

        let node = |id: u64, port: u64| {
            let mut n = Vec::new();
            put_varint_field(&mut n, 1, id);
            put_string_field(&mut n, 2, "127.0.0.1");
            put_varint_field(&mut n, 3, port);
            n
        };
        let mut metadata = Vec::new();
        put_bytes_field(&mut metadata, 1, &node(7, 40001));
        put_bytes_field(&mut metadata, 2, &node(0, 40003));
        put_bytes_field(&mut metadata, 3, b"\x08\x01");
        let decoded = decode_metadata(&metadata).expect("metadata");
        assert_eq!(decoded.coordinator, Some(ServerNode { id: 7, host: "127.0.0.1".into(), port: 40001 }));
        assert_eq!(decoded.tablet_servers, vec![ServerNode { id: 0, host: "127.0.0.1".into(), port: 40003 }]);
        assert_eq!(decoded.summary(), "coordinator 7@127.0.0.1:40001, tablet servers 0@127.0.0.1:40003");
        assert!(decode_metadata(&metadata[..metadata.len() - 1]).is_err());

        let mut versions = Vec::new();
        let mut entry = Vec::new();
        put_varint_field(&mut entry, 1, 1001);
        put_varint_field(&mut entry, 3, 0);
        put_bytes_field(&mut versions, 1, &entry);
        put_varint_field(&mut versions, 2, 1);
        assert_eq!(decode_api_versions(&versions).expect("versions"), vec![(1001, 0, 0)]);
    }
}
