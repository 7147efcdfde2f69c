//! Reuse policy: own class only (I/O arenas, and execution arenas below
//! 64 KiB), capacity-preserving reuse, retention cap with
//! least-recently-freed eviction, trim, accounting, independence; for
//! execution arenas from 64 KiB, the execution heap (any free space serves
//! any size, so alternating shapes keep about one shape's peak).

use warmarena::size_class::{capacity, class_of};
use warmarena::{ArenaConfig, ArenaKind, ExecutionArena, IoArena};

fn cap_of(size: usize) -> usize {
    capacity(class_of(size).unwrap())
}

#[test]
fn a_request_takes_a_retained_buffer_of_its_own_class_only() {
    let arena = IoArena::new();
    let a = arena.allocate(100_000, 8).unwrap();
    let b = arena.allocate(150_000, 8).unwrap();
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    drop(b);
    drop(a);
    // Another size of 100_000's class: that buffer, warm.
    let c = arena.allocate(cap_of(100_000) - 100, 8).unwrap();
    assert_eq!(c.as_ptr(), pa);
    assert_eq!(c.capacity(), cap_of(100_000));
    assert!(c.served_warm());
    let d = arena.allocate(150_000, 8).unwrap();
    assert_eq!(d.as_ptr(), pb);
    // 90_000 is a smaller class than both: never served from a larger one.
    let e = arena.allocate(90_000, 8).unwrap();
    assert!(!e.served_warm());
    assert_eq!(e.capacity(), cap_of(90_000));
}

#[test]
fn a_larger_retained_buffer_is_left_for_its_own_class() {
    let arena = IoArena::new();
    drop(arena.allocate(1 << 20, 8).unwrap());
    // Half the size: a class of its own, so fresh, and the 1 MiB buffer stays.
    let a = arena.allocate(512 << 10, 8).unwrap();
    assert!(!a.served_warm());
    assert_eq!(arena.stats().retained_bytes, 1 << 20);
    drop(a);
    let b = arena.allocate(1 << 20, 8).unwrap();
    assert!(b.served_warm());
    assert_eq!(arena.stats().retained_bytes, 512 << 10);
}

#[test]
fn reuse_keeps_capacity_and_resize_within_it_keeps_the_buffer() {
    let arena = IoArena::new();
    drop(arena.allocate(1 << 20, 8).unwrap());
    let mut a = arena.allocate((1 << 20) - 10_000, 8).unwrap();
    assert!(a.served_warm());
    assert_eq!(a.capacity(), 1 << 20);
    let p = a.as_ptr();
    a.set_len(1 << 20).unwrap();
    assert_eq!(a.as_ptr(), p);
    assert_eq!(a.len(), 1 << 20);
    assert!(a.set_len((1 << 20) + 1).is_err());
    assert_eq!(a.len(), 1 << 20);
}

#[test]
fn alignment_is_honoured_warm_and_cold() {
    let arena = ExecutionArena::new();
    for &align in &[1usize, 16, 64, 4096, 65536, 2 << 20] {
        for &size in &[1usize, 100, 5000, 70_000, 3 << 20] {
            let a = arena.allocate(size, align).unwrap();
            assert_eq!(a.as_ptr() as usize % align, 0, "size {size} align {align}");
            drop(a);
            let b = arena.allocate(size, align).unwrap();
            assert_eq!(
                b.as_ptr() as usize % align,
                0,
                "warm size {size} align {align}"
            );
        }
    }
}

#[test]
fn cap_evicts_least_recently_freed_first_and_never_live() {
    let mib = 1 << 20;
    let arena = IoArena::with_config(ArenaConfig::default().retention_cap(3 * mib));
    let bufs: Vec<_> = (0..4).map(|_| arena.allocate(mib, 8).unwrap()).collect();
    let addrs: Vec<_> = bufs.iter().map(|b| b.as_ptr() as usize).collect();
    let live = arena.allocate(5 * mib, 8).unwrap();
    for b in bufs {
        drop(b);
    }
    let s = arena.stats();
    assert_eq!(s.retained_bytes, 3 * mib);
    assert_eq!((s.evictions, s.evicted_bytes), (1, mib));
    assert_eq!(s.live_bytes, live.capacity());
    // The first freed was evicted; the three later ones are reused.
    let again: Vec<_> = (0..3).map(|_| arena.allocate(mib, 8).unwrap()).collect();
    for a in &again {
        assert!(a.served_warm());
        assert_ne!(a.as_ptr() as usize, addrs[0]);
    }
    drop(again);
    arena.set_retention_cap(mib);
    let s = arena.stats();
    assert_eq!(s.retained_bytes, mib);
    assert_eq!(s.evictions, 3);
    // Lowering the cap to zero never touches the live buffer.
    arena.set_retention_cap(0);
    assert_eq!(arena.stats().retained_bytes, 0);
    assert_eq!(arena.stats().live_bytes, live.capacity());
}

