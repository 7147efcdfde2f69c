//! Scopes that cover a runtime's worker threads: the process default
//! (`global::set_default`) and thread-life scopes (`global::enter_for_thread`)
//! under the installed scoped global allocator, with rayon as the pool.
//!
//! No test harness (`harness = false`): `main` runs every check in turn,
//! because the checks count the system allocator's calls on every thread
//! (`CountingSystem::calls_all_threads`) and the process's page faults, so
//! no other thread (libtest's own included) may allocate beside them.

use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use warmarena::global::{self, CountingSystem, ScopedGlobal};
use warmarena::ExecutionArena;

#[global_allocator]
static GLOBAL: ScopedGlobal<CountingSystem> = ScopedGlobal::over(CountingSystem);

/// Minor page faults of the whole process so far.
fn process_faults() -> u64 {
    // SAFETY: getrusage writes into the zeroed struct we pass.
    unsafe {
        let mut u: libc::rusage = core::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u.ru_minflt as u64
    }
}

/// One task of the workload: temporaries of 64 KiB to 4 MiB, every byte
/// written, and a checksum.
fn task(k: usize, chunk: &[f32]) -> f64 {
    let mut sum = 0.0f64;
    for size in [16 << 10, 64 << 10, 256 << 10, 1 << 20] {
        // f32 elements: 64 KiB, 256 KiB, 1 MiB, 4 MiB temporaries.
        let mut tmp = vec![0f32; size];
        for (i, t) in tmp.iter_mut().enumerate() {
            *t = chunk[i % chunk.len()] * (k + 1) as f32;
        }
        sum += tmp.iter().step_by(997).map(|&x| x as f64).sum::<f64>();
    }
    sum
}

/// One parallel step: the tasks on the pool, results collected in order.
fn step(pool: &rayon::ThreadPool, input: &[f32]) -> Vec<f64> {
    pool.install(|| {
        input
            .par_chunks(4096)
            .enumerate()
            .map(|(k, chunk)| task(k, chunk))
            .collect()
    })
}

/// A two-thread pool scoped to `arena`, and its threads' handles: a
/// dropped rayon pool does not wait for its workers, and their teardown
/// (thread-local destructors, crossbeam's epoch garbage) frees and
/// allocates in the arena. Once they are joined, nothing but the calling
/// thread touches the arena, so its counts are exact.
fn pool_in(arena: &ExecutionArena) -> (rayon::ThreadPool, Vec<JoinHandle<()>>) {
    let mut workers = Vec::new();
    let a = arena.clone();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .start_handler(move |_| {
            assert!(global::enter_for_thread(&a));
            // A worker's stack grows as deep as rayon's joins nest in a run:
            // touch it once so later, deeper runs fault nothing there either.
            warmarena::faults::pre_touch_stack();
        })
        .spawn_handler(|worker| {
            workers.push(std::thread::Builder::new().spawn(|| worker.run())?);
            Ok(())
        })
        .build()
        .unwrap();
    (pool, workers)
}

