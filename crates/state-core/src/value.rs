//! The canonical attribute value tree and event fingerprints.

use crate::canonical;
use crate::id::{Fingerprint, context};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;
use std::fmt;

/// Attributes of an event: string keys, kept sorted, each present once.
///
/// A sorted vector rather than a `BTreeMap`: events carry a handful of attributes, and a B-tree
/// allocates a whole node (over 600 bytes) even for one entry, which dominated the memory and
/// the rebuild time of recorded outputs. It serializes as a map, so its encoding is exactly a
/// map's (keys in order), and it fingerprints like one.
#[derive(Clone, Default, PartialEq)]
pub struct Attributes(Vec<(String, Value)>);

impl Attributes {
    /// No attributes.
    pub fn new() -> Self {
        Attributes(Vec::new())
    }

    /// Sets `key` to `value`, returning the previous value.
    pub fn insert(&mut self, key: String, value: Value) -> Option<Value> {
        match self.0.binary_search_by(|(k, _)| k.as_str().cmp(&key)) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, value)),
            Err(i) => {
                self.0.insert(i, (key, value));
                None
            }
        }
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.binary_search_by(|(k, _)| k.as_str().cmp(key)).ok().map(|i| &self.0[i].1)
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        self.0.binary_search_by(|(k, _)| k.as_str().cmp(key)).ok().map(|i| self.0.remove(i).1)
    }

    /// Number of attributes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The attributes in key order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&String, &Value)> {
        self.0.iter().map(|(k, v)| (k, v))
    }
}

impl fmt::Debug for Attributes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl FromIterator<(String, Value)> for Attributes {
    /// Later entries win over earlier ones with the same key, as with a map.
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(iter: I) -> Self {
        let mut out = Attributes::new();
        for (k, v) in iter {
            out.insert(k, v);
        }
        out
    }
}

impl From<BTreeMap<String, Value>> for Attributes {
    fn from(map: BTreeMap<String, Value>) -> Self {
        // Already sorted and unique.
        Attributes(map.into_iter().collect())
    }
}

impl IntoIterator for Attributes {
    type Item = (String, Value);
    type IntoIter = std::vec::IntoIter<(String, Value)>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl Serialize for Attributes {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for Attributes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Attributes;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of attributes")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Attributes, A::Error> {
                let mut out = Vec::with_capacity(map.size_hint().unwrap_or(0).min(64));
                while let Some((k, v)) = map.next_entry::<String, Value>()? {
                    out.push((k, v));
                }
                // Written in key order; anything else (hand-made bytes) is put in order, the
                // last of equal keys winning, exactly as a map would read it.
                if out.windows(2).all(|w| w[0].0 < w[1].0) {
                    Ok(Attributes(out))
                } else {
                    Ok(out.into_iter().collect())
                }
            }
        }
        deserializer.deserialize_map(Visit)
    }
}

/// A canonical attribute value.
///
/// Maps keep their keys sorted (`BTreeMap`), so two maps with the same entries are equal and
/// fingerprint alike whatever order they were built in. Floats are normalized when
/// fingerprinted: `-0.0` equals `0.0` and every NaN equals every other NaN.
///
/// Lists and maps nest at most 128 deep inside one value; the record codec refuses deeper
/// values on encode and on decode (see `docs/format.md`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Value {
    /// Absent / null.
    Null,
    /// A boolean.
    Bool(bool),
    /// A signed 64-bit integer. `Int(1)` and `Float(1.0)` are different values.
    Int(i64),
    /// A 64-bit float.
    Float(f64),
    /// A UTF-8 string.
    String(String),
    /// Opaque bytes.
    Bytes(Vec<u8>),
    /// An ordered list.
    List(#[serde(serialize_with = "depth::serialize", deserialize_with = "depth::deserialize")] Vec<Value>),
    /// A map with sorted string keys.
    Map(#[serde(serialize_with = "depth::serialize", deserialize_with = "depth::deserialize")] BTreeMap<String, Value>),
}

/// Bounds the nesting of lists and maps in encoded values, so that decoding a record never
/// exhausts the stack. Encoding enforces the same bound, so every record the codec writes can
/// be read back. The wire format is unchanged: the guard only counts while it delegates.
pub(crate) mod depth {
    use serde::{Deserialize, Deserializer, Serialize, Serializer, de, ser};
    use std::cell::Cell;

    /// Lists and maps may nest this deep inside one value (the top-level attribute map of an
    /// event does not count).
    pub(crate) const MAX_DEPTH: u32 = 128;

    thread_local! {
        static DEPTH: Cell<u32> = const { Cell::new(0) };
    }

    /// One level of nesting; leaving it (also by unwinding) restores the count.
    struct Level;

    impl Level {
        fn enter() -> Option<Level> {
            DEPTH.with(|d| {
                let n = d.get();
                (n < MAX_DEPTH).then(|| {
                    d.set(n + 1);
                    Level
                })
            })
        }
    }

    impl Drop for Level {
        fn drop(&mut self) {
            DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
        }
    }

    const TOO_DEEP: &str = "value nesting exceeds 128 lists and maps";

    pub(super) fn serialize<T: Serialize, S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
        let _level = Level::enter().ok_or_else(|| <S::Error as ser::Error>::custom(TOO_DEEP))?;
        v.serialize(s)
    }

    pub(super) fn deserialize<'de, T: Deserialize<'de>, D: Deserializer<'de>>(d: D) -> Result<T, D::Error> {
        let _level = Level::enter().ok_or_else(|| <D::Error as de::Error>::custom(TOO_DEEP))?;
        T::deserialize(d)
    }
}

