//! The door to the kernel: every `mmap`, `munmap` and `madvise` the crate makes
//! goes through this module, and each one is counted in the [`OsCounters`] of
//! the caller, so tests can assert that a warm run made no system call.
//!
//! What it offers:
//! - [`map`]: fresh anonymous, read-write pages at a requested alignment, with
//!   transparent-huge-page advice on request;
//! - [`unmap`]: give a mapping back;
//! - [`release_pages`]: drop a range's physical pages but keep the address range
//!   (`MADV_DONTNEED`; the next touch gets zero pages);
//! - [`prefault`]: materialize a range now (`MADV_POPULATE_WRITE`, falling back
//!   to writing one byte per page on kernels without it);
//! - [`keep_straddled_page_small`]: base pages for the huge page a fresh
//!   mapping's first buffer ends in (see the function for why);
//! - [`release_pages_in_huge`]: a release inside a huge-page-advised
//!   mapping, which advises off the huge pages it splits, so khugepaged
//!   never collapses them under a warm run (`split.rs`).
//!
//! Under Miri the same functions are served from the Rust heap
//! (`sys_heap.rs`), so the pure logic above this layer runs there unchanged.

mod counters;
pub use counters::{OsCounters, OsStats};

mod split;
pub(crate) use split::{release_pages_in_huge, restore_huge_advice};

#[cfg(not(miri))]
mod sys_linux;
#[cfg(not(miri))]
use sys_linux as sys;

#[cfg(miri)]
mod sys_heap;
#[cfg(miri)]
use sys_heap as sys;

use core::ptr::NonNull;

/// The size of a transparent huge page on x86_64 and most aarch64 kernels.
pub const HUGE_PAGE_SIZE: usize = 2 << 20;

/// Why the OS layer could not hand out memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OsError {
    /// The kernel refused the mapping (`errno` as reported, e.g. `ENOMEM`).
    MapFailed {
        /// Bytes asked for.
        len: usize,
        /// The OS error number.
        errno: i32,
    },
    /// The length or alignment cannot be represented (overflow, or an
    /// alignment that is not a power of two).
    BadLayout,
}

impl core::fmt::Display for OsError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            OsError::MapFailed { len, errno } => {
                write!(f, "the OS refused to map {len} bytes (errno {errno})")
            }
            OsError::BadLayout => write!(f, "length or alignment cannot be mapped"),
        }
    }
}

impl std::error::Error for OsError {}

/// The base page size of this machine, read once.
///
/// ```
/// assert!(warmarena::page_size().is_power_of_two());
/// ```
pub fn page_size() -> usize {
    sys::page_size()
}

/// Rounds `len` up to a whole number of pages; `None` on overflow
/// (`tests::round_to_pages_rounds_up_and_refuses_overflow`).
pub fn round_to_pages(len: usize) -> Option<usize> {
    let p = page_size();
    len.checked_add(p - 1).map(|v| v & !(p - 1))
}

/// How a mapping should be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MapRequest {
    /// Bytes to map; rounded up to whole pages.
    pub len: usize,
    /// Alignment of the first byte; a power of two. Values at or below the
    /// page size cost nothing; larger ones over-map and trim (three calls),
    /// except up to 2 MiB for a length that is a multiple of 2 MiB where
    /// the kernel aligns such mappings itself (Linux 6.7 on: one call).
    pub align: usize,
    /// Ask for transparent huge pages (`MADV_HUGEPAGE`); without it, the
    /// range is on base pages, advised off (`MADV_NOHUGEPAGE`) where the
    /// kernel's THP mode is `always`.
    pub huge_pages: bool,
    /// Materialize every page now (see [`prefault`]).
    pub prefault: bool,
}

