//! The warm-run promise: after one warm-up run, runs with the same shapes
//! take no page fault, make no system call and no heap allocation, and every
//! allocation is served from retained memory.

use crate::support::{fill, measure};
use warmarena::{Allocation, ArenaConfig, ExecutionArena, IoArena};

/// 32 sizes from 4 KiB to 64 MiB, geometric, not powers of two.
fn inference_sizes() -> Vec<usize> {
    (0..32)
        .map(|i| {
            let base = 4096usize << (i * 14 / 31);
            base + (base / 7) * (i % 3)
        })
        .collect()
}

/// One run: buffer i is allocated at step i, written in full, and freed
/// after its last use, which for most buffers is a few steps later, so the
/// free order differs from the allocation order.
fn run(arena: &ExecutionArena, sizes: &[usize], slots: &mut [Option<Allocation>], seed: u8) {
    let n = sizes.len();
    for i in 0..n {
        let mut a = arena.allocate(sizes[i], 64).expect("allocate");
        a.as_mut_slice().fill(seed.wrapping_add(i as u8));
        slots[i] = Some(a);
        for (j, slot) in slots.iter_mut().enumerate().take(i + 1) {
            let last_use = (j + 1 + (j * 7) % 5).min(n - 1);
            if last_use == i {
                *slot = None;
            }
        }
    }
    for s in slots.iter_mut() {
        *s = None;
    }
}

fn ten_runs(arena: &ExecutionArena, sizes: &[usize], slots: &mut [Option<Allocation>]) {
    for r in 1..=10 {
        run(arena, sizes, slots, r);
    }
}

#[test]
fn ten_warm_runs_take_no_fault_syscall_or_heap_allocation() {
    let arena = ExecutionArena::new();
    let sizes = inference_sizes();
    assert_eq!(*sizes.first().unwrap(), 4096);
    assert!(*sizes.last().unwrap() >= 64 << 20);
    let mut slots: Vec<Option<Allocation>> = (0..sizes.len()).map(|_| None).collect();
    // Page faults count the first execution of code pages too (text pages are
    // mapped lazily). Run the same workload twice on a throwaway arena first,
    // so the warm path's code is resident and only arena buffers can fault.
    let code_warmup = ExecutionArena::new();
    run(&code_warmup, &sizes, &mut slots, 0);
    ten_runs(&code_warmup, &sizes, &mut slots);
    drop(code_warmup);
    // The warm-up runs under the same probe as the measured runs, so that the
    // probe's own first-touch costs (stack pages, counter set-up) land here.
    let (_, cold, _) = measure(|| run(&arena, &sizes, &mut slots, 0));
    println!("warm-up run: {cold:?}");
    let before = arena.stats();
    assert_eq!(before.live_bytes, 0);

    let ((), cost, source) = measure(|| ten_runs(&arena, &sizes, &mut slots));
    let after = arena.stats();
    println!("warm runs: {cost:?} (faults via {source:?}); stats {after:?}");
    if crate::support::faults_trusted("warm runs") {
        assert_eq!(cost.minor_faults, 0, "new page faults on warm runs");
        assert_eq!(cost.major_faults, 0);
    }
    assert_eq!(cost.heap_calls, 0, "heap allocations on warm runs");
    assert_eq!(
        after.os.syscalls(),
        before.os.syscalls(),
        "system calls on warm runs"
    );
    assert_eq!(after.cold_allocations, before.cold_allocations);
    assert_eq!(
        after.warm_allocations - before.warm_allocations,
        10 * sizes.len() as u64
    );
    assert_eq!(after.retained_bytes, before.retained_bytes);
    assert_eq!(after.live_bytes, 0);
}

#[test]
fn io_arena_keeps_the_same_promise() {
    let arena = IoArena::new();
    let mut outs: Vec<Option<Allocation>> = (0..8).map(|_| None).collect();
    let mut one_run = |seed: u64| {
        for (i, o) in outs.iter_mut().enumerate() {
            let mut a = arena.allocate((i + 1) * 300_000, 64).unwrap();
            fill(a.as_mut_slice(), seed + i as u64);
            *o = Some(a);
        }
        outs.iter_mut().for_each(|o| *o = None);
    };
    one_run(0);
    // A first pass of the measured loop itself makes its code resident (text
    // pages fault on first execution); the arena is already warm after run 0.
    (1..=10).for_each(&mut one_run);
    let before = arena.stats();
    let ((), cost, _) = measure(|| (1..=10).for_each(&mut one_run));
    let after = arena.stats();
    if crate::support::faults_trusted("mixed-size warm runs") {
        assert_eq!(cost.minor_faults, 0);
    }
    assert_eq!(cost.heap_calls, 0);
    assert_eq!(after.os.syscalls(), before.os.syscalls());
    assert_eq!(after.warm_allocations - before.warm_allocations, 80);
    assert_eq!(after.cold_allocations, 8);
}

