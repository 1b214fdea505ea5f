//! The broker stops during a stream of puts, and comes back.
//!
//! Stops the broker `cargo xtask services up kafka` started (`KAFKA_PID` in
//! `target/services/kafka.env`) with SIGTERM while tasks put completed states through an
//! `ActionStateStore` on a `KafkaLog`, keeps putting while it is down, starts it again with the
//! same command line and keeps putting until puts succeed again. Then:
//!
//! The checks are `actionstate_sim::faults::server_stop_during_puts`: every
//! acknowledged put indexed and in the log, every failed put failed within the delivery timeout
//! and is not indexed, puts succeed after the restart, and a rebuild from a marker taken before
//! the stop holds exactly the acknowledged states (plus any failed put whose record reached the
//! broker: a lost acknowledgement).
//!
//! The test restarts the shared broker, so it must not run beside other Kafka tests: it is
//! built only with the `broker-fault-tests` feature, and `cargo xtask ci` runs it on its own
//! after the other tests. It updates the pid file and `KAFKA_PID` so `cargo xtask services down`
//! stops the restarted broker.

#![allow(clippy::unwrap_used)]

use actionstate_kafka::{KafkaConfig, KafkaLog};
use actionstate_sim::faults;
use actionstate_testkit::services::ServerRole;
use std::time::Duration;

const DELIVERY_TIMEOUT: Duration = Duration::from_secs(5);
const PARTITIONS: u32 = 4;

/// The broker `cargo xtask services up kafka` started.
const BROKER: ServerRole<'static> = ServerRole {
    service: "kafka",
    prefix: "KAFKA",
    started: "broker",
    pid_var: "KAFKA_PID",
    main_class: "kafka.Kafka",
    log_file: "broker.log",
    pid_file: "kafka.pid",
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_stop_during_puts_loses_no_acknowledged_state() {
    // The broker xtask started, not just any bootstrap address: the test restarts its process.
    let Some(broker) = BROKER.find("broker-stop") else { return };
    let broker = broker.unwrap();

    let topic = format!("broker-stop-{}", uuid::Uuid::new_v4().simple());
    let mut config = KafkaConfig::new(broker.service.bootstrap(), &topic, PARTITIONS);
    config.replication = Some(1);
    config.delivery_timeout = DELIVERY_TIMEOUT;
    config.request_timeout = Duration::from_secs(10);
    config.read_stall_timeout = Duration::from_secs(10);

    let open = move || KafkaLog::open(config.clone());
    faults::server_stop_during_puts("broker", open, broker.process.clone(), broker.restarter(), DELIVERY_TIMEOUT).await;
}
