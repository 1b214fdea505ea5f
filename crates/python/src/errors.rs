//! Store errors as the exceptions of `actionstate.errors`, which mirror `StoreError`.

use actionstate_recovery::StoreError;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

/// The class of `actionstate.errors` that a store error is raised as.
fn class_name(e: &StoreError) -> &'static str {
    use actionstate_core::Error as LogFailure;
    match e {
        StoreError::Log(LogFailure::BadUrl { .. }) => "ConfigError",
        StoreError::Log(LogFailure::MetadataTooLarge { .. }) => "CheckpointError",
        StoreError::Log(LogFailure::WaitReplyTooLarge { .. }) => "WaitError",
        StoreError::Log(_) | StoreError::KeyInTwoPartitions { .. } => "LogError",
        StoreError::RebuildStalled { .. } | StoreError::RebuildDeadline { .. } | StoreError::Task(_) => "RebuildError",
        StoreError::Config { .. } => "ConfigError",
        StoreError::Fenced { .. } => "FencedError",
        StoreError::NotOwned { .. } => "NotOwnedError",
        StoreError::CheckpointNotFound { .. }
        | StoreError::CheckpointIncomplete { .. }
        | StoreError::MixedKeyGroups { .. }
        | StoreError::Metadata { .. } => "CheckpointError",
        StoreError::Args { .. } => "ArgsError",
        StoreError::StaleHandle { .. } | StoreError::Suspended { .. } => "HandleError",
        StoreError::UnknownWait { .. } | StoreError::WaitReplyTooLarge { .. } | StoreError::BadWaitToken(_) => {
            "WaitError"
        }
        _ => "ActionStateError",
    }
}

/// The variant's name in snake case (`checkpoint_not_found`; for a log failure, the log
/// error's, such as `bad_url` or `data_loss`): the exception's `kind`.
fn kind(e: &StoreError) -> String {
    let debug = match e {
        StoreError::Log(inner) => format!("{inner:?}"),
        other => format!("{other:?}"),
    };
    let name = debug.split(|c: char| !c.is_alphanumeric()).next().unwrap_or_default();
    let mut kind = String::with_capacity(name.len() + 4);
    for (i, c) in name.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            kind.push('_');
        }
        kind.push(c.to_ascii_lowercase());
    }
    kind
}

/// `e` as its `actionstate.errors` exception, with `retryable` and `kind` set.
pub(crate) fn store_error(e: StoreError) -> PyErr {
    Python::attach(|py| {
        let raised = py
            .import("actionstate.errors")
            .and_then(|module| module.getattr(class_name(&e)))
            .and_then(|class| class.call1((e.to_string(), e.is_retryable(), kind(&e))));
        match raised {
            Ok(exception) => PyErr::from_value(exception),
            Err(import) => PyRuntimeError::new_err(format!("{e} (and actionstate.errors failed: {import})")),
        }
    })
}

/// A store error as an `actionstate.errors` exception, for `map_err`.
pub(crate) trait IntoPy<T> {
    /// The result with its error raised as Python would see it.
    fn py(self) -> PyResult<T>;
}

impl<T> IntoPy<T> for Result<T, StoreError> {
    fn py(self) -> PyResult<T> {
        self.map_err(store_error)
    }
}

/// Bad input from Python: a `ValueError` naming what is wrong.
pub(crate) fn value_error(message: String) -> PyErr {
    PyValueError::new_err(message)
}

/// An `actionstate.errors` exception of class `class` that no `StoreError` stands behind
/// (a handle used after its action completed).
pub(crate) fn raised(class: &'static str, message: String) -> PyErr {
    Python::attach(|py| {
        match py
            .import("actionstate.errors")
            .and_then(|m| m.getattr(class))
            .and_then(|c| c.call1((message.clone(), false, class)))
        {
            Ok(exception) => PyErr::from_value(exception),
            Err(import) => PyRuntimeError::new_err(format!("{message} (and actionstate.errors failed: {import})")),
        }
    })
}
