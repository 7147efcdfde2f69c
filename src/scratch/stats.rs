//! What the pool counts, per lane and per device. Counters are atomics
//! updated next to the event they count, so reading them never waits for a
//! running execution; a snapshot taken while claims run is a consistent
//! value of each field, not of all fields together.

use super::device::DeviceId;
use super::pool::Lane;
use super::sync::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use crate::os::OsStats;

/// One lane's shared buffer on one device.
///
/// ```
/// use warmarena::scratch::{DeviceId, EngineScratch, Lane, ScratchMode, ScratchPool};
/// let pool = ScratchPool::new();
/// let e = pool.engine(DeviceId::HOST, 4096, ScratchMode::Shared).unwrap();
/// drop(e.claim_on(Lane(7), 4096).unwrap());
/// let s = pool.stats(DeviceId::HOST).unwrap();
/// let lane = s.lanes.iter().find(|l| l.lane == Lane(7)).unwrap();
/// assert_eq!((lane.capacity, lane.claims, lane.growths), (4096, 1, 1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct LaneStats {
    /// The lane.
    pub lane: Lane,
    /// Bytes of the lane's buffer now (0 when none is held).
    pub capacity: usize,
    /// The largest capacity the lane has held.
    pub peak_capacity: usize,
    /// The largest request the lane has served.
    pub largest_request: usize,
    /// Claims served.
    pub claims: u64,
    /// Claims that found the buffer in use and waited.
    pub contended_claims: u64,
    /// Nanoseconds claims spent waiting for the buffer.
    pub wait_ns: u64,
    /// Times the buffer was replaced by a larger one.
    pub growths: u64,
    /// Growths the device refused (the old buffer was kept).
    pub failed_growths: u64,
}

/// Everything the pool holds and did on one device.
///
/// `held_bytes` is the memory that matters: the shared lanes' buffers plus
/// every private engine's own buffer. `shared_requirements` is what the live
/// shared engines would hold between them in private mode, so
/// [`reclaimed_bytes`](Self::reclaimed_bytes) is what sharing saves.
///
/// ```
/// use warmarena::scratch::{DeviceId, ScratchMode, ScratchPool};
/// let pool = ScratchPool::new();
/// let page = warmarena::page_size();
/// let a = pool.engine(DeviceId::HOST, page, ScratchMode::Shared).unwrap();
/// let b = pool.engine(DeviceId::HOST, 2 * page, ScratchMode::Shared).unwrap();
/// drop(a.claim(page).unwrap());
/// drop(b.claim(2 * page).unwrap());
/// let s = pool.stats(DeviceId::HOST).unwrap();
/// assert_eq!(s.held_bytes, 2 * page);
/// assert_eq!(s.reclaimed_bytes(), page);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeviceScratchStats {
    /// The device.
    pub device: DeviceId,
    /// Scratch bytes held now: shared lanes plus private engines.
    pub held_bytes: usize,
    /// The largest `held_bytes` seen. A growth holds the old and the new
    /// buffer for a moment, and this counts that moment.
    pub peak_held_bytes: usize,
    /// Bytes held by shared lanes.
    pub shared_bytes: usize,
    /// Bytes held by private engines.
    pub private_bytes: usize,
    /// Live engines in shared mode.
    pub shared_engines: usize,
    /// Live engines in private mode.
    pub private_engines: usize,
    /// Sum of the requirements the live shared engines recorded.
    pub shared_requirements: usize,
    /// Claims served (shared and private).
    pub claims: u64,
    /// Claims that waited for a buffer in use.
    pub contended_claims: u64,
    /// Nanoseconds claims spent waiting.
    pub wait_ns: u64,
    /// Buffer replacements by a larger one.
    pub growths: u64,
    /// Growths the device refused.
    pub failed_growths: u64,
    /// Calls to `trim` that reached this device.
    pub trims: u64,
    /// Bytes released by `trim`.
    pub trimmed_bytes: usize,
    /// Bytes not freed because [`Device::wait_idle`](super::Device::wait_idle)
    /// failed: freeing them could have pulled memory from under running work.
    pub leaked_bytes: usize,
    /// Per-lane figures, in the order lanes were first used.
    pub lanes: Vec<LaneStats>,
    /// The device's own system calls, when it counts them.
    pub os: Option<OsStats>,
}

