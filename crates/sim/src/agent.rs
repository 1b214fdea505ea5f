//! The simulated agent: a fixed graph of actions with fan-out, cascades, identical-attribute
//! outputs, a bootstrap event, memory writes and durable calls.
//!
//! ```text
//! input ──▶ plan ──(llm.plan)──▶ task, task   (two outputs with identical attributes)
//!                                 │     │
//!                                 ▼     ▼
//!                               work  work ──(tool.search, tool.fetch)──▶ result
//!                                               │
//!                                               ▼
//!                                           summarize ──▶ memory
//! run_begin (bootstrap, minted every attempt) ──▶ greet ──▶ note ──▶ jot ──▶ memory
//!
//! plan ──▶ approval (some rounds) ──▶ approve ──(durable wait: a person)──▶ memory
//! ```

use actionstate_core::{ActionId, Attributes, Event, EventId, Value};

/// The actions of the agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// Triggered by the input; one LLM call; emits two identical `task` events.
    Plan,
    /// Triggered by each `task`; two tool calls; emits a `result`.
    Work,
    /// Triggered by each `result`; writes memory.
    Summarize,
    /// Triggered by the bootstrap `run_begin` event; emits a `note`.
    Greet,
    /// Triggered by the `note`; writes memory.
    Jot,
    /// Triggered by an `approval` that `plan` emits in some rounds: waits durably for a
    /// person's answer ([`APPROVAL_WAIT`]) and writes it into memory.
    Approve,
}

impl Kind {
    /// The stable action id.
    pub fn action(&self) -> ActionId {
        ActionId::new(self.name())
    }

    /// The action's name.
    pub fn name(&self) -> &'static str {
        match self {
            Kind::Plan => "plan",
            Kind::Work => "work",
            Kind::Summarize => "summarize",
            Kind::Greet => "greet",
            Kind::Jot => "jot",
            Kind::Approve => "approve",
        }
    }

    /// The actions an emitted event of `event_type` triggers.
    pub fn triggered_by(event_type: &str) -> &'static [Kind] {
        match event_type {
            "task" => &[Kind::Work],
            "result" => &[Kind::Summarize],
            "note" => &[Kind::Jot],
            "approval" => &[Kind::Approve],
            _ => &[],
        }
    }
}

/// Label of the bootstrap event source.
pub const BOOTSTRAP: &str = "run_begin";

/// The durable call `plan` makes (the "LLM").
pub const PLAN_CALL: &str = "llm.plan";
/// The first durable call of `work` (a tool).
pub const SEARCH_CALL: &str = "tool.search";
/// The second durable call of `work` (a tool; reconciled when the simulation says so).
pub const FETCH_CALL: &str = "tool.fetch";
/// The model `plan`'s call stands for, as its GenAI span names it (`chat sim-model`).
pub const PLAN_MODEL: &str = "sim-model";
/// The durable wait of `approve`.
pub const APPROVAL_WAIT: &str = "approval";
/// Every durable call the agent makes.
pub const CALLS: [&str; 3] = [PLAN_CALL, SEARCH_CALL, FETCH_CALL];

/// Builds an event.
pub fn event(id: EventId, event_type: &str, attrs: impl IntoIterator<Item = (&'static str, Value)>) -> Event {
    let attributes: Attributes = attrs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
    Event { id, event_type: event_type.to_owned(), attributes }
}

/// The deterministic result of an external call: what the "LLM" or "tool" answers.
pub fn external(function: &str, args: &[u8]) -> Vec<u8> {
    let mut h = blake3::Hasher::new();
    h.update(function.as_bytes());
    h.update(args);
    h.finalize().as_bytes()[..8].to_vec()
}

/// The digest of a call's arguments.
pub fn digest(args: &[u8]) -> [u8; 32] {
    *blake3::hash(args).as_bytes()
}

/// An integer attribute of an event, or 0.
pub fn int(event: &Event, name: &str) -> i64 {
    match event.attributes.get(name) {
        Some(Value::Int(i)) => *i,
        _ => 0,
    }
}

/// A bytes attribute of an event, or empty.
pub fn bytes(event: &Event, name: &str) -> Vec<u8> {
    match event.attributes.get(name) {
        Some(Value::Bytes(b)) => b.clone(),
        _ => Vec::new(),
    }
}
