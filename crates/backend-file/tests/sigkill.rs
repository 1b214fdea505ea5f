//! Crash safety under SIGKILL: a child process appends until it is killed at a random moment;
//! every append it acknowledged must be readable afterwards, byte for byte, at the position it
//! was acknowledged at, and nothing half-written may be present. A child killed while it
//! creates a new data directory must leave one that opens.
//!
//! `ACTIONSTATE_KILLS` sets the number of kills of each test (default 50),
//! `ACTIONSTATE_KILL_SEED` the seed of the kill delays.
#![allow(clippy::unwrap_used, reason = "tests")]

#[path = "../src/bin/file-append-child/record.rs"]
mod record;

use actionstate_core::{RangeRead, StateLog, codec};
use actionstate_file::{FileConfig, FileLog};
use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

const PARTITIONS: u32 = 4;
const TASKS: u64 = 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Ack {
    partition: u32,
    offset: u64,
    seq: u64,
    hash: u64,
}

fn parse_acks(stdout: &str) -> Vec<Ack> {
    // A line without its newline was cut by the kill and is not an acknowledgement.
    let complete = stdout.rfind('\n').map_or("", |i| &stdout[..i]);
    complete
        .lines()
        .filter(|line| !line.starts_with("reclaim "))
        .map(|line| {
            let f: Vec<&str> = line.split(' ').collect();
            assert_eq!(f.len(), 5, "bad line {line:?}");
            assert_eq!(f[0], "ack");
            Ack {
                partition: f[1].parse().unwrap(),
                offset: f[2].parse().unwrap(),
                seq: f[3].parse().unwrap(),
                hash: u64::from_str_radix(f[4], 16).unwrap(),
            }
        })
        .collect()
}

struct Contents {
    /// (partition, offset) -> (seq, value hash)
    at: HashMap<(u32, u64), (u64, u64)>,
    max_seq: Option<u64>,
}

/// The highest reclaim offsets per partition a child printed before asking for them.
fn parse_reclaims(stdout: &str) -> Vec<u64> {
    let complete = stdout.rfind('\n').map_or("", |i| &stdout[..i]);
    let mut highest = vec![0; PARTITIONS as usize];
    for line in complete.lines().filter_map(|l| l.strip_prefix("reclaim ")) {
        for (h, o) in highest.iter_mut().zip(line.split(' ')) {
            *h = (*h).max(o.parse().unwrap());
        }
    }
    highest
}

/// Reads the whole log and checks every record: dense offsets, a fully decodable envelope,
/// exactly the bytes the child writes for its sequence number, the right partition, per-key
/// order, and no record twice.
async fn check_log(log: &FileLog) -> Contents {
    check_log_from(log, &[0; PARTITIONS as usize]).await
}

/// [`check_log`] of a log whose partitions start at `earliest`.
async fn check_log_from(log: &FileLog, earliest: &[u64]) -> Contents {
    let end = log.end_offsets().await.unwrap();
    assert_eq!(log.earliest_offsets().await.unwrap(), earliest);
    let mut at = HashMap::new();
    let mut seqs = HashSet::new();
    let mut last_seq_of_key: HashMap<u64, u64> = HashMap::new();
    for p in 0..PARTITIONS {
        let mut next = earliest[p as usize];
        let mut range = RangeRead::new(p, next, end[p as usize], 500);
        while let Some(records) = range.next_batch(log).await.unwrap() {
            for r in &records {
                assert_eq!(r.offset, next, "partition {p}: offsets must be dense");
                let decoded = codec::decode(&r.key, &r.value)
                    .unwrap_or_else(|e| panic!("partition {p} offset {}: undecodable record: {e}", r.offset));
                let seq = record::seq_of(&decoded).unwrap();
                let want = record::wire(seq).unwrap();
                assert_eq!(r.key, want.key, "partition {p} offset {}: key of seq {seq}", r.offset);
                assert_eq!(r.value, want.value, "partition {p} offset {}: value of seq {seq}", r.offset);
                assert_eq!(want.key_id.partition(PARTITIONS), p, "seq {seq} in the wrong partition");
                assert!(seqs.insert(seq), "seq {seq} stored twice");
                let key = seq % record::KEYS;
                if let Some(&prev) = last_seq_of_key.get(&key) {
                    assert!(prev < seq, "key {key}: seq {seq} stored after seq {prev}");
                }
                last_seq_of_key.insert(key, seq);
                at.insert((p, r.offset), (seq, record::hash(&r.value)));
                next += 1;
            }
        }
        assert_eq!(next, end[p as usize], "partition {p}: offsets must be dense up to the end");
    }
    Contents { at, max_seq: seqs.iter().copied().max() }
}

fn run_child(dir: &Path, first: u64, delay: Duration) -> Vec<Ack> {
    parse_acks(&run_child_with(dir, first, delay, &[]))
}

/// Runs the child with `extra` arguments, kills it after `delay`, and returns what it printed.
fn run_child_with(dir: &Path, first: u64, delay: Duration, extra: &[&str]) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_file-append-child"))
        .arg(dir)
        .arg(PARTITIONS.to_string())
        .arg(first.to_string())
        .arg(TASKS.to_string())
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Drained on a thread so a full pipe never stalls the child before the kill.
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        stdout.read_to_string(&mut s).unwrap();
        s
    });
    std::thread::sleep(delay);
    let exited_early = child.try_wait().unwrap();
    child.kill().unwrap(); // SIGKILL on unix
    let status = child.wait().unwrap();
    if let Some(early) = exited_early {
        let mut err = String::new();
        child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        panic!("child exited on its own ({early}): {err}");
    }
    assert!(!status.success());
    reader.join().unwrap()
}

