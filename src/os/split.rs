//! Releasing part of a mapping advised for transparent huge pages.
//!
//! `MADV_DONTNEED` over part of a huge page splits it: the pages it leaves
//! are base pages in a range still advised for huge pages, which is what
//! khugepaged looks for. Some seconds later, whenever its scan comes by,
//! it collapses them back into a huge page, copying them while the
//! arena's owner may be writing them: a page fault in a warm run the arena
//! did not ask for, and a stall for the copy. The replay test saw it once
//! in a CI run with khugepaged's defaults, and on five traces a run with
//! its `scan_sleep_millisecs` at 10.
//!
//! So a release that covers a huge page only in part first advises that
//! page off (`MADV_NOHUGEPAGE`, counted as advice): it stays on base pages,
//! which khugepaged leaves alone. The huge pages a release covers whole go
//! back whole and keep their advice. A range whose pages have all gone
//! back may be advised for huge pages again ([`restore_huge_advice`]):
//! nothing in it is left for khugepaged to collapse.

use super::{sys, OsCounters, HUGE_PAGE_SIZE};
use core::ops::Range;
use core::ptr::NonNull;

/// The huge pages that `[start, end)` covers only in part, among those
/// wholly inside `within` (the mapping: a huge page reaching past it is
/// never one): at most two ranges, one where they are the same page or
/// neighbours. Pure arithmetic, for Miri too.
pub(crate) fn partly_covered(
    start: usize,
    end: usize,
    within: &Range<usize>,
) -> [Option<Range<usize>>; 2] {
    const MASK: usize = HUGE_PAGE_SIZE - 1;
    if start >= end {
        return [None, None];
    }
    let inside = |p: &usize| {
        *p >= within.start
            && p.checked_add(HUGE_PAGE_SIZE)
                .is_some_and(|e| e <= within.end)
    };
    let head = (start & MASK != 0).then_some(start & !MASK).filter(inside);
    let tail = (end & MASK != 0).then_some(end & !MASK).filter(inside);
    let page = |p: usize| p..p + HUGE_PAGE_SIZE;
    match (head, tail) {
        (Some(h), Some(t)) if t <= h + HUGE_PAGE_SIZE => [Some(h..t + HUGE_PAGE_SIZE), None],
        (h, t) => [h.map(page), t.map(page)],
    }
}

/// [`release_pages`](super::release_pages) for a range of a mapping
/// advised for huge pages, `within` being that mapping (or the part of it
/// known to be advised): the huge pages the range covers only in part are
/// advised off first (see the module). Returns whether any was.
///
/// # Safety
/// As for [`release_pages`](super::release_pages); `within` lies inside
/// the same live mapping.
pub(crate) unsafe fn release_pages_in_huge(
    ptr: NonNull<u8>,
    len: usize,
    within: Range<usize>,
    counters: &OsCounters,
) -> bool {
    let start = ptr.as_ptr() as usize;
    let mut advised = false;
    for r in partly_covered(start, start.saturating_add(len), &within)
        .into_iter()
        .flatten()
    {
        if let Some(p) = NonNull::new(r.start as *mut u8) {
            sys::advise_huge(p, r.len(), false, counters);
            advised = true;
        }
    }
    // SAFETY: forwarded from the caller's contract.
    unsafe { sys::release_pages(ptr, len, counters) };
    advised
}

