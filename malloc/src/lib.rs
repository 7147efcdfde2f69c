//! `libwarmarena.so`: warmarena as the C allocator of a whole process.
//!
//! ```sh
//! LD_PRELOAD=target/release/libwarmarena.so program   # or link with -lwarmarena
//! ```
//!
//! It exports glibc's allocation interface (`malloc`, `free`, `calloc`,
//! `realloc`, `reallocarray`, `posix_memalign`, `aligned_alloc`,
//! `memalign`, `valloc`, `pvalloc`, `malloc_usable_size`, `malloc_trim`,
//! `mallinfo2`, `mallinfo`), so libstdc++'s `operator new`/`delete` and
//! glibc's own internal calls land here too.
//!
//! The design, all on the library's public pieces:
//!
//! - One process-wide [`ExecutionArena`], made when the library loads (or
//!   at the first call, whichever comes first), configured from the
//!   environment (`config.rs`). Each thread enters its scope for life at
//!   its first allocation ([`global::enter_for_thread`]), so its requests
//!   take the scoped global allocator's hit path: the thread's cache for
//!   small classes, its large slots, the execution heap on the heap's
//!   thread. Freed memory keeps its pages, so repeated work takes no new
//!   page faults.
//! - Every call is routed by a [`ScopedGlobal`] over the system allocator
//!   (`real.rs`): a free or realloc goes to the owner of the pointer, found
//!   by address in the arenas' owner table; a pointer no arena owns
//!   ("foreign": from glibc before the preload took over, from a
//!   `dlsym`'d libc) goes to the system allocator's `free`/`realloc`,
//!   untouched. Requests the arena does not take (alignment above 2 MiB,
//!   sizes it refuses) go there too. `free` has no size, so the buffer's
//!   capacity comes from [`global::usable_size`].
//! - Bootstrap and re-entrancy: every Rust allocation of this library (the
//!   arena's metadata, thread caches, std) goes to an mmap-backed internal
//!   allocator (`internal.rs`), never to `malloc`. A thread inside the
//!   library is marked in an allocation-free TLS word (`tls.rs`); a call
//!   that arrives then (glibc's `__cxa_thread_atexit_impl` calling
//!   `calloc` while the arena registers a thread-local, `dlsym` at start,
//!   a DTV grown inside `__tls_get_addr`) goes to the system allocator (or
//!   the internal one before the system's is found), and a free of arena
//!   memory then is deferred to the next free outside.
//! - `fork()`: `pthread_atfork` handlers hold the arena's lock and the
//!   internal allocator's across the fork ([`global::lock_for_fork`]), so
//!   the child allocates and frees at once.
//! - `WARMARENA_STATS=1` prints a summary at exit (`report.rs`) with
//!   `write(2)`.

#![deny(unsafe_op_in_unsafe_fn)]

mod config;
mod internal;
mod real;
mod report;
mod tls;
#[cfg(warmarena_tsan)]
mod tsan;

use core::alloc::{GlobalAlloc, Layout};
use core::cell::UnsafeCell;
use core::ffi::{c_int, c_void};
use core::mem::MaybeUninit;
use core::ptr::null_mut;
use core::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use real::MALLOC_ALIGN;
use tls::{BUSY, FRESH, READY};
use warmarena_core::global::{self, ForkLock, ScopedGlobal};
use warmarena_core::{ArenaConfig, ExecutionArena};

/// Every Rust allocation of this library: never `malloc`, so the arena's
/// metadata cannot re-enter the exported functions.
#[global_allocator]
static INTERNAL: internal::Internal = internal::Internal;

/// Routes the C calls: by scope for an allocation, by owner for a free.
static ROUTER: ScopedGlobal<real::System> = ScopedGlobal::over(real::System);

/// The process's state: not started, starting (one thread is making the
/// arena; the others go to the system allocator meanwhile), on, or off
/// (`WARMARENA_DISABLE=1`: everything goes to the system allocator).
static PROCESS: AtomicU8 = AtomicU8::new(UNINIT);
const UNINIT: u8 = 0;
const STARTING: u8 = 1;
const ON: u8 = 2;
const OFF: u8 = 3;

