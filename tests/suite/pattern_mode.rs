//! Pattern mode on a real arena: warm runs served from the planned block
//! cost nothing, every deviation falls back with every buffer's contents
//! intact, alternating keys, relearning, trim and the retention cap.

use crate::support::{check, faults_trusted, fill, measure};
use warmarena::{Allocation, ArenaConfig, ExecutionArena};

fn pattern_arena() -> ExecutionArena {
    ExecutionArena::with_config(ArenaConfig::default().pattern(true))
}

/// One step of a run: allocate `size` (aligned to `align`), or free the
/// buffer allocated at step `k`.
#[derive(Clone, Copy, Debug)]
enum Op {
    Alloc(usize, usize),
    Free(usize),
}

/// A family of inference-like traces: buffer i lives a few steps, a few
/// live to the end of the run, sizes from 64 B to 4 MiB.
fn trace(seed: u64, n: usize) -> Vec<Op> {
    let mut x = seed | 1;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut ops = Vec::new();
    let mut dies: Vec<(usize, usize)> = Vec::new();
    for i in 0..n {
        let r = rnd();
        let size = (64 + (r as usize % (1 << 20))) >> ((r >> 40) % 12);
        let align = 16 << ((r >> 50) % 3);
        ops.push(Op::Alloc(size.max(1), align));
        dies.push((i + 1 + (r >> 20) as usize % 6, i));
        dies.sort_unstable();
        while let Some(&(t, k)) = dies.first() {
            if t > i {
                break;
            }
            ops.push(Op::Free(k));
            dies.remove(0);
        }
    }
    for (_, k) in dies {
        ops.push(Op::Free(k));
    }
    ops
}

/// The largest sum of live request sizes (in 16-byte granules) over a run.
fn request_peak(ops: &[Op]) -> usize {
    let mut sizes = Vec::new();
    let (mut live, mut peak) = (0usize, 0usize);
    for op in ops {
        match *op {
            Op::Alloc(s, _) => {
                let s = (s + 15) & !15;
                sizes.push(s);
                live += s;
                peak = peak.max(live);
            }
            Op::Free(k) => live -= sizes[k],
        }
    }
    peak
}

type Live = Vec<Option<(Allocation, u64)>>;

/// Replays `ops` into `live` (cleared first; reserve it to keep the
/// harness off the heap), writing a pattern into each buffer at
/// allocation and checking it at its free. Buffers the run does not free
/// stay in `live`.
fn replay_into(arena: &ExecutionArena, ops: &[Op], seed: u64, live: &mut Live) {
    live.clear();
    for op in ops {
        match *op {
            Op::Alloc(size, align) => {
                let mut a = arena.allocate(size, align).expect("allocate");
                assert_eq!(a.as_ptr() as usize % align, 0);
                let s = seed ^ (live.len() as u64 * 0x9E37);
                fill(a.as_mut_slice(), s);
                live.push(Some((a, s)));
            }
            Op::Free(k) => {
                let (a, s) = live[k].take().expect("freed twice");
                assert!(check(a.as_slice(), s), "buffer {k} was overwritten");
            }
        }
    }
}

/// Checks and frees the buffers a run left live.
fn checked(mut live: Live) {
    for (a, s) in live.drain(..).flatten() {
        assert!(check(a.as_slice(), s), "a kept buffer was overwritten");
    }
}

fn replay(arena: &ExecutionArena, ops: &[Op], seed: u64) -> Live {
    let mut live = Live::new();
    replay_into(arena, ops, seed, &mut live);
    live
}

