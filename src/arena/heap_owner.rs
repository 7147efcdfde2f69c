//! Which thread the execution heap serves, and how that moves.
//!
//! The heap's placement repeats run after run only when the order of its
//! requests does (`heap.rs`), so one thread at a time uses it; the large
//! requests of every other thread take own classes, whose reuse does not
//! depend on order. At first it serves the thread that made the arena. A
//! runtime often builds its sessions (and their arenas) on one thread and
//! runs them on another: a loader thread, a server's worker pool. With the
//! heap bound to the maker for good, every large buffer of such a run went
//! to own classes, which serve a request only from a buffer at most twice
//! its size (a SOMAS resnet50 replay held 1.24x its live peak instead of
//! 1.00x; MiniMalloc's K 6.4x instead of 1.7x).
//!
//! So the heap moves, but only while no heap piece is live (an empty heap
//! is in its starting state, so the new thread's runs repeat the old
//! thread's placement):
//!
//! - when its thread has exited (its life flag, `thread_life.rs`, is
//!   cleared: a loader thread, threads in turn, a pool that retires idle
//!   workers), to the next thread that asks;
//! - at a run boundary
//!   ([`ExecutionArena::begin_run`](crate::ExecutionArena::begin_run), a
//!   session's `ArenaRun::new` and `clear`), to the thread crossing it: a
//!   run that starts on another worker than the last one takes the heap
//!   with it. A boundary that finds a heap piece live (another thread's
//!   run in progress) moves nothing and marks the arena's runs as
//!   overlapping; from then on boundaries leave the heap with its thread,
//!   so overlapping runs do not pass it back and forth and fill both the
//!   heap and own classes.
//!
//! Not to the first thread that asks while the maker lives: a pool whose
//! threads allocate random large sizes on an arena its idle maker made
//! (the threads bench) would hand one of them the heap's locked best fit
//! in place of its thread-cached own classes (8.6 % more instructions for
//! that thread, 70 % more lock acquisitions, and 2 threads at 1.07-1.14x
//! one thread's throughput instead of 1.46-1.61x). A pool thread helping
//! a run in progress never takes the heap either (the run's pieces are
//! live), and the scoped global allocator's `enter` is not a boundary
//! here: pool threads open scopes in the middle of runs.
//!
//! Moving it bumps the heap's version, so the old thread's slot
//! (`tcache/heap_slot.rs`) never serves a piece it was lent before; a
//! piece it holds is claimed first (it is live to the heap until then),
//! and the new thread's own large slots are given back (its large
//! requests no longer reach them).

use super::blocks::Place;
use super::heap::thread_token;
use super::shared::ArenaCore;
use super::state::ArenaState;
use super::tcache;
use core::sync::atomic::Ordering::Relaxed;

impl ArenaState {
    /// Whether no execution heap piece is live.
    pub(crate) fn heap_is_empty(&self) -> bool {
        self.heap.segs.iter().all(|s| s.live == 0)
    }

    /// Whether the heap's thread is known to have exited.
    #[inline(always)]
    fn heap_thread_gone(&self) -> bool {
        self.heap_life.as_ref().is_some_and(|l| !l.alive())
    }

    /// Whether [`ArenaCore::adopt_orphaned_heap`] has something to look at:
    /// the arena has a heap and its thread has exited.
    #[inline(always)]
    pub(crate) fn heap_adoption_due(&self) -> bool {
        self.heap_on && self.heap_thread_gone()
    }
}

impl ArenaCore {
    /// Under the lock, before a large request is served: an execution heap
    /// whose thread has exited, with no heap piece live, is taken by the
    /// calling thread.
    #[inline(always)]
    pub(crate) fn adopt_orphaned_heap(&self, st: &mut ArenaState) {
        if st.heap_adoption_due() {
            self.adopt_if_empty(st);
        }
    }

