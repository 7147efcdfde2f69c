//! Unit tests of heap pieces resized in place (`resize.rs`), under Miri
//! too, through allocator-api2's `grow` and `shrink` (what a `Vec` calls).

use crate::{ArenaConfig, ExecutionArena};
use allocator_api2::alloc::{Allocator, Layout};
use allocator_api2::vec::Vec as AVec;
use core::ptr::NonNull;

const K: usize = 1 << 10;

fn arena() -> ExecutionArena {
    ExecutionArena::with_config(ArenaConfig::default().huge_pages(false))
}

fn layout(size: usize) -> Layout {
    Layout::from_size_align(size, 64).unwrap()
}

/// Allocates `size` bytes through allocator-api2, filled with `byte`.
fn take(a: &ExecutionArena, size: usize, byte: u8) -> NonNull<u8> {
    let p = Allocator::allocate(&a, layout(size)).unwrap().cast::<u8>();
    // SAFETY: `size` bytes were just allocated.
    unsafe { p.as_ptr().write_bytes(byte, size) };
    p
}

/// Grows `p` from `old` to `new` bytes; the new address.
fn grow(a: &ExecutionArena, p: NonNull<u8>, old: usize, new: usize) -> NonNull<u8> {
    // SAFETY: `p` is live, allocated with `layout(old)`, and `new >= old`.
    unsafe { Allocator::grow(&a, p, layout(old), layout(new)) }
        .unwrap()
        .cast()
}

fn give(a: &ExecutionArena, p: NonNull<u8>, size: usize) {
    // SAFETY: `p` is live and allocated with `layout(size)`.
    unsafe { Allocator::deallocate(&a, p, layout(size)) };
}

fn holds(p: NonNull<u8>, n: usize, byte: u8) -> bool {
    // SAFETY: `p` holds at least `n` initialized bytes.
    unsafe { core::slice::from_raw_parts(p.as_ptr(), n) }
        .iter()
        .all(|&b| b == byte)
}

#[test]
fn a_piece_with_free_space_above_grows_where_it_is() {
    let a = arena();
    let p = take(&a, 64 * K, 7);
    let before = a.stats();
    let q = grow(&a, p, 64 * K, 300 * K);
    assert_eq!(q, p, "grown in place");
    assert!(holds(q, 64 * K, 7));
    let s = a.stats();
    assert_eq!(s.copies, before.copies, "no payload copied");
    assert_eq!(s.live_bytes, 300 * K);
    assert_eq!(s.peak_live_bytes, 300 * K);
    assert_eq!(
        (s.live_buffers, s.cold_allocations),
        (1, before.cold_allocations)
    );
    assert_eq!(a.check_invariants(), Ok(()));
    give(&a, q, 300 * K);
    assert_eq!(a.stats().live_bytes, 0);
    assert_eq!(a.check_invariants(), Ok(()));
}

#[test]
fn a_piece_with_a_live_neighbour_above_moves() {
    let a = arena();
    let p = take(&a, 64 * K, 1);
    let above = take(&a, 64 * K, 2);
    let q = grow(&a, p, 64 * K, 128 * K);
    assert_ne!(q, p, "no room above: moved");
    assert!(holds(q, 64 * K, 1));
    assert_eq!(a.stats().copies, 1);
    assert_eq!(a.check_invariants(), Ok(()));
    give(&a, q, 128 * K);
    give(&a, above, 64 * K);
    assert_eq!(a.check_invariants(), Ok(()));
}

#[test]
fn a_piece_takes_a_hole_above_it_whole_or_in_part() {
    let a = arena();
    let p = take(&a, 64 * K, 1);
    let hole = take(&a, 128 * K, 2);
    let wall = take(&a, 64 * K, 3);
    give(&a, hole, 128 * K);
    // Part of the 128 KiB hole, then the rest of it exactly, then no more.
    let q = grow(&a, p, 64 * K, 100 * K);
    assert_eq!(q, p);
    assert_eq!(a.check_invariants(), Ok(()));
    let q = grow(&a, q, 100 * K, 192 * K);
    assert_eq!(q, p, "the rest of the hole, exactly");
    assert_eq!(a.stats().retained_bytes, 0, "the hole is gone");
    assert_eq!(a.check_invariants(), Ok(()));
    let r = grow(&a, q, 192 * K, 196 * K);
    assert_ne!(r, p, "the wall is above now");
    assert!(holds(r, 64 * K, 1));
    give(&a, r, 196 * K);
    give(&a, wall, 64 * K);
    assert_eq!(a.stats().live_bytes, 0);
    assert_eq!(a.check_invariants(), Ok(()));
}

