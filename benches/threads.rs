//! Threads sharing one arena: 1, 2 and 8 threads run the same mixed,
//! small-dominated workload (free one of their slots, allocate a new size
//! there, write its first and last byte) on ONE shared `ExecutionArena`
//! through allocator-api2, against mimalloc and the system allocator from
//! the same threads, in one process.
//!
//! `cargo bench --bench threads` (add `-- --quick` for a shorter run).
//! Criterion reports the time per batch of `OPS` operations *per thread*
//! (all threads run their batches at once), so the ratio between back ends
//! at one thread count is the ratio of their costs; the throughput of n
//! threads relative to one is n × (one-thread time / n-thread time), bounded
//! by the free cores. The size mix: 90 in 100 operations draw from 64 B to 1 KiB,
//! 9 from 1 KiB to 64 KiB, 1 from 64 KiB to 1 MiB.
//!
//! `WARMARENA_BENCH_THREADS=1,4,32` runs other thread counts instead.
//!
//! After the group, the share of operations that took the arena's shared
//! lock at each thread count (`ArenaStats::locked_operations`).
//!
//! Group `handoff`: producers allocate small buffers and send them to one
//! consumer thread that frees them (`tcache/remote.rs`), per buffer; then
//! the arena's locks per buffer, and the same as a fastest-of-rounds table
//! with the back ends taking turns.
//!
//! Group `grow`: threads building `Vec`s by `push` on one arena (moved
//! growths: a new buffer, a copy, a free), against mimalloc and the
//! system allocator; then the arena's locks per moved growth.
//!
//! Table `stream` (no criterion group: a fastest-of-rounds table): a pool
//! of threads that stay for the whole table, each allocating 4096 small
//! buffers, writing each and freeing them in the order they came, round
//! after round, on one shared arena, on an arena each, on mimalloc and on
//! the system allocator; then the shared arena's locks per 100
//! operations. The filter `'^stream'` skips the
//! other groups' timings (their lock counts and the handoff table still
//! print).
//!
//! Group `beside_lock`: one thread's 256 B allocate+free pairs while a
//! second thread does 1 MiB pairs on the same allocator (on the arena those
//! take its lock), per small pair. A cached hit that read a line the lock
//! holder writes would pay a miss per pair here and not when alone.

#[path = "common/arena.rs"]
mod arena;
use allocator_api2::alloc::{Allocator, Global, Layout};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};
use warmarena::ExecutionArena;

/// Operations per thread per measured batch.
const OPS: usize = 20_000;
/// Live slots per thread.
const SLOTS: usize = 64;

fn sizes(seed: u64) -> Vec<usize> {
    let mut x = seed | 1;
    (0..4096)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let r = (x >> 11) as usize;
            match r % 100 {
                0..=89 => 64 + r / 100 % 960,
                90..=98 => 1024 + r / 100 % (63 << 10),
                _ => (64 << 10) + r / 100 % (960 << 10),
            }
        })
        .collect()
}

/// One thread's batch through allocator `a`: `OPS` frees, allocations and writes.
fn batch<A: Allocator>(a: &A, slots: &mut [(NonNull<u8>, Layout)], sizes: &[usize], k: &mut usize) {
    for _ in 0..OPS {
        let j = *k % slots.len();
        let size = sizes[*k % sizes.len()];
        *k += 1;
        let (p, l) = slots[j];
        // SAFETY: `p` was allocated by `a` with layout `l` and is freed once.
        unsafe { a.deallocate(p, l) };
        let l = Layout::from_size_align(size, 16).unwrap();
        let p = a.allocate(l).unwrap().cast::<u8>();
        // SAFETY: `p` holds `size` bytes.
        unsafe {
            p.as_ptr().write_volatile(1);
            p.as_ptr().add(size - 1).write_volatile(2);
        }
        slots[j] = (black_box(p), l);
    }
}

