//! The exceptions the bindings raise, and how Rust errors map to them.
//!
//! Each is a subclass of the built-in exception a Python caller would
//! already catch for that kind of mistake, so `except TypeError` keeps
//! working, and `except warmarena.DtypeError` is more precise.

use pyo3::create_exception;
use pyo3::exceptions::{PyMemoryError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use warmarena::session::SessionError;
use warmarena::ArenaError;
use warmarena_net::NetError;

create_exception!(
    warmarena,
    DtypeError,
    PyTypeError,
    "A dtype the call does not support (an input that cannot be converted to float32, an `empty` dtype outside the supported list, a borrow-only input that is not float32)."
);
create_exception!(
    warmarena,
    LayoutError,
    PyValueError,
    "An input that must be borrowed without a copy is not C-contiguous, aligned and in native byte order."
);
create_exception!(
    warmarena,
    ShapeError,
    PyValueError,
    "A shape the call cannot take: a negative or overflowing extent, or an input whose shape is not the network's."
);
create_exception!(
    warmarena,
    AllocationError,
    PyMemoryError,
    "The arena refused an allocation (zero or overflowing size, the OS refused memory). The arena is unchanged."
);

create_exception!(
    warmarena,
    ScopeError,
    PyRuntimeError,
    "A numpy_scope used out of order: entered a second time, or exited when not open."
);

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("DtypeError", py.get_type::<DtypeError>())?;
    m.add("LayoutError", py.get_type::<LayoutError>())?;
    m.add("ShapeError", py.get_type::<ShapeError>())?;
    m.add("AllocationError", py.get_type::<AllocationError>())?;
    m.add("ScopeError", py.get_type::<ScopeError>())?;
    Ok(())
}

/// An arena refusal as a Python exception.
pub(crate) fn alloc_err(e: ArenaError) -> PyErr {
    AllocationError::new_err(format!("allocation refused: {e}"))
}

/// A failed run as a Python exception.
pub(crate) fn net_err(e: NetError) -> PyErr {
    match e {
        NetError::Session(SessionError::Alloc(a)) => alloc_err(a),
        NetError::InputLength { .. } => ShapeError::new_err(e.to_string()),
        other => PyRuntimeError::new_err(other.to_string()),
    }
}

/// A refused session call as a Python exception.
pub(crate) fn session_err(e: SessionError) -> PyErr {
    net_err(NetError::Session(e))
}
