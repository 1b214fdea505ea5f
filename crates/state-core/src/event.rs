//! Events and triggers: what an action ran on, and how that event came to be.

use crate::canonical;
use crate::id::{EventId, Fingerprint, OccurrenceId, context, truncate16};
use crate::key::StateKey;
use crate::value::Attributes;
use serde::{Deserialize, Serialize};

/// An event flowing through an agent: an id, a routing type and canonical attributes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Occurrence identity. Random for fresh events; kept by replayed outputs.
    pub id: EventId,
    /// Routing type, e.g. `"input"` or `"tool_request"`.
    pub event_type: String,
    /// Payload, in canonical form.
    pub attributes: Attributes,
}

impl Event {
    /// A fresh event with a random id.
    pub fn new(event_type: impl Into<String>, attributes: Attributes) -> Self {
        Event { id: EventId::random(), event_type: event_type.into(), attributes }
    }

    /// The canonical fingerprint of this event's type and attributes (its id is not part of it).
    pub fn fingerprint(&self) -> Fingerprint {
        Fingerprint::of(&self.event_type, &self.attributes)
    }
}

/// How the event that triggers an action came to be.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Trigger {
    /// A root event from outside. Its id is new after every restore, so roots match by
    /// fingerprint.
    Input,
    /// Output number `index` of the state `producer`, in the same round.
    Emitted {
        /// The state that emitted the event.
        producer: StateKey,
        /// Position of the event among the producer's outputs.
        index: u32,
    },
    /// An event the runtime mints on every attempt (e.g. an "agent run begins" event).
    Bootstrap {
        /// Stable label of the bootstrap source.
        label: String,
    },
}

impl Trigger {
    /// Whether this is a root (`Input`) trigger.
    pub fn is_input(&self) -> bool {
        matches!(self, Trigger::Input)
    }

    /// The producer state of an `Emitted` trigger.
    pub fn producer(&self) -> Option<&StateKey> {
        match self {
            Trigger::Emitted { producer, .. } => Some(producer),
            _ => None,
        }
    }

    /// The occurrence digest: the trigger path, so that two identical-attribute outputs of one
    /// producer get different state keys.
    pub fn occurrence(&self) -> OccurrenceId {
        let mut h = context::Context::Occurrence.hasher();
        match self {
            Trigger::Input => {
                h.update(&[0]);
            }
            Trigger::Emitted { producer, index } => {
                h.update(&[1]);
                h.update(&producer.to_bytes());
                h.update(&index.to_le_bytes());
            }
            Trigger::Bootstrap { label } => {
                h.update(&[2]);
                canonical::write_str(&mut h, label);
            }
        }
        OccurrenceId(truncate16(h.finalize().as_bytes()))
    }
}
