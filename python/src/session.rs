//! `Session`: the example network (`warmarena_net::Net`) run through the
//! session path from Python.
//!
//! Inputs: a C-contiguous, aligned, native float32 array is borrowed — the
//! kernels read the caller's memory, nothing is allocated or copied — and is
//! read while the GIL is held, so no Python code writes it meanwhile. Any
//! other real-valued array is staged: converted and copied once, straight
//! into an I/O-arena buffer (counted in the I/O arena's `copies`), unless
//! the caller asked `require_borrow=True`, in which case it is refused.
//!
//! Outputs: each declared output leaves its run (`ArenaRun`) as an `IoLease`
//! and becomes a NumPy array whose base owns that lease (see `export`), so
//! it survives `del session`, `del io_arena`, and later runs.

use crate::arenas::{ExecutionArena, IoArena, ALIGN};
use crate::errors::{net_err, session_err, DtypeError, LayoutError, ShapeError};
use crate::export::{array_over, carray_view, Dtype, ExportedBuffer};
use numpy::npyffi::{self, npy_intp, PY_ARRAY_API};
use numpy::{
    PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyKeyError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use warmarena::handle::ValueMemory;
use warmarena::session::{ArenaRun, Graph, Session as RustSession};
use warmarena_net::{bytes::as_bytes, Net, NetConfig};

/// What the last run's kernels read for one input.
#[derive(Debug, Clone)]
struct InputSeen {
    name: String,
    address: usize,
    borrowed: bool,
}

/// The example network, compiled for running over persistent arenas.
#[pyclass(module = "warmarena")]
pub struct Session {
    net: Net,
    graph: Graph,
    inner: RustSession,
    exec: Py<ExecutionArena>,
    io: Py<IoArena>,
    last_inputs: Vec<InputSeen>,
}

/// The network's shape and seed from a graph spec: `"example"` (or
/// `"standard"`), `"tiny"`, or a dict of `in_channels`, `channels`, `size`,
/// `classes`, `seed` and `base` (a name to start from).
fn parse_spec(spec: &Bound<'_, PyAny>) -> PyResult<(NetConfig, u64)> {
    let named = |name: &str| -> PyResult<NetConfig> {
        match name {
            "example" | "standard" => Ok(NetConfig::standard()),
            "tiny" => Ok(NetConfig::tiny()),
            other => Err(PyValueError::new_err(format!(
                "unknown graph spec {other:?}: use \"example\", \"tiny\" or a dict"
            ))),
        }
    };
    if let Ok(s) = spec.cast::<PyString>() {
        return Ok((named(s.to_str()?)?, 0));
    }
    let d = spec.cast::<PyDict>().map_err(|_| {
        PyValueError::new_err(format!(
            "graph_spec must be a name or a dict, not {}",
            spec.get_type()
        ))
    })?;
    let mut cfg = NetConfig::standard();
    let mut seed = 0u64;
    if let Some(base) = d.get_item("base")? {
        cfg = named(base.extract::<&str>()?)?;
    }
    for (k, v) in d.iter() {
        let key: String = k.extract()?;
        let field = match key.as_str() {
            "base" => continue,
            "seed" => {
                seed = v.extract()?;
                continue;
            }
            "in_channels" => &mut cfg.in_channels,
            "channels" => &mut cfg.channels,
            "size" => &mut cfg.size,
            "classes" => &mut cfg.classes,
            other => {
                return Err(PyValueError::new_err(format!(
                    "unknown graph spec key {other:?}: use base, in_channels, channels, size, classes, seed"
                )))
            }
        };
        *field = v.extract().map_err(|_| {
            PyValueError::new_err(format!("graph spec {key} must be a positive int, not {v}"))
        })?;
    }
    let c = cfg;
    if c.in_channels == 0 || c.channels == 0 || c.size == 0 || c.classes == 0 {
        return Err(PyValueError::new_err(format!(
            "every extent of the network must be positive: {c:?}"
        )));
    }
    if c.size % 2 != 0 {
        return Err(PyValueError::new_err(format!(
            "size must be even (the head pools 2x2), not {}",
            c.size
        )));
    }
    let too_big = [c.in_channels, c.channels, c.size, c.classes]
        .iter()
        .try_fold(1usize, |acc, &x| acc.checked_mul(x))
        .is_none_or(|n| n > 1 << 32);
    if too_big {
        return Err(PyValueError::new_err(format!("network too large: {c:?}")));
    }
    Ok((c, seed))
}

/// The input as an ndarray (other objects go through `numpy.asarray`).
fn as_ndarray<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyUntypedArray>> {
    if let Ok(a) = obj.cast::<PyUntypedArray>() {
        return Ok(a.clone());
    }
    let np = obj.py().import("numpy")?;
    let a = np.call_method1("asarray", (obj,))?;
    Ok(a.cast_into::<PyUntypedArray>()?)
}

/// Copies (and converts) `src` into `dst`, a C-contiguous float32 buffer of
/// `src`'s shape, through a temporary NumPy view of `dst`.
fn copy_into_f32(src: &Bound<'_, PyUntypedArray>, dst: &mut [u8]) -> PyResult<()> {
    let py = src.py();
    let mut dims: Vec<npy_intp> = src.shape().iter().map(|&d| d as npy_intp).collect();
    // SAFETY: attached to the interpreter; `dst` holds `src.len()` float32s,
    // is 64-byte aligned and outlives the view, which has no base and no
    // OWNDATA flag (NumPy never frees `dst`) and is dropped before returning.
    // `CopyInto` handles strides, byte order and casting.
    unsafe {
        let view = carray_view(
            py,
            Dtype::f32(py).typenum,
            &mut dims,
            dst.as_mut_ptr().cast(),
        )?;
        if PY_ARRAY_API.PyArray_CopyInto(
            py,
            view.as_ptr() as *mut npyffi::PyArrayObject,
            src.as_ptr() as *mut npyffi::PyArrayObject,
        ) < 0
        {
            return Err(PyErr::fetch(py));
        }
    }
    Ok(())
}

impl Session {
    fn check_input(&self, name: &str, a: &Bound<'_, PyUntypedArray>) -> PyResult<()> {
        let c = self.net.config;
        let shape = a.shape();
        let want = [c.in_channels, c.size, c.size];
        if shape != want && shape != [1, c.in_channels, c.size, c.size] {
            return Err(ShapeError::new_err(format!(
                "input {name:?} has shape {shape:?}; the network takes {want:?} (or with a leading batch of 1)"
            )));
        }
        let kind = a.dtype().kind();
        if !matches!(kind, b'b' | b'i' | b'u' | b'f') {
            return Err(DtypeError::new_err(format!(
                "input {name:?} has dtype {}; the network takes float32 (bool, int, uint and float inputs are converted)",
                a.dtype()
            )));
        }
        Ok(())
    }

    fn outputs_dict<'py>(
        &self,
        py: Python<'py>,
        ctx: &mut ArenaRun<'_, '_>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let c = self.net.config;
        let f32 = Dtype::f32(py);
        let out = PyDict::new(py);
        for (name, len) in [("features", c.channels), ("logits", c.classes)] {
            let lease = ctx.take_output(name).map_err(session_err)?;
            let buf = Bound::new(py, ExportedBuffer::new(lease, vec![len as i64], f32))?;
            out.set_item(name, array_over(py, buf)?)?;
        }
        Ok(out)
    }
}

