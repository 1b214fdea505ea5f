//! Golden digest vectors: hard-coded fingerprint, key, action, occurrence, key-group and
//! partition digests, and the properties of the fingerprint.

use crate::support::{attrs, fixed_state_key, map};
use actionstate_core::{ActionId, Attributes, Fingerprint, KeyId, Trigger, Value};
use std::collections::BTreeMap;

/// Collects (name, actual, expected) and fails listing every mismatch with its actual value.
#[derive(Default)]
struct Vectors(Vec<String>);

impl Vectors {
    fn check(&mut self, name: &str, actual: impl std::fmt::Display, expected: &str) {
        let actual = actual.to_string();
        if actual != expected {
            self.0.push(format!("{name}: expected {expected}, got {actual}"));
        }
    }

    fn finish(self) {
        assert!(self.0.is_empty(), "golden vectors changed:\n{}", self.0.join("\n"));
    }
}

fn nested_attributes() -> Attributes {
    attrs(&[
        ("list", Value::List(vec![Value::Int(1), Value::Float(2.5), Value::Null, Value::Bool(true)])),
        ("map", map(&[("x", Value::Bytes(vec![0, 1, 2])), ("y", Value::from("é")), ("z", map(&[]))])),
        ("empty_list", Value::List(vec![])),
    ])
}

// Long: a table of golden vectors.
#[test]
fn fingerprint_golden_vectors() {
    let mut v = Vectors::default();
    let f = |t: &str, a: &Attributes| Fingerprint::of(t, a);
    v.check(
        "empty type, empty map",
        f("", &Attributes::new()),
        "de9df419e5dc61f03bb3968b8494d00f9951e4067a60f1b11329449d570d0daf",
    );
    v.check(
        "input, empty map",
        f("input", &Attributes::new()),
        "d9fb06e9f9215d25888594c8921403e25f783de2ca6080bd45ba65bb1d7ba2ae",
    );
    v.check(
        "input, text hello",
        f("input", &attrs(&[("text", Value::from("hello"))])),
        "49b847c125e6f47f527ee37bcf6d6d51357c142545c41f137807e0014e1464f8",
    );
    v.check(
        "nested",
        f("input", &nested_attributes()),
        "2fe943ea3ed994b87bacaf95c1440cb965191e6ac0aa561af4b8196449cc29a5",
    );
    v.check(
        "ints",
        f("n", &attrs(&[("a", Value::Int(0)), ("b", Value::Int(-1)), ("c", Value::Int(i64::MAX))])),
        "2ec863f6ec9f76540f54fc371bc4b29adb2fe5a750da27b49a3ebaca739a044c",
    );
    v.check(
        "string",
        f("s", &attrs(&[("s", Value::from("1"))])),
        "e1027b8f15dbd8801e85eed413e361cb6d1d603834ff7e3cb0b25a1a2567d5ec",
    );
    v.check(
        "bytes",
        f("b", &attrs(&[("b", Value::Bytes(b"1".to_vec()))])),
        "b992483effed175b2b2a28843fbb9c98da8ac4c13acc2ef758dfe440cf74a618",
    );
    v.check(
        "bool and null",
        f("t", &attrs(&[("b", Value::Bool(false)), ("n", Value::Null)])),
        "3ea3b715fcfb9b5f9157bfe24b4cc175ce2b98928162c19638951a3dbdae28d6",
    );
    v.check(
        "float 1.5",
        f("x", &attrs(&[("x", Value::Float(1.5))])),
        "a325e80bbbca47c3e7b5714168e20b52e3e23d22efd21b5eec052e7713177d73",
    );
    v.check(
        "float 0.0",
        f("x", &attrs(&[("x", Value::Float(0.0))])),
        "4b580b8d39502557ab680dbd80392f66d9362aeccd67fd5a6f922819006237e6",
    );
    v.check(
        "float NaN",
        f("x", &attrs(&[("x", Value::Float(f64::NAN))])),
        "c298d2c4b4a01351394e419ba0f7470e322e25fb05c74f496a7c34c5c0c7c330",
    );
    // Normalized floats pin to the same digests as their canonical forms.
    let float = |x: f64| f("x", &attrs(&[("x", Value::Float(x))]));
    v.check("float -0.0", float(-0.0), "4b580b8d39502557ab680dbd80392f66d9362aeccd67fd5a6f922819006237e6");
    v.check("float -NaN", float(-f64::NAN), "c298d2c4b4a01351394e419ba0f7470e322e25fb05c74f496a7c34c5c0c7c330");
    v.check(
        "float signalling NaN",
        float(f64::from_bits(0x7ff0_0000_0000_0001)),
        "c298d2c4b4a01351394e419ba0f7470e322e25fb05c74f496a7c34c5c0c7c330",
    );
    // The same entries inserted in reverse order, at both levels, give the same digest.
    let mut reversed = Attributes::new();
    let mut inner = BTreeMap::new();
    inner.insert("z".to_owned(), map(&[]));
    inner.insert("y".to_owned(), Value::from("é"));
    inner.insert("x".to_owned(), Value::Bytes(vec![0, 1, 2]));
    reversed.insert("map".to_owned(), Value::Map(inner));
    reversed
        .insert("list".to_owned(), Value::List(vec![Value::Int(1), Value::Float(2.5), Value::Null, Value::Bool(true)]));
    reversed.insert("empty_list".to_owned(), Value::List(vec![]));
    v.check(
        "nested, reverse insertion order",
        f("input", &reversed),
        "2fe943ea3ed994b87bacaf95c1440cb965191e6ac0aa561af4b8196449cc29a5",
    );
    v.finish();
}

