//! Warm runs of real traces fault nothing: every trace under
//! `$WARMARENA_DATA/planner` (and held-out families made from them: sizes
//! scaled, perturbed, frees of a step shuffled, two shapes alternating) is
//! replayed through the public `allocator_api2` path, 1 cold run then
//! several warm runs, at alignments 64 and 4096, every byte written; each
//! warm run, the first included, must take no page fault and no system
//! call, and the arena must leave no base pages for khugepaged to collapse
//! under a later run (docs/design/arena.md, "Split huge pages").
//!
//! The small traces (MiniMalloc, TVM) run in the normal suite; the large
//! ones (SOMAS, IOPDDL G_1: gigabytes a run) are `#[ignore]`d and meant for
//! release builds: `cargo test --release --test replay -- --ignored`.
//! Traces whose live peak is above `WARMARENA_REPLAY_MAX_PEAK` bytes
//! (default 4 GiB) are skipped with the reason printed.

#[path = "common/replay.rs"]
mod replay;

use replay::{load_traces, planner_data, Api2, Replay};
use warmarena::faults::{huge_page_residency, pre_touch_code, pre_touch_stack, FaultCounter};
use warmarena::planner::Buffer;
use warmarena::{ExecutionArena, IoArena};

const WARM_RUNS: usize = 4;

/// What the warm runs of one replay cost.
#[derive(Debug)]
struct WarmCost {
    /// Minor faults of each warm run.
    faults: Vec<u64>,
    /// Cold allocations the warm runs made (all of them together).
    cold_allocations: u64,
    /// System calls the warm runs made (all of them together).
    syscalls: u64,
    /// Resident bytes khugepaged may collapse, over the mappings from the
    /// lowest buffer to the highest after the warm runs (`None`: not
    /// read, the reason printed).
    collapsible: Option<u64>,
}

/// `thp_fault_fallback` of `/proc/vmstat`: faults that wanted a huge page
/// and got base pages (the kernel had none free).
fn thp_fallbacks() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/vmstat").ok()?;
    let line = s.lines().find(|l| l.starts_with("thp_fault_fallback "))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The resident bytes khugepaged may collapse over the mappings the buffer
/// addresses `slots` span, when that says something about the arena:
/// where the THP mode is `always`, other memory there is eligible too, and
/// where a huge-page fault fell back to base pages during the replay, the
/// arena's own memory is (neither is the arena's doing).
fn collapsible_over(addrs: &[usize], fallbacks_before: Option<u64>) -> Option<u64> {
    let mode = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").ok()?;
    if mode.starts_with("[always]") {
        eprintln!("collapsible bytes not read: THP mode is always");
        return None;
    }
    if thp_fallbacks() != fallbacks_before {
        eprintln!("collapsible bytes not read: a huge-page fault fell back to base pages");
        return None;
    }
    let addrs = addrs.iter().copied().filter(|&a| a != 0);
    let lo = addrs.clone().min()?;
    let hi = addrs.max()?;
    Some(huge_page_residency(lo..hi + 1)?.collapsible)
}

/// Replays `shapes` in turn (one cold pass over all, then `WARM_RUNS`
/// passes) in one fresh arena at `align`.
fn warm_cost(shapes: &[&Replay], align: usize) -> WarmCost {
    let arena = ExecutionArena::new();
    let backend = Api2(&arena);
    let n = shapes.iter().map(|r| r.sizes.len()).max().unwrap_or(0);
    let mut slots = vec![core::ptr::null_mut(); n];
    let mut counter = FaultCounter::new();
    let fallbacks = thp_fallbacks();
    for r in shapes {
        assert!(r.run(&backend, align, 0, &mut slots), "{}: refused", r.name);
    }
    let cold = arena.stats().cold_allocations;
    if std::env::var_os("WA_PROBE").is_some() {
        for r in shapes {
            let mut probe = || counter.read().minor;
            let hits = r.run_probed(&backend, align, 9, &mut slots, &mut probe);
            for (i, size, addr, f) in hits {
                eprintln!(
                    "PROBE {} align {align}: buffer {i} size {size} at {addr:#x}: {f} faults",
                    r.name
                );
            }
        }
    }
    let syscalls = arena.stats().os.syscalls();
    let mut faults = Vec::new();
    // Faults of the program's text (a path of the arena's first run in
    // a warm run) are not the memory under test.
    pre_touch_code();
    for run in 1..=WARM_RUNS {
        pre_touch_stack();
        counter.reset();
        for r in shapes {
            assert!(r.run(&backend, align, run as u8, &mut slots));
        }
        faults.push(counter.read().minor);
    }
    let cold_allocations = arena.stats().cold_allocations - cold;
    let syscalls = arena.stats().os.syscalls() - syscalls;
    // One more pass, for the buffers' addresses (a probe that moves at
    // every event reports each one); the arena keeps their pages after.
    let mut addrs = Vec::new();
    for r in shapes {
        let mut tick = 0;
        let mut probe = || {
            tick += 1;
            tick
        };
        let hits = r.run_probed(&backend, align, 9, &mut slots, &mut probe);
        addrs.extend(hits.into_iter().map(|(_, _, addr, _)| addr));
    }
    WarmCost {
        faults,
        cold_allocations,
        syscalls,
        collapsible: collapsible_over(&addrs, fallbacks),
    }
}