    /// [`ArenaCore::adopt_orphaned_heap`] once the heap's thread is gone.
    #[inline(never)]
    fn adopt_if_empty(&self, st: &mut ArenaState) {
        if st.heap_is_empty() {
            self.adopt_heap(st, thread_token());
        }
    }

    /// A run boundary on the calling thread: the execution heap moves to it
    /// when no heap piece is live once the pieces other threads' slots
    /// offer are claimed back, unless runs were seen overlapping (then only
    /// when its thread has exited). Costs one load when it serves this
    /// thread already (or the arena has no heap).
    pub(crate) fn heap_boundary(&self) {
        if self.small_owned {
            super::small::boundary(self);
        }
        let me = thread_token();
        // 0: the arena has no heap (an I/O arena, pattern mode).
        let owner = self.heap_thread.load(Relaxed);
        if owner == me || owner == 0 {
            return;
        }
        let mut st = self.lock();
        if st.heap_thread == me {
            return;
        }
        if !st.heap_is_empty() {
            tcache::claim_offers(&mut st, self, |b| matches!(b.place, Place::Heap(_)));
        }
        if !st.heap_is_empty() {
            // Another thread's run is in progress: runs on this arena
            // overlap, and the heap stays with its thread from now on.
            st.heap_runs_overlap = true;
        } else if !st.heap_runs_overlap || st.heap_thread_gone() {
            self.adopt_heap(&mut st, me);
        }
    }

    /// Makes thread `me` the heap's (no heap piece is live).
    #[cold]
    fn adopt_heap(&self, st: &mut ArenaState, me: usize) {
        debug_assert!(st.heap_is_empty(), "the heap moved with pieces live");
        st.heap_thread = me;
        // The flag may be made (an allocation) and the old one dropped:
        // through the backing allocator, never this locked arena.
        let _m = super::metadata::enter();
        st.heap_life = super::thread_life::Life::current();
        self.heap_thread.store(me, Relaxed);
        // No slot serves or keeps a piece lent before the move.
        st.heap.version += 1;
        tcache::settle_all_large(st, self);
        st.stats.heap_moves += 1;
    }
}

#[cfg(all(test, not(loom), not(miri)))]
mod tests {
    use crate::ExecutionArena;
    use std::sync::mpsc;

    const MIB: usize = 1 << 20;

    /// One run whose pieces own classes cannot share but the heap can: 4
    /// MiB alone, then two of 2 MiB, then 1 MiB and 3 MiB. The addresses
    /// it got, in order.
    fn run(arena: &ExecutionArena) -> Vec<usize> {
        let mut at = Vec::new();
        for sizes in [&[4 * MIB][..], &[2 * MIB, 2 * MIB], &[MIB, 3 * MIB]] {
            let v: Vec<_> = sizes
                .iter()
                .map(|&n| arena.allocate(n, 64).unwrap())
                .collect();
            at.extend(v.iter().map(|a| a.as_ptr() as usize));
        }
        at
    }

    /// Held bytes (live and retained) once a run is over.
    fn held(arena: &ExecutionArena) -> usize {
        let s = arena.stats();
        s.live_bytes + s.retained_bytes
    }

    /// Runs on a thread that did not make the arena, the maker alive.
    fn runs_elsewhere(arena: &ExecutionArena, boundary: bool) -> usize {
        std::thread::scope(|s| {
            s.spawn(|| {
                if boundary {
                    arena.begin_run();
                }
                let first = run(arena);
                let cold = arena.stats().cold_allocations;
                for _ in 0..3 {
                    let again = run(arena);
                    // Own classes reuse by class, not by place.
                    assert!(!boundary || again == first, "same places run after run");
                }
                assert_eq!(arena.stats().cold_allocations, cold, "warm runs");
            });
        });
        held(arena)
    }

