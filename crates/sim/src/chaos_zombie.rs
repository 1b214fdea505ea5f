//! Zombie-writer episodes: simulator runs in which a crashed attempt runs on after the next
//! restore, counted into a [`ZombieReport`].

use crate::chaos_report::ZombieReport;
use crate::crash::CrashPoint;
use crate::plan::{RunPlan, SimConfig};
use crate::runtime::Sim;
use crate::source::LogSource;
use std::time::Instant;

/// Runs `episodes` simulator runs over the logs `source` gives (one fresh log per episode
/// number), each crashing once part way and letting the crashed attempt run on for two to four
/// rounds after the next one restored — a zombie — as [`RunPlan::zombie_rounds`] describes;
/// counts what the zombies did and what the surviving attempts saw.
pub async fn zombie_episodes<S: LogSource>(mut source: impl FnMut(u64) -> S, episodes: u32) -> ZombieReport {
    let started = Instant::now();
    let mut report = ZombieReport::default();
    for episode in 0..u64::from(episodes) {
        let config = SimConfig {
            seed: 7_000_000 + episode,
            keys: 4,
            inputs: 12,
            checkpoint_every: 3,
            abort_every: 0,
            owners: 1 + u32::try_from(episode % 2).unwrap_or(0),
            reconcile: episode % 3 == 0,
            approval_every: 0,
        };
        let plan = RunPlan {
            crashes: vec![CrashPoint::BeforeOperation(30 + (episode * 17) % 40)],
            zombie_rounds: vec![2 + episode % 3],
            ..RunPlan::clean()
        };
        let sim = Sim::new(source(episode), config);
        let outcome = match sim.run(&plan, &|_| {}).await {
            Ok(o) => o,
            Err(e) => {
                report.problems.push(format!("episode {episode}: the run failed: {e}"));
                continue;
            }
        };
        if outcome.zombies == 0 {
            report.problems.push(format!("episode {episode}: no zombie ran (the crash did not fire)"));
        }
        report.zombie_episodes += outcome.zombies;
        report.zombie_appends += outcome.zombie_appends;
        report.zombie_appends_replayed += outcome.zombie_appends_replayed;
        report.zombies_fenced += outcome.zombies_fenced;
        report.zombie_fenced_within_puts = report.zombie_fenced_within_puts.max(outcome.ledger.zombie_acks);
        report.zombie_effects += outcome.ledger.zombie_effects;
        report.zombie_duplicates += outcome.ledger.duplicates();
        report.zombie_lost += outcome.lost_acknowledged;
        if outcome.zombie_appends_replayed > 0 {
            report
                .problems
                .push(format!("episode {episode}: {} zombie records replayed", outcome.zombie_appends_replayed));
        }
        if outcome.zombies_fenced < outcome.zombies {
            report.problems.push(format!("episode {episode}: a zombie store was not fenced at its snapshot"));
        }
        if outcome.ledger.duplicates() > 0 || outcome.lost_acknowledged > 0 {
            report.problems.push(format!(
                "episode {episode}: {} duplicates, {} lost",
                outcome.ledger.duplicates(),
                outcome.lost_acknowledged
            ));
        }
    }
    if report.zombie_appends == 0 {
        report.problems.push("the zombies appended nothing after their fence: the episodes prove nothing".into());
    }
    report.zombie_seconds = (started.elapsed().as_secs_f64() * 10.0).round() / 10.0;
    report
}
