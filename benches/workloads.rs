//! Shapes of use that pair and thread benches do not cover, each against
//! mimalloc and the system allocator doing the same in the same process:
//!
//! - `short-lived threads`: rounds of 4 threads that each make 200 mixed
//!   small allocations and free them, then exit (a thread's first use of
//!   an arena makes its cache; its exit gives it back);
//! - `32 arenas in turn`: one thread runs 8 live 256 B buffers on each of
//!   32 arenas in turn (a serving thread running many models' sessions);
//!   the peers run the same operations on their one heap;
//! - `500k live 32 B`: half a million small buffers allocated, then all
//!   freed (more than any thread cache holds: the depot and the lists);
//! - `1-100 KiB random, 500 live`: random sizes across the small classes
//!   and the execution heap, random frees;
//! - `Vec growth`: allocator-api2 `Vec<u64>` pushed to a million elements;
//! - `8 Vecs growing in turn`: eight `Vec<u64>`s pushed one element each
//!   in turn to 128 Ki elements (a decoder's per-layer caches): each one's
//!   neighbours often leave no room to grow in place;
//! - `200k live, freed ...`: 200 000 buffers of 16 B-2 KiB (small sizes
//!   most common) allocated and written through, read back, then freed in
//!   one of eight orders: the order they came (a queue, a tree dropped
//!   front to back), the reverse (a stack), each pair swapped, each eight
//!   shuffled the same way every time, children before parents, in five
//!   strided passes (every fifth buffer, then the next fifth), every
//!   second one last, or a new random order each time. What a program's
//!   free order leaves for its next run's allocations to walk.
//!
//! `cargo bench --bench workloads`. Each figure is the fastest of several
//! interleaved rounds (interference only adds time), in ns per allocation
//! or free; the arena's locked operations per 100 operations follow.
//! Under `cargo test` (no `--bench` argument: the test suite runs every
//! target once, unoptimized) one round each, as a smoke run.

#[path = "common/arena.rs"]
mod arena;
use allocator_api2::alloc::{AllocError, Allocator, Global, Layout};
use allocator_api2::vec::Vec as AVec;
use std::hint::black_box;
use std::ptr::NonNull;
use std::time::Instant;
use warmarena::ExecutionArena;

/// Measured rounds under `cargo bench`.
const ROUNDS: usize = 7;