#[test]
fn warm_pattern_runs_take_no_fault_syscall_or_heap_allocation() {
    for seed in [3, 11, 29] {
        // With huge-page advice (the default): a release that splits a
        // huge page advises it off, so khugepaged never collapses one
        // under a warm run (`os/split.rs`; this test once saw such a fault).
        let arena = ExecutionArena::with_config(ArenaConfig::default().pattern(true));
        let ops = trace(seed, 60);
        let n = ops.iter().filter(|o| matches!(o, Op::Alloc(..))).count() as u64;
        // Learning run, then one served run to bring the block in.
        arena.begin_run();
        arena.reset_peak();
        checked(replay(&arena, &ops, 1));
        let learned_peak = arena.stats().peak_live_bytes;
        arena.begin_run();
        checked(replay(&arena, &ops, 2));
        arena.begin_run();
        let s0 = arena.stats();
        let mut live = Live::with_capacity(ops.len());
        // Write the harness's own vector once before measuring: a fresh
        // allocation's pages would fault on their first write inside the
        // measured runs (one fault now and then, depending on where the
        // system allocator placed the vector).
        live.resize_with(ops.len(), || None);
        live.clear();
        let ((), cost, _) = measure(|| {
            for run in 0..10 {
                replay_into(&arena, &ops, 10 + run, &mut live);
                for (a, s) in live.iter().flatten() {
                    assert!(check(a.as_slice(), *s), "a kept buffer was overwritten");
                }
                live.clear();
                arena.begin_run();
            }
        });
        let s1 = arena.stats();
        assert_eq!(s1.pattern_hits - s0.pattern_hits, 10, "seed {seed}");
        assert_eq!(
            s1.pattern_planned_allocations - s0.pattern_planned_allocations,
            10 * n
        );
        assert_eq!(cost.heap_calls, 0, "seed {seed}: heap allocations");
        assert_eq!(
            s1.os.syscalls(),
            s0.os.syscalls(),
            "seed {seed}: system calls"
        );
        assert_eq!(s1.cold_allocations, s0.cold_allocations);
        if faults_trusted("pattern warm runs") {
            assert_eq!(cost.minor_faults, 0, "seed {seed}: page faults");
        }
        // The block against the live peak of the bytes asked for, and
        // against what the ordinary arena held at its peak (classes).
        let block = s1.pattern_block_bytes;
        let want = request_peak(&ops);
        assert!(
            block * 100 <= want * 105,
            "seed {seed}: block {block} vs live request peak {want}"
        );
        assert!(
            block <= learned_peak,
            "seed {seed}: {block} > {learned_peak}"
        );
        assert_eq!(s1.live_bytes, 0);
        // What the arena holds: the block, and no more than what the run
        // takes outside it (the learning run's class buffers went back when
        // the block was carved).
        let block_cap =
            warmarena::size_class::class_of(block).map_or(block, warmarena::size_class::capacity);
        assert!(
            s1.retained_bytes <= block_cap,
            "seed {seed}: the arena retains {} B for a block of {block} B (class capacity {block_cap} B)",
            s1.retained_bytes
        );
    }
}

#[test]
fn every_deviation_falls_back_with_contents_intact() {
    let ops = trace(5, 40);
    let first_free = ops.iter().position(|o| matches!(o, Op::Free(_))).unwrap();
    // The first request selects the pattern (no key): deviate after it.
    let second = 1 + ops[1..]
        .iter()
        .position(|o| matches!(o, Op::Alloc(..)))
        .unwrap();
    let Op::Alloc(s1, a1) = ops[second] else {
        unreachable!()
    };
    let mut kinds: Vec<(&str, Vec<Op>)> = Vec::new();
    let mut other_size = ops.clone();
    other_size[second] = Op::Alloc(s1 + 1, a1);
    kinds.push(("another size", other_size));
    let mut other_align = ops.clone();
    other_align[second] = Op::Alloc(s1, a1 * 2);
    kinds.push(("another alignment", other_align));
    let mut extra = ops.clone();
    extra.insert(first_free, Op::Alloc(100, 16));
    kinds.push(("an extra request", extra));
    let mut order = ops.clone();
    let second_free = first_free
        + 1
        + ops[first_free + 1..]
            .iter()
            .position(|o| matches!(o, Op::Free(_)))
            .unwrap();
    order.swap(first_free, second_free);
    kinds.push(("a free in another order", order));
    let mut kept = ops.clone();
    kept.remove(first_free);
    kinds.push(("a buffer live past its free", kept));
    for (name, run) in kinds {
        let arena = pattern_arena();
        arena.begin_run();
        checked(replay(&arena, &ops, 1));
        arena.begin_run();
        let left = replay(&arena, &run, 2);
        // The next run starts while buffers of the deviating run may
        // still live in the block: it must not be served from it.
        arena.begin_run();
        let again = replay(&arena, &ops, 3);
        checked(left);
        checked(again);
        arena.begin_run();
        let s = arena.stats();
        assert!(s.pattern_misses >= 1, "{name}: {s:?}");
        assert_eq!(s.live_bytes, 0, "{name}");
    }
}

#[test]
fn alternating_keys_are_both_served_planned() {
    let arena = pattern_arena();
    let traces = [trace(7, 30), trace(8, 50)];
    for run in 0..12 {
        arena.begin_run_keyed(run % 2);
        checked(replay(&arena, &traces[run as usize % 2], run));
    }
    arena.begin_run();
    let s = arena.stats();
    assert_eq!(
        (s.pattern_learned, s.pattern_hits, s.pattern_misses),
        (2, 10, 0)
    );
    // The two keys took turns with one block: the arena holds one block
    // (the larger pattern's), not one per key, and no learning buffers.
    let block = s.pattern_block_bytes;
    let want = request_peak(&traces[0]).max(request_peak(&traces[1]));
    assert!(
        block * 100 <= want * 105,
        "block {block} vs larger peak {want}"
    );
    let block_cap =
        warmarena::size_class::class_of(block).map_or(block, warmarena::size_class::capacity);
    assert_eq!(s.live_bytes, 0);
    assert!(
        s.retained_bytes <= block_cap,
        "the arena retains {} B for one block of {block} B (class capacity {block_cap} B)",
        s.retained_bytes
    );
}

