//! The retained (warm) buffers of every class, in free order, and the
//! bitmap of classes that have one. Pure bookkeeping over the block table:
//! no OS, no unsafe.
//!
//! Each class keeps its most recently freed buffer in a *hot slot* and the
//! older ones on an intrusive list (head = least recently freed). The slot
//! is what makes the common warm cycle cheap: a buffer freed and the same
//! class asked for again touches one word instead of relinking list
//! neighbours. The order is exactly that of one list with the slot as its
//! tail, so best fit, most-recently-freed reuse and least-recently-freed
//! eviction are unchanged by it.

use super::bitmap::ClassBitmap;
use super::blocks::{BlockState, BlockTable, List, NIL};
use crate::size_class::{Class, CLASS_COUNT};

/// Where the last block of a run of [`WarmSets::insert_next`] calls went
/// in its class's list: the class and the block (`None` before the first,
/// or after one that became the newest). A block of another class starts
/// the run again.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct InsertRun {
    after: Option<(Class, u32)>,
}

/// Retained buffers per class: `hot[c]` is the newest, `older[c]` the rest.
#[derive(Debug)]
pub(crate) struct WarmSets {
    hot: [u32; CLASS_COUNT],
    older: [List; CLASS_COUNT],
    /// Set exactly for the classes with a retained buffer.
    pub(crate) classes: ClassBitmap,
}

impl Default for WarmSets {
    fn default() -> Self {
        WarmSets {
            hot: [NIL; CLASS_COUNT],
            older: [List::default(); CLASS_COUNT],
            classes: ClassBitmap::default(),
        }
    }
}

impl WarmSets {
    /// Whether class `c` has a retained buffer.
    #[inline(always)]
    pub(crate) fn has(&self, c: Class) -> bool {
        self.hot[c] != NIL
    }

    /// Adds block `i` (just freed) as the newest buffer of class `c`.
    #[inline(always)]
    pub(crate) fn push(&mut self, table: &mut BlockTable, c: Class, i: u32) {
        let prev = self.hot[c];
        if prev != NIL {
            table.push_back(&mut self.older[c], prev);
        } else {
            self.classes.set(c);
        }
        self.hot[c] = i;
    }

    /// Takes the newest buffer of class `c`, which must have one.
    #[inline(always)]
    pub(crate) fn pop_newest(&mut self, table: &mut BlockTable, c: Class) -> u32 {
        let i = self.hot[c];
        let list = &mut self.older[c];
        if list.is_empty() {
            self.hot[c] = NIL;
            self.classes.clear(c);
        } else {
            let t = list.tail;
            table.unlink(list, t);
            self.hot[c] = t;
        }
        i
    }

    /// The most recently freed buffer of class `c` (`NIL` when none).
    pub(crate) fn newest(&self, c: Class) -> u32 {
        self.hot[c]
    }

    /// Adds retained block `i` of class `c` at its place in free order by
    /// its `freed_at` stamp (a buffer a thread cache gives back late):
    /// usually the newest; else after the newest listed block that is not
    /// newer, found back from the newest, or, for the next of a `run` of
    /// blocks given oldest first (a flush, a settled depot, a remote
    /// stack), forward from where the run's previous block went. So a
    /// run's blocks together walk the list about once: one at a time from
    /// the newest, `n` blocks older than `m` listed ones walked `n * m`
    /// links, and settling the depot of an arena that eight threads had
    /// streamed 100 000 buffers each through took minutes. A fresh
    /// [`InsertRun`] inserts one block alone. Returns the links walked.
    pub(crate) fn insert_next(
        &mut self,
        table: &mut BlockTable,
        c: Class,
        i: u32,
        run: &mut InsertRun,
    ) -> usize {
        let at = |t: &BlockTable, k: u32| t.get(k).map_or(0, |b| b.freed_at);
        let stamp = at(table, i);
        let hot = self.hot[c];
        if hot == NIL || at(table, hot) <= stamp {
            self.push(table, c, i);
            run.after = None;
            return 0;
        }
        // Older than the hot slot: into the list, after the newest entry
        // that is not newer than it. From the run's last block when it is
        // not newer (the run is oldest first), else back from the newest.
        let list = &mut self.older[c];
        let mut walked = 0;
        let mut after = match run.after {
            Some((rc, a)) if rc == c && at(table, a) <= stamp => {
                debug_assert!(
                    table
                        .get(a)
                        .is_some_and(|b| b.state == BlockState::Warm && b.class as usize == c),
                    "a run's block left its list"
                );
                a
            }
            _ => {
                let mut a = list.tail;
                while a != NIL && at(table, a) > stamp {
                    a = table.get(a).map_or(NIL, |b| b.prev);
                    walked += 1;
                }
                a
            }
        };
        loop {
            let next = match table.get(after) {
                Some(b) => b.next,
                None => list.head,
            };
            if next == NIL || at(table, next) > stamp {
                break;
            }
            after = next;
            walked += 1;
        }
        table.insert_after(list, after, i);
        run.after = Some((c, i));
        walked
    }

