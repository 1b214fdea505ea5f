//! A recorded state as the index holds it: decoded, or encoded with its evidence.

use actionstate_core::{
    ActionState, Error, EventId, Evidence, Fingerprint, LogRecord, Position, StateKey, Trigger, codec,
};
use std::sync::Arc;

/// A recorded state, shared immutably.
///
/// The store keeps the states it writes and the states a rebuild replays **encoded** — the
/// record's value bytes plus the [`Evidence`] the index decides with — and decodes one only
/// when a lookup hands it out: materializing every replayed state cost most of a rebuild
/// (docs/benchmarks-history.md), a replay typically uses each state once, and a state a process wrote is
/// rarely looked up before it restarts. [`Index::apply`](crate::Index::apply) of a decoded
/// record keeps it **decoded**.
#[derive(Clone, Debug)]
pub enum Recorded {
    /// Applied as a decoded record.
    Decoded(Arc<ActionState>),
    /// Written or replayed as log bytes, decoded on demand.
    Encoded(Arc<Encoded>),
}

/// A replayed record kept encoded.
#[derive(Debug)]
pub struct Encoded {
    evidence: Evidence,
    value: Box<[u8]>,
    position: Position,
}

impl Recorded {
    /// A state kept encoded: `value` is the enveloped record at `position` whose
    /// [`codec::peek`] gave `evidence`.
    pub fn encoded(evidence: Evidence, value: Box<[u8]>, position: Position) -> Self {
        Recorded::Encoded(Arc::new(Encoded { evidence, value, position }))
    }

    /// The state, decoding it if it is kept encoded. A record that passed [`codec::peek`]
    /// decodes; should it not, the error names the record's partition and offset.
    pub fn state(&self) -> Result<Arc<ActionState>, Error> {
        match self {
            Recorded::Decoded(s) => Ok(Arc::clone(s)),
            Recorded::Encoded(e) => {
                let at = |err: Error| err.at(e.position.partition, e.position.offset);
                match codec::decode_value(&e.value).map_err(at)? {
                    LogRecord::Upsert(s) if s.key == e.evidence.key => Ok(Arc::new(s)),
                    other => Err(at(Error::KeyMismatch { kind: other.kind() })),
                }
            }
        }
    }

    /// Identity of the state.
    pub fn key(&self) -> &StateKey {
        match self {
            Recorded::Decoded(s) => &s.key,
            Recorded::Encoded(e) => &e.evidence.key,
        }
    }

    /// How the trigger event came to be.
    pub fn trigger(&self) -> &Trigger {
        match self {
            Recorded::Decoded(s) => &s.trigger,
            Recorded::Encoded(e) => e.evidence.trigger(),
        }
    }

    /// Id of the trigger event when the state was written.
    pub fn trigger_event(&self) -> EventId {
        match self {
            Recorded::Decoded(s) => s.trigger_event,
            Recorded::Encoded(e) => e.evidence.trigger_event,
        }
    }

    /// Fingerprint of the round's input event.
    pub fn input(&self) -> Fingerprint {
        match self {
            Recorded::Decoded(s) => s.input,
            Recorded::Encoded(e) => e.evidence.input(),
        }
    }

    /// Whether the action completed.
    pub fn is_completed(&self) -> bool {
        match self {
            Recorded::Decoded(s) => s.is_completed(),
            Recorded::Encoded(e) => e.evidence.outputs.is_some(),
        }
    }

    /// Number of output events (0 while pending).
    pub fn output_count(&self) -> usize {
        match self {
            Recorded::Decoded(s) => s.outputs().len(),
            Recorded::Encoded(e) => e.evidence.outputs.as_deref().map_or(0, <[EventId]>::len),
        }
    }

    /// Ids of the output events in emission order (none while pending).
    pub fn output_ids(&self) -> impl Iterator<Item = EventId> + '_ {
        let (events, ids) = match self {
            Recorded::Decoded(s) => (s.outputs(), &[][..]),
            Recorded::Encoded(e) => (&[][..], e.evidence.outputs.as_deref().unwrap_or_default()),
        };
        events.iter().map(|e| e.id).chain(ids.iter().copied())
    }
}

/// Two records are equal when they hold the same state (a record that does not decode equals
/// nothing).
impl PartialEq for Recorded {
    fn eq(&self, other: &Self) -> bool {
        match (self.state(), other.state()) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        }
    }
}
