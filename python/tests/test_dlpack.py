"""DLPack export from ExportedBuffer: numpy.from_dlpack (and any consumer)
aliases the arena buffer, each export is one more owner of the lease, and an
unconsumed capsule releases its owner."""

import ctypes

import numpy as np
import pytest

import warmarena as wa

_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_is_valid.restype = ctypes.c_int


def capsule_named(cap, name):
    return _is_valid(cap, name) == 1


@pytest.mark.parametrize("dtype", ["float32", "float16", "int64", "int32", "uint8", "bool"])
def test_from_dlpack_aliases_the_arena_buffer(dtype):
    io = wa.IoArena()
    a = io.empty((4, 6), dtype)
    a[...] = np.arange(24).reshape(4, 6).astype(dtype)
    buf = a.base
    before = io.stats()
    y = np.from_dlpack(buf)
    after = io.stats()
    # No new buffer, no copy: the consumer's array is the arena's buffer.
    assert after["live_bytes"] == before["live_bytes"]
    assert after["cold_allocations"] == before["cold_allocations"]
    assert after["warm_allocations"] == before["warm_allocations"]
    assert after["copies"] == 0
    assert y.dtype == a.dtype and y.shape == a.shape
    assert np.shares_memory(y, a)
    assert y.ctypes.data == a.ctypes.data == buf.address
    assert (y == a).all()
    assert buf.owners == 2  # the array's base and the DLPack tensor
    assert not y.flags.writeable  # shared: exported read-only
    del y
    assert buf.owners == 1


def test_a_dlpack_array_outlives_the_array_it_came_from_and_the_arena():
    io = wa.IoArena()
    a = io.empty((1000,), np.float32)
    a[:] = 7.0
    y = np.from_dlpack(a.base)
    cap = a.base.capacity
    del a, io
    assert (y == 7.0).all()
    del y  # the last owner: the buffer goes back with the arena's state


def test_an_unconsumed_versioned_capsule_releases_its_owner():
    io = wa.IoArena()
    a = io.empty((3,), np.float32)
    cap = a.base.__dlpack__(max_version=(1, 0))
    assert capsule_named(cap, b"dltensor_versioned")
    assert a.base.owners == 2
    del cap
    assert a.base.owners == 1
    del a
    assert io.stats()["leases"] == 0


def test_legacy_capsule_when_no_max_version_is_asked():
    io = wa.IoArena()
    a = io.empty((3,), np.int32)
    cap = a.base.__dlpack__()
    assert capsule_named(cap, b"dltensor")
    assert not capsule_named(cap, b"dltensor_versioned")
    del cap
    assert a.base.owners == 1
    assert capsule_named(a.base.__dlpack__(max_version=(0, 8)), b"dltensor")


def test_numpy_consumes_the_legacy_capsule_too():
    io = wa.IoArena()
    a = io.empty((2, 2), np.float32)
    a[...] = [[1, 2], [3, 4]]

    class OldProducer:
        """A producer that only knows the pre-1.0 protocol."""

        def __dlpack__(self, stream=None):
            return a.base.__dlpack__(stream=stream)

        def __dlpack_device__(self):
            return a.base.__dlpack_device__()

    y = np.from_dlpack(OldProducer())
    assert np.shares_memory(y, a) and y.tolist() == [[1, 2], [3, 4]]
    assert a.base.owners == 2
    del y
    assert a.base.owners == 1


def test_device_and_refusals():
    io = wa.IoArena()
    buf = io.empty((2,), np.float32).base
    assert buf.__dlpack_device__() == (1, 0)
    for kwargs in [dict(dl_device=(2, 0)), dict(copy=True), dict(stream=1)]:
        with pytest.raises(BufferError):
            buf.__dlpack__(max_version=(1, 0), **kwargs)
    assert buf.owners == 1
    buf.__dlpack__(max_version=(1, 0), stream=None, dl_device=(1, 0), copy=False)
    assert buf.owners == 1  # the unconsumed capsule was collected at once


def test_session_outputs_export_through_dlpack(tiny):
    out = tiny.run({"image": tiny.example_input(3)})
    logits = out["logits"]
    assert logits.ctypes.data == logits.base.address
    live = tiny.io_arena.stats()["live_bytes"]
    assert live == sum(v.base.capacity for v in out.values())
    y = np.from_dlpack(logits.base)
    assert tiny.io_arena.stats()["live_bytes"] == live
    assert np.shares_memory(y, logits) and (y == logits).all()
    del tiny, out, logits
    assert y.shape == (3,)
