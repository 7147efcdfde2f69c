//! The process default: the arena that serves the global allocations of
//! threads with no scope of their own (a runtime's worker threads, rayon's
//! pool, tokio's blocking threads), set with [`set_default`](super::set_default).
//!
//! The slot owns one handle count of its arena, swapped under a small lock
//! together with a generation number. A thread never allocates through the
//! slot's count: the first time it needs the default (and again after every
//! change), it *adopts* it — takes a handle count of its own under the lock
//! and keeps it with the generation in a thread-local cell. Every later
//! allocation checks only that the generation is unchanged (one relaxed
//! load, no read-modify-write). So:
//!
//! - a thread that is in the middle of an allocation when the default
//!   changes finishes it in the arena it adopted, which its own count keeps
//!   alive; its next allocation adopts the new default (or, after
//!   [`clear_default`](super::clear_default), goes to the system allocator);
//! - an arena replaced as the default lives until every thread that adopted
//!   it has allocated again or exited, and every buffer it served is freed
//!   (buffers go back to their arena by address, from any thread);
//! - a thread gives its count back when it exits (the cell's destructor).
//!
//! A thread with a scope of its own ([`enter`](super::enter),
//! [`enter_for_thread`](super::enter_for_thread)) never looks at the
//! default; [`suspend`](super::suspend) sends it to the system allocator
//! even when a default is set.

use crate::arena::shared::{ArenaCore, CoreHandle};
use crate::arena::ExecutionArena;
use core::cell::Cell;
use core::ptr::{null_mut, NonNull};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

/// The default arena's body (owning one count), or null.
struct Slot(*mut ArenaCore);

// SAFETY: the pointer is only read and swapped under the lock, and the
// count it owns may be released from any thread (arena bodies are Sync).
unsafe impl Send for Slot {}

/// A futex mutex: changes and adoptions are rare (once per thread per
/// change), it allocates nothing, and its `const` constructor also builds
/// under `cfg(loom)`.
static SLOT: Mutex<Slot> = Mutex::new(Slot(null_mut()));

/// The slot; nothing panics while holding it, so a poisoned lock still
/// holds a consistent slot.
fn slot() -> MutexGuard<'static, Slot> {
    SLOT.lock().unwrap_or_else(|e| e.into_inner())
}

/// Bumped under the lock at every change; 0 means no default was ever set,
/// which keeps the cost for processes that never use one at one load.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// A thread's adopted default: the body (owning one count, or null) and the
/// generation it was adopted at. Released by the destructor at thread exit.
struct Adopted {
    core: Cell<*mut ArenaCore>,
    generation: Cell<u64>,
}

impl Drop for Adopted {
    fn drop(&mut self) {
        release(self.core.replace(null_mut()));
    }
}

thread_local! {
    static ADOPTED: Adopted = const {
        Adopted { core: Cell::new(null_mut()), generation: Cell::new(0) }
    };
}

/// Gives back one count of `p` (null: nothing).
fn release(p: *mut ArenaCore) {
    if let Some(p) = NonNull::new(p) {
        // SAFETY: every non-null pointer stored here owns one count given up
        // by `CoreHandle::into_raw`, and it was just taken out of its cell.
        drop(unsafe { CoreHandle::from_raw(p) });
    }
}

/// Whether a process default has ever been set (until then no thread
/// has one, and [`current`] is null).
#[inline(always)]
pub(super) fn any() -> bool {
    GENERATION.load(Ordering::Acquire) != 0
}

/// The default arena for this thread's next allocation, or null: the
/// adopted one if the default has not changed since, else the current
/// default, adopted now. Null during thread exit, once the cell is gone.
#[inline]
pub(super) fn current() -> *mut ArenaCore {
    let generation = GENERATION.load(Ordering::Acquire);
    if generation == 0 {
        return null_mut();
    }
    ADOPTED
        .try_with(|a| {
            if a.generation.get() == generation {
                a.core.get()
            } else {
                adopt(a)
            }
        })
        .unwrap_or(null_mut())
}

#[cold]
fn adopt(a: &Adopted) -> *mut ArenaCore {
    let (core, generation) = {
        let slot = slot();
        let p = slot.0;
        if let Some(p) = NonNull::new(p) {
            // SAFETY: the slot owns a count of `p` while we hold the lock, so
            // the body is alive; cloning adds this thread's own count.
            let h = unsafe { CoreHandle::from_raw(p) };
            let mine = h.clone();
            core::mem::forget(h); // the slot keeps its count
            (mine.into_raw().as_ptr(), GENERATION.load(Ordering::Relaxed))
        } else {
            (null_mut(), GENERATION.load(Ordering::Relaxed))
        }
    };
    // Store the new one before releasing the old: releasing may free an
    // arena body, which allocates nothing but may route a free through the
    // global allocator, and that must see this thread's up-to-date choice.
    a.generation.set(generation);
    release(a.core.replace(core));
    core
}

/// Makes `p` (owning one count, or null) the default; releases the old one.
fn replace(p: *mut ArenaCore) {
    let old = {
        let mut slot = slot();
        GENERATION.fetch_add(1, Ordering::AcqRel);
        core::mem::replace(&mut slot.0, p)
    };
    release(old);
}

pub(super) fn set(arena: &ExecutionArena) {
    replace(arena.core.clone().into_raw().as_ptr());
}

pub(super) fn clear() {
    replace(null_mut());
}

pub(super) fn is_set() -> bool {
    !slot().0.is_null()
}
