//! Measures the two embedded engines the file backend could be built on, redb and fjall, for
//! the two things the backend does most: durable single-record appends (the put path) and
//! sequential full scans (rebuild).
//!
//! Run with `cargo bench -p actionstate-bench --bench engines`. Tunables (environment):
//! `ACTIONSTATE_BENCH_APPENDS` (default 2000), `ACTIONSTATE_BENCH_RECORDS` (default 1000000),
//! `ACTIONSTATE_BENCH_ROUNDS` (default 2), `ACTIONSTATE_BENCH_DIR` (default: the system temp
//! directory; it must be on a real disk, or fsync measures nothing), `ACTIONSTATE_BENCH_PARTS`
//! (default `append,filelog,scan,damage`).
//!
//! What one durable append is, per engine:
//! - redb: one write transaction (`Durability::Immediate`, the default; one-phase commit with
//!   checksums), one insert, `commit()` — redb writes the pages and header and calls
//!   `fdatasync` before `commit` returns.
//! - fjall: one `WriteBatch` with one insert and `durability(Some(PersistMode::SyncAll))`, then
//!   `commit()` — fjall appends the batch to its journal and calls `fsync` on it before
//!   returning. A `SyncData` (`fdatasync`) variant is measured too, to match redb's syscall.
#![allow(clippy::unwrap_used, reason = "a benchmark aborts on any failure")]
#![allow(missing_docs, reason = "a benchmark binary")]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const VALUE_LEN: usize = 300;
const LOAD_BATCH: u64 = 10_000;
const REDB_TABLE: redb::TableDefinition<'_, &[u8], &[u8]> = redb::TableDefinition::new("log");

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The key layout the backend uses: partition then offset, big-endian so byte order is offset
/// order.
fn key(offset: u64) -> [u8; 12] {
    let mut k = [0u8; 12];
    k[4..].copy_from_slice(&offset.to_be_bytes());
    k
}

/// Incompressible bytes, so fjall's default LZ4 gains nothing a real envelope (mostly hashes
/// and ids) would not give it either.
fn value(seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..VALUE_LEN)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x.to_le_bytes()[0]
        })
        .collect()
}

trait Engine {
    const NAME: &'static str;
    fn open(dir: &Path) -> Self;
    fn append_durable(&mut self, offset: u64, value: &[u8]);
    /// Loads records in large batches; only the last batch needs to be durable.
    fn load(&mut self, records: u64);
    /// Prepares for a cold-ish scan: everything written out of memory tables.
    fn settle(&mut self) {}
    /// Scans every record; returns (records, value bytes).
    fn scan(&self) -> (u64, u64);
    /// Time to open with a full integrity check, where the engine has one.
    fn verified_open_time(_dir: &Path) -> Option<Duration> {
        None
    }
}

struct Redb(redb::Database);

impl Engine for Redb {
    const NAME: &'static str = "redb 4";

    fn open(dir: &Path) -> Self {
        Redb(redb::Database::create(dir.join("log.redb")).unwrap())
    }

    fn append_durable(&mut self, offset: u64, value: &[u8]) {
        let txn = self.0.begin_write().unwrap();
        txn.open_table(REDB_TABLE).unwrap().insert(key(offset).as_slice(), value).unwrap();
        txn.commit().unwrap();
    }

    fn load(&mut self, records: u64) {
        let mut offset = 0;
        while offset < records {
            let txn = self.0.begin_write().unwrap();
            {
                let mut t = txn.open_table(REDB_TABLE).unwrap();
                for o in offset..records.min(offset + LOAD_BATCH) {
                    t.insert(key(o).as_slice(), value(o).as_slice()).unwrap();
                }
            }
            txn.commit().unwrap();
            offset += LOAD_BATCH;
        }
    }

    fn verified_open_time(dir: &Path) -> Option<Duration> {
        let t = Instant::now();
        let db = redb::Database::builder().set_check_integrity_on_open(true).open(dir.join("log.redb")).unwrap();
        let elapsed = t.elapsed();
        drop(db);
        Some(elapsed)
    }

