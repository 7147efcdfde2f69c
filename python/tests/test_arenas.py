"""ExecutionArena / IoArena from Python: stats, trim, retention cap, and
IoArena.empty arrays whose base owns the I/O lease."""

import numpy as np
import pytest

import warmarena as wa
from conftest import state

STATS_FIELDS = {
    "live_bytes", "live_buffers", "retained_bytes", "retained_buffers",
    "peak_live_bytes", "warm_allocations", "cold_allocations",
    "dedicated_allocations", "frees", "evictions", "evicted_bytes", "trims",
    "trimmed_bytes", "retention_cap", "leased_bytes", "leases", "copies",
    "copied_bytes", "mapped_bytes", "locked_operations", "heap_moves", "heap_plans",
    "heap_planned_allocations", "heap_plan_released_bytes", "os",
}

DTYPES = ["float32", "float16", "float64", "int64", "int32", "int16", "int8",
          "uint8", "uint16", "uint32", "uint64", "bool"]


@pytest.mark.parametrize("cls", [wa.ExecutionArena, wa.IoArena])
def test_stats_use_the_rust_field_names(cls):
    s = cls().stats()
    assert set(s) == STATS_FIELDS
    assert s["live_bytes"] == s["retained_bytes"] == 0
    assert s["retention_cap"] is None
    assert "syscalls" in s["os"]


@pytest.mark.parametrize("cls", [wa.ExecutionArena, wa.IoArena])
def test_retention_cap_get_set(cls):
    a = cls(retention_cap=1 << 20)
    assert a.retention_cap == 1 << 20
    a.retention_cap = None
    assert a.retention_cap is None and a.stats()["retention_cap"] is None
    a.retention_cap = 0
    assert a.retention_cap == 0
    with pytest.raises(ValueError):
        a.retention_cap = -1
    with pytest.raises(ValueError):
        a.retention_cap = "big"
    assert a.retention_cap == 0


def test_retention_cap_evicts_and_trim_releases():
    io = wa.IoArena()
    arrays = [io.empty((1 << 18,), np.float32) for _ in range(3)]  # 1 MiB each
    cap = arrays[0].base.capacity
    del arrays
    s = io.stats()
    assert s["retained_bytes"] == 3 * cap and s["live_bytes"] == 0
    io.retention_cap = cap
    s = io.stats()
    assert s["evictions"] == 2 and s["retained_bytes"] == cap
    assert io.trim() == cap
    s = io.stats()
    assert s["retained_bytes"] == 0 and s["trims"] == 1


@pytest.mark.parametrize("dtype", DTYPES)
def test_empty_is_c_contiguous_and_its_base_holds_the_lease(dtype):
    io = wa.IoArena()
    a = io.empty((3, 5), dtype)
    assert a.shape == (3, 5) and a.dtype == np.dtype(dtype)
    assert a.flags.c_contiguous and a.flags.writeable and a.flags.aligned
    assert isinstance(a.base, wa.ExportedBuffer)
    assert a.base.address == a.ctypes.data
    assert a.base.nbytes == a.nbytes
    s = io.stats()
    assert s["leases"] == 1 and s["leased_bytes"] == a.base.capacity
    a[...] = 1
    assert (a == 1).all()


def test_empty_accepts_int_shape_scalar_and_zero_size():
    io = wa.IoArena()
    assert io.empty(4).shape == (4,)
    assert io.empty(()).shape == ()
    z = io.empty((0, 3), "int32")
    assert z.shape == (0, 3) and z.size == 0
    assert io.empty((2,)).dtype == np.float32  # the default dtype


def test_deleting_the_array_returns_the_buffer_and_the_next_is_warm():
    io = wa.IoArena()
    a = io.empty((256, 256), np.float32)
    cap = a.base.capacity
    before = io.stats()
    del a
    after = io.stats()
    assert after["retained_bytes"] == before["retained_bytes"] + cap
    assert after["live_bytes"] == before["live_bytes"] - cap
    assert after["leases"] == 0
    b = io.empty((256, 256), np.float32)
    s = io.stats()
    assert s["warm_allocations"] == after["warm_allocations"] + 1
    assert s["cold_allocations"] == after["cold_allocations"]
    del b


def test_a_view_keeps_the_buffer():
    io = wa.IoArena()
    a = io.empty((8,), np.int64)
    a[:] = np.arange(8)
    v = a[2:5]
    del a
    assert io.stats()["leases"] == 1
    assert v.tolist() == [2, 3, 4]
    del v
    assert io.stats()["leases"] == 0


def test_the_array_outlives_the_arena_object():
    io = wa.IoArena()
    a = io.empty((1000,), np.float64)
    a[:] = np.arange(1000)
    del io
    assert a.sum() == sum(range(1000))
    assert a.base.owners == 1


@pytest.mark.parametrize("bad", ["complex64", object, "U4", ">f4", "datetime64[s]",
                                 [("a", "f4"), ("b", "i4")], "no-such-type"])
def test_bad_dtype_raises_dtype_error_and_leaves_stats(bad):
    io = wa.IoArena()
    before = state(io.stats())
    with pytest.raises(wa.DtypeError) as e:
        io.empty((2, 2), bad)
    assert isinstance(e.value, TypeError)
    assert "dtype" in str(e.value)
    assert state(io.stats()) == before


@pytest.mark.parametrize("bad", [(-1, 2), (2, "x"), "abc", (1 << 40, 1 << 40)])
def test_bad_shape_raises_shape_error_and_leaves_stats(bad):
    io = wa.IoArena()
    before = state(io.stats())
    with pytest.raises(wa.ShapeError) as e:
        io.empty(bad, np.float32)
    assert isinstance(e.value, ValueError)
    assert state(io.stats()) == before


def test_an_allocation_the_os_refuses_raises_allocation_error():
    io = wa.IoArena()
    before = io.stats()
    with pytest.raises(wa.AllocationError) as e:
        io.empty((1 << 61,), np.uint8)  # 2 EiB: the mapping is refused
    assert isinstance(e.value, MemoryError)
    s = io.stats()
    assert s["live_bytes"] == before["live_bytes"] == 0
    assert s["cold_allocations"] == before["cold_allocations"]


def test_arenas_are_distinct_and_repr():
    a, b = wa.ExecutionArena(), wa.ExecutionArena()
    assert a.same_arena(a) and not a.same_arena(b)
    assert "ExecutionArena(" in repr(a)
    assert "IoArena(" in repr(wa.IoArena())
