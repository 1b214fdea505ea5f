//! [`Backend`]: the backends store and integration scenarios run on, and what each needs to
//! run: the embedded ones nothing, the server backends the service `cargo xtask services up`
//! starts (found as [`services`](crate::services) finds it). What differs between backends is
//! data here ([`Backend::server`]), so that a scenario names a backend only to choose it.

use crate::services::{self, Service};
use std::sync::OnceLock;

/// A backend the scenarios run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// The in-memory log (`actionstate-memory`).
    Memory,
    /// The embedded file backend, in a temporary directory.
    File,
    /// A fresh topic on the Kafka broker the environment names (see [`Backend::bootstrap`]).
    Kafka,
    /// A fresh table on the Fluss cluster the environment names (see [`Backend::bootstrap`]).
    Fluss,
}

/// The server a backend runs against, as `cargo xtask services up` publishes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Server {
    /// The service's name: `target/services/NAME.env`, `cargo xtask services up NAME`.
    pub service: &'static str,
    /// The prefix of its settings, e.g. `KAFKA` for `KAFKA_BOOTSTRAP`.
    pub prefix: &'static str,
    /// What it is, in messages: `Kafka broker`.
    pub what: &'static str,
}

impl Backend {
    /// Every backend available without external services.
    pub const ALL: [Backend; 2] = [Backend::Memory, Backend::File];

    /// The backend's name, as its log URLs and identities name it.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Memory => "memory",
            Backend::File => "file",
            Backend::Kafka => "kafka",
            Backend::Fluss => "fluss",
        }
    }

    /// The server the backend needs, or `None` for an embedded backend.
    pub fn server(self) -> Option<Server> {
        match self {
            Backend::Memory | Backend::File => None,
            Backend::Kafka => Some(Server { service: "kafka", prefix: "KAFKA", what: "Kafka broker" }),
            Backend::Fluss => Some(Server { service: "fluss", prefix: "FLUSS", what: "Fluss cluster" }),
        }
    }

    /// The bootstrap address of the backend's server: `PREFIX_BOOTSTRAP` from the environment,
    /// else from `<workspace>/target/services/NAME.env`; `None` when neither names one, or for
    /// an embedded backend. Read once per backend.
    pub fn bootstrap(self) -> Option<&'static str> {
        static BOOTSTRAPS: [OnceLock<Option<String>>; 4] =
            [OnceLock::new(), OnceLock::new(), OnceLock::new(), OnceLock::new()];
        let server = self.server()?;
        BOOTSTRAPS[self as usize]
            .get_or_init(|| Service::find(server.service, server.prefix).map(|s| s.bootstrap().to_owned()))
            .as_deref()
    }

    /// Whether `test` can run on this backend: an embedded one always can, a server backend
    /// when its server is configured. When it is not, prints the `ACTIONSTATE-SKIP` marker and
    /// returns `false`, or panics if `ACTIONSTATE_REQUIRE_SERVICES` is set (see
    /// [`services::skip`]).
    pub fn available(self, test: &str) -> bool {
        match self.server() {
            None => true,
            Some(_) if self.bootstrap().is_some() => true,
            Some(server) => {
                services::skip(server.service, test);
                false
            }
        }
    }

    /// Why a log of this backend cannot be opened: its server is not configured.
    pub fn missing(self) -> String {
        match self.server() {
            Some(Server { service, prefix, what }) => {
                format!("no {what} configured ({prefix}_BOOTSTRAP or target/services/{service}.env)")
            }
            None => format!("the {} backend needs no server", self.name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_backends_need_nothing_and_servers_are_data() {
        for backend in Backend::ALL {
            assert_eq!(backend.server(), None);
            assert_eq!(backend.bootstrap(), None);
            assert!(backend.available("test"));
        }
        let fluss = Backend::Fluss.server().expect("a server backend");
        assert_eq!((fluss.service, fluss.prefix), ("fluss", "FLUSS"));
        assert_eq!(
            Backend::Kafka.missing(),
            "no Kafka broker configured (KAFKA_BOOTSTRAP or target/services/kafka.env)"
        );
        let names: Vec<&str> =
            [Backend::Memory, Backend::File, Backend::Kafka, Backend::Fluss].map(Backend::name).into();
        assert_eq!(names, ["memory", "file", "kafka", "fluss"]);
    }
}
