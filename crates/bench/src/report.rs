//! The figures every backend's benchmark reports, and how they print: the put latency of the
//! store against the raw client, and the rebuild throughput of the store against the raw
//! client and the backend's own `StateLog::read`.

use actionstate_cli::measure::{median, percentile};
use serde::Serialize;

/// Rounds of each rebuild measurement. On a small machine shared with the server, single
/// rounds vary by 2× (BENCHMARKS.md), so each round runs every side back to back and the
/// figures are medians over the rounds. Nine: one run's Kafka rounds spread from 0.37 to 0.90,
/// and the first round of a process is always the slow one, so with five the median was
/// often the second-slowest warm round.
pub(crate) const ROUNDS: usize = 9;

/// Sequential put latency of the store against the raw client, in µs, from the sorted
/// samples of one run. Every backend's report carries it.
#[derive(Serialize, Debug)]
pub(crate) struct PutFigures {
    pub(crate) puts: usize,
    put_median_us: f64,
    put_p99_us: f64,
    raw_median_us: f64,
    raw_p99_us: f64,
    put_ratio: f64,
}

impl PutFigures {
    pub(crate) fn of(puts: usize, ours: &[f64], raw: &[f64]) -> Self {
        PutFigures {
            puts,
            put_median_us: percentile(ours, 0.5),
            put_p99_us: percentile(ours, 0.99),
            raw_median_us: percentile(raw, 0.5),
            raw_p99_us: percentile(raw, 0.99),
            put_ratio: percentile(ours, 0.5) / percentile(raw, 0.5).max(1e-9),
        }
    }

    /// The store and raw lines; `raw` names the raw operation, `target` is the highest
    /// `put_ratio` the backend's issue accepts.
    pub(crate) fn print(&self, raw: &str, target: f64) {
        outln!("  store put     median {:.0} µs  p99 {:.0} µs", self.put_median_us, self.put_p99_us);
        outln!("  {raw:<13} median {:.0} µs  p99 {:.0} µs", self.raw_median_us, self.raw_p99_us);
        outln!("  put_ratio     {:.3} (target ≤ {target})", self.put_ratio);
    }
}

/// One round of a rebuild measurement: the store's rebuild, the raw client's read of the same
/// records and the backend's own `StateLog::read`, run back to back, in records/s.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RebuildRound {
    pub(crate) rebuild: f64,
    pub(crate) raw: f64,
    pub(crate) log_read: f64,
}

/// Rebuild throughput of the store against a raw client reading the same records, and
/// against the backend's own `StateLog::read` of every partition without decoding. Rates are
/// medians over the rounds; ratios are taken within each round (its sides ran back to back
/// against the same server state) and the median reported, with every round's ratio.
#[derive(Serialize, Debug)]
pub(crate) struct RebuildFigures {
    records: u64,
    record_bytes: u64,
    rebuild_records_per_s: f64,
    #[serde(flatten)]
    raw: RawRead,
    rebuild_ratio: f64,
    rebuild_round_ratios: Vec<f64>,
    log_read_records_per_s: f64,
    rebuild_vs_log_read: f64,
}

/// Records/s of the raw client, named for how it reads: a consumer or scanner of the log
/// (Kafka, Fluss), or a scan of the database file (embedded backend).
#[derive(Serialize, Debug, Clone, Copy)]
pub(crate) enum RawRead {
    #[serde(rename = "raw_read_records_per_s")]
    #[cfg_attr(
        not(any(feature = "kafka", feature = "fluss")),
        allow(dead_code, reason = "read by the server backends")
    )]
    Read(f64),
    #[serde(rename = "raw_scan_records_per_s")]
    Scan(f64),
}

impl RawRead {
    fn per_s(self) -> f64 {
        match self {
            RawRead::Read(r) | RawRead::Scan(r) => r,
        }
    }
}