static STATS_AT_EXIT: AtomicBool = AtomicBool::new(false);

/// The process arena, written once while [`PROCESS`] is `STARTING` and
/// read only once it is `ON`.
struct ArenaCell(UnsafeCell<MaybeUninit<ExecutionArena>>);

// SAFETY: written by one thread before `PROCESS` is stored `ON` (release),
// read only after it is loaded `ON` (acquire); never written again.
unsafe impl Sync for ArenaCell {}

static ARENA: ArenaCell = ArenaCell(UnsafeCell::new(MaybeUninit::uninit()));

/// The process arena. Only after `PROCESS` reads `ON`.
fn arena() -> &'static ExecutionArena {
    // SAFETY: see `ArenaCell`: initialised before `ON` was published.
    unsafe { (*ARENA.0.get()).assume_init_ref() }
}

/// Makes the arena (once) and returns the process's state.
#[cold]
#[inline(never)]
fn start() -> u8 {
    if let Err(state) =
        PROCESS.compare_exchange(UNINIT, STARTING, Ordering::AcqRel, Ordering::Acquire)
    {
        return state;
    }
    let saved = tls::get();
    tls::set(saved | BUSY);
    real::resolve();
    let cfg = config::read();
    STATS_AT_EXIT.store(cfg.stats, Ordering::Relaxed);
    let state = if cfg.disable || !real::available() {
        OFF
    } else {
        let mut c = ArenaConfig::default()
            .huge_pages(cfg.huge_pages)
            .run_ownership(cfg.run_ownership);
        if let Some(cap) = cfg.retain_cap {
            c = c.retention_cap(cap);
        }
        let a = ExecutionArena::with_config(c);
        // SAFETY: only this thread writes, once (the compare-exchange above);
        // nobody reads before `ON` is published below.
        unsafe { (*ARENA.0.get()).write(a) };
        // SAFETY: the handlers are plain functions that live as long as the
        // process (this library is never unloaded: see `at_load`).
        unsafe { libc::pthread_atfork(Some(fork_prepare), Some(fork_parent), Some(fork_child)) };
        ON
    };
    PROCESS.store(state, Ordering::Release);
    tls::set(saved);
    state
}

/// Enters this thread into the arena's scope for the rest of its life:
/// whether its requests now go to the arena.
#[cold]
#[inline(never)]
fn enter_thread() -> bool {
    let mut state = PROCESS.load(Ordering::Acquire);
    if state == UNINIT {
        state = start();
    }
    if state != ON {
        return false;
    }
    tls::set(BUSY);
    // False while the thread is exiting: its requests then go to the system
    // allocator through the router, which is as it should be.
    let _ = global::enter_for_thread(arena());
    tls::set(READY);
    true
}

fn set_errno(e: c_int) {
    // SAFETY: glibc's errno location is this thread's, always valid.
    unsafe { *libc::__errno_location() = e };
}

fn enomem() -> *mut c_void {
    set_errno(libc::ENOMEM);
    null_mut()
}

/// A request the arena does not serve on this call (re-entrant, not
/// started, off): to the system allocator.
fn passthrough(size: usize, align: usize) -> *mut c_void {
    let p = if align <= MALLOC_ALIGN {
        real::malloc(size)
    } else {
        real::aligned(align, size)
    };
    if p.is_null() {
        return enomem();
    }
    p
}

/// `size` bytes at `align` from the arena; the thread is `READY`. The hit
/// is the arena's own (this thread's cache or heap, one thread-local load
/// inside the arena): no scope, no counters; anything else goes through
/// the router.
#[inline(always)]
fn serve(size: usize, align: usize) -> *mut c_void {
    tls::set(READY | BUSY);
    // SAFETY: not re-entrant: a call that arrives while this thread is
    // `BUSY` goes to the system allocator, and the library's own Rust
    // allocations go to the internal one.
    if let Some(p) = unsafe { arena().allocate_hit(size, align) } {
        tls::set(READY);
        return p.as_ptr().cast();
    }
    serve_miss(size, align)
}

