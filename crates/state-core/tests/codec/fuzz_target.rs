//! The checks of the `decode` fuzz target (`fuzz/checks/decode.rs`), run on the stable
//! toolchain in every `cargo test`: over the empty input, the seed corpus `fuzz/seed-corpus.sh`
//! writes (built here the same way from the golden files) and a few thousand generated inputs.
//! A fuzz target that fails on its first input fails here too, without nightly or cargo-fuzz.

use crate::robustness::{Mutation, arb_mutation};
use crate::strategies::arb_record;
use actionstate_core::RecordKind;
use actionstate_core::codec::{self, HEADER_LEN, V1_HEADER_LEN, V2_HEADER_LEN};
use proptest::prelude::*;
use std::collections::BTreeSet;
use std::path::Path;

#[path = "../../../../fuzz/checks/decode.rs"]
mod checks;

/// The seed inputs of `fuzz/seed-corpus.sh`: for every golden file of every format version,
/// its value, its key-prefixed form (key length byte, key, value) and its bare payload.
fn seed_corpus() -> Vec<(String, Vec<u8>)> {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut seeds = Vec::new();
    for (dir, header_len) in [("", HEADER_LEN), ("v3", HEADER_LEN), ("v2", V2_HEADER_LEN), ("v1", V1_HEADER_LEN)] {
        let mut files: Vec<_> = std::fs::read_dir(golden.join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "hex"))
            .collect();
        files.sort();
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            let field =
                |prefix: &str| hex::decode(text.lines().find_map(|l| l.strip_prefix(prefix)).unwrap().trim()).unwrap();
            let (key, value) = (field("key "), field("value "));
            let name = format!("{dir}/{}", file.file_stem().unwrap().to_string_lossy());
            let mut keyed = vec![u8::try_from(key.len()).unwrap()];
            keyed.extend_from_slice(&key);
            keyed.extend_from_slice(&value);
            seeds.push((format!("{name}-payload"), value[header_len..].to_vec()));
            seeds.push((format!("{name}-keyed"), keyed));
            seeds.push((format!("{name}-value"), value));
        }
    }
    seeds
}

#[test]
fn fuzz_checks_pass_on_the_empty_input() {
    checks::check(&[]);
}

#[test]
fn fuzz_checks_pass_on_the_seed_corpus() {
    let seeds = seed_corpus();
    let mut kinds = BTreeSet::new();
    for (name, input) in &seeds {
        eprintln!("seed {name} ({} bytes)", input.len());
        checks::check(input);
        if name.ends_with("-value") {
            kinds.insert(codec::decode_value(input).unwrap().kind() as u8);
        }
    }
    // The corpus covers every format version and every record kind, fence records included.
    for version in ["/", "v3/", "v2/", "v1/"] {
        assert!(seeds.iter().any(|(name, _)| name.starts_with(version)), "no seed of {version}");
    }
    let all: BTreeSet<u8> = (0..=u8::MAX).filter(|b| RecordKind::from_byte(*b).is_some()).collect();
    assert_eq!(kinds, all, "the seed corpus misses a record kind");
}

fn mutated(mut bytes: Vec<u8>, mutations: &[Mutation]) -> Vec<u8> {
    for m in mutations {
        if !bytes.is_empty() || matches!(m, Mutation::Extend(_) | Mutation::Insert { .. }) {
            m.apply(&mut bytes);
        }
    }
    bytes
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn fuzz_checks_pass_on_random_bytes(input in proptest::collection::vec(any::<u8>(), 0..600)) {
        checks::check(&input);
    }

    /// What a fuzzer tries first: small changes to the seeds.
    #[test]
    fn fuzz_checks_pass_on_mutated_seeds(
        seed in any::<proptest::sample::Index>(),
        mutations in proptest::collection::vec(arb_mutation(), 0..4),
    ) {
        let seeds = seed_corpus();
        checks::check(&mutated(seeds[seed.index(seeds.len())].1.clone(), &mutations));
    }

    /// Records of every kind under any writer epoch: their value, their payload (which the
    /// checks wrap in an envelope of every kind) and their key-prefixed form, each mutated.
    #[test]
    fn fuzz_checks_pass_on_encoded_records(
        record in arb_record(),
        epoch in any::<u64>(),
        form in 0..3usize,
        mutations in proptest::collection::vec(arb_mutation(), 0..3),
    ) {
        let wire = codec::encode_by(&record, epoch).unwrap();
        let input = match form {
            0 => wire.value.clone(),
            1 => wire.value[HEADER_LEN..].to_vec(),
            _ => [&[u8::try_from(wire.key.len()).unwrap()][..], &wire.key, &wire.value].concat(),
        };
        checks::check(&mutated(input, &mutations));
    }
}
