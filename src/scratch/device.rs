//! Where scratch memory comes from: the [`Device`] trait and the host device.
//!
//! A device hands out raw buffers and takes them back; it knows nothing of
//! engines, lanes or claims. The host device maps pages through
//! [`crate::os`] and counts its own system calls, so tests can assert how
//! many mappings a workload cost. A GPU back end implements the same trait
//! over its own allocator and uses [`Device::wait_idle`] to wait for the
//! work still queued against a buffer before that buffer is freed.

use crate::os::{self, MapRequest, OsCounters, OsError, OsStats};
use core::ptr::NonNull;

/// Names a device in a [`ScratchPool`](super::ScratchPool). The host is
/// device 0; other numbers are free for back ends to claim.
///
/// ```
/// use warmarena::scratch::DeviceId;
/// assert_eq!(DeviceId::HOST, DeviceId(0));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceId(pub u32);

impl DeviceId {
    /// Host memory, served by [`HostDevice`].
    pub const HOST: DeviceId = DeviceId(0);
}

/// One buffer of device memory: its first byte and its usable length.
///
/// A `DeviceBuffer` is a plain description, not an owner: freeing it is the
/// job of whoever received it from [`Device::allocate`].
///
/// ```
/// use warmarena::scratch::{Device, HostDevice};
/// let host = HostDevice::new();
/// let buf = host.allocate(100).unwrap();
/// assert!(buf.len() >= 100);
/// // SAFETY: `buf` came from `host.allocate` and is not used afterwards.
/// unsafe { host.free(buf) };
/// ```
#[derive(Debug, PartialEq, Eq)]
pub struct DeviceBuffer {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a `DeviceBuffer` is an address and a length. Who may touch the
// bytes behind it is decided by the scratch claim protocol, not by which
// thread holds the description, so moving it between threads is sound.
unsafe impl Send for DeviceBuffer {}
// SAFETY: as above; a shared `&DeviceBuffer` gives no access to the bytes.
unsafe impl Sync for DeviceBuffer {}

impl DeviceBuffer {
    /// Describes `len` bytes at `ptr`. Only a [`Device`] implementation
    /// should build one, from memory it owns.
    ///
    /// ```
    /// use warmarena::scratch::DeviceBuffer;
    /// let b = DeviceBuffer::new(core::ptr::NonNull::dangling(), 0);
    /// assert!(b.is_empty());
    /// ```
    pub fn new(ptr: NonNull<u8>, len: usize) -> Self {
        DeviceBuffer { ptr, len }
    }

    /// The first byte.
    ///
    /// ```
    /// use warmarena::scratch::DeviceBuffer;
    /// let p = core::ptr::NonNull::dangling();
    /// assert_eq!(DeviceBuffer::new(p, 0).ptr(), p);
    /// ```
    pub fn ptr(&self) -> NonNull<u8> {
        self.ptr
    }

    /// Usable bytes (at least what was asked for).
    ///
    /// ```
    /// use warmarena::scratch::DeviceBuffer;
    /// assert_eq!(DeviceBuffer::new(core::ptr::NonNull::dangling(), 3).len(), 3);
    /// ```
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer has no bytes.
    ///
    /// ```
    /// use warmarena::scratch::DeviceBuffer;
    /// assert!(!DeviceBuffer::new(core::ptr::NonNull::dangling(), 3).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Why a device could not serve a request.
///
/// ```
/// use warmarena::scratch::{Device, DeviceError, HostDevice};
/// let err = HostDevice::new().allocate(usize::MAX).unwrap_err();
/// assert_eq!(err, DeviceError::BadSize { requested: usize::MAX });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeviceError {
    /// The device has no room for the request.
    OutOfMemory {
        /// Bytes asked for.
        requested: usize,
        /// The back end's error code (`errno` for the host).
        code: i32,
    },
    /// The size cannot be represented once rounded by the device.
    BadSize {
        /// Bytes asked for.
        requested: usize,
    },
    /// Any other back-end failure (a failed wait, a lost device).
    Backend {
        /// The back end's error code.
        code: i32,
    },
}

impl core::fmt::Display for DeviceError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            DeviceError::OutOfMemory { requested, code } => {
                write!(
                    f,
                    "device out of memory for {requested} bytes (code {code})"
                )
            }
            DeviceError::BadSize { requested } => {
                write!(f, "{requested} bytes cannot be allocated on this device")
            }
            DeviceError::Backend { code } => write!(f, "device back end failed (code {code})"),
        }
    }
}

