//! The store, its rounds and what it reports, for Python: `restore`, `Store`, `Round`.

use crate::action::{Action, Inner};
use crate::convert;
use crate::errors::{IntoPy, raised, value_error};
use actionstate_core::{ActionId, KeyId, WaitToken};
use actionstate_recovery::{
    ActionStateStore, AnyLog, Begin, InLog, LogConfig, OpenRound, Ownership, RestoreFrom, Round as StoreRound,
    StoreConfig, open,
};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};
use pyo3_async_runtimes::tokio::future_into_py;
use std::sync::{Arc, Mutex, PoisonError};

/// Restores the store of the log `url` from its latest checkpoint, or from checkpoint
/// `checkpoint`: an awaitable of `(Store, metadata, checkpoint_id, from_earliest, records)`.
#[pyfunction]
#[pyo3(signature = (url, checkpoint=None))]
pub(crate) fn restore(py: Python<'_>, url: String, checkpoint: Option<u64>) -> PyResult<Bound<'_, PyAny>> {
    let config: LogConfig = url.parse().py()?;
    future_into_py(py, async move {
        let log = open(&config).await.py()?;
        let from = checkpoint.map_or(RestoreFrom::Latest, RestoreFrom::Checkpoint);
        let (store, restored) =
            ActionStateStore::restore(log, StoreConfig::default(), &Ownership::All, from).await.py()?;
        let id = restored.from.first().map(|c| c.id);
        let metadata = restored.metadata().map(<[u8]>::to_vec);
        let records = restored.rebuild.records;
        let store = Store { inner: Arc::new(store) };
        Python::attach(|py| -> PyResult<Py<PyTuple>> {
            let metadata = metadata.map(|m| PyBytes::new(py, &m).unbind());
            Ok((store, metadata, id, restored.from_earliest, records).into_pyobject(py)?.unbind())
        })
    })
}

/// An open store.
#[pyclass(frozen, module = "actionstate._native")]
pub(crate) struct Store {
    pub(crate) inner: Arc<Inner>,
}

/// A round the runtime works on: finished explicitly, or dropped (and counted) unfinished.
#[pyclass(frozen, module = "actionstate._native")]
pub(crate) struct Round {
    round: StoreRound,
    open: Mutex<Option<OpenRound<'static, AnyLog, InLog>>>,
}

#[pymethods]
impl Round {
    /// Every action of the round is done: a checkpoint from now on need not replay it.
    fn finish(&self) {
        if let Some(open) = self.open.lock().unwrap_or_else(PoisonError::into_inner).take() {
            open.finish();
        }
    }

    /// An action suspended on a wait: the round stays live without counting as dropped.
    fn suspend(&self) {
        if let Some(open) = self.open.lock().unwrap_or_else(PoisonError::into_inner).take() {
            open.suspend();
        }
    }

    /// Whether `finish` or `suspend` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.open.lock().unwrap_or_else(PoisonError::into_inner).is_none()
    }

    /// The round's sequence number.
    #[getter]
    fn seq(&self) -> u64 {
        self.round.seq
    }
}

#[pymethods]
impl Store {
    /// Starts the round of `key`'s `seq`-th input `(input_type, input_attributes)`.
    fn round(&self, key: &str, seq: u64, input_type: String, input_attributes: &Bound<'_, PyDict>) -> PyResult<Round> {
        let input = convert::event(input_type, input_attributes)?;
        let round = StoreRound::named(key, seq, &input);
        Ok(Round { round, open: Mutex::new(Some(self.inner.round_shared(round))) })
    }

