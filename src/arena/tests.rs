//! Unit tests of the policy that also run under Miri (`cargo +nightly miri
//! test --lib`, with the heap-backed `os` stand-in): eviction order, trim,
//! the retention cap, lease release from another thread, and an arena
//! dropped before its last lease or allocation.

use crate::size_class::{capacity, class_of};
use crate::{ArenaConfig, ExecutionArena, IoArena};

/// Three sizes of three distinct classes, each its own mapping.
const A: usize = 64 << 10;
const B: usize = 96 << 10;
const C: usize = 128 << 10;

fn cap_of(size: usize) -> usize {
    capacity(class_of(size).unwrap())
}

fn arena() -> ExecutionArena {
    ExecutionArena::with_config(ArenaConfig::default().huge_pages(false))
}

/// An I/O arena: buffers of 64 KiB and more keep the own-class policy
/// (least-recently-freed eviction); execution arenas place them in the
/// execution heap (`heap_tests.rs`).
fn io_arena() -> IoArena {
    IoArena::with_config(ArenaConfig::default().huge_pages(false))
}

#[test]
fn the_cap_evicts_the_least_recently_freed_buffer_first() {
    let arena = io_arena();
    let (a, b, c) = (
        arena.allocate(A, 8).unwrap(),
        arena.allocate(B, 8).unwrap(),
        arena.allocate(C, 8).unwrap(),
    );
    // Freed in the order b, a, c: b is the least recently freed.
    drop(b);
    drop(a);
    drop(c);
    let all = cap_of(A) + cap_of(B) + cap_of(C);
    assert_eq!(arena.stats().retained_bytes, all);
    arena.set_retention_cap(all - 1);
    let s = arena.stats();
    assert_eq!((s.evictions, s.evicted_bytes), (1, cap_of(B)));
    assert_eq!(s.retained_bytes, cap_of(A) + cap_of(C));
    // A and C are still warm, B went back to the OS.
    // (Held, so that each request sees only what is left.)
    let a = arena.allocate(A, 8).unwrap();
    let c = arena.allocate(C, 8).unwrap();
    let b = arena.allocate(B, 8).unwrap();
    assert!(a.served_warm() && c.served_warm());
    assert!(!b.served_warm());
}

#[test]
fn a_free_over_the_cap_evicts_the_oldest_not_the_newest() {
    let arena = IoArena::with_config(
        ArenaConfig::default()
            .huge_pages(false)
            .retention_cap(cap_of(A) + cap_of(B)),
    );
    let (a, b, c) = (
        arena.allocate(A, 8).unwrap(),
        arena.allocate(B, 8).unwrap(),
        arena.allocate(C, 8).unwrap(),
    );
    drop(a);
    drop(b);
    // Retaining C too exceeds the cap: A (the oldest) goes, and B + C still
    // exceed it, so B goes too; C, the newest, stays.
    drop(c);
    let s = arena.stats();
    assert_eq!((s.evictions, s.evicted_bytes), (2, cap_of(A) + cap_of(B)));
    assert_eq!(s.retained_bytes, cap_of(C));
    assert_eq!(s.live_bytes, 0);
    // C, the newest, is kept whenever it fits on its own.
    assert!(arena.allocate(C, 8).unwrap().served_warm());
}

#[test]
fn a_zero_cap_retains_nothing_and_trim_returns_everything() {
    let arena = arena();
    drop(arena.allocate(A, 8).unwrap());
    drop(arena.allocate(100, 8).unwrap());
    let retained = arena.stats().retained_bytes;
    assert_eq!(retained, cap_of(A) + cap_of(100));
    assert_eq!(arena.trim(), retained);
    let s = arena.stats();
    assert_eq!((s.retained_bytes, s.retained_buffers), (0, 0));
    assert_eq!(arena.trim(), 0, "a second trim has nothing left");
    arena.set_retention_cap(0);
    drop(arena.allocate(A, 8).unwrap());
    let s = arena.stats();
    assert_eq!((s.retained_bytes, s.evictions), (0, 1));
    // Live buffers are never trimmed or evicted.
    let mut live = arena.allocate(A, 8).unwrap();
    live.as_mut_slice().fill(5);
    arena.trim();
    arena.set_retention_cap(0);
    assert!(live.as_slice().iter().all(|&x| x == 5));
}