/// A `Vec` pushed past the heap's threshold, run after run: once it
/// reaches the heap it doubles in place (only the small-class steps copy),
/// and later runs repeat the first at the same address, warm.
#[test]
fn a_growing_vec_stops_copying_in_the_heap_and_repeats_warm() {
    let a = arena();
    let n = if cfg!(miri) { 20_000 } else { 1 << 20 };
    let mut first = None;
    for run in 0..3 {
        let before = a.stats();
        let mut v: AVec<u64, &ExecutionArena> = AVec::new_in(&a);
        let mut addr = 0;
        let mut moves_in_heap = 0;
        for i in 0..n as u64 {
            v.push(i);
            let at = v.as_ptr() as usize;
            if at != addr && v.capacity() * 8 > 2 * 64 * K {
                moves_in_heap += 1;
            }
            addr = at;
        }
        assert!(v.iter().enumerate().all(|(i, &x)| x == i as u64));
        assert_eq!(moves_in_heap, 0, "run {run}: moved inside the heap");
        let s = a.stats();
        // Copies only below 64 KiB: 8 B, 16 B, ... 32 KiB, then one move
        // into the heap (64 KiB).
        assert!(
            s.copied_bytes - before.copied_bytes < 64 * K,
            "run {run}: {} bytes copied",
            s.copied_bytes - before.copied_bytes
        );
        assert_eq!(*first.get_or_insert(addr), addr, "run {run}: other address");
        if run > 0 {
            assert_eq!(s.os.syscalls(), before.os.syscalls(), "run {run}");
            assert_eq!(s.cold_allocations, before.cold_allocations, "run {run}");
        }
        drop(v);
        assert_eq!(a.stats().live_bytes, 0);
        assert_eq!(a.check_invariants(), Ok(()));
    }
}

#[test]
fn only_the_heaps_thread_grows_its_pieces() {
    let a = arena();
    let p = take(&a, 64 * K, 5);
    let at = p.as_ptr() as usize;
    std::thread::scope(|s| {
        s.spawn(|| {
            // SAFETY: `at` is the live 64 KiB buffer made above, handed over.
            let p = unsafe { NonNull::new_unchecked(at as *mut u8) };
            let q = grow(&a, p, 64 * K, 128 * K);
            assert_ne!(q, p, "another thread's growth moves the buffer");
            assert!(holds(q, 64 * K, 5));
            give(&a, q, 128 * K);
        });
    });
    assert_eq!(a.stats().live_bytes, 0);
    assert_eq!(a.check_invariants(), Ok(()));
}

#[test]
fn a_growth_past_the_mark_materializes_and_the_next_run_is_warm() {
    let a = arena();
    // Miri interprets every byte written and read: a smaller growth there.
    let to = if cfg!(miri) { 256 * K } else { 2048 * K };
    for run in 0..3 {
        let before = a.stats();
        let p = take(&a, 64 * K, 9);
        let q = grow(&a, p, 64 * K, to);
        assert_eq!(q, p);
        // SAFETY: the grown buffer holds `to` bytes.
        unsafe { q.as_ptr().add(64 * K).write_bytes(9, to - 64 * K) };
        assert!(holds(q, to, 9));
        give(&a, q, to);
        let s = a.stats();
        if run == 0 {
            assert!(s.os.prefaults > before.os.prefaults, "materialized");
        } else {
            assert_eq!(s.os.syscalls(), before.os.syscalls(), "run {run}");
        }
        assert_eq!(s.retained_bytes, to);
        assert_eq!(a.check_invariants(), Ok(()));
    }
}

