//! The approval step ([`SimConfig::approval_every`]): some rounds' `plan` asks for a person's
//! approval, and the `approve` action waits durably for it (docs/design.md, section 5.7).
//!
//! The person is the [`Approver`], outside the runtime like the ledger: it survives the
//! runtime's crashes, receives every token a suspended action hands out, and answers each a
//! few seconds later, through the store that owns the key, or never (the wait then times out).
//! What it answers for a round is fixed by the seed and the round ([`decision`]), so a
//! crashing run ends with the same approvals as a crash-free one; when it answers is not.
//!
//! The runtime ([`crate::runtime`]) parks a round whose action suspended: the round stays
//! live, later inputs of the same key queue behind it (as the reference runtime queues a key's
//! inputs behind its unfinished round), and other keys go on. Each step the clock moves one
//! second, the approver answers what is due, deadlines are enforced, and the rounds whose
//! waits ended are run again: their completed actions are reused, the waiting action resumes
//! and receives the outcome from its journal. A checkpoint keeps the parked rounds and the
//! inputs queued behind them, as a runtime's own checkpoint does.

use crate::plan::{SimConfig, mix};
use crate::results::Memory;
use actionstate_core::{KeyId, WaitOutcome, WaitSecret, WaitToken};
use actionstate_recovery::Resolution;
use std::collections::{BTreeMap, HashSet};

/// Where a manual clock of a run starts (milliseconds since the Unix epoch).
pub(crate) const CLOCK_START_MS: u64 = 1_800_000_000_000;
/// How far the clock moves per step of the runtime.
pub(crate) const STEP_MS: u64 = 1_000;
/// How long an approval may take before it times out.
pub(crate) const APPROVAL_TIMEOUT_MS: u64 = 120_000;
/// The longest the approver takes to answer (well within the timeout, so that only the waits
/// it never answers time out, in a crashing run as in a crash-free one).
const MOST_DELAY_MS: u64 = 8_000;

/// Whether round `seq` of `key` asks for approval.
pub(crate) fn needs_approval(config: &SimConfig, key: &KeyId, seq: u64) -> bool {
    config.approval_every > 0
        && round_hash(config.seed, 0x30, key, seq).is_multiple_of(u64::from(config.approval_every))
}

fn round_hash(seed: u64, what: u64, key: &KeyId, seq: u64) -> u64 {
    let mut k = [0u8; 8];
    k.copy_from_slice(&key.as_bytes()[..8]);
    mix(seed, what, u64::from_le_bytes(k) ^ seq.rotate_left(32))
}

/// What the approver does about the wait of round `seq` of `key`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Approves, with this reply.
    Approve(Vec<u8>),
    /// Rejects, with this reason.
    Reject(Vec<u8>),
    /// Never answers: the wait times out.
    Ignore,
}

/// The approver's answer for round `seq` of `key` in the run of `seed`: six in ten approved,
/// two rejected, two left to time out. An approver in another process
/// ([`OutsideApprover`]) answers the same.
pub fn decision(seed: u64, key: &KeyId, seq: u64) -> Decision {
    match round_hash(seed, 0x31, key, seq) % 10 {
        0..6 => Decision::Approve(format!("approved {seq}").into_bytes()),
        6..8 => Decision::Reject(format!("over budget {seq}").into_bytes()),
        _ => Decision::Ignore,
    }
}

/// What the `approve` action writes into memory for an outcome (`approval/SEQ`).
pub(crate) fn remembered(outcome: &WaitOutcome) -> Vec<u8> {
    match outcome {
        WaitOutcome::Reply(r) => [b"approved:".as_slice(), r].concat(),
        WaitOutcome::Rejected(r) => [b"rejected:".as_slice(), r].concat(),
        WaitOutcome::TimedOut => b"timed_out".to_vec(),
    }
}

/// The memory path of round `seq`'s approval.
pub(crate) fn memory_path(seq: u64) -> String {
    format!("approval/{seq}")
}

/// The durable waits of a run, as counted outside the runtime.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WaitFigures {
    /// Waits made: distinct tokens the suspended actions handed out.
    pub made: u64,
    /// Approvals the store recorded (a reply).
    pub resolved: u64,
    /// Rejections the store recorded.
    pub rejected: u64,
    /// Waits that ended timed out (the deadline passed before any answer).
    pub timed_out: u64,
    /// Waiting actions that resumed and completed with their wait's outcome, acknowledged (a
    /// crash that loses the acknowledgement of a completion leaves it uncounted here, and the
    /// replay reuses the completion).
    pub resumed: u64,
    /// Outcomes delivered twice: a waiting action that completed twice in one incarnation.
    pub delivered_twice: u64,
    /// Outcomes lost: a round whose recorded outcome is not the one its action completed with
    /// (or that never completed).
    pub lost: u64,
    /// Answers the store refused because an earlier outcome stood (nothing written).
    pub refused: u64,
}

/// An approver in another process: the runtime hands each token to it by appending a line
/// (`TOKEN SEQ`) to the `inbox` file, and it answers ([`decision`]) through the log, while
/// the runtime runs (Kafka, Fluss: a resolve request the runtime's stores poll for) or while
/// it is stopped (a data directory, which one process holds: the runtime stops when an answer
/// is due and has not come, [`SimError::AwaitingApproval`](crate::SimError::AwaitingApproval),
/// and is started again once the approver has answered). When an answer is due, the runtime
/// waits for it instead of resolving itself, and its clock does not move meanwhile: the waits
/// end as in a run whose approver lives in the runtime.
#[derive(Clone, Debug)]
pub struct OutsideApprover {
    /// Where the runtime appends the tokens it hands out.
    pub inbox: std::path::PathBuf,
    /// Whether the approver answers while the runtime runs (else: only while it is stopped).
    pub while_running: bool,
}

