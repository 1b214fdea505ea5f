//! Length-prefixed primitives of the canonical (hashed) encodings.
//!
//! Everything hashed goes through these helpers so that no two distinct inputs share bytes:
//! strings and byte strings carry a u64 little-endian length, never a delimiter.

pub(crate) fn write_len(h: &mut blake3::Hasher, len: usize) {
    // usize -> u64 is lossless on every supported platform; the bytes are fixed-width LE so
    // the encoding does not depend on the platform's pointer width.
    h.update(&(len as u64).to_le_bytes());
}

pub(crate) fn write_bytes(h: &mut blake3::Hasher, bytes: &[u8]) {
    write_len(h, bytes.len());
    h.update(bytes);
}

pub(crate) fn write_str(h: &mut blake3::Hasher, s: &str) {
    write_bytes(h, s.as_bytes());
}