/// Runs `iters` batches on each of `threads` threads at once, all on `a`;
/// returns the wall time of the slowest thread's batches.
fn run<A: Allocator + Sync + Clone + Send + 'static>(a: A, threads: usize, iters: u64) -> Duration {
    let start = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let a = a.clone();
            let start = Arc::clone(&start);
            std::thread::spawn(move || {
                let sz = sizes(0x9E37_79B9 + t as u64 * 7919);
                let l = Layout::from_size_align(64, 16).unwrap();
                let mut slots: Vec<_> = (0..SLOTS)
                    .map(|_| (a.allocate(l).unwrap().cast::<u8>(), l))
                    .collect();
                let mut k = 0usize;
                // One batch to warm every cache, then the measured ones.
                batch(&a, &mut slots, &sz, &mut k);
                start.wait();
                let t0 = Instant::now();
                for _ in 0..iters {
                    batch(&a, &mut slots, &sz, &mut k);
                }
                let dt = t0.elapsed();
                for (p, l) in slots {
                    // SAFETY: each slot is a live allocation of `a` with layout `l`.
                    unsafe { a.deallocate(p, l) };
                }
                dt
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().unwrap())
        .max()
        .unwrap()
}

#[derive(Clone, Copy)]
struct Mi;
// SAFETY: forwards to mimalloc's GlobalAlloc, whose contract matches.
unsafe impl Allocator for Mi {
    fn allocate(&self, l: Layout) -> Result<NonNull<[u8]>, allocator_api2::alloc::AllocError> {
        use std::alloc::GlobalAlloc;
        // SAFETY: non-zero layout (every size here is at least 64 B).
        let p = unsafe { mimalloc::MiMalloc.alloc(l) };
        NonNull::new(p)
            .map(|p| NonNull::slice_from_raw_parts(p, l.size()))
            .ok_or(allocator_api2::alloc::AllocError)
    }
    unsafe fn deallocate(&self, p: NonNull<u8>, l: Layout) {
        use std::alloc::GlobalAlloc;
        // SAFETY: forwarded contract.
        unsafe { mimalloc::MiMalloc.dealloc(p.as_ptr(), l) }
    }
}

/// The thread counts of group `threads`: 1, 2 and 8, or the list in
/// `WARMARENA_BENCH_THREADS` (comma-separated, e.g. `1,4,32,64`).
fn thread_counts() -> Vec<usize> {
    std::env::var("WARMARENA_BENCH_THREADS")
        .ok()
        .map(|v| {
            v.split(',')
                .filter_map(|n| n.trim().parse().ok())
                .filter(|&n| n > 0)
                .collect::<Vec<usize>>()
        })
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| vec![1, 2, 8])
}

fn threads(c: &mut Criterion) {
    let arena = arena::exec_arena();
    let mut g = c.benchmark_group("threads");
    g.throughput(Throughput::Elements(OPS as u64));
    let counts = thread_counts();
    for &n in &counts {
        let a = arena.clone();
        g.bench_with_input(BenchmarkId::new("warmarena", n), &n, |b, &n| {
            b.iter_custom(|iters| run(a.clone(), n, iters))
        });
        g.bench_with_input(BenchmarkId::new("mimalloc", n), &n, |b, &n| {
            b.iter_custom(|iters| run(Mi, n, iters))
        });
        g.bench_with_input(BenchmarkId::new("system", n), &n, |b, &n| {
            b.iter_custom(|iters| run(Global, n, iters))
        });
    }
    g.finish();
    let s = arena.stats();
    assert_eq!(s.live_buffers, 0, "every buffer was returned");
    // How often the workload takes the arena's shared lock (a count, not
    // a time): what bounds the cores one arena can serve at once.
    for &n in &counts {
        let before = arena.stats().locked_operations;
        run(arena.clone(), n, 5);
        let locks = arena.stats().locked_operations - before - 1;
        let ops = (n * (5 + 1) * OPS * 2) as f64; // warm-up batch included; a free and an allocation each
        println!(
            "threads/{n}: {locks} arena locks for {ops} allocations and frees ({:.2} per 100)",
            100.0 * locks as f64 / ops
        );
    }
}

