//! The current thread's scope: which execution arena, if any, serves this
//! thread's global allocations.
//!
//! One const-initialised thread-local cell holds the arena body's pointer
//! (null: no scope, so the process default serves, if one is set;
//! [`SUSPENDED`]: the system allocator, whatever the default). A cell
//! holding an arena *owns one handle count* of it,
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

/// The cell's mark for "suspended": the system allocator, even where a
/// process default is set. Never dereferenced (not a body: odd address).
const SUSPENDED: *mut ArenaCore = core::ptr::without_provenance_mut(1);

/// Whether `p` is an arena body (owning a count), not null or [`SUSPENDED`].
fn is_arena(p: *mut ArenaCore) -> bool {
    !p.is_null() && p != SUSPENDED
}

/// This thread's own scope, if one is open: its arena body, else null
/// (no scope, or a suspended one: then [`current`] decides). One
/// thread-local load and no call, for the allocator's hits.
#[inline(always)]
pub(crate) fn explicit() -> *mut ArenaCore {
    let p = SCOPE.try_with(Cell::get).unwrap_or(SUSPENDED);
    if is_arena(p) {
        p
    } else {
        null_mut()
    }
}

/// Whether no allocation of this thread can go to an arena now: no scope
/// of its own and no process default (one thread-local load, one atomic
/// load, no call).
#[inline(always)]
pub(crate) fn none_at_all() -> bool {
    SCOPE.try_with(Cell::get).is_ok_and(|p| p.is_null()) && !super::default::any()
}

/// The arena body serving this thread's allocations, or null (the system
/// allocator): its own scope, else the process default.
#[inline]
pub(crate) fn current() -> *mut ArenaCore {
    let p = SCOPE.try_with(Cell::get).unwrap_or(SUSPENDED);
    if p.is_null() {
        super::default::current()
    } else if p == SUSPENDED {
        null_mut()
    } else {
        p
    }
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
    // Entering a scope is a run boundary for pattern mode, but it does not
    // move the execution heap (`arena/heap_owner.rs`): pool threads open
    // scopes in the middle of runs.
    arena.core.pattern_boundary(None);
    install(arena.core.clone().into_raw().as_ptr())
}

pub(super) fn suspend() -> ScopeGuard {
    install(SUSPENDED)
}

impl Drop for ScopeGuard {
    fn drop(&mut self) {
        let prev = core::mem::replace(&mut self.prev, null_mut());
        let taken = SCOPE.try_with(|c| c.replace(prev)).unwrap_or(prev);
        if let Some(p) = NonNull::new(taken).filter(|p| is_arena(p.as_ptr())) {
            // SAFETY: every arena pointer in the cell or a guard owns one
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
    if let Some(p) = NonNull::new(taken).filter(|p| is_arena(p.as_ptr())) {
        // SAFETY: the cell owned this count.
        drop(unsafe { CoreHandle::from_raw(p) });
    }
}

thread_local! {
    /// Scopes that last until the thread exits ([`enter_for_thread`]),
    /// innermost last; dropped (restoring in reverse order) at thread exit.
    static THREAD_LIFE: ThreadLife = const { ThreadLife(Cell::new(None)) };
}

/// A thread's life-long scopes as a linked stack of boxed guards, so that
/// adding one allocates a node (from the new scope) and nothing else.
struct ThreadLife(Cell<Option<Box<LifeNode>>>);

struct LifeNode {
    guard: ScopeGuard,
    outer: Option<Box<LifeNode>>,
}

impl Drop for ThreadLife {
    fn drop(&mut self) {
        let mut next = self.0.take();
        while let Some(node) = next {
            let LifeNode { guard, outer } = *node;
            drop(guard);
            next = outer;
        }
    }
}

/// Enters `arena`'s scope for the rest of this thread's life. Returns false
/// (and enters nothing) if the thread is already exiting.
pub(super) fn enter_for_thread(arena: &ExecutionArena) -> bool {
    THREAD_LIFE
        .try_with(|life| {
            let guard = enter(arena);
            let outer = life.0.take();
            life.0.set(Some(Box::new(LifeNode { guard, outer })));
        })
        .is_ok()
}