fn warm_pool_runs_take_no_fault_and_no_system_allocation() {
    let input: Vec<f32> = (0..64 * 4096).map(|i| (i % 251) as f32 * 0.5).collect();
    // The unscoped result, computed on this thread: a pool made and dropped
    // here would still be tearing its threads down (with system
    // allocations) while the warm runs are counted.
    let reference: Vec<f64> = input
        .chunks(4096)
        .enumerate()
        .map(|(k, c)| task(k, c))
        .collect();

    let arena = ExecutionArena::new();
    let (pool, _workers) = pool_in(&arena);
    let _main = global::enter(&arena);
    let first = step(&pool, &input);
    assert_eq!(first, reference, "same results as unscoped");
    drop(first); // else the first warm run's results need a buffer of their own
    drop(step(&pool, &input)); // a second warm-up run (see below)

    // Which worker runs which task changes from run to run, so one run may
    // not have had both workers inside the same size class at once; a warm
    // run that does would take a buffer the arena never held (a cold
    // allocation: pages to fault, metadata to grow). And a thread's heap
    // owns the runs it allocated from: a worker that collects a step's
    // results (a 512-byte vector) for the first time takes a slot on an
    // untouched page, however many such slots its peer holds. Warm-up
    // therefore is two runs, plus one task on every worker at the same
    // moment and a step's results collected on every worker.
    let all_at_once = std::sync::Barrier::new(2);
    pool.broadcast(|ctx| {
        all_at_once.wait();
        task(ctx.index(), &input[..4096]);
        let results: Vec<f64> = input
            .par_chunks(4096)
            .enumerate()
            .map(|(k, chunk)| task(k, chunk))
            .collect();
        assert_eq!(results.len(), reference.len());
    });
    let (faults0, calls0) = (process_faults(), CountingSystem::calls_all_threads());
    let cold0 = arena.stats().cold_allocations;
    let mut per_run = [(0u64, 0u64); 10];
    for (run, slot) in per_run.iter_mut().enumerate() {
        let (c0, f0) = (arena.stats().cold_allocations, process_faults());
        let out = step(&pool, &input);
        assert!(out == reference, "run {run}");
        *slot = (arena.stats().cold_allocations - c0, process_faults() - f0);
    }
    let faults = process_faults() - faults0;
    let calls = CountingSystem::calls_all_threads() - calls0;
    let cold = arena.stats().cold_allocations - cold0;
    println!("10 warm pool runs: {faults} process faults, {calls} system allocations, {cold} cold arena allocations; (cold, faults) per run: {per_run:?}");
    assert_eq!(calls, 0, "no thread called the system allocator");
    assert_eq!(faults, 0, "no page fault in the whole process");
    drop(_main);
    drop(pool);
}

fn default_serves_threads_without_a_scope_until_cleared() {
    let arena = ExecutionArena::new();
    global::set_default(&arena);
    let before = arena.stats().cold_allocations + arena.stats().warm_allocations;
    let v = std::thread::spawn(|| vec![7u8; 100_000]).join().unwrap();
    let after = arena.stats().cold_allocations + arena.stats().warm_allocations;
    assert!(after > before, "the worker's vector came from the default");
    assert!(arena.stats().live_buffers >= 1);
    global::clear_default();
    let calls = CountingSystem::calls_all_threads();
    let w = std::thread::spawn(|| vec![1u8; 100_000].len())
        .join()
        .unwrap();
    assert_eq!(w, 100_000);
    assert!(
        CountingSystem::calls_all_threads() > calls,
        "after clear_default a worker uses the system allocator"
    );
    assert!(v.iter().all(|&b| b == 7));
    drop(v);
    assert_eq!(
        arena.stats().live_buffers,
        0,
        "the vector went back to its arena"
    );
}

fn default_changes_while_threads_allocate() {
    let arenas = [ExecutionArena::new(), ExecutionArena::new()];
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let workers: Vec<_> = (0..3)
        .map(|t| {
            let (stop, done) = (stop.clone(), done.clone());
            std::thread::spawn(move || {
                let mut kept: Vec<Vec<u64>> = Vec::new();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let v: Vec<u64> = (0..(n % 700 + 1)).map(|i| i ^ t).collect();
                    kept.push(v);
                    if kept.len() > 16 {
                        let old = kept.remove(0);
                        assert!(old.iter().enumerate().all(|(i, &x)| x == i as u64 ^ t));
                    }
                    n += 1;
                    done.fetch_add(1, Ordering::Relaxed);
                }
                n
            })
        })
        .collect();
    // At least 300 changes, and until the workers have done 20 000
    // operations between them (so changes land in the middle of their work).
    let mut k = 0;
    while k < 300 || done.load(Ordering::Relaxed) < 20_000 {
        k += 1;
        match k % 3 {
            0 => global::set_default(&arenas[0]),
            1 => global::set_default(&arenas[1]),
            _ => global::clear_default(),
        }
        std::thread::yield_now();
    }
    global::clear_default();
    stop.store(true, Ordering::Relaxed);
    let ops: u64 = workers.into_iter().map(|w| w.join().unwrap()).sum();
    assert!(ops >= 20_000);
    for a in &arenas {
        assert_eq!(
            a.stats().live_buffers,
            0,
            "every buffer went back, exactly once"
        );
    }
}

