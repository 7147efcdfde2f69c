//! The claim protocol: one buffer, one claimant at a time.
//!
//! A slot is a lane's shared buffer on a device, or a private engine's own
//! buffer. Its small mutex guards three fields and is only ever held for a
//! few instructions; the *claim* (`busy`) is what a [`ScratchGuard`] holds
//! for the whole execution:
//!
//! 1. **acquire**: lock, wait on the condvar while `busy`, set `busy`,
//!    read the current buffer, unlock. From here until release no other
//!    claimant and no `trim` touches the buffer.
//! 2. **grow** (request above capacity): allocate the new buffer with no
//!    lock held; on failure release the claim and return the error, the old
//!    buffer untouched. On success swap it in under the lock, then wait for
//!    the old buffer to be idle and free it, still holding the claim: the
//!    old buffer's last user released its claim before we acquired ours.
//! 3. **release** (guard drop): lock, clear `busy`, unlock, wake a waiter.
//!
//! `trim` takes the buffer out only when the slot is not claimed; a claimant
//! that arrives afterwards finds no buffer and allocates a fresh one.
//!
//! [`ScratchGuard`]: super::ScratchGuard

use super::device::{Device, DeviceBuffer};
use super::error::ScratchError;
use super::stats::{DeviceCounters, SlotCounters};
use super::sync::{lock, wait, Condvar, Mutex, Ordering::Relaxed};
use core::ptr::NonNull;
use std::time::Instant;

struct SlotState {
    /// A claimant holds the buffer.
    busy: bool,
    /// Claimants parked on `released`.
    waiters: usize,
    buf: Option<DeviceBuffer>,
}

pub(crate) struct Slot {
    state: Mutex<SlotState>,
    released: Condvar,
    /// Counts towards the device's shared (lane) or private bytes.
    shared: bool,
    pub(crate) counters: SlotCounters,
}

/// The buffer a claimant holds: valid, and its alone, until release.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Claimed {
    pub(crate) ptr: NonNull<u8>,
    pub(crate) capacity: usize,
}

impl Slot {
    /// A slot with no buffer yet.
    pub(crate) fn new(shared: bool) -> Self {
        Self::with_buffer(None, shared)
    }

    /// A slot that starts with `buf` (already counted as held by the caller).
    pub(crate) fn with_buffer(buf: Option<DeviceBuffer>, shared: bool) -> Self {
        let counters = SlotCounters::default();
        if let Some(b) = &buf {
            counters.capacity.store(b.len(), Relaxed);
            counters.peak_capacity.store(b.len(), Relaxed);
        }
        Slot {
            state: Mutex::new(SlotState {
                busy: false,
                waiters: 0,
                buf,
            }),
            released: Condvar::new(),
            shared,
            counters,
        }
    }

    /// Takes the exclusive claim and makes sure the buffer holds `bytes`
    /// (`bytes > 0`). On `Ok` the caller must call [`Slot::release`] exactly
    /// once when done; on `Err` the claim is already released.
    pub(crate) fn claim(
        &self,
        dev: &dyn Device,
        dc: &DeviceCounters,
        bytes: usize,
    ) -> Result<Claimed, ScratchError> {
        let current = self.acquire(dc, bytes);
        match current {
            Some(c) if c.capacity >= bytes => Ok(c),
            _ => self.grow(dev, dc, bytes).inspect_err(|_| self.release()),
        }
    }

    /// Step 1: wait for the claim, take it, and read the current buffer.
    fn acquire(&self, dc: &DeviceCounters, bytes: usize) -> Option<Claimed> {
        let mut st = lock(&self.state);
        if st.busy {
            let start = Instant::now();
            st.waiters += 1;
            while st.busy {
                st = wait(&self.released, st);
            }
            st.waiters -= 1;
            let ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
            self.counters.contended_claims.fetch_add(1, Relaxed);
            self.counters.wait_ns.fetch_add(ns, Relaxed);
            dc.contended_claims.fetch_add(1, Relaxed);
            dc.wait_ns.fetch_add(ns, Relaxed);
        }
        st.busy = true;
        let current = st.buf.as_ref().map(|b| Claimed {
            ptr: b.ptr(),
            capacity: b.len(),
        });
        drop(st);
        self.counters.claims.fetch_add(1, Relaxed);
        self.counters.largest_request.fetch_max(bytes, Relaxed);
        dc.claims.fetch_add(1, Relaxed);
        current
    }

    /// Step 2, with the claim held: replace the buffer by one of `bytes`.
    fn grow(
        &self,
        dev: &dyn Device,
        dc: &DeviceCounters,
        bytes: usize,
    ) -> Result<Claimed, ScratchError> {
        let new = dev.allocate(bytes).inspect_err(|_| {
            self.counters.failed_growths.fetch_add(1, Relaxed);
            dc.failed_growths.fetch_add(1, Relaxed);
        })?;
        let claimed = Claimed {
            ptr: new.ptr(),
            capacity: new.len(),
        };
        dc.add_held(new.len(), self.shared);
        let old = lock(&self.state).buf.replace(new);
        self.counters.capacity.store(claimed.capacity, Relaxed);
        self.counters
            .peak_capacity
            .fetch_max(claimed.capacity, Relaxed);
        self.counters.growths.fetch_add(1, Relaxed);
        dc.growths.fetch_add(1, Relaxed);
        if let Some(old) = old {
            // We hold the claim, so every earlier claimant of `old` is done.
            Self::retire(dev, dc, old, self.shared);
        }
        Ok(claimed)
    }

    /// Step 3: ends a claim taken by [`Slot::claim`].
    pub(crate) fn release(&self) {
        let mut st = lock(&self.state);
        st.busy = false;
        let wake = st.waiters > 0;
        drop(st);
        if wake {
            self.released.notify_one();
        }
    }

    /// Frees the buffer if the slot is not claimed; returns the bytes freed
    /// (0 when claimed or empty).
    pub(crate) fn trim(&self, dev: &dyn Device, dc: &DeviceCounters) -> usize {
        let buf = {
            let mut st = lock(&self.state);
            if st.busy {
                return 0;
            }
            st.buf.take()
        };
        match buf {
            None => 0,
            Some(b) => {
                self.counters.capacity.store(0, Relaxed);
                Self::retire(dev, dc, b, self.shared)
            }
        }
    }

    /// Frees a buffer nobody may use any more, once the device says no work
    /// against it is running; leaks it (counted) if the device cannot say.
    /// Returns the bytes that left the slot.
    fn retire(dev: &dyn Device, dc: &DeviceCounters, buf: DeviceBuffer, shared: bool) -> usize {
        let n = buf.len();
        match dev.wait_idle(&buf) {
            // SAFETY: `buf` came from `dev.allocate`, was just taken out of
            // its slot (so it is freed once), nobody holds a claim on it,
            // and the device reports no work against it still running.
            Ok(()) => unsafe { dev.free(buf) },
            Err(_) => {
                dc.leaked.fetch_add(n, Relaxed);
            }
        }
        dc.sub_held(n, shared);
        n
    }
}

#[cfg(test)]
impl Slot {
    /// Claimants parked on this slot now.
    pub(crate) fn waiters(&self) -> usize {
        lock(&self.state).waiters
    }
}
