"""`numpy_scope` / `set_numpy_arena`: NumPy's own array data buffers (the
temporaries of ordinary NumPy expressions) served by an arena through a
NEP 49 data memory handler."""

import gc
import pickle
import threading

import numpy as np
import pytest
from numpy._core.multiarray import get_handler_name

import warmarena as wa
from conftest import state

N = 4 << 20  # 16 MiB of float32


def step(x):
    """The user's loop body: four 16 MiB temporaries a step."""
    y = np.tanh(x * 0.5) + 1.0
    z = np.exp(-y) * x
    return z


def loop(x, steps):
    z = None
    for _ in range(steps):
        z = step(x)
    return z


@pytest.fixture
def x():
    return np.random.default_rng(7).standard_normal(N, dtype=np.float32)


def test_warm_steps_take_no_fault_and_no_cold_allocation(x):
    arena = wa.ExecutionArena()
    with wa.numpy_scope(arena) as scope:
        assert get_handler_name() == "warmarena_ExecutionArena"
        loop(x, 3)  # warm-up: the same loop, so the same peak
        before = arena.stats()
        faults = wa.FaultCounter()
        z = loop(x, 10)
        f = faults.read()
        after = arena.stats()
    assert f["minor"] + f["major"] == 0, f
    assert after["cold_allocations"] == before["cold_allocations"]
    assert after["os"]["syscalls"] == before["os"]["syscalls"]
    assert after["warm_allocations"] - before["warm_allocations"] >= 40
    s = scope.stats()
    assert s["fallback_allocs"] == 0 and s["arena_allocs"] >= 52
    ref = np.exp(-(np.tanh(x * 0.5) + 1.0)) * x
    np.testing.assert_array_equal(z, ref)


def test_the_arena_stats_show_the_numpy_traffic():
    arena = wa.ExecutionArena()
    with wa.numpy_scope(arena) as scope:
        a = np.ones(1000, dtype=np.float64)
        b = a * 2
    s = arena.stats()
    assert s["live_buffers"] == 2
    assert s["live_bytes"] >= 2 * 8000
    # Two 8000-byte buffers live; NumPy's small scalar temporaries (the
    # fill value, the 2) came and went through the arena as well.
    st = scope.stats()
    assert st["arena_allocs"] - st["arena_frees"] == 2
    assert st["arena_bytes"] >= 16000
    del a, b
    assert arena.stats()["live_buffers"] == 0
    st = scope.stats()
    assert st["arena_frees"] == st["arena_allocs"] and st["fallback_frees"] == 0


def test_default_handler_is_back_after_the_scope_even_on_exceptions():
    default = get_handler_name()
    arena = wa.ExecutionArena()
    with wa.numpy_scope(arena):
        pass
    assert get_handler_name() == default
    with pytest.raises(ZeroDivisionError):
        with wa.numpy_scope(arena):
            1 / 0
    assert get_handler_name() == default
    a = np.empty(10_000)
    assert arena.stats()["live_buffers"] == 0, "made outside the scope"
    del a


def test_nested_scopes_restore_the_outer_one():
    outer, inner = wa.ExecutionArena(), wa.IoArena()
    with wa.numpy_scope(outer):
        a = np.empty(5000)
        with wa.numpy_scope(inner):
            assert get_handler_name() == "warmarena_IoArena"
            b = np.empty(5000)
        assert get_handler_name() == "warmarena_ExecutionArena"
        c = np.empty(5000)
    assert outer.stats()["live_buffers"] == 2
    assert inner.stats()["live_buffers"] == 1
    del a, b, c
    assert outer.stats()["live_buffers"] == inner.stats()["live_buffers"] == 0


def test_arrays_outlive_the_arena_object_and_the_scope():
    arena = wa.ExecutionArena()
    scope = wa.numpy_scope(arena)
    with scope:
        a = np.arange(1 << 20, dtype=np.float32)
        v = a[::3]
    del arena
    gc.collect()
    # The arena object is gone and the scope is closed; the data is intact.
    assert a[12345] == 12345.0 and v[2] == 6.0
    assert np.sum(a[:10]) == 45.0
    live = scope.stats()["arena_allocs"] - scope.stats()["arena_frees"]
    assert live == 1
    del a
    assert scope.stats()["arena_allocs"] - scope.stats()["arena_frees"] == 1, "the view keeps it"
    del v
    assert scope.stats()["arena_allocs"] == scope.stats()["arena_frees"]


def test_an_array_outlives_its_scope_object_and_arena_and_dies_on_a_thread():
    arena = wa.IoArena()
    with wa.numpy_scope(arena) as scope:
        kept = [np.arange(300_000, dtype=np.float64)]
    del scope, arena  # only the array holds the handler (and so the arena)
    gc.collect()
    assert kept[0][299_999] == 299_999.0
    # NumPy frees it through the handler stored in the array, off the main thread.
    t = threading.Thread(target=kept.clear)
    t.start()
    t.join()
    assert kept == []


def test_an_array_freed_on_another_thread_returns_to_its_arena():
    arena = wa.ExecutionArena()
    with wa.numpy_scope(arena) as scope:
        arrays = [np.full(100_000, i, dtype=np.int64) for i in range(4)]
    assert arena.stats()["live_buffers"] == 4
    sums = []

    def consume(items):
        while items:
            sums.append(int(items.pop().sum()))

    t = threading.Thread(target=consume, args=(arrays,))
    del arrays  # only the thread's list holds them now
    t.start()
    t.join()
    assert sorted(sums) == [0, 100_000, 200_000, 300_000]
    s = arena.stats()
    assert s["live_buffers"] == 0 and s["retained_buffers"] >= 1
    st = scope.stats()
    assert st["arena_frees"] == st["arena_allocs"]


