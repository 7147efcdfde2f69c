//! Frees on a thread whose cache did not hand the buffer out: a pipeline
//! stage that drops what another stage allocated, a serving thread that
//! frees a request parsed elsewhere, a pool's results dropped by the
//! caller.
//!
//! Such a free may not go into the freeing thread's cache (`bin.rs`: the
//! bins cache a free only against their own hand-outs, so that consumers
//! do not hoard what producers then map again), so it used to take the
//! arena's lock, one acquisition per buffer: with one producer and one
//! consumer 3.5x mimalloc's time per buffer, with four producers 9.7x.
//!
//! Now the buffer is pushed onto a remote stack of the arena, its class's
//! (`remotes.rs`), with one compare-exchange, its link written into its
//! own first bytes (a small buffer holds at least 16: the next buffer's
//! address and its free stamp). Whoever takes the arena's lock next takes
//! every stack that holds buffers, one swap each, and returns their
//! buffers as a cache's flush would: into the depot, where the producers'
//! next refill finds them, or into their classes' free lists at their free
//! stamps ([`absorb_waiting`]). A thread whose bin ran empty takes its
//! class's stack first, without the lock, and keeps what it has credit for
//! in its own cache (`collect.rs`). So every locked operation (a carve,
//! `stats()`, `trim`, a cap, a flush) sees the arena as if the frees had
//! taken the lock themselves: nothing is stranded in a thread, and a warm
//! run finds every buffer a cold run freed. The one exception is a
//! cache's refill (`ArenaCore::lock_for_refill`): it moves the class's
//! retained buffers into the cache and nothing else, and taking every
//! class's stack there, each link a miss under the lock, took the buffers
//! from the threads about to collect them (three to six times the locks
//! in the handoff bench). When a refill finds nothing, the request goes
//! to the shared path, which takes every stack before it carves.
//!
//! Unlike mimalloc's per-page thread-free lists the stacks are the
//! arena's, one per class: our buffers belong to the arena, not to a
//! thread, so there is no owner to message.
//!
//! The arena's last handle closes the stacks under the lock
//! ([`Remote::close`]): a push either lands before the close, and the
//! closer returns it, or sees the stack closed and frees through the lock
//! as before. A thread that pushed never touches the arena again for that
//! free (the body may be gone as soon as the buffer is absorbed). The loom
//! models below check the push, the take and the close.

use super::bin::Slot;
use super::depot::REMOTES;
use super::hints;
use super::SMALL_CLASSES;
use crate::arena::blocks::NIL;
use crate::arena::run_index;
use crate::arena::shared::ArenaCore;
use crate::arena::state::ArenaState;
use crate::arena::warm::InsertRun;
use crate::size_class::capacity;
#[cfg(not(loom))]
use core::sync::atomic::{AtomicUsize, Ordering};
#[cfg(loom)]
use loom::sync::atomic::{AtomicUsize, Ordering};

/// What [`Remote::push`] did; also what [`Remote::restore`] found, where
/// `Onto` means the stack held newer buffers and nothing was done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pushed {
    /// Pushed onto a stack that held buffers already.
    Onto,
    /// Pushed onto an empty stack: its first buffer since the last take.
    First,
    /// Nothing pushed: the stack is closed.
    Refused,
}

/// The stack's head once the arena's last handle has gone: no more pushes.
const CLOSED: usize = 1;

/// The arena's stack of buffers freed on threads that did not allocate
/// them: the newest buffer's address, 0 when empty, [`CLOSED`].
#[derive(Debug)]
pub(crate) struct Remote(AtomicUsize);

impl Default for Remote {
    fn default() -> Self {
        Remote(AtomicUsize::new(0))
    }
}

impl Remote {
    /// Pushes the buffer at `addr` (not 0 or 1: a buffer's address), after
    /// `link` has written the current head into it as its successor (it
    /// may be called again, with a newer head). Says whether the stack was
    /// empty before ([`Pushed::First`]), or that it is closed and nothing
    /// was pushed.
    #[inline]
    pub(crate) fn push(&self, addr: usize, mut link: impl FnMut(usize)) -> Pushed {
        let mut head = self.0.load(Ordering::Relaxed);
        loop {
            if head == CLOSED {
                return Pushed::Refused;
            }
            link(head);
            // Release: the link and the user's last writes to the buffer
            // come before whoever takes it.
            match self
                .0
                .compare_exchange_weak(head, addr, Ordering::Release, Ordering::Relaxed)
            {
                Ok(0) => return Pushed::First,
                Ok(_) => return Pushed::Onto,
                Err(now) => head = now,
            }
        }
    }

