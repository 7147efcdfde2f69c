//! The allocator this library replaced (glibc's, found with
//! `dlsym(RTLD_NEXT, ...)`): it serves requests the arena does not take
//! (alignments above 2 MiB, sizes the arena refuses, threads already past
//! their exit, calls made from inside this library) and frees every pointer
//! that is not ours ("foreign": the owner table does not know it).
//!
//! Until [`resolve`] has run (or where a function is missing), requests go
//! to the library's own allocator (`internal.rs`) instead.

use crate::internal;
use core::alloc::{GlobalAlloc, Layout};
use core::ffi::{c_int, c_void, CStr};
use core::sync::atomic::{AtomicUsize, Ordering};

type Malloc = unsafe extern "C" fn(usize) -> *mut c_void;
type Free = unsafe extern "C" fn(*mut c_void);
type Calloc = unsafe extern "C" fn(usize, usize) -> *mut c_void;
type Realloc = unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void;
type PosixMemalign = unsafe extern "C" fn(*mut *mut c_void, usize, usize) -> c_int;
type UsableSize = unsafe extern "C" fn(*mut c_void) -> usize;
type Trim = unsafe extern "C" fn(usize) -> c_int;

static MALLOC: AtomicUsize = AtomicUsize::new(0);
static FREE: AtomicUsize = AtomicUsize::new(0);
static CALLOC: AtomicUsize = AtomicUsize::new(0);
static REALLOC: AtomicUsize = AtomicUsize::new(0);
static POSIX_MEMALIGN: AtomicUsize = AtomicUsize::new(0);
static USABLE_SIZE: AtomicUsize = AtomicUsize::new(0);
static TRIM: AtomicUsize = AtomicUsize::new(0);

fn find(name: &CStr) -> usize {
    // SAFETY: `name` is a NUL-terminated symbol name; RTLD_NEXT searches the
    // objects loaded after this one. (dlsym may allocate: the caller marks
    // the thread as inside the library, so that goes to `internal`.)
    unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) as usize }
}

/// Looks the replaced allocator's functions up. Free is published last:
/// a pointer the system allocator served can exist only after its malloc
/// was found.
#[cfg(not(warmarena_tsan))]
pub(crate) fn resolve() {
    POSIX_MEMALIGN.store(find(c"posix_memalign"), Ordering::Release);
    USABLE_SIZE.store(find(c"malloc_usable_size"), Ordering::Release);
    TRIM.store(find(c"malloc_trim"), Ordering::Release);
    REALLOC.store(find(c"realloc"), Ordering::Release);
    CALLOC.store(find(c"calloc"), Ordering::Release);
    let free = find(c"free");
    FREE.store(free, Ordering::Release);
    if free != 0 {
        MALLOC.store(find(c"malloc"), Ordering::Release);
    }
}

/// The ThreadSanitizer build (`tsan.rs`): the sanitizer's runtime, loaded
/// after this library, intercepts `malloc` and the rest, so `RTLD_NEXT`
/// would find its allocator, which refuses the blocks glibc served before
/// this library started. glibc's own entry points serve instead; aligned
/// requests past the arena go to `internal`.
#[cfg(warmarena_tsan)]
pub(crate) fn resolve() {
    REALLOC.store(find(c"__libc_realloc"), Ordering::Release);
    CALLOC.store(find(c"__libc_calloc"), Ordering::Release);
    let free = find(c"__libc_free");
    FREE.store(free, Ordering::Release);
    if free != 0 {
        MALLOC.store(find(c"__libc_malloc"), Ordering::Release);
    }
}

/// Whether the system allocator serves requests (else `internal` does).
pub(crate) fn available() -> bool {
    MALLOC.load(Ordering::Acquire) != 0
}

/// The system's `malloc`, or the internal allocator's.
pub(crate) fn malloc(size: usize) -> *mut c_void {
    let f = MALLOC.load(Ordering::Acquire);
    if f == 0 {
        return internal::alloc(size.max(1), 16).cast();
    }
    // SAFETY: a non-zero value is the address `dlsym` gave for `malloc`.
    unsafe { core::mem::transmute::<usize, Malloc>(f)(size) }
}

/// The system's `calloc` (overflow already checked by the caller).
pub(crate) fn calloc(n: usize, size: usize) -> *mut c_void {
    let f = CALLOC.load(Ordering::Acquire);
    if f == 0 || !available() {
        let total = n.saturating_mul(size);
        let p = internal::alloc(total.max(1), 16);
        if !p.is_null() {
            // SAFETY: the block holds at least `total` bytes.
            unsafe { p.write_bytes(0, total) };
        }
        return p.cast();
    }
    // SAFETY: the address `dlsym` gave for `calloc`.
    unsafe { core::mem::transmute::<usize, Calloc>(f)(n, size) }
}

