//! Allocate+free pairs of retained sizes from 16 B to 256 MiB: warmarena
//! against the system allocator, mimalloc and jemalloc, in one process.
//!
//! `cargo bench --bench arena_pairs` (add `-- --quick` for a shorter run).
//! Two shapes per size: `pair` (allocate, free) and `pair+touch` (allocate,
//! write one byte per 4 KiB page, free), which shows what each allocator's
//! way of returning memory costs in page faults. From 64 KiB, `warmarena`
//! is the execution heap and `warmarena-io` an I/O arena (own classes, the
//! policy execution arenas had before the heap).
//!
//! Then the `pair` comparison again as a printed table (with both arenas
//! also through allocator-api2, `warmarena api2` and `warmarena-io api2`),
//! each allocator's
//! fastest of 200 interleaved rounds of 2 000 pairs (rotating who goes
//! first): on a shared machine a criterion group's allocators run in
//! separate blocks of time, and this VM runs one block fast and the next
//! slow, so a ratio of two criterion means can say more about the blocks
//! than about the allocators. Interference only ever adds time, so the
//! fastest round of each is the comparable figure.

#[path = "common/arena.rs"]
mod arena;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::time::{Duration, Instant};

const SIZES: &[usize] = &[
    16,
    64,
    256,
    1 << 10,
    16 << 10,
    64 << 10,
    1 << 20,
    16 << 20,
    256 << 20,
];

fn touch(p: *mut u8, len: usize) {
    let mut off = 0;
    while off < len {
        // SAFETY: `off < len` and the caller owns `len` bytes at `p`.
        unsafe { p.add(off).write_volatile(1) };
        off += 4096;
    }
}

fn peer_pair<A: GlobalAlloc>(a: &A, layout: Layout, touch_pages: bool) {
    // SAFETY: non-zero layout; the block is freed with the same layout.
    unsafe {
        let p = a.alloc(layout);
        assert!(!p.is_null());
        if touch_pages {
            touch(p, layout.size());
        }
        a.dealloc(black_box(p), layout);
    }
}

fn pairs(c: &mut Criterion) {
    let arena = arena::exec_arena();
    let io = arena::io_arena();
    let mi = mimalloc::MiMalloc;
    let je = tikv_jemallocator::Jemalloc;
    for touch_pages in [false, true] {
        let name = if touch_pages { "pair+touch" } else { "pair" };
        let mut g = c.benchmark_group(name);
        for &size in SIZES {
            if touch_pages && size < (64 << 10) {
                continue;
            }
            g.throughput(Throughput::Elements(1));
            let layout = Layout::from_size_align(size, 64).unwrap();
            // Warm every allocator's cache for this size first.
            drop(arena.allocate(size, 64).unwrap());
            g.bench_with_input(BenchmarkId::new("warmarena", size), &size, |b, &s| {
                b.iter(|| {
                    let mut a = arena.allocate(black_box(s), 64).unwrap();
                    if touch_pages {
                        touch(a.as_mut_ptr(), s);
                    }
                    drop(a)
                })
            });
            if size >= 64 << 10 {
                drop(io.allocate(size, 64).unwrap());
                g.bench_with_input(BenchmarkId::new("warmarena-io", size), &size, |b, &s| {
                    b.iter(|| {
                        let mut a = io.allocate(black_box(s), 64).unwrap();
                        if touch_pages {
                            touch(a.as_mut_ptr(), s);
                        }
                        drop(a)
                    })
                });
            }
            g.bench_with_input(BenchmarkId::new("system", size), &layout, |b, &l| {
                b.iter(|| peer_pair(&System, black_box(l), touch_pages))
            });
            g.bench_with_input(BenchmarkId::new("mimalloc", size), &layout, |b, &l| {
                b.iter(|| peer_pair(&mi, black_box(l), touch_pages))
            });
            g.bench_with_input(BenchmarkId::new("jemalloc", size), &layout, |b, &l| {
                b.iter(|| peer_pair(&je, black_box(l), touch_pages))
            });
        }
        g.finish();
    }
}

#[path = "common/rounds.rs"]
mod rounds;

/// One allocator's `n` pairs of `layout`, timed.
type Variant<'a> = Box<dyn Fn(Layout, u64) -> Duration + 'a>;

