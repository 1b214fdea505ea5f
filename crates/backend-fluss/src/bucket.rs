//! Which bucket the Fluss client puts a row in, computed on our side.
//!
//! fluss-rs 1.0.0 offers no way to append to a chosen bucket: its append writer encodes the
//! row's bucket key and hashes it, and keeps that function private. So that an append can
//! report its bucket, and so that a key lands in the partition
//! [`KeyId::partition`](actionstate_core::KeyId::partition) names (as on every other backend),
//! this module reimplements the client's bucket function for a log table without a data-lake
//! format, and chooses the bucket-key bytes of each key so that the client's function yields
//! that partition.
//!
//! ## The client's bucket function (no data-lake format)
//!
//! 1. The bucket-key columns are encoded in the compacted key format. For the one `BYTES`
//!    column `key_id` that is the value's length as an unsigned LEB128 varint, followed by the
//!    bytes.
//! 2. The encoding is hashed with the 32-bit MurmurHash3 mixing steps, seed 42, where the
//!    1–3 tail bytes are each mixed in as a block of their own (unlike standard MurmurHash3,
//!    which packs them into one block), then finalized with the length.
//! 3. That hash is hashed again as one 4-byte block with seed 0 and finalized; its absolute
//!    value (`i32::MIN` becomes 0) modulo the bucket count is the bucket.
//!
//! `tests/conformance.rs` (`bucket_function_matches_the_cluster`) proves this against a real
//! cluster: it appends rows for many keys and scans every bucket for the keys it holds.
//!
//! ## The bucket key of a business key
//!
//! The `key_id` column holds the 32 bytes of the key id followed by a 4-byte little-endian
//! placement salt: the smallest salt for which the function above yields
//! `KeyId::partition(buckets)`. The salt depends only on the key id and the bucket count, so
//! every record of one key carries the same column value and lands in one bucket. Finding it
//! takes `buckets` hash evaluations on average.

use actionstate_core::KeyId;

const C1: u32 = 0xcc9e_2d51;
const C2: u32 = 0x1b87_3593;
const SEED: u32 = 42;

/// Length of the `key_id` column value: the key id and a 4-byte salt.
pub const BUCKET_KEY_LEN: usize = KeyId::LEN + 4;

/// The most salts tried before giving up (unreachable for any realistic bucket count: with
/// 65,536 buckets the chance that 2^24 salts all miss is below e^-256).
const MAX_SALT: u32 = 1 << 24;

fn mix_block(k: u32) -> u32 {
    k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2)
}

fn mix_state(h: u32, k: u32) -> u32 {
    (h ^ k).rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64)
}

fn finalize(mut h: u32, len: u32) -> u32 {
    h ^= len;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// The hash of an encoded bucket key (step 2).
fn hash_bytes(data: &[u8]) -> u32 {
    let mut chunks = data.chunks_exact(4);
    let mut h = SEED;
    for c in &mut chunks {
        h = mix_state(h, mix_block(u32::from_le_bytes([c[0], c[1], c[2], c[3]])));
    }
    for &b in chunks.remainder() {
        h = mix_state(h, mix_block(u32::from(b)));
    }
    // Bucket keys are far shorter than 4 GiB.
    finalize(h, u32::try_from(data.len()).unwrap_or(u32::MAX))
}

/// The non-negative re-hash of a 32-bit hash (step 3).
fn hash_int(x: u32) -> u32 {
    let h = finalize(mix_state(0, mix_block(x)), 4);
    // Reinterpret as i32 and take the absolute value, with i32::MIN mapped to 0.
    let signed = i32::from_ne_bytes(h.to_ne_bytes());
    signed.checked_abs().map_or(0, i32::unsigned_abs)
}

/// The bucket the client chooses for an already encoded bucket key among `buckets` buckets.
pub fn bucket_of_encoded(encoded: &[u8], buckets: u32) -> u32 {
    hash_int(hash_bytes(encoded)) % buckets.max(1)
}

/// Appends `value` to `out` in the compacted key format of a `BYTES` column.
fn encode_bytes(value: &[u8], out: &mut Vec<u8>) {
    let mut len = u32::try_from(value.len()).unwrap_or(u32::MAX);
    while len >= 0x80 {
        out.push((len as u8 & 0x7f) | 0x80);
        len >>= 7;
    }
    out.push(len as u8);
    out.extend_from_slice(value);
}

/// The bucket the client chooses for a row whose one bucket-key column (`BYTES`) holds
/// `column`.
pub fn bucket_of_column(column: &[u8], buckets: u32) -> u32 {
    let mut encoded = Vec::with_capacity(column.len() + 5);
    encode_bytes(column, &mut encoded);
    bucket_of_encoded(&encoded, buckets)
}

/// The `key_id` column value for `key` in a table of `buckets` buckets: the key id and the
/// smallest salt that makes the client choose bucket `key.partition(buckets)`. `None` only if
/// no salt below 2^24 does.
pub fn bucket_key(key: &KeyId, buckets: u32) -> Option<[u8; BUCKET_KEY_LEN]> {
    let target = key.partition(buckets);
    // Encoded: varint length (one byte, 36 < 128), key id, salt.
    let mut encoded = [0u8; BUCKET_KEY_LEN + 1];
    encoded[0] = BUCKET_KEY_LEN as u8;
    encoded[1..=KeyId::LEN].copy_from_slice(key.as_bytes());
    for salt in 0..MAX_SALT {
        encoded[KeyId::LEN + 1..].copy_from_slice(&salt.to_le_bytes());
        if bucket_of_encoded(&encoded, buckets) == target {
            let mut column = [0u8; BUCKET_KEY_LEN];
            column.copy_from_slice(&encoded[1..]);
            return Some(column);
        }
    }
    None
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    /// Bucket assignments of encoded keys published with the client's own tests.
    #[test]
    fn known_assignments() {
        assert_eq!(bucket_of_encoded(&[0, 10], 7), 1);
        assert_eq!(bucket_of_encoded(&[0, 10, 10, 10], 12), 0);
        assert_eq!(bucket_of_encoded(b"2bb87d68-baf9-4e64-90f9-f80910419fa6", 16), 6);
        assert_eq!(bucket_of_encoded(b"The quick brown fox jumps over the lazy dog", 8), 6);
    }

    #[test]
    fn varint_lengths() {
        let mut out = Vec::new();
        encode_bytes(&[7; 3], &mut out);
        assert_eq!(out, [3, 7, 7, 7]);
        out.clear();
        encode_bytes(&[0; 300], &mut out);
        assert_eq!(&out[..2], &[0xac, 0x02]);
        assert_eq!(out.len(), 302);
    }

    #[test]
    fn bucket_keys_land_in_the_key_partition() {
        for buckets in [1u32, 2, 3, 4, 8, 16, 100] {
            for i in 0..200u32 {
                let key = KeyId::of(format!("key-{i}").as_bytes());
                let column = bucket_key(&key, buckets).unwrap();
                assert_eq!(&column[..KeyId::LEN], key.as_bytes());
                assert_eq!(bucket_of_column(&column, buckets), key.partition(buckets), "key {i}, {buckets} buckets");
            }
        }
    }
}
