//! `chaos kafka|fluss [--leader-kills N] [--rebuild-kills N] [--zombie-episodes N]`: the
//! leader-kill scenario of [`actionstate_sim::chaos::leader_kills`] on the three-node cluster
//! that `cargo xtask services up kafka3` (or `fluss3`) started, on a fresh topic (table) of 4
//! partitions (buckets), with 10 kills during puts and 3 during rebuilds by default, then the
//! zombie-writer episodes of [`actionstate_sim::chaos::zombie_episodes`] (10 by default, each
//! on a fresh topic or table). Puts have a delivery timeout of 5 s on Kafka and 20 s on Fluss,
//! whose leader elections wait out the killed server's ZooKeeper session. Prints the report
//! as one JSON line ([`ChaosReport`]) on standard output, its progress and any failed check on
//! standard error, and exits with 1 when a check failed. `cargo xtask chaos kafka` (`fluss`)
//! starts the cluster, runs this and stops the cluster.

use actionstate_fluss::FlussLog;
use actionstate_kafka::KafkaLog;
use actionstate_recovery::LogConfig;
use actionstate_sim::chaos::{self, ChaosReport, LeaderKillPlan};
use actionstate_tests::fluss3::Fluss3;
use actionstate_tests::kafka3::Kafka3;
use std::process::ExitCode;
use std::time::Duration;

const USAGE: &str = "usage: chaos kafka|fluss [--leader-kills N] [--rebuild-kills N] [--zombie-episodes N]";
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(5);
const FLUSS_DELIVERY_TIMEOUT: Duration = Duration::from_secs(20);
const PARTITIONS: u32 = 4;

/// What to run: the backend and the counts.
struct Run {
    backend: String,
    leader_kills: u32,
    rebuild_kills: u32,
    zombie_episodes: u32,
}

fn parse(args: &[String]) -> Result<Run, String> {
    let (mut leader_kills, mut rebuild_kills, mut zombie_episodes) = (10, 3, 10);
    let Some((backend, mut rest)) = args.split_first() else { return Err(USAGE.to_owned()) };
    if backend != "kafka" && backend != "fluss" {
        return Err(format!("unknown backend `{backend}`: kafka and fluss have a chaos scenario\n{USAGE}"));
    }
    while let [flag, value, tail @ ..] = rest {
        let n = value.parse().map_err(|_| format!("{flag} expects a number, got `{value}`"))?;
        match flag.as_str() {
            "--leader-kills" => leader_kills = n,
            "--rebuild-kills" => rebuild_kills = n,
            "--zombie-episodes" => zombie_episodes = n,
            _ => return Err(format!("unknown option `{flag}`\n{USAGE}")),
        }
        rest = tail;
    }
    if !rest.is_empty() {
        return Err(USAGE.to_owned());
    }
    Ok(Run { backend: backend.clone(), leader_kills, rebuild_kills, zombie_episodes })
}

/// The scenario on `kafka3`.
async fn kafka(run: &Run) -> Result<ChaosReport, String> {
    let mut cluster = Kafka3::find()?;
    let topic = format!("chaos-leader-kill-{}", uuid::Uuid::new_v4().simple());
    let config = cluster.config(&topic, PARTITIONS, DELIVERY_TIMEOUT);
    let open = move || KafkaLog::open(config.clone());
    let plan = LeaderKillPlan::new(run.leader_kills, run.rebuild_kills, DELIVERY_TIMEOUT);
    let leader_kill = Some(chaos::leader_kills(&mut cluster, open, &plan).await);
    // Zombie writers: each episode on a fresh topic of the cluster.
    let id = uuid::Uuid::new_v4().simple().to_string();
    let source = |episode: u64| {
        let topic = format!("chaos-zombie-{id}-{episode}");
        LogConfig::Kafka(Box::new(cluster.config(&topic, PARTITIONS, DELIVERY_TIMEOUT)))
    };
    let zombies = Some(chaos::zombie_episodes(source, run.zombie_episodes).await);
    Ok(ChaosReport { backend: "kafka".into(), leader_kill, zombies })
}

/// The scenario on `fluss3`.
async fn fluss(run: &Run) -> Result<ChaosReport, String> {
    let mut cluster = Fluss3::find()?;
    let table = format!("chaos_leader_kill_{}", uuid::Uuid::new_v4().simple());
    let config = cluster.config(&table, PARTITIONS, FLUSS_DELIVERY_TIMEOUT);
    let open = move || FlussLog::open(config.clone());
    let plan = LeaderKillPlan::new(run.leader_kills, run.rebuild_kills, FLUSS_DELIVERY_TIMEOUT);
    let leader_kill = Some(chaos::leader_kills(&mut cluster, open, &plan).await);
    let id = uuid::Uuid::new_v4().simple().to_string();
    let source = |episode: u64| {
        let table = format!("chaos_zombie_{id}_{episode}");
        LogConfig::Fluss(Box::new(cluster.config(&table, PARTITIONS, FLUSS_DELIVERY_TIMEOUT)))
    };
    let zombies = Some(chaos::zombie_episodes(source, run.zombie_episodes).await);
    Ok(ChaosReport { backend: "fluss".into(), leader_kill, zombies })
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let run = match parse(&args) {
        Ok(run) => run,
        Err(e) => {
            eprintln!("chaos: {e}");
            return ExitCode::from(2);
        }
    };
    let report = if run.backend == "fluss" { fluss(&run).await } else { kafka(&run).await };
    let report = match report {
        Ok(report) => report,
        Err(e) => {
            eprintln!("chaos: {e}");
            return ExitCode::from(2);
        }
    };
    println!("{}", report.json_line());
    let problems = report.problems();
    for p in &problems {
        eprintln!("chaos: {p}");
    }
    if problems.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}
