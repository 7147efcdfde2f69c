//! Counts of the system calls the OS layer made on behalf of one owner.

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Live counters of the system calls made for one owner (an arena, a pool).
#[derive(Debug, Default)]
pub struct OsCounters {
    maps: AtomicU64,
    unmaps: AtomicU64,
    page_releases: AtomicU64,
    advice: AtomicU64,
    prefaults: AtomicU64,
    mapped_bytes: AtomicU64,
    unmapped_bytes: AtomicU64,
}

/// A snapshot of the system calls one owner (an arena, a pool) made.
///
/// ```
/// let fresh = warmarena::ExecutionArena::new().stats().os;
/// assert_eq!(fresh.syscalls(), 0);
/// ```
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct OsStats {
    /// `mmap` calls.
    pub maps: u64,
    /// `munmap` calls (including the trims of an over-mapped aligned region).
    pub unmaps: u64,
    /// `madvise(MADV_DONTNEED)` calls.
    pub page_releases: u64,
    /// Other `madvise` calls (huge-page advice).
    pub advice: u64,
    /// Prefault calls (`MADV_POPULATE_WRITE`, or one touch pass).
    pub prefaults: u64,
    /// Bytes obtained from the OS by `mmap`, after alignment trimming.
    pub mapped_bytes: u64,
    /// Bytes given back to the OS by `munmap` (alignment trims excluded).
    pub unmapped_bytes: u64,
}

impl OsStats {
    /// Every system call counted, of any kind.
    pub fn syscalls(&self) -> u64 {
        self.maps + self.unmaps + self.page_releases + self.advice + self.prefaults
    }
}

impl OsCounters {
    /// Zeroed counters; `const` so they can live in a static.
    pub const fn new() -> Self {
        OsCounters {
            maps: AtomicU64::new(0),
            unmaps: AtomicU64::new(0),
            page_releases: AtomicU64::new(0),
            advice: AtomicU64::new(0),
            prefaults: AtomicU64::new(0),
            mapped_bytes: AtomicU64::new(0),
            unmapped_bytes: AtomicU64::new(0),
        }
    }

    /// The counts so far.
    pub fn snapshot(&self) -> OsStats {
        OsStats {
            maps: self.maps.load(Relaxed),
            unmaps: self.unmaps.load(Relaxed),
            page_releases: self.page_releases.load(Relaxed),
            advice: self.advice.load(Relaxed),
            prefaults: self.prefaults.load(Relaxed),
            mapped_bytes: self.mapped_bytes.load(Relaxed),
            unmapped_bytes: self.unmapped_bytes.load(Relaxed),
        }
    }

    pub(crate) fn count_map(&self, bytes: usize) {
        self.maps.fetch_add(1, Relaxed);
        self.mapped_bytes.fetch_add(bytes as u64, Relaxed);
    }
    pub(crate) fn count_unmap(&self, bytes: usize, trim: bool) {
        self.unmaps.fetch_add(1, Relaxed);
        if !trim {
            self.unmapped_bytes.fetch_add(bytes as u64, Relaxed);
        }
    }
    pub(crate) fn count_release(&self) {
        self.page_releases.fetch_add(1, Relaxed);
    }
    pub(crate) fn count_advice(&self) {
        self.advice.fetch_add(1, Relaxed);
    }
    pub(crate) fn count_prefault(&self) {
        self.prefaults.fetch_add(1, Relaxed);
    }
}
