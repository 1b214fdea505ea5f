//! Crash-test child: one attempt of a simulated agent run, in a process the parent kills with
//! SIGKILL at a random moment (`tests/tests/all/sigkill.rs`).
//!
//! Usage: `sim-child state=DIR attempt=N log=LOG seed=.. keys=.. inputs=.. checkpoint_every=..
//! abort_every=.. owners=.. reconcile=true|false approval_every=.. [external=http://HOST:PORT]
//! [outside_approver=true]` (see
//! `actionstate_tests::ChildArgs`), where
//! `LOG` is any log URL (`file:DIR?partitions=N`, `kafka://HOST:PORT/TOPIC?...` or
//! `fluss://HOST:PORT/DATABASE/TABLE?...`).
//!
//! The child restores from the newest checkpoint in the state directory (or starts fresh),
//! replays the input source to its end on the log, and records every side effect in the
//! state directory's ledger journal as it happens
//! ([`Sim::run_attempt`](actionstate_sim::Sim::run_attempt)). When it gets to the end it prints
//! one summary line and exits with success. With `outside_approver=true` it hands its approval
//! tokens to the approver in another process (`sim-approver`) through the state directory's
//! inbox; on a data directory, which that approver can only write while no child holds it, a
//! child whose approval is due and not answered stops with exit code 3 (the parent runs the
//! approver, then starts the next child).

use actionstate_recovery::LogConfig;
use actionstate_sim::external::ExternalClient;
use actionstate_sim::{Outcome, OutsideApprover, RunDir, Sim, SimError};
use actionstate_tests::ChildArgs;
use std::process::ExitCode;

async fn attempt(log: LogConfig, args: &ChildArgs, dir: &RunDir) -> Result<Outcome, SimError> {
    let mut sim = Sim::new(log, args.config.clone());
    if let Some(url) = &args.external {
        sim = sim.with_external(ExternalClient::new(url, true)?);
    }
    if args.outside_approver {
        let while_running = !args.log.starts_with("file:");
        sim = sim.with_outside_approver(OutsideApprover { inbox: ChildArgs::inbox(&args.state), while_running });
    }
    sim.run_attempt(dir, args.attempt, &|_| {}).await
}

/// The exit code of a child that stopped for the outside approver.
const AWAITING_APPROVAL: u8 = 3;

async fn run() -> Result<(), Stop> {
    let args = ChildArgs::parse(std::env::args().skip(1)).map_err(Stop::Failed)?;
    let dir = RunDir::new(&args.state).map_err(|e| Stop::Failed(e.to_string()))?;
    let log: LogConfig = args.log.parse().map_err(|e| Stop::Failed(format!("{e}")))?;
    let outcome = match attempt(log, &args, &dir).await {
        Ok(outcome) => outcome,
        Err(SimError::AwaitingApproval) => return Err(Stop::AwaitingApproval),
        Err(e) => return Err(Stop::Failed(e.to_string())),
    };
    println!(
        "attempt={} restored_from={:?} rebuild_records={} reused={} resumed={} executed={} calls_executed={} \
         calls_replayed={} calls_reconciled={}",
        args.attempt,
        outcome.restored_from,
        outcome.rebuild_records,
        outcome.reused,
        outcome.resumed,
        outcome.ledger.executed,
        outcome.ledger.calls_executed,
        outcome.ledger.calls_replayed,
        outcome.ledger.calls_reconciled
    );
    Ok(())
}

/// Why a child ended before the end of the source.
enum Stop {
    AwaitingApproval,
    Failed(String),
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(Stop::AwaitingApproval) => {
            eprintln!("sim-child: an approval is due: stopping for the approver");
            ExitCode::from(AWAITING_APPROVAL)
        }
        Err(Stop::Failed(e)) => {
            eprintln!("sim-child: {e}");
            ExitCode::FAILURE
        }
    }
}