#[pymethods]
impl Session {
    /// Compiles the example network (`graph_spec`: `"example"`, `"tiny"`, or
    /// a dict of `in_channels`, `channels`, `size`, `classes`, `seed`,
    /// `base`) over `exec_arena` and `io_arena` — new persistent arenas when
    /// not given, so retained buffers survive from run to run.
    #[new]
    #[pyo3(signature = (graph_spec, exec_arena=None, io_arena=None))]
    fn new(
        py: Python<'_>,
        graph_spec: &Bound<'_, PyAny>,
        exec_arena: Option<Py<ExecutionArena>>,
        io_arena: Option<Py<IoArena>>,
    ) -> PyResult<Self> {
        let (cfg, seed) = parse_spec(graph_spec)?;
        let exec = match exec_arena {
            Some(a) => a,
            None => Py::new(
                py,
                ExecutionArena {
                    inner: warmarena::ExecutionArena::new(),
                },
            )?,
        };
        let io = match io_arena {
            Some(a) => a,
            None => Py::new(
                py,
                IoArena {
                    inner: warmarena::IoArena::new(),
                },
            )?,
        };
        let graph = Net::graph();
        let inner = RustSession::new(&graph, exec.get().inner.clone(), io.get().inner.clone())
            .map_err(|e| PyValueError::new_err(format!("invalid graph: {e}")))?;
        Ok(Session {
            net: Net::new(cfg, seed),
            graph,
            inner,
            exec,
            io,
            last_inputs: Vec::new(),
        })
    }

