//! The block table: one record per buffer the arena has carved or mapped, and
//! the intrusive per-class lists that thread through it. Each free list is in
//! free order (head = least recently freed), and every free stamps the block,
//! so the arena-wide least-recently-freed buffer is the oldest of the class
//! heads. Pure bookkeeping: no OS, no unsafe.
//!
//! Records are only ever added when the arena grows (a cold allocation), and
//! vacated slots are recycled, so the warm path never allocates metadata.

/// The "no block" link.
pub(crate) const NIL: u32 = u32::MAX;

/// Where a buffer is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BlockState {
    /// Owned by an allocation or a lease.
    Live,
    /// Free with its pages kept: on its class's warm list.
    Warm,
    /// Free and released (a small-class block whose run's pages may be gone):
    /// on its class's cold list, reused only as a cold allocation.
    Cold,
    /// A free extent of an execution heap segment (`heap.rs`): on its size
    /// bin, or the whole of an idle segment.
    Extent,
    /// The record is unused; its slot is on the vacant stack.
    Vacant,
}

/// Where a block's memory comes from, and so how it goes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// Carved from small-class run `runs[i]`.
    Run(u32),
    /// Carved from a large-class segment `runs[i]` shared by the classes
    /// from 64 KiB to 16 MiB (own-class policy: I/O arenas).
    Segment(u32),
    /// A mapping of its own, `cap` bytes (classes of 16 MiB and more under
    /// the own-class policy).
    Own,
    /// A piece of execution heap segment `heap.segs[i]` (`heap.rs`): a
    /// live buffer or a free extent, linked to its address neighbours.
    Heap(u32),
    /// Above the largest class: a mapping of its own, `cap` bytes,
    /// released on free.
    Dedicated,
}

/// One buffer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Block {
    pub addr: usize,
    pub cap: usize,
    /// Size class (`DEDICATED` above the largest class; for a heap piece,
    /// the class of its length: its size bin when free).
    pub class: u16,
    pub state: BlockState,
    pub place: Place,
    /// When it was last freed (the arena's free counter).
    pub freed_at: u64,
    /// How many of its first bytes have their pages (see `ready.rs`).
    pub ready: usize,
    /// Links in the class list (warm or cold) or size bin (heap extents).
    pub prev: u32,
    pub next: u32,
    /// Heap pieces only: the pieces just below and above in address order
    /// (`NIL` at the segment's ends).
    pub lo: u32,
    pub hi: u32,
}

/// Class marker for dedicated (unclassed) mappings.
pub(crate) const DEDICATED: u16 = u16::MAX;

impl Block {
    pub(crate) fn new(addr: usize, cap: usize, class: u16, place: Place) -> Self {
        Block {
            addr,
            cap,
            class,
            state: BlockState::Live,
            place,
            freed_at: 0,
            ready: 0,
            prev: NIL,
            next: NIL,
            lo: NIL,
            hi: NIL,
        }
    }

    /// The length of the block's own mapping, if it has one.
    pub(crate) fn own_mapping(&self) -> Option<usize> {
        match self.place {
            Place::Own | Place::Dedicated => Some(self.cap),
            Place::Run(_) | Place::Segment(_) | Place::Heap(_) => None,
        }
    }
}

/// A doubly linked list of block indices: head is the oldest entry.
#[derive(Debug, Clone, Copy)]
pub(crate) struct List {
    pub head: u32,
    pub tail: u32,
    pub len: u32,
}

impl Default for List {
    fn default() -> Self {
        List {
            head: NIL,
            tail: NIL,
            len: 0,
        }
    }
}

impl List {
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// All block records plus the stack of vacant slots.
#[derive(Debug, Default)]
pub(crate) struct BlockTable {
    blocks: Vec<Block>,
    vacant: Vec<u32>,
}

impl BlockTable {
    /// Makes room for one more record without touching existing ones; call
    /// before the OS work of a cold allocation so that a failed growth of
    /// the table leaves nothing half-done.
    pub(crate) fn reserve_one(&mut self) -> Result<(), ()> {
        self.reserve(1)
    }

    /// Makes room for `n` more records (see [`BlockTable::reserve_one`]).
    pub(crate) fn reserve(&mut self, n: usize) -> Result<(), ()> {
        if self.vacant.len() >= n {
            return Ok(());
        }
        self.blocks.try_reserve(n).map_err(|_| ())?;
        // The vacant stack can never hold more than every block.
        let all = self.blocks.len() + n;
        self.vacant
            .try_reserve(all.saturating_sub(self.vacant.len()))
            .map_err(|_| ())
    }

    /// Vacant slots: records `insert` fills without allocating (their
    /// pin records exist too).
    #[inline(always)]
    pub(crate) fn vacant_len(&self) -> usize {
        self.vacant.len()
    }

    /// Stores `b` in a vacant slot or a new one. Capacity was reserved by
    /// `reserve_one`, so this never allocates.
    pub(crate) fn insert(&mut self, b: Block) -> u32 {
        if let Some(i) = self.vacant.pop() {
            self.blocks[i as usize] = b;
            i
        } else {
            self.blocks.push(b);
            (self.blocks.len() - 1) as u32
        }
    }

