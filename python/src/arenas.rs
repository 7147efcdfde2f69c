//! `ExecutionArena` and `IoArena`: thin Python faces of the Rust arenas
//! (which are cheap `Clone` handles to one shared arena, `Send + Sync`).

use crate::errors::{alloc_err, ShapeError};
use crate::export::{self, Dtype, ExportedBuffer};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use warmarena::{ArenaConfig, ArenaStats};

/// The alignment of every buffer the bindings allocate: a cache line, and
/// enough for any NumPy dtype and for SIMD kernels.
pub(crate) const ALIGN: usize = 64;

/// `usize::MAX` (unbounded) is `None` in Python.
fn cap_to_py(cap: usize) -> Option<usize> {
    (cap != usize::MAX).then_some(cap)
}

fn cap_from_py(cap: Option<usize>) -> usize {
    cap.unwrap_or(usize::MAX)
}

fn config(retention_cap: Option<usize>, huge_pages: bool, prefault: bool) -> ArenaConfig {
    ArenaConfig::default()
        .retention_cap(cap_from_py(retention_cap))
        .huge_pages(huge_pages)
        .prefault(prefault)
}

/// [`ArenaStats`] as a dict keyed by the Rust field names; the OS counters
/// are a nested dict under `os`, and an unbounded `retention_cap` is `None`.
pub(crate) fn stats_dict<'py>(py: Python<'py>, s: &ArenaStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("live_bytes", s.live_bytes)?;
    d.set_item("live_buffers", s.live_buffers)?;
    d.set_item("retained_bytes", s.retained_bytes)?;
    d.set_item("retained_buffers", s.retained_buffers)?;
    d.set_item("peak_live_bytes", s.peak_live_bytes)?;
    d.set_item("warm_allocations", s.warm_allocations)?;
    d.set_item("cold_allocations", s.cold_allocations)?;
    d.set_item("dedicated_allocations", s.dedicated_allocations)?;
    d.set_item("frees", s.frees)?;
    d.set_item("evictions", s.evictions)?;
    d.set_item("evicted_bytes", s.evicted_bytes)?;
    d.set_item("trims", s.trims)?;
    d.set_item("trimmed_bytes", s.trimmed_bytes)?;
    d.set_item("retention_cap", cap_to_py(s.retention_cap))?;
    d.set_item("leased_bytes", s.leased_bytes)?;
    d.set_item("leases", s.leases)?;
    d.set_item("copies", s.copies)?;
    d.set_item("copied_bytes", s.copied_bytes)?;
    d.set_item("mapped_bytes", s.mapped_bytes)?;
    d.set_item("locked_operations", s.locked_operations)?;
    d.set_item("heap_moves", s.heap_moves)?;
    d.set_item("heap_plans", s.heap_plans)?;
    d.set_item("heap_planned_allocations", s.heap_planned_allocations)?;
    d.set_item("heap_plan_released_bytes", s.heap_plan_released_bytes)?;
    let os = PyDict::new(py);
    os.set_item("maps", s.os.maps)?;
    os.set_item("unmaps", s.os.unmaps)?;
    os.set_item("page_releases", s.os.page_releases)?;
    os.set_item("advice", s.os.advice)?;
    os.set_item("prefaults", s.os.prefaults)?;
    os.set_item("mapped_bytes", s.os.mapped_bytes)?;
    os.set_item("unmapped_bytes", s.os.unmapped_bytes)?;
    os.set_item("syscalls", s.os.syscalls())?;
    d.set_item("os", os)?;
    Ok(d)
}