fn memory_crosses_between_a_scoped_main_thread_and_pool_workers() {
    let main_arena = ExecutionArena::new();
    let pool_arena = ExecutionArena::new();
    let (pool, workers) = pool_in(&pool_arena);
    // Main allocates in its scope, a worker frees.
    let from_main = global::scope(&main_arena, || vec![3u32; 50_000]);
    assert_eq!(main_arena.stats().live_buffers, 1);
    pool.install(move || drop(from_main));
    assert_eq!(main_arena.stats().live_buffers, 0);
    // A worker allocates in the pool's scope, main frees.
    let from_worker = pool.install(|| vec![4u32; 50_000]);
    drop(pool);
    for w in workers {
        w.join().unwrap();
    }
    assert!(pool_arena.stats().live_buffers >= 1);
    let live = pool_arena.stats().live_buffers;
    drop(from_worker);
    assert_eq!(pool_arena.stats().live_buffers, live - 1);
}

fn pool_threads_exit_with_live_memory_and_outlive_the_owner() {
    // Plain threads first, where every allocation is ours: each keeps a
    // thread-local buffer (freed by its destructor at thread exit) and sends
    // another to the main thread, then exits.
    thread_local! {
        static KEPT: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    let arena = ExecutionArena::new();
    let probe = arena.clone();
    let (tx, rx) = mpsc::channel();
    let threads: Vec<_> = (0..2u8)
        .map(|t| {
            let (a, tx) = (arena.clone(), tx.clone());
            std::thread::spawn(move || {
                assert!(global::enter_for_thread(&a));
                drop(a); // the thread's scope holds the arena from here on
                KEPT.with(|k| *k.borrow_mut() = vec![t; 300_000]);
                tx.send(vec![t; 200_000]).unwrap();
            })
        })
        .collect();
    drop((arena, tx)); // the owner lets go while the threads still run
    for t in threads {
        t.join().unwrap();
    }
    let held: Vec<Vec<u8>> = rx.iter().collect();
    drop(rx); // the channel's blocks were allocated by the senders
    assert_eq!(held.len(), 2);
    assert_eq!(
        probe.stats().live_buffers,
        2,
        "thread-exit frees went back; the sent buffers outlive their threads"
    );
    drop(held);
    assert_eq!(probe.stats().live_buffers, 0, "freed exactly once");

    // A rayon pool whose owner drops the arena before the workers exit;
    // once they are joined the count is exact.
    let arena = ExecutionArena::new();
    let probe = arena.clone();
    let (pool, workers) = pool_in(&arena);
    drop(arena);
    let (tx, rx) = mpsc::channel();
    pool.broadcast(|ctx| tx.send(vec![ctx.index() as u8; 200_000]).unwrap());
    drop((tx, pool));
    for w in workers {
        w.join().unwrap();
    }
    let held: Vec<Vec<u8>> = rx.iter().collect();
    drop(rx);
    assert_eq!(held.len(), 2);
    let live = probe.stats().live_buffers;
    assert!(live >= 2, "the sent buffers outlive the workers");
    drop(held);
    assert_eq!(
        probe.stats().live_buffers,
        live - 2,
        "the sent buffers were freed into the arena, once each"
    );
}

fn main() {
    let checks: [(&str, fn()); 5] = [
        (
            "warm_pool_runs_take_no_fault_and_no_system_allocation",
            warm_pool_runs_take_no_fault_and_no_system_allocation,
        ),
        (
            "default_serves_threads_without_a_scope_until_cleared",
            default_serves_threads_without_a_scope_until_cleared,
        ),
        (
            "default_changes_while_threads_allocate",
            default_changes_while_threads_allocate,
        ),
        (
            "memory_crosses_between_a_scoped_main_thread_and_pool_workers",
            memory_crosses_between_a_scoped_main_thread_and_pool_workers,
        ),
        (
            "pool_threads_exit_with_live_memory_and_outlive_the_owner",
            pool_threads_exit_with_live_memory_and_outlive_the_owner,
        ),
    ];
    for (name, check) in checks {
        check(); // a failed assertion panics: the process exits non-zero
        println!("test {name} ... ok");
    }
    println!("pool_scope: {} passed, 0 failed", checks.len());
}
