//! The arena's retention policy written plainly, as a model to check the
//! real arena against. One copy, included by path from the proptest model
//! (`tests/suite/arena_model.rs`) and the fuzz target
//! (`fuzz/fuzz_targets/arena_ops.rs`, its own workspace, hence no crate).
//!
//! The policy: a request is served from a retained buffer of its own class
//! when the alignment divides the class's capacity, taking that class's
//! most recently freed buffer; otherwise it is cold. A free retains the buffer;
//! when retained bytes pass the cap, the least recently freed go first.

use warmarena::size_class::{aligned_size, capacity, class_of};
use warmarena::ArenaStats;

/// One arena's expected counters and retained buffers.
#[derive(Debug, Default)]
pub struct PolicyModel {
    pub live: usize,
    pub live_buffers: usize,
    pub peak: usize,
    pub leases: usize,
    pub leased: usize,
    /// Retained buffers as (class, freed-at), oldest first.
    pub retained: Vec<(usize, u64)>,
    pub cap: Option<usize>,
    pub clock: u64,
    /// Times `enforce` had to evict something.
    pub evicting_ops: u64,
}

impl PolicyModel {
    pub fn retained_bytes(&self) -> usize {
        self.retained.iter().map(|&(c, _)| capacity(c)).sum()
    }

    /// Serves a request; returns (class served, warm?).
    pub fn alloc(&mut self, size: usize, align: usize) -> (usize, bool) {
        let c = class_of(aligned_size(size, align).unwrap()).unwrap();
        let fits = |k: usize| k == c && (align <= 16 || capacity(k) % align == 0);
        let best = self
            .retained
            .iter()
            .map(|&(k, _)| k)
            .filter(|&k| fits(k))
            .min();
        let served = match best {
            Some(k) => {
                // The most recently freed buffer of that class.
                let i = self
                    .retained
                    .iter()
                    .enumerate()
                    .filter(|(_, &(kk, _))| kk == k)
                    .max_by_key(|(_, &(_, t))| t)
                    .map(|(i, _)| i)
                    .unwrap();
                self.retained.remove(i);
                (k, true)
            }
            None => (c, false),
        };
        self.live += capacity(served.0);
        self.live_buffers += 1;
        self.peak = self.peak.max(self.live);
        served
    }

    /// A live buffer of `class` is freed (and retained, up to the cap).
    pub fn free(&mut self, class: usize) {
        self.live -= capacity(class);
        self.live_buffers -= 1;
        self.clock += 1;
        self.retained.push((class, self.clock));
        self.enforce();
    }

    /// Evicts the least recently freed buffers until the cap holds.
    pub fn enforce(&mut self) {
        let cap = self.cap.unwrap_or(usize::MAX);
        if self.retained_bytes() > cap {
            self.evicting_ops += 1;
        }
        while self.retained_bytes() > cap {
            self.retained.remove(0);
        }
    }

    /// Panics with `what` and the field when the arena's counters differ.
    pub fn check(&self, s: &ArenaStats, what: &str) {
        assert_eq!(s.live_bytes, self.live, "{what}: live bytes");
        assert_eq!(s.live_buffers, self.live_buffers, "{what}: live buffers");
        assert_eq!(
            s.retained_bytes,
            self.retained_bytes(),
            "{what}: retained bytes"
        );
        assert_eq!(
            s.retained_buffers,
            self.retained.len(),
            "{what}: retained buffers"
        );
        assert_eq!(s.peak_live_bytes, self.peak, "{what}: peak");
        assert_eq!(s.leases, self.leases, "{what}: leases");
        assert_eq!(s.leased_bytes, self.leased, "{what}: leased bytes");
    }
}
