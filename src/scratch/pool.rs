//! The registry: one entry per device, one shared slot per (device, lane).
//!
//! Two levels, each an [`AppendMap`]: devices in the pool, lanes in a
//! device. Neither lock is held while memory is allocated, freed or waited
//! for, and neither is shared between devices, so a growth on one device
//! (or one lane) never delays a claim elsewhere. Entries are never removed;
//! `trim` frees the buffers but keeps the slots.

use super::device::{Device, DeviceId, HostDevice};
use super::engine::{EngineScratch, ScratchMode, MODE_ENV_VAR};
use super::error::ScratchError;
use super::registry::AppendMap;
use super::slot::Slot;
use super::stats::{DeviceCounters, DeviceScratchStats};
use super::sync::{Arc, AtomicU8, Ordering::Relaxed};

/// A caller's execution lane: a thread, a queue, a GPU stream. Engines
/// claiming on the same lane of a device share one buffer and take turns;
/// engines on different lanes get separate buffers and run at once.
///
/// ```
/// use warmarena::scratch::Lane;
/// assert_eq!(Lane::DEFAULT, Lane(0));
/// assert_eq!(Lane::current_thread(), Lane::current_thread());
/// assert_ne!(Lane::current_thread(), Lane::DEFAULT);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Lane(pub u64);

impl Lane {
    /// The lane [`EngineScratch::claim`] uses.
    pub const DEFAULT: Lane = Lane(0);

    /// The calling thread's lane, never [`Lane::DEFAULT`]: no other live
    /// thread has it. Thread lanes are numbered from 2^63 up, so they do
    /// not collide with lanes a caller numbers itself from 0 (queue or
    /// stream ids). A thread gives its lane back when it exits, and the
    /// next thread to ask takes it (with the buffer its slot holds): a
    /// process that starts and ends threads all day keeps as many thread
    /// lanes as it ran threads at once, not one per thread it ever ran.
    ///
    /// ```
    /// use warmarena::scratch::Lane;
    /// let here = Lane::current_thread();
    /// let there = std::thread::spawn(Lane::current_thread).join().unwrap();
    /// assert_ne!(here, there, "two live threads never share a lane");
    /// assert!(here.0 >= 1 << 63);
    /// ```
    pub fn current_thread() -> Lane {
        Lane(super::thread_lane::current())
    }
}

/// One device's part of the pool.
pub(crate) struct DeviceEntry {
    pub(crate) device: Box<dyn Device>,
    lanes: AppendMap<Lane, Slot>,
    /// Lane 0's slot, resolved once so default-lane claims skip the lookup.
    pub(crate) default_lane: Arc<Slot>,
    pub(crate) counters: DeviceCounters,
}

impl DeviceEntry {
    fn new(device: Box<dyn Device>) -> Result<Self, ScratchError> {
        let lanes = AppendMap::new();
        let (default_lane, _) = lanes.get_or_insert_with(Lane::DEFAULT, || Slot::new(true))?;
        Ok(DeviceEntry {
            device,
            lanes,
            default_lane,
            counters: DeviceCounters::default(),
        })
    }

    /// The shared slot of `lane`, created on first use.
    pub(crate) fn lane(&self, lane: Lane) -> Result<Arc<Slot>, ScratchError> {
        if lane == Lane::DEFAULT {
            return Ok(Arc::clone(&self.default_lane));
        }
        Ok(self.lanes.get_or_insert_with(lane, || Slot::new(true))?.0)
    }

    fn trim(&self) -> usize {
        let mut freed = 0;
        for (_, slot) in self.lanes.snapshot() {
            freed += slot.trim(&*self.device, &self.counters);
        }
        self.counters.trims.fetch_add(1, Relaxed);
        self.counters.trimmed.fetch_add(freed, Relaxed);
        freed
    }

    fn stats(&self) -> DeviceScratchStats {
        let lanes = self
            .lanes
            .snapshot()
            .into_iter()
            .map(|(lane, slot)| slot.counters.lane_stats(lane))
            .collect();
        self.counters
            .snapshot(self.device.id(), lanes, self.device.os_stats())
    }
}

impl Drop for DeviceEntry {
    /// The last reference is gone, so no engine (and no guard, which
    /// borrows an engine) is left: every lane buffer is idle and freed.
    fn drop(&mut self) {
        self.trim();
    }
}

const MODE_UNSET: u8 = 0;
const MODE_PRIVATE: u8 = 1;
const MODE_SHARED: u8 = 2;

