use std::hint::black_box;
use warmarena::ExecutionArena;
#[inline(never)]
fn pairs(arena: &ExecutionArena, n: usize, size: usize) {
    for _ in 0..n {
        drop(black_box(arena.allocate(black_box(size), 64).unwrap()));
    }
}
fn main() {
    let arena = ExecutionArena::new();
    let size: usize = std::env::args().nth(1).map(|s| s.parse().unwrap()).unwrap_or(256);
    let n: usize = std::env::args().nth(2).map(|s| s.parse().unwrap()).unwrap_or(200_000_000);
    pairs(&arena, 1000, size);
    let t = std::time::Instant::now();
    pairs(&arena, n, size);
    println!("{:.2} ns/pair", t.elapsed().as_secs_f64() * 1e9 / n as f64);
}