    /// The least recently freed buffer of class `c` (`NIL` when none).
    pub(crate) fn oldest(&self, c: Class) -> u32 {
        let list = &self.older[c];
        if list.is_empty() {
            self.hot[c]
        } else {
            list.head
        }
    }

    /// Every retained block of class `c`, oldest first (for `check`).
    pub(crate) fn in_order(&self, table: &BlockTable, c: Class) -> Vec<u32> {
        let mut out = vec![];
        let mut i = self.older[c].head;
        while i != NIL && out.len() <= table.len() {
            out.push(i);
            i = table.get(i).map_or(NIL, |b| b.next);
        }
        if self.hot[c] != NIL {
            out.push(self.hot[c]);
        }
        out
    }

    /// Removes retained block `i` of class `c`, wherever it is in the order.
    pub(crate) fn remove(&mut self, table: &mut BlockTable, c: Class, i: u32) {
        if self.hot[c] == i {
            self.pop_newest(table, c);
        } else {
            table.unlink(&mut self.older[c], i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arena::blocks::{Block, Place};

    /// The order as one list: oldest first.
    fn order(w: &WarmSets, t: &BlockTable, c: Class) -> Vec<u32> {
        let mut out = vec![];
        let mut i = w.older[c].head;
        while i != NIL {
            out.push(i);
            i = t.get(i).unwrap().next;
        }
        if w.hot[c] != NIL {
            out.push(w.hot[c]);
        }
        out
    }

    #[test]
    fn behaves_as_one_list_in_free_order() {
        let mut t = BlockTable::default();
        let ids: Vec<u32> = (0..6)
            .map(|k| {
                t.reserve_one().unwrap();
                t.insert(Block::new(k * 64, 64, 3, Place::Own))
            })
            .collect();
        let mut w = WarmSets::default();
        let mut model: Vec<u32> = vec![];
        assert!(!w.has(3) && w.oldest(3) == NIL);
        // A scripted mix of frees, newest-takes and removals.
        for step in 0..40u32 {
            let k = (step * 7 + step / 3) % 6;
            let i = ids[k as usize];
            match step % 5 {
                0 | 1 | 3 if !model.contains(&i) => {
                    w.push(&mut t, 3, i);
                    model.push(i);
                }
                2 if !model.is_empty() => {
                    assert_eq!(w.pop_newest(&mut t, 3), model.pop().unwrap());
                }
                4 if model.contains(&i) => {
                    w.remove(&mut t, 3, i);
                    model.retain(|&x| x != i);
                }
                _ => {}
            }
            assert_eq!(order(&w, &t, 3), model, "step {step}");
            assert_eq!(w.has(3), !model.is_empty());
            assert_eq!(w.classes.contains(3), !model.is_empty());
            assert_eq!(w.oldest(3), model.first().copied().unwrap_or(NIL));
        }
    }

    /// A block of class `c`, the `k`-th of 64 bytes, freed at stamp `at`
    /// (a retained block's state), in the table.
    fn freed(t: &mut BlockTable, k: usize, c: u16, at: u64) -> u32 {
        t.reserve_one().unwrap();
        let mut b = Block::new(k * 64, 64, c, Place::Own);
        b.freed_at = at;
        b.state = BlockState::Warm;
        t.insert(b)
    }

    /// Blocks of class 3 with the given free stamps, in the table.
    fn blocks(t: &mut BlockTable, stamps: &[u64]) -> Vec<u32> {
        let first = t.len();
        (stamps.iter().enumerate())
            .map(|(k, &at)| freed(t, first + k, 3, at))
            .collect()
    }

    /// Class 3's blocks at stamps `listed`, retained in that order, and
    /// blocks at stamps `run` in the table (not retained yet).
    fn listed_then(listed: &[u64], run: &[u64]) -> (WarmSets, BlockTable, Vec<u32>) {
        let mut t = BlockTable::default();
        let a = blocks(&mut t, listed);
        let b = blocks(&mut t, run);
        let mut w = WarmSets::default();
        for &i in &a {
            w.push(&mut t, 3, i);
        }
        (w, t, b)
    }

    /// Both sets of stamps in free order.
    fn merged(listed: &[u64], run: &[u64]) -> Vec<u64> {
        let mut all: Vec<u64> = listed.iter().chain(run).copied().collect();
        all.sort_unstable();
        all
    }

    fn stamps(w: &WarmSets, t: &BlockTable) -> Vec<u64> {
        order(w, t, 3)
            .iter()
            .map(|&i| t.get(i).unwrap().freed_at)
            .collect()
    }

    #[test]
    fn a_run_oldest_first_walks_the_list_once() {
        // 2 000 listed blocks at even stamps, then a run of 2 000 at odd
        // stamps interleaved with them, oldest first (two threads' flushes
        // whose stamps interleave).
        let m = if cfg!(miri) { 40 } else { 2_000 };
        let n = m;
        let listed: Vec<u64> = (0..m as u64).map(|k| 2 * k + 2).collect();
        let run: Vec<u64> = (0..n as u64).map(|k| 2 * k + 1).collect();
        let (mut w, mut t, b) = listed_then(&listed, &run);
        let mut r = InsertRun::default();
        let walked: usize = b.iter().map(|&i| w.insert_next(&mut t, 3, i, &mut r)).sum();
        assert_eq!(stamps(&w, &t), merged(&listed, &run));
        // Back from the newest once for the first, then forward: about
        // the list's length, where one at a time walked `n * m / 2`.
        assert!(walked <= m + n, "walked {walked}");
        // The same blocks one at a time, each from the newest.
        let (mut w, mut t, b) = listed_then(&listed, &run);
        let alone: usize = b
            .iter()
            .map(|&i| w.insert_next(&mut t, 3, i, &mut InsertRun::default()))
            .sum();
        assert_eq!(stamps(&w, &t), merged(&listed, &run));
        assert!(alone >= n * m / 2 - n, "walked {alone}");
    }

    #[test]
    fn a_block_of_another_class_starts_the_run_again() {
        let (mut w, mut t, b) = listed_then(&[10, 20, 30], &[15]);
        let (newest, o) = (freed(&mut t, 8, 4, 100), freed(&mut t, 9, 4, 16));
        w.push(&mut t, 4, newest);
        let mut r = InsertRun::default();
        w.insert_next(&mut t, 3, b[0], &mut r);
        // Older than class 4's newest, later than class 3's block 15: into
        // class 4's own order, not after that block.
        w.insert_next(&mut t, 4, o, &mut r);
        assert_eq!(stamps(&w, &t), [10, 15, 20, 30]);
        assert_eq!(order(&w, &t, 4), [o, newest]);
    }

    #[test]
    fn a_run_out_of_order_still_lands_in_free_order() {
        // A run that is not oldest first (a bin's entries from two
        // threads' stamps): each block still goes to its place.
        let listed = [10, 20, 30, 40, 50];
        let run = [35, 15, 45, 5, 25, 60, 55, 20];
        let (mut w, mut t, b) = listed_then(&listed, &run);
        let mut r = InsertRun::default();
        for &i in &b {
            w.insert_next(&mut t, 3, i, &mut r);
        }
        assert_eq!(stamps(&w, &t), merged(&listed, &run));
    }
}
