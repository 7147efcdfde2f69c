//! An engine's side of the pool: its recorded requirement, the mode it was
//! created in, and its claims.
//!
//! Both are fixed when the engine is created and never re-read: the mode in
//! force then (explicit, or from [`ScratchPool::default_mode`]) governs the
//! engine for life, so private and shared engines live side by side and a
//! later change of the default affects only engines created after it.

use super::device::DeviceId;
use super::error::ScratchError;
use super::guard::ScratchGuard;
#[cfg(not(loom))]
use super::pool::ScratchPool;
use super::pool::{DeviceEntry, Lane};
use super::slot::Slot;
use super::sync::{Arc, Ordering::Relaxed};

/// The environment variable read at engine creation, through
/// [`EngineScratch::from_config`], when code has not set a default:
/// `shared` or `private` (any case, surrounding spaces ignored).
///
/// ```
/// use warmarena::scratch::{ScratchMode, MODE_ENV_VAR};
/// assert_eq!(MODE_ENV_VAR, "WARMARENA_SCRATCH");
/// // What a launcher sets for a program that cannot change its code:
/// let mode: ScratchMode = "shared".parse().unwrap();
/// assert_eq!(mode, ScratchMode::Shared);
/// ```
pub const MODE_ENV_VAR: &str = "WARMARENA_SCRATCH";

/// Where an engine's scratch lives.
///
/// ```
/// use warmarena::scratch::ScratchMode;
/// assert_eq!("shared".parse::<ScratchMode>().unwrap(), ScratchMode::Shared);
/// assert_eq!(" Private ".parse::<ScratchMode>().unwrap(), ScratchMode::Private);
/// assert!("on".parse::<ScratchMode>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScratchMode {
    /// The engine allocates its own buffer of its requirement at creation
    /// and holds it until it is dropped. Memory grows with the engine count.
    Private,
    /// The engine draws from its device's shared buffer for the lane it
    /// claims on, grown to the largest request; it holds nothing itself.
    Shared,
}

impl core::str::FromStr for ScratchMode {
    type Err = ScratchError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("shared") {
            Ok(ScratchMode::Shared)
        } else if s.eq_ignore_ascii_case("private") {
            Ok(ScratchMode::Private)
        } else {
            Err(ScratchError::BadModeSetting)
        }
    }
}

/// One engine's scratch workspace.
///
/// The requirement recorded at creation is the most the engine may ask for
/// per execution. An engine recording 0 gets no buffer and never claims; an
/// engine recording more must ask for at least one byte.
///
/// ```
/// use warmarena::scratch::{EngineScratch, ScratchMode};
/// let engine = EngineScratch::new(1 << 16, ScratchMode::Shared).unwrap();
/// let mut scratch = engine.claim(1000).unwrap();
/// scratch.as_mut_slice().unwrap().fill(7); // the buffer is ours until the guard drops
/// ```
pub struct EngineScratch {
    device: Arc<DeviceEntry>,
    requirement: usize,
    mode: ScratchMode,
    /// The private engine's own slot, or the shared default lane; `None`
    /// when the requirement is 0.
    home: Option<Arc<Slot>>,
}

impl core::fmt::Debug for EngineScratch {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("EngineScratch")
            .field("device", &self.device.device.id())
            .field("requirement", &self.requirement)
            .field("mode", &self.mode)
            .finish()
    }
}

impl EngineScratch {
    /// An engine on the host device of the [global pool](ScratchPool::global).
    ///
    /// ```
    /// use warmarena::scratch::{EngineScratch, ScratchMode};
    /// let e = EngineScratch::new(4096, ScratchMode::Private).unwrap();
    /// assert_eq!((e.requirement(), e.mode()), (4096, ScratchMode::Private));
    /// ```
    #[cfg(not(loom))]
    pub fn new(requirement: usize, mode: ScratchMode) -> Result<Self, ScratchError> {
        ScratchPool::global().engine(DeviceId::HOST, requirement, mode)
    }

    /// An engine on the host device of the global pool, in the mode the
    /// pool's configuration gives now (code default, else
    /// `WARMARENA_SCRATCH`, else private). This is the constructor for
    /// programs that want the mode switchable without a code change.
    ///
    /// ```
    /// use warmarena::scratch::EngineScratch;
    /// let e = EngineScratch::from_config(4096).unwrap();
    /// assert_eq!(e.requirement(), 4096);
    /// ```
    #[cfg(not(loom))]
    pub fn from_config(requirement: usize) -> Result<Self, ScratchError> {
        ScratchPool::global().engine_from_config(DeviceId::HOST, requirement)
    }

    pub(crate) fn create(
        device: Arc<DeviceEntry>,
        requirement: usize,
        mode: ScratchMode,
    ) -> Result<Self, ScratchError> {
        let home = match (requirement, mode) {
            (0, _) => None,
            (_, ScratchMode::Shared) => Some(Arc::clone(&device.default_lane)),
            (_, ScratchMode::Private) => {
                let buf = device.device.allocate(requirement)?;
                device.counters.add_held(buf.len(), false);
                Some(Arc::new(Slot::with_buffer(Some(buf), false)))
            }
        };
        let c = &device.counters;
        match mode {
            ScratchMode::Shared => {
                c.shared_engines.fetch_add(1, Relaxed);
                c.shared_requirements.fetch_add(requirement, Relaxed);
            }
            ScratchMode::Private => {
                c.private_engines.fetch_add(1, Relaxed);
            }
        }
        Ok(EngineScratch {
            device,
            requirement,
            mode,
            home,
        })
    }

