#![allow(clippy::unwrap_used, reason = "tests")]
//! A short soak on the embedded store with retention on: the data directory and what each
//! snapshot carries stay bounded by the live work, not by the history.

use actionstate_recovery::{Retention, StoreConfig};
use actionstate_sim::soak::{SoakConfig, directory_bytes, soak};
use std::sync::Arc;

async fn run(retention: Retention, inputs: u64) -> actionstate_sim::soak::SoakReport {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let log = actionstate_file::FileLog::open(actionstate_file::FileConfig::new(&data, 8)).unwrap();
    let store_config = StoreConfig { retention, ..StoreConfig::default() };
    let config = SoakConfig { inputs, ..SoakConfig::default() };
    // Returns once the store's reclaiming is done.
    let report = soak(log, store_config, &config, &|| directory_bytes(&data), &mut |s| {
        println!(
            "soak {retention:?}: inputs={} elapsed={:.1}s rss={}MB dir={}KB snapshot_entries={} snapshot_ms={:.1} reclaimed={} states={}",
            s.inputs,
            s.elapsed_s,
            s.rss_bytes >> 20,
            s.backend_bytes >> 10,
            s.snapshot_entries,
            s.snapshot_ms,
            s.records_reclaimed,
            s.indexed_states
        );
    })
    .await
    .unwrap();
    println!("soak {retention:?}: {}", serde_json::to_string(&report).unwrap_or_default());
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_soak_keeps_the_data_directory_and_the_snapshots_bounded() {
    let report = run(Retention::default(), 30_000).await;
    // The workload's live window: keys written since the previous checkpoint (1,000 inputs of
    // conversations of four) plus those in flight (64), and the keys of the checkpoint before
    // whose records a snapshot's marker has not passed yet.
    assert!(report.snapshot_entries <= 2 * 314, "a snapshot carried {} keys", report.snapshot_entries);
    assert!(report.disk_growth <= 1.25, "the data directory grew {:.2}x over the second half", report.disk_growth);
    let reclaimed = report.samples.last().unwrap().records_reclaimed;
    assert!(reclaimed > 0, "nothing was reclaimed");

    // Without retention the same run keeps everything: the directory grows with the history.
    let kept = run(Retention::KeepAll, 30_000).await;
    assert!(kept.disk_growth > 1.5, "keeping everything grew only {:.2}x", kept.disk_growth);
}

/// Four owners share one log and write their checkpoints into it, and halfway three new owners
/// restore from it: retention runs from every owner's checkpoints, so the data directory, the
/// checkpoints and the index stay bounded by the live work through the rescale.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_soak_of_four_owners_and_a_rescale_stays_bounded() {
    four_owners_and_a_rescale(false).await;
}

/// The same with the soak keeping the checkpoints (the two-phase form, as Flink does): the
/// owners make each completed checkpoint's marker known in the log, and a rescale rebuilds
/// from the former owners' snapshots.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_soak_of_four_two_phase_owners_and_a_rescale_stays_bounded() {
    four_owners_and_a_rescale(true).await;
}

async fn four_owners_and_a_rescale(two_phase: bool) {
    use actionstate_sim::soak_owners::{Fleet, soak_owners};
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let log = Arc::new(actionstate_file::FileLog::open(actionstate_file::FileConfig::new(&data, 8)).unwrap());
    let config = SoakConfig { inputs: 24_000, in_flight: 64, checkpoint_every: 250, ..SoakConfig::default() };
    let fleet = Fleet { owners: 4, rescale_to: Some(3), two_phase };
    let report = soak_owners(log, &StoreConfig::default(), &config, fleet, &|| directory_bytes(&data), &mut |s| {
        println!(
            "owners: inputs={} elapsed={:.1}s dir={}KB snapshot_entries={} reclaimed={} states={}",
            s.inputs,
            s.elapsed_s,
            s.backend_bytes >> 10,
            s.snapshot_entries,
            s.records_reclaimed,
            s.indexed_states
        );
    })
    .await
    .unwrap();
    println!("owners: {}", serde_json::to_string(&report).unwrap_or_default());
    let last = report.samples.last().unwrap();
    assert_eq!((report.samples.len(), last.inputs), (10, 24_000), "every input was processed once");
    // Per owner: the keys of the last two checkpoint intervals (250 of its inputs, in
    // conversations of four) and the conversations in flight (64 over the owners); after the
    // rescale, an owner's first checkpoint names the keys its restore relearned from up to two
    // former owners. Whatever the history: 24,000 inputs wrote 6,000 keys.
    let bound = 4 * (250 / 4 + 64);
    assert!(report.snapshot_entries <= bound, "a checkpoint named {} keys (bound {bound})", report.snapshot_entries);
    assert!(report.disk_growth <= 1.25, "the data directory grew {:.2}x over the second half", report.disk_growth);
    assert!(last.indexed_states <= 8 * bound, "{} states indexed at the end", last.indexed_states);
    assert!(last.records_reclaimed > 0, "nothing was reclaimed");
}