/// The number of kills (`ACTIONSTATE_KILLS`, default 50) and the seed of their delays
/// (`ACTIONSTATE_KILL_SEED`).
fn kills_and_seed() -> (u64, u64) {
    let kills = std::env::var("ACTIONSTATE_KILLS").ok().and_then(|v| v.parse().ok()).unwrap_or(50);
    let seed = std::env::var("ACTIONSTATE_KILL_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(0x5eed_f11e);
    (kills, seed)
}

/// Kill delays of 20 to 120 ms, from a xorshift generator seeded with `seed`.
fn delays(seed: u64) -> impl FnMut() -> Duration {
    let mut rng = seed | 1;
    move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        Duration::from_millis(20 + rng % 101)
    }
}

#[test]
fn acknowledged_appends_survive_sigkill() {
    let (kills, seed) = kills_and_seed();
    let mut next_delay = delays(seed);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut acked: Vec<Ack> = Vec::new();
    let mut first = 0;
    let mut present = 0;
    for kill in 0..kills {
        let acks = run_child(dir.path(), first, next_delay());
        acked.extend(&acks);
        let contents = runtime.block_on(async {
            let log = FileLog::open(FileConfig::new(dir.path(), PARTITIONS)).unwrap();
            check_log(&log).await
        });
        let lost: Vec<&Ack> =
            acked.iter().filter(|a| contents.at.get(&(a.partition, a.offset)) != Some(&(a.seq, a.hash))).collect();
        assert!(lost.is_empty(), "kill {kill}: acknowledged appends lost or changed: {lost:?}");
        present = contents.at.len();
        if let Some(max) = contents.max_seq {
            first = max + 1;
        }
        if let Some(max) = acks.iter().map(|a| a.seq).max() {
            first = first.max(max + 1);
        }
    }
    println!("file-sigkill kills={kills} acknowledged={} present={present} lost=0 seed={seed:#x}", acked.len());
    assert!(!acked.is_empty(), "no child acknowledged an append before its kill");
}

/// A child killed while it creates a new data directory leaves either no database or a
/// complete one: the next open never finds a half-initialized file it refuses as corrupt.
#[test]
fn creating_a_directory_survives_sigkill() {
    let (kills, _) = kills_and_seed();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut created = 0;
    for kill in 0..kills {
        let dir = tempfile::tempdir().unwrap();
        // From right after the spawn through the creation of the database.
        let acks = run_child(dir.path(), 0, Duration::from_micros(250 * (kill % 40)));
        let log = FileLog::open(FileConfig::new(dir.path(), PARTITIONS))
            .unwrap_or_else(|e| panic!("kill {kill}: the directory cannot be opened after the kill: {e}"));
        let contents = runtime.block_on(check_log(&log));
        let lost: Vec<&Ack> =
            acks.iter().filter(|a| contents.at.get(&(a.partition, a.offset)) != Some(&(a.seq, a.hash))).collect();
        assert!(lost.is_empty(), "kill {kill}: acknowledged appends lost or changed: {lost:?}");
        created += u64::from(!contents.at.is_empty());
    }
    println!("file-create-sigkill kills={kills} with-records={created}");
}

/// A child killed while it appends and reclaims at once: the directory opens, every record
/// it acknowledged at or above the highest offset it asked to reclaim below is there byte for
/// byte, the earliest offsets never pass what it asked for, and the partitions stay dense
/// from them.
#[test]
fn acknowledged_appends_above_the_reclaim_point_survive_sigkill_during_reclaim() {
    let (kills, seed) = kills_and_seed();
    let mut next_delay = delays(seed);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut acked: Vec<Ack> = Vec::new();
    let mut asked = vec![0u64; PARTITIONS as usize];
    let (mut first, mut reclaimed) = (0, 0);
    for kill in 0..kills {
        let out = run_child_with(dir.path(), first, next_delay(), &["reclaim"]);
        acked.extend(parse_acks(&out));
        for (a, r) in asked.iter_mut().zip(parse_reclaims(&out)) {
            *a = (*a).max(r);
        }
        let (earliest, contents) = runtime.block_on(async {
            let log = FileLog::open(FileConfig::new(dir.path(), PARTITIONS))
                .unwrap_or_else(|e| panic!("kill {kill}: the directory cannot be opened: {e}"));
            let earliest = log.earliest_offsets().await.unwrap();
            (earliest.clone(), check_log_from(&log, &earliest).await)
        });
        for (p, (e, a)) in earliest.iter().zip(&asked).enumerate() {
            assert!(e <= a, "kill {kill}: partition {p} reclaimed to {e}, past the {a} asked for");
        }
        let lost: Vec<&Ack> = acked
            .iter()
            .filter(|a| a.offset >= asked[a.partition as usize])
            .filter(|a| contents.at.get(&(a.partition, a.offset)) != Some(&(a.seq, a.hash)))
            .collect();
        assert!(lost.is_empty(), "kill {kill}: acknowledged appends above the reclaim point lost: {lost:?}");
        reclaimed = earliest.iter().sum::<u64>();
        if let Some(max) = contents.max_seq {
            first = max + 1;
        }
        if let Some(max) = acked.iter().map(|a| a.seq).max() {
            first = first.max(max + 1);
        }
    }
    println!("file-reclaim-sigkill kills={kills} acknowledged={} reclaimed={reclaimed} lost=0", acked.len());
    assert!(reclaimed > 0, "the children never reclaimed anything");
}
