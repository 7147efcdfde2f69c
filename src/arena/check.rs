//! [`ArenaState::check`]: the arena's invariants, verified from scratch over
//! the block table, for unit tests and the fuzz model. Slow (a pass over
//! every block per class); never called on an allocation path.

use super::blocks::{BlockState, DEDICATED, NIL};
use super::state::ArenaState;
use crate::size_class::CLASS_COUNT;

impl ArenaState {
    /// Checks that the counters, lists, bitmap, address index and runs
    /// agree with the block table; the first disagreement found, if any.
    pub(crate) fn check(&self) -> Result<(), String> {
        let (mut live, mut live_n, mut held, mut held_n) = (0usize, 0usize, 0usize, 0usize);
        let mut active = vec![0u32; self.runs.len()];
        for (i, b) in self.table.iter().enumerate() {
            let i = i as u32;
            if b.state == BlockState::Vacant {
                continue;
            }
            if self.by_addr.get(&b.addr) != Some(&i) {
                return Err(format!("block {i} at {:#x} is not indexed", b.addr));
            }
            if matches!(b.state, BlockState::Live | BlockState::Warm) {
                held += b.cap;
                held_n += 1;
                if b.run != NIL {
                    active[b.run as usize] += 1;
                }
            }
            if b.state == BlockState::Live {
                live += b.cap;
                live_n += 1;
            }
            if b.class == DEDICATED && b.state != BlockState::Live {
                return Err(format!("dedicated block {i} is {:?}", b.state));
            }
        }
        if (live, live_n) != (self.stats.live_bytes, self.stats.live_buffers) {
            return Err(format!(
                "live {live} B / {live_n} counted as {} B / {}",
                self.stats.live_bytes, self.stats.live_buffers
            ));
        }
        if (held, held_n) != (self.held_bytes, self.held_buffers) {
            return Err(format!(
                "held {held} B / {held_n} counted as {} B / {}",
                self.held_bytes, self.held_buffers
            ));
        }
        for (r, run) in self.runs.iter().enumerate() {
            if run.active != active[r] {
                return Err(format!(
                    "run {r}: active {} but {} blocks",
                    run.active, active[r]
                ));
            }
        }
        for c in 0..CLASS_COUNT {
            let order = self.warm.in_order(&self.table, c);
            if self.warm.classes.contains(c) == order.is_empty() {
                return Err(format!("class {c}: bitmap disagrees with its list"));
            }
            let mut last = 0u64;
            for &i in &order {
                let Some(b) = self.table.get(i) else {
                    return Err(format!("class {c}: listed block {i} out of range"));
                };
                if b.state != BlockState::Warm || b.class as usize != c {
                    return Err(format!("class {c}: listed block {i} is {:?}", b.state));
                }
                if b.freed_at < last {
                    return Err(format!("class {c}: block {i} out of free order"));
                }
                last = b.freed_at;
            }
            let warm = self
                .table
                .iter()
                .filter(|b| b.state == BlockState::Warm && b.class as usize == c)
                .count();
            if warm != order.len() {
                return Err(format!(
                    "class {c}: {warm} warm blocks, {} listed",
                    order.len()
                ));
            }
            let cold = self
                .table
                .iter()
                .filter(|b| b.state == BlockState::Cold && b.class as usize == c)
                .count();
            if cold != self.cold[c].len as usize {
                return Err(format!(
                    "class {c}: {cold} cold blocks, list has {}",
                    self.cold[c].len
                ));
            }
        }
        if self.cached_bytes > self.caches.len() * (CLASS_COUNT << 20) {
            return Err(format!(
                "cached bytes {} beyond any cache",
                self.cached_bytes
            ));
        }
        Ok(())
    }
}
