use std::alloc::{GlobalAlloc, Layout};
use std::hint::black_box;
#[inline(never)]
fn pairs(n: usize, size: usize) {
    let l = Layout::from_size_align(size, 64).unwrap();
    for _ in 0..n {
        unsafe { let p = mimalloc::MiMalloc.alloc(black_box(l)); mimalloc::MiMalloc.dealloc(black_box(p), l); }
    }
}
fn main() {
    let size: usize = std::env::args().nth(1).map(|s| s.parse().unwrap()).unwrap_or(256);
    let n: usize = std::env::args().nth(2).map(|s| s.parse().unwrap()).unwrap_or(200_000_000);
    pairs(1000, size);
    let t = std::time::Instant::now();
    pairs(n, size);
    println!("{:.2} ns/pair", t.elapsed().as_secs_f64() * 1e9 / n as f64);
}
