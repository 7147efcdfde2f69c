//! Which arena owns an address: a lock-free, two-level radix map from 64 KiB
//! granules of the address space to the arena body that mapped them.
//!
//! The scoped global allocator (`crate::global`) must send every
//! `dealloc`/`realloc` to the owner of the pointer, whatever scope the freeing
//! thread is in, and it must decide in a few nanoseconds, because every free
//! of system memory asks too. A lookup is two atomic loads: the leaf for the
//! pointer's 4 GiB region, then the granule's entry in it.
//!
//! What is registered: only granules that lie *wholly* inside one arena
//! mapping. Every buffer an arena serves starts in such a granule (runs are
//! 64 KiB-aligned and 256 KiB long; every other mapping starts 64 KiB-aligned),
//! and no memory of anyone else can lie in such a granule, so a lookup never
//! mistakes a system pointer for arena memory. The partial granule at the end
//! of, say, a 72 KiB mapping stays unregistered: no buffer starts there, and
//! the kernel may place someone else's mapping in its other half.
//!
//! Ordering: an arena registers a mapping (release stores) before it hands out
//! any buffer of it, and unregisters it before it unmaps it, so any thread
//! that legitimately holds a pointer sees its owner, and a granule is clear
//! before the kernel can reuse its addresses for another allocator.
//!
//! Leaves (2^16 entries, 512 KiB of address space each, touched only where
//! used) are mapped through [`crate::os`] on first use, counted in
//! [`table_os_stats`], and never freed: they must stay readable by lock-free
//! readers forever. A failed leaf mapping only means the range stays
//! unregistered; the global allocator checks ownership of every buffer it
//! hands out and falls back to the system allocator when the check fails.

use crate::os::{self, MapRequest, OsCounters, OsStats};
use crate::sync::atomic::{AtomicPtr, Ordering};
use core::cell::UnsafeCell;
use core::ptr::{null_mut, NonNull};

/// log2 of the granule: 64 KiB, the smallest alignment of any arena mapping.
pub const GRANULE_BITS: u32 = 16;
/// The granule of the map: 64 KiB.
pub const GRANULE: usize = 1 << GRANULE_BITS;
const LEAF_BITS: u32 = 16;
const LEAF_LEN: usize = 1 << LEAF_BITS;
/// Addresses are covered up to 2^48 (user space on x86_64 and aarch64 with
/// four-level page tables).
const TOP_BITS: u32 = 48 - GRANULE_BITS - LEAF_BITS;
const TOP_LEN: usize = 1 << TOP_BITS;

/// One 4 GiB region's entries: the owner of each granule, or null.
type Leaf = [AtomicPtr<()>; LEAF_LEN];

/// The top level: 2^16 leaf pointers (512 KiB of zeroed static memory; only
/// the pages for regions in use are ever touched), each used only through
/// atomic operations ([`top_slot`]).
///
/// One `UnsafeCell` around plain pointers rather than an array of atomics:
/// the two have the same layout, but every use of a static borrows all of
/// it, and Miri's borrow tracker walks an array of atomics cell by cell at
/// each borrow (65 536 of them: about 70 ms per table look-up under Miri,
/// most of the Miri suite's time), where one cell is one step.
struct TopTable(UnsafeCell<[*mut Leaf; TOP_LEN]>);

// SAFETY: the pointers are read and written only as atomics (`top_slot`).
unsafe impl Sync for TopTable {}

static TOP: TopTable = TopTable(UnsafeCell::new([null_mut(); TOP_LEN]));

/// The system calls made for leaves.
static TABLE_OS: OsCounters = OsCounters::new();

/// An owner as the table stores it: the arena body's original pointer, kept
/// with its provenance so it can be turned back into the body's pointer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Owner(pub(crate) *mut ());

impl Owner {
    pub(crate) const NONE: Owner = Owner(null_mut());

    /// This owner with small class `class` in its low bits: the entry of a
    /// run's granules, so a free finds the buffer's class with its arena.
    /// Arena bodies are 128-byte aligned, and small classes are fewer.
    pub(crate) fn tagged(self, class: usize) -> Owner {
        debug_assert!(class < TAG_MASK);
        Owner(self.0.cast::<u8>().wrapping_add(class + 1).cast())
    }

