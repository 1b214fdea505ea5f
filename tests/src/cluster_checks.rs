//! The checks the three-node cluster tests (`tests/kafka3.rs`, `tests/fluss3.rs`) make of the
//! scenarios' reports, printed first so that a failed run shows its figures.

use actionstate_sim::chaos::{ChaosReport, LeaderKillReport, LostQuorumReport};

/// Prints `report` as the `chaos` binary's JSON line and checks it: no problem, `kills`
/// kills during puts each followed by puts resuming, one during a rebuild, puts acknowledged,
/// nothing acknowledged lost and no failed put indexed or failing late or terminally.
pub fn check_leader_kills(backend: &str, report: &LeaderKillReport, kills: u32) {
    let line = ChaosReport { backend: backend.into(), leader_kill: Some(report.clone()), zombies: None }.json_line();
    println!("leader-kill {line}");
    assert!(report.problems.is_empty(), "{} problems:\n{}", report.problems.len(), report.problems.join("\n"));
    assert_eq!(report.leader_kills, u64::from(kills));
    assert_eq!(report.unavailable_ms.len(), kills as usize, "puts did not resume after every kill");
    assert_eq!(report.rebuild_kills, 1);
    assert!(report.acked > 0, "no put was acknowledged");
    assert_eq!((report.acked_lost, report.failed_indexed, report.rebuild_unexpected), (0, 0, 0));
    assert_eq!((report.failed_late, report.failed_terminal), (0, 0));
}

/// Prints `r` and checks it: no problem, puts made without a quorum and none of them
/// acknowledged, puts acknowledged before and after, nothing lost, no failed put indexed or
/// failing late or terminally.
pub fn check_lost_quorum(r: &LostQuorumReport) {
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
