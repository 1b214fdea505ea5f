//! Between Python values and the store's: events, their attribute values, triggers.

use crate::errors::value_error;
use actionstate_core::{Attributes, Event, StateKey, Trigger, Value};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use std::collections::BTreeMap;

/// An event from its type and a dict of attributes (string keys).
pub(crate) fn event(event_type: String, attributes: &Bound<'_, PyDict>) -> PyResult<Event> {
    Ok(Event::new(event_type, attributes_of(attributes)?))
}

/// The attributes of a Python dict: string keys, values as [`value`] converts them.
pub(crate) fn attributes_of(dict: &Bound<'_, PyDict>) -> PyResult<Attributes> {
    let mut attributes = Attributes::new();
    for (k, v) in dict.iter() {
        let key: String = k.extract().map_err(|_| value_error(format!("attribute name {k:?} is not a str")))?;
        let value = value(&v).map_err(|e| value_error(format!("attribute `{key}`: {e}")))?;
        attributes.insert(key, value);
    }
    Ok(attributes)
}

/// A Python value as an attribute value: `None`, `bool`, `int` (64-bit), `float`, `str`,
/// `bytes`, a list or tuple of these, or a dict with `str` keys. Anything else is a
/// `ValueError` that names its type.
pub(crate) fn value(v: &Bound<'_, PyAny>) -> PyResult<Value> {
    if v.is_none() {
        Ok(Value::Null)
    } else if v.is_instance_of::<PyBool>() {
        Ok(Value::Bool(v.extract()?))
    } else if v.is_instance_of::<PyInt>() {
        v.extract::<i64>().map(Value::Int).map_err(|_| value_error(format!("{v} does not fit 64 bits")))
    } else if v.is_instance_of::<PyFloat>() {
        Ok(Value::Float(v.extract()?))
    } else if v.is_instance_of::<PyString>() {
        Ok(Value::String(v.extract()?))
    } else if let Ok(bytes) = v.cast::<PyBytes>() {
        Ok(Value::Bytes(bytes.as_bytes().to_vec()))
    } else if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
        v.try_iter()?.map(|item| value(&item?)).collect::<PyResult<Vec<_>>>().map(Value::List)
    } else if let Ok(dict) = v.cast::<PyDict>() {
        let mut map = BTreeMap::new();
        for (k, item) in dict.iter() {
            let key: String = k.extract().map_err(|_| value_error(format!("map key {k:?} is not a str")))?;
            map.insert(key, value(&item)?);
        }
        Ok(Value::Map(map))
    } else {
        Err(value_error(format!("a value of type {} cannot be an attribute", v.get_type().name()?)))
    }
}

/// An attribute value as a Python value (the inverse of [`value`]).
pub(crate) fn to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Int(i) => i.into_pyobject(py)?.into_any(),
        Value::Float(f) => PyFloat::new(py, *f).into_any(),
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Bytes(b) => PyBytes::new(py, b).into_any(),
        Value::List(items) => {
            PyList::new(py, items.iter().map(|i| to_py(py, i)).collect::<PyResult<Vec<_>>>()?)?.into_any()
        }
        Value::Map(map) => {
            let dict = PyDict::new(py);
            for (k, item) in map {
                dict.set_item(k, to_py(py, item)?)?;
            }
            dict.into_any()
        }
    })
}

/// An event as the tuple `(type, attributes, id)` the Python package wraps.
pub(crate) fn event_to_py<'py>(py: Python<'py>, event: &Event) -> PyResult<Bound<'py, PyTuple>> {
    let attributes = PyDict::new(py);
    for (k, v) in event.attributes.iter() {
        attributes.set_item(k, to_py(py, v)?)?;
    }
    let id = PyBytes::new(py, &event.id.0.to_be_bytes());
    PyTuple::new(py, [PyString::new(py, &event.event_type).into_any(), attributes.into_any(), id.into_any()])
}

/// A trigger from the Python package's form: `None` for an input, `("bootstrap", label)`,
/// or `("emitted", producer_state_key, index)`.
pub(crate) fn trigger(t: Option<&Bound<'_, PyTuple>>) -> PyResult<Trigger> {
    let Some(t) = t else { return Ok(Trigger::Input) };
    let kind: String = t.get_item(0)?.extract()?;
    match kind.as_str() {
        "bootstrap" => Ok(Trigger::Bootstrap { label: t.get_item(1)?.extract()? }),
        "emitted" => {
            let producer = t.get_item(1)?;
            let producer =
                producer.cast::<PyBytes>().map_err(|_| value_error("a producer state key is bytes".into()))?;
            let producer = StateKey::from_bytes(producer.as_bytes())
                .map_err(|e| value_error(format!("producer state key: {e}")))?;
            Ok(Trigger::Emitted { producer, index: t.get_item(2)?.extract()? })
        }
        other => Err(value_error(format!("unknown trigger kind `{other}` (expected bootstrap or emitted)"))),
    }
}
