//! A borrowed walk over an upserted state's postcard payload: checks every field the full
//! decoder checks (structure, UTF-8, value nesting, no trailing bytes) and keeps only the
//! replay evidence, without allocating the state.
//!
//! The walk reads postcard's wire format directly, field by field in the declaration order of
//! [`ActionState`](crate::ActionState): varints (LEB128, with postcard's length limits),
//! length-prefixed strings and byte strings, variant indices as varints, digests as raw
//! bytes. Through serde the same walk cost about three times as much, most of it visiting the
//! 32-byte digests one byte at a time, and a rebuild runs it once per record.
//!
//! postcard is not self-describing, so the walk mirrors the model. Two things keep it honest:
//! `codec::peek` falls back to the full decoder whenever the walk fails, and the tests
//! `peek_agrees_with_decode` (random, mutated and truncated payloads) and
//! `the_walk_reads_every_shape_without_falling_back` hold it to the decoder's answers.

use crate::id::{ActionDigest, EventId, Fingerprint, KeyId, OccurrenceId};
use crate::key::{StateKey, Trigger};
use crate::record::Evidence;

/// The evidence of an `Upsert` payload (the postcard encoding of `LogRecord::Upsert`), or
/// `None` when the walk fails anywhere: the caller then asks the full decoder for the error.
/// `labeled`, `traced`: the payload's state ends with an optional key label (format 4 on), and
/// then with an optional trace context (format 5 on).
pub(crate) fn evidence(payload: &[u8], labeled: bool, traced: bool) -> Option<Evidence> {
    let mut r = Reader(payload);
    // `LogRecord::Upsert` is variant 0.
    if r.variant()? != 0 {
        return None;
    }
    // `ActionState`, field by field.
    let key = r.state_key()?;
    r.skip_str()?; // action name
    if r.option()? {
        r.skip_str()?; // action version
    }
    let trigger = match r.variant()? {
        0 => Trigger::Input,
        1 => Trigger::Emitted { producer: r.state_key()?, index: r.varint_u32()? },
        2 => Trigger::Bootstrap { label: r.str()?.to_owned() },
        _ => return None,
    };
    let trigger_event = EventId(r.varint_u128()?);
    let input = Fingerprint(r.array()?);
    let outputs = match r.variant()? {
        // Pending { calls: Vec<CallResult> }
        0 => {
            for _ in 0..r.len()? {
                r.call_slot()?;
            }
            None
        }
        // Completed { outputs: Vec<Event>, memory: Vec<MemoryUpdate> }
        1 => {
            let n = r.len()?;
            // Bounded: the length is untrusted, and an event is not smaller than a byte.
            let mut ids = Vec::with_capacity(n.min(16));
            for _ in 0..n {
                ids.push(EventId(r.varint_u128()?));
                r.skip_str()?; // event type
                r.map(0)?; // attributes
            }
            for _ in 0..r.len()? {
                r.skip_str()?; // path
                match r.variant()? {
                    0 => {
                        r.skip_str()?; // tag
                        r.bytes()?;
                    }
                    1 | 2 => {}
                    _ => return None,
                }
            }
            Some(ids.into_boxed_slice())
        }
        _ => return None,
    };
    if labeled && r.option()? {
        // The key label: at most `MAX_KEY_LABEL` bytes of UTF-8, as its decoder requires.
        if r.str()?.len() > crate::state::MAX_KEY_LABEL {
            return None;
        }
    }
    if traced && r.option()? {
        // The trace context: a trace id, a span id and the flags, 25 bytes.
        r.take(16 + 8 + 1)?;
    }
    r.0.is_empty().then(|| Evidence::new(key, trigger, trigger_event, input, outputs))
}

/// Same bound as the full decoder: lists and maps nest at most this deep inside one value.
const MAX_DEPTH: u32 = crate::value::depth::MAX_DEPTH;

