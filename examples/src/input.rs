//! An input of the Kafka service as a record of its input topic: the record key is the
//! business key, the value the key's sequence number and a text (`"SEQ TEXT"`). The producer
//! numbers each key's inputs, so a round's `seq` comes with its input and the service keeps no
//! counter of its own that a crash could lose.

use crate::error::Error;
use actionstate_core::{Attributes, Event, Value};
use actionstate_recovery::Round;

/// One input: the `seq`-th of business key `key`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Input {
    /// The business key (the record key).
    pub key: String,
    /// The key's sequence number, from 0.
    pub seq: u64,
    /// What the input says.
    pub text: String,
}

impl Input {
    /// The record value the producer writes: `"SEQ TEXT"`.
    pub fn value(&self) -> String {
        format!("{} {}", self.seq, self.text)
    }

    /// The input a record of `partition` at `offset` carries; a record without a UTF-8 key, or
    /// whose value does not start with a sequence number, is [`Error::BadInput`].
    pub fn from_record(partition: i32, offset: i64, key: Option<&[u8]>, value: Option<&[u8]>) -> Result<Input, Error> {
        let bad = |detail: &str| Error::BadInput { partition, offset, detail: detail.to_owned() };
        let key = std::str::from_utf8(key.ok_or_else(|| bad("no key"))?).map_err(|_| bad("a key not in UTF-8"))?;
        let value = std::str::from_utf8(value.unwrap_or_default()).map_err(|_| bad("a value not in UTF-8"))?;
        let (seq, text) = value.split_once(' ').unwrap_or((value, ""));
        let seq = seq.parse().map_err(|_| bad("a value that does not start with a sequence number"))?;
        Ok(Input { key: key.to_owned(), seq, text: text.to_owned() })
    }

    /// The event the input is to the store: its key and value, so that the fingerprint a
    /// replay compares covers the whole record.
    pub fn event(&self) -> Event {
        let mut attributes = Attributes::new();
        attributes.insert("key".into(), Value::from(self.key.as_str()));
        attributes.insert("value".into(), Value::from(self.value()));
        Event::new("input", attributes)
    }

    /// The round `event` (this input's [`event`](Self::event)) starts.
    pub fn round(&self, event: &Event) -> Round {
        Round::named(&self.key, self.seq, event)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn an_input_reads_back_from_its_record() {
        let input = Input { key: "key-7".into(), seq: 12, text: "hello there".into() };
        let value = input.value();
        assert_eq!(Input::from_record(0, 5, Some(b"key-7"), Some(value.as_bytes())).unwrap(), input);
        let bare = Input::from_record(0, 5, Some(b"k"), Some(b"3")).unwrap();
        assert_eq!((bare.seq, bare.text.as_str()), (3, ""));
    }

    #[test]
    fn a_record_that_is_no_input_is_an_error() {
        for (key, value) in [(None, &b"1 x"[..]), (Some(&b"\xff"[..]), b"1 x"), (Some(b"k"), b"x 1"), (Some(b"k"), b"")]
        {
            assert!(matches!(
                Input::from_record(2, 9, key, Some(value)),
                Err(Error::BadInput { partition: 2, offset: 9, .. })
            ));
        }
    }

    #[test]
    fn the_round_carries_the_inputs_key_and_seq() {
        let input = Input { key: "key-7".into(), seq: 12, text: "x".into() };
        let event = input.event();
        let round = input.round(&event);
        assert_eq!(
            (round.key, round.seq, round.input),
            (actionstate_core::KeyId::of(b"key-7"), 12, event.fingerprint())
        );
        let other = Input { text: "y".into(), ..input };
        assert_ne!(other.event().fingerprint(), event.fingerprint(), "the fingerprint covers the text");
    }
}
