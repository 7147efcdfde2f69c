//! The huge page a block ends in: a buffer at the start of a fresh mapping
//! (a heap segment, a large class's own mapping) whose end falls inside a
//! huge page must not make the rest of that huge page resident. With
//! huge-page advice over the whole mapping, materializing a 15 MiB block
//! made 16 MiB resident (the report's planned and pattern back ends held
//! 1.07x their live peak). Residency is read with `mincore`, 4 KiB page by
//! 4 KiB page: every base page of a resident huge page reads as resident.

use warmarena::{ArenaConfig, ExecutionArena, IoArena};

const MIB: usize = 1 << 20;

/// The kernel's transparent-huge-page mode (`always`, `madvise`, `never`),
/// or `None` where it cannot be read.
fn thp_mode() -> Option<String> {
    let s = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").ok()?;
    let open = s.find('[')?;
    let close = s[open..].find(']')? + open;
    Some(s[open + 1..close].to_string())
}

/// Resident base pages of `[addr, addr + len)` (both page aligned).
fn resident_pages(addr: usize, len: usize) -> usize {
    let page = warmarena::page_size();
    let mut v = vec![0u8; len / page];
    // SAFETY: the range lies inside a live mapping of the arena under test;
    // mincore only reports on it.
    let rc = unsafe { libc::mincore(addr as *mut libc::c_void, len, v.as_mut_ptr()) };
    assert_eq!(rc, 0, "mincore failed");
    v.iter().filter(|&&b| b & 1 == 1).count()
}

/// Skips (with the reason printed) where huge pages cannot be the cause.
fn huge_pages_possible() -> bool {
    match thp_mode().as_deref() {
        Some("always") | Some("madvise") => true,
        other => {
            println!("skipped: transparent huge pages are {other:?} here, so no huge page can be made resident whole");
            false
        }
    }
}

/// Writes every byte of a buffer, then checks that it is resident and that
/// the rest of the huge page its end falls in is not.
fn check_tail(addr: usize, len: usize, what: &str) {
    let page = warmarena::page_size();
    let end = addr + len;
    let huge_end = (end + 2 * MIB - 1) & !(2 * MIB - 1);
    assert!(
        huge_end > end,
        "{what}: the test needs a buffer ending inside a huge page"
    );
    assert_eq!(
        resident_pages(addr, len),
        len / page,
        "{what}: the buffer itself"
    );
    let rest = resident_pages(end, huge_end - end);
    assert_eq!(
        rest, 0,
        "{what}: {rest} pages past the buffer's end are resident (the huge page it ends in was made resident whole)"
    );
}

#[test]
fn an_execution_heap_buffer_leaves_the_rest_of_its_last_huge_page_out() {
    if !huge_pages_possible() {
        return;
    }
    let exec = ExecutionArena::new();
    let len = 15 * MIB;
    let mut a = exec.allocate(len, 64).unwrap();
    a.as_mut_slice().fill(7);
    check_tail(a.as_ptr() as usize, len, "execution heap");
    // Freed and taken again: warm, same address, and still no more resident.
    let addr = a.as_ptr() as usize;
    drop(a);
    let mut b = exec.allocate(len, 64).unwrap();
    assert_eq!(b.as_ptr() as usize, addr);
    b.as_mut_slice().fill(8);
    check_tail(addr, len, "execution heap, warm");
}

#[test]
fn a_large_class_own_mapping_leaves_the_rest_of_its_last_huge_page_out() {
    if !huge_pages_possible() {
        return;
    }
    // Classes from 16 MiB up get a mapping each (I/O arenas; execution
    // arenas place them in the heap).
    let io = IoArena::with_config(ArenaConfig::default());
    let len = 17 * MIB;
    let mut a = io.allocate(len, 64).unwrap();
    assert!(a.capacity() > len);
    a.as_mut_slice().fill(7);
    check_tail(a.as_ptr() as usize, len, "own mapping");
}

/// Bytes khugepaged may collapse over `[lo, hi)`'s mappings, or `None`
/// (reason printed) where that says nothing about the arena: THP's mode is
/// `always` (other memory is eligible too) or smaps cannot be read.
fn collapsible(lo: usize, hi: usize) -> Option<u64> {
    if thp_mode().as_deref() != Some("madvise") {
        println!("collapsible bytes not checked: THP mode {:?}", thp_mode());
        return None;
    }
    Some(warmarena::faults::huge_page_residency(lo..hi)?.collapsible)
}

