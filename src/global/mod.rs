//! A `#[global_allocator]` that a runtime can scope to an execution arena on
//! a thread, so that memory it does not allocate itself (BLAS wrappers,
//! `ndarray` temporaries, tokenizers, `serde`) comes from warm, retained
//! buffers too.
//!
//! ```ignore
//! #[global_allocator]
//! static A: warmarena::global::ScopedGlobal = warmarena::global::ScopedGlobal::system();
//!
//! let arena = warmarena::ExecutionArena::new();
//! let _g = warmarena::global::enter(&arena); // this thread's allocations: from `arena`
//! let v: Vec<f32> = vec![0.0; 1 << 20];      // ... until `_g` is dropped
//! ```
//!
//! How a call is routed:
//! - `alloc`, `alloc_zeroed`: outside a scope (the default), to the system
//!   allocator; that costs one thread-local load and a branch over calling it
//!   directly. Inside a scope ([`enter`], [`scope()`]), to the scope's arena;
//!   alignments above [`crate::arena::MAX_ALIGN`] and requests the arena
//!   refuses go to the system allocator instead (counted as fallback).
//! - `dealloc`, `realloc`: to the owner of the pointer, found by address in
//!   the arenas' owner table (`arena::owners`: two atomic loads), never by
//!   the current scope. Memory allocated in a scope may be freed after it,
//!   on another thread, or during thread exit, and goes back to its arena.
//! - `realloc` of arena memory keeps the buffer when the new size fits its
//!   capacity; otherwise it allocates by the *current* routing (so outside a
//!   scope the bytes move to the system allocator), copies, and frees the
//!   old buffer to its arena. `realloc` of system memory stays with the
//!   system allocator, in a scope or not.
//! - The arena's own metadata (block table, address index, its body) is
//!   allocated while the arena marks the thread as "inside the arena"; such
//!   requests go to the system allocator, so the global allocator never
//!   re-enters an arena whose lock the thread holds.
//!
//! Lifetime: a buffer served through the global allocator is a live buffer
//! of its arena, so the arena's state outlives it even when every
//! [`ExecutionArena`] handle is dropped; the last free then releases it. A
//! scope holds a handle of its own while open.
//!
//! The shape of a warm run, shown here by calling the allocator directly
//! (a doctest cannot install a global allocator):
//!
//! ```
//! use std::alloc::{GlobalAlloc, Layout};
//! use warmarena::global::{self, ScopedGlobal};
//! static A: ScopedGlobal = ScopedGlobal::system();
//!
//! let arena = warmarena::ExecutionArena::new();
//! let layout = Layout::from_size_align(3000, 8).unwrap();
//! for run in 0..3 {
//!     let _g = global::enter(&arena);
//!     // SAFETY: a non-zero layout, freed below with the same layout.
//!     unsafe {
//!         let p = A.alloc(layout);
//!         assert!(!p.is_null());
//!         A.dealloc(p, layout);
//!     }
//! }
//! let s = arena.stats();
//! assert_eq!((s.cold_allocations, s.warm_allocations), (1, 2));
//! ```

mod by_address;
mod counting;
mod default;
mod scope;
mod stats;

pub use by_address::{is_arena_memory, lock_for_fork, usable_size, ForkLock};
pub use counting::CountingSystem;
pub use scope::ScopeGuard;

use crate::arena::owners::{self, Owner};
use crate::arena::shared::{cached_class_of_layout, ArenaCore};
use crate::arena::{metadata, ExecutionArena, MAX_ALIGN};
use core::ptr::NonNull;
use stats::Counter;
use std::alloc::{GlobalAlloc, Layout, System};

/// The scoped global allocator: the system allocator, except inside a scope
/// opened by [`enter`] or [`scope()`] on the calling thread.
///
/// Install it with
/// `#[global_allocator] static A: ScopedGlobal = ScopedGlobal::system();`.
/// It never panics and never unwinds; a request it cannot serve from the
/// arena goes to the system allocator.
///
/// ```
/// use std::alloc::{GlobalAlloc, Layout};
/// static A: warmarena::global::ScopedGlobal = warmarena::global::ScopedGlobal::system();
/// let l = Layout::new::<[u64; 4]>();
/// // SAFETY: a non-zero layout, freed with the same layout.
/// unsafe { A.dealloc(A.alloc(l), l) }; // no scope: the system allocator
/// ```
///
/// The allocator behind it (for unscoped calls, fallbacks and arena
/// metadata) is [`System`] by default; [`ScopedGlobal::over`] puts another
/// one there (mimalloc, or a counting wrapper in a test).
#[derive(Debug, Default, Clone, Copy)]
pub struct ScopedGlobal<B = System> {
    backing: B,
}

