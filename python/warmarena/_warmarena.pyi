"""Type stubs for the warmarena extension module (re-exported by ``warmarena``)."""

from typing import Any, Final, Literal, Mapping, Sequence, TypedDict, Union

import numpy as np
import numpy.typing as npt

DTypeLike = npt.DTypeLike
ShapeLike = Union[int, Sequence[int]]

class OsStats(TypedDict):
    """The arena's own system calls (``ArenaStats.os`` in Rust)."""

    maps: int
    unmaps: int
    page_releases: int
    advice: int
    prefaults: int
    mapped_bytes: int
    unmapped_bytes: int
    syscalls: int

class ArenaStats(TypedDict):
    """A snapshot of one arena's accounting, keyed by the Rust ``ArenaStats``
    field names. Bytes are class capacities; retained bytes are never live."""

    live_bytes: int
    live_buffers: int
    retained_bytes: int
    retained_buffers: int
    peak_live_bytes: int
    warm_allocations: int
    cold_allocations: int
    dedicated_allocations: int
    frees: int
    evictions: int
    evicted_bytes: int
    trims: int
    trimmed_bytes: int
    retention_cap: int | None
    """``None`` when unbounded."""
    leased_bytes: int
    leases: int
    copies: int
    copied_bytes: int
    mapped_bytes: int
    locked_operations: int
    """Acquisitions of the arena's shared lock (thread-cached and planned
    allocations and frees take none; reading the stats counts one)."""
    heap_moves: int
    """Times the execution heap (an execution arena's buffers of 64 KiB and
    up, one thread's at a time, at first the maker's) moved to another
    thread: a run's thread at a run boundary, or the next to ask after its
    thread exited; only while no heap buffer was live."""
    heap_plans: int
    """Learned placement: sequences of heap requests the arena planned."""
    heap_planned_allocations: int
    """Learned placement: heap requests placed at a plan's offset."""
    heap_plan_released_bytes: int
    """Learned placement: bytes released above the plans."""
    os: OsStats

class Faults(TypedDict):
    minor: int
    major: int

class DtypeError(TypeError):
    """An unsupported dtype: an ``empty`` dtype outside the supported list, an
    input that cannot be converted to float32, or a borrow-only input that is
    not native float32."""

class LayoutError(ValueError):
    """An input that must be borrowed without a copy is not C-contiguous,
    aligned and in native byte order."""

class ShapeError(ValueError):
    """A negative or overflowing extent, or an input whose shape is not the
    network's."""

class AllocationError(MemoryError):
    """The arena refused an allocation; the arena is unchanged."""

class ScopeError(RuntimeError):
    """A :class:`NumpyScope` used out of order: entered a second time, or
    exited when not open."""

class _Arena:
    def __init__(
        self,
        *,
        retention_cap: int | None = None,
        huge_pages: bool = True,
        prefault: bool = False,
    ) -> None:
        """A new arena. ``retention_cap``: most bytes of free buffers kept with
        their pages (``None``: unbounded); ``huge_pages``: transparent-huge-page
        advice for classes of 2 MiB and more; ``prefault``: materialize new
        mappings at once."""
    def stats(self) -> ArenaStats:
        """A snapshot of the arena's accounting."""
    def trim(self) -> int:
        """Releases every retained buffer to the OS; returns the bytes
        released. Live and leased buffers are untouched."""
    def reset_peak(self) -> None:
        """Restarts peak tracking from the current live bytes."""
    @property
    def retention_cap(self) -> int | None:
        """Most bytes of free buffers kept (``None``: unbounded). Setting it
        evicts least-recently-freed buffers at once until the retained bytes
        fit; a negative or non-int value raises ``ValueError``."""
    @retention_cap.setter
    def retention_cap(self, cap: int | None) -> None: ...

class ExecutionArena(_Arena):
    """An arena for node intermediates and kernel workspaces."""

    def same_arena(self, other: ExecutionArena) -> bool:
        """Whether ``other`` is a handle to the same arena."""

class IoArena(_Arena):
    """An arena for graph outputs and staged inputs: memory that crosses the
    runtime boundary."""

    def same_arena(self, other: IoArena) -> bool:
        """Whether ``other`` is a handle to the same arena."""
    def empty(self, shape: ShapeLike, dtype: DTypeLike = None) -> np.ndarray:
        """A new C-contiguous array of ``shape`` and ``dtype`` (default
        float32) in this arena, contents unspecified. Its ``base`` is an
        :class:`ExportedBuffer` owning the lease: deleting the array (and its
        views) returns the buffer here; deleting the arena first leaves the
        array valid. Supported dtypes: bool, int8/16/32/64, uint8/16/32/64,
        float16/32/64 in native byte order (else :class:`DtypeError`); a bad
        shape raises :class:`ShapeError`, a refused allocation
        :class:`AllocationError`."""

