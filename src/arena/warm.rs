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
use super::blocks::{BlockTable, List, NIL};
use crate::size_class::{Class, CLASS_COUNT};

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
    /// usually the newest, else walked back from the newest.
    pub(crate) fn insert_by_stamp(&mut self, table: &mut BlockTable, c: Class, i: u32) {
        let at = |t: &BlockTable, k: u32| t.get(k).map_or(0, |b| b.freed_at);
        let stamp = at(table, i);
        let hot = self.hot[c];
        if hot == NIL || at(table, hot) <= stamp {
            self.push(table, c, i);
            return;
        }
        // Older than the hot slot: into the list, after the newest entry
        // that is not newer than it.
        let list = &mut self.older[c];
        let mut after = list.tail;
        while after != NIL && at(table, after) > stamp {
            after = table.get(after).map_or(NIL, |b| b.prev);
        }
        table.insert_after(list, after, i);
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
}