#[test]
fn cap_of_zero_keeps_nothing_and_still_serves() {
    let arena = IoArena::with_config(ArenaConfig::default().retention_cap(0));
    for _ in 0..3 {
        let mut a = arena.allocate(200_000, 8).unwrap();
        a.as_mut_slice().fill(1);
    }
    let s = arena.stats();
    assert_eq!(s.retained_bytes, 0);
    assert_eq!(
        (s.cold_allocations, s.warm_allocations, s.evictions),
        (3, 0, 3)
    );
    // Each eviction gave the buffer's pages back; the idle segment was
    // reset and carved again, so one mapping served all three.
    assert_eq!(s.os.page_releases, 3);
    assert_eq!(s.os.maps, 1);
    assert_eq!(s.mapped_bytes, 32 << 20);
}

#[test]
fn trim_releases_every_retained_buffer_and_reports_bytes() {
    let sizes = [100usize, 5000, 70_000, 1 << 20, 3 << 20];
    let small: usize = sizes[..2].iter().map(|&s| cap_of(s)).sum();
    // Own classes keep one buffer per size; the execution heap serves each
    // size from the space the one before left, so it holds the largest.
    for (exec, total) in [
        (false, sizes.iter().map(|&s| cap_of(s)).sum::<usize>()),
        (true, small + (3 << 20)),
    ] {
        let (io, ex) = (IoArena::new(), ExecutionArena::new());
        let allocate = |s: usize| {
            if exec {
                ex.allocate(s, 8).unwrap()
            } else {
                io.allocate(s, 8).unwrap()
            }
        };
        let stats = || if exec { ex.stats() } else { io.stats() };
        let keep = allocate(300_000);
        for &s in &sizes {
            drop(allocate(s));
        }
        assert_eq!(stats().retained_bytes, total, "exec {exec}");
        assert_eq!(if exec { ex.trim() } else { io.trim() }, total);
        let s = stats();
        assert_eq!((s.retained_bytes, s.retained_buffers), (0, 0));
        assert_eq!((s.trims, s.trimmed_bytes), (1, total));
        assert_eq!(s.live_bytes, keep.capacity());
        // Segment-carved buffers give their pages back one range each (the
        // heap: its free top at once); the small-class run goes back whole
        // once idle.
        let releases = if exec { 2 } else { 4 };
        assert!(s.os.page_releases >= releases, "pages released: {:?}", s.os);
        // After a trim the same sizes come back cold.
        for &s in &sizes {
            assert!(!allocate(s).served_warm(), "exec {exec}: {s}");
        }
    }
}

/// Two shapes alternating run by run (every size of the second 5/2 of the
/// first's): an execution arena holds about the larger shape's live peak,
/// where own classes held both shapes' buffers; every run after the first
/// two is warm.
#[test]
fn alternating_shapes_share_the_execution_heap() {
    let arena = ExecutionArena::with_config(ArenaConfig::default().huge_pages(false));
    let base = [300_000usize, 1 << 20, 70_000, 2_500_000, 640_000, 100_000];
    let run = |num: usize, den: usize| {
        let mut live = Vec::new();
        for (k, &s) in base.iter().enumerate() {
            let mut a = arena.allocate(s * num / den, 64).unwrap();
            a.as_mut_slice().fill(k as u8);
            live.push(a);
            if k % 2 == 1 {
                live.remove(0);
            }
        }
    };
    run(1, 1);
    let peak_a = arena.stats().peak_live_bytes;
    arena.reset_peak();
    run(5, 2);
    let peak = arena.stats().peak_live_bytes.max(peak_a);
    let cold = arena.stats().cold_allocations;
    for _ in 0..3 {
        run(1, 1);
        run(5, 2);
    }
    let s = arena.stats();
    assert_eq!(s.cold_allocations, cold, "warm runs went to the OS");
    // Held: the larger shape's peak plus at most one page per buffer's
    // worth of fit; own classes would hold both shapes (1.4× here).
    assert!(
        s.retained_bytes <= peak + peak / 8,
        "retained {} for a live peak of {peak}",
        s.retained_bytes
    );
}

