//! A replicated Fluss cluster for tests: `cargo xtask services up|down|status fluss3` and
//! `cargo xtask services restart-node fluss3 N`.
//!
//! The single cluster's processes with three tablet servers instead of one: one ZooKeeper, one
//! coordinator and tablet servers 0, 1 and 2, each a JVM detached in its own process group, from
//! the same jars (`target/services/fluss/lib/`, resolved by Maven the first time), with the same
//! listeners (plaintext `INTERNAL`, SASL/PLAIN `CLIENT`), segment and remote-log settings as
//! `fluss` (see the [module documentation](super)). Tables are replicated three times
//! (`default.replication.factor: 3` on every server), so a table keeps its data when a tablet
//! server stops, and a test can stop one and check that nothing acknowledged is lost. Each Fluss
//! server has a 384 MiB heap (512 MiB in `fluss`); idle, the coordinator and each tablet server
//! keep about 130-150 MiB resident and ZooKeeper about 80 MiB. The cluster is separate from
//! `fluss` (its own directory, ports, pid and env files), so both can run side by side; `cargo
//! xtask ci` does not start it.
//!
//! # Failover
//!
//! Four settings differ from `fluss`, so that the cluster rides out a killed tablet server
//! about as fast as `kafka3` does a killed node, and acknowledges a write as fast:
//!
//! - `zookeeper.client.session-timeout: 10s` on every server (Fluss asks for 60 s, which
//!   ZooKeeper caps at 40 s): the coordinator sees that a SIGKILLed tablet server is gone, and
//!   moves the leadership of its buckets to an in-sync follower, about 10 s after the kill;
//! - `log.replica.max-lag-time: 10s` (default 30 s): a leader drops a dead follower from the
//!   in-sync replicas after 10 s, and the writes waiting for it (`acks=all`, the client's
//!   default) go on;
//! - `log.replica.min-in-sync-replicas-number: 2` (default 1): an acknowledged write is on two
//!   tablet servers at least, and a bucket takes writes with one of its three replicas down;
//! - `log.replica.fetch.wait-max-time: 20ms` (default 500 ms): how long a leader holds a
//!   follower's fetch that finds nothing new; sequential `acks=all` writes took about that
//!   long (450-500 ms with the default, 20-45 ms with 20 ms).
//!
//! A tablet server started again right after a SIGKILL finds its old registration in ZooKeeper
//! and retries every 3 s (for 60 s at most) until the killed one's session expires: it answers
//! on its listeners at once, but with an empty list of tablet servers, and the coordinator
//! lists it (as the killed one) all the while. So readiness asks each tablet server too, and
//! `restart-node` after a SIGKILL takes about 10 s.
//!
//! - `up fluss3` with nothing running, or with ZooKeeper or the coordinator not running, wipes
//!   `target/services/fluss3/`'s data, picks nine free ports on 127.0.0.1 and starts the
//!   cluster. With ZooKeeper and the coordinator running, it keeps what runs and starts only the
//!   tablet servers that do not, on their data and ports: a test that killed a tablet server
//!   brings it back by running `up fluss3` again. It returns once the checks of the single
//!   cluster pass with every tablet server: ZooKeeper answers, the coordinator answers on both
//!   listeners and its `Metadata` lists tablet servers 0, 1 and 2, and each tablet server answers
//!   `Metadata` on its own plaintext listener listing all three. From nothing, with the jars in
//!   place, that takes 7-10 s on two cores.
//! - `restart-node fluss3 N` stops tablet server N (SIGTERM, SIGKILL after 30 s) if it runs,
//!   starts it again on its data (with any other tablet server that is not running) and waits
//!   the same way; it never wipes, and fails if ZooKeeper or the coordinator does not run.
//! - `down fluss3` stops the tablet servers (side by side), then the coordinator and ZooKeeper,
//!   each only while its recorded pid still runs that process with our configuration (about
//!   5 s); `status fluss3` reports each process, and whether the coordinator and each tablet
//!   server answer.
//!
//! Files, under `<workspace root>/target/services/`:
//!
//! - `fluss3.env` — the addresses, pids and segment settings, written once the cluster answers
//!   (and rewritten by `restart-node`), removed by `down`;
//! - `fluss3/config/` — `zookeeper/zoo.cfg`, `coordinator/server.yaml`,
//!   `tablet-N/server.yaml`, `log4j2.properties`;
//! - `fluss3/data/` — `zookeeper/`, `tablet-N/` (`data.dir`) and `remote/` (`remote.data.dir`,
//!   shared by the three tablet servers);
//! - `fluss3/zookeeper.log`, `fluss3/coordinator.log`, `fluss3/tablet-N.log` — what each prints,
//!   appended to when a process starts again on its data;
//! - `fluss3/zookeeper.pid`, `fluss3/coordinator.pid`, `fluss3/tablet-N.pid`.
//!
//! `fluss3.env` has the keys of `fluss.env` under the prefix `FLUSS3`, with a pid per tablet
//! server in place of `FLUSS_TABLET_PID`:
//!
//! ```text
//! FLUSS3_BOOTSTRAP=127.0.0.1:40123
//! FLUSS3_SASL_BOOTSTRAP=127.0.0.1:40124
//! FLUSS3_SASL_USERNAME=actionstate
//! FLUSS3_SASL_PASSWORD=actionstate-secret
//! FLUSS3_ZOOKEEPER=127.0.0.1:40120
//! FLUSS3_ZOOKEEPER_PID=12345
//! FLUSS3_COORDINATOR_PID=12346
//! FLUSS3_TABLET0_PID=12347
//! FLUSS3_TABLET1_PID=12348
//! FLUSS3_TABLET2_PID=12349
//! FLUSS3_LOG_SEGMENT_BYTES=4194304
//! FLUSS3_REMOTE_LOG_TASK_INTERVAL_MS=1000
//! ```
//!
//! # Stopping and restarting a tablet server from a test
//!
//! Tablet server N runs `java ... org.apache.fluss.server.tablet.TabletServer --configDir
//! <abs>/target/services/fluss3/config/tablet-N` in the directory `target/services/fluss3/`:
//! every path on its command line is absolute, and nothing it needs comes from the environment,
//! so the command line alone starts it again. A test reads `FLUSS3_TABLETN_PID` from
//! `fluss3.env`, takes the process with `actionstate_testkit::services::ServerProcess::of(pid,
//! "org.apache.fluss.server.tablet.TabletServer")` (its `/proc` command line and working
//! directory), kills it, and starts it again with `restart(dir/tablet-N.log, dir/tablet-N.pid,
//! fluss3.env, "FLUSS3_TABLETN_PID")`, `dir` being the process's working directory; or uses a
//! `ServerRole` with `service: "fluss3"`, `prefix: "FLUSS3"`, `pid_var: "FLUSS3_TABLETN_PID"`,
//! `log_file: "tablet-N.log"` and `pid_file: "tablet-N.pid"`. The new pid lands where `down
//! fluss3` and `restart-node` look for it.