fn thp_enabled() -> bool {
    std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .map(|s| !s.contains("[never]"))
        .unwrap_or(false)
}

#[test]
fn huge_pages_cut_cold_faults_for_large_classes() {
    const LEN: usize = 64 << 20;
    // An I/O arena: a fresh mapping of this class faults page by page
    // (execution arenas materialize each cold heap piece in one call).
    let small_pages = IoArena::with_config(ArenaConfig::default().huge_pages(false));
    let (_, base_cost, _) = measure(|| {
        let mut a = small_pages.allocate(LEN, 64).unwrap();
        a.as_mut_slice().fill(1);
    });
    assert!(
        base_cost.minor_faults >= (LEN / 4096) as u64 / 2,
        "{base_cost:?}"
    );

    if !thp_enabled() {
        println!("skipping the huge-page half: transparent huge pages are disabled here");
        return;
    }
    let huge = IoArena::new();
    let (_, huge_cost, _) = measure(|| {
        let mut a = huge.allocate(LEN, 64).unwrap();
        a.as_mut_slice().fill(1);
    });
    println!("64 MiB cold: {base_cost:?} with 4 KiB pages, {huge_cost:?} with THP advice");
    // About one fault per 2 MiB; allow for huge pages the kernel could not
    // assemble at once (fragmentation), but far below one per 4 KiB.
    assert!(
        huge_cost.minor_faults <= (LEN / 4096) as u64 / 8,
        "{huge_cost:?}"
    );
}

#[test]
fn prefault_materializes_pages_before_first_write() {
    let arena =
        ExecutionArena::with_config(ArenaConfig::default().prefault(true).huge_pages(false));
    let mut a = arena.allocate(8 << 20, 64).unwrap();
    assert!(arena.stats().os.prefaults >= 1);
    let (_, cost, source) = measure(|| a.as_mut_slice().fill(3));
    println!("first write after prefault: {cost:?} via {source:?}");
    if crate::support::faults_trusted("prefault") {
        assert_eq!(cost.minor_faults, 0);
    }
}

/// Heap pieces placed in a warm run at addresses no piece started at
/// before (as many pieces as the warm-up run placed, the first one 8 MiB
/// long, so the rest lie 8 MiB higher, up to where only one large buffer
/// reached): indexing them must cost nothing new (the heap's per-page
/// index is touched as the mark rises, not as pieces are placed).
#[test]
fn heap_pieces_at_new_addresses_below_the_mark_cost_nothing() {
    const PIECE: usize = 64 << 10;
    const N: usize = 700;
    // The lists are made (and their pages touched) before anything is measured.
    let mut v: Vec<Allocation> = Vec::with_capacity(N);
    let mut odd: Vec<Allocation> = Vec::with_capacity(N / 2);
    let mut pieces = |arena: &ExecutionArena, first: usize, seed: u64| {
        for k in 0..N {
            let len = if k == 0 { first } else { PIECE };
            let mut a = arena.allocate(len, 64).unwrap();
            fill(&mut a.as_mut_slice()[..64], seed + k as u64);
            v.push(a);
        }
        // Every second one kept while the rest go (holes), then found
        // again by address as they are dropped.
        for (k, a) in v.drain(..).enumerate() {
            if k % 2 == 1 {
                odd.push(a);
            }
        }
        odd.clear();
    };
    let code_warmup = ExecutionArena::new();
    pieces(&code_warmup, PIECE, 0);
    pieces(&code_warmup, 8 << 20, 0);
    drop(code_warmup);

    let arena = ExecutionArena::new();
    let (_, cold, _) = measure(|| {
        // Marked room past what the shifted run reaches, then the warm-up run.
        drop(arena.allocate(64 << 20, 64).unwrap());
        pieces(&arena, PIECE, 1);
    });
    println!("warm-up: {cold:?}");
    let before = arena.stats();
    const { assert!((8 << 20) + N * PIECE < 64 << 20) };
    let ((), cost, source) = measure(|| pieces(&arena, 8 << 20, 2));
    let after = arena.stats();
    println!("{N} pieces at new addresses: {cost:?} via {source:?}");
    if crate::support::faults_trusted("heap pieces at new addresses") {
        assert_eq!(cost.minor_faults, 0, "page faults");
    }
    assert_eq!(cost.heap_calls, 0, "heap allocations");
    assert_eq!(after.os.syscalls(), before.os.syscalls(), "system calls");
    assert_eq!(after.cold_allocations, before.cold_allocations);
    assert_eq!(after.warm_allocations - before.warm_allocations, N as u64);
    assert_eq!(after.live_bytes, 0);
}
