//! Nodes of the three-node Kafka cluster die under a stream of puts, and nothing acknowledged
//! is lost (`cargo xtask services up kafka3`: replication factor 3, `min.insync.replicas=2`, no
//! unclean leader election).
//!
//! - `leader_kills_lose_no_acknowledged_state_on_kafka3` SIGKILLs the node leading the most
//!   partitions while writers put into every partition, three times (starting it again and
//!   waiting until every replica is back in sync before the next kill), then once more a
//!   moment after a rebuild began: see [`chaos::leader_kills`].
//! - `lost_quorum_fails_puts_retryably_and_loses_nothing_on_kafka3` kills two nodes at once:
//!   every put fails with a retryable error and nothing is indexed, until one node is back and
//!   puts resume: see [`chaos::lost_quorum`].
//!
//! - `zombie_writers_are_fenced_out_on_kafka3` runs zombie episodes of the simulator on the
//!   cluster: an attempt crashes, the next restores, the crashed one runs on; none of its
//!   records after the fence is replayed and its next snapshot fails with `Fenced`: see
//!   [`chaos::zombie_episodes`].
//!
//! The first two kill nodes of the shared cluster, so they are built only with the
//! `cluster-fault-tests` feature, and `cargo xtask ci` runs them on their own after the other
//! tests, one at a time:
//!
//! ```text
//! cargo xtask services up kafka3
//! cargo test -p actionstate-tests --features cluster-fault-tests --test kafka3 -- --nocapture
//! ```
//!
//! `ACTIONSTATE_LEADER_KILLS` sets the number of kills during puts (default 3).
#![allow(clippy::unwrap_used, reason = "tests")]

use actionstate_kafka::KafkaLog;
use actionstate_recovery::LogConfig;
use actionstate_sim::chaos::{self, ChaosReport, LeaderKillPlan};
use actionstate_tests::cluster_checks::{check_leader_kills, check_lost_quorum};
use actionstate_tests::kafka3::Kafka3;
use std::time::Duration;

const DELIVERY_TIMEOUT: Duration = Duration::from_secs(5);
const PARTITIONS: u32 = 4;

/// Held by each test for its whole run: two tests killing nodes of one cluster at once would
/// take it below its quorum.
static CLUSTER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn topic(name: &str) -> String {
    format!("{name}-{}", uuid::Uuid::new_v4().simple())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_kills_lose_no_acknowledged_state_on_kafka3() {
    let _alone = CLUSTER.lock().await;
    let Some(mut cluster) = Kafka3::require("leader-kill") else { return };
    let kills = std::env::var("ACTIONSTATE_LEADER_KILLS").map_or(3, |v| v.trim().parse().unwrap());
    let config = cluster.config(&topic("leader-kill"), PARTITIONS, DELIVERY_TIMEOUT);
    let open = move || KafkaLog::open(config.clone());
    let plan = LeaderKillPlan::new(kills, 1, DELIVERY_TIMEOUT);
    let report = chaos::leader_kills(&mut cluster, open, &plan).await;
    check_leader_kills("kafka", &report, kills);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_quorum_fails_puts_retryably_and_loses_nothing_on_kafka3() {
    let _alone = CLUSTER.lock().await;
    let Some(mut cluster) = Kafka3::require("lost-quorum") else { return };
    let config = cluster.config(&topic("lost-quorum"), PARTITIONS, DELIVERY_TIMEOUT);
    let open = move || KafkaLog::open(config.clone());
    // Down long enough that puts begun after the kills fail by their delivery timeout, twice.
    let down_for = 2 * DELIVERY_TIMEOUT + Duration::from_secs(2);
    let r = chaos::lost_quorum(&mut cluster, open, DELIVERY_TIMEOUT, down_for).await;
    check_lost_quorum(&r);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zombie_writers_are_fenced_out_on_kafka3() {
    let _alone = CLUSTER.lock().await;
    let Some(cluster) = Kafka3::require("zombie writers") else { return };
    let run = topic("zombie");
    let source = |episode: u64| {
        LogConfig::Kafka(Box::new(cluster.config(&format!("{run}-{episode}"), PARTITIONS, DELIVERY_TIMEOUT)))
    };
    let r = chaos::zombie_episodes(source, 3).await;
    println!(
        "zombie {}",
        ChaosReport { backend: "kafka".into(), leader_kill: None, zombies: Some(r.clone()) }.json_line()
    );
    assert!(r.problems.is_empty(), "{} problems:\n{}", r.problems.len(), r.problems.join("\n"));
    assert_eq!(r.zombie_episodes, 3);
    assert!(r.zombie_appends > 0, "the zombies appended nothing after their fence");
    assert_eq!((r.zombie_appends_replayed, r.zombie_duplicates, r.zombie_lost), (0, 0, 0));
    assert!(r.zombies_fenced >= r.zombie_episodes, "{} zombies, {} stores fenced", r.zombie_episodes, r.zombies_fenced);
}
