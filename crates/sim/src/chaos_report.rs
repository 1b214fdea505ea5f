//! The plans and reports of the chaos scenarios ([`crate::chaos`]): what each counted, and
//! the one JSON line `cargo xtask chaos` prints.

use serde::Serialize;
use std::time::Duration;

/// How [`leader_kills`](crate::chaos::leader_kills) runs.
#[derive(Clone, Debug)]
pub struct LeaderKillPlan {
    /// Leader kills during the stream of puts.
    pub leader_kills: u32,
    /// Leader kills during a rebuild, after the stream.
    pub rebuild_kills: u32,
    /// The log's delivery timeout: a failed put must fail within it and 3 s (encoding, locks
    /// and the scheduling of a loaded machine).
    pub delivery_timeout: Duration,
    /// Keys putting concurrently into each partition.
    pub writers_per_partition: u32,
    /// How long a restarted node may take to be back in sync.
    pub in_sync_timeout: Duration,
    /// How long puts may fail after a kill before the scenario gives up on the cluster.
    pub resume_timeout: Duration,
}

impl LeaderKillPlan {
    /// `leader_kills` kills during puts and `rebuild_kills` during rebuilds, on a log whose
    /// delivery timeout is `delivery_timeout`; two writers per partition, two minutes for a
    /// node to get back in sync and for puts to resume.
    pub fn new(leader_kills: u32, rebuild_kills: u32, delivery_timeout: Duration) -> Self {
        LeaderKillPlan {
            leader_kills,
            rebuild_kills,
            delivery_timeout,
            writers_per_partition: 2,
            in_sync_timeout: Duration::from_secs(120),
            resume_timeout: Duration::from_secs(120),
        }
    }
}

/// What [`leader_kills`](crate::chaos::leader_kills) saw. Passed when
/// [`problems`](Self::problems) is empty; every count of something that must not happen has
/// its lines there.
#[derive(Clone, Debug, Default, Serialize)]
pub struct LeaderKillReport {
    /// Nodes killed while they led partitions being written to.
    pub leader_kills: u64,
    /// Nodes killed while they led partitions a rebuild read.
    pub rebuild_kills: u64,
    /// Puts of the stream (after the marker the rebuilds start from).
    pub puts: u64,
    /// Of them, acknowledged.
    pub acked: u64,
    /// Of them, failed.
    pub failed: u64,
    /// Acknowledged states not in the log where acknowledged, or missing from a rebuild.
    pub acked_lost: u64,
    /// Failed puts the writer's index holds.
    pub failed_indexed: u64,
    /// Failed puts that took longer than the delivery timeout and 3 s.
    pub failed_late: u64,
    /// Failed puts whose error was not retryable.
    pub failed_terminal: u64,
    /// Failed puts whose record reached the log all the same (a lost acknowledgement, which the
    /// put contract allows): the rebuild holds them.
    pub landed_although_failed: u64,
    /// States a rebuild held that nobody put, or that differ from what was put.
    pub rebuild_unexpected: u64,
    /// The longest time, over the kills, from a kill until every partition had acknowledged a
    /// put begun after it.
    pub max_unavailable_ms: u64,
    /// That time for each kill during the stream, in order.
    pub unavailable_ms: Vec<u64>,
    /// The longest time from a restart until every replica was back in sync.
    pub max_rejoin_ms: u64,
    /// Rebuilds still running when their kill struck (the others had finished first).
    pub rebuilds_killed_mid_way: u64,
    /// Rebuilds a kill failed (with a retryable error, then retried until one succeeded).
    pub rebuilds_failed: u64,
    /// Rebuild attempts after a failed one.
    pub rebuild_retries: u64,
    /// How long the scenario took.
    pub seconds: f64,
    /// What went wrong, one line each; empty when the scenario passed.
    #[serde(skip)]
    pub problems: Vec<String>,
}