/// [`serve`] past the hit: through the router (the thread's scope, its
/// large slots, the execution heap, the lock). The thread is `BUSY`.
#[inline(never)]
fn serve_miss(size: usize, align: usize) -> *mut c_void {
    let Ok(layout) = Layout::from_size_align(size.max(1), align) else {
        tls::set(READY);
        return enomem();
    };
    // SAFETY: a non-zero layout; the router never unwinds.
    let p = unsafe { ROUTER.alloc(layout) };
    tls::set(READY);
    if p.is_null() {
        return enomem();
    }
    p.cast()
}

/// An allocation from a thread that is not `READY`.
#[cold]
#[inline(never)]
fn alloc_slow(size: usize, align: usize) -> *mut c_void {
    if tls::get() & BUSY != 0 || !enter_thread() {
        return passthrough(size, align);
    }
    serve(size, align)
}

#[inline(always)]
fn alloc(size: usize, align: usize) -> *mut c_void {
    if tls::get() == READY {
        return serve(size, align);
    }
    alloc_slow(size, align)
}

/// Frees of arena memory that arrived while their thread was inside the
/// library (a Treiber stack through the buffers' first words), returned
/// at the next free outside it.
static DEFERRED: AtomicUsize = AtomicUsize::new(0);

/// # Safety
/// `p` is a live arena buffer the caller gives up.
unsafe fn defer(p: *mut c_void) {
    let mut head = DEFERRED.load(Ordering::Relaxed);
    loop {
        // SAFETY: the buffer is ours now and at least 16 bytes long.
        unsafe { *(p as *mut usize) = head };
        match DEFERRED.compare_exchange_weak(head, p as usize, Ordering::Release, Ordering::Relaxed)
        {
            Ok(_) => return,
            Err(h) => head = h,
        }
    }
}

/// Returns every deferred free. The caller's thread is marked `BUSY`.
#[cold]
fn drain_deferred() {
    let mut p = DEFERRED.swap(0, Ordering::Acquire);
    while p != 0 {
        // SAFETY: a deferred buffer holds the next one's address in its
        // first word (written by `defer`, published by its release).
        let next = unsafe { *(p as *const usize) };
        // SAFETY: a live arena buffer whose owner gave it up.
        unsafe { free_arena_busy(p as *mut c_void) };
        p = next;
    }
}

/// Returns the arena buffer at `p` to its arena; the thread is `BUSY`.
///
/// # Safety
/// `p` is in arena memory and, if a live buffer, the caller gives it up.
unsafe fn free_arena_busy(p: *mut c_void) {
    // SAFETY: arena memory, live (or reported below and left alone); not
    // re-entrant (the thread is `BUSY`).
    if unsafe { ExecutionArena::free_by_address(p.cast()) } != Some(true) {
        report::bad_pointer("free", p.cast());
    }
}

/// Frees `p` (not null) when this thread is not inside the library: one
/// owner-table lookup names the owner, and a small buffer's class, of an
/// arena buffer; anything else is foreign.
///
/// # Safety
/// `p` is a live pointer from a `malloc`-family function; the thread is
/// not `BUSY` (its state is `s`).
#[inline(always)]
unsafe fn free_outside(p: *mut c_void, s: usize) {
    tls::set(s | BUSY);
    if DEFERRED.load(Ordering::Relaxed) != 0 {
        drain_deferred();
    }
    // SAFETY: the caller's contract; not re-entrant (`BUSY`).
    let r = unsafe { ExecutionArena::free_by_address(p.cast()) };
    tls::set(s);
    match r {
        Some(true) => {}
        // SAFETY: not arena memory: the system allocator's or the internal one's.
        None => unsafe { real::free(p) },
        Some(false) => report::bad_pointer("free", p.cast()),
    }
}

/// Allocates `size` bytes aligned to at least 16.
///
/// # Safety
/// Safe to call from C at any time; the result is freed with [`free`].
#[cfg_attr(not(warmarena_tsan), no_mangle)]
pub unsafe extern "C" fn malloc(size: usize) -> *mut c_void {
    alloc(size, MALLOC_ALIGN)
}

