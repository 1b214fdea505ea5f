//! An action begun for Python: its durable calls and waits, made through its handle.
//!
//! A durable call runs a Python coroutine function that the package builds around the
//! user's callable: it gets the call's idempotency key and returns `(ok, payload)`, where
//! `ok = False` is an error outcome the journal keeps (`CallFailed`). Any other exception
//! it raises is no outcome: the call is abandoned (as the Rust API abandons a call whose
//! future is dropped), nothing is journaled, and the exception reaches the caller.

use crate::errors::{IntoPy, raised, value_error};
use actionstate_core::{IdempotencyKey, WaitOutcome};
use actionstate_recovery::{ActionHandle, ActionStateStore, AnyLog, CallOutput, DurableCall, InLog, Wait, Waited};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};
use pyo3_async_runtimes::TaskLocals;
use pyo3_async_runtimes::tokio::{future_into_py_with_locals, get_current_locals};
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::Mutex as AsyncMutex;

/// The store every Python object shares: on any backend, checkpoints in the log.
pub(crate) type Inner = ActionStateStore<AnyLog, InLog>;

/// The handle of an action that runs: taken by `complete`.
pub(crate) type Shared = Arc<AsyncMutex<Option<ActionHandle>>>;

/// An action that runs (fresh) or resumes from its journal.
#[pyclass(frozen, module = "actionstate._native")]
pub(crate) struct Action {
    store: Arc<Inner>,
    handle: Shared,
    key: Vec<u8>,
}

impl Action {
    pub(crate) fn new(store: Arc<Inner>, handle: ActionHandle) -> Self {
        let key = handle.key().to_bytes().to_vec();
        Action { store, handle: Arc::new(AsyncMutex::new(Some(handle))), key }
    }

    pub(crate) fn shared(&self) -> Shared {
        Arc::clone(&self.handle)
    }
}

/// An exception that is no call outcome, and the signal that abandons the call for it.
#[derive(Default)]
struct Abandon {
    error: Mutex<Option<PyErr>>,
    raised: tokio::sync::Notify,
}

type Abandoned = Arc<Abandon>;

#[pymethods]
impl Action {
    /// The action's state key (what an output's `Trigger.emitted` names as its producer).
    #[getter]
    fn key<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.key)
    }

    /// Runs or replays a durable call of `function`: an awaitable of `(ok, payload, source)`.
    /// The digest comes from `args_json` (canonical JSON, as `DurableCall::args` digests),
    /// else from `digest` (32 bytes), else it is all zeros.
    #[pyo3(signature = (function, run, args_json=None, digest=None, reconcile=None))]
    fn call<'py>(
        &self,
        py: Python<'py>,
        function: String,
        run: Py<PyAny>,
        args_json: Option<String>,
        digest: Option<&[u8]>,
        reconcile: Option<Py<PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let digest = digest_of(&function, args_json.as_deref(), digest)?;
        let locals = get_current_locals(py)?;
        let (store, handle) = (Arc::clone(&self.store), self.shared());
        future_into_py_with_locals(py, locals.clone(), async move {
            let mut guard = handle.lock().await;
            let handle = guard.as_mut().ok_or_else(|| raised("HandleError", "the action completed already".into()))?;
            let abandoned: Abandoned = Arc::default();
            let call = DurableCall::new(&function).args_digest(digest);
            let run = {
                let (locals, abandoned) = (locals.clone(), Arc::clone(&abandoned));
                move |key| python_call(run, key, locals, abandoned)
            };
            let done = match reconcile {
                None => call_until_abandoned(store.call(handle, call, run), &abandoned).await?,
                Some(reconcile) => {
                    let reconcile = {
                        let abandoned = Arc::clone(&abandoned);
                        move |key| python_call(reconcile, key, locals, abandoned)
                    };
                    call_until_abandoned(store.call(handle, call.reconcile(reconcile), run), &abandoned).await?
                }
            };
            Python::attach(|py| -> PyResult<Py<PyTuple>> {
                let (ok, payload) = match &done.output {
                    Ok(bytes) => (true, PyBytes::new(py, bytes)),
                    Err(bytes) => (false, PyBytes::new(py, bytes)),
                };
                Ok((ok, payload, done.source.as_str()).into_pyobject(py)?.unbind())
            })
        })
    }

    /// Waits durably: an awaitable of `("done", outcome, payload)` or `("suspended", token)`.
    #[pyo3(signature = (name, args_json=None, timeout=None))]
    fn wait<'py>(
        &self,
        py: Python<'py>,
        name: String,
        args_json: Option<String>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let args = args_json.map(|json| parse_args(&name, &json)).transpose()?;
        let timeout = timeout
            .map(|t| Duration::try_from_secs_f64(t).map_err(|_| value_error(format!("timeout {t} is not a duration"))))
            .transpose()?;
        let (store, handle) = (Arc::clone(&self.store), self.shared());
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            let mut guard = handle.lock().await;
            let handle = guard.as_mut().ok_or_else(|| raised("HandleError", "the action completed already".into()))?;
            let mut wait = Wait::new(&name);
            if let Some(args) = &args {
                wait = wait.args(args).py()?;
            }
            if let Some(timeout) = timeout {
                wait = wait.timeout(timeout);
            }
            let waited = store.wait(handle, wait).await.py()?;
            Python::attach(|py| -> PyResult<Py<PyTuple>> {
                Ok(match waited {
                    Waited::Done(outcome) => {
                        let (name, payload) = outcome_of(py, &outcome);
                        ("done", name, payload).into_pyobject(py)?.unbind()
                    }
                    Waited::Suspended(token) => ("suspended", token.to_text()).into_pyobject(py)?.unbind(),
                })
            })
        })
    }
}

