//! Unit tests that call the allocator directly (it is not installed in the
//! library's test binary), so they run under Miri too.

use super::*;
use crate::ExecutionArena;

static A: ScopedGlobal = ScopedGlobal::system();

fn layout(size: usize, align: usize) -> Layout {
    Layout::from_size_align(size, align).unwrap()
}

fn fill(p: *mut u8, n: usize, v: u8) {
    // SAFETY: callers pass live allocations of at least `n` bytes.
    unsafe { p.write_bytes(v, n) };
}

#[test]
fn no_scope_means_system_memory() {
    let l = layout(100, 8);
    // SAFETY: non-zero layout; freed with it.
    unsafe {
        let p = A.alloc(l);
        assert!(!p.is_null());
        assert_eq!(owners::lookup(p as usize), Owner::NONE);
        fill(p, 100, 1);
        A.dealloc(p, l);
    }
}

#[test]
fn scoped_memory_returns_to_its_arena_after_the_scope() {
    let arena = ExecutionArena::new();
    let l = layout(3000, 16);
    let p = scope(&arena, || {
        // SAFETY: non-zero layout.
        unsafe { A.alloc(l) }
    });
    assert!(!p.is_null());
    fill(p, 3000, 7);
    assert_eq!(arena.stats().live_buffers, 1);
    // SAFETY: `p` came from `A` with `l`.
    unsafe { A.dealloc(p, l) };
    assert_eq!(arena.stats().live_buffers, 0);
    assert_eq!(arena.stats().retained_buffers, 1);
}

#[test]
fn arena_outlives_its_handles_while_global_memory_is_live() {
    let arena = ExecutionArena::new();
    let l = layout(200_000, 64);
    let p = scope(&arena, || {
        // SAFETY: non-zero layout.
        unsafe { A.alloc(l) }
    });
    drop(arena);
    fill(p, 200_000, 3);
    // SAFETY: `p` came from `A` with `l`; this is the arena's last buffer.
    unsafe { A.dealloc(p, l) };
}

#[test]
fn realloc_in_place_then_moved_out_of_the_arena() {
    let arena = ExecutionArena::new();
    let l = layout(100, 8);
    let g = enter(&arena);
    // SAFETY: non-zero layouts; each pointer is used with the layout it has.
    unsafe {
        let p = A.alloc(l);
        fill(p, 100, 9);
        // 100 B is in the 112 B class: growing to 110 stays.
        let q = A.realloc(p, l, 110);
        assert_eq!(p, q);
        drop(g);
        // Outside the scope a grow beyond capacity moves to the system.
        let r = A.realloc(q, layout(110, 8), 5000);
        assert!(!r.is_null());
        assert_eq!(owners::lookup(r as usize), Owner::NONE);
        assert_eq!(*r.add(99), 9);
        assert_eq!(arena.stats().live_buffers, 0);
        A.dealloc(r, layout(5000, 8));
    }
}

#[test]
fn realloc_of_system_memory_inside_a_scope_stays_system() {
    let arena = ExecutionArena::new();
    let l = layout(64, 8);
    // SAFETY: non-zero layouts, freed with the layout they have.
    unsafe {
        let p = A.alloc(l);
        fill(p, 64, 5);
        let _g = enter(&arena);
        let q = A.realloc(p, l, 4096);
        assert_eq!(owners::lookup(q as usize), Owner::NONE);
        assert_eq!(*q.add(63), 5);
        A.dealloc(q, layout(4096, 8));
    }
    assert_eq!(arena.stats().cold_allocations, 0);
}

#[test]
fn nested_scopes_restore_and_free_by_address() {
    let a = ExecutionArena::new();
    let b = ExecutionArena::new();
    let l = layout(256, 16);
    // SAFETY: non-zero layout, each pointer freed once with it.
    unsafe {
        let ga = enter(&a);
        let pa = A.alloc(l);
        let gb = enter(&b);
        let pb = A.alloc(l);
        A.dealloc(pa, l); // freed in b's scope: goes to a
        drop(gb);
        let pa2 = A.alloc(l);
        drop(ga);
        A.dealloc(pb, l);
        A.dealloc(pa2, l);
    }
    assert_eq!(
        (a.stats().cold_allocations, a.stats().warm_allocations),
        (1, 1)
    );
    assert_eq!(b.stats().cold_allocations, 1);
    assert_eq!(a.stats().live_buffers + b.stats().live_buffers, 0);
}

#[test]
fn out_of_order_guards_leave_no_dangling_scope() {
    let a = ExecutionArena::new();
    let b = ExecutionArena::new();
    let ga = enter(&a);
    let gb = enter(&b);
    drop(ga);
    drop(gb);
    // The thread is back in `a`'s scope (the guard order was broken), and
    // `a` stays alive for it even after its last handle goes.
    drop(a);
    let l = layout(32, 8);
    // SAFETY: non-zero layout, freed with it.
    unsafe { A.dealloc(A.alloc(l), l) };
    drop(b);
    // Leave the thread clean for the next test on it.
    scope::clear_for_tests();
}