/// `iters` small pairs on this thread through `a`, with a second thread
/// doing 1 MiB pairs through `a` until they are done (none when `alone`).
fn small_beside_large<A: Allocator + Sync>(a: &A, iters: u64, alone: bool) -> Duration {
    let small = Layout::from_size_align(256, 64).unwrap();
    let large = Layout::from_size_align(1 << 20, 64).unwrap();
    let pair = |l: Layout| {
        let p = a.allocate(l).unwrap().cast::<u8>();
        // SAFETY: `p` was just allocated by `a` with layout `l`.
        unsafe { a.deallocate(black_box(p), l) };
    };
    pair(small);
    pair(large);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        if !alone {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    pair(large);
                }
            });
        }
        let t0 = Instant::now();
        for _ in 0..iters {
            pair(small);
        }
        let dt = t0.elapsed();
        stop.store(true, Ordering::Relaxed);
        dt
    })
}

fn beside_lock(c: &mut Criterion) {
    let arena = arena::exec_arena();
    let mut g = c.benchmark_group("beside_lock");
    g.throughput(Throughput::Elements(1));
    for alone in [true, false] {
        let name = if alone { "alone" } else { "beside" };
        g.bench_function(BenchmarkId::new("warmarena", name), |b| {
            b.iter_custom(|iters| small_beside_large(&arena, iters, alone))
        });
        g.bench_function(BenchmarkId::new("mimalloc", name), |b| {
            b.iter_custom(|iters| small_beside_large(&Mi, iters, alone))
        });
    }
    g.finish();
    assert_eq!(arena.stats().live_buffers, 0, "every buffer was returned");
    handoff_rounds(&arena);
}

/// Group `handoff` again as a table: each back end's fastest of
/// `HANDOFF_ROUNDS` rounds of 200 batches per producer, the back ends
/// taking turns (rotating who goes first), so that a slow second on this
/// shared VM falls on all of them alike (criterion times each in a block
/// of its own; `common/rounds.rs`). µs per batch of 64.
fn handoff_rounds(arena: &ExecutionArena) {
    const HANDOFF_ROUNDS: usize = 25;
    println!(
        "\nhandoff, µs per batch of {HANDOFF_BATCH}, fastest of {HANDOFF_ROUNDS} interleaved rounds:"
    );
    println!("| producers | warmarena | mimalloc | system | warmarena / mimalloc |");
    println!("|---:|---:|---:|---:|---:|");
    for n in [1usize, 2, 4] {
        let per_batch = |t: Duration| t.as_secs_f64() * 1e6 / (n * 200) as f64;
        let best = rounds::fastest_turns(
            &[
                &|| per_batch(handoff(arena, n, 200)),
                &|| per_batch(handoff(&Mi, n, 200)),
                &|| per_batch(handoff(&Global, n, 200)),
            ],
            HANDOFF_ROUNDS,
        );
        println!(
            "| {n} | {:.2} | {:.2} | {:.2} | {:.2}x |",
            best[0],
            best[1],
            best[2],
            best[0] / best[1]
        );
    }
}

#[path = "common/rounds.rs"]
#[allow(dead_code)] // only `fastest_turns` is used here
mod rounds;

/// A raw buffer sent to another thread (the bench's own pointers).
struct Sent(NonNull<u8>, Layout);
// SAFETY: the receiving thread becomes the buffer's only user.
unsafe impl Send for Sent {}

/// Buffers per message in [`handoff`].
const HANDOFF_BATCH: usize = 64;