    /// Whether this entry is that of `owner`'s runs of small class
    /// `class`: one comparison with a value computed without a load.
    #[inline(always)]
    pub(crate) fn is_run_of(self, owner: Owner, class: usize) -> bool {
        self == owner.tagged(class)
    }

    /// This entry's small class when it is `owner`'s run's entry (see
    /// [`small_class_owned_by`]); `None` otherwise.
    #[inline(always)]
    pub(crate) fn small_class_for(self, owner: Owner) -> Option<usize> {
        let t = (self.0 as usize).wrapping_sub(owner.0 as usize);
        (t.wrapping_sub(1) < TAG_MASK).then(|| t - 1)
    }

    /// The owner without its tag, and the class the tag names.
    #[inline(always)]
    fn untag(self) -> (Owner, Option<usize>) {
        let t = self.0 as usize & TAG_MASK;
        let o = Owner(self.0.cast::<u8>().wrapping_sub(t).cast());
        (o, t.checked_sub(1))
    }
}

/// The low bits of an entry that carry a run's class (plus one; zero: no class).
const TAG_MASK: usize = 127;

// SAFETY: an `Owner` is an identity (an address with provenance); it is only
// dereferenced by code that proves the body alive by other means.
unsafe impl Send for Owner {}
// SAFETY: as above.
unsafe impl Sync for Owner {}

/// The system calls the table made for its leaves so far.
///
/// ```
/// let s = warmarena::arena::owner_table_os_stats();
/// // Leaves are unmapped only when a racing thread installed one first.
/// assert!(s.unmaps <= s.maps);
/// ```
pub fn table_os_stats() -> OsStats {
    TABLE_OS.snapshot()
}

/// Entry `top` of the top level, as the atomic it is always used as.
#[inline(always)]
fn top_slot(top: usize) -> &'static AtomicPtr<Leaf> {
    debug_assert!(top < TOP_LEN);
    // SAFETY: `top < TOP_LEN` (every caller's index comes from `split`), so
    // the pointer is to an aligned `*mut Leaf` inside the static, which
    // lives forever; every access to the entries is atomic (this function
    // is the only way to them), as `AtomicPtr::from_ptr` requires.
    unsafe { AtomicPtr::from_ptr(TOP.0.get().cast::<*mut Leaf>().add(top)) }
}

fn split(addr: usize) -> Option<(usize, usize)> {
    let g = addr >> GRANULE_BITS;
    let top = g >> LEAF_BITS;
    (top < TOP_LEN).then_some((top, g & (LEAF_LEN - 1)))
}

/// The owner of the granule holding `addr`, or null. Two acquire loads.
#[inline]
pub(crate) fn lookup(addr: usize) -> Owner {
    lookup_small(addr).0
}

/// The owner of the granule holding `addr` (or null) and, when the granule
/// is part of a small-class run, the run's class.
#[inline]
pub(crate) fn lookup_small(addr: usize) -> (Owner, Option<usize>) {
    lookup_tagged(addr).untag()
}

/// The small class of the run holding `addr` when `owner` (an arena body)
/// owns that run; `None` for anything else (another owner, no owner, a
/// granule that is not a run's). One subtraction and one comparison decide
/// it all: an entry is a body's address plus its tag (class plus one, below
/// [`TAG_MASK`] plus one), bodies are 128-byte aligned and distinct, so the
/// entry less `owner` lies in `1..=TAG_MASK` only for `owner`'s own runs.
#[inline(always)]
pub(crate) fn small_class_owned_by(addr: usize, owner: Owner) -> Option<usize> {
    lookup_tagged(addr).small_class_for(owner)
}

/// The entry of the granule holding `addr` as stored: its owner (or null)
/// with a run's tag in the low bits. [`Owner::small_class_for`] reads it.
#[inline(always)]
pub(crate) fn lookup_tagged(addr: usize) -> Owner {
    let Some((top, i)) = split(addr) else {
        return Owner::NONE;
    };
    match installed_entry(top, i) {
        Some(e) => Owner(e.load(Ordering::Acquire)),
        None => Owner::NONE,
    }
}