impl ScopedGlobal<System> {
    /// The allocator, forwarding to [`System`] until a thread opens a scope.
    ///
    /// ```
    /// static A: warmarena::global::ScopedGlobal = warmarena::global::ScopedGlobal::system();
    /// # let _ = &A;
    /// ```
    pub const fn system() -> Self {
        ScopedGlobal { backing: System }
    }
}

impl<B: GlobalAlloc> ScopedGlobal<B> {
    /// The allocator, forwarding to `backing` until a thread opens a scope.
    ///
    /// ```
    /// use warmarena::global::ScopedGlobal;
    /// static A: ScopedGlobal<std::alloc::System> = ScopedGlobal::over(std::alloc::System);
    /// # let _ = &A;
    /// ```
    pub const fn over(backing: B) -> Self {
        ScopedGlobal { backing }
    }

    /// The allocator behind the scopes.
    ///
    /// ```
    /// let a = warmarena::global::ScopedGlobal::system();
    /// let _system: &std::alloc::System = a.backing();
    /// ```
    pub fn backing(&self) -> &B {
        &self.backing
    }
}

/// Serves this thread's global allocations from `arena` until the guard is
/// dropped; the guard then restores the previous scope (scopes nest).
///
/// ```
/// let a = warmarena::ExecutionArena::new();
/// let b = warmarena::ExecutionArena::new();
/// let _outer = warmarena::global::enter(&a);
/// let inner = warmarena::global::enter(&b);
/// assert!(warmarena::global::in_scope());
/// drop(inner); // back to `a`
/// ```
pub fn enter(arena: &ExecutionArena) -> ScopeGuard {
    scope::enter(arena)
}

/// Runs `f` with this thread's global allocations served from `arena`.
///
/// ```
/// let arena = warmarena::ExecutionArena::new();
/// let n = warmarena::global::scope(&arena, || warmarena::global::in_scope());
/// assert!(n);
/// assert!(!warmarena::global::in_scope());
/// ```
pub fn scope<R>(arena: &ExecutionArena, f: impl FnOnce() -> R) -> R {
    let _g = scope::enter(arena);
    f()
}

/// Sends this thread's global allocations to the system allocator until the
/// guard is dropped, inside a scope too: for long-lived values a kernel
/// creates (a cache, a handle kept across runs) that should not hold arena
/// buffers.
///
/// ```
/// let arena = warmarena::ExecutionArena::new();
/// let _g = warmarena::global::enter(&arena);
/// let s = warmarena::global::suspend();
/// assert!(!warmarena::global::in_scope());
/// drop(s);
/// assert!(warmarena::global::in_scope());
/// ```
pub fn suspend() -> ScopeGuard {
    scope::suspend()
}

/// Makes `arena` the process default: threads with no scope of their own
/// (worker pools, threads a library starts) allocate from it until
/// [`clear_default`] or the next `set_default`. The default holds a handle
/// of its own, like a scope, so the arena lives while it is the default even
/// after its owner drops every handle. Frees still go to each buffer's own
/// arena by address.
///
/// A thread takes its own handle of the default at its first allocation
/// after a change ("adopts" it), so a thread in the middle of an allocation
/// when the default changes finishes it in the arena it adopted; its next
/// allocation uses the new default. A replaced arena lives until every
/// thread that adopted it has allocated again or exited, and its last
/// buffer is freed. A thread inside [`enter`] or [`suspend`] ignores the
/// default until it leaves them.
///
/// ```
/// use warmarena::global;
/// let arena = warmarena::ExecutionArena::new();
/// global::set_default(&arena);
/// let worker = std::thread::spawn(global::in_scope).join().unwrap();
/// assert!(worker, "a thread with no scope of its own uses the default");
/// {
///     let _s = global::suspend();
///     assert!(!global::in_scope());
/// }
/// global::clear_default();
/// assert!(!std::thread::spawn(global::in_scope).join().unwrap());
/// ```
pub fn set_default(arena: &ExecutionArena) {
    default::set(arena);
}