/// Frees `p` (null: nothing): to its arena, or to the allocator that
/// served it when that is not this library.
///
/// # Safety
/// `p` is null or a live pointer from a `malloc`-family function.
#[cfg_attr(not(warmarena_tsan), no_mangle)]
pub unsafe extern "C" fn free(p: *mut c_void) {
    // SAFETY: forwarded contract.
    unsafe { free_impl(p) }
}

/// [`free`]'s body. The library's own frees (`realloc`, `cfree`) call it
/// directly, never the exported symbol: a call to that goes through the
/// GOT, and where this library is not the process's `malloc` (loaded with
/// `dlopen`, or an executable with an allocator of its own) it would reach
/// another allocator's `free` with an arena pointer.
///
/// # Safety
/// As [`free`].
#[inline(always)]
unsafe fn free_impl(p: *mut c_void) {
    if p.is_null() {
        return;
    }
    let s = tls::get();
    if s & BUSY == 0 {
        // SAFETY: the caller's contract; the thread is not `BUSY`.
        return unsafe { free_outside(p, s) };
    }
    if global::is_arena_memory(p.cast()) {
        // SAFETY: the caller's contract: a live arena buffer, given up.
        return unsafe { defer(p) };
    }
    // SAFETY: not arena memory: the system allocator's or the internal one's.
    unsafe { real::free(p) }
}

/// Same as [`free`] (an old SunOS name some programs still call).
///
/// # Safety
/// As [`free`].
#[no_mangle]
pub unsafe extern "C" fn cfree(p: *mut c_void) {
    // SAFETY: forwarded contract.
    unsafe { free_impl(p) }
}

/// `n * size` zeroed bytes; null with `ENOMEM` when the product overflows.
///
/// # Safety
/// As [`malloc`].
#[cfg_attr(not(warmarena_tsan), no_mangle)]
pub unsafe extern "C" fn calloc(n: usize, size: usize) -> *mut c_void {
    let Some(total) = n.checked_mul(size) else {
        return enomem();
    };
    if tls::get() != READY && (tls::get() & BUSY != 0 || !enter_thread()) {
        let p = real::calloc(n, size);
        if p.is_null() {
            return enomem();
        }
        return p;
    }
    if total < 64 << 10 {
        let p = serve(total, MALLOC_ALIGN);
        if !p.is_null() {
            // SAFETY: the buffer holds at least `total` bytes.
            unsafe { p.cast::<u8>().write_bytes(0, total) };
        }
        return p;
    }
    // Large: fresh pages are zero already, so the arena writes only a
    // reused buffer.
    let Ok(layout) = Layout::from_size_align(total, MALLOC_ALIGN) else {
        return enomem();
    };
    tls::set(READY | BUSY);
    // SAFETY: a non-zero layout.
    let p = unsafe { ROUTER.alloc_zeroed(layout) };
    tls::set(READY);
    if p.is_null() {
        return enomem();
    }
    p.cast()
}

/// Resizes `p` to `size` bytes, keeping its contents up to the smaller
/// size. `realloc(NULL, n)` is `malloc(n)`; `realloc(p, 0)` frees `p` and
/// returns null (glibc's answer); on failure `p` is untouched and null
/// returned with `ENOMEM`. A foreign pointer stays with its allocator.
///
/// # Safety
/// `p` is null or a live pointer from a `malloc`-family function.
#[cfg_attr(not(warmarena_tsan), no_mangle)]
pub unsafe extern "C" fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: forwarded contract.
    unsafe { realloc_impl(p, size) }
}