    /// Looks up an action: `("reuse", outputs, state_key)`, `("resume", Action)` or
    /// `("fresh", Action, reason)`.
    #[pyo3(signature = (round, action, event_type, attributes, trigger=None))]
    fn begin<'py>(
        &self,
        py: Python<'py>,
        round: PyRef<'_, Round>,
        action: String,
        event_type: String,
        attributes: &Bound<'_, PyDict>,
        trigger: Option<&Bound<'_, PyTuple>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let event = convert::event(event_type, attributes)?;
        let trigger = convert::trigger(trigger)?;
        let (store, round) = (Arc::clone(&self.inner), round.round);
        future_into_py(py, async move {
            let begun = store.begin(&round, &ActionId::new(action), &event, &trigger).await.py()?;
            Python::attach(|py| -> PyResult<Py<PyTuple>> {
                let tuple = match begun {
                    Begin::Reuse(state) => {
                        let outputs = match &state.progress {
                            actionstate_core::Progress::Completed { outputs, .. } => outputs.as_slice(),
                            actionstate_core::Progress::Pending { .. } => &[],
                        };
                        let outputs = PyList::new(
                            py,
                            outputs.iter().map(|e| convert::event_to_py(py, e)).collect::<PyResult<Vec<_>>>()?,
                        )?;
                        let key = PyBytes::new(py, &state.key.to_bytes());
                        ("reuse", outputs, key).into_pyobject(py)?
                    }
                    Begin::Resume(handle) => ("resume", Action::new(store, handle)).into_pyobject(py)?,
                    Begin::Fresh(handle, reason) => {
                        ("fresh", Action::new(store, handle), reason.to_string()).into_pyobject(py)?
                    }
                };
                Ok(tuple.unbind())
            })
        })
    }

    /// What `begin` would decide, without changing anything.
    #[pyo3(signature = (round, action, event_type, attributes, trigger=None))]
    fn explain<'py>(
        &self,
        py: Python<'py>,
        round: PyRef<'_, Round>,
        action: String,
        event_type: String,
        attributes: &Bound<'_, PyDict>,
        trigger: Option<&Bound<'_, PyTuple>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let event = convert::event(event_type, attributes)?;
        let trigger = convert::trigger(trigger)?;
        let explanation = self.inner.explain(&round.round, &ActionId::new(action), &event, &trigger);
        let dict = PyDict::new(py);
        dict.set_item("decision", format!("{:?}", explanation.decision))?;
        dict.set_item("divergence", explanation.divergence.map(|(reason, detail)| format!("{reason:?}: {detail:?}")))?;
        dict.set_item("would_invalidate", explanation.would_invalidate)?;
        dict.set_item("incarnation", explanation.incarnation)?;
        Ok(dict)
    }

    /// Completes `action` with its outputs `[(type, attributes), ...]`.
    fn complete<'py>(
        &self,
        py: Python<'py>,
        action: PyRef<'_, Action>,
        outputs: &Bound<'_, PyList>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let mut events = Vec::with_capacity(outputs.len());
        for output in outputs.iter() {
            let (event_type, attributes): (String, Bound<'_, PyDict>) = output.extract()?;
            events.push(convert::event(event_type, &attributes)?);
        }
        let (store, handle) = (Arc::clone(&self.inner), action.shared());
        future_into_py(py, async move {
            let handle = handle
                .lock()
                .await
                .take()
                .ok_or_else(|| raised("HandleError", "the action completed already".into()))?;
            store.complete(handle, events, vec![]).await.py()?;
            Ok(())
        })
    }

    /// Writes a checkpoint into the log with `metadata`; its id.
    fn checkpoint<'py>(&self, py: Python<'py>, metadata: &[u8]) -> PyResult<Bound<'py, PyAny>> {
        let (store, metadata) = (Arc::clone(&self.inner), metadata.to_vec());
        future_into_py(py, async move { Ok(store.checkpoint(&metadata).await.py()?.id) })
    }

    /// An operator's invalidation of `key` from round `from_seq` on: `(states removed,
    /// records appended)`.
    fn invalidate<'py>(
        &self,
        py: Python<'py>,
        key: String,
        from_seq: u64,
        reason: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        let store = Arc::clone(&self.inner);
        future_into_py(py, async move {
            let done = store.invalidate(KeyId::of(key.as_bytes()), from_seq, &reason).await.py()?;
            Ok((done.removed.len(), done.records))
        })
    }

    /// What retention did and why it does not run, as a dict.
    fn reclaim_status<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let status = self.inner.reclaim_status();
        let dict = PyDict::new(py);
        dict.set_item("disabled", status.disabled)?;
        dict.set_item("requested", status.requested)?;
        dict.set_item("earliest", status.earliest)?;
        dict.set_item("reclaims", status.reclaims)?;
        dict.set_item("records_reclaimed", status.records_reclaimed)?;
        dict.set_item("failures", status.failures)?;
        dict.set_item("last_error", status.last_error)?;
        dict.set_item("running", status.running)?;
        dict.set_item("waiting", status.waiting.iter().map(ToString::to_string).collect::<Vec<_>>())?;
        Ok(dict)
    }

    /// The waits to know about: `[{key, seq, action, name, status}, ...]`.
    fn waits<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for wait in self.inner.waits() {
            let dict = PyDict::new(py);
            dict.set_item("key", wait.label.map(|l| l.to_string()))?;
            dict.set_item("seq", wait.seq)?;
            dict.set_item("action", wait.action.to_string())?;
            dict.set_item("name", wait.name)?;
            dict.set_item(
                "status",
                match wait.status {
                    actionstate_recovery::WaitStatus::Pending => "pending",
                    actionstate_recovery::WaitStatus::Resolved { outcome } => outcome,
                },
            )?;
            list.append(dict)?;
        }
        Ok(list)
    }

    /// Resolves the wait of `token` with `reply` (`reject`: rejects it with `reply` as the
    /// reason): `(outcome, payload, recorded)`.
    #[pyo3(signature = (token, reply, reject=false))]
    fn resolve<'py>(&self, py: Python<'py>, token: &str, reply: &[u8], reject: bool) -> PyResult<Bound<'py, PyAny>> {
        let reply = reply.to_vec();
        let token = WaitToken::parse(token.trim()).map_err(|e| value_error(format!("not a wait token: {e}")))?;
        let store = Arc::clone(&self.inner);
        future_into_py(py, async move {
            let done =
                if reject { store.reject(&token, &reply).await } else { store.resolve(&token, &reply).await }.py()?;
            Python::attach(|py| -> PyResult<Py<PyTuple>> {
                let (name, payload) = crate::action::outcome_of(py, &done.outcome);
                Ok((name, payload, done.recorded).into_pyobject(py)?.unbind())
            })
        })
    }
}