/// Ends the process default set by [`set_default`]: threads with no scope
/// of their own go back to the system allocator (each at its next
/// allocation). Memory the default served stays valid and goes back to its
/// arena when freed.
///
/// ```
/// warmarena::global::clear_default(); // no default: a no-op
/// assert!(!warmarena::global::has_default());
/// ```
pub fn clear_default() {
    default::clear();
}

/// Whether a process default is set.
///
/// ```
/// let arena = warmarena::ExecutionArena::new();
/// warmarena::global::set_default(&arena);
/// assert!(warmarena::global::has_default());
/// warmarena::global::clear_default();
/// ```
pub fn has_default() -> bool {
    default::is_set()
}

/// Serves this thread's global allocations from `arena` for the rest of the
/// thread's life: the scope ends (its handle is given back) when the thread
/// exits. For threads a library starts, from the hook it offers; with rayon:
///
/// ```ignore
/// let arena = warmarena::ExecutionArena::new();
/// let a = arena.clone();
/// let pool = rayon::ThreadPoolBuilder::new()
///     .start_handler(move |_| {
///         warmarena::global::enter_for_thread(&a);
///     })
///     .build()?;
/// ```
///
/// (`tests/pool_scope.rs` and `examples/pool_scope.rs` run exactly this.)
/// Call it at the start of the thread, outside any [`enter`] guard: a guard
/// dropped after it would end both scopes. Returns false, entering nothing,
/// when the thread is already exiting.
///
/// ```
/// let arena = warmarena::ExecutionArena::new();
/// let a = arena.clone();
/// std::thread::spawn(move || {
///     assert!(warmarena::global::enter_for_thread(&a));
///     assert!(warmarena::global::in_scope());
/// })
/// .join()
/// .unwrap();
/// assert!(!warmarena::global::in_scope(), "only that thread was in scope");
/// ```
pub fn enter_for_thread(arena: &ExecutionArena) -> bool {
    scope::enter_for_thread(arena)
}

/// Whether this thread's global allocations are currently served by an
/// arena: its own scope, or the process default.
///
/// ```
/// assert!(!warmarena::global::in_scope());
/// ```
pub fn in_scope() -> bool {
    !scope::current().is_null()
}

/// What the scoped global allocator did, summed over all threads since the
/// process started. Counts are of calls, bytes are the sizes asked for.
///
/// ```
/// let s = warmarena::global::stats();
/// println!("{} allocations served by arenas, {} fell back", s.scoped_allocs, s.fallback_allocs);
/// ```
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct GlobalStats {
    /// Allocations served by a scope's arena.
    pub scoped_allocs: u64,
    /// Bytes of those allocations.
    pub scoped_bytes: u64,
    /// Allocations made inside a scope but served by the system allocator:
    /// alignment above [`MAX_ALIGN`], or the arena refused.
    pub fallback_allocs: u64,
    /// Bytes of those allocations.
    pub fallback_bytes: u64,
    /// Allocations the arenas made for their own metadata while in a scope
    /// (served by the system allocator; cold path only).
    pub metadata_allocs: u64,
    /// Arena buffers freed by a thread whose current scope is that arena.
    pub returned_in_scope: u64,
    /// Bytes of those frees.
    pub returned_in_scope_bytes: u64,
    /// Arena buffers freed by a thread that is *not* in a scope of the owning
    /// arena: on another thread, after the scope ended, during thread exit,
    /// or inside a scope of another arena. This is the "returned across
    /// threads" figure; the allocator does not record which thread allocated
    /// a buffer, so a free on the same thread after its scope closed counts
    /// here too.
    pub returned_outside_scope: u64,
    /// Bytes of those frees.
    pub returned_outside_scope_bytes: u64,
    /// `realloc`s of arena memory that fit the buffer's capacity.
    pub realloc_in_place: u64,
    /// `realloc`s of arena memory that moved the bytes to a new buffer.
    pub realloc_moved: u64,
}