#[derive(Clone, Copy)]
struct Mi;
// SAFETY: forwards to mimalloc's GlobalAlloc, whose contract matches.
unsafe impl Allocator for Mi {
    fn allocate(&self, l: Layout) -> Result<NonNull<[u8]>, AllocError> {
        use std::alloc::GlobalAlloc;
        // SAFETY: every layout here has a non-zero size.
        let p = unsafe { mimalloc::MiMalloc.alloc(l) };
        NonNull::new(p)
            .map(|p| NonNull::slice_from_raw_parts(p, l.size()))
            .ok_or(AllocError)
    }
    unsafe fn deallocate(&self, p: NonNull<u8>, l: Layout) {
        use std::alloc::GlobalAlloc;
        // SAFETY: forwarded contract.
        unsafe { mimalloc::MiMalloc.dealloc(p.as_ptr(), l) }
    }
    unsafe fn grow(
        &self,
        p: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<[u8]>, AllocError> {
        use std::alloc::GlobalAlloc;
        // SAFETY: forwarded contract (same alignment, larger size).
        let q = unsafe { mimalloc::MiMalloc.realloc(p.as_ptr(), old, new.size()) };
        NonNull::new(q)
            .map(|q| NonNull::slice_from_raw_parts(q, new.size()))
            .ok_or(AllocError)
    }
}

fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// Allocates `l` from `a`, writes its first byte.
fn take<A: Allocator>(a: &A, l: Layout) -> NonNull<u8> {
    let p = a.allocate(l).expect("allocation").cast::<u8>();
    // SAFETY: `p` holds `l.size() >= 1` bytes.
    unsafe { p.as_ptr().write_volatile(1) };
    p
}

/// Frees `p`, allocated from `a` with `l`.
fn give<A: Allocator>(a: &A, p: NonNull<u8>, l: Layout) {
    // SAFETY: the callers free each buffer once, with its layout.
    unsafe { a.deallocate(p, l) }
}

/// 25 rounds of 4 threads making and freeing 200 buffers of 64 B-1 KiB.
fn short_lived_threads<A: Allocator + Sync>(a: &A) -> usize {
    for r in 0..25u64 {
        std::thread::scope(|s| {
            for t in 0..4u64 {
                s.spawn(move || {
                    let mut x = r * 31 + t + 1;
                    let v: Vec<_> = (0..200)
                        .map(|_| {
                            let l =
                                Layout::from_size_align(64 + xorshift(&mut x) as usize % 960, 16)
                                    .unwrap();
                            (take(a, l), l)
                        })
                        .collect();
                    for (p, l) in v {
                        give(a, p, l);
                    }
                });
            }
        });
    }
    25 * 4 * 200 * 2
}

/// 8 live 256 B buffers on each allocator of `all` in turn, 500 turns.
fn arenas_in_turn<A: Allocator>(all: &[A]) -> usize {
    let l = Layout::from_size_align(256, 16).unwrap();
    for r in 0..500 {
        let a = &all[r % all.len()];
        for _ in 0..4 {
            let v: [NonNull<u8>; 8] = core::array::from_fn(|_| take(a, l));
            for p in v {
                give(a, p, l);
            }
        }
    }
    500 * 4 * 8 * 2
}

/// 500 000 live 32 B buffers, then all freed.
fn many_live_small<A: Allocator>(a: &A) -> usize {
    let l = Layout::from_size_align(32, 8).unwrap();
    let v: Vec<_> = (0..500_000).map(|_| take(a, l)).collect();
    for p in v {
        give(a, p, l);
    }
    1_000_000
}

/// 100 000 random sizes of 1-100 KiB, 500 live, freed at random.
fn random_mid_sizes<A: Allocator>(a: &A) -> usize {
    let mut x = 12345u64;
    let mut live: Vec<(NonNull<u8>, Layout)> = Vec::with_capacity(501);
    for _ in 0..100_000 {
        let r = xorshift(&mut x) as usize;
        let l = Layout::from_size_align(1024 + (r >> 20) % (100 << 10), 16).unwrap();
        live.push((take(a, l), l));
        if live.len() > 500 {
            let (p, l) = live.swap_remove((r >> 7) % live.len());
            give(a, p, l);
        }
    }
    for (p, l) in live {
        give(a, p, l);
    }
    200_000
}

/// Ten `Vec<u64>`s pushed to a million elements each.
fn vec_growth<A: Allocator + Copy>(a: A) -> usize {
    for _ in 0..10 {
        let mut v: AVec<u64, A> = AVec::new_in(a);
        for i in 0..1_000_000u64 {
            v.push(i);
        }
        black_box(&v);
    }
    10 * 1_000_000
}

/// Eight `Vec<u64>`s pushed in turn, one element each, to 128 Ki
/// elements, four times.
fn vecs_in_turn<A: Allocator + Copy>(a: A) -> usize {
    for _ in 0..4 {
        let mut vs: std::vec::Vec<AVec<u64, A>> = (0..8).map(|_| AVec::new_in(a)).collect();
        for i in 0..(128u64 << 10) {
            for v in vs.iter_mut() {
                v.push(i);
            }
        }
        black_box(&vs);
    }
    4 * 8 * (128 << 10)
}

/// The orders of the `200k live` rows.
#[derive(Clone, Copy)]
enum FreeOrder {
    Queue,
    Stack,
    PairsSwapped,
    EightShuffled,
    ChildrenFirst,
    FiveStrides,
    EverySecondLast,
    Random,
}

/// Buffers in a `200k live` row (a tenth of it in the smoke run).
const LIVE: usize = 200_000;

/// The sizes of `n` buffers of the `200k live` rows: half of 16-31 B,
/// then 64-127 B, 256-511 B and 1-2 KiB less and less often.
fn live_sizes(n: usize) -> Vec<usize> {
    let mut x = 0x5EED_u64;
    (0..n)
        .map(|_| {
            let base = match xorshift(&mut x) % 100 {
                0..50 => 16,
                50..80 => 64,
                80..95 => 256,
                _ => 1024,
            };
            base + xorshift(&mut x) as usize % base
        })
        .collect()
}

/// The indices `0..n` in free order `o`; `seed` varies the random order.
fn free_order(o: FreeOrder, n: usize, seed: u64) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    let shuffle = |v: &mut [usize], x: &mut u64| {
        for i in (1..v.len()).rev() {
            v.swap(i, xorshift(x) as usize % (i + 1));
        }
    };
    match o {
        FreeOrder::Queue => {}
        FreeOrder::Stack => v.reverse(),
        FreeOrder::PairsSwapped => v.chunks_mut(2).for_each(|c| c.reverse()),
        FreeOrder::EightShuffled => {
            let mut x = 99;
            v.chunks_mut(8).for_each(|c| shuffle(c, &mut x));
        }
        FreeOrder::ChildrenFirst => {
            // A binary tree allocated breadth first, freed children first.
            let mut out = Vec::with_capacity(n);
            let mut todo = vec![(0usize, false)];
            while let Some((i, seen)) = todo.pop() {
                if i >= n {
                    continue;
                }
                if seen {
                    out.push(i);
                } else {
                    todo.extend([(i, true), (2 * i + 2, false), (2 * i + 1, false)]);
                }
            }
            v = out;
        }
        // Five passes, each over every fifth buffer (the residues of
        // `4 i mod 5`: 0, then 4, 3, 2, 1).
        FreeOrder::FiveStrides => v.sort_by_key(|&i| (i * 7919) % 5),
        FreeOrder::EverySecondLast => v.sort_by_key(|&i| i % 2),
        FreeOrder::Random => shuffle(&mut v, &mut (seed + 1)),
    }
    v
}

