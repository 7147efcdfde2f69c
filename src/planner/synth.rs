//! Families of synthetic interval instances, for tests and benchmarks at
//! scales and shapes the shipped data sets do not cover.
//!
//! Every generator is seeded and deterministic. Tests keep a held-out split
//! by seed: seeds below [`HELD_OUT`] may be looked at when tuning the
//! planner, seeds from it on only checked.

use super::interval::Buffer;
use super::rng::Rng;

/// First seed of the held-out split.
pub const HELD_OUT: u64 = 1000;

/// `copies` copies of `base`, copy `k` shifted by `k * shift` in time
/// (`shift` at or above `base`'s last end: one after the other; below it:
/// copies overlap, and so do their conflicts).
///
/// ```
/// use warmarena::planner::{lower_bound, synth, Buffer};
/// let base = [Buffer::new(0, 4, 8), Buffer::new(2, 6, 8)];
/// let far = synth::tile(&base, 3, 6);
/// assert_eq!(far.len(), 6);
/// assert_eq!(lower_bound(&far), lower_bound(&base));
/// assert_eq!(lower_bound(&synth::tile(&base, 2, 1)), 32);
/// ```
pub fn tile(base: &[Buffer], copies: usize, shift: usize) -> Vec<Buffer> {
    let mut out = Vec::with_capacity(base.len() * copies);
    for k in 0..copies {
        let dt = k * shift;
        out.extend(
            base.iter()
                .map(|b| Buffer::new(b.lower + dt, b.upper + dt, b.size)),
        );
    }
    out
}

/// `base` with each size scaled by a factor in `[1 - pct/100, 1 + pct/100]`
/// (at least 1 byte) and each end moved later by up to `stretch` steps.
///
/// ```
/// use warmarena::planner::{synth, Buffer};
/// let base = [Buffer::new(0, 4, 1000)];
/// let p = synth::perturb(&base, 7, 10, 2);
/// assert!((900..=1100).contains(&p[0].size) && (4..=6).contains(&p[0].upper));
/// ```
pub fn perturb(base: &[Buffer], seed: u64, pct: usize, stretch: usize) -> Vec<Buffer> {
    let mut rng = Rng::new(seed);
    base.iter()
        .map(|b| {
            let scale = 100 - pct + rng.below(2 * pct + 1);
            let size = (b.size as u128 * scale as u128 / 100).max(1) as usize;
            let end = b.upper + rng.below(stretch + 1);
            Buffer::new(b.lower, end, size)
        })
        .collect()
}

/// A size from a power law: in `[min << k, min << (k + 1))` with
/// probability about `2^-(k+1)`, `k` at most 12.
fn power_size(rng: &mut Rng, min: usize) -> usize {
    let bits = rng.below(13);
    // Each extra bit half as likely: P(bits >= k) ~ 2^-k.
    let bits = bits.min(rng.next_u64().trailing_zeros() as usize);
    (min << bits) + rng.below(min << bits)
}

/// `n` random intervals over `n / 4` steps: starts uniform, lifetimes and
/// sizes from power laws (most short and small, a few long or large).
///
/// ```
/// use warmarena::planner::{check_buffers, synth};
/// let bufs = synth::power_law(1000, 3);
/// assert_eq!(bufs.len(), 1000);
/// assert!(check_buffers(&bufs).is_ok());
/// ```
pub fn power_law(n: usize, seed: u64) -> Vec<Buffer> {
    let mut rng = Rng::new(seed);
    let steps = (n / 4).max(1);
    (0..n)
        .map(|_| {
            let lower = rng.below(steps);
            let len = power_size(&mut rng, 1);
            let size = power_size(&mut rng, 4096);
            Buffer::new(lower, lower + len, size)
        })
        .collect()
}

/// A training-like trace of `n` buffers over `n / 2` steps: a tenth are
/// weights and optimizer state (live from a step in the first tenth to the
/// end), the rest activations and gradients, each live a few steps, and
/// saved activations live from the forward step to the mirrored backward
/// step (a nest, as in back-propagation).
///
/// ```
/// use warmarena::planner::{check_buffers, synth};
/// let bufs = synth::weights_and_activations(2000, 5);
/// assert_eq!(bufs.len(), 2000);
/// assert!(check_buffers(&bufs).is_ok());
/// ```
pub fn weights_and_activations(n: usize, seed: u64) -> Vec<Buffer> {
    let mut rng = Rng::new(seed);
    let steps = (n / 2).max(4);
    (0..n)
        .map(|k| {
            let scale = 1 << (4 + rng.below(10));
            let size = 64 * (1 + rng.below(scale));
            match k % 10 {
                0 => Buffer::new(rng.below(steps / 10 + 1), steps, size),
                1..=3 => {
                    // Saved activation: forward step t, backward 2 * mid - t.
                    let mid = steps / 2;
                    let t = rng.below(mid);
                    Buffer::new(t, 2 * mid - t + 1, size)
                }
                _ => {
                    let lower = rng.below(steps);
                    Buffer::new(lower, lower + 1 + rng.below(4), size)
                }
            }
        })
        .collect()
}

/// A serializer's trace (pattern mode's serde case): `n` short-lived
/// small buffers, one born a step, each live for 1 to `2 * live - 1`
/// steps (so about `live` at a time), sizes 64 B to 4 KiB.
///
/// ```
/// use warmarena::planner::{check_buffers, lower_bound, synth};
/// let bufs = synth::short_lived(10_000, 64, 3);
/// assert_eq!(bufs.len(), 10_000);
/// assert!(check_buffers(&bufs).is_ok());
/// assert!(lower_bound(&bufs) < 200 * 4096);
/// ```
pub fn short_lived(n: usize, live: usize, seed: u64) -> Vec<Buffer> {
    let mut rng = Rng::new(seed);
    let span = (2 * live).max(2) - 1;
    (0..n)
        .map(|t| {
            let size = 64 * (1 + rng.below(64));
            Buffer::new(t, t + 1 + rng.below(span), size)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generators_repeat_for_a_seed() {
        assert_eq!(power_law(300, 9), power_law(300, 9));
        assert_ne!(power_law(300, 9), power_law(300, 10));
        let base = weights_and_activations(200, 1);
        assert_eq!(perturb(&base, 2, 5, 1), perturb(&base, 2, 5, 1));
        assert_eq!(tile(&base, 4, 0).len(), 800);
    }
}
