//! [`ArenaState::check`]: the arena's invariants, verified from scratch over
//! the block table, for unit tests and the fuzz model. Two passes over the
//! table and one over each class's list; never called on an allocation path.

use super::blocks::{BlockState, Place, DEDICATED, NIL};
use super::state::ArenaState;
use crate::size_class::{capacity, CLASS_COUNT};

impl ArenaState {
    /// Checks that the counters, lists, bitmap, address index and runs
    /// agree with the block table; the first disagreement found, if any.
    pub(crate) fn check(&self) -> Result<(), String> {
        let (mut live, mut live_n, mut held, mut held_n) = (0usize, 0usize, 0usize, 0usize);
        let mut active = vec![0u32; self.runs.len()];
        // Warm and cold blocks by class, counted in the same pass.
        let (mut warm, mut cold) = ([0usize; CLASS_COUNT], [0usize; CLASS_COUNT]);
        for (i, b) in self.table.iter().enumerate() {
            let i = i as u32;
            let counts = match b.state {
                BlockState::Vacant => continue,
                BlockState::Warm => Some(&mut warm),
                BlockState::Cold => Some(&mut cold),
                _ => None,
            };
            if let Some(counts) = counts {
                match counts.get_mut(usize::from(b.class)) {
                    Some(n) => *n += 1,
                    None => return Err(format!("block {i}: class {} out of range", b.class)),
                }
            }
            // Free heap extents need no entry (and stale ones may remain);
            // a run's blocks are indexed by their slots, heap pieces by
            // their pages, neither in the address map.
            let indexed = match b.place {
                Place::Run(_) => {
                    self.run_index.block_at(b.addr) == Some(i)
                        && !self.by_addr.contains_key(&b.addr)
                }
                Place::Heap(_) => {
                    self.heap.pieces.block_at(b.addr) == Some(i)
                        && !self.by_addr.contains_key(&b.addr)
                }
                _ => self.by_addr.get(&b.addr) == Some(&i),
            };
            if !indexed && b.state != BlockState::Extent {
                return Err(format!(
                    "block {i} ({:?}) at {:#x}: indexed {indexed}",
                    b.state, b.addr
                ));
            }
            if matches!(b.state, BlockState::Live | BlockState::Warm) {
                // Heap bytes held are the heap's marks (checked in `check_heap`).
                if !matches!(b.place, Place::Heap(_)) {
                    held += b.cap;
                }
                held_n += 1;
                if let Place::Run(r) | Place::Segment(r) = b.place {
                    active[r as usize] += 1;
                }
            }
            if b.state == BlockState::Live {
                live += b.cap;
                live_n += 1;
            }
            if (b.class == DEDICATED) != (b.place == Place::Dedicated) {
                return Err(format!("block {i}: class {} placed {:?}", b.class, b.place));
            }
            if b.place == Place::Dedicated && b.state != BlockState::Live {
                return Err(format!("dedicated block {i} is {:?}", b.state));
            }
            if matches!(b.place, Place::Heap(_)) != matches!(b.state, BlockState::Extent)
                && !matches!(b.state, BlockState::Live)
            {
                return Err(format!("block {i} is {:?} placed {:?}", b.state, b.place));
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
        self.check_run_index()?;
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
            if warm[c] != order.len() {
                return Err(format!(
                    "class {c}: {} warm blocks, {} listed",
                    warm[c],
                    order.len()
                ));
            }
            if cold[c] != self.cold[c].len as usize {
                return Err(format!(
                    "class {c}: {} cold blocks, list has {}",
                    cold[c], self.cold[c].len
                ));
            }
        }
        self.check_heap()?;
        self.check_depot()?;
        // What caches published: stolen buffers are in their thieves'
        // published bytes and still in the robbed caches' (`stolen_bytes`).
        let in_caches = self
            .cached_bytes
            .get()
            .wrapping_add(self.stolen_bytes)
            .checked_sub(self.depot.bytes());
        if in_caches.is_none_or(|b| b > self.caches.len() * (CLASS_COUNT << 20)) {
            return Err(format!(
                "cached bytes {} beyond any cache (depot {})",
                self.cached_bytes.get(),
                self.depot.bytes()
            ));
        }
        Ok(())
    }
}

impl ArenaState {
    /// The depot (`tcache/depot.rs`): each entry a live run block of its
    /// class at its address, none twice, the totals summed, room for every
    /// block of the class, and empty once orphaned.
    fn check_depot(&self) -> Result<(), String> {
        let mut seen = std::collections::HashSet::new();
        let (mut bytes, mut n) = (0, 0);
        let mut carved = [0usize; CLASS_COUNT];
        for b in self.table.iter() {
            if let (Place::Run(_), Some(k)) = (b.place, carved.get_mut(usize::from(b.class))) {
                *k += 1;
            }
        }
        for (c, &blocks) in carved.iter().enumerate() {
            let (slots, room) = self.depot.class(c);
            if room < blocks {
                return Err(format!("depot class {c}: room {room} for {blocks} blocks"));
            }
            for s in slots {
                // Kept without its block: found by address.
                let block = self.indexed_block(s.addr).unwrap_or(NIL);
                match self.table.get(block) {
                    Some(b)
                        if b.state == BlockState::Live
                            && b.addr == s.addr
                            && usize::from(b.class) == c
                            && matches!(b.place, Place::Run(_)) => {}
                    b => return Err(format!("depot class {c}: {s:?} is {b:?}")),
                }
                if !seen.insert(block) {
                    return Err(format!("depot: block {block} kept twice"));
                }
                bytes += capacity(c);
                n += 1;
            }
        }
        if (bytes, n) != (self.depot.bytes(), self.depot.buffers()) {
            return Err(format!(
                "depot holds {bytes} B / {n}, counted {} B / {}",
                self.depot.bytes(),
                self.depot.buffers()
            ));
        }
        if n > 0 && self.orphaned {
            return Err(format!("orphaned with {n} buffers in the depot"));
        }
        Ok(())
    }