#[test]
fn a_changed_run_is_relearned() {
    let arena = pattern_arena();
    let (a, b) = (trace(9, 30), trace(10, 30));
    arena.begin_run_keyed(1);
    checked(replay(&arena, &a, 0));
    for run in 0..6 {
        arena.begin_run_keyed(1);
        checked(replay(&arena, &b, run));
    }
    arena.begin_run();
    let s = arena.stats();
    assert_eq!(s.pattern_relearns, 1);
    assert_eq!((s.pattern_misses, s.pattern_hits), (3, 2));
}

#[test]
fn trim_and_cap_apply_to_the_planned_block() {
    let ops = trace(12, 40);
    let arena = pattern_arena();
    arena.begin_run();
    checked(replay(&arena, &ops, 0));
    arena.begin_run();
    checked(replay(&arena, &ops, 1));
    arena.begin_run();
    // Between runs the block is a retained buffer: trim gives it back.
    let block = arena.stats().pattern_block_bytes;
    assert!(arena.trim() >= block);
    assert_eq!(arena.stats().retained_bytes, 0);
    let cold = arena.stats().cold_allocations;
    checked(replay(&arena, &ops, 2));
    arena.begin_run();
    let s = arena.stats();
    assert_eq!(
        s.cold_allocations,
        cold + 1,
        "the block came back cold, once"
    );
    assert_eq!(s.pattern_hits, 2);
    // A cap of 0 keeps nothing: the block goes at every boundary, and runs
    // are still served from it.
    arena.set_retention_cap(0);
    for run in 0..3 {
        checked(replay(&arena, &ops, 3 + run));
        arena.begin_run();
        assert_eq!(arena.stats().retained_bytes, 0);
    }
    assert_eq!(arena.stats().pattern_hits, 5);
}

#[test]
fn planned_buffers_outlive_every_handle() {
    let ops = trace(13, 20);
    let arena = pattern_arena();
    arena.begin_run();
    checked(replay(&arena, &ops, 0));
    arena.begin_run();
    let mut a = arena
        .allocate(
            match ops[0] {
                Op::Alloc(s, _) => s,
                Op::Free(_) => unreachable!(),
            },
            match ops[0] {
                Op::Alloc(_, al) => al,
                Op::Free(_) => unreachable!(),
            },
        )
        .unwrap();
    assert_eq!(arena.stats().pattern_planned_allocations, 1);
    fill(a.as_mut_slice(), 77);
    drop(arena);
    assert!(check(a.as_slice(), 77));
    drop(a);
}

#[test]
fn other_threads_are_served_from_classes_during_a_run() {
    let ops = trace(14, 30);
    let arena = pattern_arena();
    for run in 0..4 {
        arena.begin_run();
        std::thread::scope(|s| {
            s.spawn(|| checked(replay(&arena, &trace(15, 20), 100 + run)));
            checked(replay(&arena, &ops, run));
        });
    }
    arena.begin_run();
    assert_eq!(arena.stats().pattern_hits, 3);
}

/// Entering a scope of the scoped global allocator is a run boundary.
/// (This binary's global allocator counts calls rather than scoping them:
/// `tests/global.rs` runs third-party work under the scoped one.)
#[test]
fn global_scope_entry_is_a_run_boundary() {
    let arena = pattern_arena();
    for _ in 0..4 {
        let _g = warmarena::global::enter(&arena);
        let a = arena.allocate(4096, 64).unwrap();
        let b = arena.allocate(100, 16).unwrap();
        drop((a, b));
    }
    arena.begin_run();
    let s = arena.stats();
    assert_eq!((s.pattern_learned, s.pattern_hits), (1, 3));
}

/// `ArenaRun::clear` is a run boundary of the session's execution arena.
#[test]
fn run_context_clear_is_a_run_boundary() {
    use warmarena::session::{ArenaRun, Graph, Session};
    let exec = pattern_arena();
    let g = Graph::new()
        .input("x")
        .node("inc", &["x"], &["y"])
        .output("y");
    let session = Session::new(&g, exec.clone(), warmarena::IoArena::new()).unwrap();
    let mut ctx = ArenaRun::new(&session);
    for _ in 0..4 {
        ctx.clear();
        drop(exec.allocate(4096, 64).unwrap());
    }
    ctx.clear();
    assert_eq!(exec.stats().pattern_hits, 3);
}