/// Entry `i` (`< LEAF_LEN`, from `split`) of `leaf`, a top-level entry's
/// value; `None` when no leaf is installed there. Only the entry is
/// borrowed, never the whole leaf (a reference to it makes Miri's borrow
/// tracker walk its 65 536 atomics at each call, as for [`TOP`]).
#[inline(always)]
fn leaf_entry(leaf: *mut Leaf, i: usize) -> Option<&'static AtomicPtr<()>> {
    if leaf.is_null() {
        return None;
    }
    // SAFETY: a non-null top-level entry is an installed leaf, never freed
    // or moved, mapped zeroed (a valid all-null array of atomics) before
    // its release-store; `i < LEAF_LEN`, so the place is inside it.
    Some(unsafe { &(*leaf)[i] })
}

/// Entry `i` of the leaf for region `top`, if that leaf is installed.
#[inline(always)]
fn installed_entry(top: usize, i: usize) -> Option<&'static AtomicPtr<()>> {
    leaf_entry(top_slot(top).load(Ordering::Acquire), i)
}

/// Entry `i` of the leaf for region `top`, mapping the leaf on first use;
/// `None` if the OS refused.
fn entry(top: usize, i: usize) -> Option<&'static AtomicPtr<()>> {
    let leaf = top_slot(top).load(Ordering::Acquire);
    let leaf = if leaf.is_null() { map_leaf(top)? } else { leaf };
    leaf_entry(leaf, i)
}

/// Maps and installs the leaf for region `top` (or finds the one another
/// thread installed first).
#[cold]
fn map_leaf(top: usize) -> Option<*mut Leaf> {
    let req = MapRequest {
        len: core::mem::size_of::<Leaf>(),
        align: os::page_size(),
        huge_pages: false,
        prefault: false,
    };
    // Zeroed pages are a valid leaf (all null atomics).
    let fresh = os::map(req, &TABLE_OS).ok()?.cast::<Leaf>();
    match top_slot(top).compare_exchange(
        null_mut(),
        fresh.as_ptr(),
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        Ok(_) => Some(fresh.as_ptr()),
        Err(other) => {
            // SAFETY: our mapping lost the race and was never published.
            unsafe { os::unmap(fresh.cast(), req.len, &TABLE_OS) };
            Some(other)
        }
    }
}

/// The granules wholly inside `[base, base + len)`.
fn whole_granules(base: usize, len: usize) -> core::ops::Range<usize> {
    let first = base.div_ceil(GRANULE);
    let end = base.saturating_add(len) / GRANULE;
    first..end.max(first)
}

/// Registers `owner` for every granule wholly inside the mapping
/// `[base, base + len)`. Returns `false` when some granule could not be
/// registered (address out of range, or no memory for a leaf); those
/// granules stay unowned and the rest are registered.
pub(crate) fn register(base: usize, len: usize, owner: Owner) -> bool {
    let mut all = true;
    for g in whole_granules(base, len) {
        let ok = split(g << GRANULE_BITS)
            .and_then(|(top, i)| entry(top, i))
            .map(|e| e.store(owner.0, Ordering::Release))
            .is_some();
        all &= ok;
    }
    all
}

/// Clears the granules of `[base, base + len)` that `owner` holds. Call
/// before the mapping is unmapped.
pub(crate) fn unregister(base: usize, len: usize, owner: Owner) {
    for g in whole_granules(base, len) {
        let Some(e) = split(g << GRANULE_BITS).and_then(|(top, i)| installed_entry(top, i)) else {
            continue;
        };
        let cur = e.load(Ordering::Relaxed);
        if Owner(cur).untag().0 == owner {
            let _ = e.compare_exchange(cur, null_mut(), Ordering::Release, Ordering::Relaxed);
        }
    }
}

