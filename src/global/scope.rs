//! The current thread's scope: which execution arena, if any, serves this
//! thread's global allocations.
//!
//! One const-initialised thread-local cell holds the arena body's pointer
//! (null: no scope). A non-null cell *owns one handle count* of that arena,
//! and each guard owns the count of the scope it will restore. Entering
//! swaps a new count in; dropping a guard swaps its saved one back and
//! releases whatever it took out. So the cell never points to a dead arena,
//! even when guards are dropped out of order or forgotten (the arena then
//! stays alive; nothing dangles). The cell has no destructor, so it can be
//! read during thread exit, and reading it is one thread-local load.

use crate::arena::shared::{ArenaCore, CoreHandle};
use crate::arena::ExecutionArena;
use core::cell::Cell;
use core::marker::PhantomData;
use core::ptr::{null_mut, NonNull};

thread_local! {
    static SCOPE: Cell<*mut ArenaCore> = const { Cell::new(null_mut()) };
}

/// The arena body of the current thread's scope, or null.
#[inline]
pub(crate) fn current() -> *mut ArenaCore {
    SCOPE.try_with(Cell::get).unwrap_or(null_mut())
}

/// Restores the previous scope of this thread when dropped.
///
/// Returned by [`enter`](super::enter) and [`suspend`](super::suspend);
/// not `Send`, because a scope belongs to the thread that opened it.
///
/// ```
/// let arena = warmarena::ExecutionArena::new();
/// let outer = warmarena::global::enter(&arena);
/// {
///     let _inner = warmarena::global::suspend();
///     assert!(!warmarena::global::in_scope());
/// }
/// assert!(warmarena::global::in_scope());
/// drop(outer);
/// assert!(!warmarena::global::in_scope());
/// ```
#[must_use = "the scope ends when the guard is dropped"]
pub struct ScopeGuard {
    /// The scope to restore, with its handle count (null: none).
    prev: *mut ArenaCore,
    _thread_bound: PhantomData<*const ()>,
}

impl core::fmt::Debug for ScopeGuard {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ScopeGuard").finish_non_exhaustive()
    }
}

/// Makes `p` (owning one count, or null) the current scope.
fn install(p: *mut ArenaCore) -> ScopeGuard {
    // Should the cell be unreachable, the guard keeps `p`'s count and
    // releases it on drop.
    let prev = SCOPE.try_with(|c| c.replace(p)).unwrap_or(p);
    ScopeGuard {
        prev,
        _thread_bound: PhantomData,
    }
}

pub(super) fn enter(arena: &ExecutionArena) -> ScopeGuard {
    // Entering a scope is a run boundary for pattern mode.
    arena.begin_run();
    install(arena.core.clone().into_raw().as_ptr())
}

pub(super) fn suspend() -> ScopeGuard {
    install(null_mut())
}

impl Drop for ScopeGuard {
    fn drop(&mut self) {
        let prev = core::mem::replace(&mut self.prev, null_mut());
        let taken = SCOPE.try_with(|c| c.replace(prev)).unwrap_or(prev);
        if let Some(p) = NonNull::new(taken) {
            // SAFETY: every non-null pointer in the cell or a guard owns one
            // count given up by `CoreHandle::into_raw`; `taken` left both.
            drop(unsafe { CoreHandle::from_raw(p) });
        }
    }
}

/// Drops the current scope's count without a guard (tests that broke guard
/// order on purpose clean up with it).
#[cfg(test)]
pub(crate) fn clear_for_tests() {
    let taken = SCOPE.with(|c| c.replace(null_mut()));
    if let Some(p) = NonNull::new(taken) {
        // SAFETY: the cell owned this count.
        drop(unsafe { CoreHandle::from_raw(p) });
    }
}
