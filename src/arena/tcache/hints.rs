//! Prefetch hints that a remotely freed buffer carries for the thread that
//! collects it.
//!
//! A thread whose bin ran empty takes its class's remote stack and reads
//! the newest buffers' links (`collect.rs`). Each link is in a buffer that
//! the freeing thread wrote on another core, and the next address is known
//! only once the link has arrived: one dependent miss per buffer, 75 % of
//! `collect`'s samples in the handoff bench.
//!
//! The freeing thread knows more than the next address: it remembers the
//! buffers of the class it pushed before ([`Recent`]), and writes the ones
//! after the next into the free buffer beside its link (up to [`HINTS`]
//! words, as many as the class's buffers hold after the link's two). When
//! nothing else was pushed in between and nobody took the stack, those are
//! the buffers that follow in the chain, and the collecting thread
//! prefetches them while it reads the link: the misses overlap instead of
//! following one another.
//!
//! Hints are only hints: the walk still follows the links, and a wrong hint
//! (another thread pushed in between, the stack was taken, the buffer was
//! handed out and freed again) only prefetches a line for nothing. A
//! prefetch never faults and reads nothing the program sees. Every buffer
//! on a remote stack was pushed by `free_remote`, which writes all of its
//! class's hint words, so reading them never reads uninitialized memory
//! (Miri checks that; the prefetch itself is left out under Miri).

use super::Class;
use crate::size_class::capacity;

/// The most hint words a buffer carries (a 64-byte buffer: the link's two
/// words and six hints).
pub(super) const HINTS: usize = 6;

/// How many hint words a buffer of class `c` carries: the 8-byte words
/// after its link's two, at most [`HINTS`] (none for 16-byte buffers).
#[inline(always)]
pub(super) fn count(c: Class) -> usize {
    (capacity(c) / 8).saturating_sub(2).min(HINTS)
}

/// A cache's last pushes of one class onto the arena's remote stack (0:
/// none yet).
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Recent {
    /// The newest: what the next push's link names when nothing comes in
    /// between.
    newest: usize,
    /// The ones before it, newest first: the next push's hints.
    older: [usize; HINTS],
}

impl Recent {
    /// Writes the hints for a buffer of class `c` at `addr` that is about
    /// to be pushed: the pushes before the newest.
    ///
    /// # Safety
    /// `addr` is a free buffer of class `c` that the caller may write.
    #[inline(always)]
    pub(super) unsafe fn write_into(&self, addr: usize, c: Class) {
        let words = (addr as *mut usize).wrapping_add(2);
        let n = count(c);
        if n == HINTS {
            // Every class from 64 B: one fixed-size copy, no call.
            // SAFETY: the caller's contract; `HINTS` words after the link's
            // two are inside a buffer of class `c` (8-aligned: a small
            // buffer is 16-aligned).
            unsafe { words.cast::<[usize; HINTS]>().write(self.older) };
            return;
        }
        for (k, &a) in self.older.iter().take(n).enumerate() {
            // SAFETY: as above, for the `count(c)` words the class holds.
            unsafe { words.add(k).write(a) };
        }
    }

    /// Notes `addr` as the newest push.
    #[inline(always)]
    pub(super) fn pushed(&mut self, addr: usize) {
        // A new array rather than `copy_within` (a call to `memmove`).
        let o = self.older;
        self.older = core::array::from_fn(|k| if k == 0 { self.newest } else { o[k - 1] });
        self.newest = addr;
    }
}

/// Hint `k` (below `count(c)`) of the pushed buffer at `addr`.
///
/// # Safety
/// `addr` was pushed by `free_remote` with its hints written
/// ([`Recent::write_into`]) and taken from its stack by the caller.
#[inline(always)]
pub(super) unsafe fn read(addr: usize, k: usize) -> usize {
    // SAFETY: the caller's contract: the word was written before the push's
    // release and the caller's take acquired it.
    unsafe { (addr as *const usize).add(2 + k).read() }
}

/// Walking a chain taken from a stack, at its `n`-th buffer `at` (from 0)
/// of at most `limit`, each buffer carrying `h` hints (0: none): hint `k`
/// of buffer `n` is, when right, buffer `n + 2 + k`. At the first buffer
/// this prefetches every hint the walk will reach; after, the farthest
/// one, so that `h` lines stay in flight ahead of the walk.
///
/// # Safety
/// As for [`read`], when `h > 0`.
#[inline(always)]
pub(super) unsafe fn prefetch_ahead(at: usize, n: usize, h: usize, limit: usize) {
    let first = if n == 0 { 0 } else { h.saturating_sub(1) };
    for k in first..h {
        if n + 2 + k < limit {
            // SAFETY: the caller's contract.
            prefetch(unsafe { read(at, k) });
        }
    }
}

/// Asks the core to bring the line at `addr` into its cache. Any address
/// will do: a prefetch never faults and has no effect the program sees.
#[inline(always)]
pub(crate) fn prefetch(addr: usize) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: `prefetcht0` is a hint: it reads no memory the program sees
    // and is dropped for an address that is not mapped (SSE, which every
    // x86_64 core has).
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(addr as *const i8)
    };
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    let _ = addr;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::size_class::class_of;

    #[test]
    fn a_class_carries_the_words_after_its_link_up_to_six() {
        assert_eq!(count(class_of(16).unwrap()), 0);
        assert_eq!(count(class_of(32).unwrap()), 2);
        assert_eq!(count(class_of(48).unwrap()), 4);
        assert_eq!(count(class_of(64).unwrap()), HINTS);
        assert_eq!(count(class_of(4096).unwrap()), HINTS);
    }

    /// Pushes A, B, C, D in turn: D's hints are B and A (C is its link),
    /// then zeros; the words past the class's count are not written.
    #[test]
    fn the_hints_are_the_pushes_before_the_newest() {
        let c = class_of(48).unwrap();
        let mut buf = [7usize; 8];
        let mut r = Recent::default();
        for a in [0xA0, 0xB0, 0xC0] {
            r.pushed(a);
        }
        // SAFETY: `buf` is 64 bytes, more than a 48-byte buffer.
        unsafe { r.write_into(buf.as_mut_ptr() as usize, c) };
        assert_eq!(buf, [7, 7, 0xB0, 0xA0, 0, 0, 7, 7]);
        let at = buf.as_ptr() as usize;
        // SAFETY: written just above.
        let read: Vec<usize> = (0..count(c)).map(|k| unsafe { read(at, k) }).collect();
        assert_eq!(read, [0xB0, 0xA0, 0, 0]);
        prefetch(0xB0); // any address: no fault
        prefetch(0);
    }
}