    /// The mode captured at creation.
    ///
    /// ```
    /// use warmarena::scratch::{EngineScratch, ScratchMode};
    /// assert_eq!(EngineScratch::new(0, ScratchMode::Shared).unwrap().mode(), ScratchMode::Shared);
    /// ```
    pub fn mode(&self) -> ScratchMode {
        self.mode
    }

    /// The requirement recorded at creation.
    ///
    /// ```
    /// use warmarena::scratch::{EngineScratch, ScratchMode};
    /// assert_eq!(EngineScratch::new(64, ScratchMode::Shared).unwrap().requirement(), 64);
    /// ```
    pub fn requirement(&self) -> usize {
        self.requirement
    }

    /// The device the engine draws from.
    ///
    /// ```
    /// use warmarena::scratch::{DeviceId, EngineScratch, ScratchMode};
    /// assert_eq!(EngineScratch::new(64, ScratchMode::Shared).unwrap().device(), DeviceId::HOST);
    /// ```
    pub fn device(&self) -> DeviceId {
        self.device.device.id()
    }

    /// Claims `bytes` of scratch on the default lane for one execution. The
    /// buffer is the caller's alone until the guard drops; another claimant
    /// of the same buffer waits until then.
    ///
    /// Errors: [`ScratchError::ZeroRequest`] for 0 bytes from an engine
    /// with a non-zero requirement; [`ScratchError::ExceedsRequirement`]
    /// above the requirement; [`ScratchError::Device`] when a needed growth
    /// fails (the previous buffer is kept). An engine whose requirement is 0
    /// gets an empty guard for a request of 0 and claims nothing.
    ///
    /// ```
    /// use warmarena::scratch::{EngineScratch, ScratchMode};
    /// let none = EngineScratch::new(0, ScratchMode::Shared).unwrap();
    /// assert!(none.claim(0).unwrap().is_empty());
    /// let some = EngineScratch::new(4096, ScratchMode::Shared).unwrap();
    /// assert_eq!(some.claim(100).unwrap().len(), 100);
    /// ```
    pub fn claim(&self, bytes: usize) -> Result<ScratchGuard<'_>, ScratchError> {
        self.check(bytes)?;
        match &self.home {
            None => Ok(ScratchGuard::empty()),
            Some(slot) => self.claim_slot(SlotRef::Home(slot), bytes),
        }
    }

    /// [`claim`](Self::claim) on `lane`: shared engines on the same lane
    /// share one buffer and take turns; on different lanes they run at once
    /// with separate buffers. Each lane keeps a buffer as large as the
    /// largest request made on it, so `k` busy lanes hold up to `k` times
    /// the largest requirement (until [`ScratchPool::trim`]). A private
    /// engine ignores the lane: it always uses its own buffer.
    ///
    /// ```
    /// use warmarena::scratch::{EngineScratch, Lane, ScratchMode};
    /// let e = EngineScratch::new(4096, ScratchMode::Shared).unwrap();
    /// let a = e.claim_on(Lane(1), 4096).unwrap();
    /// let b = e.claim_on(Lane(2), 4096).unwrap(); // no wait: another buffer
    /// assert_ne!(a.as_ptr(), b.as_ptr());
    /// ```
    pub fn claim_on(&self, lane: Lane, bytes: usize) -> Result<ScratchGuard<'_>, ScratchError> {
        self.check(bytes)?;
        match (&self.home, self.mode) {
            (None, _) => Ok(ScratchGuard::empty()),
            (Some(slot), ScratchMode::Private) => self.claim_slot(SlotRef::Home(slot), bytes),
            (Some(slot), ScratchMode::Shared) if lane == Lane::DEFAULT => {
                self.claim_slot(SlotRef::Home(slot), bytes)
            }
            (Some(_), ScratchMode::Shared) => {
                let slot = self.device.lane(lane)?;
                self.claim_slot(SlotRef::Lane(slot), bytes)
            }
        }
    }

    /// The zero and size rules, before any lock.
    fn check(&self, bytes: usize) -> Result<(), ScratchError> {
        match (self.requirement, bytes) {
            (0, 0) => Ok(()),
            (r, 0) => Err(ScratchError::ZeroRequest { requirement: r }),
            (r, b) if b > r => Err(ScratchError::ExceedsRequirement {
                requested: b,
                requirement: r,
            }),
            _ => Ok(()),
        }
    }

    fn claim_slot<'e>(
        &'e self,
        slot: SlotRef<'e>,
        bytes: usize,
    ) -> Result<ScratchGuard<'e>, ScratchError> {
        let d = &self.device;
        let claimed = slot.get().claim(&*d.device, &d.counters, bytes)?;
        Ok(ScratchGuard::new(
            slot,
            claimed,
            bytes,
            d.device.host_accessible(),
        ))
    }
}

impl Drop for EngineScratch {
    fn drop(&mut self) {
        let d = &self.device;
        match self.mode {
            ScratchMode::Shared => {
                d.counters.shared_engines.fetch_sub(1, Relaxed);
                d.counters
                    .shared_requirements
                    .fetch_sub(self.requirement, Relaxed);
            }
            ScratchMode::Private => {
                d.counters.private_engines.fetch_sub(1, Relaxed);
                if let Some(slot) = &self.home {
                    // No guard can be live: guards borrow the engine.
                    slot.trim(&*d.device, &d.counters);
                }
            }
        }
    }
}

/// The slot a guard releases: borrowed from the engine, or a lane's.
pub(crate) enum SlotRef<'e> {
    Home(&'e Slot),
    Lane(Arc<Slot>),
}

impl SlotRef<'_> {
    pub(crate) fn get(&self) -> &Slot {
        match self {
            SlotRef::Home(s) => s,
            SlotRef::Lane(s) => s,
        }
    }
}
