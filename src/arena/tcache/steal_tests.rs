//! Another thread's spill taken before new memory (`steal.rs`,
//! `spill_path.rs`) against its promises: a request takes what a spill of
//! its class holds instead of new memory, `stats()` and the invariants
//! stay exact while the spill's thread has not settled and after it has,
//! an arena dropped before the settle is freed once, and tasks that move
//! between a pool's workers run warm after their first runs.

use crate::arena::shared::destroyed;
use crate::arena::tcache::bin::BIN_SLOTS;
use crate::{ArenaConfig, ExecutionArena};
use std::sync::{Arc, Barrier};

fn arena() -> ExecutionArena {
    ExecutionArena::with_config(
        ArenaConfig::default()
            .run_ownership(false)
            .huge_pages(false),
    )
}

/// Buffers a streaming thread allocates and then frees: 2000 of 32 bytes
/// (160 under Miri) fit the 32-byte class's spill (4096), less the bin's
/// share, and pass the bin (64).
const STREAK: usize = if cfg!(miri) { 160 } else { 2000 };

/// `n` buffers of `size` bytes from `a`, all live, then freed in order.
fn stream(a: &ExecutionArena, n: usize, size: usize) {
    let v: Vec<_> = (0..n).map(|_| a.allocate(size, 8).unwrap()).collect();
    drop(v);
}

/// A thread that streams [`STREAK`] buffers of 32 bytes through `a` (its
/// spill keeps all but its bin's share), meets the caller at `step`, then
/// runs `then` with its handle.
fn spilled_thread(
    a: &ExecutionArena,
    step: &Arc<Barrier>,
    then: impl FnOnce(ExecutionArena, &Barrier) + Send + 'static,
) -> std::thread::JoinHandle<()> {
    let (a2, s2) = (a.clone(), Arc::clone(step));
    std::thread::spawn(move || {
        stream(&a2, STREAK, 32);
        s2.wait();
        then(a2, &s2);
    })
}

/// Buffers other threads took from caches that have not settled them.
fn unsettled(a: &ExecutionArena) -> usize {
    a.core.lock().stolen_buffers
}

#[test]
fn a_request_takes_another_threads_spill_before_new_memory() {
    let a = arena();
    let step = Arc::new(Barrier::new(2));
    let t = spilled_thread(&a, &step, |a2, s2| {
        s2.wait(); // taken there
        stream(&a2, 2 * BIN_SLOTS, 32); // past its bin: a locked operation
        s2.wait(); // settled here
        s2.wait(); // counted there
    });
    step.wait();
    let s = a.stats();
    assert_eq!((s.live_bytes, s.retained_bytes), (0, STREAK * 32));
    let cold = s.cold_allocations;
    let v: Vec<_> = (0..STREAK).map(|_| a.allocate(32, 8).unwrap()).collect();
    let s = a.stats();
    let new = (s.cold_allocations - cold) as usize;
    // Only what the other thread's bin keeps (one bin at most) is new.
    assert!(new <= BIN_SLOTS, "{new} new buffers, the spill not taken");
    assert!(unsettled(&a) > 0, "taken from the spill, not yet settled");
    assert_eq!((s.live_bytes, s.live_buffers), (STREAK * 32, STREAK));
    assert_eq!(s.retained_buffers, new, "the other thread's bin");
    assert_eq!(s.retained_bytes, new * 32);
    assert_eq!(a.check_invariants(), Ok(()));
    step.wait();
    step.wait();
    assert_eq!(
        unsettled(&a),
        0,
        "settled at its thread's next locked operation"
    );
    let s2 = a.stats();
    let more = (s2.cold_allocations - s.cold_allocations) as usize;
    assert_eq!(
        (s2.live_bytes, s2.live_buffers),
        (s.live_bytes, s.live_buffers)
    );
    assert_eq!(s2.retained_buffers, new + more);
    assert_eq!(a.check_invariants(), Ok(()));
    drop(v);
    let s = a.stats();
    assert_eq!((s.live_bytes, s.live_buffers), (0, 0));
    assert_eq!(s.retained_buffers, STREAK + new + more);
    step.wait();
    t.join().unwrap();
    assert_eq!(a.check_invariants(), Ok(()));
    let st = a.core.lock();
    assert_eq!(
        st.cached_bytes.get(),
        st.depot.bytes(),
        "every cache gave back"
    );
}

