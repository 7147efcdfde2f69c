//! Several threads allocating, writing a per-thread pattern, verifying and
//! freeing through one arena: no buffer is ever handed to two owners, and the
//! accounting balances to zero live bytes.

use crate::support::{check, fill};
use std::sync::Barrier;
use warmarena::{ExecutionArena, IoArena};

#[test]
fn threads_never_share_a_buffer_and_accounting_balances() {
    let arena = ExecutionArena::new();
    let threads = 6;
    let barrier = Barrier::new(threads);
    std::thread::scope(|s| {
        for t in 0..threads {
            let arena = arena.clone();
            let barrier = &barrier;
            s.spawn(move || {
                barrier.wait();
                let mut x = 0x1234_5678u64 + t as u64;
                let mut held = Vec::new();
                for i in 0..2000u64 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let size = match x % 10 {
                        0 => 64 << 10 | (x as usize & 0xffff),
                        1 => 2 << 20,
                        _ => 16 + (x as usize % 8000),
                    };
                    let mut a = arena.allocate(size, 16).unwrap();
                    let seed = (t as u64) << 32 | i;
                    fill(a.as_mut_slice(), seed);
                    held.push((a, seed));
                    if held.len() > 8 || x & 1 == 0 {
                        let (a, seed) = held.swap_remove((x >> 8) as usize % held.len());
                        std::thread::yield_now();
                        assert!(check(a.as_slice(), seed), "thread {t}: buffer overwritten");
                    }
                }
                for (a, seed) in held {
                    assert!(check(a.as_slice(), seed));
                }
            });
        }
    });
    let s = arena.stats();
    assert_eq!((s.live_bytes, s.live_buffers), (0, 0));
    assert_eq!(s.frees, s.warm_allocations + s.cold_allocations);
    assert!(s.warm_allocations > s.cold_allocations);
}

#[test]
fn buffers_freed_on_another_thread_return_to_their_arena() {
    let io = IoArena::new();
    let bufs: Vec<_> = (0..32)
        .map(|i| io.allocate(1000 + i * 100, 8).unwrap())
        .collect();
    std::thread::spawn(move || drop(bufs)).join().unwrap();
    let s = io.stats();
    assert_eq!((s.live_bytes, s.retained_buffers), (0, 32));
}
