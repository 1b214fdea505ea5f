//! The topic id of a topic, through librdkafka's `DescribeTopics` admin call.
//!
//! Kafka gives every topic a 128-bit id that changes when the topic is deleted and created
//! again. rdkafka's safe API does not wrap `DescribeTopics`, the only librdkafka call that
//! reports it, so this module calls the C API rdkafka re-exports (`rdkafka::bindings`). It is
//! the crate's only unsafe code: every pointer it receives is checked for null, and everything
//! it creates is destroyed by a guard, on every path.

use rdkafka::bindings as rd;
use rdkafka::client::{Client, ClientContext};
use std::ffi::{CStr, CString, c_char};
use std::time::Duration;

/// What describing the topic found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum TopicId {
    /// The topic's id.
    Id(u128),
    /// The broker knows no such topic.
    Missing,
}

/// Destroys a librdkafka object when dropped.
struct Guard<T> {
    ptr: *mut T,
    destroy: unsafe extern "C" fn(*mut T),
}

impl<T> Drop for Guard<T> {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            // SAFETY: `ptr` came from the librdkafka constructor matching `destroy`, is not null,
            // and is destroyed exactly once, here.
            unsafe { (self.destroy)(self.ptr) }
        }
    }
}

fn guard<T>(ptr: *mut T, destroy: unsafe extern "C" fn(*mut T)) -> Result<Guard<T>, String> {
    if ptr.is_null() { Err("librdkafka returned no object".to_owned()) } else { Ok(Guard { ptr, destroy }) }
}

/// A C string owned by librdkafka, copied out (empty when null).
fn text(ptr: *const c_char) -> String {
    if ptr.is_null() {
        return String::new();
    }
    // SAFETY: librdkafka returns NUL-terminated strings that live as long as the object they
    // belong to, which the caller holds while this runs.
    unsafe { CStr::from_ptr(ptr) }.to_string_lossy().into_owned()
}

/// Describes `topic` on the cluster `client` talks to and returns its topic id. Blocks up to
/// `timeout`; errors are librdkafka's, as text.
pub(crate) fn describe<C: ClientContext>(
    client: &Client<C>,
    topic: &str,
    timeout: Duration,
) -> Result<TopicId, String> {
    let name = CString::new(topic).map_err(|_| format!("topic name {topic:?} contains a NUL byte"))?;
    let millis = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX).max(1);
    let rk = client.native_ptr();
    let mut names = [name.as_ptr()];
    // SAFETY: `rk` is the live handle of `client`, borrowed for the whole call; `names` holds one
    // valid C string that outlives the collection built from it (librdkafka copies it). Every
    // object created is destroyed by its guard after the last use of anything it owns.
    unsafe {
        let topics = guard(
            rd::rd_kafka_TopicCollection_of_topic_names(names.as_mut_ptr(), names.len()),
            rd::rd_kafka_TopicCollection_destroy,
        )?;
        let options = guard(
            rd::rd_kafka_AdminOptions_new(rk, rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_DESCRIBETOPICS),
            rd::rd_kafka_AdminOptions_destroy,
        )?;
        let mut errstr = [0 as c_char; 256];
        let set = rd::rd_kafka_AdminOptions_set_request_timeout(options.ptr, millis, errstr.as_mut_ptr(), errstr.len());
        if set != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
            return Err(format!("setting the request timeout: {}", text(errstr.as_ptr())));
        }
        let queue = guard(rd::rd_kafka_queue_new(rk), rd::rd_kafka_queue_destroy)?;
        rd::rd_kafka_DescribeTopics(rk, topics.ptr, options.ptr, queue.ptr);
        // The answer, or the request's own timeout error, arrives within the timeout; the
        // margin covers the hand-over to this queue.
        let event = rd::rd_kafka_queue_poll(queue.ptr, millis.saturating_add(1000));
        if event.is_null() {
            return Err(format!("no answer to DescribeTopics within {timeout:?}"));
        }
        let event = Guard { ptr: event, destroy: rd::rd_kafka_event_destroy };
        if rd::rd_kafka_event_error(event.ptr) != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
            return Err(text(rd::rd_kafka_event_error_string(event.ptr)));
        }
        let result = rd::rd_kafka_event_DescribeTopics_result(event.ptr);
        if result.is_null() {
            return Err("DescribeTopics answered with another kind of event".to_owned());
        }
        let mut count = 0usize;
        let descriptions = rd::rd_kafka_DescribeTopics_result_topics(result, &mut count);
        if descriptions.is_null() || count != 1 {
            return Err(format!("DescribeTopics described {count} topics for one asked"));
        }
        let description = *descriptions;
        if description.is_null() {
            return Err("DescribeTopics returned a null description".to_owned());
        }
        let error = rd::rd_kafka_TopicDescription_error(description);
        if !error.is_null() {
            let code = rd::rd_kafka_error_code(error);
            if code == rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART {
                return Ok(TopicId::Missing);
            }
            if code != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
                return Err(text(rd::rd_kafka_error_string(error)));
            }
        }
        let id = rd::rd_kafka_TopicDescription_topic_id(description);
        if id.is_null() {
            return Err("the topic description carries no topic id".to_owned());
        }
        let high = rd::rd_kafka_Uuid_most_significant_bits(id) as u64;
        let low = rd::rd_kafka_Uuid_least_significant_bits(id) as u64;
        Ok(TopicId::Id((u128::from(high) << 64) | u128::from(low)))
    }
}