#[test]
fn trim_keeps_leased_buffers() {
    let io = IoArena::new();
    let mut a = io.allocate(A, 64).unwrap();
    a.as_mut_slice().fill(9);
    let lease = a.into_lease().unwrap();
    drop(io.allocate(B, 64).unwrap());
    assert_eq!(io.trim(), cap_of(B));
    assert!(lease.as_slice().iter().all(|&x| x == 9));
    drop(lease);
    assert_eq!(io.stats().retained_bytes, cap_of(A));
}

#[test]
fn the_last_lease_released_on_another_thread_returns_the_buffer() {
    let io = IoArena::new();
    let mut a = io.allocate(1000, 16).unwrap();
    a.as_mut_slice().fill(1);
    let lease = a.into_lease().unwrap();
    let other = lease.clone();
    drop(lease);
    let io2 = io.clone();
    std::thread::spawn(move || {
        assert!(other.as_slice().iter().all(|&x| x == 1));
        drop(other);
        let s = io2.stats();
        assert_eq!((s.leases, s.live_buffers, s.retained_buffers), (0, 0, 1));
    })
    .join()
    .unwrap();
    assert!(io.allocate(1000, 16).unwrap().served_warm());
}

#[test]
fn leases_released_on_two_threads_at_once_return_the_buffer_once() {
    let io = IoArena::new();
    let lease = io.allocate(4096, 16).unwrap().into_lease().unwrap();
    let clones: Vec<_> = (0..2).map(|_| lease.clone()).collect();
    drop(lease);
    std::thread::scope(|s| {
        for c in clones {
            s.spawn(move || drop(c));
        }
    });
    let s = io.stats();
    assert_eq!((s.leases, s.live_buffers, s.retained_buffers), (0, 0, 1));
    assert_eq!(s.frees, 1);
}

#[test]
fn an_arena_dropped_before_its_last_lease_lives_until_that_lease_goes() {
    let io = IoArena::new();
    let mut a = io.allocate(A, 64).unwrap();
    a.as_mut_slice().fill(3);
    let lease = a.into_lease().unwrap();
    let mut b = io.allocate(200, 8).unwrap();
    b.as_mut_slice().fill(4);
    drop(io);
    // Both buffers are still valid with no arena handle left.
    assert!(lease.as_slice().iter().all(|&x| x == 3));
    assert!(b.as_slice().iter().all(|&x| x == 4));
    drop(b);
    let last = lease.clone();
    drop(lease);
    // The last lease, on another thread, frees the arena body (Miri checks
    // nothing leaks and nothing is used after that).
    std::thread::spawn(move || drop(last)).join().unwrap();
}

#[test]
fn an_arena_dropped_before_its_last_raw_lease_is_freed_by_the_c_release() {
    let io = IoArena::new();
    let raw = io.allocate(64, 8).unwrap().into_lease().unwrap().into_raw();
    drop(io);
    // SAFETY: `raw` came from `into_raw`; one retain, then two releases.
    unsafe {
        crate::handle::warmarena_lease_retain(raw);
        crate::handle::warmarena_lease_release(raw);
        crate::handle::warmarena_lease_release(raw);
    }
}

#[test]
fn an_allocation_outlives_its_arena_handle() {
    let arena = arena();
    let mut a = arena.allocate(A, 8).unwrap();
    drop(arena);
    a.as_mut_slice().fill(7);
    assert!(a.as_slice().iter().all(|&x| x == 7));
}