/// What [`lost_quorum`](crate::chaos::lost_quorum) saw. Passed when
/// [`problems`](Self::problems) is empty.
#[derive(Clone, Debug, Default, Serialize)]
pub struct LostQuorumReport {
    /// Puts begun after two of the three nodes were killed and finished before one was started
    /// again: each must fail.
    pub puts_without_quorum: u64,
    /// Of them, acknowledged (must be none).
    pub acked_without_quorum: u64,
    /// Puts of the stream (after the marker the rebuild starts from).
    pub puts: u64,
    /// Of them, acknowledged.
    pub acked: u64,
    /// Of them, failed.
    pub failed: u64,
    /// Acknowledged states not in the log where acknowledged, or missing from the rebuild.
    pub acked_lost: u64,
    /// Failed puts the writer's index holds.
    pub failed_indexed: u64,
    /// Failed puts that took longer than the delivery timeout and 3 s.
    pub failed_late: u64,
    /// Failed puts whose error was not retryable.
    pub failed_terminal: u64,
    /// Failed puts whose record reached the log all the same (a lost acknowledgement).
    pub landed_although_failed: u64,
    /// States the rebuild held that nobody put, or that differ from what was put.
    pub rebuild_unexpected: u64,
    /// From starting one of the two nodes again until every partition had acknowledged a put
    /// begun after that.
    pub resumed_after_ms: u64,
    /// The error of the first put that failed without a quorum.
    pub first_error: String,
    /// What went wrong, one line each; empty when the scenario passed.
    #[serde(skip)]
    pub problems: Vec<String>,
}

/// The line `cargo xtask chaos` prints: every scenario that ran, its counts side by side in
/// one JSON object.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ChaosReport {
    /// The backend the scenarios ran on.
    pub backend: String,
    /// [`leader_kills`](crate::chaos::leader_kills), if it ran.
    #[serde(flatten)]
    pub leader_kill: Option<LeaderKillReport>,
    /// [`zombie_episodes`](crate::chaos::zombie_episodes), if they ran.
    #[serde(flatten)]
    pub zombies: Option<ZombieReport>,
}

impl ChaosReport {
    /// The report as one line of JSON.
    pub fn json_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// What went wrong in any scenario, each line prefixed with the scenario's name.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(r) = &self.leader_kill {
            out.extend(r.problems.iter().map(|p| format!("leader-kill: {p}")));
        }
        if let Some(r) = &self.zombies {
            out.extend(r.problems.iter().map(|p| format!("zombie: {p}")));
        }
        out
    }
}

/// What [`zombie_episodes`](crate::chaos::zombie_episodes) counted.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ZombieReport {
    /// Episodes: an attempt crashed, the next one restored, and the crashed one ran on.
    pub zombie_episodes: u64,
    /// Records the zombies appended after the fence of the restore that replaced them (the
    /// log holds them, acknowledged to the zombie).
    pub zombie_appends: u64,
    /// Of those, the ones a rebuild of a retained checkpoint indexed: must be 0.
    pub zombie_appends_replayed: u64,
    /// Zombie stores whose next snapshot failed with `Fenced`.
    pub zombies_fenced: u64,
    /// The most puts a zombie had acknowledged before it learned it was fenced (at its next
    /// snapshot: the puts of the rounds it ran on).
    pub zombie_fenced_within_puts: u64,
    /// Side effects (action bodies, durable calls) the zombies ran meanwhile: what fencing
    /// cannot take back.
    pub zombie_effects: u64,
    /// Acknowledged effects of the surviving attempts that ran again: must be 0.
    pub zombie_duplicates: u64,
    /// Acknowledged completions of the surviving attempts missing at the end: must be 0.
    pub zombie_lost: u64,
    /// How long the episodes took.
    pub zombie_seconds: f64,
    /// What went wrong, one line each; empty when every episode passed.
    #[serde(skip)]
    pub problems: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chaos_report_is_one_json_line_with_the_scenario_counts() {
        let report = ChaosReport {
            backend: "kafka".into(),
            leader_kill: Some(LeaderKillReport { leader_kills: 10, acked: 5, ..LeaderKillReport::default() }),
            zombies: Some(ZombieReport { zombie_episodes: 10, zombie_appends: 7, ..ZombieReport::default() }),
        };
        let line = report.json_line();
        assert!(!line.contains('\n'));
        let v: serde_json::Value = serde_json::from_str(&line).expect("the line is JSON");
        assert_eq!(v["backend"], "kafka");
        assert_eq!(v["leader_kills"], 10);
        assert_eq!(v["acked_lost"], 0);
        assert_eq!(v["failed_indexed"], 0);
        assert_eq!(v["zombie_episodes"], 10);
        assert_eq!(v["zombie_appends_replayed"], 0);
        assert!(v.get("problems").is_none());
        assert_eq!(ChaosReport::default().json_line(), r#"{"backend":""}"#);
    }
}