/// A snapshot of the scoped global allocator's counters.
///
/// ```
/// use std::alloc::{GlobalAlloc, Layout};
/// static A: warmarena::global::ScopedGlobal = warmarena::global::ScopedGlobal::system();
/// let arena = warmarena::ExecutionArena::new();
/// let before = warmarena::global::stats();
/// let l = Layout::from_size_align(64, 8).unwrap();
/// let p = warmarena::global::scope(&arena, || unsafe { A.alloc(l) });
/// // SAFETY: `p` came from `A` with this layout.
/// unsafe { A.dealloc(p, l) }; // after the scope: returned from outside it
/// let after = warmarena::global::stats();
/// assert_eq!(after.scoped_allocs - before.scoped_allocs, 1);
/// assert_eq!(after.returned_outside_scope - before.returned_outside_scope, 1);
/// assert_eq!(arena.stats().live_buffers, 0);
/// ```
pub fn stats() -> GlobalStats {
    use stats::sum;
    GlobalStats {
        scoped_allocs: sum(Counter::ScopedAllocs),
        scoped_bytes: sum(Counter::ScopedBytes),
        fallback_allocs: sum(Counter::FallbackAllocs),
        fallback_bytes: sum(Counter::FallbackBytes),
        metadata_allocs: sum(Counter::MetadataAllocs),
        returned_in_scope: sum(Counter::ReturnedInScope),
        returned_in_scope_bytes: sum(Counter::ReturnedInScopeBytes),
        returned_outside_scope: sum(Counter::ReturnedOutside),
        returned_outside_scope_bytes: sum(Counter::ReturnedOutsideBytes),
        realloc_in_place: sum(Counter::ReallocInPlace),
        realloc_moved: sum(Counter::ReallocMoved),
    }
}

impl<B: GlobalAlloc> ScopedGlobal<B> {
    /// The backing allocator, for a request made inside a scope.
    ///
    /// # Safety
    /// `layout` has a non-zero size.
    unsafe fn backing_alloc(&self, layout: Layout, zeroed: bool) -> *mut u8 {
        if zeroed {
            // SAFETY: forwarded from the caller.
            unsafe { self.backing.alloc_zeroed(layout) }
        } else {
            // SAFETY: forwarded from the caller.
            unsafe { self.backing.alloc(layout) }
        }
    }

    unsafe fn fallback(&self, layout: Layout, zeroed: bool) -> *mut u8 {
        stats::note(
            Counter::FallbackAllocs,
            Some((Counter::FallbackBytes, layout.size())),
        );
        // SAFETY: forwarded from the caller.
        unsafe { self.backing_alloc(layout, zeroed) }
    }

    /// Serves `layout` from the arena of the current scope `core`, out of
    /// line (for `alloc_zeroed`).
    ///
    /// # Safety
    /// As [`Self::serve_in_scope`].
    #[inline(never)]
    unsafe fn scoped_alloc(&self, core: *mut ArenaCore, layout: Layout, zeroed: bool) -> *mut u8 {
        // SAFETY: forwarded contract.
        unsafe { self.serve_in_scope(core, layout, zeroed) }
    }

    /// Serves `layout` from the arena of the current scope `core`.
    ///
    /// # Safety
    /// `core` is the current thread's scope (non-null; the scope owns a count of
    /// it, so the body is alive), and `layout` has a non-zero size.
    #[inline(always)]
    unsafe fn serve_in_scope(&self, core: *mut ArenaCore, layout: Layout, zeroed: bool) -> *mut u8 {
        if metadata::active() {
            stats::note(Counter::MetadataAllocs, None);
            // SAFETY: forwarded from the caller.
            return unsafe { self.backing_alloc(layout, zeroed) };
        }
        if layout.align() > MAX_ALIGN || layout.size() == 0 {
            // SAFETY: forwarded from the caller.
            return unsafe { self.fallback(layout, zeroed) };
        }
        // SAFETY: the scope's count keeps the body alive (caller's contract).
        let arena = unsafe { &*core };
        let Ok(g) = arena.allocate(layout.size(), layout.align()) else {
            // SAFETY: forwarded from the caller.
            return unsafe { self.fallback(layout, zeroed) };
        };
        if !owners::owned_by(g.ptr, Owner(core.cast())) {
            // The range could not be registered (no memory for a table leaf),
            // so a later free could not find its way back: return the buffer.
            // SAFETY: the body is alive (see above) and `core` is the pointer
            // the scope took from the body's handle; the block is live.
            unsafe {
                ArenaCore::free(
                    NonNull::new_unchecked(core),
                    g.block,
                    g.ptr.as_ptr() as usize,
                )
            };
            // SAFETY: forwarded from the caller.
            return unsafe { self.fallback(layout, zeroed) };
        }
        if zeroed && !g.fresh {
            // SAFETY: the grant holds at least `layout.size()` bytes, ours now.
            unsafe { g.ptr.as_ptr().write_bytes(0, layout.size()) };
        }
        stats::note(
            Counter::ScopedAllocs,
            Some((Counter::ScopedBytes, layout.size())),
        );
        g.ptr.as_ptr()
    }

