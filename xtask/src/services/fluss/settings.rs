//! What a cluster hands to tests and benchmarks: [`FlussEnv`], the contents of its env file
//! (`target/services/fluss.env`, or `fluss3.env`).

use super::config::{Layout, Ports, REMOTE_LOG_TASK_INTERVAL_SECS, TABLET_SEGMENT_MIB};
use crate::services::env::{self, Client};
use anyhow::{Context, Result};

/// How tests and benchmarks reach a cluster; the contents of `target/services/fluss.env` (or
/// `fluss3.env`, the same keys under the prefix `FLUSS3` and a pid per tablet server).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FlussEnv {
    layout: Layout,
    /// The coordinator's plaintext and SASL/PLAIN listeners, and the user.
    pub(crate) client: Client,
    /// `host:port` of ZooKeeper.
    pub(crate) zookeeper: String,
    pub(crate) zookeeper_pid: u32,
    pub(crate) coordinator_pid: u32,
    /// By tablet server id.
    pub(crate) tablet_pids: Vec<u32>,
    /// The tablet servers' `log.segment.file-size`, in bytes.
    pub(crate) log_segment_bytes: u64,
    /// The tablet servers' `remote.log.task-interval-duration`, in milliseconds.
    pub(crate) remote_log_task_interval_ms: u64,
}

impl FlussEnv {
    /// `pids` in [`Paths::roles`](super::config::Paths::roles) order: ZooKeeper, the
    /// coordinator, the tablet servers.
    pub(super) fn new(layout: Layout, ports: &Ports, pids: &[u32]) -> Self {
        let [zookeeper_pid, coordinator_pid, tablets @ ..] = pids else { panic!("pids of {pids:?}") };
        Self {
            layout,
            client: Client::local(ports.coordinator.plain, ports.coordinator.sasl),
            zookeeper: format!("127.0.0.1:{}", ports.zookeeper),
            zookeeper_pid: *zookeeper_pid,
            coordinator_pid: *coordinator_pid,
            tablet_pids: tablets.to_vec(),
            log_segment_bytes: TABLET_SEGMENT_MIB << 20,
            remote_log_task_interval_ms: REMOTE_LOG_TASK_INTERVAL_SECS * 1000,
        }
    }

    /// The settings as environment variables, in the order of the env file.
    pub(crate) fn vars(&self) -> Vec<(String, String)> {
        let p = self.layout.prefix;
        let mut vars = self.client.vars(p);
        vars.push((format!("{p}_ZOOKEEPER"), self.zookeeper.clone()));
        vars.push((format!("{p}_ZOOKEEPER_PID"), self.zookeeper_pid.to_string()));
        vars.push((format!("{p}_COORDINATOR_PID"), self.coordinator_pid.to_string()));
        for (id, pid) in self.tablet_pids.iter().enumerate() {
            vars.push((self.layout.tablet_pid_var(id), pid.to_string()));
        }
        vars.push((format!("{p}_LOG_SEGMENT_BYTES"), self.log_segment_bytes.to_string()));
        vars.push((format!("{p}_REMOTE_LOG_TASK_INTERVAL_MS"), self.remote_log_task_interval_ms.to_string()));
        vars
    }

    pub(crate) fn render(&self) -> String {
        env::render(&self.vars())
    }

    pub(super) fn parse(layout: Layout, text: &str) -> Result<Self> {
        let get = |key: &str| env::value(text, key);
        let pid = |key: &str| -> Result<u32> { get(key)?.parse().with_context(|| format!("{key} is not a pid")) };
        let number = |key: &str| -> Result<u64> { get(key)?.parse().with_context(|| format!("{key} is not a number")) };
        let p = layout.prefix;
        Ok(Self {
            layout,
            client: Client::parse(text, p)?,
            zookeeper: get(&format!("{p}_ZOOKEEPER"))?,
            zookeeper_pid: pid(&format!("{p}_ZOOKEEPER_PID"))?,
            coordinator_pid: pid(&format!("{p}_COORDINATOR_PID"))?,
            tablet_pids: (0..layout.tablets).map(|id| pid(&layout.tablet_pid_var(id))).collect::<Result<_>>()?,
            log_segment_bytes: number(&format!("{p}_LOG_SEGMENT_BYTES"))?,
            remote_log_task_interval_ms: number(&format!("{p}_REMOTE_LOG_TASK_INTERVAL_MS"))?,
        })
    }

    /// Every pid, in [`Paths::roles`](super::config::Paths::roles) order.
    pub(super) fn pids(&self) -> Vec<u32> {
        [self.zookeeper_pid, self.coordinator_pid].into_iter().chain(self.tablet_pids.iter().copied()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::super::config::{Listeners, SINGLE};
    use super::*;

    #[test]
    fn env_file_round_trips_and_has_the_documented_keys() {
        let ports = Ports {
            zookeeper: 40000,
            coordinator: Listeners { plain: 40001, sasl: 40002 },
            tablets: vec![Listeners { plain: 40003, sasl: 40004 }],
        };
        let env = FlussEnv::new(SINGLE, &ports, &[7, 8, 9]);
        let text = env.render();
        assert_eq!(
            text,
            "FLUSS_BOOTSTRAP=127.0.0.1:40001\nFLUSS_SASL_BOOTSTRAP=127.0.0.1:40002\n\
             FLUSS_SASL_USERNAME=actionstate\nFLUSS_SASL_PASSWORD=actionstate-secret\n\
             FLUSS_ZOOKEEPER=127.0.0.1:40000\nFLUSS_ZOOKEEPER_PID=7\nFLUSS_COORDINATOR_PID=8\nFLUSS_TABLET_PID=9\n\
             FLUSS_LOG_SEGMENT_BYTES=4194304\nFLUSS_REMOTE_LOG_TASK_INTERVAL_MS=1000\n"
        );
        assert_eq!(FlussEnv::parse(SINGLE, &text).expect("parse"), env);
        assert_eq!(env.pids(), [7, 8, 9]);
        assert!(FlussEnv::parse(SINGLE, "FLUSS_BOOTSTRAP=127.0.0.1:1\n").is_err());
    }
}