macro_rules! py_arena {
    ($name:ident, $rust:ty, $doc:literal, { $($extra:tt)* }) => {
        #[doc = $doc]
        #[pyclass(frozen, module = "warmarena")]
        pub struct $name {
            pub(crate) inner: $rust,
        }

        #[pymethods]
        impl $name {
            /// A new arena. `retention_cap`: most bytes of free buffers kept
            /// with their pages (`None`: unbounded); `huge_pages`: THP advice
            /// for classes of 2 MiB and more; `prefault`: materialize new
            /// mappings at once.
            #[new]
            #[pyo3(signature = (*, retention_cap=None, huge_pages=true, prefault=false))]
            fn new(retention_cap: Option<usize>, huge_pages: bool, prefault: bool) -> Self {
                $name {
                    inner: <$rust>::with_config(config(retention_cap, huge_pages, prefault)),
                }
            }

            /// A snapshot of the arena's accounting, keyed by the Rust
            /// `ArenaStats` field names (bytes are class capacities).
            fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
                stats_dict(py, &self.inner.stats())
            }

            /// Releases every retained buffer to the OS; returns the bytes
            /// released. Live and leased buffers are untouched.
            fn trim(&self) -> usize {
                self.inner.trim()
            }

            /// Restarts peak tracking from the current live bytes.
            fn reset_peak(&self) {
                self.inner.reset_peak()
            }

            /// Most bytes of free buffers kept with their pages; `None` when
            /// unbounded. Setting it evicts least-recently-freed buffers at
            /// once until the retained bytes fit (0 keeps nothing).
            #[getter]
            fn get_retention_cap(&self) -> Option<usize> {
                cap_to_py(self.inner.stats().retention_cap)
            }

            #[setter]
            fn set_retention_cap(&self, cap: &Bound<'_, PyAny>) -> PyResult<()> {
                let cap = if cap.is_none() {
                    None
                } else {
                    Some(cap.extract::<usize>().map_err(|_| {
                        PyValueError::new_err(format!(
                            "retention_cap must be a non-negative int or None, not {cap}"
                        ))
                    })?)
                };
                self.inner.set_retention_cap(cap_from_py(cap));
                Ok(())
            }

            /// Whether `other` is a handle to the same arena.
            fn same_arena(&self, other: &Self) -> bool {
                self.inner.same_arena(&other.inner)
            }

            fn __repr__(&self) -> String {
                let s = self.inner.stats();
                format!(
                    "{}(live_bytes={}, retained_bytes={}, warm_allocations={}, cold_allocations={})",
                    stringify!($name),
                    s.live_bytes,
                    s.retained_bytes,
                    s.warm_allocations,
                    s.cold_allocations
                )
            }

            $($extra)*
        }
    };
}

py_arena!(
    ExecutionArena,
    warmarena::ExecutionArena,
    "An arena for node intermediates and kernel workspaces.",
    {}
);
py_arena!(
    IoArena,
    warmarena::IoArena,
    "An arena for graph outputs and staged inputs: memory that crosses the runtime boundary.",
    {
        /// A new C-contiguous NumPy array of `shape` and `dtype` in this arena,
        /// contents unspecified (a warm buffer keeps what it last held). Its
        /// base object is an `ExportedBuffer` owning the buffer's lease:
        /// deleting the array returns the buffer to this arena, and the array
        /// stays valid if the arena object is deleted first.
        #[pyo3(signature = (shape, dtype=None))]
        fn empty<'py>(
            &self,
            py: Python<'py>,
            shape: &Bound<'py, PyAny>,
            dtype: Option<&Bound<'py, PyAny>>,
        ) -> PyResult<Bound<'py, PyAny>> {
            let dt = match dtype {
                Some(d) if !d.is_none() => Dtype::from_py(d)?,
                _ => Dtype::f32(py),
            };
            let dims = shape_from_py(shape)?;
            let nbytes = export::byte_len(&dims, dt)?;
            // Arenas hand out real buffers only: an empty array gets one byte.
            let alloc = self
                .inner
                .allocate(nbytes.max(1), ALIGN)
                .map_err(alloc_err)?;
            let lease = alloc.into_lease().map_err(|a| {
                crate::errors::AllocationError::new_err(format!(
                    "could not lease a buffer of {} bytes (no room for its pin record)",
                    a.len()
                ))
            })?;
            let buf = Bound::new(py, ExportedBuffer::new(lease, dims, dt))?;
            export::array_over(py, buf)
        }
    }
);

/// Extents of `shape` (an int or a sequence of ints) as DLPack extents.
pub(crate) fn shape_from_py(shape: &Bound<'_, PyAny>) -> PyResult<Vec<i64>> {
    let dims: Vec<i64> = if let Ok(n) = shape.extract::<i64>() {
        vec![n]
    } else {
        shape.extract::<Vec<i64>>().map_err(|_| {
            ShapeError::new_err(format!(
                "shape must be an int or a sequence of ints, not {shape}"
            ))
        })?
    };
    if let Some(d) = dims.iter().find(|&&d| d < 0) {
        return Err(ShapeError::new_err(format!(
            "shape {dims:?} has a negative extent {d}"
        )));
    }
    if dims.len() > 32 {
        return Err(ShapeError::new_err(format!(
            "shape has {} dimensions, NumPy takes at most 32",
            dims.len()
        )));
    }
    Ok(dims)
}
