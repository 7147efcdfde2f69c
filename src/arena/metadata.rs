//! A thread-local mark that says "this thread is inside the arena's own
//! bookkeeping". The arena sets it while it may grow its metadata (the block
//! table, the address index, pin records, run list, its own body), because
//! that growth goes through the global allocator: when the scoped global
//! allocator (`crate::global`) sees the mark, it serves the request from the
//! system allocator instead of re-entering an arena whose lock this thread
//! may hold. Frees need no mark: the global allocator routes them by address.
//!
//! The cell is const-initialised and has no destructor, so reading it costs
//! one thread-local load and works during thread exit.

use core::cell::Cell;

thread_local! {
    static IN_METADATA: Cell<bool> = const { Cell::new(false) };
}

/// Keeps the mark set until dropped; restores what was there before.
pub(crate) struct MetadataGuard {
    prev: bool,
}

/// Sets the mark for the current thread.
#[inline]
pub(crate) fn enter() -> MetadataGuard {
    let prev = IN_METADATA.try_with(|c| c.replace(true)).unwrap_or(false);
    MetadataGuard { prev }
}

impl Drop for MetadataGuard {
    #[inline]
    fn drop(&mut self) {
        let _ = IN_METADATA.try_with(|c| c.set(self.prev));
    }
}

/// Whether the current thread is inside the arena's bookkeeping.
#[inline]
pub(crate) fn active() -> bool {
    IN_METADATA.try_with(Cell::get).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    #[test]
    fn nests_and_restores() {
        assert!(!super::active());
        let a = super::enter();
        let b = super::enter();
        drop(b);
        assert!(super::active());
        drop(a);
        assert!(!super::active());
    }
}