/// `producers` threads allocate `rounds` batches of small buffers each
/// (64 B to 1 KiB, one write) and send them to one consumer thread, which
/// frees every one: a pipeline stage dropping what another allocated.
/// Returns the wall time.
fn handoff<A: Allocator + Sync>(a: &A, producers: usize, rounds: usize) -> Duration {
    let t0 = Instant::now();
    std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Sent>>(64);
        for t in 0..producers {
            let tx = tx.clone();
            s.spawn(move || {
                let sz = sizes(0x5EED + t as u64);
                let mut k = t * 977;
                for _ in 0..rounds {
                    let batch = (0..HANDOFF_BATCH)
                        .map(|_| {
                            k += 1;
                            let l =
                                Layout::from_size_align(64 + sz[k % sz.len()] % 960, 16).unwrap();
                            let p = a.allocate(l).unwrap().cast::<u8>();
                            // SAFETY: `p` holds at least 64 bytes.
                            unsafe { p.as_ptr().write_volatile(1) };
                            Sent(p, l)
                        })
                        .collect();
                    tx.send(batch).unwrap();
                }
            });
        }
        drop(tx);
        for batch in rx {
            for Sent(p, l) in batch {
                // SAFETY: allocated by `a` with layout `l`, freed once, here.
                unsafe { a.deallocate(p, l) };
            }
        }
    });
    t0.elapsed()
}

/// Group `handoff`: 1, 2 and 4 producers sending their buffers to one
/// consumer that frees them, per buffer. Afterwards the arena locks per
/// buffer (before remote frees, every free took the lock: 1.06).
fn handoffs(c: &mut Criterion) {
    let arena = arena::exec_arena();
    let mut g = c.benchmark_group("handoff");
    g.throughput(Throughput::Elements(HANDOFF_BATCH as u64));
    for n in [1usize, 2, 4] {
        g.bench_with_input(BenchmarkId::new("warmarena", n), &n, |b, &n| {
            b.iter_custom(|iters| handoff(&arena, n, (iters as usize).div_ceil(n)))
        });
        g.bench_with_input(BenchmarkId::new("mimalloc", n), &n, |b, &n| {
            b.iter_custom(|iters| handoff(&Mi, n, (iters as usize).div_ceil(n)))
        });
        g.bench_with_input(BenchmarkId::new("system", n), &n, |b, &n| {
            b.iter_custom(|iters| handoff(&Global, n, (iters as usize).div_ceil(n)))
        });
    }
    g.finish();
    for n in [1usize, 2, 4] {
        let before = arena.stats().locked_operations;
        handoff(&arena, n, 200);
        let locks = arena.stats().locked_operations - before - 1;
        let buffers = (n * 200 * HANDOFF_BATCH) as f64;
        println!(
            "handoff/{n}: {locks} arena locks for {buffers} buffers ({:.3} per buffer)",
            locks as f64 / buffers
        );
    }
    assert_eq!(arena.stats().live_buffers, 0, "every buffer was returned");
}

/// Vectors grown by `push` per thread in one batch of group `grow`.
const VECS: usize = 2_000;

/// One thread's batch of group `grow`: `VECS` vectors of `u32` built by
/// `push` on `a` (16 to 215 elements, so every one moves several times:
/// allocator-api2's `grow`, a new buffer and a copy), each dropped.
fn grow_batch<A: Allocator + Copy>(a: A, seed: usize) {
    for r in 0..VECS {
        let mut v: allocator_api2::vec::Vec<u32, A> = allocator_api2::vec::Vec::new_in(a);
        for i in 0..16 + (r + seed) % 200 {
            v.push(black_box(i as u32));
        }
        black_box(&v);
    }
}

/// `iters` batches of [`grow_batch`] on each of `threads` threads at once;
/// the wall time.
fn grow_on<A: Allocator + Copy + Send + Sync>(a: A, threads: usize, iters: u64) -> Duration {
    let t = Instant::now();
    std::thread::scope(|s| {
        for k in 0..threads {
            s.spawn(move || {
                for _ in 0..iters {
                    grow_batch(a, k);
                }
            });
        }
    });
    t.elapsed()
}

