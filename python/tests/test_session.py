"""Session: the example network run in Rust from Python. Outputs are NumPy
arrays that own their I/O buffers: valid after the session, the arenas and
later runs are gone or done; inputs are borrowed without a copy when they
can be; bad input raises the documented exception and changes no stats."""

import numpy as np
import pytest

import warmarena as wa
from conftest import state


def check(session, x, out):
    ref = session.reference({"image": x})
    assert set(out) == {"features", "logits"}
    for k in out:
        assert out[k].dtype == np.float32
        np.testing.assert_array_equal(out[k], ref[k])  # bit for bit


@pytest.mark.parametrize("spec", ["tiny", "example",
                                  {"in_channels": 3, "channels": 5, "size": 6,
                                   "classes": 4, "seed": 9},
                                  {"base": "tiny", "classes": 7}])
def test_outputs_match_the_reference(spec):
    s = wa.Session(spec)
    x = s.example_input(1)
    out = s.run({"image": x})
    check(s, x, out)
    c = s.config
    assert out["features"].shape == (c["channels"],)
    assert out["logits"].shape == (c["classes"],)
    assert isinstance(out["logits"].base, wa.ExportedBuffer)


def test_arenas_are_persistent_by_default_and_caller_provided_ones_are_used():
    s = wa.Session("tiny")
    assert isinstance(s.exec_arena, wa.ExecutionArena)
    assert isinstance(s.io_arena, wa.IoArena)
    e, io = wa.ExecutionArena(), wa.IoArena()
    t = wa.Session("tiny", e, io)
    assert t.exec_arena is e and t.io_arena is io
    u = wa.Session("tiny", exec_arena=e, io_arena=io)  # two sessions, one pair
    x = t.example_input(0)
    del t.run({"image": x})["logits"]
    cold = e.stats()["cold_allocations"]
    u.run({"image": x})
    assert e.stats()["cold_allocations"] == cold  # u reuses t's buffers
    with pytest.raises(TypeError):
        wa.Session("tiny", exec_arena=io)


def test_an_output_survives_del_session_and_del_io_arena():
    io = wa.IoArena()
    s = wa.Session("tiny", io_arena=io)
    x = s.example_input(2)
    out = s.run({"image": x})
    expect = {k: v.copy() for k, v in out.items()}
    del s
    del io
    for k in out:
        np.testing.assert_array_equal(out[k], expect[k])


def test_later_runs_never_reuse_a_held_output():
    s = wa.Session("tiny")
    x0 = s.example_input(0)
    first = s.run({"image": x0})
    expect = {k: v.copy() for k, v in first.items()}
    held_addresses = {v.ctypes.data for v in first.values()}
    for seed in range(1, 8):
        out = s.run({"image": s.example_input(seed)})
        assert not held_addresses & {v.ctypes.data for v in out.values()}
        del out  # dropped: the next run may reuse these, never `first`'s
    for k in first:
        np.testing.assert_array_equal(first[k], expect[k])


def test_outputs_of_many_runs_coexist_with_their_own_contents():
    s = wa.Session("tiny")
    inputs = [s.example_input(seed) for seed in range(20)]
    outs = [s.run({"image": x}) for x in inputs]
    addrs = [v.ctypes.data for o in outs for v in o.values()]
    assert len(set(addrs)) == len(addrs)
    for x, out in zip(inputs, outs):
        check(s, x, out)
    assert s.io_arena.stats()["leases"] == 2 * len(outs)


def test_deleting_an_output_returns_its_buffer_and_the_next_run_reuses_it():
    s = wa.Session("example")
    x = s.example_input(4)
    out = s.run({"image": x})
    caps = {k: v.base.capacity for k, v in out.items()}
    before = s.io_arena.stats()
    del out["logits"]
    mid = s.io_arena.stats()
    assert mid["retained_bytes"] == before["retained_bytes"] + caps["logits"]
    del out["features"]
    after = s.io_arena.stats()
    assert after["retained_bytes"] == mid["retained_bytes"] + caps["features"]
    assert after["leases"] == 0 and after["live_bytes"] == 0
    out = s.run({"image": x})
    s2 = s.io_arena.stats()
    assert s2["warm_allocations"] == after["warm_allocations"] + 2
    assert s2["cold_allocations"] == after["cold_allocations"]
    check(s, x, out)


