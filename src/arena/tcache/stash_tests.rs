//! The arena's stash of free large buffers (`stash.rs`) against its
//! promises: with two or more threads on the arena a large free its slot
//! refuses is stashed without the lock and another thread's request
//! takes it without the lock, counted exactly; on one thread nothing is
//! stashed; `trim`, a cap and the last handle reach stashed buffers.

use super::stash_totals;
use crate::arena::shared::destroyed;
use crate::size_class::{capacity, class_of};
use crate::{ArenaConfig, IoArena};
use allocator_api2::vec::Vec as AVec;
use std::sync::mpsc;

type Job = Box<dyn FnOnce(&IoArena) + Send>;

/// A second thread with a cache on the arena, running jobs on request.
struct Other {
    jobs: mpsc::Sender<Option<Job>>,
    done: mpsc::Receiver<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Other {
    fn new(a: &IoArena) -> Self {
        let (jobs, rx) = mpsc::channel::<Option<Job>>();
        let (tx, done) = mpsc::channel();
        let a = a.clone();
        let thread = std::thread::spawn(move || {
            // Its cache, registered with the arena.
            drop(a.allocate(64, 8).unwrap());
            tx.send(()).unwrap();
            while let Ok(Some(job)) = rx.recv() {
                job(&a);
                tx.send(()).unwrap();
            }
        });
        done.recv().unwrap();
        Other { jobs, done, thread }
    }

    fn run(&self, job: impl FnOnce(&IoArena) + Send + 'static) {
        self.jobs.send(Some(Box::new(job))).unwrap();
        self.done.recv().unwrap();
    }

    fn stop(self) {
        self.jobs.send(None).unwrap();
        self.thread.join().unwrap();
    }
}

fn io() -> IoArena {
    IoArena::with_config(
        ArenaConfig::default()
            .run_ownership(false)
            .huge_pages(false),
    )
}

const SIZE: usize = 64 << 10;

fn cap() -> usize {
    capacity(class_of(SIZE).unwrap())
}

/// Two buffers of `size` bytes lent to this thread, freed: the first
/// into this thread's slot, the second (the slot holds one) refused by
/// it. Returns the second's address.
fn free_two(a: &IoArena, size: usize) -> usize {
    let x = a.allocate(size, 64).unwrap();
    let y = a.allocate(size, 64).unwrap();
    let p = y.as_ptr() as usize;
    drop(x);
    drop(y);
    p
}

#[test]
fn with_two_threads_a_refused_large_free_is_stashed_and_taken_elsewhere_without_the_lock() {
    let a = io();
    let other = Other::new(&a);
    let x = a.allocate(SIZE, 64).unwrap();
    let y = a.allocate(SIZE, 64).unwrap();
    let py = y.as_ptr() as usize;
    drop(x);
    let before = a.stats();
    drop(y);
    let s = a.stats();
    // The one locked operation is `stats()` itself.
    assert_eq!(s.locked_operations, before.locked_operations + 1);
    assert_eq!(stash_totals(&a.core), (cap(), 1));
    assert_eq!(s.frees, before.frees + 1);
    assert_eq!(s.live_bytes, 0);
    assert_eq!(s.retained_bytes, before.retained_bytes + cap());
    let (tx, rx) = mpsc::channel();
    other.run(move |a| {
        let l = a.stats().locked_operations;
        let z = a.allocate(SIZE, 64).unwrap();
        let locks = a.stats().locked_operations - l - 1;
        tx.send((z.as_ptr() as usize, z.served_warm(), locks, a.stats()))
            .unwrap();
    });
    let (pz, warm, locks, during) = rx.recv().unwrap();
    assert_eq!(
        (pz, warm, locks),
        (py, true, 0),
        "the stashed buffer, no lock"
    );
    assert_eq!(during.live_bytes, cap());
    assert_eq!(during.warm_allocations, s.warm_allocations + 1);
    assert_eq!(during.cold_allocations, s.cold_allocations);
    assert_eq!(stash_totals(&a.core), (0, 0));
    other.stop();
    let s = a.stats();
    assert_eq!((s.live_bytes, s.live_buffers), (0, 0));
    assert_eq!(a.check_invariants(), Ok(()));
}

#[test]
fn a_short_class_takes_a_stashed_buffer_up_to_twice_its_size_and_no_larger() {
    let a = io();
    let other = Other::new(&a);
    // Stash one buffer of 1.5 times SIZE's class, another of 2.5 times it.
    for size in [SIZE * 3 / 2, SIZE * 5 / 2] {
        free_two(&a, size);
    }
    let one_and_half = capacity(class_of(SIZE * 3 / 2).unwrap());
    let two_and_half = capacity(class_of(SIZE * 5 / 2).unwrap());
    assert_eq!(stash_totals(&a.core), (one_and_half + two_and_half, 2));
    let (tx, rx) = mpsc::channel();
    other.run(move |a| {
        let l = a.stats().locked_operations;
        let z = a.allocate(SIZE, 64).unwrap();
        let w = a.allocate(SIZE, 64).unwrap();
        let locks = a.stats().locked_operations - l - 1;
        tx.send((z.capacity(), z.served_warm(), w.served_warm(), locks))
            .unwrap();
    });
    let (cap_z, warm_z, warm_w, locks) = rx.recv().unwrap();
    assert_eq!(
        (cap_z, warm_z),
        (one_and_half, true),
        "the stashed buffer of 1.5 times"
    );
    assert!(locks >= 1, "the second request went to the arena");
    assert!(!warm_w, "2.5 times is too large to borrow: a new buffer");
    assert_eq!(stash_totals(&a.core), (two_and_half, 1));
    other.stop();
    let s = a.stats();
    assert_eq!((s.live_bytes, s.live_buffers), (0, 0));
    assert_eq!(a.check_invariants(), Ok(()));
}

/// Through allocator-api2 a free names the layout's class, not the
/// borrowed buffer's: it still finds the slot the buffer was lent to.
#[test]
fn a_borrowed_buffer_freed_by_layout_comes_back_to_its_own_classes_slot_without_the_lock() {
    let a = io();
    let other = Other::new(&a);
    let bigger = SIZE * 3 / 2;
    let py = free_two(&a, bigger);
    assert_eq!(stash_totals(&a.core).1, 1);
    let s_retained = a.stats().retained_bytes;
    let (tx, rx) = mpsc::channel();
    other.run(move |a| {
        let l = a.stats().locked_operations;
        let mut seen = Vec::new();
        // Borrowed from the stash, freed by its short layout; then its
        // own class's request finds it in that class's slot.
        for size in [SIZE, bigger] {
            let v = AVec::<u8, _>::with_capacity_in(size, a);
            seen.push(v.as_ptr() as usize);
        }
        let locks = a.stats().locked_operations - l - 1;
        tx.send((seen, locks, a.stats().retained_bytes)).unwrap();
    });
    let (seen, locks, retained) = rx.recv().unwrap();
    assert_eq!(seen, [py; 2], "the borrowed buffer both times");
    assert_eq!(locks, 0, "taken from the stash, then from its slot");
    assert_eq!(retained, s_retained);
    other.stop();
    let s = a.stats();
    assert_eq!((s.live_bytes, s.live_buffers), (0, 0));
    assert_eq!(a.check_invariants(), Ok(()));
}

/// A stashed buffer not ready for a request of its class (its pages
/// reach only as far as its earlier requests) is not taken without the
/// lock; the locked path then takes it out of the stash and serves the
/// request with it rather than with new memory.
#[test]
fn a_request_beyond_a_stashed_buffers_ready_bytes_gets_it_under_the_lock_not_new_memory() {
    let a = io();
    let other = Other::new(&a);
    let short = SIZE + 1;
    let c = class_of(short).unwrap();
    let long = capacity(c);
    assert!(
        long > short.next_multiple_of(4096),
        "a page beyond the short request's"
    );
    let py = free_two(&a, short);
    assert_eq!(stash_totals(&a.core), (long, 1));
    let before = a.stats();
    let (tx, rx) = mpsc::channel();
    other.run(move |a| {
        let z = a.allocate(long, 64).unwrap();
        // SAFETY: `z` holds `long` bytes.
        unsafe { z.as_ptr().cast_mut().add(long - 1).write(7) };
        tx.send((z.as_ptr() as usize, z.served_warm())).unwrap();
    });
    let (pz, warm) = rx.recv().unwrap();
    assert_eq!((pz, warm), (py, true), "the stashed buffer");
    let s = a.stats();
    assert_eq!(s.cold_allocations, before.cold_allocations, "no new memory");
    assert_eq!(stash_totals(&a.core), (0, 0));
    other.stop();
    assert_eq!(a.stats().live_bytes, 0);
    assert_eq!(a.check_invariants(), Ok(()));
}

#[test]
fn on_one_thread_a_refused_large_free_goes_to_the_arena() {
    let a = io();
    let x = a.allocate(SIZE, 64).unwrap();
    drop(x);
    let before = a.stats();
    free_two(&a, SIZE);
    assert_eq!(stash_totals(&a.core), (0, 0));
    let s = a.stats();
    assert!(s.locked_operations > before.locked_operations + 1);
    assert_eq!((s.live_bytes, s.retained_bytes), (0, 2 * cap()));
}

#[test]
fn trim_and_a_new_cap_return_stashed_buffers_to_the_arena() {
    let a = io();
    let other = Other::new(&a);
    free_two(&a, SIZE);
    assert_eq!(stash_totals(&a.core), (cap(), 1));
    // Both large buffers released (this thread's slot's and the stash's).
    assert!(a.trim() >= 2 * cap());
    assert_eq!(stash_totals(&a.core), (0, 0));
    assert!(
        a.stats().retained_bytes < cap(),
        "only the other thread's small buffer"
    );
    free_two(&a, SIZE);
    assert_eq!(stash_totals(&a.core), (cap(), 1));
    a.set_retention_cap(1 << 30);
    assert_eq!(stash_totals(&a.core), (0, 0));
    assert_eq!(a.check_invariants(), Ok(()));
    other.stop();
    let s = a.stats();
    assert_eq!((s.live_bytes, s.live_buffers), (0, 0));
}

#[test]
fn a_dropped_arena_frees_its_stashed_buffers_exactly_once() {
    let a = io();
    let id = a.core.id;
    let other = Other::new(&a);
    free_two(&a, SIZE);
    assert_eq!(stash_totals(&a.core), (cap(), 1));
    other.stop();
    assert_eq!(destroyed::count(id), 0);
    drop(a);
    assert_eq!(destroyed::count(id), 1, "the last handle drained the stash");
}

#[test]
fn past_two_threads_a_caches_large_budget_is_its_share_and_what_it_refuses_is_stashed() {
    // Three buffers of three budgeted classes: 1 MiB + 768 KiB fit the
    // share of four threads (2 MiB), the 512 KiB one after them does not.
    let sizes = [1 << 20, 768 << 10, 512 << 10];
    let last = capacity(class_of(sizes[2]).unwrap());
    assert!(
        capacity(class_of(sizes[0]).unwrap()) + capacity(class_of(sizes[1]).unwrap())
            <= super::large::budget_for(4)
    );
    assert!(sizes.iter().sum::<usize>() > super::large::budget_for(4));
    for (threads, stashed) in [(2, (0, 0)), (4, (last, 1))] {
        let a = io();
        let others: Vec<Other> = (1..threads).map(|_| Other::new(&a)).collect();
        // Each grant is lent under the lock, whose unlock gives this
        // thread's cache the budget for `threads` threads.
        let bufs: Vec<_> = sizes.iter().map(|&s| a.allocate(s, 64).unwrap()).collect();
        let l = a.stats().locked_operations;
        drop(bufs);
        let s = a.stats();
        assert_eq!(
            stash_totals(&a.core),
            stashed,
            "{threads} threads: the third free's place"
        );
        assert_eq!(
            s.locked_operations,
            l + 1,
            "{threads} threads: no lock but stats()"
        );
        assert_eq!(s.live_bytes, 0);
        others.into_iter().for_each(Other::stop);
    }
}