    /// [`GlobalAlloc::alloc`] past its call-free cases: the process
    /// default's arena, a cache miss, the metadata mark, the backing
    /// allocator under a suspended scope.
    ///
    /// # Safety
    /// As [`GlobalAlloc::alloc`].
    #[inline(never)]
    unsafe fn alloc_miss(&self, layout: Layout) -> *mut u8 {
        let core = scope::current();
        if core.is_null() {
            // SAFETY: forwarded contract.
            return unsafe { self.backing.alloc(layout) };
        }
        // SAFETY: `core` is this thread's current arena, kept alive by its
        // scope or the thread's adopted default.
        if let Some(p) = unsafe { alloc_cached(core, layout) } {
            return p;
        }
        // In this function rather than a call of its own: a large request
        // misses the cache every time, and a frame more was about 20
        // instructions of its pair.
        // SAFETY: `core` is this thread's scope; the layout is the caller's.
        unsafe { self.serve_in_scope(core, layout, false) }
    }

    /// [`GlobalAlloc::dealloc`] of arena memory past its hit. It looks the
    /// owner up again (two loads) rather than take it as arguments: with
    /// few enough arguments to pass in registers, the hit's call to this
    /// is a tail call and the hit saves no registers.
    ///
    /// # Safety
    /// As [`GlobalAlloc::dealloc`], with `ptr` in an arena's granule.
    #[inline(never)]
    unsafe fn dealloc_miss(&self, ptr: *mut u8, layout: Layout) {
        let (owner, small) = owners::lookup_small(ptr as usize);
        if let Some(class) = small {
            let this = owner.0.cast::<ArenaCore>();
            // SAFETY: a registered owner is a live body's original pointer,
            // kept alive by the live buffer at `ptr` (the caller's).
            if unsafe { &*this }.free_cached(class, ptr as usize) {
                note_return(this, layout.size());
                return;
            }
        }
        // SAFETY: `ptr` is a live allocation (caller) in `owner`'s granule.
        unsafe { self.arena_dealloc(owner, small, ptr, layout) }
    }

    /// Frees a buffer of this thread's own scope's arena `this` that is
    /// not in a small run (a large buffer, a heap piece), counted as
    /// returned in scope: into the thread's heap or large slot when it
    /// takes it, else by address. [`GlobalAlloc::dealloc`] read the owner
    /// table's entry already, so this does not read it again.
    ///
    /// # Safety
    /// `this` is this thread's explicit scope's arena and the registered
    /// owner of `ptr`'s granule, a live buffer (the caller's, which keeps
    /// the body alive).
    #[inline(never)]
    unsafe fn dealloc_own(&self, this: *mut ArenaCore, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract.
        unsafe { free_found(this, None, ptr, layout) };
        stats::note(
            Counter::ReturnedInScope,
            Some((Counter::ReturnedInScopeBytes, layout.size())),
        );
    }

    /// Frees arena memory found by address.
    ///
    /// # Safety
    /// `owner` is the registered owner of `ptr`'s granule and `ptr` is a live
    /// buffer of it.
    #[inline(never)]
    unsafe fn arena_dealloc(
        &self,
        owner: Owner,
        small: Option<usize>,
        ptr: *mut u8,
        layout: Layout,
    ) {
        let this = owner.0.cast::<ArenaCore>();
        // SAFETY: a registered owner is a live body's original pointer: the
        // buffer at `ptr` is live, so its arena is, for this call.
        unsafe { free_found(this, small, ptr, layout) };
        note_return(this, layout.size());
    }

