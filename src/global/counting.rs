//! [`CountingSystem`]: the system allocator, counting the allocation calls
//! each thread makes through it, and all threads' calls together. Put it under [`ScopedGlobal`](super::ScopedGlobal)
//! (or install it on its own) to assert what a warm run must show: zero
//! calls to the system allocator.

use core::alloc::{GlobalAlloc, Layout};
use std::alloc::System;
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// Every thread's allocation calls, for [`CountingSystem::calls_all_threads`].
/// One relaxed add per system allocation: a counting allocator is for tests
/// and examples, where that cost is noise next to the system call it counts.
static ALL_CALLS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    // Const-initialised, no destructor: safe to touch from inside the
    // global allocator, even during thread teardown (see `bump`).
    static CALLS: Cell<u64> = const { Cell::new(0) };
}

/// Forwards every call to [`System`] and counts, per thread, the calls that
/// allocate (`alloc`, `alloc_zeroed`, `realloc`; frees are not counted).
///
/// ```
/// use warmarena::global::{self, CountingSystem, ScopedGlobal};
/// use warmarena::ExecutionArena;
///
/// #[global_allocator]
/// static GLOBAL: ScopedGlobal<CountingSystem> = ScopedGlobal::over(CountingSystem);
///
/// let arena = ExecutionArena::new();
/// let work = || (0..100).map(|i| vec![i as u8; 1000]).collect::<Vec<_>>();
/// global::scope(&arena, work); // warm-up: the arena maps its memory
/// let before = CountingSystem::calls();
/// let v = global::scope(&arena, work);
/// assert_eq!(CountingSystem::calls(), before, "a warm scoped run calls malloc 0 times");
/// drop(v);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct CountingSystem;

impl CountingSystem {
    /// Allocation calls this thread has made through a `CountingSystem`.
    pub fn calls() -> u64 {
        CALLS.with(Cell::get)
    }

    /// Allocation calls every thread of the process has made through a
    /// `CountingSystem` so far, so a test can assert that no thread (a
    /// runtime's workers included) called the system allocator during a
    /// warm run. Exact once the threads it counts have stopped allocating
    /// (their adds are visible after a join or any other synchronization).
    ///
    /// ```
    /// use warmarena::global::CountingSystem;
    /// use std::alloc::{GlobalAlloc, Layout};
    ///
    /// let before = CountingSystem::calls_all_threads();
    /// std::thread::spawn(|| {
    ///     let layout = Layout::from_size_align(64, 8).unwrap();
    ///     // SAFETY: a non-zero layout; the block is freed with the same layout.
    ///     unsafe {
    ///         let p = CountingSystem.alloc(layout);
    ///         CountingSystem.dealloc(p, layout);
    ///     }
    /// })
    /// .join()
    /// .unwrap();
    /// assert!(CountingSystem::calls_all_threads() >= before + 1);
    /// ```
    pub fn calls_all_threads() -> u64 {
        ALL_CALLS.load(Ordering::Relaxed)
    }
}

fn bump() {
    ALL_CALLS.fetch_add(1, Ordering::Relaxed);
    // `try_with`: an allocation during thread teardown is not an error.
    let _ = CALLS.try_with(|c| c.set(c.get() + 1));
}

// SAFETY: every call forwards to `System` with the caller's arguments.
unsafe impl GlobalAlloc for CountingSystem {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        bump();
        // SAFETY: forwarded contract.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        bump();
        // SAFETY: forwarded contract.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        bump();
        // SAFETY: forwarded contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded contract.
        unsafe { System.dealloc(ptr, layout) }
    }
}
