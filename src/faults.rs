//! Page-fault counters for the calling thread: the evidence behind "a warm
//! run takes no page fault".
//!
//! [`FaultCounter`] reads minor and major faults through perf events
//! (`PERF_COUNT_SW_PAGE_FAULTS_MIN`/`_MAJ`, user-mode faults of this thread)
//! and falls back to `getrusage(RUSAGE_THREAD)` where the kernel refuses perf
//! events; [`FaultCounter::source`] says which one is in use. Set
//! `WARMARENA_FAULTS=rusage` to force the fallback.
//!
//! [`huge_page_residency`] tells how a range is resident: on huge pages,
//! or on base pages khugepaged may collapse under the program (a fault no
//! allocation asked for).
//!
//! ```
//! use warmarena::faults::FaultCounter;
//! let mut c = FaultCounter::new();
//! let v = vec![1u8; 1 << 20]; // fresh pages: faults
//! let f = c.read();
//! println!("{} minor faults via {:?}", f.minor, c.source());
//! # drop(v);
//! ```

use core::marker::PhantomData;

mod residency;
pub use residency::{huge_page_residency, Residency};

/// Touches the next 256 KiB of the calling thread's stack, so that stack
/// growth inside a measured stretch (deeper frames, the counter's own reads)
/// is not counted as a fault of the code under test. Call it just before
/// [`FaultCounter::reset`].
///
/// ```
/// use warmarena::faults::{pre_touch_stack, FaultCounter};
/// let mut c = FaultCounter::new();
/// pre_touch_stack();
/// c.reset();
/// let _ = c.read();
/// ```
#[inline(never)]
pub fn pre_touch_stack() {
    let mut pad = [0u8; 256 << 10];
    for i in (0..pad.len()).step_by(4096) {
        pad[i] = 1;
    }
    core::hint::black_box(&mut pad);
}

/// Maps every page of this process's executable file mappings (its code
/// and that of the libraries it loaded), so that a code path run for the
/// first time inside a measured stretch does not count the fault that
/// brings its instructions in: a fault of the program's text, not of the
/// memory under test (whether one happens depends on code layout: an edit
/// anywhere can move a path onto a page not mapped yet). One
/// `MADV_POPULATE_READ` per mapping (Linux 5.14), else a read of one byte
/// per page. Returns the pages covered (0 where `/proc/self/maps` cannot
/// be read, e.g. off Linux). Call it, with [`pre_touch_stack`], before
/// [`FaultCounter::reset`].
///
/// ```
/// use warmarena::faults::pre_touch_code;
/// let pages = pre_touch_code();
/// if cfg!(target_os = "linux") {
///     assert!(pages > 0);
/// }
/// ```
#[inline(never)]
pub fn pre_touch_code() -> usize {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return 0;
    };
    let mut pages = 0;
    for line in maps.lines() {
        let mut fields = line.split_whitespace();
        let (Some(range), Some(perms)) = (fields.next(), fields.next()) else {
            continue;
        };
        // Readable, executable, and backed by a file (an inode other than 0).
        let inode = fields.nth(2).unwrap_or("0");
        if !perms.starts_with("r-x") || inode == "0" {
            continue;
        }
        let Some((lo, hi)) = range.split_once('-') else {
            continue;
        };
        let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
        else {
            continue;
        };
        if hi <= lo {
            continue;
        }
        pages += (hi - lo) / 4096;
        match populate_read(lo, hi - lo) {
            Populate::Done => continue,
            // A page the kernel would not bring in (past the end of its
            // file, say) must not be read either.
            Populate::Refused => continue,
            Populate::Unsupported => {}
        }
        let mut at = lo;
        while at < hi {
            // SAFETY: [lo, hi) is a readable mapping of this process, listed
            // by the kernel just now; code mappings are not unmapped while
            // the code runs, and a read does not change them.
            unsafe { core::ptr::read_volatile(at as *const u8) };
            at += 4096;
        }
    }
    pages
}

/// What `MADV_POPULATE_READ` did.
enum Populate {
    Done,
    /// The kernel knows the advice and refused the range.
    Refused,
    /// The kernel does not know the advice (before Linux 5.14), or not Linux.
    Unsupported,
}

/// `MADV_POPULATE_READ` over `[addr, addr + len)`.
fn populate_read(addr: usize, len: usize) -> Populate {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        const MADV_POPULATE_READ: libc::c_int = 22;
        // SAFETY: populating pages of an existing mapping changes neither
        // the mapping nor its contents.
        let rc = unsafe { libc::madvise(addr as *mut libc::c_void, len, MADV_POPULATE_READ) };
        if rc == 0 {
            return Populate::Done;
        }
        if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
            return Populate::Unsupported;
        }
        Populate::Refused
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        let _ = (addr, len);
        Populate::Unsupported
    }
}

