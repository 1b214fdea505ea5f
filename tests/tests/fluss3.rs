//! Tablet servers of the three-server Fluss cluster die under a stream of puts, and nothing
//! acknowledged is lost (`cargo xtask services up fluss3`: tables replicated three times, at
//! least two replicas in sync for an acknowledged append).
//!
//! - `leader_kills_lose_no_acknowledged_state_on_fluss3` SIGKILLs the tablet server leading
//!   the most buckets while writers put into every bucket, three times (starting it again and
//!   waiting until every replica is back in sync before the next kill), then once more a
//!   moment after a rebuild began: see [`chaos::leader_kills`]. After each kill every bucket
//!   acknowledges a put begun after it within [`RESUME_BOUND`]: the writer the kill left
//!   stuck is replaced (`actionstate_fluss`, the `writer` module).
//! - `lost_quorum_fails_puts_retryably_and_loses_nothing_on_fluss3` kills two servers at once:
//!   every put fails with a retryable error and nothing is indexed, until one server is back
//!   and puts resume: see [`chaos::lost_quorum`].
//!
//! They kill servers of the shared cluster, so they are built only with the
//! `cluster-fault-tests` feature, and `cargo xtask ci` runs them on their own after the other
//! tests, one at a time:
//!
//! ```text
//! cargo xtask services up fluss3
//! cargo test -p actionstate-tests --features cluster-fault-tests --test fluss3 -- --nocapture
//! ```
//!
//! `ACTIONSTATE_LEADER_KILLS` sets the number of kills during puts (default 3).
#![allow(clippy::unwrap_used, reason = "tests")]

use actionstate_fluss::FlussLog;
use actionstate_sim::chaos::{self, ChaosReport, LeaderKillPlan};
use actionstate_tests::fluss3::Fluss3;
use std::time::Duration;

/// Longer than Kafka's 5 s: a Fluss leader election waits out the killed server's ZooKeeper
/// session, and the stuck writer is replaced only after its stall timeout.
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(20);
const BUCKETS: u32 = 4;
/// How soon after a kill every bucket must acknowledge a put begun after it. Measured: 10-12 s
/// (`cargo xtask chaos fluss`, ten kills), the killed server's ZooKeeper session timeout of 10 s
/// on `fluss3`, the election, and the writer's stall timeout of 2 s; the rest is headroom for
/// a loaded machine.
const RESUME_BOUND: Duration = Duration::from_secs(30);

/// Held by each test for its whole run: two tests killing servers of one cluster at once would
/// take it below two replicas in sync.
static CLUSTER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn table(name: &str) -> String {
    format!("{name}_{}", uuid::Uuid::new_v4().simple())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_kills_lose_no_acknowledged_state_on_fluss3() {
    let _alone = CLUSTER.lock().await;
    let Some(mut cluster) = Fluss3::require("leader-kill") else { return };
    let kills = std::env::var("ACTIONSTATE_LEADER_KILLS").map_or(3, |v| v.trim().parse().unwrap());
    let config = cluster.config(&table("leader_kill"), BUCKETS, DELIVERY_TIMEOUT);
    let open = move || FlussLog::open(config.clone());
    let mut plan = LeaderKillPlan::new(kills, 1, DELIVERY_TIMEOUT);
    plan.resume_timeout = RESUME_BOUND;
    let report = chaos::leader_kills(&mut cluster, open, &plan).await;
    let line = ChaosReport { backend: "fluss".into(), leader_kill: Some(report.clone()), zombies: None }.json_line();
    println!("leader-kill {line}");
    assert!(report.problems.is_empty(), "{} problems:\n{}", report.problems.len(), report.problems.join("\n"));
    assert_eq!(report.leader_kills, u64::from(kills));
    assert_eq!(report.unavailable_ms.len(), kills as usize, "puts did not resume after every kill");
    assert!(
        u128::from(report.max_unavailable_ms) <= RESUME_BOUND.as_millis(),
        "a bucket took {} ms to acknowledge a put begun after a kill, over the bound of {RESUME_BOUND:?}",
        report.max_unavailable_ms
    );
    assert_eq!(report.rebuild_kills, 1);
    assert!(report.acked > 0, "no put was acknowledged");
    assert_eq!((report.acked_lost, report.failed_indexed, report.rebuild_unexpected), (0, 0, 0));
    assert_eq!((report.failed_late, report.failed_terminal), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_quorum_fails_puts_retryably_and_loses_nothing_on_fluss3() {
    let _alone = CLUSTER.lock().await;
    let Some(mut cluster) = Fluss3::require("lost-quorum") else { return };
    let delivery = Duration::from_secs(5);
    let config = cluster.config(&table("lost_quorum"), BUCKETS, delivery);
    let open = move || FlussLog::open(config.clone());
    // Down long enough that puts begun after the kills fail by their delivery timeout, twice.
    let down_for = 2 * delivery + Duration::from_secs(2);
    let r = chaos::lost_quorum(&mut cluster, open, delivery, down_for).await;
    println!(
        "lost-quorum puts={} acked={} failed={} puts_without_quorum={} acked_without_quorum={} \
         failed_terminal={} failed_indexed={} acked_lost={} landed_although_failed={} resumed_after_ms={} \
         first_error={:?}",
        r.puts,
        r.acked,
        r.failed,
        r.puts_without_quorum,
        r.acked_without_quorum,
        r.failed_terminal,
        r.failed_indexed,
        r.acked_lost,
        r.landed_although_failed,
        r.resumed_after_ms,
        r.first_error
    );
    assert!(r.problems.is_empty(), "{} problems:\n{}", r.problems.len(), r.problems.join("\n"));
    assert!(r.puts_without_quorum > 0 && r.acked_without_quorum == 0);
    assert!(r.acked > 0, "no put was acknowledged");
    assert_eq!((r.acked_lost, r.failed_indexed, r.failed_terminal, r.failed_late), (0, 0, 0, 0));
}