    fn scan(&self) -> (u64, u64) {
        use redb::{ReadableDatabase, ReadableTable};
        let txn = self.0.begin_read().unwrap();
        let table = txn.open_table(REDB_TABLE).unwrap();
        let (mut n, mut bytes) = (0, 0);
        for row in table.iter().unwrap() {
            let (_k, v) = row.unwrap();
            n += 1;
            bytes += v.value().len() as u64;
        }
        (n, bytes)
    }
}

struct Fjall {
    db: fjall::Database,
    log: fjall::Keyspace,
    mode: fjall::PersistMode,
}

impl Fjall {
    fn open_with(dir: &Path, mode: fjall::PersistMode) -> Self {
        let db = fjall::Database::builder(dir.join("fjall")).open().unwrap();
        let log = db.keyspace("log", fjall::KeyspaceCreateOptions::default).unwrap();
        Fjall { db, log, mode }
    }

    fn append(&mut self, offset: u64, value: &[u8]) {
        let mut batch = self.db.batch().durability(Some(self.mode));
        batch.insert(&self.log, key(offset), value);
        batch.commit().unwrap();
    }

    fn load_all(&mut self, records: u64) {
        let mut offset = 0;
        while offset < records {
            let mut batch = self.db.batch();
            for o in offset..records.min(offset + LOAD_BATCH) {
                batch.insert(&self.log, key(o), value(o));
            }
            batch.commit().unwrap();
            offset += LOAD_BATCH;
        }
        self.db.persist(fjall::PersistMode::SyncAll).unwrap();
    }

    fn scan_all(&self) -> (u64, u64) {
        let (mut n, mut bytes) = (0, 0);
        for guard in self.log.iter() {
            let (_k, v) = guard.into_inner().unwrap();
            n += 1;
            bytes += v.len() as u64;
        }
        (n, bytes)
    }
}

struct FjallSyncAll(Fjall);
struct FjallSyncData(Fjall);

macro_rules! fjall_engine {
    ($ty:ident, $name:literal, $mode:expr) => {
        impl Engine for $ty {
            const NAME: &'static str = $name;
            fn open(dir: &Path) -> Self {
                $ty(Fjall::open_with(dir, $mode))
            }
            fn append_durable(&mut self, offset: u64, value: &[u8]) {
                self.0.append(offset, value);
            }
            fn load(&mut self, records: u64) {
                self.0.load_all(records);
            }
            fn settle(&mut self) {
                self.0.log.rotate_memtable_and_wait().unwrap();
            }
            fn scan(&self) -> (u64, u64) {
                self.0.scan_all()
            }
        }
    };
}

fjall_engine!(FjallSyncAll, "fjall 3 (SyncAll)", fjall::PersistMode::SyncAll);
fjall_engine!(FjallSyncData, "fjall 3 (SyncData)", fjall::PersistMode::SyncData);

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn bench_append<E: Engine>(base: &Path, appends: u64) {
    let dir = tempfile::tempdir_in(base).unwrap();
    let mut engine = E::open(dir.path());
    let values: Vec<Vec<u8>> = (0..appends + 100).map(value).collect();
    // Warm-up: file growth and first-page allocation are not what a long-running log sees.
    for o in 0..100 {
        engine.append_durable(o, &values[o as usize]);
    }
    let mut lat = Vec::with_capacity(appends as usize);
    let start = Instant::now();
    for o in 100..appends + 100 {
        let t = Instant::now();
        engine.append_durable(o, &values[o as usize]);
        lat.push(t.elapsed());
    }
    let total = start.elapsed();
    lat.sort();
    println!(
        "append  {:<20} n={appends} median={:.0}us p99={:.0}us max={:.0}us  ({:.0} appends/s)",
        E::NAME,
        us(percentile(&lat, 0.5)),
        us(percentile(&lat, 0.99)),
        us(lat[lat.len() - 1]),
        appends as f64 / total.as_secs_f64(),
    );
}

fn dir_size(path: &Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(path).unwrap() {
        let entry = entry.unwrap();
        let meta = entry.metadata().unwrap();
        total += if meta.is_dir() { dir_size(&entry.path()) } else { meta.len() };
    }
    total
}

