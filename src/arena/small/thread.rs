//! How a thread finds its heap for an arena, makes one, and lets its heaps
//! go: at its exit, and for arenas whose last handle is gone.
//!
//! The fast path is one thread-local load and one compare: the heap used
//! last, whose `seen` epoch equals the arena's (an epoch names its arena,
//! and changes at `trim`, a new cap and the last handle's drop).

use super::heap::ThreadHeap;
use crate::arena::metadata;
use crate::arena::shared::ArenaCore;
use crate::arena::tcache::epoch::ORPHANED;
use core::cell::Cell;
use core::ptr::{null_mut, NonNull};
use core::sync::atomic::AtomicU64;
use core::sync::atomic::Ordering::Relaxed;

/// The most arenas one thread keeps heaps for at once; past it, the
/// thread's operations on further arenas go through the arena's lock.
const MAX_HEAPS: usize = 64;

/// What [`LAST`] points to when the thread has no heap in use: a word that
/// no arena's epoch equals (`u64::MAX` has the flag bits a heap never
/// records), read as a heap's `seen`.
static NEVER: u64 = u64::MAX;
const NO_HEAP: *mut ThreadHeap = (&raw const NEVER).cast_mut().cast::<ThreadHeap>();

/// Bumped whenever an arena is orphaned while other threads' heaps may be
/// registered with it: each thread then lets go of such heaps at its next
/// slow path.
static ORPHANS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// The heap used last, or [`NO_HEAP`]. No destructor, so it reads
    /// during thread exit too.
    static LAST: Cell<*mut ThreadHeap> = const { Cell::new(NO_HEAP) };
    /// The thread's heaps, given back at its exit.
    static HEAPS: Heaps = const { Heaps::new() };
}

struct Heaps {
    slots: [Cell<*mut ThreadHeap>; MAX_HEAPS],
    orphans_seen: Cell<u64>,
}

impl Heaps {
    const fn new() -> Heaps {
        Heaps {
            slots: [const { Cell::new(null_mut()) }; MAX_HEAPS],
            orphans_seen: Cell::new(0),
        }
    }
}

impl Drop for Heaps {
    fn drop(&mut self) {
        let _ = LAST.try_with(|l| l.set(NO_HEAP));
        for s in &self.slots {
            if let Some(h) = NonNull::new(s.replace(null_mut())) {
                // SAFETY: a heap this thread made, out of its slot now.
                unsafe { leave(h) };
            }
        }
    }
}

/// This thread's heap for `core` when it is the one used last and up to
/// date; `None` otherwise (the slow path then calls [`heap_for`]).
#[inline(always)]
pub(crate) fn current(core: &ArenaCore) -> Option<&'static mut ThreadHeap> {
    let h = LAST.with(Cell::get);
    // SAFETY: `LAST` names a live heap of this thread or `NEVER`; either
    // way its first word is a `u64` (`ThreadHeap` is `repr(C)`, `seen` first).
    let seen = unsafe { *(h as *const u64) };
    if seen == core.epoch.load(Relaxed) {
        // SAFETY: an epoch equal to a heap's `seen` is its arena's (ids are
        // in the epoch), so `h` is a real heap of this thread for `core`;
        // only this thread uses it, and not re-entrantly (the allocation
        // paths call nothing that reaches the small path again).
        return Some(unsafe { &mut *h });
    }
    None
}

/// The small bytes this thread's current heap for `core` holds live (0
/// without one): on one thread, the arena's small live bytes.
pub(crate) fn own_live(core: *const ArenaCore) -> usize {
    LAST.try_with(|l| {
        let h = l.get();
        if h == NO_HEAP {
            return 0;
        }
        // SAFETY: a heap of this thread, live while `LAST` names it.
        let heap = unsafe { &*h };
        if core::ptr::eq(heap.core, core) {
            heap.live()
        } else {
            0
        }
    })
    .unwrap_or(0)
}

/// This thread's heap for `core`: found or made, its arena's epoch
/// honoured; `None` when the thread cannot keep one (its thread-locals
/// are gone, or it has heaps for too many arenas).
pub(crate) fn heap_for(core: &ArenaCore) -> Option<&'static mut ThreadHeap> {
    HEAPS
        .try_with(|hs| {
            let gen = ORPHANS.load(Relaxed);
            if hs.orphans_seen.get() != gen {
                hs.orphans_seen.set(gen);
                leave_orphaned(hs, core);
            }
            let mut free_slot = None;
            for s in &hs.slots {
                let h = s.get();
                if h.is_null() {
                    free_slot.get_or_insert(s);
                    continue;
                }
                // SAFETY: a heap this thread made and still holds.
                let heap = unsafe { &mut *h };
                if core::ptr::eq(heap.core, core) {
                    super::honour(heap, core);
                    LAST.with(|l| l.set(h));
                    return Some(heap);
                }
            }
            let slot = free_slot?;
            let h = make(core)?;
            slot.set(h.as_ptr());
            LAST.with(|l| l.set(h.as_ptr()));
            // SAFETY: just made, owned by this thread.
            Some(unsafe { &mut *h.as_ptr() })
        })
        .ok()
        .flatten()
}