use super::config::THREE;
use super::{FlussEnv, Start, down, restart_tablet, start, status};
use anyhow::Result;

/// Starts the cluster, or the tablet servers of it that do not run, waits until it answers with
/// all three tablet servers registered, writes `target/services/fluss3.env` and returns it.
pub(crate) fn up_fluss3() -> Result<FlussEnv> {
    start(THREE, Start::Up)
}

/// Stops tablet server `id` if it runs, starts it again on its data, and waits as
/// [`up_fluss3`] does.
pub(crate) fn restart_node(id: usize) -> Result<FlussEnv> {
    restart_tablet(THREE, id)
}

/// Stops the processes `up_fluss3` started that still run, and removes the pid and env files.
pub(crate) fn down_fluss3() -> Result<()> {
    down(THREE)
}

/// Prints each process of the cluster, and whether the servers answer.
pub(crate) fn status_fluss3() -> Result<()> {
    status(THREE)
}

#[cfg(test)]
mod tests {
    use super::super::config::{Listeners, Paths, Ports, Role, SINGLE, server_yaml};
    use super::*;
    use std::path::{Path, PathBuf};

    fn get(yaml: &str, key: &str) -> String {
        yaml.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix(": ")).unwrap_or_default().to_owned()
    }

    fn sample_ports() -> Ports {
        Ports {
            zookeeper: 40120,
            coordinator: Listeners { plain: 40123, sasl: 40124 },
            tablets: vec![
                Listeners { plain: 40125, sasl: 40126 },
                Listeners { plain: 40127, sasl: 40128 },
                Listeners { plain: 40129, sasl: 40130 },
            ],
        }
    }

    #[test]
    fn env_file_round_trips_and_names_every_tablet_server() {
        let env = FlussEnv::new(THREE, &sample_ports(), &[12345, 12346, 12347, 12348, 12349]);
        let text = env.render();
        assert_eq!(
            text,
            "FLUSS3_BOOTSTRAP=127.0.0.1:40123\nFLUSS3_SASL_BOOTSTRAP=127.0.0.1:40124\n\
             FLUSS3_SASL_USERNAME=actionstate\nFLUSS3_SASL_PASSWORD=actionstate-secret\n\
             FLUSS3_ZOOKEEPER=127.0.0.1:40120\nFLUSS3_ZOOKEEPER_PID=12345\nFLUSS3_COORDINATOR_PID=12346\n\
             FLUSS3_TABLET0_PID=12347\nFLUSS3_TABLET1_PID=12348\nFLUSS3_TABLET2_PID=12349\n\
             FLUSS3_LOG_SEGMENT_BYTES=4194304\nFLUSS3_REMOTE_LOG_TASK_INTERVAL_MS=1000\n"
        );
        assert_eq!(FlussEnv::parse(THREE, &text).expect("parse"), env);
        assert_eq!(env.tablet_pids, [12347, 12348, 12349]);
        let without_tablet2 = text.replace("FLUSS3_TABLET2_PID=12349\n", "");
        assert!(FlussEnv::parse(THREE, &without_tablet2).is_err(), "every tablet server's pid is required");
        assert!(FlussEnv::parse(THREE, &text.replace("FLUSS3_", "FLUSS_")).is_err(), "the prefix is FLUSS3");
    }

    #[test]
    fn env_keys_are_the_single_clusters_under_another_prefix() {
        let single = SINGLE;
        let one = Ports { tablets: sample_ports().tablets[..1].to_vec(), ..sample_ports() };
        let single_keys: Vec<String> = FlussEnv::new(single, &one, &[1, 2, 3])
            .vars()
            .into_iter()
            .map(|(k, _)| k.replacen("FLUSS", "", 1))
            .collect();
        let keys: Vec<String> = FlussEnv::new(THREE, &sample_ports(), &[1, 2, 3, 4, 5])
            .vars()
            .into_iter()
            .map(|(k, _)| k.strip_prefix("FLUSS3").map(str::to_owned).unwrap_or(k))
            .collect();
        let per_tablet = ["_TABLET0_PID", "_TABLET1_PID", "_TABLET2_PID"];
        let shared: Vec<&String> = keys.iter().filter(|k| !per_tablet.contains(&k.as_str())).collect();
        let single_shared: Vec<&String> = single_keys.iter().filter(|k| *k != "_TABLET_PID").collect();
        assert_eq!(shared, single_shared);
        assert!(per_tablet.iter().all(|k| keys.iter().any(|key| key == k)), "{keys:?}");
    }

    #[test]
    fn three_tablet_servers_have_their_own_files_beside_the_single_clusters() {
        let paths = Paths::new(Path::new("/ws"), THREE);
        let single = Paths::new(Path::new("/ws"), SINGLE);
        assert_eq!(paths.files.env, Path::new("/ws/target/services/fluss3.env"));
        assert_eq!(paths.classpath(), single.classpath(), "both clusters run the same jars");
        assert_eq!(
            paths.roles(),
            [Role::ZooKeeper, Role::Coordinator, Role::Tablet(0), Role::Tablet(1), Role::Tablet(2)]
        );
        let mut seen = Vec::new();
        for role in paths.roles() {
            let (pid, log, config) = (paths.pid(role), paths.log(role), paths.config_arg(role).to_path_buf());
            for p in [&pid, &log, &config] {
                assert!(p.starts_with("/ws/target/services/fluss3/"), "{}", p.display());
                assert!(p.is_absolute());
            }
            assert!(!single.roles().iter().any(|r| single.pid(*r) == pid || single.config_arg(*r) == config));
            seen.extend([pid, log, config]);
        }
        for (id, tablet) in paths.tablets.iter().enumerate() {
            assert_eq!(tablet.conf, PathBuf::from(format!("/ws/target/services/fluss3/config/tablet-{id}")));
            assert_eq!(tablet.data, PathBuf::from(format!("/ws/target/services/fluss3/data/tablet-{id}")));
            assert_eq!(
                paths.log(Role::Tablet(id)),
                PathBuf::from(format!("/ws/target/services/fluss3/tablet-{id}.log"))
            );
            assert_eq!(
                paths.pid(Role::Tablet(id)),
                PathBuf::from(format!("/ws/target/services/fluss3/tablet-{id}.pid"))
            );
            assert_eq!(THREE.tablet_pid_var(id), format!("FLUSS3_TABLET{id}_PID"));
            seen.push(tablet.data.clone());
        }
        let all = seen.len();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), all, "every process has its own files");
    }

    #[test]
    fn three_tablet_servers_replicate_three_times_on_their_own_ports_and_data() {
        let paths = Paths::new(Path::new("/ws"), THREE);
        let ports = sample_ports();
        let coordinator = server_yaml(Role::Coordinator, &ports, &paths);
        assert_eq!(get(&coordinator, "default.replication.factor"), "3");
        assert_eq!(get(&coordinator, "bind.listeners"), "INTERNAL://127.0.0.1:40123, CLIENT://127.0.0.1:40124");
        let (mut ids, mut listeners, mut data) = (Vec::new(), Vec::new(), Vec::new());
        for id in 0..3 {
            let yaml = server_yaml(Role::Tablet(id), &ports, &paths);
            assert_eq!(get(&yaml, "default.replication.factor"), "3");
            assert_eq!(get(&yaml, "zookeeper.address"), "127.0.0.1:40120");
            assert_eq!(get(&yaml, "remote.data.dir"), "/ws/target/services/fluss3/data/remote", "shared by all");
            assert_eq!(get(&yaml, "log.segment.file-size"), "4mb");
            assert_eq!(get(&yaml, "remote.log.task-interval-duration"), "1s");
            assert_eq!(get(&yaml, "data.dir"), format!("/ws/target/services/fluss3/data/tablet-{id}"));
            ids.push(get(&yaml, "tablet-server.id"));
            listeners.push(get(&yaml, "bind.listeners"));
            data.push(get(&yaml, "data.dir"));
        }
        for (role, yaml) in
            [(Role::Coordinator, &coordinator), (Role::Tablet(1), &server_yaml(Role::Tablet(1), &ports, &paths))]
        {
            assert_eq!(get(yaml, "zookeeper.client.session-timeout"), "10s", "{role:?}");
        }
        let tablet = server_yaml(Role::Tablet(0), &ports, &paths);
        assert_eq!(get(&tablet, "log.replica.max-lag-time"), "10s");
        assert_eq!(get(&tablet, "log.replica.min-in-sync-replicas-number"), "2");
        assert_eq!(get(&tablet, "log.replica.fetch.wait-max-time"), "20ms");
        assert_eq!(get(&coordinator, "log.replica.min-in-sync-replicas-number"), "");
        assert_eq!(ids, ["0", "1", "2"]);
        assert_eq!(listeners[2], "INTERNAL://127.0.0.1:40129, CLIENT://127.0.0.1:40130");
        for list in [&mut listeners, &mut data] {
            list.sort();
            list.dedup();
            assert_eq!(list.len(), 3, "{list:?}");
        }
    }
}
