//! [`allocator_api2::alloc::Allocator`] for both arenas, so that
//! `allocator_api2::vec::Vec`, `Box` and `hashbrown` collections can live in
//! an arena. Growing and shrinking stay in place while the buffer's capacity
//! allows; zeroed allocations skip the zeroing of pages fresh from the OS.
//!
//! ```
//! use allocator_api2::vec::Vec;
//! use warmarena::ExecutionArena;
//! let arena = ExecutionArena::new();
//! let mut v: Vec<u32, &ExecutionArena> = Vec::new_in(&arena);
//! v.extend(0..1000);
//! assert_eq!(v.iter().sum::<u32>(), 499_500);
//! assert!(arena.stats().live_bytes >= 4000);
//! ```

use crate::arena::shared::{ArenaCore, FreeHit};
use crate::arena::state::Grant;
use crate::arena::{ExecutionArena, IoArena, CARVE_LIMIT};
use allocator_api2::alloc::{AllocError, Allocator, Layout};
use core::ptr::NonNull;

fn dangling(layout: Layout) -> NonNull<[u8]> {
    // A zero-size allocation needs only a non-null, aligned address.
    let p = NonNull::new(layout.align() as *mut u8).unwrap_or(NonNull::dangling());
    NonNull::slice_from_raw_parts(p, 0)
}

/// A small buffer from this thread's cache is the common case: inlined
/// into the caller, with nothing to save; anything else is
/// [`allocate_slow`].
#[inline(always)]
fn allocate(core: &ArenaCore, layout: Layout, zeroed: bool) -> Result<NonNull<[u8]>, AllocError> {
    if let Some(g) = core.allocate_hit_layout(layout) {
        return Ok(handed_out(g, layout, zeroed));
    }
    allocate_slow(core, layout, zeroed)
}

/// The caller's slice of grant `g`, zeroed up to `layout.size()` when
/// asked for and the pages are not fresh from the OS (a cache hit never
/// is).
#[inline(always)]
fn handed_out(g: Grant, layout: Layout, zeroed: bool) -> NonNull<[u8]> {
    if zeroed && !g.fresh {
        // SAFETY: the grant is `cap >= size` writable bytes owned by the caller now.
        unsafe { g.ptr.as_ptr().write_bytes(0, layout.size()) };
    }
    NonNull::slice_from_raw_parts(g.ptr, g.cap)
}

#[inline(never)]
fn allocate_slow(
    core: &ArenaCore,
    layout: Layout,
    zeroed: bool,
) -> Result<NonNull<[u8]>, AllocError> {
    if layout.size() == 0 {
        return Ok(dangling(layout));
    }
    let g = core
        .allocate(layout.size(), layout.align())
        .map_err(|_| AllocError)?;
    Ok(handed_out(g, layout, zeroed))
}

/// A small buffer into this thread's cache, inlined; anything else is
/// [`deallocate_slow`].
#[inline(always)]
fn deallocate(core: &ArenaCore, ptr: NonNull<u8>, layout: Layout) {
    if layout.size() == 0 {
        return;
    }
    if layout.size() >= CARVE_LIMIT {
        // Above every small capacity: no bin of a thread cache can take it,
        // so the owner table's entry, which would only say so, is not read.
        return deallocate_slow(core, ptr, layout);
    }
    match core.free_hit_layout(ptr.as_ptr() as usize, layout.size(), layout.align()) {
        FreeHit::Done => {}
        // Found small already: straight to the cache's slow path (a free
        // on a thread that did not allocate the buffer comes here).
        FreeHit::Small(c) => {
            core.free_small_missed(c, ptr.as_ptr() as usize);
        }
        FreeHit::Other => deallocate_slow(core, ptr, layout),
    }
}

#[inline(never)]
fn deallocate_slow(core: &ArenaCore, ptr: NonNull<u8>, layout: Layout) {
    core.free_at_layout(ptr.as_ptr() as usize, layout.size(), layout.align());
}