fn peer_rounds<A: GlobalAlloc>(a: &A) -> Variant<'_> {
    Box::new(move |l, n| {
        let t = Instant::now();
        for _ in 0..n {
            peer_pair(a, black_box(l), false);
        }
        t.elapsed()
    })
}

/// `n` pairs of `layout` through allocator-api2 on `a`, timed.
fn api2_rounds<A: allocator_api2::alloc::Allocator>(a: &A) -> Variant<'_> {
    Box::new(move |l, n| {
        use allocator_api2::alloc::Allocator;
        let l = allocator_api2::alloc::Layout::from_size_align(l.size(), l.align()).unwrap();
        let t = Instant::now();
        for _ in 0..n {
            let p = Allocator::allocate(a, black_box(l)).unwrap();
            // SAFETY: `p` came from `a` for `l` and is freed once.
            unsafe { Allocator::deallocate(a, black_box(p.cast()), l) };
        }
        t.elapsed()
    })
}

/// The `pair` comparison as a fastest-of-rounds table (printed).
fn fastest_of_rounds(_: &mut Criterion) {
    let arena = arena::exec_arena();
    let io = arena::io_arena();
    // Like for like with the peers, whose pointer is hidden from the
    // optimizer: the handle's pointer is.
    let arena_pairs = |l: Layout, n: u64| {
        let t = Instant::now();
        for _ in 0..n {
            let a = arena.allocate(black_box(l.size()), 64).unwrap();
            black_box(a.as_ptr());
            drop(a);
        }
        t.elapsed()
    };
    // The whole 40-byte handle hidden: it goes through memory (eight
    // stores, four loads back), as a handle kept in a struct or a `Vec`
    // would. What carrying a handle costs over carrying a pointer.
    let handle_pairs = |l: Layout, n: u64| {
        let t = Instant::now();
        for _ in 0..n {
            drop(black_box(arena.allocate(black_box(l.size()), 64).unwrap()));
        }
        t.elapsed()
    };
    let io_pairs = |l: Layout, n: u64| {
        let t = Instant::now();
        for _ in 0..n {
            let a = io.allocate(black_box(l.size()), 64).unwrap();
            black_box(a.as_ptr());
            drop(a);
        }
        t.elapsed()
    };
    println!(
        "\nallocate+free pair, ns, fastest of 200 interleaved rounds of 2000 pairs (align 64):"
    );
    println!("| size | warmarena | warmarena-io | warmarena api2 | warmarena-io api2 | warmarena handle | system | mimalloc | jemalloc | warmarena / mimalloc | warmarena-io / mimalloc | api2 / mimalloc | io api2 / mimalloc | handle / mimalloc |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for &size in SIZES {
        let l = Layout::from_size_align(size, 64).unwrap();
        drop(arena.allocate(size, 64).unwrap());
        drop(io.allocate(size, 64).unwrap());
        let variants: Vec<Variant<'_>> = vec![
            Box::new(arena_pairs),
            Box::new(io_pairs),
            // Both arenas through allocator-api2 (what `Vec<T, &ExecutionArena>`
            // and hashbrown call): by layout, no handle.
            api2_rounds(&arena),
            api2_rounds(&io),
            Box::new(handle_pairs),
            peer_rounds(&System),
            peer_rounds(&mimalloc::MiMalloc),
            peer_rounds(&tikv_jemallocator::Jemalloc),
        ];
        let refs: Vec<rounds::Variant<'_>> = variants.iter().map(|v| &**v).collect();
        let t = rounds::fastest_rounds(l, &refs, 200, 2_000);
        let mi = t[6];
        println!(
            "| {size} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2}x | {:.2}x | {:.2}x | {:.2}x | {:.2}x |",
            t[0],
            t[1],
            t[2],
            t[3],
            t[4],
            t[5],
            t[6],
            t[7],
            t[0] / mi,
            t[1] / mi,
            t[2] / mi,
            t[3] / mi,
            t[4] / mi
        );
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_millis(300))
        .measurement_time(std::time::Duration::from_secs(1))
        .sample_size(20);
    targets = pairs, fastest_of_rounds
}
criterion_main!(benches);
