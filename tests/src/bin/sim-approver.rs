//! The approver in another process of the SIGKILL campaign (`tests/tests/all/sigkill.rs`): the
//! person who answers the approvals the simulated agent's children hand out, outside them.
//!
//! Usage: `sim-approver inbox=FILE log=LOG seed=N mode=follow|once`. It reads the tokens the
//! children appended to `inbox` (`TOKEN SEQ` lines, see `actionstate_sim::OutsideApprover`)
//! and answers each as `actionstate_sim::decision` says for the run's seed (approve, reject,
//! or never: the wait times out), through the log:
//!
//! - `mode=follow` (Kafka, Fluss: the children run meanwhile): a resolve request for each new
//!   token (`ActionStateStore::request_resolve`), which the child that owns the key records at
//!   its next poll; it follows the inbox until it is killed.
//! - `mode=once` (a data directory, which no child holds while this runs): a resolve request
//!   for every token in the inbox, which the next child's restore reads and records (a
//!   request for a wait that already ended changes nothing); it prints how many it appended
//!   and exits.

use actionstate_core::{WaitOutcome, WaitSecret};
use actionstate_recovery::{ActionStateStore, LogConfig, StoreConfig};
use actionstate_sim::{Decision, OutsideApprover, decision};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

struct Args {
    inbox: PathBuf,
    log: LogConfig,
    seed: u64,
    follow: bool,
}

fn parse() -> Result<Args, String> {
    let mut values: HashMap<String, String> = HashMap::new();
    for arg in std::env::args().skip(1) {
        let (name, value) = arg.split_once('=').ok_or_else(|| format!("expected name=value, got {arg:?}"))?;
        values.insert(name.to_owned(), value.to_owned());
    }
    let mut take = |name: &str| values.remove(name).ok_or_else(|| format!("missing argument {name}=..."));
    Ok(Args {
        inbox: PathBuf::from(take("inbox")?),
        log: take("log")?.parse().map_err(|e| format!("log: {e}"))?,
        seed: take("seed")?.parse().map_err(|e| format!("seed: {e}"))?,
        follow: match take("mode")?.as_str() {
            "follow" => true,
            "once" => false,
            other => return Err(format!("mode={other:?}: expected follow or once")),
        },
    })
}

/// What the approver answers for a token of round `seq`, if it answers.
fn answer(seed: u64, token: &actionstate_core::WaitToken, seq: u64) -> Option<WaitOutcome> {
    match decision(seed, &token.key, seq) {
        Decision::Approve(reply) => Some(WaitOutcome::Reply(reply)),
        Decision::Reject(reason) => Some(WaitOutcome::Rejected(reason)),
        Decision::Ignore => None,
    }
}

/// Requests a resolve of every new token of the inbox, until killed. A request that fails
/// (a server being killed by the campaign) is tried again, as a person clicks again.
async fn follow(args: &Args) -> Result<(), String> {
    // The log exists once a child handed a token out: the first child creates it.
    while OutsideApprover::read(&args.inbox).map_err(|e| e.to_string())?.is_empty() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let outsider = loop {
        match actionstate_recovery::open(&args.log).await {
            Ok(log) => break ActionStateStore::new(log, StoreConfig::default()),
            Err(e) if e.is_retryable() => eprintln!("sim-approver: opening the log: {e}; again"),
            Err(e) => return Err(e.to_string()),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let mut answered: HashSet<WaitSecret> = HashSet::new();
    loop {
        for (token, seq) in OutsideApprover::read(&args.inbox).map_err(|e| e.to_string())? {
            if answered.contains(&token.secret) {
                continue;
            }
            if let Some(outcome) = answer(args.seed, &token, seq) {
                match outsider.request_resolve(&token, outcome).await {
                    Ok(_) => {}
                    Err(e) if e.is_retryable() => {
                        eprintln!("sim-approver: a resolve request failed: {e}; again");
                        continue;
                    }
                    Err(e) => return Err(e.to_string()),
                }
            }
            answered.insert(token.secret);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Requests a resolve of every token of the inbox, on a log no child holds: the next child's
/// restore reads the requests and records them.
async fn once(args: &Args) -> Result<(), String> {
    let log = actionstate_recovery::open(&args.log).await.map_err(|e| e.to_string())?;
    let outsider = ActionStateStore::new(log, StoreConfig::default());
    let mut requested = 0;
    for (token, seq) in OutsideApprover::read(&args.inbox).map_err(|e| e.to_string())? {
        if let Some(outcome) = answer(args.seed, &token, seq) {
            outsider.request_resolve(&token, outcome).await.map_err(|e| e.to_string())?;
            requested += 1;
        }
    }
    println!("requested={requested}");
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let done = match parse() {
        Ok(args) if args.follow => follow(&args).await,
        Ok(args) => once(&args).await,
        Err(e) => Err(e),
    };
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sim-approver: {e}");
            ExitCode::FAILURE
        }
    }
}
