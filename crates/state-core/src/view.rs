//! A borrowed walk over an upserted state's postcard payload: checks every field the full
//! decoder checks (structure, UTF-8, value nesting, no trailing bytes) and keeps only the
//! replay evidence, without allocating the state.
//!
//! The view types mirror the serde shape of [`ActionState`](crate::ActionState) field by field,
//! with strings and byte strings borrowed from the payload. postcard is not self-describing, so
//! the mirror is the only way to step over a field; `codec::peek` falls back to the full
//! decoder whenever the walk fails, and the test `peek_agrees_with_decode` holds the two to the
//! same answers.

use crate::event::Trigger;
use crate::id::{EventId, Fingerprint};
use crate::key::StateKey;
use crate::record::Evidence;
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor};
use std::fmt;
use std::marker::PhantomData;

/// The evidence of an `Upsert` payload (the postcard encoding of `LogRecord::Upsert`), or
/// `None` when the walk fails anywhere: the caller then asks the full decoder for the error.
pub(crate) fn evidence(payload: &[u8]) -> Option<Evidence> {
    let (RecordView::Upsert(s), rest) = postcard::take_from_bytes::<RecordView<'_>>(payload).ok()?;
    if !rest.is_empty() {
        return None;
    }
    let outputs = match s.progress {
        ProgressView::Pending { .. } => None,
        ProgressView::Completed { outputs, .. } => Some(outputs.0.into_boxed_slice()),
    };
    Some(Evidence { key: s.key, trigger: s.trigger, trigger_event: s.trigger_event, input: s.input, outputs })
}

/// `LogRecord` with only its first variant: any other variant index fails the walk.
#[derive(Deserialize)]
enum RecordView<'a> {
    #[serde(borrow)]
    Upsert(StateView<'a>),
}

#[derive(Deserialize)]
struct StateView<'a> {
    key: StateKey,
    #[serde(borrow)]
    #[allow(dead_code, reason = "walked for validation only")]
    action: ActionView<'a>,
    trigger: Trigger,
    trigger_event: EventId,
    input: Fingerprint,
    #[serde(borrow)]
    progress: ProgressView<'a>,
}

#[derive(Deserialize)]
#[allow(dead_code, reason = "walked for validation only")]
struct ActionView<'a> {
    name: &'a str,
    #[serde(borrow)]
    version: Option<&'a str>,
}

#[derive(Deserialize)]
enum ProgressView<'a> {
    Pending {
        #[serde(borrow)]
        #[allow(dead_code, reason = "walked for validation only")]
        calls: Walk<CallView<'a>>,
    },
    Completed {
        outputs: OutputIds,
        #[serde(borrow)]
        #[allow(dead_code, reason = "walked for validation only")]
        memory: Walk<MemoryView<'a>>,
    },
}

#[derive(Deserialize)]
#[allow(dead_code, reason = "walked for validation only")]
struct CallView<'a> {
    function_id: &'a str,
    args_digest: [u8; 32],
    #[serde(borrow)]
    status: CallStatusView<'a>,
}

#[derive(Deserialize)]
#[allow(dead_code, reason = "walked for validation only")]
enum CallStatusView<'a> {
    Pending,
    Succeeded { result: &'a [u8] },
    Failed { error: &'a [u8] },
}

#[derive(Deserialize)]
#[allow(dead_code, reason = "walked for validation only")]
struct MemoryView<'a> {
    path: &'a str,
    #[serde(borrow)]
    op: MemoryOpView<'a>,
}

#[derive(Deserialize)]
#[allow(dead_code, reason = "walked for validation only")]
enum MemoryOpView<'a> {
    #[serde(borrow)]
    Set(TaggedView<'a>),
    NewObject,
    Delete,
}

#[derive(Deserialize)]
#[allow(dead_code, reason = "walked for validation only")]
struct TaggedView<'a> {
    tag: &'a str,
    bytes: &'a [u8],
}

/// An output event: its id is kept, its type and attributes are walked.
#[derive(Deserialize)]
struct EventView<'a> {
    id: EventId,
    #[allow(dead_code, reason = "walked for validation only")]
    event_type: &'a str,
    #[allow(dead_code, reason = "walked for validation only")]
    attributes: AttributesView,
}

/// The ids of the output events, in emission order.
struct OutputIds(Vec<EventId>);

