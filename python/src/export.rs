//! `ExportedBuffer`: the owner of one exported I/O buffer on the Python side.
//!
//! Every array the bindings hand out is a plain `numpy.ndarray` whose data
//! pointer is the lease's buffer and whose `base` is an `ExportedBuffer`
//! holding the [`IoLease`]. NumPy keeps the base alive exactly as long as
//! the array (and every view of it), so when the last of them goes the
//! lease drops and the buffer returns to its I/O arena — or, if the arena
//! is gone, to the OS with the arena's state. No copy is made at any step.
//!
//! The same object speaks DLPack: `__dlpack__` clones the lease into a
//! `DLManagedTensorVersioned` (`IoLease::into_dlpack`) inside a capsule
//! named `dltensor_versioned`, or, for a consumer that asks for no
//! `max_version` or a major version below 1, into a legacy `DLManagedTensor`
//! inside a capsule named `dltensor`. A consumer renames the capsule when it
//! takes the tensor and later calls the deleter; a capsule never consumed
//! calls the deleter from its destructor.
//!
//! Writing: the array is writable, like any NumPy result; the crate never
//! holds a Rust reference into an exported buffer except a borrowed run
//! input, which is read under the GIL (see `session`).

use crate::errors::{DtypeError, ShapeError};
use core::ffi::{c_char, c_int, c_void, CStr};
use numpy::npyffi::{self, npy_intp, NpyTypes, PY_ARRAY_API};
use numpy::{PyArrayDescr, PyArrayDescrMethods};
use pyo3::exceptions::PyBufferError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use warmarena::handle::dlpack::{DLDataType, DLDevice, DLManagedTensorVersioned, DLTensor, DL_CPU};
use warmarena::IoLease;

/// The name of a DLPack 1.x capsule, and what a consumer renames it to.
const VERSIONED: &CStr = c"dltensor_versioned";
/// The name of a legacy (pre-1.0) DLPack capsule.
const LEGACY: &CStr = c"dltensor";

/// An element type both NumPy and DLPack know: the DLPack code, width, and
/// the NumPy type number to build arrays with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dtype {
    /// The DLPack type.
    pub dl: DLDataType,
    /// NumPy's type number (`NPY_FLOAT`, ...).
    pub typenum: c_int,
    /// The NumPy name.
    pub name: &'static str,
}

/// What `IoArena.empty` and DLPack export support.
pub const SUPPORTED: &str =
    "bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, float32, float64";

impl Dtype {
    /// The dtype of `descr`, if supported (native byte order, no fields).
    pub fn from_descr(descr: &Bound<'_, PyArrayDescr>) -> Option<Dtype> {
        if descr.has_fields() || descr.has_subarray() || descr.is_native_byteorder() == Some(false)
        {
            return None;
        }
        let size = descr.itemsize();
        let (code, name) = match (descr.kind(), size) {
            (b'b', 1) => (6, "bool"),
            (b'i', 1) => (0, "int8"),
            (b'i', 2) => (0, "int16"),
            (b'i', 4) => (0, "int32"),
            (b'i', 8) => (0, "int64"),
            (b'u', 1) => (1, "uint8"),
            (b'u', 2) => (1, "uint16"),
            (b'u', 4) => (1, "uint32"),
            (b'u', 8) => (1, "uint64"),
            (b'f', 2) => (2, "float16"),
            (b'f', 4) => (2, "float32"),
            (b'f', 8) => (2, "float64"),
            _ => return None,
        };
        Some(Dtype {
            dl: DLDataType {
                code,
                bits: (size * 8) as u8,
                lanes: 1,
            },
            typenum: descr.num(),
            name,
        })
    }

    /// The dtype named by `obj` (anything `numpy.dtype()` takes).
    pub fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<Dtype> {
        let descr = PyArrayDescr::new(obj.py(), obj)
            .map_err(|e| DtypeError::new_err(format!("not a dtype: {obj} ({e})")))?;
        Dtype::from_descr(&descr).ok_or_else(|| {
            DtypeError::new_err(format!(
                "unsupported dtype {descr}: supported are {SUPPORTED} (native byte order)"
            ))
        })
    }