/// The lock-free hit path with other threads: planned buffers handed to
/// another thread and freed there, a boundary crossed there mid-run, and
/// the last handle dropped there while the run's thread still holds a
/// planned buffer. Contents stay intact and the arena stays consistent.
#[test]
fn other_threads_free_planned_buffers_and_end_runs() {
    let arena = pattern_arena();
    for _ in 0..2 {
        arena.begin_run_keyed(1);
        for i in 0..64u64 {
            let mut a = arena.allocate(4096, 64).unwrap();
            fill(a.as_mut_slice(), i);
            assert!(check(a.as_slice(), i));
        }
    }
    arena.begin_run_keyed(1);
    assert_eq!(arena.stats().pattern_hits, 1);
    // Planned buffers freed on another thread (they keep their contents
    // until then): the run deviates where its own free was expected.
    let mut kept = Vec::new();
    for i in 0..3u64 {
        let mut a = arena.allocate(4096, 64).unwrap();
        fill(a.as_mut_slice(), 100 + i);
        kept.push((a, 100 + i));
        if i < 2 {
            let (a, s) = kept.pop().unwrap();
            std::thread::scope(|sc| {
                sc.spawn(move || {
                    assert!(check(a.as_slice(), s));
                    drop(a);
                });
            });
        }
    }
    // The first was planned; the second request came where the recording
    // has this thread's free of the first: the run deviated there.
    assert_eq!(arena.stats().pattern_planned_allocations, 64 + 1);
    arena.check_invariants().unwrap();
    // A boundary on another thread ends this thread's run.
    std::thread::scope(|sc| {
        sc.spawn(|| arena.begin_run_keyed(2));
    });
    let mut b = arena.allocate(4096, 64).unwrap();
    fill(b.as_mut_slice(), 7);
    for (a, s) in kept.drain(..) {
        assert!(check(a.as_slice(), s));
    }
    assert!(check(b.as_slice(), 7));
    drop(b);
    arena.begin_run_keyed(1);
    assert_eq!(arena.stats().pattern_misses, 1);
    // Served again from its block; the last handle goes on another thread
    // while this thread holds a planned buffer.
    let before = arena.stats().pattern_planned_allocations;
    let mut c = arena.allocate(4096, 64).unwrap();
    fill(c.as_mut_slice(), 9);
    assert_eq!(arena.stats().pattern_planned_allocations, before + 1);
    std::thread::scope(|sc| {
        sc.spawn(move || drop(arena));
    });
    assert!(check(c.as_slice(), 9));
    drop(c);
}

#[test]
fn allocator_api2_runs_are_learned_and_served_planned() {
    // allocator-api2 frees by address, past the thread cache's hit (which
    // a pattern arena never takes: its epoch turns caching off): the
    // learning run must record every free, and the served runs must hand
    // out and take back planned buffers only.
    use allocator_api2::alloc::{Allocator, Layout};
    use core::ptr::NonNull;
    let arena = pattern_arena();
    let ops = trace(7, 60);
    let n = ops.iter().filter(|o| matches!(o, Op::Alloc(..))).count() as u64;
    let run = |arena: &ExecutionArena, seed: u8| {
        let mut live: Vec<Option<(NonNull<u8>, Layout)>> = Vec::new();
        for op in &ops {
            match *op {
                Op::Alloc(size, align) => {
                    let l = Layout::from_size_align(size, align).unwrap();
                    let p = Allocator::allocate(&arena, l).unwrap().cast::<u8>();
                    // SAFETY: a fresh buffer of `size` bytes.
                    unsafe { p.as_ptr().write_bytes(seed, size) };
                    live.push(Some((p, l)));
                }
                Op::Free(k) => {
                    let (p, l) = live[k].take().unwrap();
                    // SAFETY: a live buffer of `l` from this arena, freed once.
                    unsafe {
                        let x = core::slice::from_raw_parts(p.as_ptr(), l.size());
                        assert!(x.iter().all(|&b| b == seed), "buffer {k} overwritten");
                        Allocator::deallocate(&arena, p, l);
                    }
                }
            }
        }
    };
    for r in 0..5u8 {
        arena.begin_run();
        run(&arena, r + 1);
    }
    arena.begin_run();
    let s = arena.stats();
    assert_eq!(s.pattern_learned, 1, "{s:?}");
    assert!(s.pattern_hits >= 3, "{s:?}");
    assert_eq!(s.pattern_misses, 0, "{s:?}");
    assert!(s.pattern_planned_allocations >= 3 * n, "{s:?}");
    assert_eq!((s.live_bytes, s.live_buffers), (0, 0));
    assert_eq!(arena.check_invariants(), Ok(()));
}
