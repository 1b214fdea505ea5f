//! The three maps of the index, wrapped so that no operation can scan more than it touches.
//!
//! The wrappers expose point access, range access over one key's rounds and draining, but no
//! whole-map iteration except [`KeyMap::scan`], which exists for dumps and verification. With
//! the `scan-guard` feature (tests only), `scan` panics unless the caller opened an
//! [`allow_scans`] scope, and every entry any wrapper yields is counted in a thread-local
//! counter ([`visits`]), so tests can assert that an operation visited no more entries than it
//! removed.

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::ops::RangeBounds;

#[cfg(feature = "scan-guard")]
mod guard {
    use std::cell::Cell;
    thread_local! {
        pub(super) static VISITS: Cell<u64> = const { Cell::new(0) };
        pub(super) static ALLOW: Cell<u32> = const { Cell::new(0) };
    }
}

/// Counts `n` visited entries (no-op without the `scan-guard` feature).
#[inline]
pub(crate) fn visit(_n: usize) {
    #[cfg(feature = "scan-guard")]
    guard::VISITS.with(|v| v.set(v.get() + _n as u64));
}

/// Entries visited by index operations on this thread so far (always 0 without `scan-guard`).
pub fn visits() -> u64 {
    #[cfg(feature = "scan-guard")]
    {
        guard::VISITS.with(std::cell::Cell::get)
    }
    #[cfg(not(feature = "scan-guard"))]
    {
        0
    }
}

/// A scope in which whole-map scans are allowed (verification and dumps).
#[derive(Debug)]
pub struct ScanScope(());

impl Drop for ScanScope {
    fn drop(&mut self) {
        #[cfg(feature = "scan-guard")]
        guard::ALLOW.with(|a| a.set(a.get().saturating_sub(1)));
    }
}

/// Allows whole-map scans until the returned scope is dropped.
pub fn allow_scans() -> ScanScope {
    #[cfg(feature = "scan-guard")]
    guard::ALLOW.with(|a| a.set(a.get() + 1));
    ScanScope(())
}

pub(crate) fn check_scan(_what: &str, _len: usize) {
    #[cfg(feature = "scan-guard")]
    if guard::ALLOW.with(std::cell::Cell::get) == 0 {
        panic!("whole-map scan of {_what} ({_len} entries) outside an allow_scans scope");
    }
}

/// A top-level hash map (keys, partitions): point access only; whole iteration goes through
/// the guarded `scan`.
#[derive(Debug, Clone)]
pub(crate) struct TopMap<K, V>(HashMap<K, V, BuildHasherDefault<DigestHasher>>);

impl<K: Eq + Hash, V> Default for TopMap<K, V> {
    fn default() -> Self {
        TopMap(HashMap::default())
    }
}

/// A hasher for keys that are already uniform digests (key ids) or small integers
/// (partitions): it folds the bytes it is given instead of running SipHash over them, which
/// would cost more than the rest of a lookup.
#[derive(Default, Clone, Copy, Debug)]
pub(crate) struct DigestHasher(u64);

impl Hasher for DigestHasher {
    fn finish(&self) -> u64 {
        // A final multiply spreads small integer keys (partitions) over the high bits that
        // hashbrown uses for its control bytes.
        self.0.wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8).take(2) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.0 = self.0.rotate_left(23) ^ u64::from_le_bytes(word);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.0 = self.0.rotate_left(23) ^ u64::from(n);
    }
    fn write_usize(&mut self, n: usize) {
        self.0 = self.0.rotate_left(23) ^ n as u64;
    }
}

impl<K: Eq + Hash, V> TopMap<K, V> {
    pub(crate) fn get(&self, k: &K) -> Option<&V> {
        self.0.get(k)
    }
    pub(crate) fn get_mut(&mut self, k: &K) -> Option<&mut V> {
        self.0.get_mut(k)
    }
    pub(crate) fn remove(&mut self, k: &K) -> Option<V> {
        self.0.remove(k)
    }
    pub(crate) fn entry(&mut self, k: K) -> std::collections::hash_map::Entry<'_, K, V> {
        self.0.entry(k)
    }
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
    /// Takes every entry out of this map; visits exactly what it moves.
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = (K, V)> + '_ {
        visit(self.0.len());
        self.0.drain()
    }
    /// Whole-map iteration: only for dumps and verification (guarded under `scan-guard`).
    pub(crate) fn scan(&self, what: &str) -> impl Iterator<Item = (&K, &V)> {
        check_scan(what, self.0.len());
        self.0.iter()
    }
}

/// An ordered map of one key's rounds: point access and range access.
#[derive(Debug, Clone)]
pub(crate) struct RoundMap<V>(BTreeMap<u64, V>);

impl<V> Default for RoundMap<V> {
    fn default() -> Self {
        RoundMap(BTreeMap::new())
    }
}

impl<V> RoundMap<V> {
    pub(crate) fn get(&self, seq: u64) -> Option<&V> {
        self.0.get(&seq)
    }
    pub(crate) fn get_mut(&mut self, seq: u64) -> Option<&mut V> {
        self.0.get_mut(&seq)
    }
    pub(crate) fn entry(&mut self, seq: u64) -> std::collections::btree_map::Entry<'_, u64, V> {
        self.0.entry(seq)
    }
    pub(crate) fn remove(&mut self, seq: u64) -> Option<V> {
        self.0.remove(&seq)
    }
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// The highest sequence number, if any: `O(log R)`.
    pub(crate) fn last_seq(&self) -> Option<u64> {
        self.0.last_key_value().map(|(s, _)| *s)
    }
    /// The sequence numbers in `range`, in order; visits exactly what it yields.
    pub(crate) fn seqs_in(&self, range: impl RangeBounds<u64>) -> Vec<u64> {
        let seqs: Vec<u64> = self.0.range(range).map(|(s, _)| *s).collect();
        visit(seqs.len());
        seqs
    }
    /// Iterates the rounds of this key in order (one key's history, never the whole index).
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&u64, &V)> {
        visit(self.0.len());
        self.0.iter()
    }
}
