//! `warmarena._warmarena`: the Python bindings of warmarena.
//!
//! The Python package `warmarena` (`python/warmarena/`) re-exports
//! everything defined here. What it offers:
//!
//! - [`arenas`]: `ExecutionArena` and `IoArena` (stats, `trim`,
//!   `retention_cap`), and `IoArena.empty`, a NumPy array in the I/O arena;
//! - [`export`]: `ExportedBuffer`, the owner of one `IoLease` that is the
//!   base object of every exported array and speaks DLPack (1.x and legacy);
//! - [`session`]: `Session`, the example network run through the session
//!   path: inputs borrowed without a copy where they can be, outputs exported
//!   to NumPy without a copy;
//! - [`faults`]: `FaultCounter`, the page-fault counter of the calling thread;
//! - [`numpy_memory`]: `numpy_scope` / `set_numpy_arena`, a NEP 49 data
//!   memory handler that serves NumPy's own array buffers from an arena.
//!
//! Ownership across the boundary: an exported array's base object owns the
//! lease, and the lease keeps its arena's state alive, so an array outlives
//! the session and the arena objects that made it; deleting the array
//! returns the buffer to the I/O arena.

use pyo3::prelude::*;

pub mod arenas;
pub mod errors;
pub mod export;
pub mod faults;
pub mod numpy_memory;
pub mod session;

/// The extension module. It needs the GIL: a borrowed input is read by the
/// kernels while the GIL keeps Python code from writing it.
#[pymodule(gil_used = true)]
fn _warmarena(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<arenas::ExecutionArena>()?;
    m.add_class::<arenas::IoArena>()?;
    m.add_class::<export::ExportedBuffer>()?;
    m.add_class::<session::Session>()?;
    m.add_class::<faults::FaultCounter>()?;
    m.add_class::<numpy_memory::NumpyScope>()?;
    m.add_function(wrap_pyfunction!(numpy_memory::numpy_scope, m)?)?;
    m.add_function(wrap_pyfunction!(numpy_memory::set_numpy_arena, m)?)?;
    errors::register(m)?;
    Ok(())
}
