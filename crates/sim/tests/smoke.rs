#![allow(clippy::unwrap_used, reason = "tests")]
use actionstate_memory::MemoryLog;
use actionstate_sim::*;
use std::io::Write;

#[tokio::test]
async fn crash_and_replay_matches_clean_run() {
    let config = SimConfig::default();
    let clean = Sim::new(MemorySource { log: MemoryLog::new(4) }, config.clone());
    let a = clean.run(&RunPlan::clean(), &|_| {}).await.unwrap();
    for point in [CrashPoint::BeforeOperation(150), CrashPoint::BeforeAppend(40), CrashPoint::AfterAppend(77)] {
        let sim = Sim::new(MemorySource { log: MemoryLog::new(4) }, config.clone());
        let b = sim.run(&RunPlan::crashing([point]), &|_| {}).await.unwrap();
        println!(
            "{point:?}: crashes={} restores={} executed={} reused={} resumed={} dup={} lost={}",
            b.crashes,
            b.restores,
            b.ledger.executed,
            b.reused,
            b.resumed,
            b.ledger.duplicates(),
            b.lost_acknowledged
        );
        assert_eq!(b.crashes, 1);
        assert_eq!(b.crash_points, [point], "the crash is reported where it struck");
        assert_eq!(a.results, b.results);
        assert_eq!(a.memory, b.memory);
        assert_eq!(b.ledger.duplicates(), 0);
        assert_eq!(b.lost_acknowledged, 0);
    }
}

/// Several crashes of every kind in one run are each reported at the point that fired, in
/// order: a crash inside a store call (an append) is not mistaken for another.
#[tokio::test]
async fn every_crash_is_reported_at_the_point_it_struck() {
    let config = SimConfig::default();
    let points = [CrashPoint::BeforeAppend(30), CrashPoint::AfterAppend(90), CrashPoint::BeforeOperation(400)];
    let sim = Sim::new(MemorySource { log: MemoryLog::new(4) }, config);
    let o = sim.run(&RunPlan::crashing(points), &|_| {}).await.unwrap();
    assert_eq!(o.crashes, 3);
    let mut fired = o.crash_points.clone();
    fired.sort();
    let mut armed = points.to_vec();
    armed.sort();
    assert_eq!(fired, armed, "fired at {:?}", o.crash_points);
    assert_eq!(o.crash_points.len(), o.crashed_at.len());
}

#[tokio::test]
async fn attempts_over_a_run_dir_match_a_clean_run_and_read_back() {
    let config = SimConfig::default();
    let clean = Sim::new(MemorySource { log: MemoryLog::new(4) }, config.clone())
        .run(&RunPlan::clean(), &|_| {})
        .await
        .unwrap();
    let state = tempfile::tempdir().unwrap();
    let dir = RunDir::new(state.path()).unwrap();
    let sim = Sim::new(MemorySource { log: MemoryLog::new(4) }, config.clone());
    let first = sim.run_attempt(&dir, 0, &|_| {}).await.unwrap();
    assert_eq!(first.results, clean.results);
    assert!(!dir.checkpoints().unwrap().is_empty());
    // A write cut by a kill: ignored when read back, dropped by the next attempt.
    std::fs::OpenOptions::new().append(true).open(dir.journal_path()).unwrap().write_all(b"1 exec 00").unwrap();
    assert!(dir.journal().unwrap().cut);
    let second = sim.run_attempt(&dir, 1, &|_| {}).await.unwrap();
    assert_eq!(second.restores, 1);
    assert!(second.reused > 0);
    assert_eq!(second.ledger.executed, 0);
    let journal = dir.journal().unwrap();
    assert!(!journal.cut);
    assert_eq!(journal.ledger.executed, clean.ledger.executed);
    assert_eq!(journal.ledger.calls_executed, clean.ledger.calls_executed);
    assert_eq!(journal.ledger.acked().len(), clean.ledger.acked().len());
    assert_eq!(journal.ledger.duplicates(), 0);
    assert_eq!(journal.results, clean.results);
    assert_eq!(dir.final_memory().unwrap(), Some(clean.memory.clone()));
    assert_eq!(sim.acknowledged_missing(&journal.ledger, &dir).await.unwrap(), 0);
}

/// The approval step: every round asks for approval; each wait ends once (approved, rejected or
/// timed out) and its action resumes with it; later inputs of a key queue behind its waiting
/// round; crashes anywhere, with restores from older checkpoints, end as the crash-free run.
#[tokio::test]
async fn approvals_end_once_and_crashed_runs_end_as_the_clean_one() {
    let config = SimConfig { approval_every: 1, inputs: 30, ..SimConfig::default() };
    let clean = Sim::new(MemorySource { log: MemoryLog::new(4) }, config.clone());
    let a = clean.run(&RunPlan::clean(), &|_| {}).await.unwrap();
    let w = &a.waits;
    assert_eq!(w.made, 30, "one wait per round: {w:?}");
    assert_eq!(w.resolved + w.rejected + w.timed_out, w.made, "{w:?}");
    assert!(w.resolved > 0 && w.rejected > 0 && w.timed_out > 0, "{w:?}");
    assert_eq!((w.resumed, w.delivered_twice, w.lost), (30, 0, 0), "{w:?}");
    assert!(a.queued > 0, "no input queued behind a waiting round");
    let approvals = a.memory.values().flat_map(|m| m.keys()).filter(|p| p.starts_with("approval/")).count();
    assert_eq!(approvals, 30, "every round remembers its approval");
    for points in [
        vec![CrashPoint::BeforeOperation(120)],
        vec![CrashPoint::AfterAppend(60), CrashPoint::BeforeAppend(140)],
        vec![CrashPoint::BeforeOperation(40), CrashPoint::AfterAppend(200), CrashPoint::BeforeOperation(500)],
    ] {
        let plan = RunPlan { restore_from: vec![RestoreFrom::Back(1)], ..RunPlan::crashing(points.clone()) };
        let sim = Sim::new(MemorySource { log: MemoryLog::new(4) }, config.clone());
        let b = sim.run(&plan, &|_| {}).await.unwrap();
        assert_eq!(b.crashes, points.len() as u64, "{points:?}");
        assert_eq!(a.results, b.results, "{points:?}");
        assert_eq!(a.memory, b.memory, "{points:?}");
        assert_eq!((b.waits.delivered_twice, b.waits.lost), (0, 0), "{points:?}: {:?}", b.waits);
        assert_eq!(b.ledger.duplicates(), 0, "{points:?}");
    }
}
