//! NumPy's own data buffers from an arena: a NEP 49 data memory handler.
//!
//! NumPy allocates every array's data through the "data memory handler" of
//! the current context (a context variable, so per thread and per asyncio
//! task), and stores that handler in each array it allocates, so the array
//! is freed (or resized) by the same handler whatever the context is then.
//! A handler is a `PyDataMem_Handler` struct in a capsule named
//! `mem_handler`; `PyDataMem_SetHandler` (slot 304 of NumPy's C API table)
//! installs one for the current context and returns the previous one.
//!
//! Here the handler's `ctx` owns a handle to an execution or I/O arena:
//! - `malloc`: a buffer from the arena, 64-byte aligned, given up as a raw
//!   buffer (`Allocation::into_raw`); every size goes to the arena, small
//!   ones to its small classes (`docs/guide/python.md`, "Small arrays go to
//!   the arena too", says why). A request the arena refuses falls back to
//!   the C allocator (counted).
//! - `calloc`: the same, zeroed unless the pages are fresh from the OS.
//! - `realloc`: in place when the new size fits the buffer's capacity,
//!   otherwise a new buffer from the same arena, a copy, and the old one
//!   returned; C-allocator memory stays with the C allocator.
//! - `free`: the buffer's arena is found by address (`free_raw`), so it
//!   works on any thread, without the GIL, after the scope closed and after
//!   every arena object is gone; anything else goes to the C `free`.
//!
//! Lifetime: every array NumPy allocates through the handler holds a
//! reference to the capsule, and the capsule owns the context and its arena
//! handle, so the arena outlives every array made in the scope (and each
//! live raw buffer keeps the arena's state alive on its own as well).
//! The callbacks never touch Python objects: NumPy may call them with the
//! GIL released.

use crate::arenas::{self, ALIGN};
use crate::errors::ScopeError;
use core::ffi::{c_char, c_void, CStr};
use core::sync::atomic::{AtomicU64, Ordering};
use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyDict;
use warmarena::handle::{free_raw, raw_capacity};
use warmarena::{Allocation, ArenaError};

/// The capsule name NumPy requires for a handler.
const HANDLER_CAPSULE: &CStr = c"mem_handler";
/// The slot of `PyDataMem_SetHandler` in NumPy's C API table
/// (`__multiarray_api.h`, NumPy >= 1.22).
const SET_HANDLER_SLOT: usize = 304;

type MallocFn = unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void;
type CallocFn = unsafe extern "C" fn(*mut c_void, usize, usize) -> *mut c_void;
type ReallocFn = unsafe extern "C" fn(*mut c_void, *mut c_void, usize) -> *mut c_void;
type FreeFn = unsafe extern "C" fn(*mut c_void, *mut c_void, usize);

/// `PyDataMemAllocator` (numpy/ndarraytypes.h), version 1.
#[repr(C)]
struct DataMemAllocator {
    ctx: *mut c_void,
    malloc: MallocFn,
    calloc: CallocFn,
    realloc: ReallocFn,
    free: FreeFn,
}

/// `PyDataMem_Handler` (numpy/ndarraytypes.h): a 127-byte name, the
/// version byte, then the allocator.
#[repr(C)]
struct DataMemHandler {
    name: [c_char; 127],
    version: u8,
    allocator: DataMemAllocator,
}

const _: () = assert!(core::mem::offset_of!(DataMemHandler, allocator) == 128);

extern "C" {
    fn malloc(size: usize) -> *mut c_void;
    fn calloc(nelem: usize, elsize: usize) -> *mut c_void;
    fn realloc(ptr: *mut c_void, size: usize) -> *mut c_void;
    fn free(ptr: *mut c_void);
}

/// The arena a handler serves from.
enum Source {
    Exec(warmarena::ExecutionArena),
    Io(warmarena::IoArena),
}

impl Source {
    fn allocate(&self, size: usize) -> Result<Allocation, ArenaError> {
        match self {
            Source::Exec(a) => a.allocate(size, ALIGN),
            Source::Io(a) => a.allocate(size, ALIGN),
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Source::Exec(_) => "ExecutionArena",
            Source::Io(_) => "IoArena",
        }
    }
}

/// What one handler did, over all threads (relaxed counters: a snapshot).
#[derive(Default)]
struct Counters {
    arena_allocs: AtomicU64,
    arena_bytes: AtomicU64,
    zeroed: AtomicU64,
    fallback_allocs: AtomicU64,
    arena_frees: AtomicU64,
    fallback_frees: AtomicU64,
    realloc_in_place: AtomicU64,
    realloc_moved: AtomicU64,
}

fn bump(c: &AtomicU64, by: u64) {
    c.fetch_add(by, Ordering::Relaxed);
}

/// The handler's context: its arena and counters.
struct Ctx {
    source: Source,
    counters: Counters,
}

