//! `chaos kafka [--leader-kills N] [--rebuild-kills N] [--zombie-episodes N]`: the leader-kill
//! scenario of [`actionstate_sim::chaos::leader_kills`] on the three-node cluster that `cargo
//! xtask services up kafka3` started (on a fresh topic of 4 partitions, puts with a 5 s
//! delivery timeout), with 10 kills during puts and 3 during rebuilds by default, then the
//! zombie-writer episodes of [`actionstate_sim::chaos::zombie_episodes`] (10 by default, each
//! on a fresh topic). Prints the report as one JSON
//! line ([`ChaosReport`]) on standard output, its progress and any failed check on standard
//! error, and exits with 1 when a check failed. `cargo xtask chaos kafka` starts the cluster,
//! runs this and stops the cluster.

use actionstate_kafka::KafkaLog;
use actionstate_recovery::LogConfig;
use actionstate_sim::chaos::{self, ChaosReport, LeaderKillPlan};
use actionstate_tests::kafka3::Kafka3;
use std::process::ExitCode;
use std::time::Duration;

const USAGE: &str = "usage: chaos kafka [--leader-kills N] [--rebuild-kills N] [--zombie-episodes N]";
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(5);
const PARTITIONS: u32 = 4;

fn parse(args: &[String]) -> Result<(u32, u32, u32), String> {
    let (mut leader_kills, mut rebuild_kills, mut zombie_episodes) = (10, 3, 10);
    let Some((backend, mut rest)) = args.split_first() else { return Err(USAGE.to_owned()) };
    if backend != "kafka" {
        return Err(format!("unknown backend `{backend}`: only kafka has a chaos scenario\n{USAGE}"));
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
    Ok((leader_kills, rebuild_kills, zombie_episodes))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (leader_kills, rebuild_kills, zombie_episodes) = match parse(&args) {
        Ok(counts) => counts,
        Err(e) => {
            eprintln!("chaos: {e}");
            return ExitCode::from(2);
        }
    };
    let mut cluster = match Kafka3::find() {
        Ok(cluster) => cluster,
        Err(e) => {
            eprintln!("chaos: {e}");
            return ExitCode::from(2);
        }
    };
    let topic = format!("chaos-leader-kill-{}", uuid::Uuid::new_v4().simple());
    let config = cluster.config(&topic, PARTITIONS, DELIVERY_TIMEOUT);
    let open = move || KafkaLog::open(config.clone());
    let plan = LeaderKillPlan::new(leader_kills, rebuild_kills, DELIVERY_TIMEOUT);
    let leader_kill = Some(chaos::leader_kills(&mut cluster, open, &plan).await);
    // Zombie writers: each episode on a fresh topic of the cluster.
    let run = uuid::Uuid::new_v4().simple().to_string();
    let source = |episode: u64| {
        let topic = format!("chaos-zombie-{run}-{episode}");
        LogConfig::Kafka(Box::new(cluster.config(&topic, PARTITIONS, DELIVERY_TIMEOUT)))
    };
    let zombies = Some(chaos::zombie_episodes(source, zombie_episodes).await);
    let report = ChaosReport { backend: "kafka".into(), leader_kill, zombies };
    println!("{}", report.json_line());
    let problems = report.problems();
    for p in &problems {
        eprintln!("chaos: {p}");
    }
    if problems.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}