impl OutsideApprover {
    /// Hands `token` of round `seq` to the approver: one line appended to the inbox.
    fn hand(&self, token: &WaitToken, seq: u64) -> std::io::Result<()> {
        use std::io::Write;
        let mut inbox = std::fs::OpenOptions::new().create(true).append(true).open(&self.inbox)?;
        inbox.write_all(format!("{} {seq}\n", token.to_text()).as_bytes())
    }

    /// The tokens in `inbox` with their rounds, in the order they were handed out, each once.
    /// A last line a kill cut short is left out.
    pub fn read(inbox: &std::path::Path) -> std::io::Result<Vec<(WaitToken, u64)>> {
        let text = match std::fs::read_to_string(inbox) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for line in text.split_inclusive('\n').filter(|l| l.ends_with('\n')) {
            let mut parts = line.split_whitespace();
            let (Some(token), Some(seq)) = (parts.next(), parts.next()) else { continue };
            let (Ok(token), Ok(seq)) = (WaitToken::parse(token), seq.parse()) else { continue };
            if seen.insert(token.secret) {
                out.push((token, seq));
            }
        }
        Ok(out)
    }
}

/// A token the approver holds and has not answered.
#[derive(Clone, Debug)]
struct Held {
    token: WaitToken,
    seq: u64,
    due_ms: u64,
}

/// The person who approves: outside the runtime, so it outlives crashes. The runtime's side
/// (`waiting.rs`) passes its answers to the store that owns the key.
#[derive(Debug, Default)]
pub(crate) struct Approver {
    /// The approver in another process, if it is there rather than here.
    pub(crate) outside: Option<OutsideApprover>,
    held: Vec<Held>,
    seen: HashSet<WaitSecret>,
    /// Per round, the outcome the store recorded for its wait (the first, which stands).
    recorded: BTreeMap<(KeyId, u64), WaitOutcome>,
    figures: WaitFigures,
}

impl Approver {
    /// An approver here, or (`outside`) the hand-over to one in another process.
    pub(crate) fn new(outside: Option<OutsideApprover>) -> Self {
        Approver { outside, ..Approver::default() }
    }

    /// A suspended action of round `seq` handed out `token` at `now_ms`: answered a few seconds
    /// later, unless the decision is to ignore it. A token already held is not taken twice.
    pub(crate) fn hand(&mut self, seed: u64, token: WaitToken, seq: u64, now_ms: u64) -> std::io::Result<()> {
        if !self.seen.insert(token.secret) {
            return Ok(());
        }
        if let Some(outside) = &self.outside
            && let Err(e) = outside.hand(&token, seq)
        {
            // Not handed: the round is handed again when it is re-entered.
            self.seen.remove(&token.secret);
            return Err(e);
        }
        self.figures.made += 1;
        if decision(seed, &token.key, seq) == Decision::Ignore {
            return Ok(());
        }
        let due_ms = now_ms + round_hash(seed, 0x32, &token.key, seq) % MOST_DELAY_MS;
        self.held.push(Held { token, seq, due_ms });
        Ok(())
    }

    /// The tokens due at `now_ms`, with the round each names and what to answer.
    pub(crate) fn due(&self, seed: u64, now_ms: u64) -> Vec<(WaitToken, u64, Decision)> {
        self.held
            .iter()
            .filter(|h| h.due_ms <= now_ms)
            .map(|h| (h.token, h.seq, decision(seed, &h.token.key, h.seq)))
            .collect()
    }

    /// The store answered the resolve of `token` (round `seq`) with `done`: the outcome that
    /// stands, recorded by this resolve or earlier; `None` if it no longer has the wait
    /// (voided, or its action completed). Either way the token is answered.
    pub(crate) fn answered(&mut self, token: &WaitToken, seq: u64, done: Option<Resolution>) {
        self.held.retain(|h| h.token.secret != token.secret);
        let Some(r) = done else { return };
        if r.recorded {
            match r.outcome {
                WaitOutcome::Reply(_) => self.figures.resolved += 1,
                WaitOutcome::Rejected(_) => self.figures.rejected += 1,
                WaitOutcome::TimedOut => {}
            }
        } else {
            self.figures.refused += 1;
        }
        self.recorded.insert((token.key, seq), r.outcome);
    }

    /// Round `seq` of `key`'s wait timed out (the store recorded it).
    pub(crate) fn timed_out(&mut self, key: KeyId, seq: u64) {
        self.recorded.entry((key, seq)).or_insert(WaitOutcome::TimedOut);
    }

    /// The figures, with the rounds whose recorded outcome the final `memory` does not hold
    /// counted as lost, and `delivered` and `twice` from the ledger.
    pub(crate) fn figures(&self, memory: &Memory, delivered: &BTreeMap<&'static str, u64>, twice: u64) -> WaitFigures {
        let lost = self
            .recorded
            .iter()
            .filter(|((key, seq), outcome)| {
                memory.get(key).and_then(|m| m.get(&memory_path(*seq))) != Some(&remembered(outcome))
            })
            .count() as u64;
        WaitFigures {
            timed_out: delivered.get("timed_out").copied().unwrap_or(0),
            resumed: delivered.values().sum(),
            delivered_twice: twice,
            lost,
            ..self.figures.clone()
        }
    }
}
