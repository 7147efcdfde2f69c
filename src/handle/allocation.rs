//! [`Allocation`]: one buffer, one owner, returned to its arena exactly once.

use crate::arena::shared::{ArenaCore, CoreHandle};
use crate::arena::state::Grant;
use crate::arena::tcache::{NO_CLASS, SMALL_CLASSES};
use crate::arena::CARVE_LIMIT;
use crate::arena::{ArenaError, ArenaKind};
use crate::size_class::class_of_classed;
use core::ptr::NonNull;

/// A buffer from an arena, owned by exactly one value.
///
/// Move-only: it cannot be cloned, and it gives its buffer back to its arena
/// exactly once, when dropped or [`release`](Allocation::release)d. It keeps
/// its arena's state alive, so dropping every arena handle first is safe.
///
/// The bytes of a reused buffer are whatever its previous owner left there;
/// fresh pages read as zero.
///
/// ```
/// use warmarena::{ArenaKind, ExecutionArena};
/// let arena = ExecutionArena::new();
/// let mut a = arena.allocate(256, 16).unwrap();
/// a.as_mut_slice().fill(1);
/// assert_eq!(a.kind(), ArenaKind::Execution);
/// drop(arena); // the allocation keeps the arena alive
/// assert_eq!(a.as_slice()[255], 1);
/// ```
pub struct Allocation {
    ptr: NonNull<u8>,
    len: usize,
    cap: usize,
    block: u32,
    warm: bool,
    fresh: bool,
    /// The small class of its capacity ([`NO_CLASS`] for 64 KiB and up),
    /// kept from the allocation (a hit has it at hand): its drop tries that
    /// class's bin directly, with no class to derive from the capacity and
    /// no pattern check (a pattern arena's caches never hit). Kept in what
    /// was padding.
    class: u8,
    core: NonNull<ArenaCore>,
}

// SAFETY: an Allocation is the unique owner of its bytes (like a Vec<u8>), and
// its arena body is reached only through its lock and atomics.
unsafe impl Send for Allocation {}
// SAFETY: shared references only read the bytes or the immutable fields.
unsafe impl Sync for Allocation {}

impl Allocation {
    #[inline(always)]
    pub(crate) fn from_grant(g: Grant, len: usize, core: NonNull<ArenaCore>) -> Self {
        // A small buffer's class is its capacity's (capacities are exact);
        // its drop then tries the bin of that class first, as for a hit.
        let class = if g.cap < CARVE_LIMIT {
            class_of_classed(g.cap) as u8
        } else {
            NO_CLASS
        };
        Self::from_grant_of_class(g, class, len, core)
    }

    /// [`Allocation::from_grant`] for a grant a thread cache's bin of small
    /// class `class` served (or [`NO_CLASS`]).
    #[inline(always)]
    fn from_grant_of_class(g: Grant, class: u8, len: usize, core: NonNull<ArenaCore>) -> Self {
        Allocation {
            ptr: g.ptr,
            len,
            cap: g.cap,
            block: g.block,
            warm: g.warm,
            fresh: g.fresh,
            class,
            core,
        }
    }

    /// The first byte.
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// The first byte, for writing.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The logical length: the bytes asked for, or the last `set_len`.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the logical length is zero (possible only after `set_len(0)`).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes the buffer really holds (its size class).
    pub fn capacity(&self) -> usize {
        self.cap
    }

    fn arena(&self) -> &ArenaCore {
        // SAFETY: a live buffer keeps its arena body alive (it counts as live
        // under the arena lock until `free`).
        unsafe { self.core.as_ref() }
    }

    /// Which arena owns the buffer.
    pub fn kind(&self) -> ArenaKind {
        self.arena().kind
    }

    /// Whether the buffer came from retained memory (no system call, no fault).
    ///
    /// ```
    /// let arena = warmarena::IoArena::new();
    /// assert!(!arena.allocate(4096, 8).unwrap().served_warm());
    /// assert!(arena.allocate(4096, 8).unwrap().served_warm());
    /// ```
    pub fn served_warm(&self) -> bool {
        self.warm
    }

    /// Whether the buffer's pages are straight from the OS and read as zero.
    pub fn is_zeroed(&self) -> bool {
        self.fresh
    }