impl Value {
    /// Feeds the canonical encoding of this value into `h`.
    ///
    /// Layout (all integers little-endian): a one-byte tag, then
    /// `Null` nothing, `Bool` one byte, `Int` 8 bytes, `Float` the 8 bytes of the normalized
    /// IEEE-754 bits, `String`/`Bytes` a u64 length and the bytes, `List` a u64 count and each
    /// item, `Map` a u64 count and each (key as string, value) in key order.
    pub fn write_canonical(&self, h: &mut blake3::Hasher) {
        match self {
            Value::Null => {
                h.update(&[0]);
            }
            Value::Bool(b) => {
                h.update(&[1, u8::from(*b)]);
            }
            Value::Int(i) => {
                h.update(&[2]);
                h.update(&i.to_le_bytes());
            }
            Value::Float(x) => {
                h.update(&[3]);
                h.update(&normalize_float(*x).to_bits().to_le_bytes());
            }
            Value::String(s) => {
                h.update(&[4]);
                canonical::write_str(h, s);
            }
            Value::Bytes(b) => {
                h.update(&[5]);
                canonical::write_bytes(h, b);
            }
            Value::List(items) => {
                h.update(&[6]);
                canonical::write_len(h, items.len());
                for item in items {
                    item.write_canonical(h);
                }
            }
            Value::Map(map) => {
                h.update(&[7]);
                write_map(h, map.len(), map.iter());
            }
        }
    }
}

fn write_map<'a>(h: &mut blake3::Hasher, len: usize, entries: impl Iterator<Item = (&'a String, &'a Value)>) {
    canonical::write_len(h, len);
    for (k, v) in entries {
        canonical::write_str(h, k);
        v.write_canonical(h);
    }
}

/// Normalizes a float for fingerprinting: `-0.0` becomes `0.0`, every NaN becomes the
/// canonical quiet NaN `0x7ff8_0000_0000_0000`.
pub fn normalize_float(x: f64) -> f64 {
    if x.is_nan() {
        f64::from_bits(0x7ff8_0000_0000_0000)
    } else if x == 0.0 {
        0.0
    } else {
        x
    }
}

impl Fingerprint {
    /// The canonical fingerprint of an event type and its attributes (the id is not part of it).
    pub fn of(event_type: &str, attributes: &Attributes) -> Self {
        let mut h = context::Context::Fingerprint.hasher();
        canonical::write_str(&mut h, event_type);
        write_map(&mut h, attributes.len(), attributes.iter());
        Fingerprint(*h.finalize().as_bytes())
    }
}

macro_rules! value_from {
    ($t:ty, $variant:ident, $conv:expr) => {
        impl From<$t> for Value {
            fn from(v: $t) -> Self {
                Value::$variant($conv(v))
            }
        }
    };
}
value_from!(bool, Bool, |v| v);
value_from!(i64, Int, |v| v);
value_from!(i32, Int, i64::from);
value_from!(u32, Int, i64::from);
value_from!(f64, Float, |v| v);
value_from!(String, String, |v| v);
value_from!(&str, String, String::from);
value_from!(Vec<u8>, Bytes, |v| v);
value_from!(Vec<Value>, List, |v| v);
value_from!(BTreeMap<String, Value>, Map, |v| v);
