//! The calling thread's state word: whether it has entered the process
//! arena's scope, and whether it is inside this library right now (a call
//! that arrives then is re-entrant and must not touch the arena).
//!
//! On x86-64 the word is an initial-exec TLS variable read with one load
//! from the thread pointer, never through `__tls_get_addr`: after a
//! `dlopen`, glibc's `__tls_get_addr` may grow a thread's DTV with
//! `malloc`, and a `malloc` whose own re-entrancy guard went through
//! `__tls_get_addr` again would recurse without end. (Rust's `thread_local!`
//! uses the general-dynamic model in a shared library, and choosing the
//! model needs a nightly flag.) Elsewhere it is a `const`-initialised
//! `thread_local!` without destructor, which allocates nothing.

/// Not yet entered the arena's scope.
pub(crate) const FRESH: usize = 0;
/// Entered: the thread's allocations go to the process arena.
pub(crate) const READY: usize = 1;
/// Added while the thread runs inside this library.
pub(crate) const BUSY: usize = 2;

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod imp {
    core::arch::global_asm!(
        ".pushsection .tbss.warmarena_malloc_state,\"awT\",@nobits",
        ".p2align 3",
        ".globl warmarena_malloc_state",
        ".hidden warmarena_malloc_state",
        ".type warmarena_malloc_state,@object",
        ".size warmarena_malloc_state,8",
        "warmarena_malloc_state:",
        ".zero 8",
        ".popsection",
    );

    /// The address of this thread's state word.
    #[inline(always)]
    pub(crate) fn slot() -> *mut usize {
        let p: usize;
        // SAFETY: reads the variable's offset from the thread pointer
        // (the GOT entry the dynamic linker filled, R_X86_64_TPOFF64) and
        // adds the thread pointer (`fs:0` holds it on x86-64 Linux): the
        // initial-exec access sequence. It only reads memory that exists
        // for every thread and writes nothing.
        unsafe {
            core::arch::asm!(
                "mov {p}, qword ptr [rip + warmarena_malloc_state@GOTTPOFF]",
                "add {p}, qword ptr fs:[0]",
                p = out(reg) p,
                options(pure, readonly, nostack, preserves_flags),
            );
        }
        p as *mut usize
    }
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
mod imp {
    use core::cell::Cell;

    thread_local! {
        static STATE: Cell<usize> = const { Cell::new(0) };
    }

    /// The address of this thread's state word.
    #[inline(always)]
    pub(crate) fn slot() -> *mut usize {
        // No destructor, so the variable is never torn down and `with`
        // never fails, during thread exit too.
        STATE.with(Cell::as_ptr)
    }
}

/// This thread's state.
#[inline(always)]
pub(crate) fn get() -> usize {
    // SAFETY: the slot is this thread's own, aligned and initialised
    // (zero) for every thread; only this thread reads or writes it.
    unsafe { *imp::slot() }
}

/// Sets this thread's state.
#[inline(always)]
pub(crate) fn set(state: usize) {
    // SAFETY: as in `get`.
    unsafe { *imp::slot() = state }
}