def test_threads_have_their_own_scopes():
    main_arena, thread_arena = wa.ExecutionArena(), wa.ExecutionArena()
    seen = {}
    ready, done = threading.Event(), threading.Event()

    def worker():
        with wa.numpy_scope(thread_arena):
            seen["name"] = get_handler_name()
            seen["array"] = np.empty(10_000)
            ready.set()
            done.wait(10)

    with wa.numpy_scope(main_arena):
        t = threading.Thread(target=worker)
        t.start()
        assert ready.wait(10)
        # The thread's scope does not leak into this one.
        assert get_handler_name() == "warmarena_ExecutionArena"
        mine = np.empty(10_000)
        done.set()
        t.join()
    assert seen["name"] == "warmarena_ExecutionArena"
    assert main_arena.stats()["live_buffers"] == 1
    assert thread_arena.stats()["live_buffers"] == 1
    del mine, seen["array"]
    assert main_arena.stats()["live_buffers"] == thread_arena.stats()["live_buffers"] == 0


def test_arrays_from_the_scope_work_with_every_numpy_operation_used():
    arena = wa.IoArena()
    with wa.numpy_scope(arena) as scope:
        a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
        v = a[:, 1:, ::2]
        r = a.reshape(6, 4).T
        c = np.concatenate([a, a * 2], axis=1)
        p = pickle.loads(pickle.dumps(c))
        s = np.sort(c[::-1], axis=None)
        t = a.astype(np.int16).copy(order="F")
    np.testing.assert_array_equal(v, np.arange(24).reshape(2, 3, 4)[:, 1:, ::2])
    assert r.shape == (4, 6) and r[3, 5] == 23
    assert c.shape == (2, 6, 4) and c[1, 5, 3] == 46
    np.testing.assert_array_equal(p, c)
    assert s[0] == 0 and s[-1] == 46 and t.flags.f_contiguous and t[1, 2, 3] == 23
    assert scope.stats()["arena_allocs"] >= 6
    assert scope.stats()["fallback_allocs"] == 0
    # After the scope, the same arrays still mix with default ones.
    np.testing.assert_array_equal(np.concatenate([p, np.ones((2, 1, 4))], axis=1)[:, :6], c)


def test_calloc_zeroes_a_reused_buffer_and_realloc_keeps_the_bytes():
    arena = wa.ExecutionArena()
    with wa.numpy_scope(arena) as scope:
        junk = np.full(50_000, 7.0)
        del junk
        z = np.zeros(50_000)  # same class: the reused buffer holds 7.0s
        assert arena.stats()["warm_allocations"] >= 1
        assert not z.any()
        g = np.arange(1000, dtype=np.float64)
        g.resize(1010, refcheck=False)  # fits the capacity: in place
        g.resize(100_000, refcheck=False)  # moves to a bigger buffer
    assert scope.stats()["zeroed"] >= 1
    assert scope.stats()["realloc_in_place"] == 1
    assert scope.stats()["realloc_moved"] == 1
    np.testing.assert_array_equal(g[:1000], np.arange(1000))
    assert not g[1000:].any()
    del z, g
    assert arena.stats()["live_buffers"] == 0


def test_set_numpy_arena_for_the_whole_context():
    default = get_handler_name()
    arena = wa.IoArena()
    result = {}

    def in_thread():
        # A fresh thread: what it sets stays in its own context.
        wa.set_numpy_arena(arena)
        result["name"] = get_handler_name()
        result["a"] = np.empty(3000)
        wa.set_numpy_arena(None)
        result["after"] = get_handler_name()

    t = threading.Thread(target=in_thread)
    t.start()
    t.join()
    assert result["name"] == "warmarena_IoArena"
    assert result["after"] == default
    assert get_handler_name() == default
    assert arena.stats()["live_buffers"] == 1
    del result["a"]
    assert arena.stats()["live_buffers"] == 0


def test_bad_arguments_raise_typed_exceptions():
    arena = wa.ExecutionArena()
    for bad in (42, None, "arena", np.zeros(3)):
        with pytest.raises(TypeError, match="ExecutionArena or IoArena"):
            wa.numpy_scope(bad)
    with pytest.raises(TypeError):
        wa.set_numpy_arena(42)
    scope = wa.numpy_scope(arena)
    with pytest.raises(wa.ScopeError, match="not open"):
        scope.__exit__(None, None, None)
    with scope:
        with pytest.raises(wa.ScopeError, match="already open"):
            scope.__enter__()
    assert scope.state == "closed"
    with pytest.raises(wa.ScopeError, match="closed"):
        with scope:
            pass
    assert isinstance(wa.ScopeError("x"), RuntimeError)


def test_a_request_the_arena_refuses_falls_back_and_numpy_raises():
    arena = wa.ExecutionArena()
    with wa.numpy_scope(arena) as scope:
        before = state(arena.stats())
        # 256 TiB: beyond the address space, so the arena and the C
        # allocator both refuse and NumPy raises its MemoryError.
        with pytest.raises(MemoryError):
            np.empty(1 << 48, dtype=np.uint8)
        assert state(arena.stats()) == before, "a refused request leaves the arena as it was"
        assert scope.stats()["fallback_allocs"] == 1
        a = np.ones(100)  # the scope goes on serving
    assert arena.stats()["live_buffers"] == 1 and a.sum() == 100