    /// Runs the network once: `inputs` maps each graph input name to an
    /// array; returns each declared output as a new float32 array that owns
    /// its I/O buffer. C-contiguous, aligned float32 inputs are borrowed
    /// (no copy); others are staged into the I/O arena unless
    /// `require_borrow` is true, which raises `LayoutError` (non-contiguous
    /// or unaligned) or `DtypeError` (not float32) instead.
    #[pyo3(signature = (inputs, *, require_borrow=false))]
    fn run<'py>(
        &mut self,
        py: Python<'py>,
        inputs: &Bound<'py, PyDict>,
        require_borrow: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        for k in inputs.keys() {
            let k: String = k.extract()?;
            if !self.graph.inputs.contains(&k) {
                return Err(PyKeyError::new_err(format!(
                    "{k:?} is not a graph input (inputs: {:?})",
                    self.graph.inputs
                )));
            }
        }
        let name = "image";
        let obj = inputs
            .get_item(name)?
            .ok_or_else(|| PyKeyError::new_err(format!("missing graph input {name:?}")))?;
        let arr = as_ndarray(&obj)?;
        self.check_input(name, &arr)?;
        let dtype_ok = Dtype::from_descr(&arr.dtype()) == Some(Dtype::f32(py));
        let layout_ok = arr.is_c_contiguous() && arr.is_aligned();
        if require_borrow && !dtype_ok {
            return Err(DtypeError::new_err(format!(
                "input {name:?} has dtype {}; a borrowed input must be native float32",
                arr.dtype()
            )));
        }
        if require_borrow && !layout_ok {
            return Err(LayoutError::new_err(format!(
                "input {name:?} is not C-contiguous and aligned (strides {:?}); it cannot be borrowed without a copy",
                arr.strides()
            )));
        }
        // The guard keeps the borrow registered with rust-numpy while the
        // kernels read it; it must outlive the run.
        let guard = if dtype_ok && layout_ok {
            let typed = arr.cast::<PyArrayDyn<f32>>()?;
            Some(typed.try_readonly().map_err(|e| {
                LayoutError::new_err(format!("input {name:?} cannot be borrowed: {e}"))
            })?)
        } else {
            None
        };
        let mut ctx = ArenaRun::new(&self.inner);
        match &guard {
            Some(g) => {
                let floats = g
                    .as_slice()
                    .map_err(|e| LayoutError::new_err(format!("input {name:?}: {e}")))?;
                ctx.borrow_input(name, as_bytes(floats))
                    .map_err(session_err)?;
            }
            None => {
                let mut result = Ok(());
                ctx.stage_input_with(name, arr.len() * 4, ALIGN, |dst| {
                    result = copy_into_f32(&arr, dst);
                })
                .map_err(session_err)?;
                result?;
            }
        }
        let seen = ctx.value(name).map(|m| InputSeen {
            name: name.to_string(),
            address: m.as_ptr() as usize,
            borrowed: matches!(m, ValueMemory::Borrowed(_)),
        });
        self.last_inputs.clear();
        self.last_inputs.extend(seen);
        self.net.execute(&mut ctx).map_err(net_err)?;
        let out = self.outputs_dict(py, &mut ctx)?;
        drop(ctx);
        drop(guard);
        Ok(out)
    }

    /// The same network on plain vectors (the Rust reference, with copies):
    /// `{"features": ..., "logits": ...}`, to check `run` against.
    fn reference<'py>(
        &self,
        py: Python<'py>,
        inputs: &Bound<'py, PyDict>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let name = "image";
        let obj = inputs
            .get_item(name)?
            .ok_or_else(|| PyKeyError::new_err(format!("missing graph input {name:?}")))?;
        let arr = as_ndarray(&obj)?;
        self.check_input(name, &arr)?;
        let np = py.import("numpy")?;
        let flat = np.call_method1("ascontiguousarray", (arr, "float32"))?;
        let flat = flat.cast::<PyArrayDyn<f32>>()?.readonly();
        let image = flat
            .as_slice()
            .map_err(|e| LayoutError::new_err(e.to_string()))?;
        let (features, logits) = self.net.reference(image);
        let out = PyDict::new(py);
        out.set_item("features", numpy::PyArray1::from_vec(py, features))?;
        out.set_item("logits", numpy::PyArray1::from_vec(py, logits))?;
        Ok(out)
    }

    /// An example input for this network (float32, deterministic in `seed`).
    #[pyo3(signature = (seed=0))]
    fn example_input<'py>(&self, py: Python<'py>, seed: u64) -> PyResult<Bound<'py, PyAny>> {
        let c = self.net.config;
        let flat = numpy::PyArray1::from_vec(py, self.net.example_input(seed));
        flat.reshape([c.in_channels, c.size, c.size])
            .map(Bound::into_any)
    }

    /// What the kernels read in the last run, per input:
    /// `{name: (address, borrowed)}` — a borrowed input's address is the
    /// caller's data pointer; a staged one's is its I/O-arena copy.
    #[getter]
    fn last_run_inputs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for s in &self.last_inputs {
            d.set_item(&s.name, (s.address, s.borrowed))?;
        }
        Ok(d)
    }

    /// The session's execution arena (the one given, or the one it made).
    #[getter]
    fn exec_arena(&self, py: Python<'_>) -> Py<ExecutionArena> {
        self.exec.clone_ref(py)
    }

    /// The session's I/O arena (the one given, or the one it made).
    #[getter]
    fn io_arena(&self, py: Python<'_>) -> Py<IoArena> {
        self.io.clone_ref(py)
    }

    /// The network's shape and seed-independent sizes: `in_channels`,
    /// `channels`, `size`, `classes`, and `input_shape`.
    #[getter]
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let c = self.net.config;
        let d = PyDict::new(py);
        d.set_item("in_channels", c.in_channels)?;
        d.set_item("channels", c.channels)?;
        d.set_item("size", c.size)?;
        d.set_item("classes", c.classes)?;
        d.set_item("input_shape", (c.in_channels, c.size, c.size))?;
        Ok(d)
    }

    /// The graph: `{"inputs": [...], "outputs": [...], "nodes": [(name, inputs, outputs), ...]}`.
    #[getter]
    fn graph<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("inputs", PyList::new(py, &self.graph.inputs)?)?;
        d.set_item("outputs", PyList::new(py, &self.graph.outputs)?)?;
        let nodes = PyList::empty(py);
        for n in &self.graph.nodes {
            nodes.append((&n.name, n.inputs.clone(), n.outputs.clone()))?;
        }
        d.set_item("nodes", nodes)?;
        Ok(d)
    }
}