/// `size` bytes aligned to `align` (a power of two) from the system.
pub(crate) fn aligned(align: usize, size: usize) -> *mut c_void {
    let f = POSIX_MEMALIGN.load(Ordering::Acquire);
    if f == 0 || !available() {
        return internal::alloc(size.max(1), align).cast();
    }
    let mut out = core::ptr::null_mut();
    let align = align.max(core::mem::size_of::<usize>());
    // SAFETY: the address `dlsym` gave for `posix_memalign`; `out` is ours.
    let rc = unsafe { core::mem::transmute::<usize, PosixMemalign>(f)(&mut out, align, size) };
    if rc == 0 {
        out
    } else {
        core::ptr::null_mut()
    }
}

/// Frees a pointer the system allocator (or, before it was found, the
/// internal one) served.
///
/// # Safety
/// `p` is a live pointer of that allocator.
pub(crate) unsafe fn free(p: *mut c_void) {
    if internal::contains(p.cast()) {
        // SAFETY: one of the internal allocator's blocks (caller's contract).
        return unsafe { internal::free(p.cast()) };
    }
    let f = FREE.load(Ordering::Acquire);
    if f != 0 {
        // SAFETY: the address `dlsym` gave for `free`; `p` is the system's.
        unsafe { core::mem::transmute::<usize, Free>(f)(p) }
    }
}

/// The system's `realloc` of one of its pointers.
///
/// # Safety
/// `p` is a live pointer of the system allocator; `size > 0`.
pub(crate) unsafe fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    let f = REALLOC.load(Ordering::Acquire);
    if f == 0 {
        return core::ptr::null_mut();
    }
    // SAFETY: the address `dlsym` gave for `realloc`; `p` is the system's.
    unsafe { core::mem::transmute::<usize, Realloc>(f)(p, size) }
}

/// The system's `malloc_usable_size` of one of its pointers (0 if unknown).
///
/// # Safety
/// `p` is a live pointer of the system allocator.
pub(crate) unsafe fn usable_size(p: *mut c_void) -> usize {
    let f = USABLE_SIZE.load(Ordering::Acquire);
    if f == 0 {
        return 0;
    }
    // SAFETY: the address `dlsym` gave for `malloc_usable_size`.
    unsafe { core::mem::transmute::<usize, UsableSize>(f)(p) }
}

/// The system's `malloc_trim` (0 if it has none).
pub(crate) fn trim(pad: usize) -> c_int {
    let f = TRIM.load(Ordering::Acquire);
    if f == 0 {
        return 0;
    }
    // SAFETY: the address `dlsym` gave for `malloc_trim`.
    unsafe { core::mem::transmute::<usize, Trim>(f)(pad) }
}

/// The allocator behind the scoped global allocator that routes the C
/// calls (`ScopedGlobal::over(System)`): what the arena does not serve.
#[derive(Debug, Clone, Copy)]
pub(crate) struct System;

/// What `malloc` guarantees without an explicit alignment.
pub(crate) const MALLOC_ALIGN: usize = 16;

// SAFETY: every block comes from the system allocator (or the internal one)
// with at least the layout's size and alignment, and is freed to it.
unsafe impl GlobalAlloc for System {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.align() <= MALLOC_ALIGN {
            malloc(layout.size()).cast()
        } else {
            aligned(layout.align(), layout.size()).cast()
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.align() <= MALLOC_ALIGN {
            return calloc(1, layout.size()).cast();
        }
        // SAFETY: forwarded contract.
        let p = unsafe { self.alloc(layout) };
        if !p.is_null() {
            // SAFETY: the block holds at least `layout.size()` bytes.
            unsafe { p.write_bytes(0, layout.size()) };
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from `alloc` above (caller's contract).
        unsafe { free(ptr.cast()) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if layout.align() <= MALLOC_ALIGN && !internal::contains(ptr) && available() {
            // SAFETY: a live system pointer; `new_size > 0` (GlobalAlloc's contract).
            return unsafe { realloc(ptr.cast(), new_size) }.cast();
        }
        // SAFETY: `new_size` with this alignment is a valid layout (caller's contract).
        let new = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: non-zero size.
        let q = unsafe { self.alloc(new) };
        if !q.is_null() {
            // SAFETY: distinct live blocks of at least the bytes copied.
            unsafe {
                core::ptr::copy_nonoverlapping(ptr, q, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
        }
        q
    }
}
