//! `malloc`, `free` and the rest of glibc's allocation interface over
//! mimalloc or jemalloc, for `LD_PRELOAD` in scripts/preload-bench.sh.

use core::ffi::{c_int, c_void};
use core::ptr::null_mut;

#[cfg(all(feature = "mimalloc", not(feature = "jemalloc")))]
mod imp {
    use core::ffi::c_void;
    use libmimalloc_sys as mi;

    pub unsafe fn malloc(n: usize) -> *mut c_void {
        // SAFETY: forwarded C contract.
        unsafe { mi::mi_malloc(n) }
    }
    pub unsafe fn calloc(n: usize, s: usize) -> *mut c_void {
        // SAFETY: forwarded C contract.
        unsafe { mi::mi_calloc(n, s) }
    }
    pub unsafe fn realloc(p: *mut c_void, n: usize) -> *mut c_void {
        // SAFETY: forwarded C contract.
        unsafe { mi::mi_realloc(p, n) }
    }
    pub unsafe fn free(p: *mut c_void) {
        // SAFETY: forwarded C contract.
        unsafe { mi::mi_free(p) }
    }
    pub unsafe fn aligned(align: usize, n: usize) -> *mut c_void {
        // SAFETY: forwarded C contract.
        unsafe { mi::mi_malloc_aligned(n, align) }
    }
    pub unsafe fn usable(p: *mut c_void) -> usize {
        // SAFETY: forwarded C contract.
        unsafe { mi::mi_usable_size(p) }
    }
}

#[cfg(all(feature = "jemalloc", not(feature = "mimalloc")))]
mod imp {
    use core::ffi::c_void;
    use tikv_jemalloc_sys as je;

    pub unsafe fn malloc(n: usize) -> *mut c_void {
        // SAFETY: forwarded C contract.
        unsafe { je::malloc(n) }
    }
    pub unsafe fn calloc(n: usize, s: usize) -> *mut c_void {
        // SAFETY: forwarded C contract.
        unsafe { je::calloc(n, s) }
    }
    pub unsafe fn realloc(p: *mut c_void, n: usize) -> *mut c_void {
        // SAFETY: forwarded C contract.
        unsafe { je::realloc(p, n) }
    }
    pub unsafe fn free(p: *mut c_void) {
        // SAFETY: forwarded C contract.
        unsafe { je::free(p) }
    }
    pub unsafe fn aligned(align: usize, n: usize) -> *mut c_void {
        let mut out = core::ptr::null_mut();
        // SAFETY: forwarded C contract; `out` is ours.
        if unsafe { je::posix_memalign(&mut out, align.max(8), n) } == 0 {
            out
        } else {
            core::ptr::null_mut()
        }
    }
    pub unsafe fn usable(p: *mut c_void) -> usize {
        // SAFETY: forwarded C contract.
        unsafe { je::malloc_usable_size(p) }
    }
}

fn enomem() -> *mut c_void {
    // SAFETY: this thread's errno.
    unsafe { *libc::__errno_location() = libc::ENOMEM };
    null_mut()
}

/// # Safety
/// C's `malloc`.
#[no_mangle]
pub unsafe extern "C" fn malloc(n: usize) -> *mut c_void {
    // SAFETY: forwarded.
    unsafe { imp::malloc(n) }
}
/// # Safety
/// C's `calloc`.
#[no_mangle]
pub unsafe extern "C" fn calloc(n: usize, s: usize) -> *mut c_void {
    // SAFETY: forwarded.
    unsafe { imp::calloc(n, s) }
}
/// # Safety
/// C's `realloc`.
#[no_mangle]
pub unsafe extern "C" fn realloc(p: *mut c_void, n: usize) -> *mut c_void {
    // SAFETY: forwarded.
    unsafe { imp::realloc(p, n) }
}
/// # Safety
/// C's `reallocarray`.
#[no_mangle]
pub unsafe extern "C" fn reallocarray(p: *mut c_void, n: usize, s: usize) -> *mut c_void {
    match n.checked_mul(s) {
        // SAFETY: forwarded.
        Some(t) => unsafe { imp::realloc(p, t) },
        None => enomem(),
    }
}
/// # Safety
/// C's `free`.
#[no_mangle]
pub unsafe extern "C" fn free(p: *mut c_void) {
    // SAFETY: forwarded.
    unsafe { imp::free(p) }
}
/// # Safety
/// C's `posix_memalign`.
#[no_mangle]
pub unsafe extern "C" fn posix_memalign(out: *mut *mut c_void, align: usize, n: usize) -> c_int {
    if !align.is_power_of_two() || align % 8 != 0 {
        return libc::EINVAL;
    }
    // SAFETY: forwarded.
    let p = unsafe { imp::aligned(align, n) };
    if p.is_null() {
        return libc::ENOMEM;
    }
    // SAFETY: the caller's out pointer.
    unsafe { *out = p };
    0
}
/// # Safety
/// C's `aligned_alloc`.
#[no_mangle]
pub unsafe extern "C" fn aligned_alloc(align: usize, n: usize) -> *mut c_void {
    // SAFETY: forwarded.
    unsafe { imp::aligned(align.max(16), n) }
}
/// # Safety
/// C's `memalign`.
#[no_mangle]
pub unsafe extern "C" fn memalign(align: usize, n: usize) -> *mut c_void {
    // SAFETY: forwarded.
    unsafe { imp::aligned(align.max(16).next_power_of_two(), n) }
}
/// # Safety
/// C's `valloc`.
#[no_mangle]
pub unsafe extern "C" fn valloc(n: usize) -> *mut c_void {
    // SAFETY: forwarded.
    unsafe { imp::aligned(4096, n) }
}
/// # Safety
/// C's `pvalloc`.
#[no_mangle]
pub unsafe extern "C" fn pvalloc(n: usize) -> *mut c_void {
    // SAFETY: forwarded.
    unsafe { imp::aligned(4096, n.max(1).next_multiple_of(4096)) }
}
/// # Safety
/// C's `malloc_usable_size`.
#[no_mangle]
pub unsafe extern "C" fn malloc_usable_size(p: *mut c_void) -> usize {
    if p.is_null() {
        return 0;
    }
    // SAFETY: forwarded.
    unsafe { imp::usable(p) }
}