/// The capsule's payload: NumPy reads `handler` (the first field), the
/// callbacks read `ctx` through `handler.allocator.ctx`.
#[repr(C)]
struct HandlerBox {
    handler: DataMemHandler,
    ctx: Ctx,
}

impl Ctx {
    /// A buffer of `size` bytes (at least 1) from the arena, or from the C
    /// allocator if the arena refuses; null if both refuse.
    fn alloc(&self, size: usize, zeroed: bool) -> *mut c_void {
        let size = size.max(1);
        let got = self.source.allocate(size).map(|a| {
            let fresh = a.is_zeroed();
            (a.into_raw(), fresh)
        });
        if let Ok((Ok(p), fresh)) = got {
            bump(&self.counters.arena_allocs, 1);
            bump(&self.counters.arena_bytes, size as u64);
            if zeroed && !fresh {
                // SAFETY: the buffer holds at least `size` bytes, ours now.
                unsafe { p.as_ptr().write_bytes(0, size) };
                bump(&self.counters.zeroed, 1);
            }
            return p.as_ptr().cast();
        }
        // Refused (or not findable by address: the allocation went back to
        // its arena when `got` was dropped).
        bump(&self.counters.fallback_allocs, 1);
        // SAFETY: plain C allocation calls with a non-zero size.
        unsafe {
            if zeroed {
                calloc(1, size)
            } else {
                malloc(size)
            }
        }
    }

    /// # Safety
    /// `ptr` is null or a live buffer from this handler (arena or C).
    unsafe fn free(&self, ptr: *mut c_void) {
        if ptr.is_null() {
            return;
        }
        // SAFETY: caller's contract: an arena pointer is a live raw buffer.
        if unsafe { free_raw(ptr.cast()) } {
            bump(&self.counters.arena_frees, 1);
        } else {
            bump(&self.counters.fallback_frees, 1);
            // SAFETY: not arena memory, so it came from the C allocator.
            unsafe { free(ptr) };
        }
    }

    /// # Safety
    /// As [`Ctx::free`].
    unsafe fn realloc(&self, ptr: *mut c_void, new_size: usize) -> *mut c_void {
        if ptr.is_null() {
            return self.alloc(new_size, false);
        }
        let new_size = new_size.max(1);
        // SAFETY: `ptr` is ours and live (caller's contract).
        match unsafe { raw_capacity(ptr.cast()) } {
            Some(cap) if new_size <= cap => {
                bump(&self.counters.realloc_in_place, 1);
                ptr
            }
            Some(cap) => {
                let fresh = self.alloc(new_size, false);
                if fresh.is_null() {
                    return fresh; // the old buffer stays valid, as C realloc
                }
                // SAFETY: distinct live buffers; the old one holds `cap`
                // bytes and the new one more.
                unsafe { core::ptr::copy_nonoverlapping(ptr.cast::<u8>(), fresh.cast(), cap) };
                bump(&self.counters.realloc_moved, 1);
                // SAFETY: `ptr` is a live raw buffer, not used again.
                unsafe { free_raw(ptr.cast()) };
                bump(&self.counters.arena_frees, 1);
                fresh
            }
            // SAFETY: not arena memory, so it came from the C allocator.
            None => unsafe { realloc(ptr, new_size) },
        }
    }
}

/// # Safety (all four callbacks)
/// `ctx` is the `Ctx` of a live `HandlerBox` (NumPy passes the allocator's
/// `ctx`, and the array holding the pointer holds the capsule).
unsafe extern "C" fn handler_malloc(ctx: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: see above.
    let ctx = unsafe { &*(ctx as *const Ctx) };
    ctx.alloc(size, false)
}

unsafe extern "C" fn handler_calloc(ctx: *mut c_void, nelem: usize, elsize: usize) -> *mut c_void {
    // SAFETY: see `handler_malloc`.
    let ctx = unsafe { &*(ctx as *const Ctx) };
    match nelem.checked_mul(elsize) {
        Some(n) => ctx.alloc(n, true),
        None => core::ptr::null_mut(),
    }
}

unsafe extern "C" fn handler_realloc(
    ctx: *mut c_void,
    ptr: *mut c_void,
    new_size: usize,
) -> *mut c_void {
    // SAFETY: see `handler_malloc`; NumPy passes a pointer this handler made.
    unsafe { (*(ctx as *const Ctx)).realloc(ptr, new_size) }
}

unsafe extern "C" fn handler_free(ctx: *mut c_void, ptr: *mut c_void, _size: usize) {
    // SAFETY: see `handler_realloc`.
    unsafe { (*(ctx as *const Ctx)).free(ptr) }
}