/// Whether `owner` holds the granule of `ptr` (the check the global
/// allocator makes before it hands a buffer out).
#[inline]
pub(crate) fn owned_by(ptr: NonNull<u8>, owner: Owner) -> bool {
    lookup(ptr.as_ptr() as usize) == owner
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_granules_only() {
        assert_eq!(whole_granules(0x10000, 0x12000), 1..2);
        assert_eq!(whole_granules(0x10000, 0x40000), 1..5);
        assert_eq!(whole_granules(0x11000, 0x10000), 2..2);
        assert_eq!(whole_granules(0x11000, 0x30000), 2..4);
    }

    #[test]
    fn register_lookup_unregister() {
        // A real mapping, so no one else can own these granules meanwhile.
        let c = OsCounters::new();
        let req = MapRequest {
            len: 4 * GRANULE,
            align: GRANULE,
            huge_pages: false,
            prefault: false,
        };
        let p = os::map(req, &c).unwrap();
        let base = p.as_ptr() as usize;
        // Owners are 128-byte aligned (arena bodies), like this stand-in.
        #[repr(align(128))]
        struct Body(#[allow(dead_code)] u8);
        let mut body = Body(0);
        let me = Owner((&mut body as *mut Body).cast());
        assert!(register(base, 3 * GRANULE + 100, me));
        assert_eq!(lookup(base), me);
        assert_eq!(lookup(base + 3 * GRANULE - 1), me);
        assert_eq!(lookup(base + 3 * GRANULE), Owner::NONE, "partial granule");
        assert!(owned_by(p, me));
        // Unregistering for another owner changes nothing.
        unregister(base, 3 * GRANULE, Owner::NONE);
        assert_eq!(lookup(base + GRANULE), me);
        // A run's granules carry its class; unregistering clears them too.
        assert!(register(base + GRANULE, GRANULE, me.tagged(79)));
        assert_eq!(lookup_small(base + GRANULE + 5), (me, Some(79)));
        assert_eq!(lookup_small(base), (me, None));
        assert_eq!(small_class_owned_by(base + GRANULE + 5, me), Some(79));
        assert_eq!(small_class_owned_by(base, me), None, "untagged");
        for other in [
            Owner::NONE,
            Owner(me.0.wrapping_byte_add(128)),
            Owner(me.0.wrapping_byte_sub(128)),
        ] {
            assert_eq!(small_class_owned_by(base + GRANULE + 5, other), None);
        }
        assert_eq!(lookup(base + GRANULE), me);
        unregister(base, 3 * GRANULE, me);
        assert_eq!(lookup(base), Owner::NONE);
        assert_eq!(lookup_small(base + GRANULE), (Owner::NONE, None));
        assert_eq!(lookup(usize::MAX), Owner::NONE);
        // SAFETY: mapped above with this length, unused from here on.
        unsafe { os::unmap(p, req.len, &c) };
    }

    #[test]
    fn system_memory_is_never_owned_while_arenas_map_and_unmap() {
        use crate::ExecutionArena;
        // Under Miri (a few seconds since the top level is one cell, not
        // 65 536 atomics: see `TopTable`) fewer rounds; the table's
        // concurrency is also modelled by loom (owners_loom.rs).
        let rounds = if cfg!(miri) { 8 } else { 300 };
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                // Arena mappings of odd lengths (72 KiB, 80 KiB, ...) come and
                // go, leaving partial granules the kernel may hand to malloc.
                for r in 0..rounds {
                    let arena =
                        ExecutionArena::with_config(crate::ArenaConfig::default().retention_cap(0));
                    let a = arena.allocate((64 << 10) + (r % 8 + 1) * (8 << 10), 64);
                    let b = arena.allocate(100, 16);
                    drop((a, b));
                }
                stop.store(true, Ordering::Relaxed);
            });
            s.spawn(|| {
                let mut k = 0usize;
                while !stop.load(Ordering::Relaxed) || k < 8 {
                    // Under Miri, small vectors: initializing ~100 KiB a
                    // turn while the other thread maps made this test run
                    // for many minutes there (Miri checks the table's memory
                    // safety; the addresses mean nothing under it).
                    let size = if cfg!(miri) {
                        64 + (k % 8) * 64
                    } else {
                        1000 + (k % 64) * 3000
                    };
                    let v = vec![1u8; size];
                    assert_eq!(lookup(v.as_ptr() as usize), Owner::NONE);
                    k += 1;
                }
            });
        });
    }
}
