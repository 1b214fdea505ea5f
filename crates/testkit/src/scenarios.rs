//! Checks that every server backend's tests run beside the conformance suite, on a real server:
//! an unreachable server, a changed partition count, a SASL round trip and a wrong password, a
//! recreated log, a read past the end, and a configuration's `Debug` that hides its secrets;
//! with [`retry_for`] for what a server does asynchronously (a deletion still in progress) and
//! [`LogCapture`] for what a client logged through `tracing`.
//!
//! Each `assert_` function panics, with the rule broken, when the backend breaks it: they are
//! the bodies of `#[test]`s. What differs between backends (how a log is opened, configured or
//! recreated, and the word for a partition) comes in as arguments. Like the suite, they need no
//! runtime of their own.

use crate::conformance::Harness;
use actionstate_core::{Error, KeyId, Marker, Position, StateLog, WireRecord};
use std::fmt::Display;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Waits `pause` without a runtime's timer (see [`within`](crate::within)).
pub async fn sleep(pause: Duration) {
    crate::within(pause, std::future::pending::<()>()).await;
}

/// `attempt`'s result, trying again every half second while it fails and `limit` has not
/// passed since the first try; each failure is printed, prefixed with `what`.
pub async fn retry_for<T, E: Display, F, Fut>(limit: Duration, what: &str, mut attempt: F) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let started = Instant::now();
    loop {
        match attempt().await {
            Ok(v) => return Ok(v),
            Err(e) if started.elapsed() < limit => {
                eprintln!("{what}: {e}; retrying");
                sleep(Duration::from_millis(500)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// The harness's [`unreachable`](Harness::unreachable) log fails within ten seconds, with a
/// retryable error that names the address (`127.0.0.1:1`, where no `server` listens).
pub async fn assert_unreachable_fails_fast<H: Harness>(harness: &H, server: &str) {
    let started = Instant::now();
    let Err(err) = harness.unreachable().await else { panic!("an unreachable {server} opened") };
    let took = started.elapsed();
    eprintln!("unreachable after {took:?}: {err}");
    assert!(took < Duration::from_secs(10), "took {took:?}: {err}");
    assert!(err.is_retryable(), "an unreachable {server} should be retryable: {err}");
    assert!(err.to_string().contains("127.0.0.1:1"), "the error does not name the {server}: {err}");
}

/// A log opened with two partitions (`open(2)`) reports them and `backend`; opening the same
/// log with three (`open(3)`) is refused, not retryably, saying `has 2 {partitions}, configured
/// 3` (`partitions` is the backend's word, e.g. `buckets`).
pub async fn assert_changed_partition_count_is_refused<L, F, Fut>(open: F, backend: &str, partitions: &str)
where
    L: StateLog,
    F: Fn(u32) -> Fut,
    Fut: Future<Output = Result<L, Error>>,
{
    let log = open(2).await.unwrap_or_else(|e| panic!("opening with 2 {partitions}: {e}"));
    assert_eq!(log.identity().partitions, 2);
    assert_eq!(log.identity().backend, backend);
    let Err(err) = open(3).await else { panic!("the log opened with 3 {partitions}") };
    eprintln!("{err}");
    assert!(err.to_string().contains(&format!("has 2 {partitions}, configured 3")), "{err}");
    assert!(!err.is_retryable());
}

/// One record appended to `log` (say, on a SASL listener) reads back as it was written.
/// Returns where it was appended.
pub async fn assert_round_trip<L: StateLog>(log: &L) -> Position {
    let record = WireRecord { key_id: KeyId::of(b"sasl-key"), key: b"k".to_vec(), value: b"v".to_vec() };
    let p = log.append(record).await.unwrap_or_else(|e| panic!("append: {e}"));
    let end = log.end_offsets().await.unwrap_or_else(|e| panic!("end offsets: {e}"))[p.partition as usize];
    let batch = log.read(p.partition, p.offset, end, 10).await.unwrap_or_else(|e| panic!("read: {e}"));
    assert_eq!(batch.records.len(), 1);
    assert_eq!((batch.records[0].key.as_slice(), batch.records[0].value.as_slice()), (&b"k"[..], &b"v"[..]));
    p
}

/// `opened`, the result of opening a log with the wrong password `password`, is an
/// authentication error that is not retryable and does not show the password. Returns its text.
pub fn assert_wrong_password_refused<L>(opened: Result<L, Error>, password: &str) -> String {
    let Err(err) = opened else { panic!("a wrong password was accepted") };
    let text = err.to_string();
    eprintln!("wrong password: {text}");
    assert!(text.to_lowercase().contains("authentication"), "not an authentication error: {text}");
    assert!(!err.is_retryable(), "a rejected password is not retryable: {text}");
    assert!(!text.contains(password), "the error shows the password: {text}");
    text
}

/// A configuration's `Debug` text shows `user` and `***`, and none of `secrets`.
pub fn assert_debug_hides(debug: &str, user: &str, secrets: &[&str]) {
    assert!(secrets.iter().all(|secret| !debug.contains(secret)), "{debug}");
    assert!(debug.contains("***") && debug.contains(user), "{debug}");
}

/// A log deleted and created again with the same partitions is another log: `log` (two
/// partitions, fresh) gets three records and a marker; `recreate` deletes and recreates it
/// (checking on the way whatever the backend reports of the deletion) and returns a handle
/// on the new log; its identity has as many partitions and another id, and the marker, after
/// as many records, fails as [`Error::LogChanged`]. `what` names the log (`topic`, `table`),
/// whose identity id has three `/`-separated parts.
pub async fn assert_recreated_log_is_changed<L, F, Fut>(log: L, what: &str, recreate: F)
where
    L: StateLog,
    F: FnOnce(L) -> Fut,
    Fut: Future<Output = L>,
{
    let old = log.identity().clone();
    assert_eq!(old.id.split('/').count(), 3, "identity {old} of the {what} has three parts");
    append_three(&log).await;
    let marker = Marker::new(old.clone(), log.end_offsets().await.unwrap_or_else(|e| panic!("end offsets: {e}")));

    let log = recreate(log).await;
    let new = log.identity().clone();
    eprintln!("before: {old}\nafter:  {new}");
    assert_eq!(new.partitions, old.partitions);
    assert_ne!(new.id, old.id, "a recreated {what} must have another identity");
    // The new log is written up to the same offsets, so only the identity tells them apart.
    append_three(&log).await;
    let current = log.current_identity().await.unwrap_or_else(|e| panic!("current identity: {e}"));
    let earliest = log.earliest_offsets().await.unwrap_or_else(|e| panic!("earliest offsets: {e}"));
    let end = log.end_offsets().await.unwrap_or_else(|e| panic!("end offsets: {e}"));
    let Err(err) = marker.validate(&current, &earliest, &end) else { panic!("the old marker is valid") };
    eprintln!("old marker on the recreated {what}: {err}");
    assert!(matches!(err, Error::LogChanged { .. }), "{err}");
}

async fn append_three<L: StateLog>(log: &L) {
    for n in 0..3u8 {
        let record = WireRecord { key_id: KeyId::of(&[n]), key: vec![n], value: vec![n] };
        log.append(record).await.unwrap_or_else(|e| panic!("append: {e}"));
    }
}

/// A read of `partition` from `from` reaching three past its end `end` returns the records of
/// `[from, end)`, then stops; a read from `end` fails naming `{unit} {partition}` and `offset
/// {end}` (`unit` is the backend's word for a partition). Returns that error.
pub async fn assert_read_past_the_end_fails<L: StateLog>(
    log: &L,
    partition: u32,
    from: u64,
    end: u64,
    unit: &str,
) -> Error {
    let batch = log.read(partition, from, end + 3, 10).await.unwrap_or_else(|e| panic!("read: {e}"));
    assert_eq!(batch.records.iter().map(|r| r.offset).collect::<Vec<_>>(), (from..end).collect::<Vec<_>>());
    assert_eq!(batch.next, end);
    let Err(err) = log.read(partition, end, end + 3, 10).await else { panic!("a read past the end succeeded") };
    eprintln!("read past the end: {err}");
    let text = err.to_string();
    assert!(text.contains(&format!("{unit} {partition}")) && text.contains(&format!("offset {end}")), "{err}");
    err
}

/// What a client logged, for a `tracing` subscriber's writer: `.with_writer(capture.writer())`.
#[derive(Clone, Debug, Default)]
pub struct LogCapture(Arc<Mutex<Vec<u8>>>);

impl LogCapture {
    /// A capture that holds nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// A `MakeWriter` for `tracing_subscriber`: each writer appends to this capture.
    pub fn writer(&self) -> impl Fn() -> LogCapture + Send + Sync + 'static {
        let capture = self.clone();
        move || capture.clone()
    }

    /// Everything written so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(PoisonError::into_inner)).into_owned()
    }
}

impl std::io::Write for LogCapture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actionstate_memory::MemoryLog;
    use std::io::Write;

    #[tokio::test]
    async fn retries_until_it_succeeds_or_the_limit_passes() {
        let mut tries = 0;
        let got: Result<u32, String> = retry_for(Duration::from_secs(5), "test", || {
            tries += 1;
            let now = tries;
            async move { if now < 2 { Err("not yet".to_owned()) } else { Ok(now) } }
        })
        .await;
        assert_eq!(got, Ok(2));
        let started = Instant::now();
        let failed: Result<(), &str> = retry_for(Duration::ZERO, "test", || async { Err("never") }).await;
        assert_eq!(failed, Err("never"));
        assert!(started.elapsed() < Duration::from_millis(400), "no retry after the limit");
    }

    #[tokio::test]
    async fn the_memory_log_reads_back_and_stops_at_its_end() {
        let log = MemoryLog::new(1);
        let p = assert_round_trip(&log).await;
        assert_eq!((p.partition, p.offset), (0, 0));
        let err = assert_read_past_the_end_fails(&log, 0, 0, 1, "partition").await;
        assert!(err.is_retryable(), "{err}");
        // Another word for a partition is not in the memory log's error: the check fails.
        let checked = tokio::spawn(async move {
            assert_read_past_the_end_fails(&log, 0, 0, 1, "bucket").await;
        });
        assert!(checked.await.is_err_and(|e| e.is_panic()));
    }

    /// A harness whose unreachable log opens (its operations would fail).
    struct OpensUnreachable;

    impl Harness for OpensUnreachable {
        type Log = MemoryLog;
        async fn fresh(&self, partitions: u32) -> Result<MemoryLog, Error> {
            Ok(MemoryLog::new(partitions))
        }
        async fn reopen(&self, log: MemoryLog) -> Result<MemoryLog, Error> {
            Ok(log.reopen())
        }
        async fn recreate(&self, log: MemoryLog, partitions: u32) -> Result<MemoryLog, Error> {
            log.recreate(partitions);
            Ok(log)
        }
        async fn unreachable(&self) -> Result<MemoryLog, Error> {
            Ok(MemoryLog::new(1))
        }
    }

    #[tokio::test]
    async fn an_unreachable_log_that_opens_fails_the_check() {
        let checked = tokio::spawn(async { assert_unreachable_fails_fast(&OpensUnreachable, "server").await });
        assert!(checked.await.is_err_and(|e| e.is_panic()));
    }

    #[test]
    fn checks_of_text() {
        assert_debug_hides("Config { user: \"u\", password: *** }", "u", &["hunter2"]);
        let shown = std::panic::catch_unwind(|| assert_debug_hides("password: hunter2, ***, u", "u", &["hunter2"]));
        assert!(shown.is_err(), "a shown secret must fail the check");
        let refused = Err(Error::Unsupported { backend: "test".into(), operation: "authentication" });
        let text = assert_wrong_password_refused::<()>(refused, "hunter2");
        assert!(text.contains("authentication"));
        let accepted = std::panic::catch_unwind(|| assert_wrong_password_refused(Ok(()), "hunter2"));
        assert!(accepted.is_err(), "an accepted wrong password must fail the check");
        let capture = LogCapture::new();
        let mut writer = (capture.writer())();
        writer.write_all(b"WARN x").expect("write");
        writer.flush().expect("flush");
        assert_eq!(capture.text(), "WARN x");
    }
}
