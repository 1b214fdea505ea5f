//! The integration-test binary: the recovery scenarios on every backend, the crash campaign,
//! and the simulator killed with SIGKILL in a child process.
//!
//! ```text
//! cargo test -p actionstate-tests --test all                 # everything
//! cargo test -p actionstate-tests --test all scenarios::     # the scenarios
//! cargo test -p actionstate-tests --test all repair::        # an operator's repair
//! cargo test -p actionstate-tests --test all fencing::       # zombie writers fenced out
//! cargo test -p actionstate-tests --test all campaign -- --nocapture
//! cargo test -p actionstate-tests --test all sigkill -- --nocapture
//! ```
#![allow(clippy::unwrap_used, reason = "tests")]

/// Generates one test per backend for each async function named, which takes the `Backend`:
/// `module::name::{memory, file, kafka, fluss}`. The `kafka` test runs on a fresh topic of the
/// configured broker, the `fluss` test on a fresh table of the configured cluster; each prints
/// the skip marker without one (`module` names the tests in it).
macro_rules! on_every_backend {
    ($module:literal: $($name:ident),* $(,)?) => {$(
        mod $name {
            use actionstate_tests::Backend;

            #[tokio::test]
            async fn memory() {
                super::$name(Backend::Memory).await;
            }

            #[tokio::test]
            async fn file() {
                super::$name(Backend::File).await;
            }

            #[tokio::test]
            async fn kafka() {
                if Backend::Kafka.available(concat!($module, "::", stringify!($name))) {
                    super::$name(Backend::Kafka).await;
                }
            }

            #[tokio::test]
            async fn fluss() {
                if Backend::Fluss.available(concat!($module, "::", stringify!($name))) {
                    super::$name(Backend::Fluss).await;
                }
            }
        }
    )*};
}

mod campaign;
mod fencing;
mod owners_campaign;
mod repair;
mod scenarios;
#[cfg(unix)]
mod sigkill;