/// [`realloc`]'s body, which `reallocarray` calls directly (see
/// [`free_impl`]).
///
/// # Safety
/// As [`realloc`].
unsafe fn realloc_impl(p: *mut c_void, size: usize) -> *mut c_void {
    if p.is_null() {
        return alloc(size, MALLOC_ALIGN);
    }
    if size == 0 {
        // SAFETY: the caller's contract.
        unsafe { free_impl(p) };
        return null_mut();
    }
    if !global::is_arena_memory(p.cast()) {
        if internal::contains(p.cast()) {
            // SAFETY: a live internal block (bootstrap): moved out.
            let have = unsafe { internal::usable_size(p.cast()) };
            // SAFETY: as above.
            return unsafe { move_to_new(p, have, size) };
        }
        // SAFETY: a live system pointer.
        let q = unsafe { real::realloc(p, size) };
        if q.is_null() {
            return enomem();
        }
        return q;
    }
    // SAFETY: arena memory (caller: a live buffer).
    let Some(cap) = (unsafe { global::usable_size(p.cast()) }) else {
        report::bad_pointer("realloc", p.cast());
        return enomem();
    };
    let s = tls::get();
    if s & BUSY != 0 || (s == FRESH && !enter_thread()) {
        // SAFETY: a live arena buffer of `cap` bytes.
        return unsafe { move_to_new(p, cap, size) };
    }
    // A large buffer cut to a quarter or less moves, so it does not keep
    // its whole capacity live.
    if cap >= 256 << 10 && size <= cap / 4 {
        // SAFETY: as above.
        return unsafe { move_to_new(p, cap, size) };
    }
    let Ok(_) = Layout::from_size_align(size, MALLOC_ALIGN) else {
        return enomem();
    };
    tls::set(READY | BUSY);
    // SAFETY: `p` is a live arena buffer of capacity `cap` (every byte of
    // it readable); `size` is non-zero and forms a valid layout.
    let q = unsafe {
        ROUTER.realloc(
            p.cast(),
            Layout::from_size_align_unchecked(cap, MALLOC_ALIGN),
            size,
        )
    };
    tls::set(READY);
    if q.is_null() {
        return enomem();
    }
    q.cast()
}

/// Moves `p` (of `have` readable bytes) into a new allocation of `size`.
///
/// # Safety
/// `p` is a live pointer of any of the allocators here, `have` bytes long.
unsafe fn move_to_new(p: *mut c_void, have: usize, size: usize) -> *mut c_void {
    let q = alloc(size, MALLOC_ALIGN);
    if q.is_null() {
        return q;
    }
    // SAFETY: distinct live blocks, each at least the bytes copied.
    unsafe { core::ptr::copy_nonoverlapping(p.cast::<u8>(), q.cast::<u8>(), have.min(size)) };
    // SAFETY: the caller's contract; `p` is given up.
    unsafe { free_impl(p) };
    q
}

/// `realloc(p, n * size)`, null with `ENOMEM` when the product overflows
/// (`p` untouched).
///
/// # Safety
/// As [`realloc`].
#[no_mangle]
pub unsafe extern "C" fn reallocarray(p: *mut c_void, n: usize, size: usize) -> *mut c_void {
    match n.checked_mul(size) {
        // SAFETY: forwarded contract.
        Some(total) => unsafe { realloc_impl(p, total) },
        None => enomem(),
    }
}

/// `size` bytes at `align`, a power of two.
fn aligned(align: usize, size: usize) -> *mut c_void {
    alloc(size, align.max(MALLOC_ALIGN))
}

/// Stores `size` bytes aligned to `align` at `*out`. `EINVAL` (and `*out`
/// untouched) when `align` is not a power of two multiple of
/// `sizeof(void *)`; `ENOMEM` when there is no memory.
///
/// # Safety
/// `out` is valid for a pointer write.
#[no_mangle]
pub unsafe extern "C" fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int {
    if !align.is_power_of_two() || align % core::mem::size_of::<*mut c_void>() != 0 {
        return libc::EINVAL;
    }
    let p = aligned(align, size);
    if p.is_null() {
        return libc::ENOMEM;
    }
    // SAFETY: the caller's contract.
    unsafe { *out = p };
    0
}

/// `size` bytes at `align`; null with `EINVAL` when `align` is not a power
/// of two (glibc 2.38 and later; C17).
///
/// # Safety
/// As [`malloc`].
#[no_mangle]
pub unsafe extern "C" fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
    if !align.is_power_of_two() {
        set_errno(libc::EINVAL);
        return null_mut();
    }
    aligned(align, size)
}