fn bench_scan<E: Engine>(base: &Path, records: u64) {
    let dir = tempfile::tempdir_in(base).unwrap();
    let t = Instant::now();
    {
        let mut engine = E::open(dir.path());
        engine.load(records);
        engine.settle();
    }
    let load = t.elapsed();
    let t = Instant::now();
    let engine = E::open(dir.path());
    let reopen = t.elapsed();
    // The first scan after open is what a rebuild sees (engine cache empty, OS page cache warm
    // from the load); the later ones show the engine's own cached read path.
    let mut rates = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let (n, bytes) = engine.scan();
        let elapsed = t.elapsed();
        assert_eq!(n, records);
        assert_eq!(bytes, records * VALUE_LEN as u64);
        rates.push(n as f64 / elapsed.as_secs_f64());
    }
    drop(engine);
    let verify = E::verified_open_time(dir.path())
        .map_or_else(String::new, |d| format!(" verified-open={:.0}ms", d.as_secs_f64() * 1e3));
    println!(
        "scan    {:<20} n={records} first={:.0} records/s, then {:.0} / {:.0}  load={:.1}s reopen={:.0}ms{verify} size={:.0}MiB",
        E::NAME,
        rates[0],
        rates[1],
        rates[2],
        load.as_secs_f64(),
        reopen.as_secs_f64() * 1e3,
        dir_size(dir.path()) as f64 / (1024.0 * 1024.0),
    );
}

/// The backend itself: one task appending (the put path of one key), then 16 tasks appending
/// concurrently, which group commit serves with shared syncs.
fn bench_file_log(base: &Path, appends: u64) {
    use actionstate_core::{KeyId, StateLog, WireRecord};
    use actionstate_file::{FileConfig, FileLog};
    use std::sync::Arc;

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir_in(base).unwrap();
    let log = Arc::new(FileLog::open(FileConfig::new(dir.path(), 8)).unwrap());
    let wire = |task: u64, n: u64| WireRecord {
        key_id: KeyId::of(&task.to_le_bytes()),
        key: key(n).to_vec(),
        value: value(n),
    };
    runtime.block_on(async {
        for n in 0..100 {
            log.append(wire(0, n)).await.unwrap();
        }
        let mut lat = Vec::with_capacity(appends as usize);
        for n in 0..appends {
            let record = wire(0, n);
            let t = Instant::now();
            log.append(record).await.unwrap();
            lat.push(t.elapsed());
        }
        lat.sort();
        println!(
            "append  {:<20} n={appends} median={:.0}us p99={:.0}us max={:.0}us  (one task)",
            "FileLog (redb)",
            us(percentile(&lat, 0.5)),
            us(percentile(&lat, 0.99)),
            us(lat[lat.len() - 1]),
        );
        let tasks = 16;
        let per_task = appends / 4;
        let start = Instant::now();
        let handles: Vec<_> = (0..tasks)
            .map(|task| {
                let log = log.clone();
                tokio::spawn(async move {
                    for n in 0..per_task {
                        log.append(wire(task, n)).await.unwrap();
                    }
                })
            })
            .collect();
        for h in handles {
            h.await.unwrap();
        }
        let elapsed = start.elapsed();
        println!(
            "append  {:<20} n={} {:.0} appends/s  ({tasks} tasks, group commit)",
            "FileLog (redb)",
            tasks * per_task,
            (tasks * per_task) as f64 / elapsed.as_secs_f64(),
        );
    });
}

/// Overwrites 64 bytes of every 4 KiB page of `file` after the first, up to `upto` bytes: damage
/// spread over the data an engine wrote, sparing its first page (headers).
fn damage(file: &Path, upto: usize) {
    let mut bytes = std::fs::read(file).unwrap();
    let upto = upto.min(bytes.len());
    for at in (4096..upto.saturating_sub(64)).step_by(4096) {
        bytes[at..at + 64].copy_from_slice(&value(at as u64)[..64]);
    }
    std::fs::write(file, bytes).unwrap();
}