    #[test]
    fn a_thread_that_did_not_make_the_arena_gets_the_heap_at_a_boundary() {
        let arena = ExecutionArena::new();
        // Own classes would hold a 4, two 2, a 1 and a 3 MiB buffer.
        let h = runs_elsewhere(&arena, true);
        assert!(h <= 4 * MIB, "held {h} bytes");
        assert_eq!(arena.stats().heap_moves, 1);
        // Without a boundary, with the maker alive: own classes.
        let arena = ExecutionArena::new();
        let h = runs_elsewhere(&arena, false);
        assert!(h > 8 * MIB, "held {h} bytes");
        assert_eq!(arena.stats().heap_moves, 0);
    }

    #[test]
    fn the_heap_goes_to_the_next_thread_that_asks_once_the_maker_exits() {
        // Made on a thread that exits (a loader); a native join.
        let arena = std::thread::spawn(ExecutionArena::new).join().unwrap();
        let first = run(&arena);
        let cold = arena.stats().cold_allocations;
        assert_eq!(run(&arena), first);
        assert_eq!(arena.stats().cold_allocations, cold, "warm runs");
        assert!(held(&arena) <= 4 * MIB, "held {} bytes", held(&arena));
        assert_eq!(arena.stats().heap_moves, 1);
    }

    /// Two live threads take turns running, each crossing a run boundary
    /// first: the heap goes with the run, and every run after the first
    /// takes the same places, warm.
    #[test]
    fn runs_that_move_between_threads_at_a_boundary_keep_their_places() {
        let arena = ExecutionArena::new();
        let (to_a, a_rx) = mpsc::channel::<()>();
        let (to_b, b_rx) = mpsc::channel::<()>();
        let (done, done_rx) = mpsc::channel::<Vec<usize>>();
        std::thread::scope(|s| {
            for rx in [a_rx, b_rx] {
                let (arena, done) = (&arena, done.clone());
                s.spawn(move || {
                    while rx.recv().is_ok() {
                        arena.begin_run();
                        done.send(run(arena)).unwrap();
                    }
                });
            }
            to_a.send(()).unwrap();
            let first = done_rx.recv().unwrap();
            let cold = arena.stats().cold_allocations;
            for r in 0..6 {
                let to = if r % 2 == 0 { &to_b } else { &to_a };
                to.send(()).unwrap();
                assert_eq!(done_rx.recv().unwrap(), first, "run {r}");
            }
            assert_eq!(arena.stats().cold_allocations, cold, "warm runs");
            // From the maker to A, then to B and back run by run.
            assert_eq!(arena.stats().heap_moves, 7);
            drop((to_a, to_b));
        });
        assert!(held(&arena) <= 4 * MIB, "held {} bytes", held(&arena));
    }

    /// A boundary crossed by a pool thread while the run's thread holds a
    /// heap piece leaves the heap where it is.
    #[test]
    fn a_boundary_with_heap_pieces_live_does_not_move_the_heap() {
        let arena = ExecutionArena::new();
        let live = arena.allocate(2 * MIB, 64).unwrap();
        let at = live.as_ptr();
        std::thread::scope(|s| {
            s.spawn(|| {
                arena.begin_run();
                drop(arena.allocate(2 * MIB, 64).unwrap());
            });
        });
        assert_eq!(arena.stats().heap_moves, 0);
        drop(live);
        // The heap still serves this thread: the freed piece comes back.
        let again = arena.allocate(2 * MIB, 64).unwrap();
        assert_eq!(again.as_ptr(), at);
        assert_eq!(arena.stats().heap_moves, 0);
        drop(again);
    }

