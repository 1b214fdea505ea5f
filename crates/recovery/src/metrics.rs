//! The metrics a store records, through the [`metrics`](https://docs.rs/metrics) facade.
//!
//! A store records them into whatever recorder the process installed, and into nothing
//! otherwise. `actionstate demo`, `soak` and `bench` serve them in the Prometheus text format
//! with `--metrics ADDR` (docs/cli.md, "Watching a store"); a runtime that embeds the store
//! installs its own recorder, calls [`describe`] for the help texts and units, and gives
//! [`PUT_SECONDS`] the buckets [`PUT_SECONDS_BUCKETS`] to render it as a histogram.
//!
//! Every metric is global to the process: the stores of one process (a store and the one
//! rebuilt after a crash, the two runs of `soak --compare`) add to the same series.
//!
//! | name | type | labels | unit | what it counts |
//! |---|---|---|---|---|
//! | `actionstate_hits_total` | counter | `kind` = `reuse` \| `resume` | lookups | lookups that reuse a completed action or resume one from its journal |
//! | `actionstate_misses_total` | counter | `reason` = `absent` \| `root_changed` \| `occurrence_conflict` | lookups | lookups that run the action fresh, by why nothing recorded could be used |
//! | `actionstate_invalidated_states_total` | counter | `reason` = `miss:absent` \| `miss:root_changed` \| `miss:occurrence_conflict` \| `producer_replaced` \| `operator` | states | recorded states removed by an invalidation (a divergence or an operator's repair) |
//! | `actionstate_durable_calls_total` | counter | `source` = `journal` \| `executed` \| `reconciled` | calls | durable calls, by whether the journal answered, the call ran, or it was reconciled |
//! | `actionstate_put_seconds` | histogram | | seconds | time from a put's append to the backend's acknowledgement; its `_count` is the number of acknowledged puts |
//! | `actionstate_put_failures_total` | counter | `retryable` = `true` \| `false` | puts | puts whose append failed, by whether retrying can help |
//! | `actionstate_rebuild_records_total` | counter | | records | records read by finished rebuilds |
//! | `actionstate_rebuild_seconds` | histogram | | seconds | how long each finished rebuild took; its `_count` is the number of rebuilds, and `actionstate_rebuild_records_total` over its `_sum` their overall rate |
//! | `actionstate_rebuild_records_per_second` | gauge | | records/s | the rate of the last finished rebuild |
//! | `actionstate_reclaimed_records_total` | counter | | records | records the backend reclaimed under retention |
//! | `actionstate_reclaim_failures_total` | counter | | reclaims | reclaims that failed (retried at the next completed checkpoint) |
//! | `actionstate_fenced_records_total` | counter | | records | records a rebuild skipped as a fenced writer's (written with an older epoch after a fence over their key) |
//! | `actionstate_fenced_total` | counter | | stores | stores that learned a newer owner fenced them (a zombie) |
//! | `actionstate_rounds_dropped_total` | counter | | rounds | rounds started with `ActionStateStore::round` and dropped unfinished (replayed after a restore) |
//! | `actionstate_waits_total` | counter | `event` = `suspended` \| `reply` \| `rejected` \| `timed_out` \| `resumed` | waits | durable waits begun, ended by each outcome, and returned to their resumed actions |
//! | `actionstate_carried_states_total` | counter | | states | long-lived states appended again before a checkpoint so that retention passes their old records |
//!
//! Histograms carry no labels. The command line renders `actionstate_put_seconds` with the
//! buckets [`PUT_SECONDS_BUCKETS`] and `actionstate_rebuild_seconds` as a summary (quantiles,
//! `_sum` and `_count`); a recorder given no buckets renders both as summaries.

use actionstate_core::MissReason;
use actionstate_index::Invalidation;
use metrics::Unit;
use std::time::Duration;

/// Lookups that reuse or resume (`kind`).
pub const HITS: &str = "actionstate_hits_total";
/// Lookups that run fresh (`reason`).
pub const MISSES: &str = "actionstate_misses_total";
/// Recorded states removed by invalidations (`reason`).
pub const INVALIDATED_STATES: &str = "actionstate_invalidated_states_total";
/// Durable calls (`source`).
pub const DURABLE_CALLS: &str = "actionstate_durable_calls_total";
/// Put latency, append to acknowledgement, in seconds (a histogram).
pub const PUT_SECONDS: &str = "actionstate_put_seconds";
/// Failed puts (`retryable`).
pub const PUT_FAILURES: &str = "actionstate_put_failures_total";
/// Records read by finished rebuilds.
pub const REBUILD_RECORDS: &str = "actionstate_rebuild_records_total";
/// How long each finished rebuild took, in seconds (a histogram).
pub const REBUILD_SECONDS: &str = "actionstate_rebuild_seconds";
/// Records per second of the last finished rebuild (a gauge).
pub const REBUILD_RECORDS_PER_SECOND: &str = "actionstate_rebuild_records_per_second";
/// Records reclaimed under retention.
pub const RECLAIMED_RECORDS: &str = "actionstate_reclaimed_records_total";
/// Failed reclaims.
pub const RECLAIM_FAILURES: &str = "actionstate_reclaim_failures_total";
/// Records rebuilds skipped as a fenced writer's.
pub const FENCED_RECORDS: &str = "actionstate_fenced_records_total";
/// Stores that learned they were fenced.
pub const FENCED: &str = "actionstate_fenced_total";
/// Rounds dropped unfinished.
pub const ROUNDS_DROPPED: &str = "actionstate_rounds_dropped_total";
/// Durable waits (`event`).
pub const WAITS: &str = "actionstate_waits_total";
/// Counter: long-lived states carried forward (`StoreConfig::carry_forward_after`).
pub const CARRIED_STATES: &str = "actionstate_carried_states_total";