#[test]
fn a_shrunk_piece_gives_its_tail_back_to_the_heap() {
    let a = arena();
    let p = take(&a, 512 * K, 4);
    let wall = take(&a, 64 * K, 8);
    // SAFETY: `p` is live with `layout(512 KiB)`, and 100 KiB is smaller.
    let q = unsafe { Allocator::shrink(&a, p, layout(512 * K), layout(100 * K)) }.unwrap();
    assert_eq!(q.cast::<u8>(), p, "shrunk in place");
    assert_eq!(q.len(), 100 * K, "the capacity a 100 KiB request gets");
    assert!(holds(p, 100 * K, 4));
    let s = a.stats();
    assert_eq!(s.live_bytes, 164 * K);
    assert_eq!(s.retained_bytes, 412 * K, "the tail is free heap memory");
    assert_eq!(a.check_invariants(), Ok(()));
    // The tail serves a request of its size, warm, where it was.
    let r = take(&a, 412 * K, 5);
    assert_eq!(r.as_ptr() as usize, p.as_ptr() as usize + 100 * K);
    assert_eq!(a.stats().cold_allocations, s.cold_allocations);
    give(&a, r, 412 * K);
    // With free space above, the cut pages join it.
    let q = unsafe { Allocator::shrink(&a, p, layout(100 * K), layout(64 * K)) }.unwrap();
    assert_eq!(q.len(), 64 * K);
    assert_eq!(a.check_invariants(), Ok(()));
    give(&a, p, 64 * K);
    give(&a, wall, 64 * K);
    assert_eq!(a.stats().live_bytes, 0);
    assert_eq!(a.check_invariants(), Ok(()));
}

/// `Vec::shrink_to_fit` after growth, run after run: the pages past the
/// length go back, and later runs repeat at the same addresses, warm.
#[test]
fn shrink_to_fit_returns_pages_and_repeats_warm() {
    let a = arena();
    let n = if cfg!(miri) { 20_000 } else { 300_000 };
    let mut first = None;
    for run in 0..3 {
        let before = a.stats();
        let mut v: AVec<u64, &ExecutionArena> = AVec::new_in(&a);
        for i in 0..n as u64 {
            v.push(i);
        }
        let grown = a.stats().live_bytes - before.live_bytes;
        v.shrink_to_fit();
        let shrunk = a.stats().live_bytes - before.live_bytes;
        assert!(grown > n * 8 * 5 / 4, "run {run}: {grown}");
        assert!(
            shrunk < n * 8 + 4 * K,
            "run {run}: {shrunk} live after shrink_to_fit"
        );
        // A second buffer of the freed size lands in the freed pages.
        let other = take(&a, grown - shrunk, 3);
        let at = (v.as_ptr() as usize, other.as_ptr() as usize);
        assert_eq!(at.1, at.0 + shrunk, "run {run}");
        assert_eq!(*first.get_or_insert(at), at, "run {run}: other addresses");
        give(&a, other, grown - shrunk);
        drop(v);
        let s = a.stats();
        if run > 0 {
            assert_eq!(s.os.syscalls(), before.os.syscalls(), "run {run}");
            assert_eq!(s.cold_allocations, before.cold_allocations, "run {run}");
        }
        assert_eq!(s.live_bytes, 0);
        assert_eq!(a.check_invariants(), Ok(()));
    }
}

#[test]
fn an_allocation_grows_in_place_or_refuses_unchanged() {
    let a = arena();
    let mut kv = a.allocate(64 * K, 64).unwrap();
    kv.as_mut_slice().fill(6);
    let at = kv.as_ptr();
    kv.grow_in_place(200 * K).unwrap();
    assert_eq!(
        (kv.as_ptr(), kv.len(), kv.capacity()),
        (at, 200 * K, 200 * K)
    );
    assert!(kv.as_slice()[..64 * K].iter().all(|&b| b == 6));
    assert_eq!(a.stats().live_bytes, 200 * K);
    let wall = a.allocate(64 * K, 64).unwrap();
    let err = kv.grow_in_place(300 * K).unwrap_err();
    assert_eq!(
        err,
        crate::ArenaError::BeyondCapacity {
            requested: 300 * K,
            capacity: 200 * K
        }
    );
    assert_eq!((kv.len(), kv.capacity()), (200 * K, 200 * K));
    assert_eq!(a.check_invariants(), Ok(()));
    drop(kv);
    drop(wall);
    let s = a.stats();
    assert_eq!((s.live_bytes, s.live_buffers), (0, 0));
    assert_eq!(a.check_invariants(), Ok(()));
}