#[test]
fn separate_arenas_are_independent() {
    let mib = 1 << 20;
    let exec = ExecutionArena::with_config(ArenaConfig::default().retention_cap(4 * mib));
    let io = IoArena::with_config(ArenaConfig::default().retention_cap(4 * mib));
    for _ in 0..4 {
        drop(exec.allocate(mib, 8).unwrap());
    }
    let working = exec.stats().retained_bytes;
    // A burst of outputs in the I/O arena, then released past its cap.
    let burst: Vec<_> = (0..16).map(|_| io.allocate(mib, 8).unwrap()).collect();
    drop(burst);
    assert!(io.stats().evictions > 0);
    assert_eq!(exec.stats().retained_bytes, working);
    assert_eq!(exec.stats().evictions, 0);
    assert_eq!(exec.kind(), ArenaKind::Execution);
    assert_eq!(io.kind(), ArenaKind::Io);
}

#[test]
fn retained_is_never_live_and_peak_follows_live() {
    let arena = ExecutionArena::new();
    let a = arena.allocate(1 << 20, 8).unwrap();
    let b = arena.allocate(1 << 20, 8).unwrap();
    drop(a);
    let s = arena.stats();
    assert_eq!(s.live_bytes, 1 << 20);
    assert_eq!(s.retained_bytes, 1 << 20);
    assert_eq!(s.peak_live_bytes, 2 << 20);
    drop(b);
    arena.reset_peak();
    assert_eq!(arena.stats().peak_live_bytes, 0);
}

#[test]
fn allocations_keep_the_arena_alive_and_drop_releases_everything() {
    let arena = ExecutionArena::new();
    let mut a = arena.allocate(3 << 20, 64).unwrap();
    let small = arena.allocate(48, 8).unwrap();
    drop(arena);
    a.as_mut_slice().fill(9);
    assert_eq!(a.as_slice()[(3 << 20) - 1], 9);
    drop(small);
    drop(a); // the last owner: the arena state goes away and unmaps
}

#[test]
fn small_classes_share_runs_and_return_pages_when_idle() {
    let arena = ExecutionArena::new();
    let bufs: Vec<_> = (0..100).map(|_| arena.allocate(100, 8).unwrap()).collect();
    let s = arena.stats();
    assert_eq!(s.os.maps, 1, "one run serves many small buffers");
    drop(bufs);
    assert_eq!(arena.trim(), 100 * 112);
    let s = arena.stats();
    assert_eq!(s.os.page_releases, 1, "the idle run's pages go back");
    // Reusing a trimmed small block is a cold allocation (its pages were released).
    let a = arena.allocate(100, 8).unwrap();
    assert!(!a.served_warm());
    assert_eq!(
        arena.stats().os.maps,
        1,
        "the run's address range is reused"
    );
}

/// Found by the `arena_ops` fuzz target: segment-carved buffers were only
/// page-aligned, so a buffer freed by a plainly aligned request could not be
/// reused warm by a request of the same class with an alignment above a
/// page, although its capacity is a multiple of that alignment. Every buffer
/// of a class is now aligned to the largest power of two dividing its
/// capacity, wherever it is placed.
#[test]
fn a_class_serves_every_alignment_that_divides_its_capacity_warm() {
    let arena = IoArena::new();
    for &(size, align) in &[
        (100_000usize, 8192usize),
        (70_000, 8192),
        (1 << 20, 1 << 20),
        (3 << 20, 1 << 20),
    ] {
        let cap = cap_of(size);
        assert_eq!(cap % align, 0, "test premise for {size}");
        let pad = arena.allocate(70_000, 16).unwrap(); // shifts the segment's bump pointer
        drop(arena.allocate(size, 16).unwrap());
        let a = arena.allocate(size, align).unwrap();
        assert!(a.served_warm(), "size {size} align {align}");
        assert_eq!(a.as_ptr() as usize % align, 0);
        drop(pad);
    }
}

/// With caching off (a small retention cap), a request takes the most
/// recently freed buffer of its class, whether the arena's free list or
/// the depot (where a thread cache's flush left it) holds it. Found by the
/// `arena_model` proptest: the free list always went first, so a later
/// cap evicted another buffer than least-recently-freed order says.
#[test]
fn the_newest_buffer_is_taken_from_the_depot_or_the_free_list() {
    let arena = IoArena::new();
    let a = arena.allocate(2000, 8).unwrap();
    let b = arena.allocate(2000, 8).unwrap();
    let pb = b.as_ptr();
    // Caching off: `a` goes to the free list.
    arena.set_retention_cap(1 << 20);
    drop(a);
    // Caching on: `b` goes to this thread's cache, and when caching goes
    // off again, from there to the depot.
    arena.set_retention_cap(usize::MAX);
    drop(b);
    arena.set_retention_cap(1 << 20);
    let c = arena.allocate(2000, 8).unwrap();
    assert_eq!(
        c.as_ptr(),
        pb,
        "the most recently freed buffer, from the depot"
    );
}
