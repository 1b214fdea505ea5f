//! Per-key write locks: the writes of one business key are serialized (so its invalidation
//! records land before its next write, and its index updates apply in log order), while
//! writes of different keys never wait for each other.
//!
//! A fixed set of lock stripes would be simpler, but keys that share a stripe wait behind each
//! other's appends: with 64 keys on 256 stripes about eight pairs collide, and every put of
//! such a key waits out a neighbour's broker round trip.

use actionstate_core::KeyId;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

type KeyMutex = Arc<tokio::sync::Mutex<()>>;

/// The locks of the keys being written now; a key's entry lives while someone holds or awaits
/// its lock.
#[derive(Debug, Default)]
pub(crate) struct KeyLocks {
    map: Mutex<HashMap<KeyId, KeyMutex>>,
}

/// Holds the write lock of one key until dropped.
#[derive(Debug)]
pub(crate) struct KeyGuard<'a> {
    // Fields drop in order: the lock is released before the entry is cleaned up.
    _guard: tokio::sync::OwnedMutexGuard<()>,
    _entry: Entry<'a>,
}

/// A reference to a key's lock that removes the key's entry, when it is the last one, on drop
/// — also when the future waiting for the lock is dropped before it got it.
#[derive(Debug)]
struct Entry<'a> {
    locks: &'a KeyLocks,
    key: KeyId,
    lock: Option<KeyMutex>,
}

impl Drop for Entry<'_> {
    fn drop(&mut self) {
        drop(self.lock.take());
        let mut map = self.locks.map.lock();
        // Every holder and waiter owns a clone, and clones are only made under the map lock:
        // a count of one means nobody else holds or awaits this key's lock.
        if map.get(&self.key).is_some_and(|m| Arc::strong_count(m) == 1) {
            map.remove(&self.key);
        }
    }
}

impl KeyLocks {
    /// Waits for the write lock of `key`.
    pub(crate) async fn lock(&self, key: KeyId) -> KeyGuard<'_> {
        let lock = Arc::clone(self.map.lock().entry(key).or_default());
        let entry = Entry { locks: self, key, lock: Some(Arc::clone(&lock)) };
        let guard = lock.lock_owned().await;
        KeyGuard { _guard: guard, _entry: entry }
    }

    /// Keys whose lock is held or awaited.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.map.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn other_keys_do_not_wait_and_the_same_key_does() {
        let locks = KeyLocks::default();
        let a = locks.lock(KeyId::of(b"a")).await;
        // Another key: immediately.
        let b = tokio::time::timeout(Duration::from_secs(1), locks.lock(KeyId::of(b"b"))).await;
        assert!(b.is_ok(), "a lock of another key waited");
        // The same key: not while `a` is held.
        let again = tokio::time::timeout(Duration::from_millis(50), locks.lock(KeyId::of(b"a"))).await;
        assert!(again.is_err(), "the same key was locked twice");
        drop(a);
        let again = tokio::time::timeout(Duration::from_secs(1), locks.lock(KeyId::of(b"a"))).await;
        assert!(again.is_ok(), "the released key could not be locked");
    }

    #[tokio::test]
    async fn entries_vanish_when_released_or_abandoned() {
        let locks = KeyLocks::default();
        let held = locks.lock(KeyId::of(b"k")).await;
        // A waiter that gives up (its future is dropped) leaves nothing behind.
        let gave_up = tokio::time::timeout(Duration::from_millis(20), locks.lock(KeyId::of(b"k"))).await;
        assert!(gave_up.is_err());
        assert_eq!(locks.len(), 1);
        drop(held);
        assert_eq!(locks.len(), 0);
        for n in 0..100u8 {
            drop(locks.lock(KeyId::of(&[n])).await);
        }
        assert_eq!(locks.len(), 0);
    }
}
