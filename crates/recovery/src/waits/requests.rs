//! Resolves asked for by other processes (docs/design.md, section 5.7): a process that does
//! not own a wait's key appends a [`ResolveRequest`] to the key's partition
//! ([`ActionStateStore::request_resolve`]); the owner reads it when it polls
//! ([`ActionStateStore::poll_resolutions`]) or restores, and settles the wait with it if the
//! wait is still pending, so the owner alone writes the wait's state and the first outcome it
//! records is the only one.
//!
//! A poll reads only the partitions that hold a pending wait, and each from the oldest
//! pending wait's record on (a request for a wait lies after the wait's record: the token
//! exists only once the wait is durable), or from where the last poll stopped if that is
//! later. A partition without pending waits is skipped: a request found there could only
//! name a wait that has ended, whose first outcome stands. So a poll costs one end-offsets
//! request while nothing waits, and what it reads is bounded by the live waits.

use crate::checkpoint::form::CheckpointForm;
use crate::error::{Result, StoreError};
use crate::store::ActionStateStore;
use crate::waits::registry::request_of;
use actionstate_core::{
    LogRecord, Position, RESOLVE_KEY_LAYOUT, RangeRead, ReadRecord, ResolveRequest, StateLog, WaitToken, codec,
};
use std::collections::BTreeMap;

/// The requests among `records` of `partition` for the keys `owned` accepts, decoded in
/// offset order; every other record is told apart by its log key and skipped undecoded.
fn requests_in(
    partition: u32,
    records: Vec<ReadRecord>,
    owned: impl Fn(&actionstate_core::KeyId) -> bool,
) -> Result<Vec<ResolveRequest>> {
    let mut out = Vec::new();
    for r in records.iter().filter(|r| r.key.first() == Some(&RESOLVE_KEY_LAYOUT)) {
        out.extend(request_of(partition, r)?.filter(|request| owned(&request.key)));
    }
    Ok(out)
}

impl<L: StateLog, F: CheckpointForm> ActionStateStore<L, F> {
    /// Asks the owner of the wait `token` names to resolve it with `outcome` (a reply or a
    /// rejection of at most [`MAX_WAIT_REPLY`](actionstate_core::MAX_WAIT_REPLY) bytes), from
    /// a process that does not own the key: the request is appended to the key's partition,
    /// durable when this returns, and where it landed is returned. The owner records the
    /// outcome at its next [`poll_resolutions`](Self::poll_resolutions), or when it restores,
    /// if the wait is still pending then; otherwise the first outcome stands and the request
    /// changes nothing. Read the outcome back from the log to learn which (`actionstate
    /// resolve` does).
    ///
    /// This checks the request, not the wait: a process that wants a typed error for an
    /// unknown or ended wait first looks it up ([`wait_outcome`](Self::wait_outcome) on a
    /// store rebuilt over the log), as `actionstate resolve` does. A request is not a state
    /// write: no fence refuses it, and it needs no ownership.
    pub async fn request_resolve(&self, token: &WaitToken, outcome: actionstate_core::WaitOutcome) -> Result<Position> {
        let record = LogRecord::Resolve(ResolveRequest::new(token, outcome));
        let wire = codec::encode(&record)?;
        Ok(self.log.append(wire).await?)
    }

    /// Reads the resolve requests other processes appended since the last poll, in the
    /// partitions that hold a pending wait of this store's, and settles each pending wait a
    /// request names with the request's outcome. Returns how many waits it settled. A
    /// runtime calls it now and then, as it calls [`expire_waits`](Self::expire_waits): an
    /// outside resolve is recorded within one interval of its polls (plus the read), and a
    /// poll while nothing waits costs one end-offsets request. A restore settles the requests
    /// its rebuild read before it returns.
    pub async fn poll_resolutions(&self) -> Result<usize> {
        let _one = self.requests_poll.lock().await;
        let mut settled = self.settle_found().await?;
        // The end offsets first: a wait pending after them is seen below, and a request for a
        // wait that ends before it is looked at names a wait whose first outcome stands.
        let end = self.log.end_offsets().await?;
        let ranges = self.request_ranges(&end);
        for (partition, from) in ranges {
            let to = end.get(partition as usize).copied().unwrap_or(from);
            let mut range = RangeRead::new(partition, from, to, self.config.read_batch.max(1));
            let mut found = Vec::new();
            while let Some(records) = range.next_batch(&*self.log).await? {
                found.extend(requests_in(partition, records, |k| self.check_owned(k).is_ok())?);
            }
            self.shared.lock().requests.found.extend(found);
            self.shared.lock().requests.read_to[partition as usize] = to;
            settled += self.settle_found().await?;
        }
        Ok(settled)
    }

    /// Per partition to read, where to start; every other partition is marked read to `end`.
    fn request_ranges(&self, end: &[u64]) -> Vec<(u32, u64)> {
        let mut sh = self.shared.lock();
        let mut oldest: BTreeMap<u32, u64> = BTreeMap::new();
        let pending: Vec<_> = sh.waits.all().filter(|(_, w)| w.outcome.is_none()).map(|(_, w)| w.state).collect();
        for state in pending {
            if let Some(at) = sh.index.position(&state) {
                let o = oldest.entry(at.partition).or_insert(at.offset);
                *o = (*o).min(at.offset);
            }
        }
        let read_to = &mut sh.requests.read_to;
        read_to.resize(end.len(), 0);
        let mut ranges = Vec::new();
        for (partition, (read, &end)) in (0u32..).zip(read_to.iter_mut().zip(end)) {
            match oldest.get(&partition) {
                Some(&from) if from.max(*read) < end => ranges.push((partition, from.max(*read))),
                _ => *read = (*read).max(end),
            }
        }
        ranges
    }

    /// Settles the requests found and not settled yet; returns how many waits they settled.
    pub(crate) async fn settle_found(&self) -> Result<usize> {
        let mut found = std::mem::take(&mut self.shared.lock().requests.found).into_iter();
        let mut settled = 0;
        while let Some(request) = found.next() {
            let token = request.token();
            match self.settle(&token, request.outcome.clone()).await {
                Ok(done) => settled += usize::from(done.recorded),
                // The wait ended, or an invalidation voided it: the request changes nothing.
                Err(StoreError::UnknownWait { .. } | StoreError::NotOwned { .. }) => {
                    tracing::debug!(key = %token.key, "a resolve request names no pending wait");
                }
                Err(e) => {
                    // Not settled: this one and the rest wait for the next poll.
                    let mut sh = self.shared.lock();
                    let later = std::mem::take(&mut sh.requests.found);
                    sh.requests.found = std::iter::once(request).chain(found).chain(later).collect();
                    return Err(e);
                }
            }
        }
        Ok(settled)
    }
}