/// Maps fresh zeroed pages as described by `req`, counting the calls in
/// `counters` (`tests::map_then_unmap_counts_one_of_each`).
pub fn map(req: MapRequest, counters: &OsCounters) -> Result<NonNull<u8>, OsError> {
    if !req.align.is_power_of_two() {
        return Err(OsError::BadLayout);
    }
    let len = round_to_pages(req.len.max(1)).ok_or(OsError::BadLayout)?;
    let ptr = sys::map(len, req.align.max(page_size()), counters)?;
    if req.huge_pages {
        sys::advise_huge(ptr, len, true, counters);
    } else if sys::thp_always() {
        // A kernel set to `always` would give the range huge pages all the
        // same (and khugepaged would collapse what a partial release
        // splits, `split.rs`): not asked for means base pages.
        sys::advise_huge(ptr, len, false, counters);
    }
    if req.prefault {
        // SAFETY: the range was mapped read-write just above and is owned by us.
        unsafe { prefault(ptr, len, counters) };
    }
    Ok(ptr)
}

/// The huge page a buffer from `base` ends in, when it lies wholly inside
/// `[base, base + len)` and the buffer's end is not on a huge-page boundary:
/// its start. `None` otherwise.
pub(crate) const fn straddled_huge_page(base: usize, len: usize, end: usize) -> Option<usize> {
    let mask = HUGE_PAGE_SIZE - 1;
    if end & mask == 0 || end <= base {
        return None;
    }
    let start = end & !mask;
    match start.checked_add(HUGE_PAGE_SIZE) {
        Some(stop) if start >= base && stop <= base + len => Some(start),
        _ => None,
    }
}

/// Keeps the huge page that the first buffer of a fresh, huge-page-advised
/// mapping ends in on base pages (`MADV_NOHUGEPAGE`, counted as advice):
/// `first_end` is where that buffer ends. Materializing the buffer made
/// that whole huge page resident (16 MiB for a 15 MiB block); on base
/// pages only what is touched is. The advice is given once, when the
/// mapping is made, and never changed: advising a range that already has
/// base pages would let the kernel's khugepaged collapse it while the
/// owner uses it, a page fault in a warm run.
pub(crate) fn keep_straddled_page_small(
    ptr: NonNull<u8>,
    len: usize,
    first_end: usize,
    counters: &OsCounters,
) {
    if let Some(start) = straddled_huge_page(ptr.as_ptr() as usize, len, first_end) {
        // SAFETY: `start` lies inside the mapping at `ptr`, so it is not null.
        let p = unsafe { NonNull::new_unchecked(start as *mut u8) };
        sys::advise_huge(p, HUGE_PAGE_SIZE, false, counters);
    }
}

/// Gives a mapping back to the OS.
///
/// # Safety
/// `ptr` and `len` must describe exactly one mapping made by [`map`] (with the
/// `len` given there), and nothing may use the range afterwards.
pub unsafe fn unmap(ptr: NonNull<u8>, len: usize, counters: &OsCounters) {
    let len = round_to_pages(len.max(1)).unwrap_or(len);
    // SAFETY: forwarded from the caller's contract.
    unsafe { sys::unmap(ptr, len, counters) }
}

/// Drops the physical pages behind a page-aligned range and keeps the
/// addresses: the next touch of each page faults in a zeroed page.
///
/// # Safety
/// The range must lie inside one live mapping made by [`map`], be page
/// aligned, and hold no data anyone still needs.
pub unsafe fn release_pages(ptr: NonNull<u8>, len: usize, counters: &OsCounters) {
    // SAFETY: forwarded from the caller's contract.
    unsafe { sys::release_pages(ptr, len, counters) }
}