/// Drops `a`; returns the page releases and the advice calls that made.
fn drop_counting(io: &IoArena, a: warmarena::Allocation) -> (u64, u64) {
    let before = io.stats().os;
    drop(a);
    let after = io.stats().os;
    (
        after.page_releases - before.page_releases,
        after.advice - before.advice,
    )
}

/// A segment block's eviction releases a range that is not on huge-page
/// boundaries: the huge pages it splits are advised off, so khugepaged
/// never collapses the neighbours' pages under a warm run; the segment's
/// whole release advises them on again (docs/design/arena.md, "Split huge
/// pages").
#[test]
fn an_evicted_segment_block_leaves_khugepaged_nothing_to_collapse() {
    if !huge_pages_possible() {
        return;
    }
    // Every free releases its pages at once (no cap); classes from 64 KiB
    // to 16 MiB are carved back to back from a 32 MiB segment.
    let io = IoArena::with_config(ArenaConfig::default().retention_cap(0));
    let mut a = io.allocate(3 * MIB + 512 * 1024, 64).unwrap();
    let mut b = io.allocate(2 * MIB + 256 * 1024, 64).unwrap();
    a.as_mut_slice().fill(1);
    b.as_mut_slice().fill(2);
    let (lo, hi) = (a.as_ptr() as usize, b.as_ptr() as usize + b.capacity());
    assert!(
        (b.as_ptr() as usize) % (2 * MIB) != 0,
        "test premise: b starts inside a huge page, so a's release splits it"
    );
    let (releases, advice) = drop_counting(&io, a);
    assert_eq!(releases, 1, "a's pages went back");
    assert!(advice > 0, "the split pages were advised off");
    if let Some(c) = collapsible(lo, hi) {
        assert_eq!(c, 0, "base pages left for khugepaged beside b");
    }
    assert!(b.as_slice().iter().all(|&x| x == 2));
    let (_, advice) = drop_counting(&io, b);
    assert_eq!(advice, 1, "the idle segment advised on again");
    if let Some(c) = collapsible(lo, hi) {
        assert_eq!(c, 0);
    }
}

/// A small-class run trimmed in a huge-page-advised run region (an arena's
/// second region on) splits the region's huge page: the page is advised
/// off, so khugepaged never collapses it under the region's other runs.
#[test]
fn a_trimmed_small_run_leaves_khugepaged_nothing_to_collapse() {
    if !huge_pages_possible() {
        return;
    }
    const RUN: usize = 256 * 1024;
    let io = IoArena::new();
    // 4 MiB of 4 KiB buffers: the first run region (2 MiB, base pages) and
    // the second (advised).
    let mut bufs: Vec<_> = (0..1024)
        .map(|i| {
            let mut a = io.allocate(4096, 64).unwrap();
            a.as_mut_slice().fill(i as u8);
            a
        })
        .collect();
    let last = bufs.last().unwrap().as_ptr() as usize;
    let (region, run) = (last & !(2 * MIB - 1), last & !(RUN - 1));
    let first = bufs[0].as_ptr() as usize & !(2 * MIB - 1);
    assert_ne!(region, first, "test premise: a second region");
    // Free every buffer of the last one's run, then trim: the run goes back.
    let mut kept = Vec::new();
    for (i, a) in bufs.drain(..).enumerate() {
        if a.as_ptr() as usize & !(RUN - 1) != run {
            kept.push((i, a));
        }
    }
    let before = io.stats().os;
    io.trim();
    let after = io.stats().os;
    assert!(
        after.page_releases > before.page_releases,
        "the run went back"
    );
    assert!(
        after.advice > before.advice,
        "its huge page was advised off"
    );
    if let Some(c) = collapsible(region, region + 2 * MIB) {
        assert_eq!(c, 0, "base pages left for khugepaged beside the run");
    }
    for (i, a) in &kept {
        assert!(a.as_slice().iter().all(|&x| x == *i as u8));
    }
}