/// `size` bytes at `align`. As glibc's: an alignment that is not a power
/// of two is rounded up to the next one, and null with `EINVAL` comes
/// back only when none exists (above `SIZE_MAX / 2 + 1`).
///
/// # Safety
/// As [`malloc`].
#[no_mangle]
pub unsafe extern "C" fn memalign(align: usize, size: usize) -> *mut c_void {
    match align.checked_next_power_of_two() {
        Some(a) => aligned(a, size),
        None => {
            set_errno(libc::EINVAL);
            null_mut()
        }
    }
}

fn page() -> usize {
    warmarena_core::page_size()
}

/// `size` bytes at a page boundary.
///
/// # Safety
/// As [`malloc`].
#[no_mangle]
pub unsafe extern "C" fn valloc(size: usize) -> *mut c_void {
    aligned(page(), size)
}

/// `size` rounded up to whole pages (at least one), at a page boundary.
///
/// # Safety
/// As [`malloc`].
#[no_mangle]
pub unsafe extern "C" fn pvalloc(size: usize) -> *mut c_void {
    let pg = page();
    match size.max(1).checked_next_multiple_of(pg) {
        Some(n) => aligned(pg, n),
        None => enomem(),
    }
}

/// The bytes of the block at `p` that may be used (0 for null).
///
/// # Safety
/// `p` is null or a live pointer from a `malloc`-family function.
#[no_mangle]
pub unsafe extern "C" fn malloc_usable_size(p: *mut c_void) -> usize {
    if p.is_null() {
        return 0;
    }
    if global::is_arena_memory(p.cast()) {
        // SAFETY: a live arena buffer (caller's contract).
        return unsafe { global::usable_size(p.cast()) }.unwrap_or(0);
    }
    if internal::contains(p.cast()) {
        // SAFETY: a live internal block.
        return unsafe { internal::usable_size(p.cast()) };
    }
    // SAFETY: a live system pointer.
    unsafe { real::usable_size(p) }
}

/// Gives the arena's retained memory back to the system (its `trim`) and
/// asks the system allocator to do the same: 1 if anything was released.
///
/// # Safety
/// Safe to call from C at any time.
#[no_mangle]
pub unsafe extern "C" fn malloc_trim(pad: usize) -> c_int {
    let mut released = 0;
    if PROCESS.load(Ordering::Acquire) == ON {
        let s = tls::get();
        tls::set(s | BUSY);
        released = arena().trim();
        tls::set(s);
    }
    c_int::from(released > 0 || real::trim(pad) != 0)
}

/// glibc's `struct mallinfo2`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct Mallinfo2 {
    /// Bytes mapped by the arena.
    pub arena: usize,
    /// Free (retained) buffers.
    pub ordblks: usize,
    /// Unused (0).
    pub smblks: usize,
    /// Live buffers.
    pub hblks: usize,
    /// Unused (0).
    pub hblkhd: usize,
    /// The peak of live bytes.
    pub usmblks: usize,
    /// Unused (0).
    pub fsmblks: usize,
    /// Live bytes (capacity of live buffers).
    pub uordblks: usize,
    /// Retained bytes (free buffers kept with their pages).
    pub fordblks: usize,
    /// Unused (0).
    pub keepcost: usize,
}

/// The arena's figures in glibc's `mallinfo2` shape: `arena` the mapped
/// bytes, `uordblks` live, `fordblks` retained, `usmblks` the live peak,
/// `hblks`/`ordblks` live/retained buffer counts. The system allocator's
/// own (foreign) memory is not included.
///
/// # Safety
/// Safe to call from C at any time.
#[no_mangle]
pub unsafe extern "C" fn mallinfo2() -> Mallinfo2 {
    mallinfo2_impl()
}

