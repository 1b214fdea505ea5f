//! A damaged database file is a typed error naming the file, or reads back exactly what was
//! written: never a panic, never a read that silently lost or changed records.
//!
//! One store is written with known records, then copies of its file are truncated at a spread
//! of lengths (0 bytes included) and have one byte flipped at a spread of offsets. Each copy is
//! opened four ways (verify on open or not, read-only or not) and read in full.
#![allow(clippy::unwrap_used, reason = "tests")]

use actionstate_core::{KeyId, StateLog, WireRecord};
use actionstate_file::{DB_FILE_NAME, FileConfig, FileError, FileLog};
use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::path::Path;

const PARTITIONS: u32 = 4;
const RECORDS: u64 = 200;

/// What a partition holds: offset → (log key, value).
type Expected = BTreeMap<u32, BTreeMap<u64, (Vec<u8>, Vec<u8>)>>;

/// A stand-in for the record envelope's checksum: the value carries an FNV-1a hash of the log
/// key and its payload, as every value the library writes carries a CRC-32C. With
/// `verify_on_open=false` redb does not check page checksums, so a flipped byte inside a value
/// (or a log key) reads back changed; the reader above the backend finds it by this checksum.
fn fnv(parts: &[&[u8]]) -> [u8; 8] {
    let mut h = 0xcbf2_9ce4_8422_2325_u64;
    for b in parts.iter().flat_map(|p| p.iter()) {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h.to_le_bytes()
}

fn sealed(key: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut v = fnv(&[key, payload]).to_vec();
    v.extend_from_slice(payload);
    v
}

fn seal_holds(key: &[u8], value: &[u8]) -> bool {
    value.len() >= 8 && value[..8] == fnv(&[key, &value[8..]])
}

/// Writes the store every case starts from and returns its file's bytes and its records.
async fn written_store() -> (Vec<u8>, Expected) {
    let dir = tempfile::tempdir().unwrap();
    let mut expected = Expected::new();
    {
        let log = FileLog::open(FileConfig::new(dir.path(), PARTITIONS)).unwrap();
        for n in 0..RECORDS {
            let key = format!("key-{}", n % 23).into_bytes();
            // Sizes from a few bytes to several pages, so records span leaves and overflow pages.
            let payload: Vec<u8> = (0..(n * 37 % 1500 + (n % 25) * 100)).map(|i| (i * 7 + n) as u8).collect();
            let value = sealed(&key, &payload);
            let position = log
                .append(WireRecord { key_id: KeyId::of(&key), key: key.clone(), value: value.clone() })
                .await
                .unwrap();
            expected.entry(position.partition).or_default().insert(position.offset, (key, value));
        }
        // A reclaimed prefix, so the `earliest` table holds something too.
        log.truncate_before(1, 3).await.unwrap();
        expected.get_mut(&1).unwrap().retain(|&offset, _| offset >= 3);
    }
    (std::fs::read(dir.path().join(DB_FILE_NAME)).unwrap(), expected)
}

/// How one opening of a damaged file ended, when it ended acceptably.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord, Clone, Copy)]
enum Outcome {
    /// A typed error naming the file.
    Refused,
    /// Every record read back as written.
    Intact,
    /// Every record present, and each changed one fails its checksum (only without
    /// `verify_on_open`, which is when redb does not check the pages).
    ChangedAndDetected,
}

/// Whether `err` is a typed error about the damaged file at `path`.
fn names_the_file(err: &FileError, path: &Path) -> Result<(), String> {
    let shown = err.to_string();
    if !shown.contains(&path.display().to_string()) {
        return Err(format!("the error does not name the file: {shown}"));
    }
    // The words of a bare I/O error say nothing about the file.
    if shown.contains("failed to fill whole buffer") {
        return Err(format!("the error reads as an I/O error: {shown}"));
    }
    match err {
        FileError::Corrupt { .. } | FileError::UnknownFormat { .. } | FileError::PartitionsChanged { .. } => Ok(()),
        other => Err(format!("expected a corruption error, got {other:?}")),
    }
}

/// Opens the damaged copy in `dir` and reads everything.
async fn open_and_read(dir: &Path, verify: bool, read_only: bool, expected: &Expected) -> Result<Outcome, String> {
    let path = dir.join(DB_FILE_NAME);
    let config = FileConfig { verify_on_open: verify, read_only, ..FileConfig::new(dir, PARTITIONS) };
    let log = match FileLog::open(config) {
        Ok(log) => log,
        Err(e) => return names_the_file(&e, &path).map(|()| Outcome::Refused),
    };
    let from_core = |e: actionstate_core::Error| match FileError::find(&e) {
        Some(found) => names_the_file(found, &path).map(|()| Outcome::Refused),
        None => Err(format!("a read failed with an error that is not a file error: {e}")),
    };
    if log.identity().partitions != PARTITIONS {
        return Err(format!("opened with {} partitions", log.identity().partitions));
    }
    if let Err(e) = log.current_identity().await {
        return from_core(e);
    }
    let earliest = log.earliest_offsets().await.unwrap();
    let end = log.end_offsets().await.unwrap();
    let mut changed = 0;
    for p in 0..PARTITIONS {
        let want = &expected[&p];
        let (want_earliest, want_end) = (*want.keys().next().unwrap(), *want.keys().last().unwrap() + 1);
        if (earliest[p as usize], end[p as usize]) != (want_earliest, want_end) {
            return Err(format!(
                "partition {p} opened as {}..{}, written {want_earliest}..{want_end}",
                earliest[p as usize], end[p as usize]
            ));
        }
        let mut at = want_earliest;
        while at < want_end {
            let batch = match log.read(p, at, want_end, 64).await {
                Ok(batch) => batch,
                Err(e) => return from_core(e),
            };
            for record in &batch.records {
                if record.offset != at {
                    return Err(format!("partition {p}: expected offset {at}, read {}", record.offset));
                }
                let (key, value) = &want[&at];
                if (&record.key, &record.value) != (key, value) {
                    if verify || seal_holds(&record.key, &record.value) {
                        return Err(format!("partition {p} offset {at} reads back changed, undetected"));
                    }
                    changed += 1;
                }
                at += 1;
            }
            if batch.records.is_empty() {
                return Err(format!("partition {p}: an empty read at {at}, before the end {want_end}"));
            }
        }
    }
    Ok(if changed == 0 { Outcome::Intact } else { Outcome::ChangedAndDetected })
}

/// Runs every opening of `bytes`, collecting what went wrong (a panic included) per case.
fn run_case(name: &str, bytes: &[u8], expected: &Expected, failures: &mut Vec<String>) -> Vec<Outcome> {
    let mut outcomes = Vec::new();
    for verify in [true, false] {
        for read_only in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join(DB_FILE_NAME), bytes).unwrap();
            let case = format!("{name}, verify_on_open={verify}, read_only={read_only}");
            let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
                runtime().block_on(open_and_read(dir.path(), verify, read_only, expected))
            }));
            match result {
                Ok(Ok(outcome)) => outcomes.push(outcome),
                Ok(Err(why)) => failures.push(format!("{case}: {why}")),
                Err(panic) => {
                    let message = panic
                        .downcast_ref::<&str>()
                        .map(|s| (*s).to_owned())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_default();
                    failures.push(format!("{case}: panicked: {message}"));
                }
            }
        }
    }
    outcomes
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