    /// Whether buffers wait (one relaxed load, at every lock acquisition).
    #[inline(always)]
    pub(crate) fn pending(&self) -> bool {
        self.0.load(Ordering::Relaxed) > CLOSED
    }

    /// Under the arena's lock: every pushed buffer, as the newest's address
    /// (0: none). The stack stays open.
    pub(crate) fn take(&self) -> usize {
        if !self.pending() {
            return 0;
        }
        // Only the lock holder closes ([`Remote::take_shared`] never does),
        // so the head is not CLOSED here; acquire pairs with each push's
        // release.
        self.0.swap(0, Ordering::Acquire)
    }

    /// Without the arena's lock: every pushed buffer, as [`Remote::take`]
    /// returns them (0: none, or the stack is closed). For a thread that
    /// will put them into its own cache (`collect.rs`); it must be
    /// operating on the arena through a handle, so the stack is not closed
    /// under it, but a closed stack stays closed all the same.
    pub(crate) fn take_shared(&self) -> usize {
        let mut head = self.0.load(Ordering::Relaxed);
        loop {
            if head <= CLOSED {
                return 0;
            }
            // Acquire pairs with each push's release, as in `take`.
            match self
                .0
                .compare_exchange_weak(head, 0, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return head,
                Err(now) => head = now,
            }
        }
    }

    /// Without the arena's lock: puts back the chain at `chain` (newest
    /// first, taken with [`Remote::take_shared`]) when the stack is empty
    /// ([`Pushed::First`]); otherwise nothing is done, and the stack either
    /// holds newer pushes ([`Pushed::Onto`]: take them and try again) or is
    /// closed ([`Pushed::Refused`]).
    pub(crate) fn restore(&self, chain: usize) -> Pushed {
        // Release, as a push: the chain's links come before whoever takes it.
        match self
            .0
            .compare_exchange(0, chain, Ordering::Release, Ordering::Relaxed)
        {
            Ok(_) => Pushed::First,
            Err(CLOSED) => Pushed::Refused,
            Err(_) => Pushed::Onto,
        }
    }

    /// Under the arena's lock, when its last handle goes: every pushed
    /// buffer, as [`Remote::take`] returns them, and no pushes from now on.
    pub(crate) fn close(&self) -> usize {
        match self.0.swap(CLOSED, Ordering::Acquire) {
            CLOSED => 0,
            head => head,
        }
    }
}

/// Reads and writes the links pushed buffers carry in their first two
/// words (a small buffer holds at least 16 bytes, 16-aligned).
pub(crate) mod link {
    /// Writes `next` and `stamp` into the free buffer at `addr`.
    ///
    /// # Safety
    /// `addr` is a buffer of at least 16 bytes, aligned to 8, that the
    /// caller may write (it is freeing it).
    #[inline(always)]
    pub(crate) unsafe fn write(addr: usize, next: usize, stamp: u64) {
        let p = addr as *mut u64;
        // SAFETY: the caller's contract: two words of its own buffer.
        unsafe {
            p.write(next as u64);
            p.add(1).write(stamp);
        }
    }

    /// The successor and free stamp [`write()`] put into the buffer at `addr`.
    ///
    /// # Safety
    /// `addr` was pushed with a link written by [`write()`], and the caller
    /// took it from the stack (an acquire after the push's release).
    #[inline(always)]
    pub(crate) unsafe fn read(addr: usize) -> (usize, u64) {
        let p = addr as *const u64;
        // SAFETY: the caller's contract.
        unsafe { (p.read() as usize, p.add(1).read()) }
    }

    /// The last buffer of the chain at `head` (not 0), and its stamp.
    ///
    /// # Safety
    /// As for [`read`], for every buffer of the chain, which ends (a buffer
    /// freed twice would make it a cycle: the caller's contract rules
    /// that out).
    pub(crate) unsafe fn last(mut head: usize) -> (usize, u64) {
        loop {
            // SAFETY: the caller's contract.
            let (next, stamp) = unsafe { read(head) };
            if next == 0 {
                return (head, stamp);
            }
            head = next;
        }
    }

