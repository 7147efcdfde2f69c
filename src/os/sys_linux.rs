//! The real system calls (Linux and other Unix kernels with `mmap`).

use super::{OsCounters, OsError};
use core::ptr::NonNull;
use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};

static PAGE_SIZE: AtomicUsize = AtomicUsize::new(0);

pub(super) fn page_size() -> usize {
    let cached = PAGE_SIZE.load(Relaxed);
    if cached != 0 {
        return cached;
    }
    // SAFETY: sysconf has no memory-safety preconditions.
    let raw = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let size = if raw > 0 && (raw as usize).is_power_of_two() {
        raw as usize
    } else {
        4096
    };
    PAGE_SIZE.store(size, Relaxed);
    size
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Maps `len` bytes (a page multiple) at `align` (a power of two ≥ the page size).
pub(super) fn map(len: usize, align: usize, c: &OsCounters) -> Result<NonNull<u8>, OsError> {
    let page = page_size();
    let over = if align > page {
        len.checked_add(align - page).ok_or(OsError::BadLayout)?
    } else {
        len
    };
    // SAFETY: an anonymous private mapping with a null hint touches no existing memory.
    let raw = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            over,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if raw == libc::MAP_FAILED {
        return Err(OsError::MapFailed {
            len,
            errno: errno(),
        });
    }
    let base = raw as usize;
    let start = (base + align - 1) & !(align - 1);
    let head = start - base;
    let tail = over - head - len;
    if head > 0 {
        // SAFETY: [base, base+head) is the unused front of the mapping made above.
        unsafe { libc::munmap(raw, head) };
        c.count_unmap(head, true);
    }
    if tail > 0 {
        // SAFETY: [start+len, start+len+tail) is the unused back of that mapping.
        unsafe { libc::munmap((start + len) as *mut libc::c_void, tail) };
        c.count_unmap(tail, true);
    }
    c.count_map(len);
    // SAFETY: mmap succeeded, so `start` is non-null.
    Ok(unsafe { NonNull::new_unchecked(start as *mut u8) })
}

pub(super) fn advise_huge(ptr: NonNull<u8>, len: usize, on: bool, c: &OsCounters) {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        let advice = if on {
            libc::MADV_HUGEPAGE
        } else {
            libc::MADV_NOHUGEPAGE
        };
        // SAFETY: advice on a range we own; huge-page advice never changes its contents.
        unsafe { libc::madvise(ptr.as_ptr().cast(), len, advice) };
        c.count_advice();
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let _ = (ptr, len, on, c);
}

/// # Safety
/// See [`super::unmap`].
pub(super) unsafe fn unmap(ptr: NonNull<u8>, len: usize, c: &OsCounters) {
    // SAFETY: the caller guarantees this is one whole mapping nobody uses any more.
    unsafe { libc::munmap(ptr.as_ptr().cast(), len) };
    c.count_unmap(len, false);
}

/// # Safety
/// See [`super::release_pages`].
pub(super) unsafe fn release_pages(ptr: NonNull<u8>, len: usize, c: &OsCounters) {
    // SAFETY: the caller guarantees the range is ours and its contents are dead.
    unsafe { libc::madvise(ptr.as_ptr().cast(), len, libc::MADV_DONTNEED) };
    c.count_release();
}

#[cfg(any(target_os = "linux", target_os = "android"))]
const MADV_POPULATE_WRITE: libc::c_int = 23;

/// # Safety
/// See [`super::prefault`].
pub(super) unsafe fn prefault(ptr: NonNull<u8>, len: usize, c: &OsCounters) {
    c.count_prefault();
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        // SAFETY: populating a read-write range we own does not change its contents.
        let rc = unsafe { libc::madvise(ptr.as_ptr().cast(), len, MADV_POPULATE_WRITE) };
        if rc == 0 {
            return;
        }
    }
    let page = page_size();
    let mut off = 0;
    while off < len {
        // SAFETY: `off < len` keeps the access inside the caller's range; a volatile
        // read-then-write of the same byte keeps its contents.
        unsafe {
            let p = ptr.as_ptr().add(off);
            p.write_volatile(p.read_volatile());
        }
        off += page;
    }
}
