"""The warm-run promise from Python: after warm-up, ten runs whose outputs
are dropped each time take no new page fault (counted in Rust) and no cold
allocation in either arena."""

import mmap

import warmarena as wa


def ten_runs(session, inputs):
    for _ in range(10):
        out = session.run(inputs)
        del out


def test_ten_warm_runs_take_no_page_fault_and_no_cold_allocation():
    # Code warm-up on throwaway arenas: the first execution of code pages
    # (the kernels, NumPy's paths, the interpreter's) faults too.
    throwaway = wa.Session("example")
    x = throwaway.example_input(3)
    inputs = {"image": x}
    ten_runs(throwaway, inputs)
    del throwaway

    s = wa.Session("example")
    ten_runs(s, inputs)  # warm-up: the arenas fill
    e0, i0 = s.exec_arena.stats(), s.io_arena.stats()
    counter = wa.FaultCounter()
    ten_runs(s, inputs)
    faults = counter.read()
    e1, i1 = s.exec_arena.stats(), s.io_arena.stats()
    print(f"10 warm runs: {faults} via {counter.source}")
    assert faults["minor"] == 0, faults
    assert faults["major"] == 0, faults
    assert e1["cold_allocations"] == e0["cold_allocations"]
    assert i1["cold_allocations"] == i0["cold_allocations"]
    assert e1["warm_allocations"] > e0["warm_allocations"]
    assert i1["warm_allocations"] == i0["warm_allocations"] + 20
    assert e1["os"]["syscalls"] == e0["os"]["syscalls"]
    assert i1["os"]["syscalls"] == i0["os"]["syscalls"]
    assert i1["copies"] == i0["copies"] == 0
    assert s.last_run_inputs["image"] == (x.ctypes.data, True)


def test_fault_counter_counts_fresh_pages():
    c = wa.FaultCounter()
    assert c.source in ("perf_events", "getrusage")
    m = mmap.mmap(-1, 64 * 4096)  # 64 fresh anonymous pages
    for page in range(64):
        m[page * 4096] = 1
    assert c.read()["minor"] >= 64
    c.reset()
    assert c.read()["minor"] < 64
    m.close()
