//! `FaultCounter`: the calling thread's page faults, from Rust.

use pyo3::prelude::*;
use pyo3::types::PyDict;
use warmarena::faults::{self, FaultSource};

/// Counts the minor and major page faults of the thread that made it (perf
/// events, or `getrusage(RUSAGE_THREAD)` where perf events are denied),
/// from its creation or last `reset()`. Bound to that thread.
#[pyclass(unsendable, module = "warmarena")]
pub struct FaultCounter {
    inner: faults::FaultCounter,
}

#[pymethods]
impl FaultCounter {
    /// Starts counting now.
    #[new]
    fn new() -> Self {
        FaultCounter {
            inner: faults::FaultCounter::new(),
        }
    }

    /// Restarts the interval now.
    fn reset(&mut self) {
        self.inner.reset()
    }

    /// Faults since creation or the last reset: `{"minor": int, "major": int}`.
    fn read<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let f = self.inner.read();
        let d = PyDict::new(py);
        d.set_item("minor", f.minor)?;
        d.set_item("major", f.major)?;
        Ok(d)
    }

    /// `"perf_events"` or `"getrusage"`.
    #[getter]
    fn source(&self) -> &'static str {
        match self.inner.source() {
            FaultSource::PerfEvents => "perf_events",
            FaultSource::Getrusage => "getrusage",
        }
    }
}
