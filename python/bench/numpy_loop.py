"""NumPy temporaries from an arena: the issue's loop, default NumPy against
`warmarena.numpy_scope`, and ONNX Runtime outputs bound to lease-owned
arrays against ONNX Runtime's own output allocation.

Run from the repository root after `maturin develop` into python/.venv:

    python/.venv/bin/python python/bench/numpy_loop.py [--steps 20] [--rounds 5]

Rounds alternate the two sides in one process (the machine is shared and
noisy, so only the ratio is meant to be compared); each figure is the
median over rounds of the per-step (per-run) mean. Faults are the calling
thread's minor + major page faults (`warmarena.FaultCounter`).
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import warmarena as wa

N = 4 << 20  # 16 MiB of float32


def step(x):
    y = np.tanh(x * 0.5) + 1.0
    z = np.exp(-y) * x
    return z


def measure(fn, steps):
    """Faults per call and ms per call over `steps` calls of `fn`."""
    faults = wa.FaultCounter()
    t0 = time.perf_counter()
    for _ in range(steps):
        fn()
    dt = time.perf_counter() - t0
    f = faults.read()
    return (f["minor"] + f["major"]) / steps, dt * 1e3 / steps


def numpy_loop(steps, rounds):
    x = np.random.default_rng(0).standard_normal(N, dtype=np.float32)
    arena = wa.ExecutionArena()
    scope = None
    results = {"default": [], "scope": []}
    for _ in range(3):
        step(x)
    for _ in range(rounds):
        results["default"].append(measure(lambda: step(x), steps))
        with wa.numpy_scope(arena) as scope:
            for _ in range(3):  # warm-up (the first round makes the buffers)
                step(x)
            results["scope"].append(measure(lambda: step(x), steps))
    print(f"NumPy loop, 16 MiB float32 (y = tanh(x*0.5)+1; z = exp(-y)*x), "
          f"{rounds} rounds x {steps} steps, median of rounds:")
    print(f"{'':24} {'faults/step':>12} {'ms/step':>10}")
    for side, label in (("default", "default NumPy"), ("scope", "numpy_scope(arena)")):
        f = statistics.median(r[0] for r in results[side])
        ms = statistics.median(r[1] for r in results[side])
        print(f"{label:24} {f:12.1f} {ms:10.2f}")
    ratios = [s[1] / d[1] for d, s in zip(results["default"], results["scope"])]
    print(f"time ratio scope/default: median {statistics.median(ratios):.2f} "
          f"(per round: {', '.join(f'{r:.2f}' for r in ratios)}); target <= 0.8")
    s = arena.stats()
    print(f"arena: cold_allocations={s['cold_allocations']} warm_allocations="
          f"{s['warm_allocations']} retained_bytes={s['retained_bytes']} "
          f"mapped_bytes={s['mapped_bytes']}; handler: {scope.stats()}")


def onnx_runs(steps, rounds):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    try:
        import onnxruntime_outputs as ex
    except ImportError as e:  # onnx / onnxruntime missing
        print(f"\nONNX Runtime comparison skipped: {e}")
        return
    model = ex.build_model()
    x = ex.example_input(model)
    default = ex.DefaultRunner(model)
    bound = ex.BoundRunner(model, wa.IoArena())
    for _ in range(3):
        default.run(x)
        bound.run(x)
    results = {"default": [], "bound": [], "default_held": [], "bound_held": [],
               "bound_held_4k": []}
    for _ in range(rounds):
        results["default"].append(measure(lambda: default.run(x), steps))
        results["bound"].append(measure(lambda: bound.run(x), steps))
        # The caller keeps every output of `steps` runs, so each run needs
        # new output memory; fresh runners (and arenas) each round, warmed
        # up on released outputs first.
        for side, runner in (
            ("default_held", ex.DefaultRunner(model)),
            ("bound_held", ex.BoundRunner(model, wa.IoArena())),
            ("bound_held_4k", ex.BoundRunner(model, wa.IoArena(huge_pages=False))),
        ):
            for _ in range(3):
                runner.run(x)
            held = []
            results[side].append(measure(lambda: held.append(runner.run(x)), steps))
            del held
    print(f"\nONNX Runtime, {ex.describe(model)}, 1 thread, {rounds} rounds x {steps} runs:")
    print(f"{'':44} {'faults/run':>11} {'ms/run':>8}")
    for side, label in (("default", "ORT allocates outputs, released"),
                        ("bound", "outputs bound to IoArena.empty, released"),
                        ("default_held", "ORT allocates outputs, all kept"),
                        ("bound_held", "outputs bound to IoArena.empty, all kept"),
                        ("bound_held_4k", "... IoArena(huge_pages=False), all kept")):
        f = statistics.median(r[0] for r in results[side])
        ms = statistics.median(r[1] for r in results[side])
        print(f"{label:44} {f:11.1f} {ms:8.2f}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--rounds", type=int, default=5)
    a = p.parse_args()
    numpy_loop(a.steps, a.rounds)
    onnx_runs(a.steps, a.rounds)


if __name__ == "__main__":
    main()