    /// `float32`, the example network's only type.
    pub fn f32(py: Python<'_>) -> Dtype {
        Dtype::from_descr(&numpy::dtype::<f32>(py)).expect("float32 is supported")
    }

    /// Bytes per element.
    pub fn itemsize(&self) -> usize {
        self.dl.bits as usize / 8
    }
}

/// Bytes of a C-contiguous array of `dims` and `dt`.
pub(crate) fn byte_len(dims: &[i64], dt: Dtype) -> PyResult<usize> {
    let mut n = dt.itemsize();
    for &d in dims {
        let d = usize::try_from(d)
            .map_err(|_| ShapeError::new_err(format!("shape {dims:?} has a negative extent")))?;
        n = n
            .checked_mul(d)
            .filter(|&n| n <= isize::MAX as usize)
            .ok_or_else(|| ShapeError::new_err(format!("shape {dims:?} overflows")))?;
    }
    Ok(n)
}

/// The owner of one exported I/O-arena buffer: the base object of the
/// NumPy arrays made over it, and a DLPack producer.
#[pyclass(frozen, module = "warmarena")]
pub struct ExportedBuffer {
    lease: IoLease,
    shape: Vec<i64>,
    dtype: Dtype,
}

impl ExportedBuffer {
    /// Wraps `lease`, viewed as a C-contiguous array of `shape` and `dtype`
    /// (which the caller checked fit the lease).
    pub(crate) fn new(lease: IoLease, shape: Vec<i64>, dtype: Dtype) -> Self {
        ExportedBuffer {
            lease,
            shape,
            dtype,
        }
    }
}

/// A C-contiguous NumPy array of `dims` and NumPy type `typenum` over the
/// memory at `data`, without a base and without owning it (NumPy never
/// frees `data`).
///
/// # Safety
/// Attached to the interpreter (`py`); `data` points to at least the
/// array's bytes, aligned for the type, and outlives the returned array
/// (or the caller gives the array a base that keeps it alive).
pub(crate) unsafe fn carray_view<'py>(
    py: Python<'py>,
    typenum: c_int,
    dims: &mut [npy_intp],
    data: *mut c_void,
) -> PyResult<Bound<'py, PyAny>> {
    // SAFETY: the NumPy C API is initialized by `PY_ARRAY_API` on first use;
    // `DescrFromType` returns a new reference that `NewFromDescr` steals;
    // NumPy copies `dims`; `data` is as the caller promises.
    unsafe {
        let descr = PY_ARRAY_API.PyArray_DescrFromType(py, typenum);
        if descr.is_null() {
            return Err(PyErr::fetch(py));
        }
        let arr = PY_ARRAY_API.PyArray_NewFromDescr(
            py,
            npyffi::get_type_object(py, NpyTypes::PyArray_Type),
            descr,
            dims.len() as c_int,
            dims.as_mut_ptr(),
            core::ptr::null_mut(),
            data,
            npyffi::NPY_ARRAY_CARRAY,
            core::ptr::null_mut(),
        );
        if arr.is_null() {
            return Err(PyErr::fetch(py));
        }
        Ok(Bound::from_owned_ptr(py, arr))
    }
}

/// A NumPy array over `buf`'s buffer (no copy) with `buf` as its base.
pub(crate) fn array_over<'py>(
    py: Python<'py>,
    buf: Bound<'py, ExportedBuffer>,
) -> PyResult<Bound<'py, PyAny>> {
    let b = buf.get();
    let mut dims: Vec<npy_intp> = b.shape.iter().map(|&d| d as npy_intp).collect();
    let data = b.lease.as_ptr() as *mut c_void;
    // SAFETY: attached to the interpreter (`py`). `data` points to at least
    // `byte_len(shape, dtype)` bytes (checked by the caller), 64-byte
    // aligned, and stays valid while `buf` lives — which `SetBaseObject`
    // ties to the array's lifetime.
    unsafe {
        let arr = carray_view(py, b.dtype.typenum, &mut dims, data)?;
        // `SetBaseObject` steals the reference to the base, even on failure.
        if PY_ARRAY_API.PyArray_SetBaseObject(
            py,
            arr.as_ptr() as *mut npyffi::PyArrayObject,
            buf.into_ptr(),
        ) < 0
        {
            return Err(PyErr::fetch(py));
        }
        Ok(arr)
    }
}

