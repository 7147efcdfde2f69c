//! The real system calls (Linux and other Unix kernels with `mmap`).

use super::{OsCounters, OsError};
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering::Relaxed};

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

/// Whether the kernel gives every anonymous mapping huge pages unless it
/// is advised off: `/sys/kernel/mm/transparent_hugepage/enabled` reads
/// `[always]`. Read once, with raw calls (the first map may run under an
/// arena's lock, where the Rust heap may be this crate's own).
pub(super) fn thp_always() -> bool {
    // 0: not read yet; 1: no; 2: yes.
    static MODE: AtomicU8 = AtomicU8::new(0);
    match MODE.load(Relaxed) {
        1 => false,
        2 => true,
        _ => {
            let always = read_thp_always();
            MODE.store(if always { 2 } else { 1 }, Relaxed);
            always
        }
    }
}

fn read_thp_always() -> bool {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        let path = c"/sys/kernel/mm/transparent_hugepage/enabled";
        // SAFETY: a NUL-terminated path; the descriptor is closed below.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            return false;
        }
        let mut buf = [0u8; 64];
        // SAFETY: `buf` is writable for its whole length; `fd` is open.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        // SAFETY: `fd` was opened above and is closed once.
        unsafe { libc::close(fd) };
        let n = usize::try_from(n).unwrap_or(0).min(buf.len());
        buf[..n].starts_with(b"[always]")
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    false
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Whether an exact-length mapping may still come back aligned (below).
/// Cleared the first time one does not: the kernel does not align them, and
/// every later aligned mapping over-maps at once.
static EXACT_MAY_ALIGN: AtomicBool = AtomicBool::new(true);

/// The alignment the kernel gives an anonymous mapping whose length is a
/// multiple of it (Linux 6.7 and later, with transparent huge pages built
/// in: the PMD size, 2 MiB on x86_64).
const KERNEL_ALIGN: usize = super::HUGE_PAGE_SIZE;

/// One anonymous private read-write mapping of `len` bytes wherever the
/// kernel puts it; `None` (errno kept) when it refuses.
pub(super) fn map_anywhere(len: usize) -> Option<usize> {
    // SAFETY: an anonymous private mapping with a null hint touches no existing memory.
    let raw = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    (raw != libc::MAP_FAILED).then_some(raw as usize)
}

/// Maps `len` bytes (a page multiple) at `align` (a power of two ≥ the page size).
///
/// Up to 2 MiB, with `len` a multiple of 2 MiB, the exact length is tried
/// first: kernels from 6.7 place such mappings on a 2 MiB boundary, so one
/// call suffices. Otherwise (or when that came back unaligned, which turns
/// the try off for the process) `align - page` bytes more are mapped and
/// the unaligned head and tail unmapped: three calls.
pub(super) fn map(len: usize, align: usize, c: &OsCounters) -> Result<NonNull<u8>, OsError> {
    let page = page_size();
    if align > page
        && align <= KERNEL_ALIGN
        && len % KERNEL_ALIGN == 0
        && EXACT_MAY_ALIGN.load(Relaxed)
    {
        let base = map_anywhere(len).ok_or_else(|| OsError::MapFailed {
            len,
            errno: errno(),
        })?;
        if base % align == 0 {
            c.count_map(len);
            // SAFETY: mmap succeeded, so `base` is non-null.
            return Ok(unsafe { NonNull::new_unchecked(base as *mut u8) });
        }
        EXACT_MAY_ALIGN.store(false, Relaxed);
        c.count_map(0);
        // SAFETY: [base, base+len) is the mapping just made, unused.
        unsafe { libc::munmap(base as *mut libc::c_void, len) };
        c.count_unmap(len, true);
    }
    let over = if align > page {
        len.checked_add(align - page).ok_or(OsError::BadLayout)?
    } else {
        len
    };
    let base = map_anywhere(over).ok_or_else(|| OsError::MapFailed {
        len,
        errno: errno(),
    })?;
    let start = (base + align - 1) & !(align - 1);
    let head = start - base;
    let tail = over - head - len;
    if head > 0 {
        // SAFETY: [base, base+head) is the unused front of the mapping made above.
        unsafe { libc::munmap(base as *mut libc::c_void, head) };
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

/// Whether aligned mappings still try the exact length first (tests).
#[cfg(test)]
pub(super) fn exact_may_align() -> bool {
    EXACT_MAY_ALIGN.load(Relaxed)
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