    /// The logical bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: the buffer is `cap >= len` bytes of mapped, initialized
        // memory owned by this value for as long as the borrow lasts.
        unsafe { core::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The logical bytes, for writing.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, and `&mut self` makes the access unique.
        unsafe { core::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// Changes the logical length within the capacity, keeping the buffer
    /// and its bytes. Beyond the capacity it refuses and changes nothing.
    ///
    /// ```
    /// let arena = warmarena::ExecutionArena::new();
    /// let mut a = arena.allocate(1000, 8).unwrap();
    /// let p = a.as_ptr();
    /// a.set_len(1024).unwrap();
    /// assert_eq!((a.as_ptr(), a.len()), (p, 1024));
    /// assert!(a.set_len(1 << 20).is_err());
    /// ```
    pub fn set_len(&mut self, len: usize) -> Result<(), ArenaError> {
        if len > self.cap {
            return Err(ArenaError::BeyondCapacity {
                requested: len,
                capacity: self.cap,
            });
        }
        self.len = len;
        Ok(())
    }

    /// The former name of [`set_len`](Allocation::set_len): it only ever
    /// changed the logical length, never the buffer.
    #[deprecated(since = "0.2.0", note = "renamed to `set_len`")]
    pub fn resize(&mut self, len: usize) -> Result<(), ArenaError> {
        self.set_len(len)
    }

    /// Changes the logical length like [`set_len`](Allocation::set_len), and
    /// past the capacity grows the buffer where it is when it can: a buffer
    /// of an execution arena's heap (64 KiB and up), on the heap's thread
    /// (the thread that made the arena, or the last run's), with free space
    /// just above it, takes that space. No byte moves; the pages it gains
    /// that were never used are materialized now, so a later run that
    /// grows it the same way takes no fault. Otherwise it refuses with
    /// [`ArenaError::BeyondCapacity`] and changes nothing (allocate a
    /// larger buffer and copy, as a `Vec` would).
    ///
    /// ```
    /// let arena = warmarena::ExecutionArena::new();
    /// let mut cache = arena.allocate(64 << 10, 64).unwrap();
    /// let at = cache.as_ptr();
    /// cache.grow_in_place(1 << 20).unwrap(); // free heap space above it
    /// assert_eq!((cache.as_ptr(), cache.len()), (at, 1 << 20));
    /// assert!(cache.capacity() >= 1 << 20);
    /// let mut small = arena.allocate(100, 8).unwrap();
    /// assert!(small.grow_in_place(1 << 20).is_err()); // a small class: fixed capacity
    /// ```
    pub fn grow_in_place(&mut self, len: usize) -> Result<(), ArenaError> {
        if len <= self.cap {
            self.len = len;
            return Ok(());
        }
        // SAFETY: the body is alive while this buffer is live.
        let core = unsafe { self.core.as_ref() };
        match core.grow_in_place(self.ptr.as_ptr() as usize, len, 1) {
            Some(cap) => {
                self.cap = cap;
                self.len = len;
                Ok(())
            }
            None => Err(ArenaError::BeyondCapacity {
                requested: len,
                capacity: self.cap,
            }),
        }
    }

    /// The arena body, block index, address and length, for the handle layer.
    pub(crate) fn parts(&self) -> (NonNull<ArenaCore>, u32, usize, usize) {
        (self.core, self.block, self.ptr.as_ptr() as usize, self.len)
    }

    /// Returns the buffer to its arena now (the same as dropping it).
    ///
    /// ```
    /// let arena = warmarena::ExecutionArena::new();
    /// arena.allocate(64, 8).unwrap().release();
    /// assert_eq!(arena.stats().live_bytes, 0);
    /// ```
    pub fn release(self) {
        drop(self)
    }
}

impl Drop for Allocation {
    /// The cache's hit, then one out-of-line call for everything else
    /// (`ArenaCore::free_past_cache`): drop glue this small is inlined
    /// into the caller, so the handle's fields stay in registers.
    #[inline]
    fn drop(&mut self) {
        // `NO_CLASS` is above every small class: one bound says both "a
        // small buffer" and "a bin index" (the hit's index needs no check).
        if (self.class as usize) < SMALL_CLASSES {
            // SAFETY: the body is alive while this buffer is live.
            let core = unsafe { self.core.as_ref() };
            if core.free_cached(self.class as usize, self.ptr.as_ptr() as usize) {
                return;
            }
        }
        // SAFETY: the body is alive while this buffer is live; it is not
        // used after this call.
        let returned = unsafe {
            ArenaCore::free_past_cache(self.core, self.block, self.ptr.as_ptr() as usize, self.cap)
        };
        debug_assert!(returned, "a live allocation's block was not live");
    }
}

impl core::fmt::Debug for Allocation {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Allocation")
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .field("capacity", &self.cap)
            .field("kind", &self.kind())
            .finish()
    }
}

impl Allocation {
    /// Both arenas' `allocate`, on the arena body behind `core`: the
    /// cached hit built straight into the handle, anything else through
    /// [`ArenaCore::allocate`]. Also the session's routed outputs, which
    /// hold the body their slot is routed to.
    #[inline(always)]
    pub(crate) fn allocate_on(
        core: &CoreHandle,
        size: usize,
        align: usize,
    ) -> Result<Allocation, ArenaError> {
        if let Some((g, class)) = core.allocate_hit(size, align) {
            return Ok(Allocation::from_grant_of_class(g, class, size, core.ptr()));
        }
        let g = core.allocate(size, align)?;
        Ok(Allocation::from_grant(g, size, core.ptr()))
    }
}

macro_rules! allocate_for {
    ($name:ident) => {
        impl crate::arena::$name {
            /// A buffer of at least `size` bytes aligned to `align` (a power
            /// of two up to [`MAX_ALIGN`](crate::arena::MAX_ALIGN)), owned by
            /// the returned [`Allocation`]. Retained memory is used when a
            /// class that fits has some; otherwise fresh pages. Bad input gets
            /// a typed error and leaves the arena as it was.
            ///
            /// ```
            #[doc = concat!("let arena = warmarena::", stringify!($name), "::new();")]
            /// let mut a = arena.allocate(1000, 64).unwrap();
            /// assert!(a.capacity() >= 1000 && a.as_ptr() as usize % 64 == 0);
            /// a.as_mut_slice()[999] = 7;
            /// ```
            #[inline(always)]
            pub fn allocate(&self, size: usize, align: usize) -> Result<Allocation, ArenaError> {
                Allocation::allocate_on(&self.core, size, align)
            }
        }
    };
}

allocate_for!(ExecutionArena);
allocate_for!(IoArena);