fn report(failures: &[String], cases: usize) {
    assert!(failures.is_empty(), "{} of {cases} openings went wrong:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn a_truncated_file_is_refused_naming_it_at_every_length() {
    let (bytes, expected) = runtime().block_on(written_store());
    let len = bytes.len();
    let mut lengths = vec![0, 1, 7, 100, 511, 512, 4095, 4096, 4097, 8192, 65_536];
    lengths.extend((1..16).map(|i| len * i / 16));
    lengths.extend([len - 8192, len - 4097, len - 4096, len - 4095, len - 512, len - 1]);
    lengths.sort_unstable();
    lengths.dedup();
    let mut failures = Vec::new();
    let mut outcomes = BTreeMap::new();
    for &at in lengths.iter().filter(|&&at| at < len) {
        for outcome in run_case(&format!("truncated to {at} of {len} bytes"), &bytes[..at], &expected, &mut failures) {
            *outcomes.entry(outcome).or_insert(0) += 1;
        }
    }
    println!("file of {len} bytes, truncations: {outcomes:?}");
    report(&failures, lengths.len() * 4);
    // A shorter file has lost something, even when what it lost was not records.
    assert!(!outcomes.contains_key(&Outcome::ChangedAndDetected), "{outcomes:?}");
}

/// Offsets to flip: the header's bytes, then an even spread over the bytes of the file that
/// are not zero (a flip in never-used, zeroed space changes nothing redb reads).
fn flip_offsets(bytes: &[u8]) -> Vec<usize> {
    let mut offsets: Vec<usize> = (0..512).step_by(17).collect();
    let live: Vec<usize> = (512..bytes.len()).filter(|&i| bytes[i] != 0).collect();
    offsets.extend(live.iter().step_by((live.len() / 80).max(1)).copied());
    offsets
}

#[test]
fn a_flipped_byte_is_refused_naming_the_file_or_reads_back_what_was_written() {
    let (bytes, expected) = runtime().block_on(written_store());
    let offsets = flip_offsets(&bytes);
    let mut failures = Vec::new();
    let mut outcomes = BTreeMap::new();
    for &at in &offsets {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x5a;
        for outcome in run_case(&format!("byte {at} flipped"), &damaged, &expected, &mut failures) {
            *outcomes.entry(outcome).or_insert(0) += 1;
        }
    }
    println!("file of {} bytes, {} flips: {outcomes:?}", bytes.len(), offsets.len());
    report(&failures, offsets.len() * 4);
    assert!(outcomes.contains_key(&Outcome::Refused), "no flip was found: the test damages nothing");
}