impl DeviceScratchStats {
    /// Bytes the live shared engines would hold in private mode but do not:
    /// the sum of their requirements less what the shared lanes hold.
    ///
    /// ```
    /// use warmarena::scratch::{DeviceId, ScratchPool};
    /// let s = ScratchPool::new().stats(DeviceId::HOST).unwrap();
    /// assert_eq!(s.reclaimed_bytes(), 0);
    /// ```
    pub fn reclaimed_bytes(&self) -> usize {
        self.shared_requirements.saturating_sub(self.shared_bytes)
    }
}

/// Counters of one slot (a lane's buffer or a private engine's buffer).
#[derive(Debug, Default)]
pub(crate) struct SlotCounters {
    pub(crate) capacity: AtomicUsize,
    pub(crate) peak_capacity: AtomicUsize,
    pub(crate) largest_request: AtomicUsize,
    pub(crate) claims: AtomicU64,
    pub(crate) contended_claims: AtomicU64,
    pub(crate) wait_ns: AtomicU64,
    pub(crate) growths: AtomicU64,
    pub(crate) failed_growths: AtomicU64,
}

impl SlotCounters {
    pub(crate) fn lane_stats(&self, lane: Lane) -> LaneStats {
        LaneStats {
            lane,
            capacity: self.capacity.load(Relaxed),
            peak_capacity: self.peak_capacity.load(Relaxed),
            largest_request: self.largest_request.load(Relaxed),
            claims: self.claims.load(Relaxed),
            contended_claims: self.contended_claims.load(Relaxed),
            wait_ns: self.wait_ns.load(Relaxed),
            growths: self.growths.load(Relaxed),
            failed_growths: self.failed_growths.load(Relaxed),
        }
    }
}

/// Counters of one device, summed over its slots.
#[derive(Debug, Default)]
pub(crate) struct DeviceCounters {
    pub(crate) held: AtomicUsize,
    pub(crate) peak_held: AtomicUsize,
    pub(crate) shared: AtomicUsize,
    pub(crate) private: AtomicUsize,
    pub(crate) shared_engines: AtomicUsize,
    pub(crate) private_engines: AtomicUsize,
    pub(crate) shared_requirements: AtomicUsize,
    pub(crate) claims: AtomicU64,
    pub(crate) contended_claims: AtomicU64,
    pub(crate) wait_ns: AtomicU64,
    pub(crate) growths: AtomicU64,
    pub(crate) failed_growths: AtomicU64,
    pub(crate) trims: AtomicU64,
    pub(crate) trimmed: AtomicUsize,
    pub(crate) leaked: AtomicUsize,
}

impl DeviceCounters {
    /// Counts `bytes` newly held by a slot of the given kind.
    pub(crate) fn add_held(&self, bytes: usize, shared: bool) {
        let kind = if shared { &self.shared } else { &self.private };
        kind.fetch_add(bytes, Relaxed);
        let now = self.held.fetch_add(bytes, Relaxed) + bytes;
        self.peak_held.fetch_max(now, Relaxed);
    }

    /// Counts `bytes` no longer held (freed or leaked).
    pub(crate) fn sub_held(&self, bytes: usize, shared: bool) {
        let kind = if shared { &self.shared } else { &self.private };
        kind.fetch_sub(bytes, Relaxed);
        self.held.fetch_sub(bytes, Relaxed);
    }

    pub(crate) fn snapshot(
        &self,
        device: DeviceId,
        lanes: Vec<LaneStats>,
        os: Option<OsStats>,
    ) -> DeviceScratchStats {
        DeviceScratchStats {
            device,
            held_bytes: self.held.load(Relaxed),
            peak_held_bytes: self.peak_held.load(Relaxed),
            shared_bytes: self.shared.load(Relaxed),
            private_bytes: self.private.load(Relaxed),
            shared_engines: self.shared_engines.load(Relaxed),
            private_engines: self.private_engines.load(Relaxed),
            shared_requirements: self.shared_requirements.load(Relaxed),
            claims: self.claims.load(Relaxed),
            contended_claims: self.contended_claims.load(Relaxed),
            wait_ns: self.wait_ns.load(Relaxed),
            growths: self.growths.load(Relaxed),
            failed_growths: self.failed_growths.load(Relaxed),
            trims: self.trims.load(Relaxed),
            trimmed_bytes: self.trimmed.load(Relaxed),
            leaked_bytes: self.leaked.load(Relaxed),
            lanes,
            os,
        }
    }
}