/// Destructor of a handler capsule: frees the box (and its arena handle).
unsafe extern "C" fn drop_handler_capsule(cap: *mut ffi::PyObject) {
    // SAFETY: Python calls this once with our capsule, named `mem_handler`,
    // whose pointer is the `HandlerBox` leaked in `handler_capsule`. No
    // array refers to it any more (each holds a reference to the capsule).
    unsafe {
        let p = ffi::PyCapsule_GetPointer(cap, HANDLER_CAPSULE.as_ptr());
        if p.is_null() {
            ffi::PyErr_Clear();
            return;
        }
        drop(Box::from_raw(p as *mut HandlerBox));
    }
}

/// The handler name NumPy reports: `warmarena_<kind>` (at most 126 bytes).
fn handler_name(source: &Source) -> [c_char; 127] {
    let text = format!("warmarena_{}", source.name());
    let mut name = [0 as c_char; 127];
    for (d, s) in name.iter_mut().zip(text.bytes().take(126)) {
        *d = s as c_char;
    }
    name
}

/// A new handler capsule serving from `source`.
fn handler_capsule(py: Python<'_>, source: Source) -> PyResult<Bound<'_, PyAny>> {
    let name = handler_name(&source);
    let mut b = Box::new(HandlerBox {
        handler: DataMemHandler {
            name,
            version: 1,
            allocator: DataMemAllocator {
                ctx: core::ptr::null_mut(),
                malloc: handler_malloc,
                calloc: handler_calloc,
                realloc: handler_realloc,
                free: handler_free,
            },
        },
        ctx: Ctx {
            source,
            counters: Counters::default(),
        },
    });
    b.handler.allocator.ctx = core::ptr::addr_of_mut!(b.ctx).cast();
    let raw = Box::into_raw(b);
    // SAFETY: `raw` is a live box whose first field is the handler NumPy
    // reads; the name is static; the destructor frees the box once.
    unsafe {
        let cap = ffi::PyCapsule_New(
            raw.cast(),
            HANDLER_CAPSULE.as_ptr(),
            Some(drop_handler_capsule),
        );
        if cap.is_null() {
            drop(Box::from_raw(raw));
            return Err(PyErr::fetch(py));
        }
        Ok(Bound::from_owned_ptr(py, cap))
    }
}

/// NumPy's C API table, from the `_ARRAY_API` capsule of its multiarray module.
fn api_table(py: Python<'_>) -> PyResult<*const *const c_void> {
    static TABLE: PyOnceLock<usize> = PyOnceLock::new();
    TABLE
        .get_or_try_init(py, || {
            let module = py
                .import("numpy._core.multiarray")
                .or_else(|_| py.import("numpy.core.multiarray"))?;
            let cap = module.getattr("_ARRAY_API")?;
            // SAFETY: `cap` is a live object; the capsule functions check its type.
            let p = unsafe {
                let name = ffi::PyCapsule_GetName(cap.as_ptr());
                ffi::PyCapsule_GetPointer(cap.as_ptr(), name)
            };
            if p.is_null() {
                return Err(PyErr::fetch(py));
            }
            Ok(p as usize)
        })
        .map(|&p| p as *const *const c_void)
}

/// Makes `handler` (a `mem_handler` capsule, or null for NumPy's default)
/// the current context's handler; returns the previous one.
fn set_handler<'py>(py: Python<'py>, handler: *mut ffi::PyObject) -> PyResult<Bound<'py, PyAny>> {
    let table = api_table(py)?;
    // SAFETY: slot 304 of the table of NumPy >= 1.22 (the package requires
    // 2.0) is `PyObject *PyDataMem_SetHandler(PyObject *)`, which returns a
    // new reference or null with an exception set. Attached (`py`).
    unsafe {
        let f: unsafe extern "C" fn(*mut ffi::PyObject) -> *mut ffi::PyObject =
            core::mem::transmute(*table.add(SET_HANDLER_SLOT));
        Bound::from_owned_ptr_or_err(py, f(handler))
    }
}

/// The arena behind `obj`, or a `TypeError`.
fn source_of(obj: &Bound<'_, PyAny>) -> PyResult<Source> {
    if let Ok(a) = obj.cast::<arenas::ExecutionArena>() {
        return Ok(Source::Exec(a.get().inner.clone()));
    }
    if let Ok(a) = obj.cast::<arenas::IoArena>() {
        return Ok(Source::Io(a.get().inner.clone()));
    }
    Err(PyTypeError::new_err(format!(
        "expected an ExecutionArena or IoArena, not {}",
        obj.get_type().name()?
    )))
}