/// The legacy (DLPack 0.x) managed tensor, for consumers that ask for it.
#[repr(C)]
struct DLManagedTensor {
    dl_tensor: DLTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

/// The legacy deleter: releases the versioned tensor it wraps, then itself.
unsafe extern "C" fn delete_legacy(t: *mut DLManagedTensor) {
    if t.is_null() {
        return;
    }
    // SAFETY: `t` was boxed by `legacy_from` and DLPack calls the deleter
    // once; its `manager_ctx` is the live versioned tensor it wraps.
    unsafe {
        let legacy = Box::from_raw(t);
        let inner = legacy.manager_ctx as *mut DLManagedTensorVersioned;
        if let Some(d) = (*inner).deleter {
            d(inner);
        }
    }
}

/// Wraps a live versioned tensor in a legacy one sharing its data and shape.
///
/// # Safety
/// `v` must be a live tensor from `IoLease::into_dlpack`; ownership moves
/// into the returned tensor.
unsafe fn legacy_from(v: *mut DLManagedTensorVersioned) -> *mut DLManagedTensor {
    // SAFETY: `v` is live (caller's contract); its shape array lives until
    // its deleter runs, which only the legacy deleter does.
    let t = unsafe { &(*v).dl_tensor };
    Box::into_raw(Box::new(DLManagedTensor {
        dl_tensor: DLTensor {
            data: t.data,
            device: t.device,
            ndim: t.ndim,
            dtype: t.dtype,
            shape: t.shape,
            strides: t.strides,
            byte_offset: t.byte_offset,
        },
        manager_ctx: v as *mut c_void,
        deleter: Some(delete_legacy),
    }))
}

/// Destructor of a `dltensor_versioned` capsule: frees the tensor if no
/// consumer took it (a consumer renames the capsule when it does).
unsafe extern "C" fn drop_versioned_capsule(cap: *mut ffi::PyObject) {
    // SAFETY: called by Python with the capsule being destroyed; the
    // pointer of a capsule still named `dltensor_versioned` is the tensor
    // made in `__dlpack__`, not yet owned by anyone else.
    unsafe {
        if ffi::PyCapsule_IsValid(cap, VERSIONED.as_ptr()) == 1 {
            let t =
                ffi::PyCapsule_GetPointer(cap, VERSIONED.as_ptr()) as *mut DLManagedTensorVersioned;
            if let Some(d) = (*t).deleter {
                d(t);
            }
        }
    }
}

/// Destructor of a legacy `dltensor` capsule (as above).
unsafe extern "C" fn drop_legacy_capsule(cap: *mut ffi::PyObject) {
    // SAFETY: as in `drop_versioned_capsule`, for a capsule made by
    // `__dlpack__` around a legacy tensor.
    unsafe {
        if ffi::PyCapsule_IsValid(cap, LEGACY.as_ptr()) == 1 {
            let t = ffi::PyCapsule_GetPointer(cap, LEGACY.as_ptr()) as *mut DLManagedTensor;
            if let Some(d) = (*t).deleter {
                d(t);
            }
        }
    }
}

/// Calls the deleter of a versioned tensor no capsule took.
///
/// # Safety
/// `t` must be a live `DLManagedTensorVersioned` owned by the caller.
unsafe fn release_versioned(t: *mut c_void) {
    let t = t as *mut DLManagedTensorVersioned;
    // SAFETY: caller's contract; the deleter is called once.
    unsafe {
        if let Some(d) = (*t).deleter {
            d(t);
        }
    }
}

/// Calls the deleter of a legacy tensor no capsule took.
///
/// # Safety
/// `t` must be a live tensor from `legacy_from` owned by the caller.
unsafe fn release_legacy(t: *mut c_void) {
    // SAFETY: caller's contract.
    unsafe { delete_legacy(t as *mut DLManagedTensor) }
}

/// A new capsule named `name` around `ptr`, freed by `destructor` unless consumed.
///
/// # Safety
/// `ptr` must be what `destructor` expects under `name`.
unsafe fn capsule<'py>(
    py: Python<'py>,
    ptr: *mut c_void,
    name: &'static CStr,
    destructor: unsafe extern "C" fn(*mut ffi::PyObject),
) -> Option<Bound<'py, PyAny>> {
    // SAFETY: `name` is static, so it outlives the capsule as required.
    unsafe {
        let cap = ffi::PyCapsule_New(ptr, name.as_ptr() as *const c_char, Some(destructor));
        Bound::from_owned_ptr_or_opt(py, cap)
    }
}

