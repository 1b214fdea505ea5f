//! The writer appends go through, and its replacement when a leader move leaves it stuck.
//!
//! fluss-rs 1.0.0's idempotent writer does not always resume a bucket whose leader was killed:
//! the cluster elects a new leader within seconds, but the batch stays unacknowledged until the
//! delivery timeout, while a writer on a new connection writes at once. So appends go through a
//! [`Generation`] (a connection of its own and a writer on it), and an append that is not
//! acknowledged within [`FlussConfig::stall_timeout`] asks [`Appender::recover`]: if its
//! bucket's leader has changed since the record was handed to the writer, the stuck generation
//! is closed (its sender task aborted, so it sends nothing more) and a new one takes its place,
//! on which the append tries again within its deadline.
//!
//! A writer that fluss-rs closed for good (it got no writer ID while no tablet server answered)
//! is replaced the same way, by the first append that finds it closed
//! ([`Appender::replace_dead`]).
//!
//! Appends that the replaced generation still held (for other buckets, whose leaders did not
//! move) are appended again on the new one too: the old generation is closed first.
//!
//! Why a record appended twice this way replays as one (docs/design.md, section 8): the retry
//! is made only once the old generation can send nothing more (its sender task is aborted
//! before the new generation is handed out). What a leader accepted from the old generation
//! and replicated lies before the retry in the bucket's log; what a killed leader accepted and
//! did not replicate is truncated by the new leader; so an old copy, if any, lies before the
//! new one. Between the two there is no other record of the
//! same business key, since a key's writes are serialized and this one has not returned, and
//! replaying the same record twice in a row leaves the index as once (an upsert replaces the
//! identical state, a tombstone or an audit finds nothing more to remove, a fence or a
//! checkpoint record changes no state).

use crate::client::{connect, request};
use crate::config::FlussConfig;
use crate::error::FlussError;
use fluss::client::{AppendWriter, FlussConnection};
use fluss::metadata::{TableBucket, TableInfo, TablePath};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::runtime::Runtime;
use tokio::sync::watch;

/// How long stopping a replaced writer's tasks may take.
const STOP_WAIT: Duration = Duration::from_secs(1);

/// A connection of the writer's own and the writer on it, whose client tasks run on a runtime
/// of their own.
///
/// Why a runtime of its own: fluss-rs 1.0.0's writer, once shut down (closed or dropped) while
/// a batch waits behind an unanswered request to a killed leader, drains in a loop that never
/// yields (`Sender::run_with_shutdown`): it holds a worker thread at full CPU for good, and a
/// task abort cannot reach it. So a generation is never shut down that way: its runtime is
/// stopped while the sender is idle in its loop, which drops the sender task, and only then is
/// the writer dropped.
pub(crate) struct Generation {
    /// Counts the generations of one log, from 0.
    pub(crate) number: u64,
    /// Taken out once, when the generation is stopped.
    tasks: Mutex<Option<Runtime>>,
    /// Set once the generation's tasks are stopped: it sends nothing more.
    stopped: watch::Sender<bool>,
    connection: Arc<FlussConnection>,
    pub(crate) writer: Arc<AppendWriter>,
    table_id: i64,
}