/// Grows or shrinks: in place when the new size fits the capacity and the
/// address meets the new alignment, else a new buffer, a copy of the old
/// bytes, and a free of the old buffer.
///
/// # Safety
/// `ptr` must be a live allocation of this arena made with `old`.
unsafe fn reallocate(
    core: &ArenaCore,
    ptr: NonNull<u8>,
    old: Layout,
    new: Layout,
    zero_tail: bool,
) -> Result<NonNull<[u8]>, AllocError> {
    if old.size() == 0 {
        return allocate(core, new, zero_tail);
    }
    let addr = ptr.as_ptr() as usize;
    let small = core.small_class_at(addr);
    let cap = match small {
        Some(c) => crate::size_class::capacity(c),
        None => core.live_block_at(addr).ok_or(AllocError)?.1,
    };
    if new.size() == 0 {
        deallocate(core, ptr, old);
        return Ok(dangling(new));
    }
    // In place: within the capacity (a shrink of an execution-heap piece
    // gives the pages past the new size back to the heap), or past it, an
    // execution-heap piece grown into the free space above it.
    let aligned = addr % new.align() == 0;
    let kept = if new.size() <= cap && aligned {
        let shrunk = (new.size() < old.size() && cap >= CARVE_LIMIT)
            .then(|| core.shrink_in_place(addr, new.size(), new.align()))
            .flatten();
        Some(shrunk.unwrap_or(cap))
    } else if cap >= CARVE_LIMIT && aligned {
        core.grow_in_place(addr, new.size(), new.align())
    } else {
        None
    };
    if let Some(kept) = kept {
        if zero_tail && new.size() > old.size() {
            // SAFETY: [old.size, new.size) lies within the kept capacity.
            unsafe {
                ptr.as_ptr()
                    .add(old.size())
                    .write_bytes(0, new.size() - old.size())
            };
        }
        return Ok(NonNull::slice_from_raw_parts(ptr, kept));
    }
    let fresh = allocate(core, new, zero_tail)?;
    let keep = old.size().min(new.size());
    // SAFETY: both buffers hold at least `keep` bytes and are distinct live buffers.
    unsafe { core::ptr::copy_nonoverlapping(ptr.as_ptr(), fresh.cast::<u8>().as_ptr(), keep) };
    core.note_copy(keep);
    match small {
        // Its class is known already: no second look at the owner table.
        Some(c) => {
            if !core.free_cached(c, addr) {
                core.free_small_missed(c, addr);
            }
        }
        None => deallocate(core, ptr, old),
    }
    Ok(fresh)
}

macro_rules! allocator_for {
    ($name:ident) => {
        // SAFETY: buffers stay valid until deallocated through this arena
        // (which any clone of the handle may do, as they share one state);
        // the arena state outlives every handle that can reach it.
        unsafe impl Allocator for $name {
            #[inline]
            fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
                allocate(&self.core, layout, false)
            }

            fn allocate_zeroed(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
                allocate(&self.core, layout, true)
            }

            #[inline]
            unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
                deallocate(&self.core, ptr, layout)
            }

            unsafe fn grow(
                &self,
                ptr: NonNull<u8>,
                old: Layout,
                new: Layout,
            ) -> Result<NonNull<[u8]>, AllocError> {
                // SAFETY: forwarded from the caller's contract.
                unsafe { reallocate(&self.core, ptr, old, new, false) }
            }

            unsafe fn grow_zeroed(
                &self,
                ptr: NonNull<u8>,
                old: Layout,
                new: Layout,
            ) -> Result<NonNull<[u8]>, AllocError> {
                // SAFETY: forwarded from the caller's contract.
                unsafe { reallocate(&self.core, ptr, old, new, true) }
            }

            unsafe fn shrink(
                &self,
                ptr: NonNull<u8>,
                old: Layout,
                new: Layout,
            ) -> Result<NonNull<[u8]>, AllocError> {
                // SAFETY: forwarded from the caller's contract.
                unsafe { reallocate(&self.core, ptr, old, new, false) }
            }
        }
    };
}

allocator_for!(ExecutionArena);
allocator_for!(IoArena);

#[cfg(test)]
mod tests {
    use super::*;
    use allocator_api2::boxed::Box;
    use allocator_api2::vec::Vec;

    #[test]
    fn vec_grows_in_place_within_capacity() {
        let arena = ExecutionArena::new();
        let mut v: Vec<u8, &ExecutionArena> = Vec::with_capacity_in(1000, &arena);
        let p = v.as_ptr();
        // The class holds 1024 bytes, so growth up to it keeps the address.
        v.resize(1000, 1);
        v.reserve_exact(24);
        assert_eq!(v.as_ptr(), p);
        v.resize(1024, 1);
        assert_eq!(arena.stats().copies, 0);
        v.push(2);
        assert_ne!(v.as_ptr(), p);
        assert_eq!(
            (arena.stats().copies, arena.stats().copied_bytes),
            (1, 1024)
        );
        assert_eq!(v[1023], 1);
        assert_eq!(v[1024], 2);
        drop(v);
        assert_eq!(arena.stats().live_bytes, 0);
    }

