//! One arena as shared by its handles and allocations: the state behind a
//! lock, the OS-call counters beside it, and the validation every request
//! passes before it touches the state.

use super::error::AllocError;
use super::state::{ArenaState, Grant};
use super::{ArenaConfig, ArenaKind, MAX_ALIGN};
use crate::os::OsCounters;
use crate::size_class::{aligned_size, class_of};
use crate::stats::ArenaStats;
use std::sync::{Mutex, MutexGuard};

/// The shared body of an arena. Handles and allocations hold it by `Arc`, so
/// it lives until the last of them is gone, and then gives every page back.
pub(crate) struct ArenaCore {
    pub(crate) kind: ArenaKind,
    state: Mutex<ArenaState>,
    pub(crate) os: OsCounters,
}

impl ArenaCore {
    pub(crate) fn new(kind: ArenaKind, config: ArenaConfig) -> Self {
        ArenaCore {
            kind,
            state: Mutex::new(ArenaState::new(config)),
            os: OsCounters::new(),
        }
    }

    /// The state, even if a thread panicked while holding it: every state
    /// change is completed before anything that could panic, so the data
    /// behind a poisoned lock is still consistent.
    pub(crate) fn lock(&self) -> MutexGuard<'_, ArenaState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Checks a request and serves it warm if a retained buffer fits, cold otherwise.
    pub(crate) fn allocate(&self, size: usize, align: usize) -> Result<Grant, AllocError> {
        if size == 0 {
            return Err(AllocError::ZeroSize);
        }
        if !align.is_power_of_two() {
            return Err(AllocError::BadAlignment { align });
        }
        if align > MAX_ALIGN {
            return Err(AllocError::UnsupportedAlignment {
                align,
                max: MAX_ALIGN,
            });
        }
        let eff = aligned_size(size, align).ok_or(AllocError::SizeOverflow { size })?;
        let mut st = self.lock();
        match class_of(eff) {
            Some(c) => match st.take_warm(c, align) {
                Some(g) => Ok(g),
                None => st.take_cold(c, &self.os),
            },
            None => st.map_dedicated(eff, align, &self.os),
        }
    }

    /// Returns a buffer; `false` when `block` is not a live buffer at `addr`.
    pub(crate) fn free(&self, block: u32, addr: usize) -> bool {
        self.lock().free(block, addr, &self.os)
    }

    /// The live block starting at `addr` and its capacity.
    pub(crate) fn live_block_at(&self, addr: usize) -> Option<(u32, usize)> {
        let st = self.lock();
        let i = st.live_block_at(addr)?;
        Some((i, st.table.get(i)?.cap))
    }

    pub(crate) fn stats(&self) -> ArenaStats {
        let mut s = self.lock().stats;
        s.os = self.os.snapshot();
        s
    }

    pub(crate) fn trim(&self) -> usize {
        self.lock().trim(&self.os)
    }

    pub(crate) fn set_retention_cap(&self, cap: usize) {
        self.lock().set_retention_cap(cap, &self.os)
    }

    pub(crate) fn reset_peak(&self) {
        let mut st = self.lock();
        st.stats.peak_live_bytes = st.stats.live_bytes;
    }
}

impl Drop for ArenaCore {
    fn drop(&mut self) {
        let os = &self.os;
        self.state
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .release_everything(os);
    }
}