/// The scratch registry: devices, their lanes' shared buffers, the default
/// mode for engines created from configuration, and the statistics.
///
/// Most programs use [`ScratchPool::global`] through [`EngineScratch::new`];
/// a separate pool keeps its own buffers and figures (tests do this).
///
/// ```
/// use warmarena::scratch::{DeviceId, ScratchMode, ScratchPool};
/// let pool = ScratchPool::new();
/// let page = warmarena::page_size();
/// let small = pool.engine(DeviceId::HOST, page, ScratchMode::Shared).unwrap();
/// let large = pool.engine(DeviceId::HOST, 4 * page, ScratchMode::Shared).unwrap();
/// drop(large.claim(4 * page).unwrap());
/// drop(small.claim(page).unwrap()); // served by the same, larger buffer
/// assert_eq!(pool.stats(DeviceId::HOST).unwrap().held_bytes, 4 * page);
/// assert_eq!(pool.trim(), 4 * page);
/// ```
pub struct ScratchPool {
    devices: AppendMap<DeviceId, DeviceEntry>,
    default_mode: AtomicU8,
    env_var: &'static str,
}

impl Default for ScratchPool {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(not(loom))]
static GLOBAL: ScratchPool = ScratchPool::new();

impl ScratchPool {
    /// An empty pool that reads [`MODE_ENV_VAR`] for its default mode. The
    /// host device is registered on first use.
    ///
    /// ```
    /// let pool = warmarena::scratch::ScratchPool::new();
    /// assert_eq!(pool.trim(), 0);
    /// ```
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Self::with_env_var(MODE_ENV_VAR)
    }

    /// An empty pool whose default mode is read from the environment
    /// variable `name` instead of [`MODE_ENV_VAR`].
    ///
    /// ```
    /// use warmarena::scratch::{ScratchMode, ScratchPool};
    /// let pool = ScratchPool::with_env_var("MY_APP_SCRATCH_UNSET_IN_THIS_EXAMPLE");
    /// assert_eq!(pool.default_mode().unwrap(), ScratchMode::Private);
    /// ```
    #[cfg(not(loom))]
    pub const fn with_env_var(name: &'static str) -> Self {
        ScratchPool {
            devices: AppendMap::new(),
            default_mode: AtomicU8::new(MODE_UNSET),
            env_var: name,
        }
    }

    /// Under loom: the same constructors, not `const` (loom's atomics are
    /// not), for the loom models and the unit tests to compile.
    #[cfg(loom)]
    pub fn new() -> Self {
        Self::with_env_var(MODE_ENV_VAR)
    }

    /// See the `cfg(not(loom))` version.
    #[cfg(loom)]
    pub fn with_env_var(name: &'static str) -> Self {
        ScratchPool {
            devices: AppendMap::new(),
            default_mode: AtomicU8::new(MODE_UNSET),
            env_var: name,
        }
    }

    /// The process-wide pool behind [`EngineScratch::new`].
    ///
    /// ```
    /// let a = warmarena::scratch::ScratchPool::global();
    /// assert!(core::ptr::eq(a, warmarena::scratch::ScratchPool::global()));
    /// ```
    #[cfg(not(loom))]
    pub fn global() -> &'static ScratchPool {
        &GLOBAL
    }

    /// Adds a device under its [`Device::id`]. The host device is added on
    /// first use unless another device was registered as
    /// [`DeviceId::HOST`] before.
    ///
    /// ```
    /// use warmarena::scratch::{HostDevice, ScratchError, ScratchPool, DeviceId};
    /// let pool = ScratchPool::new();
    /// pool.register(HostDevice::new()).unwrap();
    /// assert_eq!(
    ///     pool.register(HostDevice::new()).unwrap_err(),
    ///     ScratchError::AlreadyRegistered(DeviceId::HOST)
    /// );
    /// ```
    pub fn register(&self, device: impl Device + 'static) -> Result<(), ScratchError> {
        let id = device.id();
        if self.devices.get(id).is_some() {
            return Err(ScratchError::AlreadyRegistered(id));
        }
        let entry = DeviceEntry::new(Box::new(device))?;
        match self.devices.get_or_insert_with(id, || entry)? {
            (_, true) => Ok(()),
            (_, false) => Err(ScratchError::AlreadyRegistered(id)),
        }
    }

    /// The entry of `id`: one short registry lock, no allocation (except
    /// the one-time registration of the host device).
    pub(crate) fn entry(&self, id: DeviceId) -> Result<Arc<DeviceEntry>, ScratchError> {
        if let Some(e) = self.devices.get(id) {
            return Ok(e);
        }
        if id != DeviceId::HOST {
            return Err(ScratchError::UnknownDevice(id));
        }
        let entry = DeviceEntry::new(Box::new(HostDevice::new()))?;
        Ok(self.devices.get_or_insert_with(id, || entry)?.0)
    }

    /// Creates an engine's scratch on `device` in `mode`. The mode is the
    /// engine's for life. A private engine gets its own buffer of
    /// `requirement` bytes now; a shared one holds nothing of its own.
    ///
    /// ```
    /// use warmarena::scratch::{DeviceId, ScratchMode, ScratchPool};
    /// let pool = ScratchPool::new();
    /// let e = pool.engine(DeviceId::HOST, 8192, ScratchMode::Private).unwrap();
    /// assert_eq!(e.mode(), ScratchMode::Private);
    /// assert_eq!(pool.stats(DeviceId::HOST).unwrap().private_bytes, 8192);
    /// ```
    pub fn engine(
        &self,
        device: DeviceId,
        requirement: usize,
        mode: ScratchMode,
    ) -> Result<EngineScratch, ScratchError> {
        EngineScratch::create(self.entry(device)?, requirement, mode)
    }

    /// Creates an engine's scratch in the mode [`default_mode`](Self::default_mode)
    /// answers now; later changes of the default do not affect it.
    ///
    /// ```
    /// use warmarena::scratch::{DeviceId, ScratchMode, ScratchPool};
    /// let pool = ScratchPool::new();
    /// pool.set_default_mode(ScratchMode::Shared);
    /// let e = pool.engine_from_config(DeviceId::HOST, 4096).unwrap();
    /// pool.set_default_mode(ScratchMode::Private);
    /// assert_eq!(e.mode(), ScratchMode::Shared);
    /// ```
    pub fn engine_from_config(
        &self,
        device: DeviceId,
        requirement: usize,
    ) -> Result<EngineScratch, ScratchError> {
        let mode = self.default_mode()?;
        self.engine(device, requirement, mode)
    }

    /// Sets the mode that [`engine_from_config`](Self::engine_from_config)
    /// gives engines created from now on. A mode set here takes precedence
    /// over the environment variable.
    ///
    /// ```
    /// use warmarena::scratch::{ScratchMode, ScratchPool};
    /// let pool = ScratchPool::new();
    /// pool.set_default_mode(ScratchMode::Shared);
    /// assert_eq!(pool.default_mode().unwrap(), ScratchMode::Shared);
    /// ```
    pub fn set_default_mode(&self, mode: ScratchMode) {
        let v = match mode {
            ScratchMode::Private => MODE_PRIVATE,
            ScratchMode::Shared => MODE_SHARED,
        };
        self.default_mode.store(v, Relaxed);
    }

    /// The mode an engine created from configuration gets now: the mode set
    /// by [`set_default_mode`](Self::set_default_mode) if any, else the
    /// pool's environment variable ([`MODE_ENV_VAR`] unless the pool was
    /// made with [`with_env_var`](Self::with_env_var)), read at this call,
    /// else [`ScratchMode::Private`]. A variable that is set but is neither
    /// `shared` nor `private` is an error, not a silent default.
    ///
    /// ```
    /// use warmarena::scratch::{ScratchMode, ScratchPool};
    /// let pool = ScratchPool::with_env_var("WARMARENA_DOCTEST_UNSET");
    /// assert_eq!(pool.default_mode().unwrap(), ScratchMode::Private);
    /// ```
    pub fn default_mode(&self) -> Result<ScratchMode, ScratchError> {
        match self.default_mode.load(Relaxed) {
            MODE_PRIVATE => Ok(ScratchMode::Private),
            MODE_SHARED => Ok(ScratchMode::Shared),
            _ => match std::env::var_os(self.env_var) {
                None => Ok(ScratchMode::Private),
                Some(v) => v
                    .to_str()
                    .ok_or(ScratchError::BadModeSetting)?
                    .parse::<ScratchMode>(),
            },
        }
    }

    /// A device's figures now; `None` for a device never registered (the
    /// host is always there).
    ///
    /// ```
    /// use warmarena::scratch::{DeviceId, ScratchPool};
    /// let pool = ScratchPool::new();
    /// assert_eq!(pool.stats(DeviceId::HOST).unwrap().held_bytes, 0);
    /// assert!(pool.stats(DeviceId(3)).is_none());
    /// ```
    pub fn stats(&self, device: DeviceId) -> Option<DeviceScratchStats> {
        self.entry(device).ok().map(|e| e.stats())
    }

    /// Frees every shared lane buffer that no engine has claimed right now,
    /// on every device, and returns the bytes freed. Claimed buffers and
    /// private engines' buffers are kept. The next claim on a trimmed lane
    /// allocates again.
    ///
    /// ```
    /// use warmarena::scratch::{DeviceId, ScratchMode, ScratchPool};
    /// let pool = ScratchPool::new();
    /// let e = pool.engine(DeviceId::HOST, 4096, ScratchMode::Shared).unwrap();
    /// let g = e.claim(4096).unwrap();
    /// assert_eq!(pool.trim(), 0); // in use: kept
    /// drop(g);
    /// assert_eq!(pool.trim(), 4096);
    /// ```
    pub fn trim(&self) -> usize {
        self.devices
            .snapshot()
            .into_iter()
            .map(|(_, e)| e.trim())
            .sum()
    }

    /// [`trim`](Self::trim) for one device; `Err` for an unknown device.
    ///
    /// ```
    /// use warmarena::scratch::{DeviceId, ScratchPool};
    /// assert_eq!(ScratchPool::new().trim_device(DeviceId::HOST).unwrap(), 0);
    /// ```
    pub fn trim_device(&self, device: DeviceId) -> Result<usize, ScratchError> {
        Ok(self.entry(device)?.trim())
    }
}
