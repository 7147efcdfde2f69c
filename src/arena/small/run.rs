//! One run: `RUN_LEN` bytes of one small class, cut into slots from a
//! `RUN_LEN`-aligned base, and its header. Headers live at the start of
//! the run's region (a region is `RUN_REGION_LEN`-aligned), one line each,
//! so a free finds its run's header from the address alone; the region's
//! first run starts its slots after the headers, at a multiple of the
//! capacity, so every slot keeps the alignment its capacity gives.
//!
//! A run has one owner at a time: a thread heap (`heap.rs`) or the arena
//! (its lock holder; `pool.rs`). The owner alone touches the plain fields.
//! Other threads touch only [`Run::thread_free`] (and read [`Run::owner`]):
//! - a free on a thread that does not own the run pushes the slot there
//!   with one compare-exchange (its link in the slot's first word);
//! - the owner takes the whole list with one swap when its free list runs
//!   dry ([`Run::collect`]);
//! - while the arena owns the run the word holds [`ABANDONED`], so a push
//!   fails and the freeing thread frees under the arena's lock instead.
//!
//! Slots never handed out are not on the free list: they are taken in
//! address order from [`Run::fresh`] up, so a run's untouched pages are
//! never written, and a slot from there is a cold allocation.

use crate::sync::rc::{AtomicUsize, Ordering};
use core::cell::Cell;
use core::ptr::null_mut;

use super::super::{RUN_LEN, RUN_REGION_LEN};

/// [`Run::thread_free`]'s mark while the arena owns the run.
pub(crate) const ABANDONED: usize = 1;

/// The bytes a region keeps for its runs' headers.
pub(crate) const HEADERS_LEN: usize = (RUN_REGION_LEN / RUN_LEN) * core::mem::size_of::<Run>();

/// A run's header.
#[repr(C, align(64))]
pub(crate) struct Run {
    /// Slots freed by threads that do not own the run, or [`ABANDONED`].
    pub(crate) thread_free: AtomicUsize,
    /// The owning heap's address, 0 while the arena owns the run. Written
    /// by the owner (giving the run up) or under the arena's lock (taking
    /// it); any thread reads it to learn whether the run is its own.
    pub(crate) owner: AtomicUsize,
    // The owner's alone (cells: the owner reaches the header through a
    // shared reference, never `&mut Run`, since other threads may touch
    // the atomics above at any time).
    /// The owner's free list: slots linked through their first word.
    pub(crate) free: Cell<usize>,
    /// The first slot never handed out since the run's pages were last
    /// released; slots from here to the run's end are untouched.
    pub(crate) fresh: Cell<usize>,
    /// How far the owner may take fresh slots without its slow path: at
    /// most a page past `fresh` when the slow path opened it
    /// ([`Run::open_fresh`]), so freed slots anywhere in the heap are
    /// reused before a run's untouched pages.
    pub(crate) limit: Cell<usize>,
    /// The list the run is on: its heap's runs of the class, or the
    /// arena's empty or abandoned runs of it.
    pub(crate) prev: Cell<*mut Run>,
    pub(crate) next: Cell<*mut Run>,
    /// The capacity of each slot (set when the header is written).
    pub(crate) cap: u32,
    /// Slots handed out and not yet back on the free list (remote frees
    /// waiting in `thread_free` still count).
    pub(crate) used: Cell<u32>,
}

#[cfg(not(loom))]
const _: () = assert!(core::mem::size_of::<Run>() == 64);

/// The header of the run that holds `addr` (any address inside a run).
#[inline(always)]
pub(crate) fn run_of(addr: usize) -> *mut Run {
    let region = addr & !(RUN_REGION_LEN - 1);
    let index = (addr & (RUN_REGION_LEN - 1)) / RUN_LEN;
    (region + index * core::mem::size_of::<Run>()) as *mut Run
}

/// Where the slots of a run of `cap`-byte slots at `base` start: after
/// the headers in a region's first run, at a multiple of `cap`.
pub(crate) const fn first_slot(base: usize, cap: usize) -> usize {
    if base & (RUN_REGION_LEN - 1) == 0 {
        base + HEADERS_LEN.div_ceil(cap) * cap
    } else {
        base
    }
}