impl Generation {
    /// Connects and creates a writer on `path`, which must still be the table `info` describes.
    pub(crate) async fn open(
        config: &FlussConfig,
        path: &TablePath,
        info: &TableInfo,
        number: u64,
    ) -> Result<Generation, FlussError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name(format!("fluss-writer-{number}"))
            .enable_all()
            .build()
            .map_err(|source| FlussError::WriterThread { table: config.table_name(), source })?;
        let (config, path, table_id) = (config.clone(), path.clone(), info.get_table_id());
        let opening = runtime.spawn(async move {
            let connection = connect(&config).await?;
            let table =
                request(&config, "fetching the table metadata for a writer", connection.get_table(&path)).await?;
            if table.get_table_info().get_table_id() != table_id {
                return Err(FlussError::TableMissing { table: config.table_name() });
            }
            // Created here, so that its sender task runs on this generation's runtime.
            let writer = table.new_append().and_then(|a| a.create_writer()).map_err(|source| FlussError::Client {
                operation: "creating the writer",
                table: config.table_name(),
                source: Box::new(source),
            })?;
            drop(table);
            Ok((Arc::new(connection), Arc::new(writer)))
        });
        // Shut down in the background if this future is dropped while it opens (an append's
        // deadline passed): dropping a runtime on an async thread panics.
        let mut tasks = Unopened(Some(runtime));
        let opened = match opening.await {
            Ok(opened) => opened,
            Err(e) => Err(FlussError::Unexpected(format!("opening a Fluss writer failed: {e}"))),
        };
        let (connection, writer) = opened?;
        Ok(Generation {
            number,
            tasks: Mutex::new(tasks.0.take()),
            stopped: watch::Sender::new(false),
            connection,
            writer,
            table_id,
        })
    }

    /// The tablet server this generation's metadata names as the leader of `bucket`, if any.
    pub(crate) fn leader_of(&self, bucket: u32) -> Option<i32> {
        let bucket = TableBucket::new(self.table_id, i32::try_from(bucket).ok()?);
        self.connection.get_metadata().get_cluster().leader_for(&bucket).map(|node| node.id())
    }

    /// Sends what the writer holds now, without waiting for it: the caller waits for its own
    /// record only, so that a bucket without a leader does not hold up the others.
    pub(crate) fn flush_in_background(&self) {
        let tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        let (Some(tasks), Ok(client)) = (tasks.as_ref(), self.connection.get_or_create_writer_client()) else {
            return;
        };
        drop(tasks.spawn(async move {
            let _ = client.flush().await;
        }));
    }

    /// Resolves once the generation is stopped: what it still holds is never sent.
    pub(crate) async fn stopped(&self) {
        let mut stopped = self.stopped.subscribe();
        let _ = stopped.wait_for(|s| *s).await;
    }

    /// Stops the generation's tasks, the sender among them, and waits (at most [`STOP_WAIT`])
    /// until they are dropped. Appends it still holds are never sent and never acknowledged.
    async fn stop(&self) {
        let Some(tasks) = self.tasks.lock().unwrap_or_else(PoisonError::into_inner).take() else {
            return;
        };
        let (done, stopping) = tokio::sync::oneshot::channel();
        // Off the async threads: a runtime is shut down from a thread that may block.
        let spawned = std::thread::Builder::new().name("fluss-writer-stop".into()).spawn(move || {
            tasks.shutdown_timeout(STOP_WAIT);
            let _ = done.send(());
        });
        match spawned {
            Ok(_) => {
                if tokio::time::timeout(2 * STOP_WAIT, stopping).await.is_err() {
                    tracing::warn!(
                        generation = self.number,
                        "a replaced Fluss writer did not stop within {STOP_WAIT:?}"
                    );
                }
            }
            Err(e) => tracing::warn!(generation = self.number, error = %e, "no thread to stop a replaced Fluss writer"),
        }
        self.stopped.send_replace(true);
    }
}

/// The runtime of a generation being opened: shut down in the background unless the
/// generation takes it.
struct Unopened(Option<tokio::runtime::Runtime>);

impl Drop for Unopened {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

impl Drop for Generation {
    fn drop(&mut self) {
        // The tasks go first, then the writer (see the type's docs); off this thread, which may
        // be one of a runtime's.
        let tasks = self.tasks.get_mut().unwrap_or_else(PoisonError::into_inner).take();
        let (connection, writer) = (Arc::clone(&self.connection), Arc::clone(&self.writer));
        let _ = std::thread::Builder::new().name("fluss-writer-stop".into()).spawn(move || {
            if let Some(tasks) = tasks {
                tasks.shutdown_timeout(STOP_WAIT);
            }
            drop((writer, connection));
        });
    }
}

/// What [`Appender::recover`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Recovery {
    /// The generation the record went to is closed (replaced because this bucket's leader or
    /// another's moved): append it again, on the current generation.
    Retry,
    /// No leader has moved, and the generation still runs: keep waiting.
    Wait,
}

