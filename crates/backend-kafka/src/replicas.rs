//! Where each partition of the topic lives: its leader and replicas, as the cluster's metadata
//! reports them.

use crate::error::{KafkaError, with_operation};
use crate::open::{KafkaLog, blocking};
use actionstate_core::Error as CoreError;
use rdkafka::error::{KafkaError as RdError, RDKafkaErrorCode};
use rdkafka::producer::Producer;
use std::sync::Arc;

impl KafkaLog {
    /// Where each partition of the topic lives now, as the cluster's metadata reports it: its
    /// leader, its replicas and those in sync, by broker id, in partition order. After a
    /// broker died the metadata names it as leader until the controller notices; a
    /// partition without a leader (during an election) has `leader: None`.
    pub async fn partition_replicas(&self) -> Result<Vec<PartitionReplicas>, CoreError> {
        let inner = Arc::clone(&self.inner);
        let result = blocking(move || {
            let topic = &inner.config.topic;
            let md = inner
                .producer
                .client()
                .fetch_metadata(Some(topic), inner.config.request_timeout)
                .map_err(|e| inner.errors.fail("fetching topic metadata", e))?;
            let Some(t) = md.topics().iter().find(|t| t.name() == topic) else {
                return Err(KafkaError::TopicMissing { topic: topic.clone() });
            };
            if let Some(err) = t.error() {
                let code = RDKafkaErrorCode::from(err);
                if matches!(code, RDKafkaErrorCode::UnknownTopicOrPartition | RDKafkaErrorCode::UnknownTopic) {
                    return Err(KafkaError::TopicMissing { topic: topic.clone() });
                }
                return Err(inner.errors.fail("fetching topic metadata", RdError::MetadataFetch(code)));
            }
            let mut out = t
                .partitions()
                .iter()
                .map(|p| {
                    let partition = u32::try_from(p.id())
                        .map_err(|_| KafkaError::Unexpected(format!("partition id {} of {topic}", p.id())))?;
                    Ok(PartitionReplicas {
                        partition,
                        leader: (p.leader() >= 0).then_some(p.leader()),
                        replicas: p.replicas().to_vec(),
                        in_sync: p.isr().to_vec(),
                    })
                })
                .collect::<Result<Vec<_>, KafkaError>>()?;
            out.sort_by_key(|p| p.partition);
            Ok(out)
        })
        .await;
        result.and_then(|r| r).map_err(|e| with_operation(e, "partition_replicas"))
    }
}

/// One partition's replicas, as [`KafkaLog::partition_replicas`] reports them (broker ids).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionReplicas {
    /// The partition.
    pub partition: u32,
    /// The broker leading it, if one does.
    pub leader: Option<i32>,
    /// The brokers holding a replica.
    pub replicas: Vec<i32>,
    /// The replicas in sync with the leader (the ISR), the leader's among them.
    pub in_sync: Vec<i32>,
}
