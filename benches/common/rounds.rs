//! The fastest-of-rounds measure the benches print beside criterion's
//! groups: on a shared machine criterion times each variant in a block of
//! its own, and this VM runs one block fast and the next slow, so a ratio
//! of two criterion means can say more about the blocks than about the
//! variants. Here the variants take turns in short rounds (rotating who
//! goes first) and each keeps its fastest round: interference only ever
//! adds time.

use std::alloc::Layout;
use std::time::Duration;

/// One variant: `n` allocate+free pairs of `layout`, timed.
pub type Variant<'a> = &'a dyn Fn(Layout, u64) -> Duration;

/// ns per pair of each variant: its fastest of `rounds` rounds of `pairs`
/// pairs of `l`, the variants taking turns.
pub fn fastest_rounds(l: Layout, variants: &[Variant<'_>], rounds: usize, pairs: u64) -> Vec<f64> {
    let timed: Vec<_> = variants
        .iter()
        .map(|v| move || v(l, pairs).as_nanos() as f64 / pairs as f64)
        .collect();
    let refs: Vec<&dyn Fn() -> f64> = timed.iter().map(|t| t as &dyn Fn() -> f64).collect();
    fastest_turns(&refs, rounds)
}

/// Each variant's smallest result (a time per unit of work, any unit)
/// over `rounds` rounds, the variants taking turns and rotating who goes
/// first.
pub fn fastest_turns(variants: &[&dyn Fn() -> f64], rounds: usize) -> Vec<f64> {
    let mut best = vec![f64::MAX; variants.len()];
    for r in 0..rounds {
        for k in 0..variants.len() {
            let v = (r + k) % variants.len();
            best[v] = best[v].min(variants[v]());
        }
    }
    best
}