/// Materializes every page of the range now, so that later writes take no fault.
///
/// # Safety
/// The range must lie inside one live read-write mapping made by [`map`].
pub unsafe fn prefault(ptr: NonNull<u8>, len: usize, counters: &OsCounters) {
    // SAFETY: forwarded from the caller's contract.
    unsafe { sys::prefault(ptr, len, counters) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_straddled_huge_page_is_the_one_a_buffer_ends_inside() {
        const H: usize = HUGE_PAGE_SIZE;
        // A 15 MiB buffer at the start of a 1 GiB mapping ends inside [14, 16) MiB.
        assert_eq!(
            straddled_huge_page(4 * H, 512 * H, 4 * H + 15 * H / 2),
            Some(11 * H)
        );
        // Ending on a boundary: no partial page.
        assert_eq!(straddled_huge_page(0, 8 * H, 3 * H), None);
        // The page would reach past the mapping (a 15 MiB mapping of its own).
        assert_eq!(straddled_huge_page(0, 15 * H / 2, 15 * H / 2 - 4096), None);
        // A page wholly inside an 18 MiB mapping for a 17 MiB buffer.
        assert_eq!(
            straddled_huge_page(2 * H, 9 * H, 2 * H + 17 * H / 2),
            Some(10 * H)
        );
        // Empty or backwards ranges, and overflow at the top of the address space.
        assert_eq!(straddled_huge_page(5 * H, 4 * H, 5 * H), None);
        assert_eq!(straddled_huge_page(usize::MAX - H, H, usize::MAX - 3), None);
    }

    #[test]
    fn round_to_pages_rounds_up_and_refuses_overflow() {
        let p = page_size();
        assert_eq!(round_to_pages(1), Some(p));
        assert_eq!(round_to_pages(p), Some(p));
        assert_eq!(round_to_pages(usize::MAX), None);
    }

    /// Whether this kernel places an anonymous mapping of `len` bytes (a
    /// multiple of 2 MiB) on a 2 MiB boundary, probed with a raw `mmap`.
    #[cfg(not(miri))]
    fn kernel_aligns(len: usize) -> bool {
        let p = sys::map_anywhere(len).expect("a probe mapping");
        // SAFETY: the mapping just made, used for nothing.
        unsafe { libc::munmap(p as *mut libc::c_void, len) };
        p % HUGE_PAGE_SIZE == 0
    }

    #[test]
    #[cfg(not(miri))]
    fn a_huge_page_aligned_mapping_takes_one_call_where_the_kernel_aligns() {
        let c = OsCounters::new();
        let len = 3 * HUGE_PAGE_SIZE;
        let req = MapRequest {
            len,
            align: HUGE_PAGE_SIZE,
            huge_pages: false,
            prefault: false,
        };
        let aligns = kernel_aligns(len);
        let p = map(req, &c).unwrap();
        assert_eq!(p.as_ptr() as usize % HUGE_PAGE_SIZE, 0);
        let s = c.snapshot();
        if aligns {
            assert_eq!(
                (s.maps, s.unmaps),
                (1, 0),
                "the exact length came back aligned"
            );
            assert!(sys::exact_may_align());
        } else {
            println!("this kernel does not align 2 MiB-multiple mappings: over-mapping checked");
            // At most: the exact try and its unmap, the over-map and its two trims.
            assert!(s.maps <= 2 && s.unmaps <= 3, "{s:?}");
            assert!(!sys::exact_may_align());
        }
        assert_eq!(s.mapped_bytes, len as u64);
        // SAFETY: `p` was just mapped with this length and is not used afterwards.
        unsafe { unmap(p, len, &c) };
        // A length off the 2 MiB grid over-maps and trims, aligned all the same.
        let c = OsCounters::new();
        let req = MapRequest {
            len: HUGE_PAGE_SIZE + 4096,
            ..req
        };
        let p = map(req, &c).unwrap();
        assert_eq!(p.as_ptr() as usize % HUGE_PAGE_SIZE, 0);
        assert_eq!(c.snapshot().maps, 1);
        assert_eq!(c.snapshot().mapped_bytes, (HUGE_PAGE_SIZE + 4096) as u64);
        // SAFETY: as above.
        unsafe { unmap(p, HUGE_PAGE_SIZE + 4096, &c) };
    }

    #[test]
    fn map_then_unmap_counts_one_of_each() {
        let c = OsCounters::new();
        let req = MapRequest {
            len: 8192,
            align: 4096,
            huge_pages: false,
            prefault: false,
        };
        let p = map(req, &c).unwrap();
        // SAFETY: `p` was just mapped with this length and is not used afterwards.
        unsafe { unmap(p, 8192, &c) };
        let s = c.snapshot();
        assert_eq!((s.maps, s.unmaps), (1, 1));
        assert_eq!(OsCounters::new().snapshot().syscalls(), 0);
    }
}
