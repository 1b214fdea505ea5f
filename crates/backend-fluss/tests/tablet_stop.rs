//! The tablet server stops during a stream of puts, and comes back.
//!
//! Stops the tablet server `cargo xtask services up fluss` started (`FLUSS_TABLET_PID` in
//! `target/services/fluss.env`) with SIGTERM while tasks put completed states through an
//! `ActionStateStore` on a `FlussLog`, keeps putting while it is down, starts it again with the
//! same command line and keeps putting until puts succeed again. The checks are
//! `actionstate_sim::faults::server_stop_during_puts`: every acknowledged put
//! indexed and in the log at or after its (lower-bound) position, every failed put failed
//! within the delivery timeout and is not indexed, puts succeed after the restart, and a
//! rebuild from a marker taken before the stop holds exactly the acknowledged states (plus any
//! failed put whose record reached the server: a lost acknowledgement).
//!
//! The test restarts the shared tablet server, so it must not run beside other Fluss tests:
//! it is built only with the `server-fault-tests` feature, and `cargo xtask ci` runs it on its
//! own after the other tests. It updates the pid file and `FLUSS_TABLET_PID` so `cargo xtask
//! services down` stops the restarted server.

#![allow(clippy::unwrap_used)]

use actionstate_fluss::{FlussConfig, FlussLog};
use actionstate_sim::faults;
use actionstate_testkit::services::ServerRole;
use std::time::Duration;

const DELIVERY_TIMEOUT: Duration = Duration::from_secs(5);
const BUCKETS: u32 = 4;

/// The tablet server of the cluster `cargo xtask services up fluss` started.
const TABLET: ServerRole<'static> = ServerRole {
    service: "fluss",
    prefix: "FLUSS",
    started: "cluster",
    pid_var: "FLUSS_TABLET_PID",
    main_class: "org.apache.fluss.server.tablet.TabletServer",
    log_file: "tablet.log",
    pid_file: "tablet.pid",
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tablet_server_stop_during_puts_loses_no_acknowledged_state() {
    // The cluster xtask started, not just any bootstrap address: the test restarts a process.
    let Some(tablet) = TABLET.find("tablet-stop") else { return };
    let tablet = tablet.unwrap();

    let table = format!("tablet_stop_{}", uuid::Uuid::new_v4().simple());
    let mut config = FlussConfig::new(tablet.service.bootstrap(), "actionstate_tests", &table, BUCKETS);
    config.delivery_timeout = DELIVERY_TIMEOUT;
    config.request_timeout = Duration::from_secs(10);
    config.read_stall_timeout = Duration::from_secs(10);
    let open = move || FlussLog::open(config.clone());
    faults::server_stop_during_puts("tablet", open, tablet.process.clone(), tablet.restarter(), DELIVERY_TIMEOUT).await;
}