    /// The run index (`run_index.rs`): one entry per small-class run, each
    /// carved slot naming a block of that run at the slot's address, the
    /// slots below the run's carved mark carved and none above it.
    fn check_run_index(&self) -> Result<(), String> {
        let mut indexed = 0;
        for (r, base, cap, slots) in self.run_index.runs() {
            indexed += 1;
            let Some(run) = self.runs.get(r as usize) else {
                return Err(format!("run index: run {r} out of range"));
            };
            if run.segment || run.base != base || capacity(usize::from(run.class)) != cap {
                return Err(format!("run index: run {r} at {base:#x} is not {run:?}"));
            }
            for (k, &i) in slots.iter().enumerate() {
                let addr = base + k * cap;
                let carved = addr + cap <= base + run.carved;
                if i == NIL {
                    if carved {
                        return Err(format!("run {r}: carved slot {k} has no block"));
                    }
                    continue;
                }
                match self.table.get(i) {
                    Some(b) if carved && b.addr == addr && b.place == Place::Run(r) => {}
                    b => return Err(format!("run {r}: slot {k} names block {i}: {b:?}")),
                }
            }
        }
        let runs = self.runs.iter().filter(|r| !r.segment).count();
        if indexed != runs {
            return Err(format!("run index has {indexed} runs, the arena {runs}"));
        }
        Ok(())
    }

