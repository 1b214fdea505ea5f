//! Where each bucket of the table is led, as the cluster's metadata reports it.

use crate::client::request;
use crate::error::{FlussError, with_operation};
use crate::open::FlussLog;
use actionstate_core::Error as CoreError;
use fluss::metadata::TableBucket;

impl FlussLog {
    /// The tablet server leading each bucket now, by server id, in bucket order, as a fresh
    /// metadata request reports it; `None` for a bucket without a leader (during an election).
    /// Fluss's client reports neither the replicas nor those in sync.
    pub async fn bucket_leaders(&self) -> Result<Vec<Option<i32>>, CoreError> {
        let inner = &self.inner;
        let metadata = inner.connection.get_metadata();
        request(&inner.config, "fetching the table metadata", metadata.update_table_metadata(&inner.path))
            .await
            .map_err(|e| with_operation(e, "bucket_leaders"))?;
        let cluster = metadata.get_cluster();
        let table_id = inner.info.get_table_id();
        (0..self.identity.partitions)
            .map(|b| {
                let bucket = i32::try_from(b)
                    .map_err(|_| with_operation(FlussError::Unexpected(format!("bucket {b}")), "bucket_leaders"))?;
                Ok(cluster.leader_for(&TableBucket::new(table_id, bucket)).map(|node| node.id()))
            })
            .collect()
    }
}