impl Run {
    /// Writes a new header for the run at `base`, owned by `owner`.
    ///
    /// # Safety
    /// `base` is a `RUN_LEN`-aligned run of a live region, owned by the
    /// caller, whose header no other thread can reach yet.
    pub(crate) unsafe fn init(base: usize, cap: usize, owner: usize) -> *mut Run {
        let first = first_slot(base, cap);
        let run = run_of(base);
        // SAFETY: the header line lies in the region's first bytes, which
        // the caller's contract makes ours; a write of a whole value.
        unsafe {
            run.write(Run {
                thread_free: AtomicUsize::new(0),
                owner: AtomicUsize::new(owner),
                free: Cell::new(0),
                fresh: Cell::new(first),
                limit: Cell::new(first),
                prev: Cell::new(null_mut()),
                next: Cell::new(null_mut()),
                cap: cap as u32,
                used: Cell::new(0),
            })
        };
        run
    }

    /// The run's base address, from its header's place in the region.
    pub(crate) fn base(&self) -> usize {
        let at = self as *const Run as usize;
        let region = at & !(RUN_REGION_LEN - 1);
        region + (at - region) / core::mem::size_of::<Run>() * RUN_LEN
    }

    /// The run's first slot.
    pub(crate) fn first(&self) -> usize {
        first_slot(self.base(), self.cap as usize)
    }

    /// Where the run's last slot ends.
    pub(crate) fn end(&self) -> usize {
        let first = self.first();
        let cap = self.cap as usize;
        first + (self.base() + RUN_LEN - first) / cap * cap
    }

    /// Takes the newest free slot, else (with `fresh`) a fresh one below
    /// the limit (`true`: a cold one); 0 when neither is there.
    #[inline(always)]
    pub(crate) fn take(&self, fresh: bool) -> (usize, bool) {
        let p = self.free.get();
        if p != 0 {
            // SAFETY: a free-list slot's first word is its link, written
            // by `push`; the slot is the owner's (free).
            self.free.set(unsafe { (p as *const usize).read() });
            self.used.set(self.used.get() + 1);
            return (p, false);
        }
        let p = self.fresh.get();
        if fresh && p < self.limit.get() {
            self.fresh.set(p + self.cap as usize);
            self.used.set(self.used.get() + 1);
            return (p, true);
        }
        (0, false)
    }

    /// Lets the owner take fresh slots up to about a page further (at
    /// least one slot); `false` when the run has none left.
    pub(crate) fn open_fresh(&self) -> bool {
        let end = self.end();
        let step = (self.cap as usize).max(4096);
        self.limit.set(end.min(self.fresh.get() + step));
        self.fresh.get() < end
    }

    /// Pushes slot `p` (of this run, handed out, now free) on the free list.
    #[inline(always)]
    pub(crate) fn push(&self, p: usize) {
        // SAFETY: `p` is a slot of this run that its holder gave back:
        // no one else reads or writes it now.
        unsafe { (p as *mut usize).write(self.free.get()) };
        self.free.set(p);
        self.used.set(self.used.get() - 1);
    }

    /// Takes the slots other threads freed into the free list; how many.
    pub(crate) fn collect(&self) -> u32 {
        if self.thread_free.load(Ordering::Relaxed) == 0 {
            return 0;
        }
        // Acquire: each pushed slot's link was written before its push.
        let list = self.thread_free.swap(0, Ordering::Acquire);
        debug_assert_eq!(
            list & ABANDONED,
            0,
            "an owned run is never marked abandoned"
        );
        self.absorb(list)
    }

    /// Puts every slot of `list` (linked through first words) on the free
    /// list; how many.
    fn absorb(&self, mut list: usize) -> u32 {
        let mut n = 0;
        while list != 0 {
            // SAFETY: a slot pushed by `push_remote`: its first word is
            // the next link, and the pusher let go of it.
            let next = unsafe { (list as *const usize).read() };
            self.push(list);
            list = next;
            n += 1;
        }
        n
    }

    /// The owner gives the run to the arena (under its lock): the remote
    /// frees so far are taken, later ones find [`ABANDONED`] and go to the
    /// lock.
    pub(crate) fn abandon(&self) -> u32 {
        let list = self.thread_free.swap(ABANDONED, Ordering::Acquire);
        debug_assert_eq!(list & ABANDONED, 0, "abandoned twice");
        let n = self.absorb(list);
        self.owner.store(0, Ordering::Relaxed);
        n
    }

    /// The arena hands the run to heap `owner` (under its lock).
    pub(crate) fn adopt(&self, owner: usize) {
        debug_assert_eq!(self.thread_free.load(Ordering::Relaxed), ABANDONED);
        self.owner.store(owner, Ordering::Relaxed);
        self.thread_free.store(0, Ordering::Release);
    }

    /// Whether the arena owns the run (read under its lock).
    pub(crate) fn abandoned(&self) -> bool {
        self.thread_free.load(Ordering::Acquire) == ABANDONED
    }