#[test]
fn fingerprint_normalizes_floats() {
    let of = |x: f64| Fingerprint::of("x", &attrs(&[("x", Value::Float(x))]));
    assert_eq!(of(-0.0), of(0.0));
    let nans = [
        f64::NAN,
        -f64::NAN,
        f64::from_bits(0x7ff0_0000_0000_0001), // signalling
        f64::from_bits(0xfff8_0000_0000_0001),
        f64::from_bits(0x7fff_ffff_ffff_ffff),
        f64::INFINITY - f64::INFINITY,
    ];
    for nan in nans {
        assert!(nan.is_nan());
        assert_eq!(of(nan), of(f64::NAN), "{:#x}", nan.to_bits());
    }
    assert_ne!(of(f64::NAN), of(f64::INFINITY));
    assert_ne!(of(0.0), of(f64::MIN_POSITIVE));
    assert_ne!(of(1.0), of(-1.0));
    // Normalization applies inside lists and nested maps too.
    let nested = |x: f64| Fingerprint::of("x", &attrs(&[("l", Value::List(vec![map(&[("f", Value::Float(x))])]))]));
    assert_eq!(nested(-0.0), nested(0.0));
    assert_eq!(nested(-f64::NAN), nested(f64::NAN));
}

#[test]
fn fingerprint_ignores_insertion_order() {
    let entries = [
        ("b", Value::Int(2)),
        ("a", Value::from("one")),
        ("c", map(&[("y", Value::Null), ("x", Value::Bool(true))])),
        ("", Value::List(vec![Value::Int(1)])),
    ];
    let mut forward = Attributes::new();
    for (k, val) in entries.iter() {
        forward.insert((*k).to_owned(), val.clone());
    }
    let mut backward = Attributes::new();
    for (k, val) in entries.iter().rev() {
        backward.insert((*k).to_owned(), val.clone());
    }
    let mut inner = BTreeMap::new();
    inner.insert("x".to_owned(), Value::Bool(true));
    inner.insert("y".to_owned(), Value::Null);
    backward.insert("c".to_owned(), Value::Map(inner));
    assert_eq!(Fingerprint::of("t", &forward), Fingerprint::of("t", &backward));
    // List order, unlike map order, is significant.
    let l1 = attrs(&[("l", Value::List(vec![Value::Int(1), Value::Int(2)]))]);
    let l2 = attrs(&[("l", Value::List(vec![Value::Int(2), Value::Int(1)]))]);
    assert_ne!(Fingerprint::of("t", &l1), Fingerprint::of("t", &l2));
}

/// Length prefixes keep neighbouring fields apart: no two of these collide.
#[test]
fn fingerprint_has_no_boundary_collisions() {
    let cases: Vec<(&str, Attributes)> = vec![
        ("ab", Attributes::new()),
        ("a", attrs(&[("b", Value::Null)])),
        ("a", attrs(&[("", Value::from("b"))])),
        ("t", attrs(&[("s", Value::from("1"))])),
        ("t", attrs(&[("s", Value::Bytes(b"1".to_vec()))])),
        ("t", attrs(&[("s", Value::Int(1))])),
        ("t", attrs(&[("s", Value::Float(1.0))])),
        ("t", attrs(&[("s", Value::List(vec![]))])),
        ("t", attrs(&[("s", map(&[]))])),
        ("t", attrs(&[("s", Value::List(vec![Value::Null]))])),
        ("t", attrs(&[("s", map(&[("", Value::Null)]))])),
        ("t", attrs(&[("s", Value::Null)])),
        ("t", attrs(&[("s", Value::Bool(false))])),
        ("t", attrs(&[("sx", Value::Null)])),
        ("t", attrs(&[("s", Value::List(vec![Value::from("a"), Value::from("b")]))])),
        ("t", attrs(&[("s", Value::List(vec![Value::from("ab")]))])),
    ];
    let prints: Vec<Fingerprint> = cases.iter().map(|(t, a)| Fingerprint::of(t, a)).collect();
    for i in 0..prints.len() {
        for j in i + 1..prints.len() {
            assert_ne!(prints[i], prints[j], "{:?} vs {:?}", cases[i], cases[j]);
        }
    }
}