/// Group `grow`: threads building vectors by `push` on one arena (every
/// moved growth counts a copy in `ArenaStats::copies`), per batch of
/// `VECS` vectors per thread; then the arena's locks per moved growth.
fn grow(c: &mut Criterion) {
    let arena = arena::exec_arena();
    let mut g = c.benchmark_group("grow");
    g.throughput(Throughput::Elements(VECS as u64));
    let counts = thread_counts();
    for &n in &counts {
        g.bench_with_input(BenchmarkId::new("warmarena", n), &n, |b, &n| {
            b.iter_custom(|iters| grow_on(&arena, n, iters))
        });
        g.bench_with_input(BenchmarkId::new("mimalloc", n), &n, |b, &n| {
            b.iter_custom(|iters| grow_on(Mi, n, iters))
        });
        g.bench_with_input(BenchmarkId::new("system", n), &n, |b, &n| {
            b.iter_custom(|iters| grow_on(Global, n, iters))
        });
    }
    g.finish();
    for &n in &counts {
        let before = arena.stats();
        grow_on(&arena, n, 2);
        let after = arena.stats();
        let locks = after.locked_operations - before.locked_operations - 1;
        let moves = after.copies - before.copies;
        println!(
            "grow/{n}: {locks} arena locks for {moves} moved growths ({:.4} per growth)",
            locks as f64 / moves as f64
        );
    }
    assert_eq!(arena.stats().live_buffers, 0, "every buffer was returned");
}

/// Buffers each thread allocates before it frees them, in [`stream_round`].
const STREAM_LIVE: usize = 4096;

/// One round through `a`: allocate [`STREAM_LIVE`] small buffers, write
/// each, then free them in the order they came (a kernel building a
/// temporary structure and dropping it). Sizes: 6 in 10 are 32 B, 3 in 10
/// 64 B-256 B, 1 in 10 256 B-1 KiB, drawn from `x`, which goes on from
/// round to round (no two rounds alike).
fn stream_round<A: Allocator>(a: &A, x: &mut u64, live: &mut Vec<(NonNull<u8>, Layout)>) {
    for _ in 0..STREAM_LIVE {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        let r = (*x >> 11) as usize;
        let size = match r % 10 {
            0..=5 => 32,
            6..=8 => 64 + r / 10 % 192,
            _ => 256 + r / 10 % 768,
        };
        let l = Layout::from_size_align(size, 8).unwrap();
        let p = a.allocate(l).unwrap().cast::<u8>();
        // SAFETY: `p` holds `size` bytes.
        unsafe { p.as_ptr().write_volatile(1) };
        live.push((p, l));
    }
    for (p, l) in live.drain(..) {
        // SAFETY: allocated above by `a` with `l`, freed once.
        unsafe { a.deallocate(p, l) };
    }
}

/// The back ends of table `stream`, by number: one shared arena, an
/// arena each, mimalloc, the system allocator.
const STREAM_BACKENDS: usize = 4;

/// Threads that stay for every round of table `stream`, as a runtime's
/// pool does: each waits for a back end's number, runs its rounds through
/// it and reports when it started and ended.
struct StreamPool<'a> {
    threads: usize,
    go: Barrier,
    done: Barrier,
    /// The back end of the next rounds; [`STREAM_BACKENDS`] to stop.
    job: std::sync::atomic::AtomicUsize,
    spans: std::sync::Mutex<Vec<(Instant, Instant)>>,
    shared: &'a ExecutionArena,
    each: &'a [ExecutionArena],
}