def test_a_c_contiguous_float32_input_is_borrowed_not_copied():
    s = wa.Session("tiny")
    x = s.example_input(5)
    copies = s.io_arena.stats()["copies"]
    s.run({"image": x}, require_borrow=True)
    assert s.last_run_inputs["image"] == (x.ctypes.data, True)
    x4 = x[None]  # (1, C, H, W): still the caller's memory
    s.run({"image": x4})
    assert s.last_run_inputs["image"] == (x.ctypes.data, True)
    assert s.io_arena.stats()["copies"] == copies
    # A read-only array is borrowed too.
    x.flags.writeable = False
    s.run({"image": x})
    assert s.last_run_inputs["image"] == (x.ctypes.data, True)


@pytest.mark.parametrize("make", [
    lambda x: np.asfortranarray(x),                       # not C-contiguous
    lambda x: np.repeat(x, 2, axis=2)[:, :, ::2],         # strided view
    lambda x: x.astype(np.float64),                       # converted
    lambda x: x.astype(np.float16),
    lambda x: x.astype(">f4"),                            # byte-swapped
    lambda x: x.tolist(),                                 # not an array
])
def test_other_inputs_are_staged_once_into_the_io_arena(make):
    s = wa.Session("tiny")
    x = s.example_input(6)
    y = make(x)
    io0 = s.io_arena.stats()
    out = s.run({"image": y})
    io1 = s.io_arena.stats()
    address, borrowed = s.last_run_inputs["image"]
    assert not borrowed
    assert io1["copies"] == io0["copies"] + 1
    assert io1["copied_bytes"] == io0["copied_bytes"] + x.nbytes
    check(s, np.asarray(y, dtype=np.float32), out)
    # The staging buffer went back to the I/O arena with the run.
    assert io1["live_bytes"] == sum(v.base.capacity for v in out.values())


def test_require_borrow_refuses_what_would_be_copied():
    s = wa.Session("tiny")
    x = s.example_input(7)
    before = (state(s.exec_arena.stats()), state(s.io_arena.stats()))
    with pytest.raises(wa.LayoutError) as e:
        s.run({"image": np.asfortranarray(x)}, require_borrow=True)
    assert isinstance(e.value, ValueError) and "contiguous" in str(e.value)
    with pytest.raises(wa.DtypeError) as e:
        s.run({"image": x.astype(np.float64)}, require_borrow=True)
    assert isinstance(e.value, TypeError) and "float32" in str(e.value)
    assert (state(s.exec_arena.stats()), state(s.io_arena.stats())) == before


@pytest.mark.parametrize("bad, exc", [
    (lambda x: x.reshape(-1), wa.ShapeError),
    (lambda x: x[:, :-1], wa.ShapeError),
    (lambda x: x[None, None], wa.ShapeError),
    (lambda x: np.stack([x, x]), wa.ShapeError),
    (lambda x: x.astype(np.complex64), wa.DtypeError),
    (lambda x: x.astype("U8"), wa.DtypeError),
    (lambda x: x.astype(object), wa.DtypeError),
])
def test_bad_inputs_raise_and_leave_the_arenas_as_they_were(bad, exc):
    s = wa.Session("tiny")
    x = s.example_input(8)
    held = s.run({"image": x})  # some state to keep consistent
    before = (state(s.exec_arena.stats()), state(s.io_arena.stats()))
    with pytest.raises(exc):
        s.run({"image": bad(x)})
    assert (state(s.exec_arena.stats()), state(s.io_arena.stats())) == before
    check(s, x, s.run({"image": x}))  # and the session still works
    del held


def test_missing_or_unknown_inputs_raise_key_error():
    s = wa.Session("tiny")
    x = s.example_input(0)
    with pytest.raises(KeyError):
        s.run({})
    with pytest.raises(KeyError):
        s.run({"image": x, "mask": x})
    with pytest.raises(TypeError):
        s.run([x])


@pytest.mark.parametrize("spec", ["resnet", {"size": 7}, {"channels": 0},
                                  {"depth": 3}, {"size": "big"}, 42])
def test_bad_graph_specs_raise_value_error(spec):
    with pytest.raises(ValueError):
        wa.Session(spec)


def test_graph_describes_the_example_network():
    g = wa.Session("tiny").graph
    assert g["inputs"] == ["image"] and g["outputs"] == ["features", "logits"]
    assert ("head", ["sum"], ["features", "pooled"]) in g["nodes"]
