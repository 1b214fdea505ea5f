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
use actionstate_sim::chaos::{self, LeaderKillPlan};
use actionstate_tests::cluster_checks::{check_leader_kills, check_lost_quorum};
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
    check_leader_kills("fluss", &report, kills);
    assert!(
        u128::from(report.max_unavailable_ms) <= RESUME_BOUND.as_millis(),
        "a bucket took {} ms to acknowledge a put begun after a kill, over the bound of {RESUME_BOUND:?}",
        report.max_unavailable_ms
    );
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
    check_lost_quorum(&r);
}