/// The `HandlerBox` of one of our capsules.
fn handler_box<'a>(cap: &'a Bound<'_, PyAny>) -> &'a HandlerBox {
    // SAFETY: only called on capsules made by `handler_capsule`, kept alive
    // by `cap`; the box is never mutated after creation (counters are atomic).
    unsafe {
        &*(ffi::PyCapsule_GetPointer(cap.as_ptr(), HANDLER_CAPSULE.as_ptr()) as *const HandlerBox)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Ready,
    Open,
    Closed,
}

/// A context manager that serves NumPy's array data buffers from an arena
/// in the current context (thread) while open. Made by `numpy_scope`; each
/// scope is entered once.
#[pyclass(module = "warmarena")]
pub struct NumpyScope {
    handler: Py<PyAny>,
    prev: Option<Py<PyAny>>,
    state: State,
}

#[pymethods]
impl NumpyScope {
    /// Installs the arena's handler for this context; the previous one is
    /// restored on exit. A scope that was entered before raises `ScopeError`.
    fn __enter__<'py>(mut slf: PyRefMut<'py, Self>) -> PyResult<PyRefMut<'py, Self>> {
        if slf.state != State::Ready {
            return Err(ScopeError::new_err(format!(
                "this numpy_scope is {}; make a new one with numpy_scope(arena)",
                if slf.state == State::Open {
                    "already open"
                } else {
                    "closed"
                }
            )));
        }
        let py = slf.py();
        let prev = set_handler(py, slf.handler.as_ptr())?;
        slf.prev = Some(prev.unbind());
        slf.state = State::Open;
        Ok(slf)
    }

    /// Restores the handler that was current on entry (also when the block
    /// raised). Exceptions from the block propagate.
    #[pyo3(signature = (*_exc))]
    fn __exit__(
        &mut self,
        py: Python<'_>,
        _exc: &Bound<'_, pyo3::types::PyTuple>,
    ) -> PyResult<bool> {
        if self.state != State::Open {
            return Err(ScopeError::new_err("this numpy_scope is not open"));
        }
        let prev = self.prev.take();
        let p = prev.as_ref().map_or(core::ptr::null_mut(), |p| p.as_ptr());
        set_handler(py, p)?;
        self.state = State::Closed;
        Ok(false)
    }

    /// What this scope's handler did so far, over all threads: buffers
    /// served by the arena (`arena_allocs`, `arena_bytes` asked for,
    /// `zeroed` for calloc on reused memory), by the C allocator after the
    /// arena refused (`fallback_allocs`), buffers returned (`arena_frees`,
    /// `fallback_frees`) and reallocations (`realloc_in_place`,
    /// `realloc_moved`). Arrays made in the scope count here when freed
    /// later too.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let b = handler_box(self.handler.bind(py));
        let c = &b.ctx.counters;
        let d = PyDict::new(py);
        for (k, v) in [
            ("arena_allocs", &c.arena_allocs),
            ("arena_bytes", &c.arena_bytes),
            ("zeroed", &c.zeroed),
            ("fallback_allocs", &c.fallback_allocs),
            ("arena_frees", &c.arena_frees),
            ("fallback_frees", &c.fallback_frees),
            ("realloc_in_place", &c.realloc_in_place),
            ("realloc_moved", &c.realloc_moved),
        ] {
            d.set_item(k, v.load(Ordering::Relaxed))?;
        }
        Ok(d)
    }

    /// The handler name NumPy reports while the scope is open
    /// (`numpy._core.multiarray.get_handler_name()`).
    #[getter]
    fn handler_name(&self, py: Python<'_>) -> String {
        let b = handler_box(self.handler.bind(py));
        format!("warmarena_{}", b.ctx.source.name())
    }

    /// `"ready"`, `"open"` or `"closed"`.
    #[getter]
    fn state(&self) -> &'static str {
        match self.state {
            State::Ready => "ready",
            State::Open => "open",
            State::Closed => "closed",
        }
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!("NumpyScope({}, {})", self.handler_name(py), self.state())
    }
}

/// A context manager serving every array data buffer NumPy allocates in
/// this context (thread) from `arena` (an `ExecutionArena` or `IoArena`)
/// while the `with` block runs.
#[pyfunction]
pub fn numpy_scope(py: Python<'_>, arena: &Bound<'_, PyAny>) -> PyResult<NumpyScope> {
    let source = source_of(arena)?;
    Ok(NumpyScope {
        handler: handler_capsule(py, source)?.unbind(),
        prev: None,
        state: State::Ready,
    })
}

/// Serves NumPy's array data buffers from `arena` in the current context
/// (thread) from now on, without a scope; `None` restores NumPy's default.
#[pyfunction]
pub fn set_numpy_arena(py: Python<'_>, arena: &Bound<'_, PyAny>) -> PyResult<()> {
    if arena.is_none() {
        set_handler(py, core::ptr::null_mut())?;
        return Ok(());
    }
    let cap = handler_capsule(py, source_of(arena)?)?;
    set_handler(py, cap.as_ptr())?;
    Ok(())
}
