//! Events: what an action ran on. How an event came to be is its [`Trigger`](crate::Trigger),
//! beside the state key whose occurrence it decides.

use crate::id::{EventId, Fingerprint};
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