/// One run of a `200k live` row: allocate and write every buffer, read
/// each one's ends back, free them in `order`.
fn live_set<A: Allocator>(a: &A, sizes: &[usize], order: &[usize]) -> usize {
    let v: Vec<(NonNull<u8>, Layout)> = sizes
        .iter()
        .map(|&n| {
            let l = Layout::from_size_align(n, 8).unwrap();
            let p = a.allocate(l).expect("allocation").cast::<u8>();
            // SAFETY: `p` holds `n` bytes.
            unsafe { p.as_ptr().write_bytes(n as u8, n) };
            (p, l)
        })
        .collect();
    let mut sum = 0u64;
    for (p, l) in &v {
        // SAFETY: each buffer holds `l.size() >= 1` bytes, written above.
        sum += unsafe { u64::from(*p.as_ptr()) + u64::from(*p.as_ptr().add(l.size() - 1)) };
    }
    black_box(sum);
    for &i in order {
        give(a, v[i].0, v[i].1);
    }
    2 * sizes.len()
}

/// ns per operation of `f` (which returns its operation count): the
/// fastest of the measured rounds, after one warm-up round.
fn time(f: &mut dyn FnMut() -> usize) -> f64 {
    f();
    let t0 = Instant::now();
    let ops = f();
    t0.elapsed().as_secs_f64() * 1e9 / ops as f64
}