/// Where the counts come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultSource {
    /// Perf software events of this thread (user-mode faults).
    PerfEvents,
    /// `getrusage(RUSAGE_THREAD)`: every fault of this thread, including
    /// those the kernel takes on its behalf (e.g. while copying to user memory).
    Getrusage,
}

/// Minor and major faults counted over an interval.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Faults {
    /// Faults served without I/O (a fresh zero page, a page already cached).
    pub minor: u64,
    /// Faults that waited for I/O.
    pub major: u64,
}

struct Perf {
    minor: perf_event::Counter,
    major: perf_event::Counter,
}

/// Counts the page faults of the thread that made it, from its creation or
/// last [`reset`](FaultCounter::reset). Not `Send`: the counts belong to
/// one thread.
pub struct FaultCounter {
    perf: Option<Perf>,
    base: Faults,
    _thread_bound: PhantomData<*const ()>,
}

fn open_perf() -> Option<Perf> {
    if std::env::var("WARMARENA_FAULTS").is_ok_and(|v| v == "rusage") {
        return None;
    }
    use perf_event::events::Software;
    let open = |ev| {
        let mut c = perf_event::Builder::new(ev).build().ok()?;
        c.enable().ok()?;
        Some(c)
    };
    Some(Perf {
        minor: open(Software::PAGE_FAULTS_MIN)?,
        major: open(Software::PAGE_FAULTS_MAJ)?,
    })
}

fn rusage_now() -> Faults {
    // SAFETY: an all-zero rusage is a valid value for getrusage to overwrite.
    let mut ru: libc::rusage = unsafe { core::mem::zeroed() };
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let who = libc::RUSAGE_THREAD;
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let who = libc::RUSAGE_SELF;
    // SAFETY: `ru` is a valid, writable rusage.
    let rc = unsafe { libc::getrusage(who, &mut ru) };
    if rc != 0 {
        return Faults::default();
    }
    Faults {
        minor: ru.ru_minflt as u64,
        major: ru.ru_majflt as u64,
    }
}

impl Default for FaultCounter {
    fn default() -> Self {
        Self::new()
    }
}

impl FaultCounter {
    /// Starts counting the calling thread's faults.
    ///
    /// ```
    /// let c = warmarena::faults::FaultCounter::new();
    /// # let _ = c;
    /// ```
    pub fn new() -> Self {
        let mut c = FaultCounter {
            perf: open_perf(),
            base: Faults::default(),
            _thread_bound: PhantomData,
        };
        c.reset();
        c
    }

    /// Which counter source is in use.
    ///
    /// ```
    /// use warmarena::faults::{FaultCounter, FaultSource};
    /// let s = FaultCounter::new().source();
    /// assert!(s == FaultSource::PerfEvents || s == FaultSource::Getrusage);
    /// ```
    pub fn source(&self) -> FaultSource {
        if self.perf.is_some() {
            FaultSource::PerfEvents
        } else {
            FaultSource::Getrusage
        }
    }

    fn raw(&mut self) -> Faults {
        match &mut self.perf {
            Some(p) => Faults {
                minor: p.minor.read().unwrap_or(0),
                major: p.major.read().unwrap_or(0),
            },
            None => rusage_now(),
        }
    }

    /// Restarts the interval now.
    ///
    /// ```
    /// let mut c = warmarena::faults::FaultCounter::new();
    /// c.reset();
    /// assert!(c.read().major == 0);
    /// ```
    pub fn reset(&mut self) {
        self.base = self.raw();
    }

    /// Faults since creation or the last reset.
    ///
    /// ```
    /// let mut c = warmarena::faults::FaultCounter::new();
    /// let f = c.read();
    /// assert!(f.minor < 1_000_000);
    /// ```
    pub fn read(&mut self) -> Faults {
        let now = self.raw();
        Faults {
            minor: now.minor.saturating_sub(self.base.minor),
            major: now.major.saturating_sub(self.base.major),
        }
    }
}

#[cfg(all(test, not(miri)))]
mod tests {
    use super::*;

    fn touch_fresh_pages(pages: usize) {
        let len = pages * 4096;
        // SAFETY: a fresh anonymous mapping, written then unmapped here.
        unsafe {
            let p = libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            ) as *mut u8;
            assert_ne!(p as *mut libc::c_void, libc::MAP_FAILED);
            for i in 0..pages {
                p.add(i * 4096).write_volatile(1);
            }
            libc::munmap(p.cast(), len);
        }
    }

    #[test]
    fn counts_faults_of_fresh_pages() {
        let mut c = FaultCounter::new();
        touch_fresh_pages(64);
        let f = c.read();
        assert!(f.minor >= 64, "{f:?} via {:?}", c.source());
    }

    #[test]
    fn getrusage_fallback_counts_too() {
        let mut c = FaultCounter {
            perf: None,
            base: Faults::default(),
            _thread_bound: PhantomData,
        };
        c.reset();
        assert_eq!(c.source(), FaultSource::Getrusage);
        touch_fresh_pages(64);
        assert!(c.read().minor >= 64);
    }
}
