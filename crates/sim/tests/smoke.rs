#![allow(clippy::unwrap_used, reason = "tests")]
use actionstate_recovery::testkit::MemoryLog;
use actionstate_sim::*;

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
        assert_eq!(a.results, b.results);
        assert_eq!(a.memory, b.memory);
        assert_eq!(b.ledger.duplicates(), 0);
        assert_eq!(b.lost_acknowledged, 0);
    }
}