/// [`mallinfo2`]'s body, which `mallinfo` calls directly (see [`free_impl`]).
fn mallinfo2_impl() -> Mallinfo2 {
    if PROCESS.load(Ordering::Acquire) != ON {
        return Mallinfo2::default();
    }
    let st = tls::get();
    tls::set(st | BUSY);
    let s = arena().stats();
    tls::set(st);
    Mallinfo2 {
        arena: s.mapped_bytes,
        ordblks: s.retained_buffers,
        hblks: s.live_buffers,
        usmblks: s.peak_live_bytes,
        uordblks: s.live_bytes,
        fordblks: s.retained_bytes,
        ..Mallinfo2::default()
    }
}

/// glibc's older `struct mallinfo` (`int` fields).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct Mallinfo {
    /// As [`Mallinfo2::arena`], saturated.
    pub arena: c_int,
    /// As [`Mallinfo2::ordblks`].
    pub ordblks: c_int,
    /// 0.
    pub smblks: c_int,
    /// As [`Mallinfo2::hblks`].
    pub hblks: c_int,
    /// 0.
    pub hblkhd: c_int,
    /// As [`Mallinfo2::usmblks`].
    pub usmblks: c_int,
    /// 0.
    pub fsmblks: c_int,
    /// As [`Mallinfo2::uordblks`].
    pub uordblks: c_int,
    /// As [`Mallinfo2::fordblks`].
    pub fordblks: c_int,
    /// 0.
    pub keepcost: c_int,
}

/// [`mallinfo2`] with every field saturated to `int`.
///
/// # Safety
/// Safe to call from C at any time.
#[no_mangle]
pub unsafe extern "C" fn mallinfo() -> Mallinfo {
    let m = mallinfo2_impl();
    let c = |v: usize| c_int::try_from(v).unwrap_or(c_int::MAX);
    Mallinfo {
        arena: c(m.arena),
        ordblks: c(m.ordblks),
        hblks: c(m.hblks),
        usmblks: c(m.usmblks),
        uordblks: c(m.uordblks),
        fordblks: c(m.fordblks),
        ..Mallinfo::default()
    }
}

/// The lock held across a `fork()`, and the forking thread's state, from
/// the prepare handler to the parent's or the child's.
struct ForkHeld(UnsafeCell<(Option<ForkLock<'static>>, usize)>);

// SAFETY: only the thread that holds the arena's lock (taken in
// `fork_prepare`) touches the cell, so accesses never overlap.
unsafe impl Sync for ForkHeld {}

static FORK_HELD: ForkHeld = ForkHeld(UnsafeCell::new((None, FRESH)));

extern "C" fn fork_prepare() {
    let s = tls::get();
    // Anything this thread allocates until the fork (other handlers) goes
    // to the system allocator, which glibc's fork keeps consistent itself.
    tls::set(s | BUSY);
    let held = global::lock_for_fork(arena());
    internal::lock();
    // SAFETY: this thread holds the arena's lock: see `ForkHeld`.
    unsafe { *FORK_HELD.0.get() = (Some(held), s) };
}

fn fork_release() {
    // SAFETY: this thread still holds the arena's lock: see `ForkHeld`.
    let (held, s) = unsafe { core::mem::replace(&mut *FORK_HELD.0.get(), (None, FRESH)) };
    internal::unlock();
    drop(held);
    tls::set(s);
}

extern "C" fn fork_parent() {
    fork_release();
}

extern "C" fn fork_child() {
    fork_release();
}

/// Runs when the library is loaded (before `main`, and before the
/// constructors of the objects loaded after it): makes the arena, so that
/// the `pthread_atfork` handlers are registered early.
extern "C" fn at_load() {
    if PROCESS.load(Ordering::Acquire) == UNINIT {
        start();
    }
}

/// Runs at exit (after the program's own destructors): the summary.
extern "C" fn at_unload() {
    if STATS_AT_EXIT.load(Ordering::Relaxed) && PROCESS.load(Ordering::Acquire) == ON {
        let s = tls::get();
        tls::set(s | BUSY);
        report::summary(arena());
        tls::set(s);
    }
}

#[used]
#[link_section = ".init_array"]
static AT_LOAD: extern "C" fn() = at_load;

#[used]
#[link_section = ".fini_array"]
static AT_UNLOAD: extern "C" fn() = at_unload;