/// A new heap for `core`, registered with it.
fn make(core: &ArenaCore) -> Option<NonNull<ThreadHeap>> {
    let mut st = core.lock();
    // The heap and the registry's room come from the backing allocator,
    // never this (locked) arena.
    let _m = metadata::enter();
    let seen = core.epoch.load(Relaxed);
    if let Some(mut h) = st.small.spare_heaps.pop() {
        // SAFETY: a spare heap of this arena: no thread uses it.
        let heap = unsafe { h.as_mut() };
        heap.reset(seen);
        st.small.heaps.push(heap.shared_ptr());
        return Some(h);
    }
    // Room to register it, and to keep it spare when its thread leaves.
    st.small.heaps.try_reserve(1).ok()?;
    let all = st.small.heaps.len() + st.small.spare_heaps.len() + 1;
    st.small.spare_heaps.try_reserve(all).ok()?;
    // The body's original pointer (the owner tag keeps it): a heap's
    // thread may free the body through it when it leaves.
    let body = st.owner.0.cast::<ArenaCore>().cast_const();
    let h = NonNull::from(Box::leak(Box::new(ThreadHeap::new(body, seen))));
    // SAFETY: just made; no thread uses it yet.
    st.small.heaps.push(unsafe { h.as_ref() }.shared_ptr());
    Some(h)
}

/// Lets go of this thread's heap for `core`, if it has one (the arena's
/// last handle is being dropped on this thread; the caller holds the lock
/// as `st`).
pub(crate) fn leave_own(st: &mut crate::arena::state::ArenaState, core: &ArenaCore) {
    if let Some(h) = take_slot(core) {
        // SAFETY: out of its slot; the lock is held as `st`.
        unsafe { dissolve(st, h) };
    }
}

/// Lets go of this thread's heap for the arena at `core` (orphaned).
///
/// # Safety
/// The thread's heap for `core` is registered (it keeps the body); the
/// body may be gone when this returns.
pub(crate) unsafe fn leave_current(core: NonNull<ArenaCore>) {
    // SAFETY: the caller's contract: the body is alive for the lookup.
    if let Some(h) = take_slot(unsafe { core.as_ref() }) {
        // SAFETY: out of its slot.
        unsafe { leave(h) };
    }
}

/// Takes this thread's heap for `core` out of its slot (and out of
/// `LAST`), if it has one.
fn take_slot(core: &ArenaCore) -> Option<NonNull<ThreadHeap>> {
    HEAPS
        .try_with(|hs| {
            hs.slots.iter().find_map(|s| {
                let h = s.get();
                // SAFETY: a heap this thread made and still holds.
                let mine = !h.is_null() && core::ptr::eq(unsafe { (*h).core }, core);
                mine.then(|| unslot(s, h))
            })
        })
        .ok()
        .flatten()
}

/// Empties slot `s`, which holds `h`, and forgets `h` as the last heap.
fn unslot(s: &Cell<*mut ThreadHeap>, h: *mut ThreadHeap) -> NonNull<ThreadHeap> {
    s.set(null_mut());
    let _ = LAST.try_with(|l| {
        if l.get() == h {
            l.set(NO_HEAP)
        }
    });
    // SAFETY: slots hold only non-null heaps when taken.
    unsafe { NonNull::new_unchecked(h) }
}

/// Tells every thread to look for heaps of orphaned arenas.
pub(crate) fn note_orphaned() {
    ORPHANS.fetch_add(1, Relaxed);
}

/// Lets go of this thread's heaps whose arenas are orphaned (but `keep`'s).
fn leave_orphaned(hs: &Heaps, keep: &ArenaCore) {
    for s in &hs.slots {
        let h = s.get();
        if h.is_null() {
            continue;
        }
        // SAFETY: a registered heap keeps its arena's body alive.
        let core = unsafe { &*(*h).core };
        if core::ptr::eq(core, keep) || core.epoch.load(Relaxed) & ORPHANED == 0 {
            continue;
        }
        // SAFETY: a heap this thread made, out of its slot now.
        unsafe { leave(unslot(s, h)) };
    }
}

/// Lets go of heap `h`: its runs to the arena, its counters folded, the
/// body freed if that was the last thing keeping it.
///
/// # Safety
/// `h` is a heap this thread made, out of every slot.
pub(crate) unsafe fn leave(h: NonNull<ThreadHeap>) {
    // SAFETY: a registered heap keeps its arena's body alive until here.
    let core = unsafe { NonNull::new_unchecked(h.as_ref().core.cast_mut()) };
    // SAFETY: the body is live; it may be freed by this call, after which
    // `core` is not used.
    unsafe {
        ArenaCore::locked_last_out(core, |st, _| dissolve(st, h));
    }
}

/// Unregisters heap `h` under the lock (`st`) and keeps it spare.
///
/// # Safety
/// As for [`leave`]; the lock is held.
unsafe fn dissolve(st: &mut crate::arena::state::ArenaState, mut h: NonNull<ThreadHeap>) {
    // SAFETY: this thread's heap, out of its slots.
    let heap = unsafe { h.as_mut() };
    heap.give_back(st, true, true);
    st.small.fold(&heap.shared().counters);
    let id = heap.shared_ptr();
    st.small.heaps.retain(|&x| x != id);
    // Room was reserved when the heap was made.
    debug_assert!(st.small.spare_heaps.len() < st.small.spare_heaps.capacity());
    st.small.spare_heaps.push(h);
}
