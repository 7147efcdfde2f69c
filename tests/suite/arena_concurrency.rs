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

/// Far more threads than cores (48 on the CI machine's 2): lock holders
/// are preempted mid-section, waiters spin and park, thread caches come
/// and go. Each thread allocates mixed sizes (thread-cached small ones,
/// locked large ones), writes them, and hands every other buffer to the
/// next thread, which checks and frees it (into its own cache or, without
/// credit, to the arena). Nothing is lost or shared; once every thread has
/// exited (joined: a thread gives its cache back in its thread-local
/// destructors, which `thread::scope` does not wait for) the arena holds
/// nothing live, and a trim leaves nothing retained.
#[test]
fn many_more_threads_than_cores_hand_buffers_around() {
    use std::sync::{mpsc, Arc};
    let arena = ExecutionArena::new();
    let threads = 48;
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..threads)
        .map(|_| mpsc::channel::<(warmarena::Allocation, u64)>())
        .unzip();
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = rxs
        .into_iter()
        .enumerate()
        .map(|(t, rx)| {
            let arena = arena.clone();
            let next = txs[(t + 1) % threads].clone();
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                let mut x = 0x9E37_79B9u64 * (t as u64 + 1);
                let mut held = Vec::new();
                for i in 0..400u64 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let size = match x % 50 {
                        0 => (64 << 10) + (x as usize >> 8) % (1 << 20),
                        1..=5 => 1024 + (x as usize >> 8) % (60 << 10),
                        _ => 8 + (x as usize >> 8) % 1000,
                    };
                    let mut a = arena.allocate(size, 16).unwrap();
                    let seed = (t as u64) << 32 | i;
                    fill(a.as_mut_slice(), seed);
                    if i % 2 == 0 {
                        next.send((a, seed)).unwrap();
                    } else {
                        held.push((a, seed));
                    }
                    while let Ok((b, seed)) = rx.try_recv() {
                        assert!(
                            check(b.as_slice(), seed),
                            "thread {t}: a received buffer changed"
                        );
                    }
                    if held.len() > 6 {
                        let (a, seed) = held.swap_remove((x >> 20) as usize % held.len());
                        assert!(check(a.as_slice(), seed), "thread {t}: buffer overwritten");
                    }
                }
                drop(next);
                for (a, seed) in held {
                    assert!(check(a.as_slice(), seed));
                }
                // Every thread has sent all it will send.
                barrier.wait();
                for (b, seed) in rx.try_iter() {
                    assert!(check(b.as_slice(), seed));
                }
            })
        })
        .collect();
    drop(txs);
    for h in handles {
        h.join().unwrap();
    }
    let s = arena.stats();
    assert_eq!((s.live_bytes, s.live_buffers), (0, 0));
    assert_eq!(s.frees, s.warm_allocations + s.cold_allocations);
    assert_eq!(s.frees, 48 * 400);
    arena.trim();
    let s = arena.stats();
    assert_eq!((s.retained_bytes, s.retained_buffers), (0, 0), "{s:?}");
}