fn faults_trusted() -> bool {
    if std::env::var_os("WARMARENA_UNDER_VALGRIND").is_some() {
        eprintln!("fault counts not asserted under valgrind (its JIT faults on this thread)");
        return false;
    }
    true
}

fn max_peak() -> usize {
    std::env::var("WARMARENA_REPLAY_MAX_PEAK")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4 << 30)
}

/// Replays every shape set at both alignments; returns the failures.
fn check_all(sets: &[Vec<Replay>]) -> Vec<String> {
    let mut bad = Vec::new();
    for set in sets {
        let peak: usize = set.iter().map(|r| r.live_peak).max().unwrap_or(0);
        let name = set
            .iter()
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>()
            .join(" + ");
        if peak > max_peak() {
            eprintln!(
                "SKIPPED {name}: live peak {} MiB above WARMARENA_REPLAY_MAX_PEAK",
                peak >> 20
            );
            continue;
        }
        for align in [64, 4096] {
            let refs: Vec<&Replay> = set.iter().collect();
            let c = warm_cost(&refs, align);
            eprintln!(
                "{name} align {align}: warm faults {:?}, warm cold allocations {}, warm system calls {}, collapsible bytes {:?}",
                c.faults, c.cold_allocations, c.syscalls, c.collapsible
            );
            // Split huge pages left in advised memory: khugepaged collapses
            // them some seconds later, a fault in whichever warm run it
            // meets (docs/design/arena.md, "Split huge pages").
            if c.faults.iter().any(|&f| f > 0)
                || c.syscalls > 0
                || c.collapsible.is_some_and(|b| b > 0)
            {
                bad.push(format!("{name} align {align}: {c:?}"));
            }
        }
    }
    bad
}

/// The traces of `families`, plus held-out variants of each: sizes ×3
/// with ±20 % noise, frees of a step shuffled, and two shapes (×1 and ×5/2)
/// alternating run by run.
fn sets_for(families: &[&str], scale: usize) -> Vec<Vec<Replay>> {
    let Some(dir) = planner_data() else {
        return Vec::new();
    };
    let mut sets = Vec::new();
    for (name, bufs) in load_traces(&dir, families) {
        if name.contains("S_1") {
            // IOPDDL's S_1 (19 GiB written a run) is not part of the check.
            continue;
        }
        let scaled = |num: usize, den: usize, seed: u64| -> Vec<Buffer> {
            Replay::family(&name, &bufs, num * scale, den, seed, 20)
        };
        sets.push(vec![Replay::new(&name, &bufs, 1, 0)]);
        sets.push(vec![Replay::new(
            &format!("{name} x{} jitter", 3 * scale),
            &scaled(3, 1, 7),
            1,
            0,
        )]);
        sets.push(vec![Replay::new(
            &format!("{name} shuffled frees"),
            &bufs,
            1,
            11,
        )]);
        sets.push(vec![
            Replay::new(&format!("{name} x{scale}"), &scaled(1, 1, 0), 1, 0),
            Replay::new(&format!("{name} x{}/2", 5 * scale), &scaled(5, 2, 0), 1, 3),
        ]);
    }
    sets
}

#[test]
#[cfg_attr(miri, ignore)]
fn small_traces_fault_nothing_warm() {
    let bad = check_all(&sets_for(&["minimalloc", "tvm"], 1));
    if faults_trusted() {
        assert!(bad.is_empty(), "warm faults:\n{}", bad.join("\n"));
    }
}

#[test]
#[ignore = "gigabytes a run: release only (cargo test --release --test replay -- --ignored)"]
fn large_traces_fault_nothing_warm() {
    let bad = check_all(&sets_for(&["somas", "iopddl"], 1));
    if faults_trusted() {
        assert!(bad.is_empty(), "warm faults:\n{}", bad.join("\n"));
    }
}