    /// Two threads whose runs overlap: the first boundary that finds the
    /// other's run in progress stops boundaries from moving the heap, so
    /// the heap stays with one thread and the other's runs keep to own
    /// classes (no run passes the heap back and forth).
    #[test]
    fn overlapping_runs_stop_boundary_moves() {
        let arena = ExecutionArena::new();
        let (go_b, b_rx) = mpsc::channel::<()>();
        let (b_done, b_done_rx) = mpsc::channel::<()>();
        std::thread::scope(|s| {
            let arena = &arena;
            s.spawn(move || {
                while b_rx.recv().is_ok() {
                    arena.begin_run();
                    drop(arena.allocate(2 * MIB, 64).unwrap());
                    b_done.send(()).unwrap();
                }
            });
            // This thread's run, with a piece live while B's run starts.
            arena.begin_run();
            let a = arena.allocate(2 * MIB, 64).unwrap();
            go_b.send(()).unwrap();
            b_done_rx.recv().unwrap();
            assert_eq!(arena.stats().heap_moves, 0, "B's boundary found A's run");
            drop(a);
            // The heap is empty now, but runs overlap: B's boundary stays.
            go_b.send(()).unwrap();
            b_done_rx.recv().unwrap();
            assert_eq!(arena.stats().heap_moves, 0);
            drop(go_b);
        });
    }

    /// Threads in turn on an arena its loader made: each takes the heap
    /// once the one before has exited (or is the same thread-local address
    /// again, which serves as well) and runs warm in the first one's places.
    #[test]
    fn threads_in_turn_each_get_the_heap_once_the_last_exits() {
        let arena = std::thread::spawn(ExecutionArena::new).join().unwrap();
        let a = &arena as *const ExecutionArena as usize;
        let run_on_new_thread = || {
            // A native join: the thread's exit (its flag) is over.
            std::thread::spawn(move || {
                // SAFETY: the arena outlives the thread, joined here.
                let arena = unsafe { &*(a as *const ExecutionArena) };
                run(arena)
            })
            .join()
            .unwrap()
        };
        let first = run_on_new_thread();
        let cold = arena.stats().cold_allocations;
        for _ in 0..3 {
            assert_eq!(run_on_new_thread(), first);
        }
        assert_eq!(arena.stats().cold_allocations, cold, "warm runs");
        assert!(held(&arena) <= 4 * MIB, "held {} bytes", held(&arena));
        assert!(arena.stats().heap_moves >= 1);
    }

    /// Threads racing through boundaries, large requests, frees of each
    /// other's pieces and exits: every buffer keeps its bytes while live,
    /// the state checks, and everything comes back.
    #[test]
    fn racing_boundaries_and_exits_lose_nothing() {
        let arena = ExecutionArena::new();
        let rounds = if cfg!(debug_assertions) { 10 } else { 60 };
        for round in 0..3u64 {
            let (tx, rx) = mpsc::channel::<crate::Allocation>();
            std::thread::scope(|s| {
                for t in 0..4u64 {
                    let (arena, tx) = (&arena, tx.clone());
                    s.spawn(move || {
                        let mut x = 0x9E37_79B9 ^ ((t + 1) * (round + 7));
                        for r in 0..rounds {
                            if r % 3 == 0 {
                                arena.begin_run();
                            }
                            let mut live = Vec::new();
                            for _ in 0..3 {
                                x ^= x << 13;
                                x ^= x >> 7;
                                x ^= x << 17;
                                let n = (64 << 10) + (x as usize % (3 * MIB));
                                let mut a = arena.allocate(n, 64).unwrap();
                                a.as_mut_slice().fill(t as u8 + 1);
                                live.push(a);
                            }
                            for a in &live {
                                assert!(a.as_slice().iter().all(|&b| b == t as u8 + 1));
                            }
                            // One goes to another thread to free.
                            tx.send(live.pop().unwrap()).unwrap();
                        }
                    });
                }
                drop(tx);
                // Frees on this thread, racing the others.
                for a in rx {
                    drop(a);
                }
            });
            arena.check_invariants().unwrap();
            let s = arena.stats();
            assert_eq!((s.live_bytes, s.live_buffers), (0, 0), "round {round}");
        }
        // The first boundary found the heap empty: it moved at least then.
        assert!(arena.stats().heap_moves > 0);
    }
}