/// The unread rest of a payload. Every read returns `None` where postcard's decoder fails.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }

    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }

    /// A LEB128 varint of a `bits`-wide integer, as postcard reads it: at most
    /// `ceil(bits / 7)` bytes, and the last of that many may not carry bits beyond `bits`.
    fn varint(&mut self, bits: u32) -> Option<u128> {
        // One byte (lengths, variant indices, small numbers) is the common case, and always
        // valid: every width read here takes at least two bytes to overflow.
        debug_assert!(bits >= 8);
        if let Some((&b, rest)) = self.0.split_first()
            && b & 0x80 == 0
        {
            self.0 = rest;
            return Some(u128::from(b));
        }
        let max_bytes = bits.div_ceil(7);
        let last_max = (1u8 << (bits % 7)) - 1;
        // The first nine bytes (63 bits) gather in a u64: 128-bit shifts cost several times
        // more, and event ids, the only 128-bit integers, rarely need more.
        let mut low = 0u64;
        for i in 0..max_bytes.min(9) {
            let b = self.byte()?;
            low |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return (i + 1 < max_bytes || b <= last_max).then_some(u128::from(low));
            }
        }
        let mut out = u128::from(low);
        for i in 9..max_bytes {
            let b = self.byte()?;
            out |= u128::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return (i + 1 < max_bytes || b <= last_max).then_some(out);
            }
        }
        None
    }

    fn varint_u32(&mut self) -> Option<u32> {
        self.varint(32).and_then(|v| u32::try_from(v).ok())
    }

    fn varint_u64(&mut self) -> Option<u64> {
        self.varint(64).and_then(|v| u64::try_from(v).ok())
    }

    fn varint_u128(&mut self) -> Option<u128> {
        self.varint(128)
    }

    /// One slot of a pending state's journal (`CallResult`).
    fn call_slot(&mut self) -> Option<()> {
        self.skip_str()?; // function id
        self.array::<32>()?; // args digest
        match self.variant()? {
            0 => {}
            1 | 2 => {
                self.bytes()?; // result or error
            }
            3 => self.skip_str()?, // the PENDING slot's idempotency key
            // A wait, then a resolved wait's outcome.
            v @ (4 | 5) => {
                self.wait_slot()?;
                if v == 5 {
                    match self.variant()? {
                        0 | 1 => {
                            self.bytes()?; // the reply or the rejection
                        }
                        2 => {}
                        _ => return None,
                    }
                }
            }
            _ => return None,
        }
        Some(())
    }

    /// A wait slot: its secret, start and optional deadline.
    fn wait_slot(&mut self) -> Option<()> {
        self.array::<16>()?;
        self.varint_u64()?;
        if self.option()? {
            self.varint_u64()?;
        }
        Some(())
    }

    /// An enum variant index.
    fn variant(&mut self) -> Option<u32> {
        self.varint_u32()
    }

    /// A sequence, map, string or byte-string length (a `usize` varint).
    fn len(&mut self) -> Option<usize> {
        self.varint(usize::BITS).and_then(|v| usize::try_from(v).ok())
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.len()?;
        self.take(n)
    }

    fn str(&mut self) -> Option<&'a str> {
        std::str::from_utf8(self.bytes()?).ok()
    }

    /// A string the walk only checks: UTF-8, tested for plain ASCII first (names, types and
    /// paths almost always are), which is several times cheaper than a full validation.
    fn skip_str(&mut self) -> Option<()> {
        let b = self.bytes()?;
        (b.is_ascii() || std::str::from_utf8(b).is_ok()).then_some(())
    }

    /// An `Option` tag: 0 is `None`, 1 is `Some`.
    fn option(&mut self) -> Option<bool> {
        match self.byte()? {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }

    fn state_key(&mut self) -> Option<StateKey> {
        Some(StateKey {
            key: KeyId(self.array()?),
            seq: self.varint_u64()?,
            occurrence: OccurrenceId(self.array()?),
            fingerprint: Fingerprint(self.array()?),
            action: ActionDigest(self.array()?),
        })
    }

    /// A map of string keys to values whose lists and maps start at `depth` (`Attributes`,
    /// or the payload of `Value::Map`).
    fn map(&mut self, depth: u32) -> Option<()> {
        for _ in 0..self.len()? {
            self.skip_str()?;
            self.value(depth)?;
        }
        Some(())
    }

    /// One `Value` at nesting `depth` (lists and maps already around it). Variants in
    /// declaration order: Null, Bool, Int, Float, String, Bytes, List, Map.
    fn value(&mut self, depth: u32) -> Option<()> {
        let nested = || (depth < MAX_DEPTH).then_some(depth + 1);
        match self.variant()? {
            0 => {}
            1 => {
                // postcard's bool: exactly 0 or 1.
                self.option()?;
            }
            2 => {
                // i64, zigzag: every u64 is one.
                self.varint_u64()?;
            }
            3 => {
                self.array::<8>()?;
            }
            4 => {
                self.skip_str()?;
            }
            5 => {
                self.bytes()?;
            }
            6 => {
                let depth = nested()?;
                for _ in 0..self.len()? {
                    self.value(depth)?;
                }
            }
            7 => self.map(nested()?)?,
            _ => return None,
        }
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::evidence;
    use crate::*;

    fn state(progress: Progress) -> ActionState {
        let key = KeyId::of(b"k");
        let input = Event::new("input", Attributes::new());
        let action = ActionId { name: "act".into(), version: Some("2".into()) };
        let producer = StateKey::new(key, 3, &action, &input, &Trigger::Input);
        ActionState {
            label: None,
            trace: None,
            key: StateKey::new(key, 3, &action, &input, &Trigger::Emitted { producer, index: 1 }),
            action,
            trigger: Trigger::Emitted { producer, index: 1 },
            trigger_event: input.id,
            input: input.fingerprint(),
            progress,
        }
    }

    /// Every variant of every walked type, so a field added to the model without its view
    /// fails here (the walk would silently fall back to the full decoder).
    #[test]
    fn the_walk_reads_every_shape_without_falling_back() {
        let mut nested = std::collections::BTreeMap::new();
        nested.insert("l".to_owned(), Value::List(vec![Value::Null, Value::Bool(true), Value::Float(1.5)]));
        let mut attrs = Attributes::new();
        attrs.insert("i".into(), Value::Int(-7));
        attrs.insert("s".into(), Value::String("text".into()));
        attrs.insert("b".into(), Value::Bytes(vec![1, 2, 3]));
        attrs.insert("m".into(), Value::Map(nested));
        let outputs = vec![Event::new("a", attrs), Event::new("b", Attributes::new())];
        let memory = vec![
            MemoryUpdate { path: "p".into(), op: MemoryOp::Set(TaggedBytes { tag: "json".into(), bytes: vec![9] }) },
            MemoryUpdate { path: "q".into(), op: MemoryOp::NewObject },
            MemoryUpdate { path: "r".into(), op: MemoryOp::Delete },
        ];
        let call = |status| CallResult { function_id: "f".into(), args_digest: [5; 32], status };
        let wait = |deadline_ms| crate::WaitSlot { secret: crate::WaitSecret([3; 16]), since_ms: 1 << 40, deadline_ms };
        let key = state(Progress::Pending { calls: Vec::new() }).key;
        let calls = vec![
            call(CallStatus::Pending { key: None }),
            call(CallStatus::Pending { key: Some(crate::IdempotencyKey::derive("", &key, 1, 2, "f", &[5; 32])) }),
            call(CallStatus::Succeeded { result: vec![] }),
            call(CallStatus::Failed { error: vec![4] }),
            call(CallStatus::Waiting { wait: wait(Some(300)) }),
            call(CallStatus::Resolved { wait: wait(None), outcome: crate::WaitOutcome::Reply(vec![1]) }),
            call(CallStatus::Resolved { wait: wait(Some(9)), outcome: crate::WaitOutcome::Rejected(vec![]) }),
            call(CallStatus::Resolved { wait: wait(Some(u64::MAX)), outcome: crate::WaitOutcome::TimedOut }),
        ];
        for progress in [Progress::Completed { outputs, memory }, Progress::Pending { calls }] {
            let s = state(progress);
            let payload = postcard::to_allocvec(&LogRecord::Upsert(s.clone())).expect("encodes");
            assert_eq!(evidence(&payload, true, true), Some(Evidence::of(&s)));
            let mut bootstrap = s.clone();
            bootstrap.trigger = Trigger::Bootstrap { label: "run".into() };
            bootstrap.label = Some(KeyLabel::new("customer-42"));
            bootstrap.trace = TraceContext::new([7; 16], [8; 8], 1);
            let payload = postcard::to_allocvec(&LogRecord::Upsert(bootstrap.clone())).expect("encodes");
            assert_eq!(evidence(&payload, true, true), Some(Evidence::of(&bootstrap)));
        }
    }
}