    #[test]
    fn moved_growth_is_counted_without_the_lock_and_kept_after_the_thread_exits() {
        let arena = ExecutionArena::new();
        // Warm: every class this growth passes through is in the cache.
        let grown = || {
            let mut v: Vec<u32, &ExecutionArena> = Vec::new_in(&arena);
            for i in 0..256 {
                v.push(i);
            }
            v
        };
        drop(grown());
        let before = arena.stats();
        let v = grown();
        let s = arena.stats();
        // Each move copied the old buffer whole: 4, 8, ... 128 u32s.
        let moved = (0..6).map(|k| 16usize << k).sum::<usize>();
        assert_eq!(s.copies - before.copies, 6);
        assert_eq!(s.copied_bytes - before.copied_bytes, moved);
        // The one locked operation is the `stats()` call itself.
        assert_eq!(s.locked_operations - before.locked_operations, 1);
        assert_eq!(s.cold_allocations, before.cold_allocations);
        drop(v);
        // Another thread's moves outlive its cache.
        let a = arena.clone();
        std::thread::spawn(move || {
            // 16 bytes: a whole class, so the 17th moves it.
            let mut w: Vec<u8, &ExecutionArena> = Vec::with_capacity_in(16, &a);
            for i in 0..17 {
                w.push(i);
            }
        })
        .join()
        .unwrap();
        let t = arena.stats();
        assert_eq!(
            (t.copies, t.copied_bytes),
            (s.copies + 1, s.copied_bytes + 16)
        );
    }

    #[test]
    fn zeroed_reuse_is_zero() {
        let arena = IoArena::new();
        let mut b = Box::<[u8; 4096], _>::new_in([7u8; 4096], &arena);
        b[0] = 9;
        drop(b);
        let z = Box::<[u8; 4096], _>::new_zeroed_in(&arena);
        // SAFETY: new_zeroed_in zeroed every byte, a valid [u8; 4096].
        let z = unsafe { z.assume_init() };
        assert!(z.iter().all(|&x| x == 0));
        assert_eq!(arena.stats().warm_allocations, 1);
    }

    #[test]
    fn zero_size_layouts_are_dangling_and_free() {
        let arena = ExecutionArena::new();
        let l = Layout::from_size_align(0, 64).unwrap();
        let p = Allocator::allocate(&arena, l).unwrap();
        assert_eq!(p.cast::<u8>().as_ptr() as usize % 64, 0);
        // SAFETY: zero-size allocation from this allocator.
        unsafe { Allocator::deallocate(&arena, p.cast(), l) };
        assert_eq!(arena.stats().cold_allocations, 0);
    }

    #[test]
    fn shrink_is_in_place() {
        let arena = ExecutionArena::new();
        let mut v: Vec<u64, ExecutionArena> = Vec::with_capacity_in(4096, arena.clone());
        v.extend(0..10);
        let p = v.as_ptr();
        v.shrink_to_fit();
        assert_eq!(v.as_ptr(), p);
        assert_eq!(&v[..3], &[0, 1, 2]);
    }

    /// A buffer shrunk in place is freed with a layout that names a
    /// smaller class than the one it was served from (allocator-api2
    /// allows any size between the request and the returned length): the
    /// free must return it to its own class (or the heap), not the
    /// layout's.
    #[test]
    fn a_free_whose_layout_names_another_class_returns_the_buffer_to_its_own() {
        let arena = ExecutionArena::new();
        let a = &arena;
        let small = |n| Layout::from_size_align(n, 8).unwrap();
        for (big, named) in [(1000, 10), (1 << 20, 100)] {
            // A live buffer of the named class: its bin has credit for a free.
            let held = Allocator::allocate(&a, small(named)).unwrap().cast::<u8>();
            let p = Allocator::allocate(&a, small(big)).unwrap().cast::<u8>();
            // SAFETY: `p` is live with layout `small(big)`; the new size is smaller.
            let q = unsafe { Allocator::shrink(&a, p, small(big), small(named)) }.unwrap();
            assert_eq!(q.cast::<u8>(), p, "shrunk in place");
            // SAFETY: `p` is live; `named` lies between the shrink's request and its length.
            unsafe { Allocator::deallocate(&a, p, small(named)) };
            let s = arena.stats();
            assert_eq!(s.live_buffers, 1, "{big}");
            // The layout's class did not get the buffer; its own did.
            let other = Allocator::allocate(&a, small(named)).unwrap().cast::<u8>();
            assert_ne!(other, p, "{big}: served to the class the layout named");
            let again = Allocator::allocate(&a, small(big)).unwrap().cast::<u8>();
            assert_eq!(again, p, "{big}: back in its own class");
            // SAFETY: all three are live with these layouts.
            unsafe {
                Allocator::deallocate(&a, other, small(named));
                Allocator::deallocate(&a, again, small(big));
                Allocator::deallocate(&a, held, small(named));
            }
        }
        assert_eq!(arena.stats().live_buffers, 0);
    }
}