#[test]
fn bad_requests_leave_the_arena_as_it_was() {
    use crate::ArenaError;
    let arena = arena();
    drop(arena.allocate(100, 8).unwrap());
    let before = arena.stats();
    assert_eq!(arena.allocate(0, 8).unwrap_err(), ArenaError::ZeroSize);
    assert!(matches!(
        arena.allocate(8, 3),
        Err(ArenaError::BadAlignment { .. })
    ));
    assert!(matches!(
        arena.allocate(8, 4 << 20),
        Err(ArenaError::UnsupportedAlignment { .. })
    ));
    assert!(matches!(
        arena.allocate(usize::MAX, 8),
        Err(ArenaError::SizeOverflow { .. })
    ));
    let after = arena.stats();
    assert_eq!(
        (after.live_bytes, after.retained_bytes, after.mapped_bytes),
        (
            before.live_bytes,
            before.retained_bytes,
            before.mapped_bytes
        )
    );
}

#[test]
fn exporting_to_the_wrong_arena_or_twice_is_refused() {
    let io = IoArena::new();
    let other = IoArena::new();
    let a = io.allocate(64, 8).unwrap();
    let a = other.export(a).unwrap_err();
    let exec = ExecutionArena::new();
    let e = exec.allocate(64, 8).unwrap();
    assert!(e.into_lease().is_err());
    let l = io.export(a).unwrap();
    assert_eq!(io.stats().leases, 1);
    drop(l);
    assert_eq!(io.stats().leases, 0);
}

#[test]
fn foreign_pointers_given_to_the_allocator_api_change_nothing() {
    use allocator_api2::alloc::{Allocator, Layout};
    use core::ptr::NonNull;
    let arena = arena();
    let other = ExecutionArena::new();
    let l = Layout::from_size_align(64, 8).unwrap();
    let p = Allocator::allocate(&other, l).unwrap().cast::<u8>();
    // Another arena's buffer: this arena does not own it and leaves it be.
    // SAFETY: deliberately the wrong allocator; the arena looks the
    // address up and finds no live block of its own.
    unsafe { Allocator::deallocate(&arena, p, l) };
    assert_eq!(other.stats().live_buffers, 1);
    let mut stack = [0u8; 64];
    let foreign = NonNull::from(&mut stack).cast::<u8>();
    let bigger = Layout::from_size_align(128, 8).unwrap();
    // SAFETY: as above; a pointer no arena served.
    assert!(unsafe { Allocator::grow(&arena, foreign, l, bigger) }.is_err());
    // SAFETY: as above.
    assert!(
        unsafe { Allocator::shrink(&arena, p, l, Layout::from_size_align(8, 8).unwrap()) }.is_err()
    );
    assert_eq!(arena.stats().live_bytes, 0);
    // SAFETY: `p` came from `other` with layout `l`.
    unsafe { Allocator::deallocate(&other, p, l) };
    assert_eq!(other.stats().live_buffers, 0);
}

#[test]
fn the_invariants_hold_through_a_mixed_sequence() {
    let a = arena();
    let mut live = vec![];
    // Miri checks the same mix over fewer steps (each step re-derives every
    // invariant from scratch: minutes per hundred steps under Miri).
    // Under Miri the large sizes shrink too: the heap materializes each
    // piece by writing it, byte by byte as far as Miri is concerned.
    let steps = if cfg!(miri) { 18 } else { 300 };
    let sizes = if cfg!(miri) {
        [24, 100, 3000, 70 << 10, 160 << 10, 330 << 10]
    } else {
        [24, 100, 3000, 70 << 10, 1 << 20, 3 << 20]
    };
    for k in 0..steps {
        let size = sizes[k % 6] + k;
        live.push(a.allocate(size, 1 << (k % 7)).unwrap());
        if k % 3 == 0 {
            live.swap_remove(k * 7 % live.len());
        }
        if k % 50 == 49 {
            a.set_retention_cap(if k % 100 == 49 { 1 << 20 } else { usize::MAX });
        }
        if k % 97 == 96 {
            a.trim();
        }
        assert_eq!(a.check_invariants(), Ok(()), "step {k}");
    }
    drop(live);
    assert_eq!(a.check_invariants(), Ok(()));
}

