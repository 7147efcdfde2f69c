//! Local search over skyline orders: the last phase of [`solve`](super::solve).
//!
//! A seeded hill climb: perturb the order whose skyline is lowest (one to
//! three swaps, half of them between near neighbours), keep the result when
//! it is no higher. It only ever replaces the best placement by a strictly
//! lower one, so it cannot make a good start worse. Each skyline pass is
//! O(n log n) and counts one node per buffer.

use super::budget::Budget;
use super::interval::{Buffer, Placement};
use super::rng::Rng;
use super::skyline::{skyline_until, OnStop};

/// Seed of the climb (fixed: runs repeat for a node budget).
const SEED: u64 = 0x2545_f491_4f6c_dd1d;

/// Climbs from the lowest skyline of `orders`, improving `best` while it
/// is above `floor`, for at most `work` nodes. Returns the nodes spent.
pub(crate) fn improve_order(
    bufs: &[Buffer],
    (span, nsec): (&[(u32, u32)], usize),
    orders: &[Vec<usize>],
    best: &mut Placement,
    floor: usize,
    work: u64,
    budget: &Budget<'_>,
) -> u64 {
    let n = bufs.len();
    if n < 2 || orders.is_empty() {
        return 0;
    }
    let stopped = || budget.stop.is_some_and(|f| f());
    let mut rng = Rng::new(SEED);
    let mut spent = 0u64;
    let mut order = orders[0].clone();
    let mut cur = usize::MAX;
    for o in orders {
        if spent >= work || stopped() {
            return spent;
        }
        let Some(p) = skyline_until(bufs, span, nsec, o, budget.stop, OnStop::Abandon) else {
            return spent;
        };
        spent += n as u64;
        if p.height < cur {
            cur = p.height;
            order.clone_from(o);
        }
        if p.height < best.height {
            *best = p;
        }
    }
    let mut cand = order.clone();
    while spent < work && best.height > floor && !stopped() {
        cand.copy_from_slice(&order);
        for _ in 0..1 + rng.below(3) {
            let i = rng.below(n);
            let j = if rng.below(2) == 0 {
                rng.below(n)
            } else {
                (i + 1 + rng.below(8)).min(n - 1)
            };
            cand.swap(i, j);
        }
        let Some(p) = skyline_until(bufs, span, nsec, &cand, budget.stop, OnStop::Abandon) else {
            return spent;
        };
        spent += n as u64;
        if p.height <= cur {
            cur = p.height;
            std::mem::swap(&mut order, &mut cand);
            if p.height < best.height {
                *best = p;
            }
        }
    }
    spent
}