class ExportedBuffer:
    """The owner of one exported I/O-arena buffer: the base object of the
    arrays made over it, and a DLPack producer. Not constructible from
    Python."""

    @property
    def address(self) -> int:
        """The address of the buffer's first byte."""
    @property
    def nbytes(self) -> int:
        """Bytes the exported array covers."""
    @property
    def capacity(self) -> int:
        """Bytes the buffer holds (its size class): what the I/O arena gets
        back when the last owner goes."""
    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def dtype(self) -> np.dtype[Any]: ...
    @property
    def owners(self) -> int:
        """Owners sharing the buffer: this object plus one per live DLPack
        export."""
    def __dlpack__(
        self,
        *,
        stream: int | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        """The buffer as a DLPack capsule, without copying: a
        ``dltensor_versioned`` capsule (DLPack 1.x, read-only flag set) when
        ``max_version`` has major >= 1, else a legacy ``dltensor`` capsule.
        Raises ``BufferError`` for a non-CPU ``dl_device``, ``copy=True`` or a
        ``stream`` other than ``None``/-1."""
    def __dlpack_device__(self) -> tuple[Literal[1], Literal[0]]:
        """``(kDLCPU, 0)``."""

class NetConfig(TypedDict):
    in_channels: int
    channels: int
    size: int
    classes: int
    input_shape: tuple[int, int, int]

class GraphSpecDict(TypedDict, total=False):
    base: Literal["example", "standard", "tiny"]
    in_channels: int
    channels: int
    size: int
    classes: int
    seed: int

class GraphDescription(TypedDict):
    inputs: list[str]
    outputs: list[str]
    nodes: list[tuple[str, list[str], list[str]]]

class Session:
    """The example network (two 3x3 convolutions with ReLU and a residual add,
    a mixed-output head, a fully connected layer) run in Rust through the
    session path over persistent arenas."""

    def __init__(
        self,
        graph_spec: Literal["example", "standard", "tiny"] | GraphSpecDict,
        exec_arena: ExecutionArena | None = None,
        io_arena: IoArena | None = None,
    ) -> None:
        """Compiles the network; creates persistent arenas unless given.
        A bad ``graph_spec`` raises ``ValueError``."""
    def run(
        self, inputs: Mapping[str, npt.ArrayLike], *, require_borrow: bool = False
    ) -> dict[str, np.ndarray]:
        """Runs the network on ``inputs`` (``{"image": x}``, ``x`` of shape
        ``(C, H, W)`` or ``(1, C, H, W)``); returns ``{"features", "logits"}``
        as float32 arrays owning their I/O buffers. A C-contiguous, aligned,
        native float32 ``x`` is borrowed without a copy; anything else
        real-valued is staged (one counted copy into the I/O arena) unless
        ``require_borrow``, which raises :class:`LayoutError` or
        :class:`DtypeError` instead. Wrong shape: :class:`ShapeError`; complex,
        string or object dtype: :class:`DtypeError`; a missing or unknown
        input: ``KeyError``. A refused call changes no arena stats."""
    def reference(self, inputs: Mapping[str, npt.ArrayLike]) -> dict[str, np.ndarray]:
        """The same network computed on plain vectors in Rust (with copies)."""
    def example_input(self, seed: int = 0) -> np.ndarray:
        """A deterministic float32 input of the network's shape."""
    @property
    def last_run_inputs(self) -> dict[str, tuple[int, bool]]:
        """Per input of the last run: ``(address the kernels read, borrowed)``."""
    @property
    def exec_arena(self) -> ExecutionArena: ...
    @property
    def io_arena(self) -> IoArena: ...
    @property
    def config(self) -> NetConfig: ...
    @property
    def graph(self) -> GraphDescription: ...

class FaultCounter:
    """Minor and major page faults of the thread that made it (perf events, or
    ``getrusage`` where those are denied), since creation or ``reset()``."""

    def __init__(self) -> None: ...
    def reset(self) -> None: ...
    def read(self) -> Faults: ...
    @property
    def source(self) -> Literal["perf_events", "getrusage"]: ...

class NumpyScopeStats(TypedDict):
    """What one scope's NumPy data memory handler did, over all threads."""

    arena_allocs: int
    """Buffers the arena served (``malloc``/``calloc``/moving ``realloc``)."""
    arena_bytes: int
    """Bytes asked for by those."""
    zeroed: int
    """``calloc``s served by a reused buffer, so zeroed by hand."""
    fallback_allocs: int
    """Requests the arena refused, served by the C allocator."""
    arena_frees: int
    """Arena buffers returned (on any thread, at any time)."""
    fallback_frees: int
    """C-allocator buffers freed."""
    realloc_in_place: int
    """``realloc``s that fit the buffer's capacity."""
    realloc_moved: int
    """``realloc``s that moved to a bigger buffer of the arena."""

class NumpyScope:
    """A context manager serving NumPy's array data buffers from an arena in
    the current context (thread) while open; made by :func:`numpy_scope`,
    entered once."""

    def __enter__(self) -> NumpyScope:
        """Installs the arena's NEP 49 handler for this context. A scope that
        was entered before raises :class:`ScopeError`."""
    def __exit__(self, *exc: object) -> bool:
        """Restores the handler that was current on entry, also when the
        block raised (the exception propagates). Not open:
        :class:`ScopeError`."""
    def stats(self) -> NumpyScopeStats:
        """What this scope's handler did so far, over all threads, arrays
        freed after the scope included."""
    @property
    def handler_name(self) -> str:
        """``"warmarena_ExecutionArena"`` or ``"warmarena_IoArena"``: what
        ``numpy._core.multiarray.get_handler_name()`` reports while open."""
    @property
    def state(self) -> Literal["ready", "open", "closed"]:
        """Whether the scope is yet to be entered, open, or closed."""

def numpy_scope(arena: ExecutionArena | IoArena) -> NumpyScope:
    """A context manager serving every array data buffer NumPy allocates in
    this context (thread), temporaries included, from ``arena`` while the
    ``with`` block runs. Arrays made in it may be freed anywhere later (after
    the scope, on another thread, after ``arena`` is deleted): each returns to
    its arena. Anything but an arena raises ``TypeError``."""

def set_numpy_arena(arena: ExecutionArena | IoArena | None) -> None:
    """Serves NumPy's array data buffers from ``arena`` in the current context
    (thread) from now on; ``None`` restores NumPy's default handler. Anything
    else raises ``TypeError``."""