impl<'de> Deserialize<'de> for OutputIds {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = OutputIds;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("output events")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<OutputIds, A::Error> {
                // Bounded: the length prefix is untrusted, the events themselves are not
                // smaller than a byte each.
                let mut ids = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(16));
                while let Some(e) = seq.next_element::<EventView<'de>>()? {
                    ids.push(e.id);
                }
                Ok(OutputIds(ids))
            }
        }
        d.deserialize_seq(V)
    }
}

/// A sequence whose elements are walked and dropped.
struct Walk<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Walk<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Walk<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a sequence")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Walk<T>, A::Error> {
                while seq.next_element::<T>()?.is_some() {}
                Ok(Walk(PhantomData))
            }
        }
        d.deserialize_seq(V(PhantomData))
    }
}

/// An event's attribute map (`Attributes`): string keys, values at nesting depth 0.
struct AttributesView;

impl<'de> Deserialize<'de> for AttributesView {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(MapWalk { depth: 0 })?;
        Ok(AttributesView)
    }
}

/// Same bound as the full decoder: lists and maps nest at most this deep inside one value.
const MAX_DEPTH: u32 = crate::value::depth::MAX_DEPTH;

/// A map of string keys to values whose lists and maps start at `depth`.
#[derive(Clone, Copy)]
struct MapWalk {
    depth: u32,
}

impl<'de> Visitor<'de> for MapWalk {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map of values")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_key::<&'de str>()?.is_some() {
            map.next_value_seed(ValueWalk { depth: self.depth })?;
        }
        Ok(())
    }
}

/// A sequence of values whose lists and maps start at `depth`.
#[derive(Clone, Copy)]
struct SeqWalk {
    depth: u32,
}

impl<'de> Visitor<'de> for SeqWalk {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of values")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(ValueWalk { depth: self.depth })?.is_some() {}
        Ok(())
    }
}

/// One `Value`, entered at nesting `depth` (lists and maps already around it).
#[derive(Clone, Copy)]
struct ValueWalk {
    depth: u32,
}

/// The variants of `Value`, in declaration order (postcard encodes the index).
const VALUE_VARIANTS: &[&str] = &["Null", "Bool", "Int", "Float", "String", "Bytes", "List", "Map"];

impl<'de> DeserializeSeed<'de> for ValueWalk {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_enum("Value", VALUE_VARIANTS, self)
    }
}

impl<'de> Visitor<'de> for ValueWalk {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a value")
    }
    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<(), A::Error> {
        let (index, variant) = data.variant::<u32>()?;
        let nested = || {
            (self.depth < MAX_DEPTH)
                .then_some(self.depth + 1)
                .ok_or_else(|| de::Error::custom("value nesting exceeds 128 lists and maps"))
        };
        match index {
            0 => variant.unit_variant(),
            1 => variant.newtype_variant::<bool>().map(drop),
            2 => variant.newtype_variant::<i64>().map(drop),
            3 => variant.newtype_variant::<f64>().map(drop),
            4 => variant.newtype_variant::<&'de str>().map(drop),
            5 => variant.newtype_variant::<&'de [u8]>().map(drop),
            6 => variant.newtype_variant_seed(Nested::Seq(SeqWalk { depth: nested()? })),
            7 => variant.newtype_variant_seed(Nested::Map(MapWalk { depth: nested()? })),
            _ => Err(de::Error::invalid_value(de::Unexpected::Unsigned(u64::from(index)), &"a value variant")),
        }
    }
}

/// The payload of a `List` or `Map` variant.
enum Nested {
    Seq(SeqWalk),
    Map(MapWalk),
}

impl<'de> DeserializeSeed<'de> for Nested {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        match self {
            Nested::Seq(s) => d.deserialize_seq(s),
            Nested::Map(m) => d.deserialize_map(m),
        }
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
        let calls = vec![
            call(CallStatus::Pending),
            call(CallStatus::Succeeded { result: vec![] }),
            call(CallStatus::Failed { error: vec![4] }),
        ];
        for progress in [Progress::Completed { outputs, memory }, Progress::Pending { calls }] {
            let s = state(progress);
            let payload = postcard::to_allocvec(&LogRecord::Upsert(s.clone())).expect("encodes");
            assert_eq!(evidence(&payload), Some(Evidence::of(&s)));
            let mut bootstrap = s.clone();
            bootstrap.trigger = Trigger::Bootstrap { label: "run".into() };
            let payload = postcard::to_allocvec(&LogRecord::Upsert(bootstrap.clone())).expect("encodes");
            assert_eq!(evidence(&payload), Some(Evidence::of(&bootstrap)));
        }
    }
}