    /// # Safety
    /// As [`GlobalAlloc::realloc`], with `owner` the registered owner of `ptr`.
    #[inline(never)]
    unsafe fn arena_realloc(
        &self,
        owner: Owner,
        small: Option<usize>,
        ptr: *mut u8,
        layout: Layout,
        new_size: usize,
    ) -> *mut u8 {
        let this = owner.0.cast::<ArenaCore>();
        let addr = ptr as usize;
        // SAFETY: `ptr` is a live buffer of this arena, so the body is alive.
        let arena = unsafe { &*this };
        // A small buffer's capacity is its run's class; others are looked up.
        let cap = match small {
            Some(c) => crate::size_class::capacity(c),
            None => match arena.live_block_at(addr) {
                Some((_, cap)) => cap,
                None => return core::ptr::null_mut(),
            },
        };
        // A heap piece may grow into the free space above it, and gives the
        // pages past a smaller size back to the heap, but only where routing
        // would send a new buffer to the same arena anyway (its scope is the
        // current one): outside, the bytes move as before, and a shrink
        // keeps the capacity.
        let own_scope = scope::current() == this;
        if new_size < layout.size() && cap >= crate::arena::CARVE_LIMIT && own_scope {
            arena.shrink_in_place(addr, new_size, layout.align());
        }
        if new_size <= cap
            || (own_scope
                && small.is_none()
                && arena
                    .grow_in_place(addr, new_size, layout.align())
                    .is_some())
        {
            stats::note(Counter::ReallocInPlace, None);
            return ptr;
        }
        // SAFETY: `GlobalAlloc::realloc` promises `new_size` with this alignment
        // forms a valid layout.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: `new_size > cap > 0`.
        let fresh = unsafe { self.alloc(new_layout) };
        if fresh.is_null() {
            return fresh;
        }
        let keep = layout.size().min(new_size);
        // SAFETY: both are distinct live buffers of at least `keep` bytes.
        unsafe { core::ptr::copy_nonoverlapping(ptr, fresh, keep) };
        arena.note_copy(keep);
        stats::note(Counter::ReallocMoved, None);
        // SAFETY: as in `arena_dealloc`; `arena` is not used after this.
        unsafe { self.arena_dealloc(owner, small, ptr, layout) };
        fresh
    }
}

/// Frees the buffer at `ptr` of the arena at `this` (`small`: its run's
/// class, if it is in one), counting nothing: a large buffer into this
/// thread's heap or large slot, as allocator-api2's free does (the layout
/// names its class), else by address.
///
/// # Safety
/// `this` is the live body that owns `ptr`'s granule, and `ptr` a live
/// buffer (the caller's, which keeps the body alive). A pointer that is
/// not a live buffer start (a caller's bug) changes nothing.
#[inline(always)]
unsafe fn free_found(this: *mut ArenaCore, small: Option<usize>, ptr: *mut u8, layout: Layout) {
    // SAFETY: the caller's contract: a live body.
    let arena = unsafe { &*this };
    if small.is_none() && arena.free_large_hit_at(ptr as usize, layout.size(), layout.align()) {
        return;
    }
    // SAFETY: as above; `this` is a body's pointer, never null.
    unsafe { ArenaCore::free_by_addr(NonNull::new_unchecked(this), ptr as usize, small) };
}

/// A small buffer of class `class` at `ptr`, in a run of the arena at
/// `this`, into this thread's cache; counted as returned in scope.
///
/// # Safety
/// `this` is the live body that owns the run holding `ptr`, a live buffer
/// of that class (the caller's, which keeps the body alive).
#[inline(always)]
unsafe fn free_in_scope(
    this: *const ArenaCore,
    class: usize,
    ptr: *mut u8,
    layout: Layout,
) -> bool {
    // SAFETY: the caller's contract: a live body.
    if unsafe { &*this }.free_cached(class, ptr as usize) {
        stats::note(
            Counter::ReturnedInScope,
            Some((Counter::ReturnedInScopeBytes, layout.size())),
        );
        return true;
    }
    false
}