    /// Links the chain `older` below the chain `newer` (not 0): the last
    /// buffer of `newer` gets `older` as its successor. Returns `newer`.
    /// What [`Remotes::restore`](super::super::remotes::Remotes::restore)
    /// does with pushes that came in while a chain was out.
    ///
    /// # Safety
    /// As for [`last`], for `newer`; its last buffer is the caller's to
    /// write (taken from the stack with the rest of `newer`).
    pub(crate) unsafe fn joined(newer: usize, older: usize) -> usize {
        // SAFETY: the caller's contract.
        unsafe {
            let (last, stamp) = last(newer);
            write(last, older, stamp);
        }
        newer
    }

    /// Reverses the chain that starts at `head` in place (the stack gives
    /// the newest first; the arena takes them oldest first) and returns
    /// its new head. At most `limit` buffers are visited: a longer chain
    /// (a buffer freed twice makes a cycle) is cut there.
    ///
    /// # Safety
    /// As for [`read`], for every buffer of the chain.
    pub(crate) unsafe fn reversed(mut head: usize, limit: usize, hints: usize) -> usize {
        let mut prev = 0;
        let mut n = 0;
        while head != 0 && n < limit {
            // SAFETY: the caller's contract.
            let (next, stamp) = unsafe { read(head) };
            // SAFETY: as above, for the hints when `hints > 0`.
            unsafe { super::super::hints::prefetch_ahead(head, n, hints, limit) };
            // SAFETY: as above: the buffer is the arena's to write again.
            unsafe { write(head, prev, stamp) };
            prev = head;
            head = next;
            n += 1;
        }
        prev
    }
}

/// Under the arena's lock: the buffers of the chain at `head` (what a
/// thread took from its class's stack and did not keep, `collect.rs`)
/// come back to the arena, as [`absorb_chain`] says; then the retention
/// cap is enforced, as after any free.
#[cold]
#[inline(never)]
pub(crate) fn absorb(st: &mut ArenaState, core: &ArenaCore, head: usize) {
    // Put together by `collect` in its own order: no hints to follow.
    absorb_chain(st, core, head, 0);
    st.hold_cap(&core.os);
}

/// Under the arena's lock: every remote stack that holds buffers is taken
/// and its buffers come back to the arena ([`absorb_chain`]); then the
/// retention cap is enforced. Every lock acquisition calls it while
/// [`Remotes::pending`](super::remotes::Remotes::pending) says so.
#[cold]
#[inline(never)]
pub(crate) fn absorb_waiting(st: &mut ArenaState, core: &ArenaCore) {
    core.remotes
        .take_flagged(|c, head| absorb_chain(st, core, head, hints::count(c)));
    st.hold_cap(&core.os);
}

/// Under the arena's lock, when its last handle goes: closes every remote
/// stack and brings back what they held ([`absorb_chain`]); later frees
/// go through the lock.
pub(crate) fn absorb_closing(st: &mut ArenaState, core: &ArenaCore) {
    core.remotes
        .close(|c, head| absorb_chain(st, core, head, hints::count(c)));
    st.hold_cap(&core.os);
}

/// Under the arena's lock: the buffers of the chain at `head` (taken from
/// a stack) come back to the arena, oldest first, as a cache's flush
/// returns its buffers: into the depot while it admits them (the next
/// refill of any thread's cache takes them from there), else into their
/// classes' free lists at their free stamps.
fn absorb_chain(st: &mut ArenaState, core: &ArenaCore, head: usize, hints: usize) {
    // A chain longer than the live buffers holds one twice (a buffer freed
    // twice, which the caller's contract rules out): cut there.
    // SAFETY: the chain was taken from a stack, and each of its buffers
    // was pushed with a link (`link::write`).
    let mut at = unsafe { link::reversed(head, st.stats.live_buffers, hints) };
    // Oldest first: those the depot refuses go into their class's list as
    // one run (a stack holds one class).
    let mut run = InsertRun::default();
    while at != 0 {
        // SAFETY: as above.
        let (next, stamp) = unsafe { link::read(at) };
        absorb_one(st, core, at, stamp, &mut run);
        at = next;
    }
}