impl StreamPool<'_> {
    /// Thread `t`'s loop: rounds through each back end it is sent to.
    fn serve(&self, t: usize, rounds: usize) {
        let mut live: Vec<(NonNull<u8>, Layout)> = Vec::with_capacity(STREAM_LIVE);
        let mut x = 0x5EED_u64 + t as u64;
        loop {
            self.go.wait();
            let job = self.job.load(Ordering::Acquire);
            if job >= STREAM_BACKENDS {
                return;
            }
            let t0 = Instant::now();
            for _ in 0..rounds {
                match job {
                    0 => stream_round(self.shared, &mut x, &mut live),
                    1 => stream_round(&self.each[t], &mut x, &mut live),
                    2 => stream_round(&Mi, &mut x, &mut live),
                    _ => stream_round(&Global, &mut x, &mut live),
                }
            }
            self.spans.lock().unwrap().push((t0, Instant::now()));
            self.done.wait();
        }
    }

    /// Wall ns per allocation or free of all threads together, running
    /// their rounds through back end `job`: from the first thread's start
    /// to the last one's end (the threads time themselves).
    fn run(&self, job: usize, rounds: usize) -> f64 {
        self.job.store(job, Ordering::Release);
        self.go.wait();
        self.done.wait();
        let spans: Vec<_> = self.spans.lock().unwrap().drain(..).collect();
        let first = spans.iter().map(|s| s.0).min().unwrap();
        let last = spans.iter().map(|s| s.1).max().unwrap();
        (last - first).as_nanos() as f64 / (self.threads * rounds * STREAM_LIVE * 2) as f64
    }
}

/// Table `stream`: a pool of threads streaming small buffers
/// ([`stream_round`]) through one shared arena, through an arena each,
/// through mimalloc and through the system allocator, each back end's
/// fastest of `STREAM_ROUNDS` interleaved turns (`common/rounds.rs`) of
/// `PER_TURN` rounds, in wall ns per operation of all threads together;
/// then the shared arena's locks per 100 operations. Where the shared
/// arena pays for its one lock: every thread's bins overflow and run dry
/// once per bin's worth, and refill or flush under the lock the other
/// threads want.
fn stream(_: &mut Criterion) {
    const STREAM_ROUNDS: usize = 9;
    const PER_TURN: usize = 20;
    let shared = arena::exec_arena();
    let counts = thread_counts();
    let each: Vec<ExecutionArena> = (0..counts.iter().copied().max().unwrap_or(1))
        .map(|_| arena::exec_arena())
        .collect();
    println!("\nstream, wall ns per allocation or free (all threads' together), fastest of {STREAM_ROUNDS} interleaved turns:");
    println!("| threads | one arena | an arena each | mimalloc | system | one arena / mimalloc | one arena / an arena each | one arena's locks per 100 ops |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    for &n in &counts {
        let pool = StreamPool {
            threads: n,
            go: Barrier::new(n + 1),
            done: Barrier::new(n + 1),
            job: std::sync::atomic::AtomicUsize::new(0),
            spans: std::sync::Mutex::new(Vec::new()),
            shared: &shared,
            each: &each,
        };
        std::thread::scope(|s| {
            for t in 0..n {
                let pool = &pool;
                s.spawn(move || pool.serve(t, PER_TURN));
            }
            let best = rounds::fastest_turns(
                &[
                    &|| pool.run(0, PER_TURN),
                    &|| pool.run(1, PER_TURN),
                    &|| pool.run(2, PER_TURN),
                    &|| pool.run(3, PER_TURN),
                ],
                STREAM_ROUNDS,
            );
            let before = shared.stats().locked_operations;
            pool.run(0, PER_TURN);
            let locks = shared.stats().locked_operations - before - 1;
            pool.job.store(STREAM_BACKENDS, Ordering::Release);
            pool.go.wait();
            let ops = (n * PER_TURN * STREAM_LIVE * 2) as f64;
            println!(
                "| {n} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2}x | {:.2}x | {:.2} |",
                best[0],
                best[1],
                best[2],
                best[3],
                best[0] / best[2],
                best[0] / best[1],
                100.0 * locks as f64 / ops
            );
        });
    }
    assert_eq!(shared.stats().live_buffers, 0, "every buffer was returned");
}

criterion_group!(benches, threads, beside_lock, handoffs, grow, stream);
criterion_main!(benches);
