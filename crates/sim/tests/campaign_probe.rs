#![allow(clippy::unwrap_used, reason = "tests")]
use actionstate_recovery::testkit::MemoryLog;
use actionstate_sim::*;

#[tokio::test]
async fn probe_many() {
    let mut failures = 0;
    for seed in 0..300u64 {
        let config =
            SimConfig { seed, owners: 1 + (seed % 2) as u32, reconcile: seed % 3 == 0, ..SimConfig::default() };
        let clean = Sim::new(MemorySource { log: MemoryLog::new(4) }, config.clone());
        let a = clean.run(&RunPlan::clean(), &|_| {}).await.unwrap();
        let r = seed.wrapping_mul(0x9e3779b97f4a7c15);
        let points = vec![
            CrashPoint::BeforeOperation(1 + r % 200),
            CrashPoint::BeforeAppend(1 + (r >> 8) % 150),
            CrashPoint::AfterAppend(1 + (r >> 16) % 150),
        ];
        let mut plan = RunPlan::crashing(points.clone());
        if seed % 4 == 1 {
            plan.owners_after_restore = vec![2, 1];
        }
        if seed % 5 == 2 {
            plan.restore_from = vec![RestoreFrom::Back(1), RestoreFrom::Latest];
        }
        let sim = Sim::new(MemorySource { log: MemoryLog::new(4) }, config.clone());
        let b = match sim.run(&plan, &|_| {}).await {
            Ok(b) => b,
            Err(e) => {
                println!("seed {seed}: error {e}");
                failures += 1;
                continue;
            }
        };
        let ok =
            a.results == b.results && a.memory == b.memory && b.ledger.duplicates() == 0 && b.lost_acknowledged == 0;
        if !ok {
            failures += 1;
            println!(
                "seed {seed} {points:?}: results_eq={} memory_eq={} dup={} (actions {} calls {}) lost={} crashes={}",
                a.results == b.results,
                a.memory == b.memory,
                b.ledger.duplicates(),
                b.ledger.duplicate_actions,
                b.ledger.duplicate_calls,
                b.lost_acknowledged,
                b.crashes
            );
        }
    }
    assert_eq!(failures, 0);
}