impl std::error::Error for DeviceError {}

/// A source of scratch memory. Implement it for a GPU back end; the host
/// implementation is [`HostDevice`].
///
/// Implementations must be thread-safe: the pool calls them from whichever
/// thread claims, grows or trims, but never twice at once for the same buffer.
///
/// # Safety
/// The pool hands the buffers to safe code, so an implementation promises:
/// every buffer `allocate` returns is valid for `len()` bytes, overlaps no
/// other live buffer of this device, and stays valid until passed to
/// `free`; and when `host_accessible` answers `true`, those bytes are
/// readable and writable by the CPU and initialized (zeroed, for example).
///
/// ```
/// use warmarena::scratch::{Device, DeviceId, HostDevice};
/// let dev: &dyn Device = &HostDevice::new();
/// assert_eq!(dev.id(), DeviceId::HOST);
/// assert!(dev.host_accessible());
/// ```
pub unsafe trait Device: Send + Sync {
    /// The key this device is registered under.
    fn id(&self) -> DeviceId;

    /// A new buffer of at least `bytes` bytes (`bytes > 0`). Must not panic:
    /// every refusal is a [`DeviceError`].
    fn allocate(&self, bytes: usize) -> Result<DeviceBuffer, DeviceError>;

    /// Gives a buffer back.
    ///
    /// # Safety
    /// `buf` must have come from [`Device::allocate`] on this device, must
    /// not have been freed already, and nothing may use it afterwards.
    unsafe fn free(&self, buf: DeviceBuffer);

    /// Returns once no work submitted against `buf` is still running. The
    /// pool calls it before freeing a buffer; if it fails the buffer is
    /// leaked (and counted) rather than freed under running work.
    ///
    /// Host memory is done with when the claim ends, so the default returns
    /// at once. A GPU back end waits on the event or stream that last used
    /// the buffer.
    fn wait_idle(&self, buf: &DeviceBuffer) -> Result<(), DeviceError> {
        let _ = buf;
        Ok(())
    }

    /// Whether the CPU may read and write the buffers (enables
    /// [`ScratchGuard::as_mut_slice`](super::ScratchGuard::as_mut_slice)).
    fn host_accessible(&self) -> bool {
        false
    }

    /// The system calls this device made, when it counts them.
    fn os_stats(&self) -> Option<OsStats> {
        None
    }
}

/// Host memory through the OS layer (anonymous mappings): each buffer is its own page-aligned
/// anonymous mapping, so freeing it returns the memory to the OS at once.
///
/// ```
/// use warmarena::scratch::{Device, HostDevice};
/// let host = HostDevice::new();
/// let buf = host.allocate(1).unwrap();
/// assert_eq!(buf.len(), warmarena::page_size());
/// // SAFETY: `buf` came from `host.allocate` and is not used afterwards.
/// unsafe { host.free(buf) };
/// let os = host.os_stats().unwrap();
/// assert_eq!((os.maps, os.unmaps), (1, 1));
/// ```
#[derive(Debug, Default)]
pub struct HostDevice {
    counters: OsCounters,
}

impl HostDevice {
    /// The host device, with zeroed system-call counters.
    ///
    /// ```
    /// use warmarena::scratch::{Device, HostDevice};
    /// assert_eq!(HostDevice::new().os_stats().unwrap().syscalls(), 0);
    /// ```
    pub const fn new() -> Self {
        HostDevice {
            counters: OsCounters::new(),
        }
    }
}

// SAFETY: each buffer is its own fresh anonymous read-write mapping of
// `len` bytes (zero-filled by the kernel, or by the heap stand-in under
// Miri), unmapped only in `free`.
unsafe impl Device for HostDevice {
    fn id(&self) -> DeviceId {
        DeviceId::HOST
    }

