//! The memory of caches whose threads left, kept by their arena for the
//! next thread that starts using it.
//!
//! Why: a cache is about 95 KiB, made from the system allocator on a
//! thread's first operation on an arena. Where threads come and go (a
//! blocking pool that ends idle workers and starts new ones, a thread per
//! request), each new thread's first run paid a system allocation and the
//! page faults of a fresh cache, so a run that was warm on the old thread
//! was not on its successor. The arena now keeps up to [`SPARES`] left
//! caches' memory (already written, so already faulted in) and hands it to
//! the next cache it registers; what it keeps is freed with the arena.
//!
//! Only the memory is kept: a cache owns nothing that needs dropping (its
//! fields are plain values and atomics, asserted below; the one thing it
//! owns beside its memory, its spills' room, `Cache::free` gives back and
//! a reused cache keeps), and a new cache writes every field before use
//! (`make.rs`) but its bins' slots, which the reset bins do not read
//! before they write them, and its spills' room.

use super::Cache;
use core::ptr::NonNull;

/// Left caches an arena keeps at most (about 95 KiB each).
pub(crate) const SPARES: usize = 4;

// A kept cache is never dropped, only written over or freed.
const _: () = assert!(!core::mem::needs_drop::<Cache>());

/// An arena's kept caches (under its lock, in `ArenaState`).
#[derive(Default)]
pub(crate) struct Spares {
    kept: [Option<NonNull<Cache>>; SPARES],
}

// SAFETY: kept caches belong to no thread; the arena's lock guards the list.
unsafe impl Send for Spares {}

impl Spares {
    /// Keeps the memory of cache `c`; `false` (nothing kept) when the
    /// list is full, and the caller frees it.
    ///
    /// # Safety
    /// `c` came from `Box::into_raw` and nothing refers to it any more.
    pub(crate) unsafe fn keep(&mut self, c: NonNull<Cache>) -> bool {
        match self.kept.iter_mut().find(|k| k.is_none()) {
            Some(k) => {
                *k = Some(c);
                true
            }
            None => false,
        }
    }

    /// A kept cache's memory, to be written whole before use.
    pub(crate) fn take(&mut self) -> Option<NonNull<Cache>> {
        self.kept.iter_mut().find_map(Option::take)
    }

    /// Caches kept now.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn len(&self) -> usize {
        self.kept.iter().flatten().count()
    }
}

impl Drop for Spares {
    fn drop(&mut self) {
        while let Some(c) = self.take() {
            // SAFETY: kept caches came from `Box::into_raw` (`keep`'s
            // contract) and nothing else refers to them.
            unsafe { Cache::free(c) };
        }
    }
}
