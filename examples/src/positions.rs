//! The input position a checkpoint of the Kafka service carries in its metadata: how many
//! inputs it has processed, and per partition of the input topic the offset of the next input.
//! Restoring the checkpoint resumes the input there, so the checkpoint is the only record of the
//! position: nothing is committed to a consumer group that could disagree with the state.

use crate::error::Error;
use actionstate_core::MAX_CHECKPOINT_METADATA;
use std::collections::BTreeMap;

/// Inputs processed so far and the next offset of each partition that had one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Positions {
    inputs: u64,
    next: BTreeMap<i32, i64>,
}

impl Positions {
    /// Inputs processed so far.
    pub fn inputs(&self) -> u64 {
        self.inputs
    }

    /// The offset to resume `partition` at; `None` for a partition that had no input yet
    /// (it starts at its beginning).
    pub fn next(&self, partition: i32) -> Option<i64> {
        self.next.get(&partition).copied()
    }

    /// Whether the input at `offset` of `partition` lies before the position, so that a
    /// restore of these positions does not replay it.
    pub fn covers(&self, partition: i32, offset: i64) -> bool {
        self.next(partition).is_some_and(|next| offset < next)
    }

    /// Counts the input at `offset` of `partition` as processed.
    pub fn advance(&mut self, partition: i32, offset: i64) {
        self.inputs += 1;
        self.next.insert(partition, offset + 1);
    }

    /// The metadata bytes: `inputs=N` and one `PARTITION:OFFSET` per partition, separated by
    /// spaces; at most [`MAX_CHECKPOINT_METADATA`] bytes (else [`Error::PositionsTooLarge`]),
    /// which holds some two thousand partitions.
    pub fn encode(&self) -> Result<Vec<u8>, Error> {
        let mut text = format!("inputs={}", self.inputs);
        for (partition, offset) in &self.next {
            text.push_str(&format!(" {partition}:{offset}"));
        }
        if text.len() > MAX_CHECKPOINT_METADATA {
            let (partitions, len) = (self.next.len(), text.len());
            return Err(Error::PositionsTooLarge { partitions, len, max: MAX_CHECKPOINT_METADATA });
        }
        Ok(text.into_bytes())
    }

    /// The positions [`encode`](Self::encode) wrote.
    pub fn decode(bytes: &[u8]) -> Result<Positions, Error> {
        let bad = |what: &str| Error::BadPositions(format!("{what} in {:?}", String::from_utf8_lossy(bytes)));
        let text = std::str::from_utf8(bytes).map_err(|_| bad("not UTF-8"))?;
        let mut words = text.split(' ');
        let inputs = words.next().and_then(|w| w.strip_prefix("inputs=")).ok_or_else(|| bad("no input count"))?;
        let inputs = inputs.parse().map_err(|_| bad("a bad input count"))?;
        let mut next = BTreeMap::new();
        for word in words {
            let (partition, offset) = word.split_once(':').ok_or_else(|| bad("a position without `:`"))?;
            let partition = partition.parse().map_err(|_| bad("a bad partition"))?;
            let offset: i64 = offset.parse().map_err(|_| bad("a bad offset"))?;
            if offset < 0 || next.insert(partition, offset).is_some() {
                return Err(bad("a negative offset or a partition twice"));
            }
        }
        Ok(Positions { inputs, next })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn positions_read_back_as_written() {
        let mut p = Positions::default();
        assert_eq!(Positions::decode(&p.encode().unwrap()).unwrap(), p);
        p.advance(3, 41);
        p.advance(0, 7);
        p.advance(3, 42);
        assert_eq!(p.encode().unwrap(), b"inputs=3 0:8 3:43");
        assert_eq!(Positions::decode(&p.encode().unwrap()).unwrap(), p);
        assert!(p.covers(3, 42) && !p.covers(3, 43) && !p.covers(1, 0));
    }

    #[test]
    fn other_metadata_is_refused() {
        for bad in [&b""[..], b"inputs=x", b"inputs=1 0", b"inputs=1 0:-1", b"inputs=1 0:1 0:2", b"\xff"] {
            assert!(matches!(Positions::decode(bad), Err(Error::BadPositions(_))), "{bad:?}");
        }
    }

    #[test]
    fn positions_beyond_a_checkpoints_metadata_are_refused() {
        let mut p = Positions::default();
        for partition in 0..10_000 {
            p.advance(partition, 1_000_000);
        }
        assert!(matches!(p.encode(), Err(Error::PositionsTooLarge { partitions: 10_000, .. })));
    }
}
