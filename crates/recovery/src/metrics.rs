//! Metric names and helpers, through the `metrics` facade (install any recorder to collect).
//!
//! | name | kind | labels |
//! |---|---|---|
//! | `actionstate_hits_total` | counter | `kind` = `reuse` \| `resume` |
//! | `actionstate_misses_total` | counter | `reason` = `absent` \| `root_changed` \| `occurrence_conflict` |
//! | `actionstate_invalidated_states_total` | counter | `reason` = `miss:absent` \| `miss:root_changed` \| `miss:occurrence_conflict` \| `producer_replaced` \| `operator` |
//! | `actionstate_durable_calls_total` | counter | `source` = `journal` \| `executed` \| `reconciled` |
//! | `actionstate_put_seconds` | histogram | |
//! | `actionstate_put_failures_total` | counter | `retryable` |
//! | `actionstate_rebuild_records_total` | counter | |
//! | `actionstate_rebuild_records_per_second` | gauge | |
//! | `actionstate_reclaimed_records_total` | counter | |
//! | `actionstate_reclaim_failures_total` | counter | |

use actionstate_core::MissReason;
use actionstate_index::Invalidation;
use std::time::Duration;

pub(crate) fn hit(kind: &'static str) {
    metrics::counter!("actionstate_hits_total", "kind" => kind).increment(1);
}

pub(crate) fn miss(reason: MissReason) {
    metrics::counter!("actionstate_misses_total", "reason" => reason.as_str()).increment(1);
}

pub(crate) fn invalidated(inv: &Invalidation) {
    for r in &inv.removed {
        metrics::counter!("actionstate_invalidated_states_total", "reason" => r.reason.name()).increment(1);
    }
}

pub(crate) fn call(source: &'static str) {
    metrics::counter!("actionstate_durable_calls_total", "source" => source).increment(1);
}

pub(crate) fn put_latency(d: Duration) {
    metrics::histogram!("actionstate_put_seconds").record(d.as_secs_f64());
}

pub(crate) fn put_failed(retryable: bool) {
    metrics::counter!("actionstate_put_failures_total", "retryable" => if retryable { "true" } else { "false" })
        .increment(1);
}

pub(crate) fn rebuilt(records: u64, per_second: f64) {
    metrics::counter!("actionstate_rebuild_records_total").increment(records);
    metrics::gauge!("actionstate_rebuild_records_per_second").set(per_second);
}

pub(crate) fn reclaimed(records: u64) {
    metrics::counter!("actionstate_reclaimed_records_total").increment(records);
}

pub(crate) fn reclaim_failed() {
    metrics::counter!("actionstate_reclaim_failures_total").increment(1);
}