/// The small class of the pushed buffer at `addr`: its run's tag in the
/// owner table, with `addr` checked by arithmetic to start one of the
/// run's slots; `None` for anything else (never: the freeing thread found
/// its class the same way).
pub(crate) fn pushed_class(core: &ArenaCore, addr: usize) -> Option<usize> {
    core.small_class_at(addr)
        .filter(|&c| c < SMALL_CLASSES && run_index::starts_slot(c, addr))
}

/// One remotely freed buffer back to the arena (see [`absorb_chain`]). Its
/// class comes from the owner table's run tag, and the address is checked
/// to start one of the run's slots by arithmetic; its block is not looked
/// up: the depot keeps it without (`NIL`), as a flush keeps a buffer freed
/// by address, and the free lists find it themselves.
fn absorb_one(st: &mut ArenaState, core: &ArenaCore, addr: usize, stamp: u64, run: &mut InsertRun) {
    let Some(c) = pushed_class(core, addr) else {
        // Not a small buffer of this arena (never: the freeing thread
        // found its class the same way): the checked free decides.
        st.free(NIL, addr, &core.os);
        return;
    };
    let cap = capacity(c);
    let s = Slot { addr, stamp };
    if st.depot.room(c) > 0 && st.depot_admits(cap) && st.depot.push(c, s, REMOTES) {
        // Retained in the depot like a flushed buffer; its free is counted
        // here, as a departed cache's frees are.
        st.cached_bytes += cap;
        st.absorbed_frees += 1;
        return;
    }
    let i = st.free_cached_next(NIL, addr, stamp, run);
    if i != NIL && st.behind_high(i) {
        st.catch_up(i, &core.os);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Sixteen 16-byte "buffers" in one aligned array.
    #[repr(C, align(16))]
    struct Buffers([[u64; 2]; 16]);

    /// The buffers' addresses, from one pointer (one borrow of the array).
    fn addrs(b: &mut Buffers) -> Vec<usize> {
        let base = b.0.as_mut_ptr() as usize;
        (0..16).map(|k| base + 16 * k).collect()
    }

    fn push(r: &Remote, a: usize, stamp: u64) -> bool {
        // SAFETY: `a` is one of the test's 16-byte buffers.
        r.push(a, |next| unsafe { link::write(a, next, stamp) }) != Pushed::Refused
    }

    /// Chain from `head`, in order: (address, stamp).
    fn walk(mut head: usize) -> Vec<(usize, u64)> {
        let mut v = Vec::new();
        while head != 0 {
            // SAFETY: every address in these chains is a test buffer with a link.
            let (next, stamp) = unsafe { link::read(head) };
            v.push((head, stamp));
            head = next;
        }
        v
    }

    #[test]
    fn pushes_come_back_newest_first_and_reversed_oldest_first() {
        let mut b = Buffers([[0; 2]; 16]);
        let r = Remote::default();
        assert!(!r.pending());
        assert_eq!(r.take(), 0);
        let a = addrs(&mut b)[..5].to_vec();
        for (k, &x) in a.iter().enumerate() {
            assert!(push(&r, x, k as u64 + 10));
        }
        assert!(r.pending());
        let head = r.take();
        assert!(!r.pending(), "a take empties the stack");
        let newest_first: Vec<_> = a.iter().rev().copied().zip((10..15).rev()).collect();
        assert_eq!(walk(head), newest_first);
        // SAFETY: the chain was just taken and holds links.
        let oldest = unsafe { link::reversed(head, usize::MAX, 0) };
        let oldest_first: Vec<_> = a.iter().copied().zip(10..15).collect();
        assert_eq!(walk(oldest), oldest_first);
    }

    #[test]
    fn a_closed_stack_refuses_pushes_and_gives_what_it_had() {
        let mut b = Buffers([[0; 2]; 16]);
        let r = Remote::default();
        let a = addrs(&mut b);
        let (x, y) = (a[0], a[1]);
        assert!(push(&r, x, 1));
        let head = r.close();
        assert_eq!(walk(head), vec![(x, 1)]);
        assert!(!push(&r, y, 2), "closed: the free goes through the lock");
        assert!(!r.pending());
        assert_eq!(r.take(), 0);
        assert_eq!(r.close(), 0);
    }

    #[test]
    fn a_cycle_is_cut_at_the_limit() {
        let mut b = Buffers([[0; 2]; 16]);
        let a = addrs(&mut b);
        let (x, y) = (a[0], a[1]);
        // A buffer freed twice: x -> y -> x -> ...
        // SAFETY: test buffers.
        unsafe {
            link::write(x, y, 1);
            link::write(y, x, 2);
        }
        // SAFETY: as above.
        let head = unsafe { link::reversed(x, 5, 0) };
        assert!(head == x || head == y);
    }
}

#[cfg(all(test, loom))]
pub(crate) mod loom_tests {
    use super::*;
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;
    use loom::thread;

    /// `N` buffers' first words (their links), tracked by loom (addresses
    /// 16, 32, ... stand for the buffers; index = addr / 16 - 1).
    pub(crate) struct Links<const N: usize>(pub(crate) [UnsafeCell<usize>; N]);

    impl<const N: usize> Links<N> {
        /// Every link 0.
        pub(crate) fn new() -> Self {
            Links(core::array::from_fn(|_| UnsafeCell::new(0)))
        }
    }

    /// How many buffers the chain at `head` holds.
    pub(crate) fn walk<const N: usize>(links: &Links<N>, mut head: usize) -> usize {
        let mut n = 0;
        while head != 0 {
            // SAFETY (model): taken after the push's release.
            head = links.0[head / 16 - 1].with(|p| unsafe { *p });
            n += 1;
        }
        n
    }

    /// Two threads free a buffer each onto the stack while the lock holder
    /// takes it and then closes it: every buffer comes back exactly once
    /// (from a take, the close, or as a refused push that goes through the
    /// lock), and the taker reads each link the pusher wrote.
    #[test]
    fn loom_every_remote_free_comes_back_exactly_once() {
        crate::sync::loom_model(3, || {
            let remote = Arc::new(Remote::default());
            let links = Arc::new(Links::<2>::new());
            // Addresses 16 and 32 stand for the buffers; index = addr / 16 - 1.
            let pushers: Vec<_> = (0..2)
                .map(|k| {
                    let (r, l) = (Arc::clone(&remote), Arc::clone(&links));
                    thread::spawn(move || {
                        let a = 16 * (k + 1);
                        // SAFETY (model): the buffer is this thread's until pushed.
                        r.push(a, |next| l.0[k].with_mut(|p| unsafe { *p = next }))
                            != Pushed::Refused
                    })
                })
                .collect();
            let mut back = walk(&links, remote.take());
            back += walk(&links, remote.close());
            for h in pushers {
                if !h.join().unwrap() {
                    back += 1; // refused: freed through the lock
                }
            }
            assert_eq!(back, 2);
            assert_eq!(remote.take(), 0);
        });
    }

    /// A thread takes the stack without the lock (`collect.rs`) while
    /// another frees onto it and the lock holder closes it: every buffer
    /// comes back exactly once (to the collector, the closer, or refused
    /// and freed through the lock), a closed stack stays closed, and the
    /// collector reads the link the pusher wrote.
    #[test]
    fn loom_a_take_without_the_lock_and_the_close_share_every_free_once() {
        crate::sync::loom_model(3, || {
            let remote = Arc::new(Remote::default());
            let links = Arc::new(Links::<2>::new());
            let pusher = {
                let (r, l) = (Arc::clone(&remote), Arc::clone(&links));
                thread::spawn(move || {
                    let mut refused = 0;
                    for k in 0..2 {
                        let a = 16 * (k + 1);
                        // SAFETY (model): the buffer is this thread's until pushed.
                        if r.push(a, |next| l.0[k].with_mut(|p| unsafe { *p = next }))
                            == Pushed::Refused
                        {
                            refused += 1;
                        }
                    }
                    refused
                })
            };
            let collector = {
                let (r, l) = (Arc::clone(&remote), Arc::clone(&links));
                thread::spawn(move || walk(&l, r.take_shared()))
            };
            let closed = walk(&links, remote.close());
            let back = closed + collector.join().unwrap() + pusher.join().unwrap();
            assert_eq!(back, 2);
            assert_eq!(remote.take_shared(), 0, "closed stays closed");
            assert!(!remote.pending());
        });
    }
}