#[pymethods]
impl ExportedBuffer {
    /// The address of the buffer's first byte.
    #[getter]
    fn address(&self) -> usize {
        self.lease.as_ptr() as usize
    }

    /// Bytes the exported array covers.
    #[getter]
    fn nbytes(&self) -> usize {
        self.shape.iter().product::<i64>() as usize * self.dtype.itemsize()
    }

    /// Bytes the buffer holds (its size class): what the I/O arena gets
    /// back when the last owner goes.
    #[getter]
    fn capacity(&self) -> usize {
        self.lease.capacity()
    }

    /// The array's shape.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.shape)
    }

    /// The array's dtype.
    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(PyArrayDescr::new(py, self.dtype.name)?.into_any())
    }

    /// How many owners share the buffer (this object, plus one per live
    /// DLPack export).
    #[getter]
    fn owners(&self) -> usize {
        self.lease.owners()
    }

    /// The buffer as a DLPack capsule, without copying: a new owner of the
    /// lease travels in the tensor. CPU only; `stream` must be `None` (or
    /// -1); `copy=True` is refused (`BufferError`), since exporting never
    /// copies. With `max_version` of major 1 or more the capsule is
    /// `dltensor_versioned` (DLPack 1.x, read-only flag set because the
    /// buffer is shared with this object); otherwise a legacy `dltensor`.
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        stream: Option<&Bound<'py, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if let Some(s) = stream {
            if !s.is_none() && s.extract::<i64>().ok() != Some(-1) {
                return Err(PyBufferError::new_err(format!(
                    "stream must be None for a CPU buffer, not {s}"
                )));
            }
        }
        if let Some(d) = dl_device {
            if d != (DL_CPU, 0) {
                return Err(PyBufferError::new_err(format!(
                    "the buffer is on the CPU (1, 0); cannot export to device {d:?} without a copy"
                )));
            }
        }
        if copy == Some(true) {
            return Err(PyBufferError::new_err(
                "warmarena exports without copying; copy=True is not supported",
            ));
        }
        let tensor = self
            .lease
            .clone()
            .into_dlpack(self.dtype.dl, &self.shape)
            .map_err(|e| PyBufferError::new_err(e.to_string()))?
            .as_ptr();
        let versioned = max_version.is_some_and(|(major, _)| major >= 1);
        // SAFETY: `tensor` is a live tensor from `into_dlpack`, handed to
        // exactly one capsule; if the capsule cannot be made, its deleter
        // runs here instead, so the lease clone is released either way.
        unsafe {
            let (ptr, name, destructor, deleter): (*mut c_void, _, _, unsafe fn(*mut c_void)) =
                if versioned {
                    (
                        tensor as *mut c_void,
                        VERSIONED,
                        drop_versioned_capsule as unsafe extern "C" fn(_),
                        release_versioned,
                    )
                } else {
                    (
                        legacy_from(tensor) as *mut c_void,
                        LEGACY,
                        drop_legacy_capsule as unsafe extern "C" fn(_),
                        release_legacy,
                    )
                };
            let cap = capsule(py, ptr, name, destructor);
            if cap.is_none() {
                deleter(ptr);
            }
            cap.ok_or_else(|| PyErr::fetch(py))
        }
    }

    /// `(kDLCPU, 0)`: the buffer is host memory.
    fn __dlpack_device__(&self) -> (i32, i32) {
        let d = DLDevice {
            device_type: DL_CPU,
            device_id: 0,
        };
        (d.device_type, d.device_id)
    }

    fn __repr__(&self) -> String {
        format!(
            "ExportedBuffer(address={:#x}, shape={:?}, dtype={}, capacity={}, owners={})",
            self.lease.as_ptr() as usize,
            self.shape,
            self.dtype.name,
            self.lease.capacity(),
            self.lease.owners()
        )
    }
}
