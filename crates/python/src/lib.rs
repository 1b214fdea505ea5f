//! The native part of the Python package `actionstate` (`actionstate._native`).
//!
//! It binds the store as the Rust API has it, no more: restore from a log URL, rounds,
//! begin and complete, durable calls with idempotency keys and reconcile, durable waits,
//! checkpoints with metadata, `explain`, `invalidate` and `reclaim_status`. Every store
//! operation returns an asyncio awaitable of a future on the package's tokio runtime, so the
//! GIL is free while Rust works. The Pythonic layer (async context managers, JSON helpers,
//! the exception classes, type stubs) is the package's Python code in `python/actionstate`.

mod action;
mod convert;
mod errors;
mod store;

use pyo3::prelude::*;

/// The module `actionstate._native`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(store::restore, m)?)?;
    m.add_class::<store::Store>()?;
    m.add_class::<store::Round>()?;
    m.add_class::<action::Action>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