fn main() {
    let arena = arena::exec_arena();
    let arenas: Vec<ExecutionArena> = (0..32).map(|_| arena::exec_arena()).collect();
    type Row<'a> = (&'a str, Box<dyn FnMut(usize) -> usize + 'a>, bool);
    let refs: Vec<&ExecutionArena> = arenas.iter().collect();
    let ar = &arena;
    let all = &refs[..];
    // One row: `$f` run on the arena (k = 0), mimalloc (1) or the system
    // allocator (2), each passed as `$arg` builds it from the allocator.
    macro_rules! row {
        ($name:expr, $many:expr, |$a:ident| $call:expr) => {
            (
                $name,
                Box::new(move |k: usize| match k {
                    0 => {
                        let $a = ar;
                        $call
                    }
                    1 => {
                        let $a = Mi;
                        $call
                    }
                    _ => {
                        let $a = Global;
                        $call
                    }
                }) as Box<dyn FnMut(usize) -> usize + '_>,
                $many,
            )
        };
    }
    let bench = std::env::args().any(|a| a == "--bench");
    let live = if bench { LIVE } else { LIVE / 10 };
    let sizes = live_sizes(live);
    let sizes = &sizes[..];
    let mut rows: Vec<Row> = vec![
        row!("short-lived threads", false, |a| short_lived_threads(&a)),
        (
            "32 arenas in turn",
            Box::new(move |k| match k {
                0 => arenas_in_turn(all),
                1 => arenas_in_turn(&[Mi]),
                _ => arenas_in_turn(&[Global]),
            }),
            true,
        ),
        row!("500k live 32 B", false, |a| many_live_small(&a)),
        row!("1-100 KiB random, 500 live", false, |a| random_mid_sizes(
            &a
        )),
        row!("Vec growth to 1M u64", false, |a| vec_growth(a)),
        row!("8 Vecs growing in turn", false, |a| vecs_in_turn(a)),
    ];
    for (name, o) in [
        ("200k live, freed as they came", FreeOrder::Queue),
        ("200k live, freed in reverse", FreeOrder::Stack),
        ("200k live, freed pairs swapped", FreeOrder::PairsSwapped),
        ("200k live, freed each 8 shuffled", FreeOrder::EightShuffled),
        ("200k live, freed children first", FreeOrder::ChildrenFirst),
        ("200k live, freed in five strides", FreeOrder::FiveStrides),
        (
            "200k live, freed every second last",
            FreeOrder::EverySecondLast,
        ),
        ("200k live, freed at random", FreeOrder::Random),
    ] {
        // Made before timing; the random row takes a new one of four each run.
        let count = if matches!(o, FreeOrder::Random) { 4 } else { 1 };
        let orders: Vec<Vec<usize>> = (0..count).map(|s| free_order(o, live, s)).collect();
        let mut next = 0;
        rows.push((
            name,
            Box::new(move |k| {
                next += 1;
                let order = &orders[next % orders.len()];
                match k {
                    0 => live_set(&ar, sizes, order),
                    1 => live_set(&Mi, sizes, order),
                    _ => live_set(&Global, sizes, order),
                }
            }),
            false,
        ));
    }
    let rounds = if bench { ROUNDS } else { 1 };
    println!("\nns per allocation or free, fastest of {rounds} interleaved rounds:");
    println!("| workload | warmarena | mimalloc | system | warmarena / mimalloc | arena locks per 100 ops |");
    println!("|---|---:|---:|---:|---:|---:|");
    let locks = |many: bool| -> u64 {
        if many {
            arenas.iter().map(|a| a.stats().locked_operations).sum()
        } else {
            arena.stats().locked_operations
        }
    };
    for (name, f, many) in rows.iter_mut() {
        let mut best = [f64::MAX; 3];
        for round in 0..rounds {
            for j in 0..3 {
                let k = (round + j) % 3;
                best[k] = best[k].min(time(&mut || f(k)));
            }
        }
        let before = locks(*many);
        let ops = f(0);
        let reads = if *many { arenas.len() as u64 } else { 1 };
        let locked = locks(*many) - before - reads;
        println!(
            "| {name} | {:.1} | {:.1} | {:.1} | {:.2}x | {:.2} |",
            best[0],
            best[1],
            best[2],
            best[0] / best[1],
            100.0 * locked as f64 / ops as f64
        );
    }
    assert_eq!(arena.stats().live_buffers, 0, "every buffer was returned");
}
