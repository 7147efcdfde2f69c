//! The library's own allocator: every Rust allocation inside
//! `libwarmarena.so` (the arena's metadata, thread caches, std's own), and
//! the C requests that arrive before the system allocator is found or while
//! this thread is already inside the library.
//!
//! It never calls `malloc`: its memory is one reservation of address space
//! (`PROT_NONE`, so it commits nothing; the largest of 64 GiB down to 64 MiB
//! that the system grants), made readable and writable in 2 MiB steps as a
//! bump pointer rises. Requests are rounded up to a power of two (at least
//! 16 bytes) and kept on one free list per power: those up to 32 KiB are
//! carved from 64 KiB slabs of one size, larger ones from the bump pointer
//! at 64 KiB alignment. A byte per 64 KiB granule names the size of its
//! blocks, so a `free` without a size finds it, and one range check tells
//! this allocator's pointers from any other's. Freed blocks of 2 MiB and
//! more give their pages back (`MADV_DONTNEED`) but keep their address.
//!
//! One spin lock guards it all: what it serves is cold-path metadata (a
//! thread's cache once per thread, an arena's tables as they grow).

use core::alloc::{GlobalAlloc, Layout};
use core::cell::UnsafeCell;
use core::ptr::null_mut;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

const GRANULE_SHIFT: u32 = 16;
const GRANULE: usize = 1 << GRANULE_SHIFT;
const MIN_SHIFT: u32 = 4;
/// Blocks up to this power are carved from slabs of one granule.
const SLAB_MAX_SHIFT: u32 = 15;
/// Blocks of this power and above give their pages back when freed.
const RELEASE_SHIFT: u32 = 21;
const MAX_SHIFT: u32 = 40;
const COMMIT_STEP: usize = 2 << 20;
/// Reservation sizes tried in turn, largest first.
const RESERVE_TRIES: [usize; 6] = [64 << 30, 16 << 30, 4 << 30, 1 << 30, 256 << 20, 64 << 20];
const MAX_GRANULES: usize = RESERVE_TRIES[0] >> GRANULE_SHIFT;

/// The reservation's range, published once made (0: none yet), for the
/// lock-free [`contains`].
static BASE: AtomicUsize = AtomicUsize::new(0);
static LEN: AtomicUsize = AtomicUsize::new(0);

struct Heap {
    base: usize,
    len: usize,
    /// Offset of the bump pointer in the reservation.
    bump: usize,
    /// Bytes from the base made readable and writable.
    committed: usize,
    /// Free list heads by power (intrusive: each free block's first word).
    free: [usize; MAX_SHIFT as usize + 1],
    /// Per small power: the next uncarved block of its current slab, and
    /// that slab's end.
    carve: [(usize, usize); SLAB_MAX_SHIFT as usize + 1],
    /// The power of the blocks in each granule (0: none starts there).
    sizes: [u8; MAX_GRANULES],
}

struct Guarded {
    locked: AtomicBool,
    heap: UnsafeCell<Heap>,
}

// SAFETY: `heap` is only reached through `with_heap`, which holds `locked`
// (an acquire/release spin lock) for the whole access.
unsafe impl Sync for Guarded {}

static HEAP: Guarded = Guarded {
    locked: AtomicBool::new(false),
    heap: UnsafeCell::new(Heap {
        base: 0,
        len: 0,
        bump: 0,
        committed: 0,
        free: [0; MAX_SHIFT as usize + 1],
        carve: [(0, 0); SLAB_MAX_SHIFT as usize + 1],
        sizes: [0; MAX_GRANULES],
    }),
};

/// Takes the lock: spins briefly, then yields the processor.
pub(crate) fn lock() {
    let mut spins = 0u32;
    while HEAP
        .locked
        .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        spins += 1;
        if spins < 64 {
            core::hint::spin_loop();
        } else {
            // SAFETY: sched_yield has no preconditions.
            unsafe { libc::sched_yield() };
        }
    }
}

/// Releases the lock taken by [`lock`] (also in a forked child, where the
/// forking thread took it in the prepare handler).
pub(crate) fn unlock() {
    HEAP.locked.store(false, Ordering::Release);
}

fn with_heap<R>(f: impl FnOnce(&mut Heap) -> R) -> R {
    lock();
    // SAFETY: the lock is held, so this is the only reference to the heap.
    let r = f(unsafe { &mut *HEAP.heap.get() });
    unlock();
    r
}

/// Whether `p` was handed out by this allocator (one range check).
#[inline]
pub(crate) fn contains(p: *const u8) -> bool {
    let base = BASE.load(Ordering::Acquire);
    (p as usize).wrapping_sub(base) < LEN.load(Ordering::Relaxed) && base != 0
}

fn shift_for(size: usize, align: usize) -> Option<u32> {
    let need = size.max(align).max(1 << MIN_SHIFT);
    let shift = usize::BITS - (need - 1).leading_zeros();
    (shift <= MAX_SHIFT).then_some(shift)
}