// SAFETY: every pointer handed out is either from the backing allocator (and freed to it:
// its granule is never registered by an arena) or a live arena buffer of at
// least the requested size and alignment (the arena guarantees both, and its
// granule is registered to that arena, checked before it is handed out), freed
// to that arena by address. No path panics: arena errors become fallbacks.
unsafe impl<B: GlobalAlloc> GlobalAlloc for ScopedGlobal<B> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // The two common cases make no call but the tail call to the
        // backing allocator, so they save no registers: out of any scope,
        // and a hit in the cache of this thread's own scope.
        if scope::none_at_all() {
            // SAFETY: forwarded contract.
            return unsafe { self.backing.alloc(layout) };
        }
        if let Some(p) = alloc_hit(layout) {
            return p;
        }
        // SAFETY: forwarded contract.
        unsafe { self.alloc_miss(layout) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let core = scope::current();
        if core.is_null() {
            // SAFETY: forwarded contract.
            return unsafe { self.backing.alloc_zeroed(layout) };
        }
        // SAFETY: as in `alloc`.
        unsafe { self.scoped_alloc(core, layout, true) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let entry = owners::lookup_tagged(ptr as usize);
        if entry == Owner::NONE {
            // SAFETY: not arena memory, so it came from the backing allocator.
            return unsafe { self.backing.dealloc(ptr, layout) };
        }
        // The hit, call-free: a small buffer of this thread's own scope's
        // arena into the thread's cache. The class the layout names, when
        // the entry is this arena's run of it (one comparison with a value
        // computed without a load: the cache's push does not wait for the
        // entry, see `ArenaCore::free_hit_layout`); else the class the
        // entry's tag names, if the run is this arena's.
        let this = scope::explicit();
        let me = Owner(this.cast());
        if let Some(class) = cached_class_of_layout(layout.size(), layout.align()) {
            if entry.is_run_of(me, class) {
                // SAFETY: `this` owns the run holding `ptr`: a live body,
                // kept alive by the live buffer at `ptr` (the caller's).
                if unsafe { free_in_scope(this, class, ptr, layout) } {
                    return;
                }
                // SAFETY: forwarded contract: `ptr` is arena memory.
                return unsafe { self.dealloc_miss(ptr, layout) };
            }
        }
        if let Some(class) = entry.small_class_for(me) {
            // SAFETY: as above.
            if unsafe { free_in_scope(this, class, ptr, layout) } {
                return;
            }
        }
        if entry == me {
            // Not a run's granule, and this scope's arena's (`me` is not
            // `NONE` here, as `entry` is not): a large buffer, or a heap
            // piece shrunk in place. The entry read above already says
            // whose it is.
            // SAFETY: forwarded contract; `this` owns `ptr`'s granule.
            return unsafe { self.dealloc_own(this, ptr, layout) };
        }
        // SAFETY: forwarded contract: `ptr` is arena memory.
        unsafe { self.dealloc_miss(ptr, layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let (owner, small) = owners::lookup_small(ptr as usize);
        if owner == Owner::NONE {
            // SAFETY: not arena memory, so it came from the backing allocator.
            return unsafe { self.backing.realloc(ptr, layout, new_size) };
        }
        // SAFETY: forwarded contract; `owner` owns `ptr`'s granule.
        unsafe { self.arena_realloc(owner, small, ptr, layout, new_size) }
    }
}

/// A small buffer for `layout` from the cache of this thread's own scope,
/// making no call (see [`GlobalAlloc::alloc`]); `None` when anything else
/// must serve it.
#[inline(always)]
fn alloc_hit(layout: Layout) -> Option<*mut u8> {
    // SAFETY: the thread's own scope holds a count of its arena.
    unsafe { alloc_cached(scope::explicit(), layout) }
}

/// A small buffer for `layout` from this thread's cache for arena `core`
/// (null: none), counted as a scoped allocation; `None` when the cache
/// cannot serve it, and while the arena grows its own metadata (which may
/// hold the cache).
///
/// # Safety
/// `core` is null or a live arena body.
#[inline(always)]
unsafe fn alloc_cached(core: *mut ArenaCore, layout: Layout) -> Option<*mut u8> {
    if core.is_null() || metadata::active() {
        return None;
    }
    // SAFETY: the caller's contract.
    let arena = unsafe { &*core };
    // A cached buffer is always in the owner table (a run region the table
    // cannot hold is never used: `reserve.rs`), so a later free finds its
    // way back by address.
    let p = arena.allocate_cached_layout(layout)?;
    debug_assert!(owners::owned_by(p, Owner(core.cast())));
    stats::note(
        Counter::ScopedAllocs,
        Some((Counter::ScopedBytes, layout.size())),
    );
    Some(p.as_ptr())
}

/// Counts a buffer of `size` bytes given back to arena `this`: inside its
/// scope or outside it.
#[inline(always)]
fn note_return(this: *mut ArenaCore, size: usize) {
    let (count, bytes) = if scope::current() == this {
        (Counter::ReturnedInScope, Counter::ReturnedInScopeBytes)
    } else {
        (Counter::ReturnedOutside, Counter::ReturnedOutsideBytes)
    };
    stats::note(count, Some((bytes, size)));
}

#[cfg(test)]
mod tests;