/// The current generation, and the lock that makes one replacement at a time.
pub(crate) struct Appender {
    current: Mutex<Arc<Generation>>,
    replacing: tokio::sync::Mutex<()>,
}

impl Appender {
    pub(crate) fn new(first: Generation) -> Appender {
        Appender { current: Mutex::new(Arc::new(first)), replacing: tokio::sync::Mutex::new(()) }
    }

    /// The generation appends go to now.
    pub(crate) fn current(&self) -> Arc<Generation> {
        Arc::clone(&self.current.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Called for an append to `bucket` that `stuck` did not acknowledge in time, or failed,
    /// when the leader was `sent_to` as the append was handed to it: replaces `stuck` if the
    /// bucket's leader has changed since (see the module docs), and says whether to retry.
    pub(crate) async fn recover(
        &self,
        config: &FlussConfig,
        path: &TablePath,
        info: &TableInfo,
        stuck: &Generation,
        bucket: u32,
        sent_to: Option<i32>,
    ) -> Result<Recovery, FlussError> {
        let _one_at_a_time = self.replacing.lock().await;
        let current = self.current();
        if current.number != stuck.number {
            // Replaced meanwhile, and stopped before the lock was released.
            return Ok(Recovery::Retry);
        }
        let next = Generation::open(config, path, info, stuck.number + 1).await?;
        let leader = next.leader_of(bucket);
        if !moved(sent_to, leader) {
            // Dropped unused: its writer holds nothing.
            return Ok(Recovery::Wait);
        }
        tracing::warn!(
            table = %config.table_name(),
            bucket,
            from = ?sent_to,
            to = ?leader,
            generation = next.number,
            "the leader of a Fluss bucket moved and its append is stuck: replacing the writer"
        );
        self.install(next, stuck).await;
        Ok(Recovery::Retry)
    }

    /// Replaces `dead`, whose writer was closed for good (see
    /// [`writer_dead`](crate::error::writer_dead)), unless another append has replaced it
    /// already. The caller then appends again, on the current generation.
    pub(crate) async fn replace_dead(
        &self,
        config: &FlussConfig,
        path: &TablePath,
        info: &TableInfo,
        dead: &Generation,
    ) -> Result<(), FlussError> {
        let _one_at_a_time = self.replacing.lock().await;
        if self.current().number != dead.number {
            return Ok(());
        }
        let next = Generation::open(config, path, info, dead.number + 1).await?;
        tracing::warn!(
            table = %config.table_name(),
            generation = next.number,
            "the Fluss writer was closed for good (no writer ID): replacing it"
        );
        self.install(next, dead).await;
        Ok(())
    }

    /// Makes `next` the current generation and stops `old`. New appends go to `next` at once;
    /// appends of `old` retry only once it is stopped (they wait for the replacing lock, which
    /// the caller holds), so no record is sent by both at once.
    async fn install(&self, next: Generation, old: &Generation) {
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = Arc::new(next);
        old.stop().await;
    }
}

/// Whether a bucket's leader is another one than the one an append was handed over under.
fn moved(sent_to: Option<i32>, now: Option<i32>) -> bool {
    now.is_some() && now != sent_to
}

#[cfg(test)]
mod tests {
    use super::moved;

    #[test]
    fn a_leader_moved_only_to_a_known_other_server() {
        assert!(moved(Some(0), Some(1)));
        assert!(moved(None, Some(1)));
        assert!(!moved(Some(1), Some(1)));
        // No leader now: nothing to retry on yet.
        assert!(!moved(Some(1), None));
        assert!(!moved(None, None));
    }
}