    /// The bytes of the run's slots that have been written since its
    /// pages were last released.
    pub(crate) fn resident(&self) -> usize {
        self.fresh.get() - self.first()
    }

    /// Forgets every free slot before the run's pages are released (the
    /// run is empty and the arena's); the whole page range to release.
    pub(crate) fn forget_slots(&self, page: usize) -> (usize, usize) {
        debug_assert_eq!(self.used.get(), 0);
        let first = self.first();
        self.free.set(0);
        self.fresh.set(first);
        self.limit.set(first);
        let start = first.next_multiple_of(page);
        (start, self.base() + RUN_LEN - start)
    }
}

/// A free by a thread that does not own the run of `p`: one
/// compare-exchange onto the run's `thread_free`. `false` (nothing
/// changed) when the arena owns the run: the caller frees under the lock.
/// Before a push onto an empty list, `first(owner)` tells the owner (while
/// the slot, still live, keeps the arena).
///
/// # Safety
/// `p` is a live slot of `run` that the caller gives up (a live slot keeps
/// its run's region mapped: see the module docs of `small`).
#[inline]
pub(crate) unsafe fn push_remote(run: *const Run, p: usize, first: impl Fn(usize)) -> bool {
    // SAFETY: headers of mapped regions are live `Run`s; only the atomics
    // are touched.
    let (tf, owner) = unsafe { (&(*run).thread_free, &(*run).owner) };
    let mut head = tf.load(Ordering::Relaxed);
    loop {
        if head & ABANDONED != 0 {
            return false;
        }
        if head == 0 {
            first(owner.load(Ordering::Relaxed));
        }
        // SAFETY: the slot is the caller's to write until the push lands.
        unsafe { (p as *mut usize).write(head) };
        match tf.compare_exchange_weak(head, p, Ordering::Release, Ordering::Relaxed) {
            Ok(_) => return true,
            Err(h) => head = h,
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A region-aligned stand-in for a mapped region, on the heap, freed
    /// when dropped.
    struct Region(*mut u8);

    impl Drop for Region {
        fn drop(&mut self) {
            // SAFETY: allocated in `region` with this layout.
            unsafe { std::alloc::dealloc(self.0, layout()) };
        }
    }

    fn layout() -> std::alloc::Layout {
        std::alloc::Layout::from_size_align(RUN_REGION_LEN, RUN_REGION_LEN).unwrap()
    }

    fn region() -> (Region, usize) {
        // SAFETY: a non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(layout()) };
        assert!(!p.is_null());
        // The slots are reached from integer addresses, as in the arena.
        (Region(p), p.expose_provenance())
    }

    #[test]
    fn slots_follow_the_headers_at_a_multiple_of_the_capacity() {
        let base = 64 * RUN_REGION_LEN;
        for cap in [16, 48, 512, 4096, 48 << 10] {
            let f = first_slot(base, cap);
            assert!(
                f >= base + HEADERS_LEN && (f - base) % cap == 0,
                "cap {cap}"
            );
            if RUN_REGION_LEN > RUN_LEN {
                assert_eq!(first_slot(base + RUN_LEN, cap), base + RUN_LEN);
            }
        }
        if RUN_REGION_LEN > RUN_LEN {
            assert_eq!(run_of(base + RUN_LEN + 5) as usize, base + 64);
        }
    }

    #[test]
    fn take_push_collect_and_abandon_keep_used_exact() {
        let (_v, base) = region();
        // SAFETY: `base` is a region-aligned buffer this test owns.
        let run = unsafe { &*Run::init(base, 64, 8) };
        assert_eq!(run.base(), base);
        assert_eq!(run.take(true), (0, false), "nothing opened yet");
        assert!(run.open_fresh());
        assert_eq!(run.take(false), (0, false), "fresh slots only when asked");
        let (a, cold_a) = run.take(true);
        let (b, cold_b) = run.take(true);
        assert_eq!(
            (a, b - a, run.used.get(), cold_a, cold_b),
            (run.first(), 64, 2, true, true)
        );
        // SAFETY: `b` is a live slot of the run, given up here.
        assert!(unsafe { push_remote(run, b, |_| {}) });
        assert_eq!(run.used.get(), 2, "a remote free counts until collected");
        assert_eq!(run.collect(), 1);
        assert_eq!(run.used.get(), 1);
        assert_eq!(
            run.take(true),
            (b, false),
            "the collected slot is reused first"
        );
        run.push(a);
        run.push(b);
        assert_eq!(run.abandon(), 0);
        assert!(run.abandoned());
        // SAFETY: `a`'s slot, as if it were live.
        assert!(
            !unsafe { push_remote(run, a, |_| {}) },
            "an abandoned run takes no push"
        );
        run.adopt(16);
        assert_eq!((run.used.get(), run.owner.load(Ordering::Relaxed)), (0, 16));
        assert_eq!(run.resident(), 128);
        let (start, len) = run.forget_slots(4096);
        assert_eq!((run.free.get(), run.resident()), (0, 0));
        assert_eq!(start + len, base + RUN_LEN);
    }

    #[test]
    fn a_run_hands_out_every_slot_once() {
        let (_v, base) = region();
        let cap = 48 << 10;
        // SAFETY: as above.
        let run = unsafe { &*Run::init(base, cap, 8) };
        let mut seen = Vec::new();
        while run.open_fresh() {
            loop {
                let (p, _) = run.take(true);
                if p == 0 {
                    break;
                }
                seen.push(p);
            }
        }
        assert_eq!(
            seen.len(),
            (RUN_LEN - cap) / cap,
            "the headers cost one slot"
        );
        assert!(seen
            .iter()
            .all(|p| (p - base) % cap == 0 && p + cap <= base + RUN_LEN));
    }
}

/// The thread-free protocol on the real [`Run`] under loom: a free on
/// another thread races the owner giving the run up (and another heap
/// taking it), and the slot comes back exactly once, with nothing
/// written to the run after its push unless the run is still owned.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::{Arc, Mutex};

    /// A run with one live slot, leaked for the model's threads: the slot
    /// memory and the header as plain words.
    fn run_with_live_slot() -> (usize, usize) {
        let slot = Box::leak(Box::new([0usize; 4])).as_mut_ptr() as usize;
        let run = Box::leak(Box::new(Run {
            thread_free: AtomicUsize::new(0),
            owner: AtomicUsize::new(8),
            free: Cell::new(0),
            fresh: Cell::new(0),
            limit: Cell::new(0),
            prev: Cell::new(null_mut()),
            next: Cell::new(null_mut()),
            cap: 32,
            used: Cell::new(1),
        })) as *mut Run as usize;
        (run, slot)
    }

    /// What a freeing thread does: push, else free under the lock into a
    /// run the arena owns, else (adopted meanwhile) push again.
    fn free_elsewhere(run: usize, slot: usize, lock: &Mutex<()>) {
        let r = run as *mut Run;
        // SAFETY: the slot is live and the run's header outlives the model.
        if unsafe { push_remote(r, slot, |_| {}) } {
            return;
        }
        let _g = lock.lock().unwrap();
        // SAFETY: under the lock: the arena owns an abandoned run.
        unsafe {
            if (*r).abandoned() {
                (*r).push(slot);
            } else {
                assert!(push_remote(r, slot, |_| {}), "owned again: the push lands");
            }
        }
    }

    #[test]
    fn loom_a_remote_free_racing_abandon_comes_back_once() {
        loom::model(|| {
            let (run, slot) = run_with_live_slot();
            let lock = Arc::new(Mutex::new(()));
            let l2 = Arc::clone(&lock);
            let t = loom::thread::spawn(move || free_elsewhere(run, slot, &l2));
            {
                let _g = lock.lock().unwrap();
                // SAFETY: the owner gives the run up under the lock.
                unsafe { (*(run as *mut Run)).abandon() };
            }
            t.join().unwrap();
            // SAFETY: every thread is done with the run.
            let r = unsafe { &*(run as *mut Run) };
            assert_eq!(
                (r.used.get(), r.free.get()),
                (0, slot),
                "the slot came back once"
            );
            assert!(r.abandoned());
        });
    }

    #[test]
    fn loom_a_remote_free_racing_abandon_and_adopt_comes_back_once() {
        loom::model(|| {
            let (run, slot) = run_with_live_slot();
            let lock = Arc::new(Mutex::new(()));
            let l2 = Arc::clone(&lock);
            let t = loom::thread::spawn(move || free_elsewhere(run, slot, &l2));
            let r = run as *mut Run;
            {
                let _g = lock.lock().unwrap();
                // SAFETY: the owner gives the run up under the lock.
                unsafe { (*r).abandon() };
            }
            {
                let _g = lock.lock().unwrap();
                // SAFETY: another heap takes it under the lock.
                unsafe { (*r).adopt(16) };
            }
            t.join().unwrap();
            // SAFETY: the adopter is this thread now.
            let run = unsafe { &*r };
            run.collect();
            assert_eq!(
                (run.used.get(), run.free.get()),
                (0, slot),
                "the slot came back once"
            );
        });
    }
}
