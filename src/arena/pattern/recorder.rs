//! The learning run: the sequence of allocate and free events of one thread
//! between two boundaries.

use std::collections::HashMap;

/// One event of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    /// The next allocation (its index is the number of allocations before it).
    Alloc {
        /// Bytes asked for.
        size: usize,
        /// Alignment asked for.
        align: usize,
    },
    /// Allocation `k` of the run was freed.
    Free {
        /// Index of the allocation.
        k: u32,
    },
}

/// What a learning run has recorded so far.
#[derive(Debug, Default)]
pub(crate) struct Recorder {
    pub events: Vec<Event>,
    /// Capacity granted to each allocation (0 until granted).
    pub caps: Vec<usize>,
    pub aligns: Vec<usize>,
    /// Live recorded allocations by the arena block that holds them.
    live: HashMap<u32, u32>,
    /// The run went past the event limit or a grant failed: it is not planned.
    pub refused: bool,
    limit: usize,
}

impl Recorder {
    pub(crate) fn new(limit: usize) -> Self {
        Recorder {
            limit,
            ..Recorder::default()
        }
    }

    /// Records an allocation; its index, or `None` once the run is refused.
    pub(crate) fn alloc(&mut self, size: usize, align: usize) -> Option<u32> {
        if self.refused || self.events.len() >= self.limit || self.caps.len() >= u32::MAX as usize {
            self.refused = true;
            return None;
        }
        self.events.push(Event::Alloc { size, align });
        self.caps.push(0);
        self.aligns.push(align);
        Some(self.caps.len() as u32 - 1)
    }

    /// Allocation `k` was served by arena block `block` with `cap` bytes.
    pub(crate) fn granted(&mut self, k: u32, block: u32, cap: usize) {
        self.caps[k as usize] = cap;
        self.live.insert(block, k);
    }

    /// Allocation `k` could not be served: the run is not planned.
    pub(crate) fn failed(&mut self) {
        self.refused = true;
    }

    /// Arena block `block` was freed; recorded if it holds a recorded allocation.
    pub(crate) fn free(&mut self, block: u32) {
        if self.refused {
            return;
        }
        if let Some(k) = self.live.remove(&block) {
            if self.events.len() >= self.limit {
                self.refused = true;
                return;
            }
            self.events.push(Event::Free { k });
        }
    }
}