/// Bucket bounds for [`PUT_SECONDS`], in seconds: 50 µs to 5 s, covering an embedded store's
/// sub-millisecond appends and a broker's milliseconds to a slow acknowledgement.
pub const PUT_SECONDS_BUCKETS: &[f64] =
    &[0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0];

/// Gives the installed recorder each metric's unit and help text (Prometheus `# HELP`). Call
/// it after installing the recorder: a recorder installed later has not heard it.
pub fn describe() {
    metrics::describe_counter!(
        HITS,
        Unit::Count,
        "Lookups that reuse a completed action or resume it from its journal"
    );
    metrics::describe_counter!(MISSES, Unit::Count, "Lookups that run the action fresh, by reason");
    metrics::describe_counter!(INVALIDATED_STATES, Unit::Count, "Recorded states removed by invalidations, by reason");
    metrics::describe_counter!(DURABLE_CALLS, Unit::Count, "Durable calls, by source");
    metrics::describe_histogram!(PUT_SECONDS, Unit::Seconds, "Put latency from append to acknowledgement");
    metrics::describe_counter!(PUT_FAILURES, Unit::Count, "Puts whose append failed");
    metrics::describe_counter!(REBUILD_RECORDS, Unit::Count, "Records read by finished rebuilds");
    metrics::describe_histogram!(REBUILD_SECONDS, Unit::Seconds, "How long each finished rebuild took");
    metrics::describe_gauge!(
        REBUILD_RECORDS_PER_SECOND,
        Unit::CountPerSecond,
        "Records per second of the last rebuild"
    );
    metrics::describe_counter!(RECLAIMED_RECORDS, Unit::Count, "Records reclaimed under retention");
    metrics::describe_counter!(RECLAIM_FAILURES, Unit::Count, "Reclaims that failed");
    metrics::describe_counter!(FENCED_RECORDS, Unit::Count, "Records rebuilds skipped as a fenced writer's");
    metrics::describe_counter!(FENCED, Unit::Count, "Stores that learned a newer owner fenced them");
    metrics::describe_counter!(ROUNDS_DROPPED, Unit::Count, "Rounds dropped unfinished, replayed after a restore");
    metrics::describe_counter!(WAITS, Unit::Count, "Durable waits begun, ended and resumed, by event");
    metrics::describe_counter!(
        CARRIED_STATES,
        Unit::Count,
        "Long-lived states appended again so retention passes them"
    );
}

pub(crate) fn hit(kind: &'static str) {
    metrics::counter!(HITS, "kind" => kind).increment(1);
}

pub(crate) fn miss(reason: MissReason) {
    metrics::counter!(MISSES, "reason" => reason.as_str()).increment(1);
}

pub(crate) fn invalidated(inv: &Invalidation) {
    for r in &inv.removed {
        metrics::counter!(INVALIDATED_STATES, "reason" => r.reason.name()).increment(1);
    }
}

pub(crate) fn call(source: &'static str) {
    metrics::counter!(DURABLE_CALLS, "source" => source).increment(1);
}

pub(crate) fn put_latency(d: Duration) {
    metrics::histogram!(PUT_SECONDS).record(d.as_secs_f64());
}

pub(crate) fn put_failed(retryable: bool) {
    metrics::counter!(PUT_FAILURES, "retryable" => if retryable { "true" } else { "false" }).increment(1);
}

pub(crate) fn rebuilt(records: u64, duration: Duration, per_second: f64) {
    metrics::counter!(REBUILD_RECORDS).increment(records);
    metrics::histogram!(REBUILD_SECONDS).record(duration.as_secs_f64());
    metrics::gauge!(REBUILD_RECORDS_PER_SECOND).set(per_second);
}

pub(crate) fn reclaimed(records: u64) {
    metrics::counter!(RECLAIMED_RECORDS).increment(records);
}

pub(crate) fn reclaim_failed() {
    metrics::counter!(RECLAIM_FAILURES).increment(1);
}

pub(crate) fn fenced_records(records: u64) {
    metrics::counter!(FENCED_RECORDS).increment(records);
}

pub(crate) fn fenced() {
    metrics::counter!(FENCED).increment(1);
}

pub(crate) fn round_dropped() {
    metrics::counter!(ROUNDS_DROPPED).increment(1);
}

pub(crate) fn wait(event: &'static str) {
    metrics::counter!(WAITS, "event" => event).increment(1);
}

pub(crate) fn carried(states: u64) {
    metrics::counter!(CARRIED_STATES).increment(states);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every metric has a row in the table of the module docs, and every row names a metric.
    #[test]
    fn the_table_lists_every_metric() {
        let all = [
            HITS,
            MISSES,
            INVALIDATED_STATES,
            DURABLE_CALLS,
            PUT_SECONDS,
            PUT_FAILURES,
            REBUILD_RECORDS,
            REBUILD_SECONDS,
            REBUILD_RECORDS_PER_SECOND,
            RECLAIMED_RECORDS,
            RECLAIM_FAILURES,
            FENCED_RECORDS,
            FENCED,
            ROUNDS_DROPPED,
            WAITS,
            CARRIED_STATES,
        ];
        let rows: Vec<&str> = include_str!("metrics.rs")
            .lines()
            .filter_map(|l| l.strip_prefix("//! | `"))
            .filter_map(|l| l.split('`').next())
            .collect();
        let mut sorted = all.to_vec();
        sorted.sort_unstable();
        let mut listed = rows.clone();
        listed.sort_unstable();
        assert_eq!(listed, sorted, "the table's rows: {rows:?}");
    }
}