#[test]
fn an_arena_dropped_before_its_stolen_buffers_settle_is_freed_once() {
    let a = arena();
    let id = a.core.id;
    let step = Arc::new(Barrier::new(2));
    let (a2, s2) = (a.clone(), Arc::clone(&step));
    let t = std::thread::spawn(move || {
        stream(&a2, STREAK, 32);
        // Before the main thread's drop, so that the main thread's is the
        // last handle and flushes its own cache.
        drop(a2);
        s2.wait(); // spilled and dropped here
        s2.wait(); // taken and dropped there
    });
    step.wait();
    let v: Vec<_> = (0..STREAK).map(|_| a.allocate(32, 8).unwrap()).collect();
    assert!(unsettled(&a) > 0, "taken from the spill, not yet settled");
    drop(v);
    drop(a);
    assert_eq!(destroyed::count(id), 0, "the other thread's cache keeps it");
    step.wait();
    t.join().unwrap();
    // Its exit settled, gave back, and the last one out freed the body.
    assert_eq!(destroyed::count(id), 1, "freed exactly once");
}

#[test]
fn a_spill_whose_thread_owes_a_trim_is_released_not_taken() {
    // A trim on the main thread: the other thread releases its spill at
    // its next operation, so a request before that takes new memory
    // rather than keep those pages.
    let a = arena();
    let step = Arc::new(Barrier::new(2));
    let t = spilled_thread(&a, &step, |a2, s2| {
        s2.wait(); // trimmed and requested there
        drop(a2.allocate(32, 8).unwrap());
        s2.wait(); // honoured here
    });
    step.wait();
    a.trim();
    let cold = a.stats().cold_allocations;
    let v: Vec<_> = (0..STREAK).map(|_| a.allocate(32, 8).unwrap()).collect();
    assert_eq!(
        a.stats().cold_allocations - cold,
        STREAK as u64,
        "nothing taken"
    );
    assert_eq!(unsettled(&a), 0);
    step.wait();
    step.wait();
    let s = a.stats();
    assert_eq!(
        s.trimmed_bytes,
        STREAK * 32,
        "every spilled buffer released"
    );
    assert_eq!((s.live_buffers, s.retained_buffers), (STREAK, 1));
    drop(v);
    t.join().unwrap();
    assert_eq!(a.check_invariants(), Ok(()));
}

#[test]
fn tasks_moving_between_workers_run_warm_after_their_first_runs() {
    // Each of 4 workers (2 under Miri) streams one task's buffers a run,
    // each task a class
    // of its own, and the tasks move on by one worker each run: the worker
    // that now runs a task finds its buffers in the spill of the worker
    // that ran it last. Before the spills could be taken every later run
    // took new memory for nearly every buffer (the spill holds a task's
    // whole streak); now only what the other workers' bins keep (one bin
    // a class and worker at most).
    const WORKERS: usize = if cfg!(miri) { 2 } else { 4 };
    const RUNS: usize = if cfg!(miri) { 3 } else { 5 };
    let a = arena();
    let step = Arc::new(Barrier::new(WORKERS + 1));
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let (a, step) = (a.clone(), Arc::clone(&step));
            std::thread::spawn(move || {
                for r in 0..RUNS {
                    step.wait();
                    let task = (w + r) % WORKERS;
                    stream(&a, STREAK, 32 + 16 * task);
                    step.wait();
                }
            })
        })
        .collect();
    let mut cold = Vec::new();
    let mut last = a.stats().cold_allocations;
    for _ in 0..RUNS {
        step.wait();
        step.wait();
        let s = a.stats();
        cold.push((s.cold_allocations - last) as usize);
        last = s.cold_allocations;
        assert_eq!(s.live_buffers, 0);
    }
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(cold[0], WORKERS * STREAK, "the first run is cold");
    let bound = WORKERS * (WORKERS - 1) * BIN_SLOTS;
    for (r, &n) in cold.iter().enumerate().skip(1) {
        assert!(
            n <= bound,
            "run {r}: {n} new buffers (bound {bound}): {cold:?}"
        );
    }
    assert_eq!(a.check_invariants(), Ok(()));
}
