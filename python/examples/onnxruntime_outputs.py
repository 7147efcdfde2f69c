"""ONNX Runtime writing its outputs straight into lease-owned warmarena arrays.

A small ONNX model (MatMul + Add + Relu layers with random weights, built
here with the `onnx` helper API, nothing downloaded) runs through
`InferenceSession.io_binding()`:

- the input is bound from the caller's NumPy array (`bind_cpu_input`: ONNX
  Runtime reads it in place, no copy for a C-contiguous float32 array);
- each output is bound to a fresh array from `IoArena.empty(...)`
  (`bind_output(name, "cpu", 0, dtype, shape, arr.ctypes.data)`), so ONNX
  Runtime writes the result into it and nothing is copied or allocated by
  ONNX Runtime for the outputs.

Every returned array owns its buffer's lease: an output the caller keeps
stays valid while later runs go on (they take other buffers), and an
output the caller drops goes back to the I/O arena, where the next run
finds it warm — no system call, no page fault.

Run it (after `maturin develop` into python/.venv):

    python/.venv/bin/python python/examples/onnxruntime_outputs.py

It prints page faults and time per run with ONNX Runtime's own output
allocation and with bound outputs.
"""

import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import warmarena as wa


def build_model(batch=2048, width=256, classes=1024, layers=2, seed=0):
    """A `layers`-deep MLP: `x[batch, width]` -> `features[batch, width]`
    (MatMul, Add, Relu per layer) -> `logits[batch, classes]` (MatMul).
    Two outputs, float32, fixed shapes."""
    rng = np.random.default_rng(seed)
    inits, nodes = [], []
    h = "x"
    for i in range(layers):
        w = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)
        b = (0.1 * rng.standard_normal(width)).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        out = "features" if i == layers - 1 else f"h{i}"
        nodes += [
            helper.make_node("MatMul", [h, f"w{i}"], [f"m{i}"]),
            helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"]),
            helper.make_node("Relu", [f"a{i}"], [out]),
        ]
        h = out
    head = (rng.standard_normal((width, classes)) / np.sqrt(width)).astype(np.float32)
    inits.append(numpy_helper.from_array(head, "head"))
    nodes.append(helper.make_node("MatMul", ["features", "head"], ["logits"]))
    graph = helper.make_graph(
        nodes,
        "warmarena_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, width])],
        [
            helper.make_tensor_value_info("features", TensorProto.FLOAT, [batch, width]),
            helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, classes]),
        ],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # readable by every ONNX Runtime release of the last years
    onnx.checker.check_model(model)
    return model


def _session(model):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1  # one thread: faults and time are per run
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(
        model.SerializeToString(), sess_options=opts, providers=["CPUExecutionProvider"]
    )


def _output_specs(session):
    """(name, shape, NumPy dtype) of each output (fixed shapes)."""
    types = {"tensor(float)": np.float32}
    return [(o.name, tuple(o.shape), types[o.type]) for o in session.get_outputs()]


def example_input(model, seed=1):
    """A C-contiguous float32 input of the model's shape."""
    dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    return np.random.default_rng(seed).standard_normal(dims, dtype=np.float32)


def describe(model):
    g = model.graph
    outs = ", ".join(
        f"{o.name}{[d.dim_value for d in o.type.tensor_type.shape.dim]}" for o in g.output
    )
    return f"{len(g.node)} nodes, outputs {outs} float32"


class DefaultRunner:
    """`session.run`: ONNX Runtime allocates every output itself."""

    def __init__(self, model):
        self.session = _session(model)

    def run(self, x):
        names = [o.name for o in self.session.get_outputs()]
        return dict(zip(names, self.session.run(names, {"x": x})))


class BoundRunner:
    """`run_with_iobinding` with the input borrowed and each output bound to
    a lease-owned array from `io_arena`."""

    def __init__(self, model, io_arena):
        self.session = _session(model)
        self.io = io_arena
        self.binding = self.session.io_binding()
        self.outputs = _output_specs(self.session)

    def run(self, x):
        """The outputs of one run, as NumPy arrays owning their I/O buffers."""
        x = np.ascontiguousarray(x, dtype=np.float32)
        self.binding.bind_cpu_input("x", x)
        result = {}
        for name, shape, dtype in self.outputs:
            arr = self.io.empty(shape, dtype)
            self.binding.bind_output(name, "cpu", 0, dtype, shape, arr.ctypes.data)
            result[name] = arr
        self.session.run_with_iobinding(self.binding)
        # Our arrays are referenced by `result` only; the binding keeps raw
        # pointers, rebound before the next run.
        return result


def per_run(fn, runs):
    """(faults per run, ms per run) over `runs` calls."""
    faults = wa.FaultCounter()
    t0 = time.perf_counter()
    for _ in range(runs):
        fn()
    ms = (time.perf_counter() - t0) * 1e3 / runs
    f = faults.read()
    return (f["minor"] + f["major"]) / runs, ms


def main(runs=20):
    model = build_model()
    x = example_input(model)
    default = DefaultRunner(model)
    io = wa.IoArena()
    bound = BoundRunner(model, io)
    want = default.run(x)
    got = bound.run(x)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-5)
    for _ in range(3):  # warm-up
        default.run(x)
        bound.run(x)
    print(f"model: {describe(model)}")
    kept, kept_default = [], []
    for label, fn in (
        ("ORT allocates the outputs", lambda: default.run(x)),
        ("outputs bound to IoArena.empty", lambda: bound.run(x)),
        ("ORT allocates, caller keeps all", lambda: kept_default.append(default.run(x))),
        ("bound, caller keeps all", lambda: kept.append(bound.run(x))),
    ):
        f, ms = per_run(fn, runs)
        print(f"{label:34} {f:8.1f} faults/run {ms:8.2f} ms/run")
    # Outputs kept across runs are intact: the first one still holds run 1.
    np.testing.assert_allclose(kept[0]["logits"], want["logits"], rtol=1e-5, atol=1e-5)
    print(f"kept {len(kept)} runs of outputs; io arena: {io!r}")


if __name__ == "__main__":
    main()