/// What each engine does when the file holding acknowledged records is damaged while closed:
/// 5000 records committed durably (100 per commit), the engine closed, the file damaged, then
/// opened again (redb with its integrity check on open) and scanned.
fn probe_damage() {
    const N: u64 = 5000;
    let report = |name: &str, outcome: std::thread::Result<String>| {
        println!("damage  {name:<20} {}", outcome.unwrap_or_else(|_| "panicked".into()));
    };

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.redb");
    {
        let db = redb::Database::create(&path).unwrap();
        for chunk in 0..N / 100 {
            let txn = db.begin_write().unwrap();
            {
                let mut t = txn.open_table(REDB_TABLE).unwrap();
                for o in chunk * 100..(chunk + 1) * 100 {
                    t.insert(key(o).as_slice(), value(o).as_slice()).unwrap();
                }
            }
            txn.commit().unwrap();
        }
    }
    let len = std::fs::metadata(&path).unwrap().len() as usize;
    damage(&path, len);
    report(
        "redb 4",
        std::panic::catch_unwind(|| match redb::Database::builder().set_check_integrity_on_open(true).open(&path) {
            Err(e) => format!("open fails: {e}"),
            Ok(db) => format!("opens; scan finds {} of {N}", Redb(db).scan().0),
        }),
    );

    let dir = tempfile::tempdir().unwrap();
    {
        let engine = FjallSyncAll::open(dir.path());
        for chunk in 0..N / 100 {
            let mut batch = engine.0.db.batch().durability(Some(fjall::PersistMode::SyncAll));
            for o in chunk * 100..(chunk + 1) * 100 {
                batch.insert(&engine.0.log, key(o), value(o));
            }
            batch.commit().unwrap();
        }
        engine.0.db.persist(fjall::PersistMode::SyncAll).unwrap();
    }
    // The records are in the journal (no memtable was flushed); the journal file is
    // preallocated, so damage only the part written.
    let journal = std::fs::read_dir(dir.path().join("fjall"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "jnl"))
        .unwrap();
    damage(&journal, (N as usize) * (VALUE_LEN + 40));
    report(
        "fjall 3",
        std::panic::catch_unwind(|| match fjall::Database::builder(dir.path().join("fjall")).open() {
            Err(e) => format!("open fails: {e}"),
            Ok(db) => {
                let log = db.keyspace("log", fjall::KeyspaceCreateOptions::default).unwrap();
                let engine = Fjall { db, log, mode: fjall::PersistMode::SyncAll };
                format!("opens; scan finds {} of {N}", engine.scan_all().0)
            }
        }),
    );
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing we act on: keep
    // that run cheap.
    let args: Vec<String> = std::env::args().collect();
    if !args.iter().any(|a| a == "--bench") {
        println!("engines: run with `cargo bench -p actionstate-bench --bench engines`");
        return;
    }
    let appends = env_u64("ACTIONSTATE_BENCH_APPENDS", 2000);
    let records = env_u64("ACTIONSTATE_BENCH_RECORDS", 1_000_000);
    let rounds = env_u64("ACTIONSTATE_BENCH_ROUNDS", 2);
    let base: PathBuf = std::env::var_os("ACTIONSTATE_BENCH_DIR").map_or_else(std::env::temp_dir, PathBuf::from);
    println!("engines: {appends} durable appends of {VALUE_LEN} B, scan of {records} records, in {}", base.display());
    let parts = std::env::var("ACTIONSTATE_BENCH_PARTS").unwrap_or_else(|_| "append,filelog,scan,damage".into());
    let part = |name: &str| parts.split(',').any(|p| p == name);
    for round in 1..=rounds {
        if !part("append") {
            break;
        }
        println!("-- round {round}");
        bench_append::<Redb>(&base, appends);
        bench_append::<FjallSyncAll>(&base, appends);
        bench_append::<FjallSyncData>(&base, appends);
    }
    if part("filelog") {
        bench_file_log(&base, appends);
    }
    for round in 1..=rounds {
        if !part("scan") {
            break;
        }
        println!("-- round {round}");
        bench_scan::<Redb>(&base, records);
        bench_scan::<FjallSyncAll>(&base, records);
    }
    if part("damage") {
        probe_damage();
    }
}
