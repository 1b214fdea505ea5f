//! Talking to the cluster: connecting, and requests bounded by the request timeout, with
//! their errors named.

use crate::config::FlussConfig;
use crate::error::{FlussError, is_authentication};
use fluss::client::FlussConnection;
use fluss::error::Error as ClientError;
use std::future::Future;

/// Runs a client request bounded by the request timeout.
pub(crate) async fn request<T>(
    config: &FlussConfig,
    operation: &'static str,
    f: impl Future<Output = Result<T, ClientError>>,
) -> Result<T, FlussError> {
    match tokio::time::timeout(config.request_timeout, f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) if is_authentication(&e) => Err(FlussError::Authentication {
            operation,
            bootstrap: config.bootstrap.clone(),
            detail: e.to_string(),
            credentials: config.security.is_some(),
        }),
        Ok(Err(e)) => Err(FlussError::Client { operation, table: config.table_name(), source: Box::new(e) }),
        Err(_) => Err(FlussError::Timeout {
            operation,
            table: config.table_name(),
            bootstrap: config.bootstrap.clone(),
            waited: config.request_timeout,
        }),
    }
}

/// Connects to the cluster, within the request timeout.
pub(crate) async fn connect(config: &FlussConfig) -> Result<FlussConnection, FlussError> {
    match tokio::time::timeout(config.request_timeout, FlussConnection::new(config.client_config())).await {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) if is_authentication(&e) => Err(FlussError::Authentication {
            operation: "connect",
            bootstrap: config.bootstrap.clone(),
            detail: e.to_string(),
            credentials: config.security.is_some(),
        }),
        Ok(Err(source)) => Err(FlussError::Connect { bootstrap: config.bootstrap.clone(), source: Box::new(source) }),
        Err(_) => Err(FlussError::Timeout {
            operation: "connect",
            table: config.table_name(),
            bootstrap: config.bootstrap.clone(),
            waited: config.request_timeout,
        }),
    }
}