/// A wait's outcome as `(name, payload)`: the reply or the rejection's reason, `None` for a
/// timeout.
pub(crate) fn outcome_of<'py>(py: Python<'py>, outcome: &WaitOutcome) -> (&'static str, Option<Bound<'py, PyBytes>>) {
    let payload = match outcome {
        WaitOutcome::Reply(bytes) | WaitOutcome::Rejected(bytes) => Some(PyBytes::new(py, bytes)),
        WaitOutcome::TimedOut => None,
    };
    (outcome.name(), payload)
}

/// The argument digest of a call: of `args_json`, else `digest`, else zeros.
fn digest_of(function: &str, args_json: Option<&str>, digest: Option<&[u8]>) -> PyResult<[u8; 32]> {
    match (args_json, digest) {
        (Some(json), _) => Ok(DurableCall::new(function).args(&parse_args(function, json)?).py()?.digest()),
        (None, Some(digest)) => {
            digest.try_into().map_err(|_| value_error(format!("a digest is 32 bytes, not {}", digest.len())))
        }
        (None, None) => Ok([0; 32]),
    }
}

fn parse_args(function: &str, json: &str) -> PyResult<serde_json::Value> {
    serde_json::from_str(json).map_err(|e| value_error(format!("the arguments of `{function}` are not JSON: {e}")))
}

/// Runs a store call until it ends, or until the Python function it runs raised something
/// that is no outcome: then the call is dropped (abandoned, nothing journaled) and that
/// exception is raised.
async fn call_until_abandoned<F>(call: F, abandoned: &Abandoned) -> PyResult<actionstate_recovery::Call>
where
    F: Future<Output = actionstate_recovery::Result<actionstate_recovery::Call>>,
{
    tokio::select! {
        done = call => done.py(),
        () = abandoned.raised.notified() => {
            let error = abandoned.error.lock().unwrap_or_else(PoisonError::into_inner).take();
            Err(error.unwrap_or_else(|| raised("ActionStateError", "a durable call was abandoned".into())))
        }
    }
}

/// Calls the package's coroutine function `f` with `key`, on the caller's event loop and in
/// its context, and returns the outcome it reports. An exception is stored in `abandoned`
/// and the returned future never completes, so the store call is dropped by its caller.
async fn python_call(f: Py<PyAny>, key: IdempotencyKey, locals: TaskLocals, abandoned: Abandoned) -> CallOutput {
    let awaited = Python::attach(|py| {
        let coroutine = f.call1(py, (key.as_str(),))?;
        pyo3_async_runtimes::into_future_with_locals(&locals, coroutine.into_bound(py))
    });
    let reported = match awaited {
        Ok(future) => future.await,
        Err(e) => Err(e),
    };
    let outcome = reported.and_then(|reported| {
        Python::attach(|py| {
            let (ok, payload): (bool, Bound<'_, PyBytes>) = reported.extract(py)?;
            let payload = payload.as_bytes().to_vec();
            Ok(if ok { Ok(payload) } else { Err(payload) })
        })
    });
    match outcome {
        Ok(output) => output,
        Err(e) => {
            *abandoned.error.lock().unwrap_or_else(PoisonError::into_inner) = Some(e);
            // A permit if the call is not awaited yet: the signal is never lost.
            abandoned.raised.notify_one();
            std::future::pending().await
        }
    }
}
