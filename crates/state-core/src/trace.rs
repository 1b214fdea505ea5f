//! The trace context an attempt of an action ran in, kept with its state (format version 5),
//! so that a later attempt, in another process, can link its trace to the first one's.

use serde::{Deserialize, Serialize};

/// A W3C Trace Context (`traceparent`): the trace and the span an attempt of an action ran
/// in. Fixed at 25 bytes in a record, so that it bounds what a state grows by; it names a
/// span, never the business key or the call's arguments.
///
/// A record holds the context of the attempt that first wrote the state; the store carries it
/// unchanged through every later write of the same state, so that a resumed or re-executed
/// attempt links to where the action began.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TraceContext {
    /// The trace's id: 16 bytes, not all zero.
    pub trace_id: [u8; 16],
    /// The span's id within it: 8 bytes, not all zero.
    pub span_id: [u8; 8],
    /// The trace flags (bit 0: sampled).
    pub flags: u8,
}

impl TraceContext {
    /// The context of `trace_id` and `span_id`, or `None` when either is all zero (an invalid
    /// context in W3C Trace Context, which no tracer hands out).
    pub fn new(trace_id: [u8; 16], span_id: [u8; 8], flags: u8) -> Option<TraceContext> {
        (trace_id != [0; 16] && span_id != [0; 8]).then_some(TraceContext { trace_id, span_id, flags })
    }

    /// Whether the trace was sampled (flag bit 0).
    pub fn sampled(&self) -> bool {
        self.flags & 1 == 1
    }

    /// The `traceparent` header of version `00`: `00-<trace id>-<span id>-<flags>`, in lowercase
    /// hex.
    pub fn traceparent(&self) -> String {
        format!("00-{}-{}-{:02x}", hex::encode(self.trace_id), hex::encode(self.span_id), self.flags)
    }

    /// Parses a `traceparent` header of version `00`; `None` for anything else, or an invalid
    /// context.
    pub fn from_traceparent(text: &str) -> Option<TraceContext> {
        let mut parts = text.trim().split('-');
        let (Some("00"), Some(trace), Some(span), Some(flags), None) =
            (parts.next(), parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return None;
        };
        let lower = |s: &str| s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !(lower(trace) && lower(span) && lower(flags)) {
            return None;
        }
        let trace_id: [u8; 16] = hex::decode(trace).ok()?.try_into().ok()?;
        let span_id: [u8; 8] = hex::decode(span).ok()?.try_into().ok()?;
        let [flags] = <[u8; 1]>::try_from(hex::decode(flags).ok()?).ok()?;
        TraceContext::new(trace_id, span_id, flags)
    }
}

impl std::fmt::Display for TraceContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.traceparent())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_round_trips_and_refuses_invalid_contexts() {
        let text = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let context = TraceContext::from_traceparent(text).expect("a valid traceparent");
        assert_eq!(context.traceparent(), text);
        assert!(context.sampled());
        assert_eq!(context.span_id, [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7]);
        for bad in [
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e47-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-00",
            "",
        ] {
            assert_eq!(TraceContext::from_traceparent(bad), None, "{bad}");
        }
    }
}