    /// Adds `n` vacant records (written now, so their memory is
    /// materialized before a warm path takes them).
    pub(crate) fn add_vacant(&mut self, n: usize) -> Result<(), ()> {
        self.blocks.try_reserve(n).map_err(|_| ())?;
        let all = self.blocks.len() + n;
        self.vacant
            .try_reserve(all.saturating_sub(self.vacant.len()))
            .map_err(|_| ())?;
        for _ in 0..n {
            let i = self.blocks.len() as u32;
            let mut b = Block::new(0, 0, 0, Place::Own);
            b.state = BlockState::Vacant;
            self.blocks.push(b);
            self.vacant.push(i);
        }
        Ok(())
    }

    /// Marks a slot vacant. Never allocates: the stack's capacity covers every slot.
    pub(crate) fn vacate(&mut self, i: u32) {
        self.blocks[i as usize].state = BlockState::Vacant;
        self.vacant.push(i);
    }

    /// Slots in use or vacant: the next new block gets this index.
    pub(crate) fn len(&self) -> usize {
        self.blocks.len()
    }

    #[inline]
    pub(crate) fn get(&self, i: u32) -> Option<&Block> {
        self.blocks.get(i as usize)
    }

    #[inline]
    pub(crate) fn at(&mut self, i: u32) -> &mut Block {
        &mut self.blocks[i as usize]
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Block> {
        self.blocks.iter()
    }

    /// Appends `i` at the tail (most recent end) of `list`.
    #[inline]
    pub(crate) fn push_back(&mut self, list: &mut List, i: u32) {
        let old_tail = list.tail;
        let b = &mut self.blocks[i as usize];
        b.prev = old_tail;
        b.next = NIL;
        if old_tail == NIL {
            list.head = i;
        } else {
            self.blocks[old_tail as usize].next = i;
        }
        list.tail = i;
        list.len += 1;
    }

    /// Links `i` into `list` right after `after` (`NIL`: at the head).
    pub(crate) fn insert_after(&mut self, list: &mut List, after: u32, i: u32) {
        let next = if after == NIL {
            list.head
        } else {
            self.blocks[after as usize].next
        };
        let b = &mut self.blocks[i as usize];
        b.prev = after;
        b.next = next;
        if after == NIL {
            list.head = i;
        } else {
            self.blocks[after as usize].next = i;
        }
        if next == NIL {
            list.tail = i;
        } else {
            self.blocks[next as usize].prev = i;
        }
        list.len += 1;
    }

    /// Unlinks `i` from `list`.
    #[inline]
    pub(crate) fn unlink(&mut self, list: &mut List, i: u32) {
        let b = &mut self.blocks[i as usize];
        let (prev, next) = (b.prev, b.next);
        b.prev = NIL;
        b.next = NIL;
        if prev == NIL {
            list.head = next;
        } else {
            self.blocks[prev as usize].next = next;
        }
        if next == NIL {
            list.tail = prev;
        } else {
            self.blocks[next as usize].prev = prev;
        }
        list.len -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(t: &BlockTable, l: &List) -> Vec<u32> {
        let mut out = vec![];
        let mut i = l.head;
        while i != NIL {
            out.push(i);
            i = t.get(i).unwrap().next;
        }
        out
    }

    #[test]
    fn lists_keep_order_and_unlink_anywhere() {
        let mut t = BlockTable::default();
        let mut l = List::default();
        let ids: Vec<u32> = (0..5)
            .map(|k| {
                t.reserve_one().unwrap();
                t.insert(Block::new(k * 64, 64, 2, Place::Own))
            })
            .collect();
        for &i in &ids {
            t.push_back(&mut l, i);
        }
        assert_eq!(collect(&t, &l), vec![0, 1, 2, 3, 4]);
        t.unlink(&mut l, 2);
        t.unlink(&mut l, 0);
        t.unlink(&mut l, 4);
        assert_eq!(collect(&t, &l), vec![1, 3]);
        assert_eq!((l.head, l.tail, l.len), (1, 3, 2));
        t.push_back(&mut l, 0);
        assert_eq!(collect(&t, &l), vec![1, 3, 0]);
        t.insert_after(&mut l, NIL, 2);
        t.insert_after(&mut l, 3, 4);
        assert_eq!(collect(&t, &l), vec![2, 1, 3, 4, 0]);
        t.unlink(&mut l, 4);
        t.insert_after(&mut l, 0, 4);
        assert_eq!(collect(&t, &l), vec![2, 1, 3, 0, 4]);
        assert_eq!((l.tail, l.len), (4, 5));
        t.unlink(&mut l, 4);
        t.unlink(&mut l, 2);
        assert_eq!(collect(&t, &l), vec![1, 3, 0]);
        t.unlink(&mut l, 0);
        t.unlink(&mut l, 1);
        t.unlink(&mut l, 3);
        assert!(l.is_empty());
        assert_eq!((l.head, l.tail), (NIL, NIL));
    }

    #[test]
    fn vacant_slots_are_recycled_without_growth() {
        let mut t = BlockTable::default();
        t.reserve_one().unwrap();
        let a = t.insert(Block::new(0, 16, 0, Place::Own));
        t.reserve_one().unwrap();
        let b = t.insert(Block::new(16, 16, 0, Place::Own));
        t.vacate(a);
        assert_eq!(t.get(a).unwrap().state, BlockState::Vacant);
        t.reserve_one().unwrap();
        let c = t.insert(Block::new(32, 16, 0, Place::Own));
        assert_eq!(c, a);
        assert_ne!(b, c);
        assert_eq!(t.iter().count(), 2);
    }
}