/// A buffer first used for a smaller request of its class, live while a
/// larger one of the class came, serves that larger size warm without a
/// fault: retained buffers are ready up to their class's largest request
/// (tails used to be materialized 2 MiB at most: the 72 MiB class, in steps
/// of 8 MiB, left up to 6 MiB untouched). Own classes hold buffers of
/// this size in I/O arenas (execution arenas place them in the heap,
/// checked by the replays above).
#[test]
#[cfg_attr(miri, ignore)]
fn retained_buffers_serve_every_size_their_class_has_seen() {
    for (small, large) in [((64 << 20) + 4096, 72 << 20), ((44 << 20) + 4096, 48 << 20)] {
        let arena = IoArena::new();
        let mut a = arena.allocate(small, 64).unwrap();
        let mut b = arena.allocate(large, 64).unwrap();
        assert_eq!(a.capacity(), b.capacity(), "test premise: one class");
        // SAFETY: each buffer has at least `small` / `large` writable bytes.
        unsafe {
            a.as_mut_ptr().write_bytes(1, small);
            b.as_mut_ptr().write_bytes(2, large);
        }
        drop((a, b));
        let mut counter = FaultCounter::new();
        pre_touch_stack();
        counter.reset();
        let mut x = arena.allocate(large, 64).unwrap();
        let mut y = arena.allocate(large, 64).unwrap();
        assert!(x.served_warm() && y.served_warm());
        // SAFETY: both buffers have `large` writable bytes.
        unsafe {
            x.as_mut_ptr().write_bytes(3, large);
            y.as_mut_ptr().write_bytes(4, large);
        }
        let f = counter.read().minor;
        eprintln!("class of {large} B: {f} faults writing both retained buffers whole");
        if faults_trusted() {
            assert_eq!(f, 0, "class of {large} B");
        }
    }
}

/// Where the runs of [`held_after_runs`] take place.
#[derive(Clone, Copy, Debug)]
enum Where {
    /// On the thread that made the arena.
    Maker,
    /// All on one other thread, the first after a run boundary.
    Other,
    /// Each on a new thread, after a run boundary, joined before the next
    /// starts (a pool's workers in turn).
    EachNew,
    /// On this thread, with no boundary, the arena made by a thread that
    /// has exited (a loader).
    LoaderMade,
}

/// Held bytes (live and retained) after a cold run and `WARM_RUNS` warm
/// runs of `r` at alignment 64, and the warm runs' cold allocations.
fn held_after_runs(r: &Replay, at: Where) -> (usize, u64) {
    let arena = match at {
        // A native join: the loader's exit is over.
        Where::LoaderMade => std::thread::spawn(ExecutionArena::new).join().unwrap(),
        _ => ExecutionArena::new(),
    };
    let one = |run: u8| {
        let mut slots = vec![core::ptr::null_mut(); r.sizes.len()];
        assert!(
            r.run(&Api2(&arena), 64, run, &mut slots),
            "{}: refused",
            r.name
        );
    };
    let mut cold = 0;
    let mut note_cold = |run: u8| {
        if run == 0 {
            cold = arena.stats().cold_allocations;
        }
    };
    match at {
        Where::Maker | Where::LoaderMade => {
            for run in 0..=WARM_RUNS as u8 {
                one(run);
                note_cold(run);
            }
        }
        Where::Other => std::thread::scope(|s| {
            s.spawn(|| {
                arena.begin_run();
                for run in 0..=WARM_RUNS as u8 {
                    one(run);
                    note_cold(run);
                }
            })
            .join()
            .unwrap()
        }),
        Where::EachNew => {
            for run in 0..=WARM_RUNS as u8 {
                std::thread::scope(|s| {
                    s.spawn(|| {
                        arena.begin_run();
                        one(run)
                    })
                    .join()
                    .unwrap()
                });
                note_cold(run);
            }
        }
    }
    let s = arena.stats();
    (s.live_bytes + s.retained_bytes, s.cold_allocations - cold)
}

/// Runtimes make their arenas on one thread (at start-up, a loader) and
/// run on another (a worker), or on whichever worker is free: the
/// execution heap moves to a run's thread at a run boundary and to the
/// next thread that asks once its thread has exited
/// (`arena/heap_owner.rs`), so those runs hold what runs on the maker's
/// thread hold, and repeat warm. (The heap used to serve the maker only:
/// MiniMalloc's trace A run on another thread held 3.0x as much, in own
/// classes.)
#[test]
#[cfg_attr(miri, ignore)]
fn runs_off_the_makers_thread_hold_what_its_runs_hold() {
    let Some(dir) = planner_data() else {
        return;
    };
    for (name, bufs) in load_traces(&dir, &["minimalloc", "tvm"]) {
        let r = Replay::new(&name, &bufs, 1, 0);
        let maker = held_after_runs(&r, Where::Maker);
        for at in [Where::Other, Where::EachNew, Where::LoaderMade] {
            let got = held_after_runs(&r, at);
            eprintln!(
                "{name}: held {} B on the maker, {at:?} {} B",
                maker.0, got.0
            );
            assert_eq!(got.0, maker.0, "{name}: {at:?}");
            assert_eq!(got.1, 0, "{name}: {at:?}: cold allocations in warm runs");
        }
    }
}