impl Heap {
    fn reserve(&mut self) -> bool {
        if self.base != 0 {
            return true;
        }
        for len in RESERVE_TRIES {
            // SAFETY: a fresh anonymous mapping at an address of the
            // kernel's choosing; no memory is touched.
            let p = unsafe {
                libc::mmap(
                    null_mut(),
                    len,
                    libc::PROT_NONE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            if p != libc::MAP_FAILED {
                self.base = p as usize;
                self.len = len;
                LEN.store(len, Ordering::Relaxed);
                BASE.store(self.base, Ordering::Release);
                return true;
            }
        }
        false
    }

    /// Moves the bump pointer to `align` (a power of two, at least a
    /// granule) and past `len` bytes: their offset.
    fn bump(&mut self, len: usize, align: usize) -> Option<usize> {
        if !self.reserve() {
            return None;
        }
        let start = self.base.checked_add(self.bump)?.checked_add(align - 1)? & !(align - 1);
        let off = start - self.base;
        let end = off.checked_add(len)?;
        if end > self.len {
            return None;
        }
        if end > self.committed {
            let to = end
                .checked_add(COMMIT_STEP - 1)
                .map_or(self.len, |e| (e & !(COMMIT_STEP - 1)).min(self.len));
            // SAFETY: `committed..to` lies inside the reservation, which
            // this allocator owns; nothing there is in use yet.
            let rc = unsafe {
                libc::mprotect(
                    (self.base + self.committed) as *mut libc::c_void,
                    to - self.committed,
                    libc::PROT_READ | libc::PROT_WRITE,
                )
            };
            if rc != 0 {
                return None;
            }
            self.committed = to;
        }
        self.bump = end;
        Some(off)
    }

    fn alloc(&mut self, size: usize, align: usize) -> *mut u8 {
        let Some(shift) = shift_for(size, align) else {
            return null_mut();
        };
        let s = shift as usize;
        let head = self.free[s];
        if head != 0 && head & (align - 1) == 0 {
            // SAFETY: a free block of this power holds its successor in its
            // first word (written by `free`).
            self.free[s] = unsafe { *(head as *const usize) };
            return head as *mut u8;
        }
        if shift <= SLAB_MAX_SHIFT {
            let (next, end) = self.carve[s];
            if next < end {
                self.carve[s].0 = next + (1 << shift);
                return next as *mut u8;
            }
            let Some(off) = self.bump(GRANULE, GRANULE) else {
                return null_mut();
            };
            self.sizes[off >> GRANULE_SHIFT] = shift as u8;
            let slab = self.base + off;
            self.carve[s] = (slab + (1 << shift), slab + GRANULE);
            return slab as *mut u8;
        }
        let Some(off) = self.bump(1 << shift, align.max(GRANULE)) else {
            return null_mut();
        };
        self.sizes[off >> GRANULE_SHIFT] = shift as u8;
        (self.base + off) as *mut u8
    }

    /// The power of the block at `p` (one of ours).
    fn shift_of(&self, p: usize) -> u32 {
        u32::from(self.sizes[(p - self.base) >> GRANULE_SHIFT])
    }

    fn free(&mut self, p: *mut u8) {
        let shift = self.shift_of(p as usize);
        if shift < MIN_SHIFT {
            return; // not a block start: nothing of ours to free
        }
        if shift >= RELEASE_SHIFT {
            // SAFETY: the block is ours and free; its first page keeps the
            // list link, the rest may be given back (reads as zero later).
            unsafe {
                libc::madvise(
                    p.add(4096).cast(),
                    (1usize << shift) - 4096,
                    libc::MADV_DONTNEED,
                )
            };
        }
        let s = shift as usize;
        // SAFETY: the block is ours, free, and at least 16 bytes long.
        unsafe { *(p as *mut usize) = self.free[s] };
        self.free[s] = p as usize;
    }
}

/// `size` bytes aligned to `align` (a power of two); null when the
/// reservation is exhausted.
pub(crate) fn alloc(size: usize, align: usize) -> *mut u8 {
    with_heap(|h| h.alloc(size, align))
}

/// Frees a block of this allocator.
///
/// # Safety
/// `p` was returned by [`alloc`] (or through [`Internal`]) and not freed since.
pub(crate) unsafe fn free(p: *mut u8) {
    with_heap(|h| h.free(p));
}

/// The usable size of a block of this allocator (its power of two).
///
/// # Safety
/// `p` is a live block of this allocator.
pub(crate) unsafe fn usable_size(p: *const u8) -> usize {
    with_heap(|h| 1usize << h.shift_of(p as usize))
}

/// The Rust global allocator of `libwarmarena.so`: [`alloc`] and [`free`].
pub(crate) struct Internal;

// SAFETY: blocks are at least `layout.size()` bytes at `layout.align()`
// (a power of two rounded up to both), distinct while live, and freed once.
unsafe impl GlobalAlloc for Internal {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        alloc(layout.size(), layout.align())
    }

    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: the caller's contract: `ptr` came from this allocator.
        unsafe { free(ptr) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = alloc(layout.size(), layout.align());
        if !p.is_null() {
            // SAFETY: the block holds at least `layout.size()` bytes.
            unsafe { p.write_bytes(0, layout.size()) };
        }
        p
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` is a live block of ours (caller's contract).
        let have = unsafe { usable_size(ptr) };
        if new_size <= have {
            return ptr;
        }
        let q = alloc(new_size, layout.align());
        if !q.is_null() {
            // SAFETY: distinct live blocks; the old one holds `layout.size()` bytes.
            unsafe {
                core::ptr::copy_nonoverlapping(ptr, q, layout.size());
                free(ptr);
            }
        }
        q
    }
}