impl RebuildFigures {
    /// `raw` names the raw client's figure (`RawRead::Read` or `RawRead::Scan`).
    pub(crate) fn of(records: u64, bytes: u64, raw: fn(f64) -> RawRead, rounds: &[RebuildRound]) -> Self {
        let ratios: Vec<f64> = rounds.iter().map(|r| r.rebuild / r.raw.max(1e-9)).collect();
        RebuildFigures {
            records,
            record_bytes: bytes / records.max(1),
            rebuild_records_per_s: median(rounds.iter().map(|r| r.rebuild)),
            raw: raw(median(rounds.iter().map(|r| r.raw))),
            rebuild_ratio: median(ratios.iter().copied()),
            rebuild_round_ratios: ratios,
            log_read_records_per_s: median(rounds.iter().map(|r| r.log_read)),
            rebuild_vs_log_read: median(rounds.iter().map(|r| r.rebuild / r.log_read.max(1e-9))),
        }
    }

    /// The rebuild lines; `raw` names the raw reader, `partitions` what the log is split into.
    pub(crate) fn print(&self, raw: &str, partitions: &str) {
        outln!(
            "rebuild of {} records ({} bytes each), medians of {} rounds:",
            self.records,
            self.record_bytes,
            self.rebuild_round_ratios.len()
        );
        outln!("  store rebuild {:.0} records/s", self.rebuild_records_per_s);
        outln!("  {raw:<13} {:.0} records/s", self.raw.per_s());
        outln!(
            "  rebuild_ratio {:.3} (target ≥ 0.7; rounds {})",
            self.rebuild_ratio,
            ratios_text(&self.rebuild_round_ratios)
        );
        outln!(
            "  StateLog::read of all {partitions}, no decoding: {:.0} records/s (rebuild at {:.3} of it)",
            self.log_read_records_per_s,
            self.rebuild_vs_log_read
        );
    }
}

/// `0.61 0.72 ...`: the ratio of every round, in the order they ran.
pub(crate) fn ratios_text(ratios: &[f64]) -> String {
    ratios.iter().map(|r| format!("{r:.2}")).collect::<Vec<_>>().join(" ")
}

/// Whether a rebuild that read `records` read the `written` records and the fence records of
/// round `round`'s rebuild and of every one before it (one per partition each).
#[cfg(any(feature = "kafka", feature = "fluss"))]
pub(crate) fn fenced_count(records: u64, written: u64, round: usize, partitions: u64) -> bool {
    u64::try_from(round + 1).is_ok_and(|rebuilds| records == written + rebuilds * partitions)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    #[test]
    fn put_ratio_is_the_store_median_over_the_raw_median() {
        let f = PutFigures::of(3, &[10.0, 20.0, 90.0], &[5.0, 8.0, 9.0]);
        assert_eq!((f.put_median_us, f.raw_median_us, f.put_p99_us), (20.0, 8.0, 90.0));
        assert_eq!(f.put_ratio, 2.5);
    }

    /// Each round's ratio is taken within the round, and the reported ratio is their median,
    /// not the ratio of the median rates.
    #[test]
    fn rebuild_ratio_is_the_median_of_the_ratios_within_rounds() {
        let rounds = [
            RebuildRound { rebuild: 10.0, raw: 20.0, log_read: 40.0 },
            RebuildRound { rebuild: 90.0, raw: 100.0, log_read: 90.0 },
            RebuildRound { rebuild: 30.0, raw: 40.0, log_read: 60.0 },
        ];
        let f = RebuildFigures::of(3, 900, RawRead::Scan, &rounds);
        assert_eq!(f.rebuild_round_ratios, [0.5, 0.9, 0.75]);
        assert_eq!(f.rebuild_ratio, 0.75);
        assert_eq!((f.rebuild_records_per_s, f.raw.per_s(), f.log_read_records_per_s), (30.0, 40.0, 60.0));
        assert_eq!(f.rebuild_vs_log_read, 0.5);
        assert_eq!(f.record_bytes, 300);
        let json = serde_json::to_value(&f).unwrap();
        assert_eq!(json["raw_scan_records_per_s"], 40.0, "{json}");
    }

    #[test]
    #[cfg(any(feature = "kafka", feature = "fluss"))]
    fn a_rebuild_reads_the_records_and_one_fence_per_partition_per_rebuild() {
        assert!(fenced_count(108, 100, 0, 8));
        assert!(fenced_count(116, 100, 1, 8));
        assert!(!fenced_count(108, 100, 1, 8));
    }
}