/// Advises `[ptr, ptr + len)` for huge pages again after every page of it
/// went back (a whole-range release): no base page is left in it for
/// khugepaged, so the next touches fault in huge pages again.
pub(crate) fn restore_huge_advice(ptr: NonNull<u8>, len: usize, counters: &OsCounters) {
    sys::advise_huge(ptr, len, true, counters);
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: usize = HUGE_PAGE_SIZE;

    #[test]
    fn only_the_huge_pages_a_release_covers_in_part_are_named() {
        let m = 0..8 * H;
        // Whole huge pages: none.
        assert_eq!(partly_covered(2 * H, 5 * H, &m), [None, None]);
        // Inside one page: that page, once.
        assert_eq!(
            partly_covered(H + 4096, H + 8192, &m),
            [Some(H..2 * H), None]
        );
        // Across one boundary: both neighbours, as one range.
        assert_eq!(
            partly_covered(H + 4096, 2 * H + 4096, &m),
            [Some(H..3 * H), None]
        );
        // Head and tail apart: two ranges, the whole pages between left out.
        assert_eq!(
            partly_covered(H + 4096, 4 * H + 4096, &m),
            [Some(H..2 * H), Some(4 * H..5 * H)]
        );
        // From an aligned start to a ragged end: the tail page only.
        assert_eq!(
            partly_covered(2 * H, 3 * H + 4096, &m),
            [None, Some(3 * H..4 * H)]
        );
        // Nothing to release: nothing named.
        assert_eq!(partly_covered(H + 4096, H + 4096, &m), [None, None]);
    }

    #[test]
    fn a_huge_page_reaching_past_the_mapping_is_never_named() {
        // A mapping of 2.5 huge pages from a boundary: its last half page
        // can never be a huge page, nor can a page before its start.
        let m = 2 * H..4 * H + H / 2;
        assert_eq!(partly_covered(4 * H + 4096, 4 * H + 8192, &m), [None, None]);
        assert_eq!(
            partly_covered(3 * H + 4096, 4 * H + 4096, &m),
            [Some(3 * H..4 * H), None]
        );
        let m = 2 * H + 4096..6 * H;
        assert_eq!(
            partly_covered(2 * H + 8192, 3 * H + 4096, &m),
            [None, Some(3 * H..4 * H)]
        );
        // At the top of the address space: no overflow.
        let top = usize::MAX & !(H - 1);
        assert_eq!(
            partly_covered(top + 4096, top + 8192, &(top..usize::MAX)),
            [None, None]
        );
    }

    /// Four huge pages, advised for huge pages and touched, in a mapping of
    /// their own (inaccessible pages on both sides keep the kernel from
    /// merging it with a neighbour). `None` where they did not all come as
    /// huge pages (THP off, or the kernel had none to give), with the
    /// reason printed. Dropped, the guard unmaps the whole mapping.
    #[cfg(all(not(miri), target_os = "linux"))]
    fn four_touched_huge_pages(c: &OsCounters) -> Option<(NonNull<u8>, Unmapped)> {
        let outer = 6 * H;
        // SAFETY: a fresh private anonymous mapping; no existing memory is
        // touched.
        let raw = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                outer,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(raw, libc::MAP_FAILED);
        let guard = Unmapped(raw as usize, outer);
        let start = (raw as usize).next_multiple_of(H);
        let p = NonNull::new(start as *mut u8)?;
        // SAFETY: [start, start + 4H) lies inside the mapping just made
        // (6H long, so an aligned 4H fits with room on both sides).
        assert_eq!(
            unsafe { libc::mprotect(p.as_ptr().cast(), 4 * H, libc::PROT_READ | libc::PROT_WRITE) },
            0
        );
        sys::advise_huge(p, 4 * H, true, c);
        // SAFETY: just made read-write, ours alone.
        unsafe { p.as_ptr().write_bytes(1, 4 * H) };
        let (_, huge) = resident(start..start + 4 * H);
        if huge != 4 * H {
            println!(
                "skipped: 4 huge pages touched, {huge} bytes of them huge-mapped (THP off or none free)"
            );
            return None;
        }
        Some((p, guard))
    }

    /// A test mapping (address, length), unmapped when dropped.
    #[cfg(all(not(miri), target_os = "linux"))]
    struct Unmapped(usize, usize);

    #[cfg(all(not(miri), target_os = "linux"))]
    impl Drop for Unmapped {
        fn drop(&mut self) {
            // SAFETY: a mapping the test made and uses no more.
            unsafe { libc::munmap(self.0 as *mut libc::c_void, self.1) };
        }
    }

    /// The bytes of the mappings overlapping `r` that khugepaged may
    /// collapse, and those on huge pages.
    #[cfg(all(not(miri), target_os = "linux"))]
    fn resident(r: Range<usize>) -> (usize, usize) {
        let got = crate::faults::huge_page_residency(r).expect("/proc/self/smaps");
        (got.collapsible as usize, got.huge as usize)
    }

    #[test]
    #[cfg(all(not(miri), target_os = "linux"))]
    fn a_mapping_not_advised_for_huge_pages_stays_on_base_pages() {
        let mode = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .unwrap_or_default();
        assert_eq!(sys::thp_always(), mode.starts_with("[always]"), "{mode}");
        let c = OsCounters::new();
        let req = super::super::MapRequest {
            len: 4 * H,
            align: H,
            huge_pages: false,
            prefault: false,
        };
        let p = super::super::map(req, &c).unwrap();
        // SAFETY: just mapped read-write, 4H long, ours alone.
        unsafe { p.as_ptr().write_bytes(1, 4 * H) };
        let r = p.as_ptr() as usize..p.as_ptr() as usize + 4 * H;
        // With `always`, only the advice keeps these off huge pages (and
        // out of khugepaged's reach once a release splits one).
        assert_eq!(resident(r), (0, 0), "THP mode {mode}");
        assert_eq!(c.snapshot().advice, u64::from(sys::thp_always()));
        // SAFETY: mapped above with this length; not used afterwards.
        unsafe { super::super::unmap(p, 4 * H, &c) };
    }

    #[test]
    #[cfg(all(not(miri), target_os = "linux"))]
    fn a_release_leaves_khugepaged_nothing_to_collapse() {
        let c = OsCounters::new();
        // The plain release: the two huge pages it covers in part are split
        // and stay eligible, base pages khugepaged would collapse.
        let Some((p, _first)) = four_touched_huge_pages(&c) else {
            return;
        };
        let (start, len) = (p.as_ptr() as usize + H + 4096, 2 * H);
        // SAFETY: inside the four pages, whose contents nobody needs.
        unsafe { sys::release_pages(NonNull::new(start as *mut u8).unwrap(), len, &c) };
        let r = p.as_ptr() as usize..p.as_ptr() as usize + 4 * H;
        let (collapsible, huge) = resident(r.clone());
        // [H + 4 KiB, 3H + 4 KiB): the page at H keeps 4 KiB, the one at 3H
        // keeps all but 4 KiB, the one at 2H goes back whole.
        assert_eq!(collapsible, H, "the split pages' base pages are eligible");
        assert_eq!(huge, H, "the first page is untouched");
        // This module's release: the same pages go back, and the two split
        // ones are advised off.
        let Some((p, _second)) = four_touched_huge_pages(&c) else {
            return;
        };
        let r = p.as_ptr() as usize..p.as_ptr() as usize + 4 * H;
        let start = r.start + H + 4096;
        let before = c.snapshot();
        // SAFETY: as above.
        let advised = unsafe {
            release_pages_in_huge(NonNull::new(start as *mut u8).unwrap(), len, r.clone(), &c)
        };
        assert!(advised);
        let after = c.snapshot();
        assert_eq!(after.advice - before.advice, 2, "the split pages are apart");
        assert_eq!(after.page_releases - before.page_releases, 1);
        let (collapsible, huge) = resident(r.clone());
        assert_eq!(collapsible, 0, "nothing for khugepaged");
        assert_eq!(huge, H, "the first page stays huge");
        // A whole release, then the advice back: nothing resident anywhere.
        // SAFETY: as above.
        unsafe { sys::release_pages(p, 4 * H, &c) };
        restore_huge_advice(p, 4 * H, &c);
        assert_eq!(resident(r), (0, 0));
    }
}
