//! The digest of a durable call's arguments: BLAKE3 over their canonical JSON.
//!
//! Why JSON and not the postcard the log uses: postcard writes a map in the order it
//! iterates, and a `HashMap` iterates in a different order in every process, so the same
//! arguments would get a new digest after a restart and miss their journaled result. The
//! canonical form sorts every map by key and has no whitespace, the form a Python caller gets
//! from `json.dumps(args, sort_keys=True, separators=(",", ":"))`.

use serde_json::Value;

/// The digest of `args`, or why they cannot be encoded.
pub(crate) fn of_args<T: serde::Serialize + ?Sized>(args: &T) -> Result<[u8; 32], String> {
    let value = serde_json::to_value(args).map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(64);
    write(&value, &mut out);
    Ok(*blake3::hash(&out).as_bytes())
}

/// Writes `value` as canonical JSON: object keys sorted, no whitespace.
fn write(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(item, out);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                scalar(&Value::String(key.clone()), out);
                out.push(b':');
                write(item, out);
            }
            out.push(b'}');
        }
        scalar_value => scalar(scalar_value, out),
    }
}

/// A scalar as serde_json writes it (a string escaped, a number in its shortest form).
fn scalar(value: &Value, out: &mut Vec<u8>) {
    // Writing a scalar into a vector cannot fail.
    let _ = serde_json::to_writer(&mut *out, value);
}

#[cfg(test)]
mod tests {
    use super::of_args;
    use std::collections::{BTreeMap, HashMap};

    #[test]
    fn a_map_has_one_digest_whatever_its_order() {
        let mut a = HashMap::new();
        let mut b = HashMap::new();
        for i in 0..64 {
            a.insert(format!("k{i}"), i);
        }
        for i in (0..64).rev() {
            b.insert(format!("k{i}"), i);
        }
        let sorted: BTreeMap<_, _> = a.clone().into_iter().collect();
        assert_eq!(of_args(&a), of_args(&b));
        assert_eq!(of_args(&a), of_args(&sorted));
    }

    #[test]
    fn canonical_json_is_what_python_writes() {
        // json.dumps({"b": [1, 2.5, None], "a": "é"}, sort_keys=True, separators=(",", ":"),
        // ensure_ascii=False)
        let mut m = BTreeMap::new();
        m.insert("b", serde_json::json!([1, 2.5, null]));
        m.insert("a", serde_json::json!("é"));
        assert_eq!(of_args(&m), Ok(*blake3::hash("{\"a\":\"é\",\"b\":[1,2.5,null]}".as_bytes()).as_bytes()));
    }

    #[test]
    fn different_arguments_differ_and_unencodable_ones_are_refused() {
        assert_ne!(of_args(&("Paris", 3)), of_args(&("Paris", 4)));
        let mut bad = HashMap::new();
        bad.insert((1, 2), "a tuple key JSON cannot hold");
        assert!(of_args(&bad).is_err());
    }
}