#[test]
fn key_id_golden_vectors() {
    let mut v = Vectors::default();
    v.check("empty", KeyId::of(b""), "2bb035ffae0a202ea1fd2e1a227612aac3460f53584ef6cf4f347e921e41cf2b");
    v.check(
        "customer-42",
        KeyId::of(b"customer-42"),
        "c9490be9b707cfe05eac7499aa81d4eae64eed0cda0605bead000f8a999dd67c",
    );
    v.check("1", KeyId::of(b"1"), "9f50ef15edc47a86d2a5f4f27141a81434244d4f44fadedeb8eebb3b08b5a650");
    v.check("\"1\"", KeyId::of(b"\"1\""), "8c7162b034a36f8c7d30e372f5a2000133fa478397b492c07b52048ccfd2d399");
    v.finish();
    assert_ne!(KeyId::of(b"1"), KeyId::of(b"\"1\""));
}

#[test]
fn action_digest_golden_vectors() {
    let mut v = Vectors::default();
    v.check("summarize", ActionId::new("summarize").digest(), "459efe50dce24c70e944309851a7b08f");
    v.check("summarize@v2", ActionId::versioned("summarize", "v2").digest(), "8612605da2bd2372bf793d9688734c2c");
    v.check("summarize@", ActionId::versioned("summarize", "").digest(), "6cdd660a7ffe54ef49c521fa581bf2b6");
    v.check("empty name", ActionId::new("").digest(), "06c3102306c33b35fae3687c2273bd42");
    v.finish();
    assert_ne!(ActionId::new("summarize").digest(), ActionId::versioned("summarize", "").digest());
    assert_ne!(ActionId::versioned("ab", "c").digest(), ActionId::versioned("a", "bc").digest());
    assert_ne!(ActionId::versioned("summarize", "v1").digest(), ActionId::versioned("summarize", "v2").digest());
}

#[test]
fn occurrence_golden_vectors() {
    let producer = fixed_state_key();
    let mut v = Vectors::default();
    v.check("producer state key", hex::encode(producer.to_bytes()), "01c9490be9b707cfe05eac7499aa81d4eae64eed0cda0605bead000f8a999dd67c0000000000000007400a109f9e1602d79551561b37d1750a49b847c125e6f47f527ee37bcf6d6d51357c142545c41f137807e0014e1464f8459efe50dce24c70e944309851a7b08f");
    v.check("input", Trigger::Input.occurrence(), "400a109f9e1602d79551561b37d1750a");
    v.check("emitted 0", Trigger::Emitted { producer, index: 0 }.occurrence(), "a585fa522150d59d3eecb7a285d59660");
    v.check("emitted 1", Trigger::Emitted { producer, index: 1 }.occurrence(), "9db4e4935889cb9582d4f731f9154c5a");
    v.check(
        "bootstrap agent-start",
        Trigger::Bootstrap { label: "agent-start".into() }.occurrence(),
        "cf459e1888508a4801388dff13cef534",
    );
    v.check(
        "bootstrap empty",
        Trigger::Bootstrap { label: String::new() }.occurrence(),
        "17319f003115b667ef3f6e4ce41db11d",
    );
    v.finish();
}

#[test]
fn key_group_and_partition_golden_vectors() {
    let key = KeyId::of(b"customer-42");
    let other = KeyId::of(b"customer-43");
    let mut v = Vectors::default();
    v.check("customer-42 group 128", key.key_group(128), "73");
    v.check("customer-42 group 65535", key.key_group(u16::MAX), "7004");
    v.check("customer-43 group 128", other.key_group(128), "24");
    v.check("customer-42 partition 8", key.partition(8), "7");
    v.check("customer-42 partition 1000", key.partition(1000), "551");
    v.check("customer-43 partition 8", other.partition(8), "5");
    v.finish();
    for k in [key, other] {
        assert_eq!(k.key_group(0), 0);
        assert_eq!(k.key_group(1), 0);
        assert_eq!(k.partition(0), 0);
        assert_eq!(k.partition(1), 0);
    }
}
