//! What the arena reads of its caches under its lock: their counters
//! summed for `stats()`, departed caches swept, peaks reset, and every
//! cache let go when the arena goes.

use super::cache::{Cache, Counters};
use super::spill_path::settle_stolen;
use crate::arena::state::ArenaState;
use core::sync::atomic::Ordering::Relaxed;

/// The sum of the registered caches' counters (under the arena lock).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Totals {
    pub held_bytes: usize,
    pub held_buffers: usize,
    pub frees: u64,
    pub copies: u64,
    pub copied_bytes: u64,
    pub peak: usize,
    /// Frees the arena performed for flushes (counted by the caches already).
    pub flushed: u64,
    /// Held heap pieces whose free extent above has materialized bytes:
    /// each counts with it as one retained extent, as when parked.
    pub merged_rests: usize,
}

impl ArenaState {
    /// A departing cache's frees and moved reallocations, into the
    /// arena's own counts (`absorbed_frees`, `stats.copies`,
    /// `stats.copied_bytes`).
    pub(super) fn absorb_counts(&mut self, c: &Counters) {
        self.absorbed_frees += c.frees.load(Relaxed);
        self.stats.copies += c.copies.load(Relaxed);
        self.stats.copied_bytes += c.copied_bytes.load(Relaxed) as usize;
    }

    /// Frees the caches whose threads left (absorbing their counts).
    pub(crate) fn sweep_caches(&mut self) {
        let mut k = 0;
        while k < self.caches.len() {
            let p = self.caches[k];
            // SAFETY: registered caches stay allocated until the arena
            // frees them here or in `leave_caches`, or their thread
            // unregisters them under this lock.
            let c = unsafe { p.as_ref() };
            if c.link.thread_left() {
                // SAFETY: the thread left (acquire): the arena owns the cache.
                let published = unsafe { (*c.own.get()).published };
                // Settled at its exit's flush; if not, here.
                debug_assert_eq!(
                    c.counters.stolen.load(Relaxed),
                    0,
                    "a left cache settled its stolen buffers"
                );
                settle_stolen(self, c);
                self.cached_bytes -= published;
                self.absorb_counts(&c.counters);
                self.peak_absorbed = self.peak_absorbed.max(c.counters.peak.load(Relaxed));
                self.caches.swap_remove(k);
                if c.link.arena_leaves() {
                    // SAFETY: both sides left and it is unregistered: kept
                    // for the next thread, else freed.
                    if !unsafe { self.spares.keep(p) } {
                        // SAFETY: as above.
                        unsafe { Cache::free(p) };
                    }
                }
            } else {
                k += 1;
            }
        }
    }

    /// The registered caches' counters, summed (sweeping departed ones).
    pub(crate) fn cache_totals(&mut self) -> Totals {
        self.sweep_caches();
        let mut t = Totals::default();
        for p in self.caches.iter() {
            // SAFETY: see `sweep_caches`.
            let c = unsafe { p.as_ref() };
            let h = c.counters.held();
            t.held_bytes += h.bytes();
            t.held_buffers += h.buffers();
            if let Some(b) = c.counters.claim.offered() {
                t.merged_rests += usize::from(self.heap_rest_retained(b));
            }
            t.frees += c.counters.frees.load(Relaxed);
            t.copies += c.counters.copies.load(Relaxed);
            t.copied_bytes += c.counters.copied_bytes.load(Relaxed);
            t.peak = t.peak.max(c.counters.peak.load(Relaxed));
        }
        // The depot's buffers are retained like cached ones.
        t.held_bytes += self.depot.bytes();
        t.held_buffers += self.depot.buffers();
        t.peak = t.peak.max(self.peak_absorbed);
        t.frees += self.absorbed_frees;
        // Claimed buffers are the arena's again, still in their caches'
        // counters until those settle.
        t.held_bytes -= self.claimed_bytes;
        t.held_buffers -= self.claimed_buffers;
        // So are stolen ones, counted in their thieves' held words too.
        t.held_bytes -= self.stolen_bytes;
        t.held_buffers -= self.stolen_buffers;
        t.flushed = self.cache_flushed;
        t
    }

    /// Restarts the caches' peak tracking: each cache's peak to 0 and its
    /// floor to the maximum, so its next hand-out checks again. A racing
    /// hit may still store its own candidate (or a floor computed from the
    /// old peak, until that thread's next unlock) afterwards.
    pub(crate) fn reset_cache_peaks(&mut self) {
        self.peak_absorbed = 0;
        for p in self.caches.iter() {
            // SAFETY: see `sweep_caches`.
            let c = unsafe { p.as_ref() };
            c.counters.peak.store(0, Relaxed);
            c.view.floor.store(u64::MAX, Relaxed);
        }
    }

    /// The arena goes: every cache is let go (each is empty: cached
    /// buffers count as live). Those whose threads left are freed.
    pub(crate) fn leave_caches(&mut self) {
        for p in self.caches.drain(..) {
            // SAFETY: see `sweep_caches`.
            if unsafe { p.as_ref() }.link.arena_leaves() {
                // SAFETY: both sides left.
                unsafe { Cache::free(p) };
            }
        }
    }
}