#[test]
fn high_alignment_falls_back_and_zeroed_is_zero() {
    let arena = ExecutionArena::new();
    let before = stats();
    let _g = enter(&arena);
    let big = layout(64, MAX_ALIGN * 2);
    let z = layout(512, 8);
    // SAFETY: non-zero layouts, freed with them.
    unsafe {
        let p = A.alloc(big);
        assert!(!p.is_null());
        assert_eq!(owners::lookup(p as usize), Owner::NONE);
        A.dealloc(p, big);
        let q = A.alloc(z);
        fill(q, 512, 0xAB);
        A.dealloc(q, z);
        let r = A.alloc_zeroed(z);
        assert_eq!(r, q, "the warm buffer is reused");
        assert!((0..512).all(|i| *r.add(i) == 0));
        A.dealloc(r, z);
    }
    let after = stats();
    assert!(after.fallback_allocs > before.fallback_allocs);
    assert!(after.scoped_allocs >= before.scoped_allocs + 2);
}

#[test]
fn freed_on_another_thread() {
    let arena = ExecutionArena::new();
    let l = layout(70_000, 64);
    let p = scope(&arena, || {
        // SAFETY: non-zero layout.
        unsafe { A.alloc(l) as usize }
    });
    fill(p as *mut u8, 70_000, 1);
    std::thread::spawn(move || {
        // SAFETY: `p` came from `A` with `l` and is freed once.
        unsafe { A.dealloc(p as *mut u8, l) }
    })
    .join()
    .unwrap();
    assert_eq!(arena.stats().live_buffers, 0);
}

#[test]
fn warm_scoped_large_pairs_take_no_lock_on_any_thread() {
    // The heap's own thread (its slot) and another thread (the large
    // slots): a free knows the layout, so it takes the class's hit as
    // allocator-api2's does, not the arena's lock.
    let arena = ExecutionArena::new();
    let pairs = if cfg!(miri) { 3 } else { 100 };
    let run = |sizes: &[usize]| {
        scope(&arena, || {
            for &size in sizes {
                let l = layout(size, 64);
                for k in 0..pairs + 1 {
                    if k == 1 {
                        // Warm from here on.
                        let before = arena.stats();
                        for _ in 0..pairs {
                            // SAFETY: non-zero layout; freed with it.
                            unsafe {
                                let p = A.alloc(l);
                                fill(p, size, 5);
                                A.dealloc(p, l);
                            }
                        }
                        let after = arena.stats();
                        // The one locked operation is `stats()` itself.
                        let locked = after.locked_operations - before.locked_operations;
                        assert_eq!(locked, 1, "{size}");
                        assert_eq!(after.frees, before.frees + pairs as u64, "{size}");
                        assert_eq!(after.os, before.os, "{size}");
                        break;
                    }
                    // SAFETY: as above.
                    unsafe {
                        let p = A.alloc(l);
                        fill(p, size, 4);
                        A.dealloc(p, l);
                    }
                }
            }
        })
    };
    run(&[64 << 10, 1 << 20]);
    std::thread::scope(|s| {
        s.spawn(|| run(&[64 << 10, 1 << 20]));
    });
    assert_eq!(arena.stats().live_buffers, 0);
    assert_eq!(arena.check_invariants(), Ok(()));
}

#[test]
fn a_heap_piece_shrunk_to_a_small_size_is_freed_with_its_small_layout() {
    // Its owner-table entry is the arena's own and untagged (not a run),
    // while the layout names a small class: the free takes the arena's
    // own path by address, not a small class's.
    let arena = ExecutionArena::new();
    let big = layout(256 << 10, 64);
    let small = layout(100, 64);
    let before = stats();
    scope(&arena, || {
        // SAFETY: non-zero layouts; the buffer is freed once, with the
        // layout it has after the realloc.
        unsafe {
            let p = A.alloc(big);
            fill(p, big.size(), 1);
            let q = A.realloc(p, big, small.size());
            assert_eq!(q, p, "shrunk in place");
            let me = Owner((&*arena.core as *const ArenaCore).cast_mut().cast());
            assert_eq!(
                owners::lookup_tagged(q as usize),
                me,
                "untagged, the arena's"
            );
            A.dealloc(q, small);
        }
    });
    let s = arena.stats();
    assert_eq!(s.live_buffers, 0);
    assert_eq!(s.live_bytes, 0);
    assert_eq!(arena.check_invariants(), Ok(()));
    let after = stats();
    assert!(after.returned_in_scope > before.returned_in_scope);
    assert!(after.returned_in_scope_bytes >= before.returned_in_scope_bytes + small.size() as u64);
}