/// Resident bytes of the page-aligned range `[base, base + len)`, by `mincore`.
#[cfg(all(target_os = "linux", not(miri)))]
fn resident_bytes(base: usize, len: usize) -> usize {
    let page = crate::os::page_size();
    let mut vec = vec![0u8; len.div_ceil(page)];
    // SAFETY: the range is one live mapping of the arena, page-aligned;
    // `vec` has one byte per page of it.
    let rc = unsafe { libc::mincore(base as *mut libc::c_void, len, vec.as_mut_ptr()) };
    assert_eq!(rc, 0, "mincore");
    vec.iter().filter(|&&v| v & 1 == 1).count() * page
}

#[test]
#[cfg(all(target_os = "linux", not(miri)))]
fn a_learned_pattern_leaves_no_page_of_its_learning_segments_resident() {
    // The learning run's buffers of segment classes (64 KiB to 16 MiB), at
    // alignments that leave gaps between them, written whole.
    let a = ExecutionArena::with_config(ArenaConfig::default().pattern(true));
    a.begin_run();
    let sizes = [
        (300 << 10, 64),
        (5 << 20, 1 << 20),
        (70 << 10, 4096),
        (3 << 20, 64),
    ];
    let mut bufs = Vec::new();
    for (size, align) in sizes {
        let mut b = a.allocate(size, align).unwrap();
        b.as_mut_slice().fill(7);
        bufs.push(b);
    }
    let segments = |a: &ExecutionArena| -> Vec<(usize, usize, usize)> {
        let st = a.core.lock();
        st.runs
            .iter()
            .filter(|r| r.segment)
            .map(|r| (r.base, r.len, r.carved))
            .collect()
    };
    let segs = segments(&a);
    assert!(!segs.is_empty());
    // A huge page faulted in by a block materializes bytes no block owns
    // (alignment gaps, the uncarved tail); stand in for the kernel doing
    // so by touching the first uncarved page of each segment.
    for &(base, len, carved) in &segs {
        let at = crate::os::round_to_pages(base + carved).unwrap();
        if at < base + len {
            // SAFETY: the segment is one live read-write mapping of the
            // arena and no block covers bytes past `carved`.
            unsafe { core::ptr::write_volatile(at as *mut u8, 1) };
        }
    }
    drop(bufs);
    // The boundary learns the run and gives its buffers back.
    a.begin_run();
    assert_eq!(a.stats().pattern_learned, 1);
    assert_eq!(a.stats().retained_bytes, 0);
    let resident: usize = segments(&a)
        .iter()
        .map(|&(base, len, _)| resident_bytes(base, len))
        .sum();
    assert_eq!(resident, 0, "bytes of idle segments still resident");
}

#[test]
fn what_a_cache_hit_reads_shares_no_line_with_what_others_write() {
    use super::shared::ArenaCore;
    use core::mem::{align_of, offset_of};
    // The hit reads `id`, `epoch`, `kind` and `pattern_on`: all in the
    // first 128 bytes (a line and its prefetched neighbour)...
    for (name, at) in [
        ("id", offset_of!(ArenaCore, id)),
        ("epoch", offset_of!(ArenaCore, epoch)),
        ("kind", offset_of!(ArenaCore, kind)),
        ("pattern_on", offset_of!(ArenaCore, pattern_on)),
    ] {
        assert!(at < 128, "{name} at {at}");
    }
    // ...and what lock holders, handle clones and the pattern cursor write
    // starts after them.
    for (name, at) in [
        ("live_mirror", offset_of!(ArenaCore, live_mirror)),
        ("clock_mirror", offset_of!(ArenaCore, clock_mirror)),
        ("os", offset_of!(ArenaCore, os)),
        ("pattern_fast", offset_of!(ArenaCore, pattern_fast)),
    ]
    .into_iter()
    .chain(super::shared::PRIVATE_WRITTEN)
    {
        assert!(at >= 128, "{name} at {at}");
    }
    assert_eq!(align_of::<ArenaCore>(), 128);
}