    /// The execution heap's invariants (`heap.rs`): each segment tiled from
    /// its base by pieces in address order, no two free extents adjacent,
    /// every live piece below the mark, idle exactly when nothing is live
    /// (then one extent, off the bins, in the idle set), every
    /// other extent on the bin of its length, and the marks summed.
    fn check_heap(&self) -> Result<(), String> {
        let h = &self.heap;
        let mut marked = 0;
        let mut extents = 0usize;
        for (s, seg) in h.segs.iter().enumerate() {
            marked += seg.mark;
            if seg.mark > seg.len {
                return Err(format!("heap segment {s}: mark {} beyond it", seg.mark));
            }
            let (mut at, mut i, mut prev) = (seg.base, seg.first, u32::MAX);
            let (mut live, mut pieces, mut last_free) = (0u32, 0usize, false);
            while i != u32::MAX {
                let Some(b) = self.table.get(i) else {
                    return Err(format!("heap segment {s}: piece {i} out of range"));
                };
                if b.place != Place::Heap(s as u32) || b.addr != at || b.lo != prev {
                    return Err(format!("heap segment {s}: piece {i} misplaced: {b:?}"));
                }
                let free = match b.state {
                    BlockState::Live => {
                        live += 1;
                        if b.addr + b.cap > seg.base + seg.mark {
                            return Err(format!("heap segment {s}: live piece {i} above the mark"));
                        }
                        false
                    }
                    BlockState::Extent => {
                        if !seg.idle {
                            extents += 1;
                            if usize::from(b.class) != super::heap::bin_of(b.cap) {
                                return Err(format!("heap extent {i} on bin {}", b.class));
                            }
                        }
                        true
                    }
                    other => return Err(format!("heap piece {i} is {other:?}")),
                };
                // Only a parked segment's two extents may touch (`heap.rs`).
                let parked = h.parked == s as u32 && pieces == 1;
                if free && last_free && !parked {
                    return Err(format!("heap segment {s}: free extents adjacent at {i}"));
                }
                last_free = free;
                at += b.cap;
                prev = i;
                i = b.hi;
                pieces += 1;
                if pieces > self.table.len() {
                    return Err(format!("heap segment {s}: address links loop"));
                }
            }
            if at != seg.base + seg.len {
                return Err(format!("heap segment {s}: pieces end at {at:#x}"));
            }
            if live != seg.live || seg.idle != (live == 0) {
                return Err(format!(
                    "heap segment {s}: {live} live, counted {}, idle {}",
                    seg.live, seg.idle
                ));
            }
            if seg.idle != h.idle.contains(s as u32) {
                return Err(format!("heap segment {s}: idle set disagrees"));
            }
        }
        if let Some(g) = h.segs.get(h.parked as usize) {
            if !g.idle {
                return Err(format!("heap: parked segment {} is in use", h.parked));
            }
        }
        let binned_n: u32 = h.bins.iter().map(|l| l.len).sum();
        if binned_n != h.binned_n {
            return Err(format!(
                "heap: {binned_n} extents binned, counted {}",
                h.binned_n
            ));
        }
        if marked != h.marked {
            return Err(format!("heap marks sum to {marked}, counted {}", h.marked));
        }
        // `stats()` counts retained extents by walking the segments; count
        // them over the whole table instead.
        let rest = self.table.get(self.parked_rest()).map(|b| b.addr);
        let scanned = self
            .table
            .iter()
            .filter(|b| Some(b.addr) != rest && b.state == BlockState::Extent)
            .filter(|b| match b.place {
                Place::Heap(s) => h
                    .segs
                    .get(s as usize)
                    .is_some_and(|g| b.addr < g.base + g.mark),
                _ => false,
            })
            .count();
        if scanned != self.heap_retained_extents() {
            return Err(format!(
                "heap: {scanned} retained extents, stats count {}",
                self.heap_retained_extents()
            ));
        }
        if let Some(s) = h.idle.iter().find(|&s| s as usize >= h.segs.len()) {
            return Err(format!(
                "heap idle set names segment {s} of {}",
                h.segs.len()
            ));
        }
        let mut binned = 0usize;
        for c in 0..CLASS_COUNT {
            let list = &h.bins[c];
            if h.binned.contains(c) == list.is_empty() {
                return Err(format!("heap bin {c}: bitmap disagrees"));
            }
            let mut i = list.head;
            let mut n = 0u32;
            while i != u32::MAX {
                let Some(b) = self.table.get(i) else {
                    return Err(format!("heap bin {c}: entry {i} out of range"));
                };
                let Place::Heap(s) = b.place else {
                    return Err(format!("heap bin {c}: entry {i} placed {:?}", b.place));
                };
                if b.state != BlockState::Extent || usize::from(b.class) != c {
                    return Err(format!("heap bin {c}: entry {i} is {b:?}"));
                }
                // A parked segment's rest stays on its bin (`heap.rs`).
                let parked_rest = h.parked == s && b.lo == h.segs[s as usize].first;
                if h.segs[s as usize].idle && !parked_rest {
                    return Err(format!("heap bin {c}: entry {i} of an idle segment"));
                }
                n += 1;
                if n as usize > self.table.len() {
                    return Err(format!("heap bin {c}: loop"));
                }
                i = b.next;
            }
            if n != list.len {
                return Err(format!("heap bin {c}: {n} entries, counted {}", list.len));
            }
            binned += n as usize;
        }
        if h.segs.get(h.parked as usize).is_some() {
            extents += 1; // the parked rest
        }
        if binned != extents {
            return Err(format!("heap: {extents} extents in use, {binned} on bins"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::blocks::BlockState;
    use crate::{ArenaConfig, IoArena};

    /// A retained 4 KiB buffer in an arena without thread caches.
    fn arena_with_a_warm_block() -> IoArena {
        let a = IoArena::with_config(
            ArenaConfig::default()
                .thread_cache(false)
                .run_ownership(false),
        );
        drop(a.allocate(4096, 64).unwrap());
        assert_eq!(a.check_invariants(), Ok(()));
        a
    }

    #[test]
    fn a_warm_block_missing_from_its_list_is_caught() {
        let a = arena_with_a_warm_block();
        let mut st = a.core.lock();
        let i = (0..st.table.len() as u32)
            .find(|&i| st.table.get(i).is_some_and(|b| b.state == BlockState::Warm))
            .expect("a warm block");
        // Cold, but on no cold list, still on the warm list and counted held.
        st.table.at(i).state = BlockState::Cold;
        let e = st.check().unwrap_err();
        assert!(e.starts_with("held 0 B / 0 counted as 4096 B / 1"), "{e}");
        // With the held count made to agree, the lists still disagree.
        st.held_bytes = 0;
        st.held_buffers = 0;
        let e = st.check().unwrap_err();
        assert!(
            e.contains("active 1 but 0") || e.contains("cold blocks"),
            "{e}"
        );
    }

    #[test]
    fn a_cold_list_longer_than_its_blocks_is_caught() {
        let a = arena_with_a_warm_block();
        let mut st = a.core.lock();
        let c = crate::size_class::class_of(4096).unwrap();
        st.cold[c].len += 1;
        let e = st.check().unwrap_err();
        assert!(e.contains("cold blocks, list has 1"), "{e}");
    }
}