    fn allocate(&self, bytes: usize) -> Result<DeviceBuffer, DeviceError> {
        let len =
            os::round_to_pages(bytes.max(1)).ok_or(DeviceError::BadSize { requested: bytes })?;
        let req = MapRequest {
            len,
            align: os::page_size(),
            huge_pages: false,
            prefault: false,
        };
        match os::map(req, &self.counters) {
            Ok(ptr) => Ok(DeviceBuffer::new(ptr, len)),
            Err(OsError::MapFailed { errno, .. }) => Err(DeviceError::OutOfMemory {
                requested: bytes,
                code: errno,
            }),
            Err(OsError::BadLayout) => Err(DeviceError::BadSize { requested: bytes }),
        }
    }

    unsafe fn free(&self, buf: DeviceBuffer) {
        // SAFETY: the caller guarantees `buf` is one live mapping made by
        // `allocate` above with exactly this length, unused from now on.
        unsafe { os::unmap(buf.ptr, buf.len, &self.counters) }
    }

    fn host_accessible(&self) -> bool {
        true
    }

    fn os_stats(&self) -> Option<OsStats> {
        Some(self.counters.snapshot())
    }
}

/// Test devices: heap-backed, with switches to make allocation or the
/// idle wait fail, and a gate that holds an allocation until released.
#[cfg(test)]
pub(crate) mod testing {
    use super::{Device, DeviceBuffer, DeviceError, DeviceId};
    use core::ptr::NonNull;
    use std::alloc::{alloc_zeroed, dealloc, Layout};
    use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
    use std::sync::{mpsc, Mutex};

    /// Heap memory that can be told to refuse.
    #[derive(Debug)]
    pub(crate) struct FailingDevice {
        id: DeviceId,
        /// Allocations above this many bytes fail.
        pub(crate) fail_above: AtomicUsize,
        /// When set, `wait_idle` fails.
        pub(crate) fail_wait: AtomicBool,
        pub(crate) allocs: AtomicU64,
        pub(crate) frees: AtomicU64,
        /// When set, `allocate` reports on the first sender and then blocks
        /// until the second channel yields.
        pub(crate) gate: Mutex<Option<(mpsc::Sender<()>, mpsc::Receiver<()>)>>,
    }

    impl FailingDevice {
        pub(crate) fn new(id: u32) -> Self {
            FailingDevice {
                id: DeviceId(id),
                fail_above: AtomicUsize::new(usize::MAX),
                fail_wait: AtomicBool::new(false),
                allocs: AtomicU64::new(0),
                frees: AtomicU64::new(0),
                gate: Mutex::new(None),
            }
        }
    }

    // SAFETY: buffers are distinct zeroed heap blocks of `len` bytes,
    // deallocated only in `free`.
    unsafe impl Device for FailingDevice {
        fn id(&self) -> DeviceId {
            self.id
        }

        fn allocate(&self, bytes: usize) -> Result<DeviceBuffer, DeviceError> {
            // Take the gate first, so its mutex is not held while we block.
            let gate = self.gate.lock().unwrap().take();
            if let Some((entered, open)) = gate {
                entered.send(()).unwrap();
                open.recv().unwrap();
            }
            if bytes > self.fail_above.load(SeqCst) {
                return Err(DeviceError::OutOfMemory {
                    requested: bytes,
                    code: 12,
                });
            }
            let layout = Layout::from_size_align(bytes.max(1), 64)
                .map_err(|_| DeviceError::BadSize { requested: bytes })?;
            // SAFETY: the layout has a non-zero size.
            let p = unsafe { alloc_zeroed(layout) };
            let p = NonNull::new(p).ok_or(DeviceError::OutOfMemory {
                requested: bytes,
                code: 12,
            })?;
            self.allocs.fetch_add(1, SeqCst);
            Ok(DeviceBuffer::new(p, layout.size()))
        }

        unsafe fn free(&self, buf: DeviceBuffer) {
            self.frees.fetch_add(1, SeqCst);
            let layout =
                Layout::from_size_align(buf.len(), 64).expect("layout was valid at allocation");
            // SAFETY: `buf` came from `allocate` above with this layout.
            unsafe { dealloc(buf.ptr().as_ptr(), layout) }
        }

        fn wait_idle(&self, _buf: &DeviceBuffer) -> Result<(), DeviceError> {
            if self.fail_wait.load(SeqCst) {
                Err(DeviceError::Backend { code: 700 })
            } else {
                Ok(())
            }
        }

        fn host_accessible(&self) -> bool {
            true
        }
    }
}
