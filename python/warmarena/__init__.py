"""warmarena: warm arenas for an ML inference runtime, from Python.

After one warm-up run, every later run of a model takes its buffers from
arenas that keep them with their pages: no system allocation, no payload
copy, no new page fault. Outputs leave as NumPy arrays without a copy; each
array's base object (an :class:`ExportedBuffer`) owns the buffer's lease, so
the array stays valid however long it is kept (after the session and the
arenas are gone) and deleting it returns the buffer to its I/O arena.

- :class:`ExecutionArena`, :class:`IoArena`: ``stats()``, ``trim()``,
  ``retention_cap``; ``IoArena.empty(shape, dtype)``.
- :class:`ExportedBuffer`: an array's base; ``__dlpack__`` /
  ``__dlpack_device__`` for ``numpy.from_dlpack`` and any DLPack consumer.
- :class:`Session`: the example network run in Rust over persistent arenas;
  ``run({"image": x})`` borrows a C-contiguous float32 ``x`` without a copy.
- :class:`FaultCounter`: page faults of the calling thread, read in Rust.
- :func:`numpy_scope` (a context manager, :class:`NumpyScope`) and
  :func:`set_numpy_arena`: NumPy's own array data buffers (temporaries
  included) from an arena, through a NEP 49 data memory handler.
- Exceptions: :class:`DtypeError` (a ``TypeError``), :class:`LayoutError`
  and :class:`ShapeError` (``ValueError``), :class:`AllocationError`
  (``MemoryError``), :class:`ScopeError` (``RuntimeError``).
"""

from ._warmarena import (
    AllocationError,
    DtypeError,
    ExecutionArena,
    ExportedBuffer,
    FaultCounter,
    IoArena,
    LayoutError,
    NumpyScope,
    ScopeError,
    Session,
    ShapeError,
    numpy_scope,
    set_numpy_arena,
)

__all__ = [
    "AllocationError",
    "DtypeError",
    "ExecutionArena",
    "ExportedBuffer",
    "FaultCounter",
    "IoArena",
    "LayoutError",
    "NumpyScope",
    "ScopeError",
    "Session",
    "ShapeError",
    "numpy_scope",
    "set_numpy_arena",
]
__version__ = "0.1.0"
