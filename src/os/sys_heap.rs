//! A heap-backed stand-in for the kernel, used under Miri: mappings are
//! zeroed heap blocks, page releases zero the range, prefault does nothing.

use super::{OsCounters, OsError};
use core::ptr::NonNull;
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::sync::Mutex;

/// Every live stand-in mapping and its layout, so `unmap` can free it.
static MAPPINGS: Mutex<Vec<(usize, Layout)>> = Mutex::new(Vec::new());

pub(super) fn page_size() -> usize {
    4096
}

/// The stand-in has no huge pages.
pub(super) fn thp_always() -> bool {
    false
}

pub(super) fn map(len: usize, align: usize, c: &OsCounters) -> Result<NonNull<u8>, OsError> {
    let layout = Layout::from_size_align(len, align).map_err(|_| OsError::BadLayout)?;
    // SAFETY: `len` is non-zero (the caller maps at least one page).
    let p = unsafe { alloc_zeroed(layout) };
    let p = NonNull::new(p).ok_or(OsError::MapFailed { len, errno: 12 })?;
    let mut table = MAPPINGS.lock().unwrap_or_else(|e| e.into_inner());
    table.push((p.as_ptr() as usize, layout));
    c.count_map(len);
    Ok(p)
}

pub(super) fn advise_huge(_ptr: NonNull<u8>, _len: usize, _on: bool, c: &OsCounters) {
    c.count_advice();
}

/// # Safety
/// See [`super::unmap`].
pub(super) unsafe fn unmap(ptr: NonNull<u8>, _len: usize, c: &OsCounters) {
    let mut table = MAPPINGS.lock().unwrap_or_else(|e| e.into_inner());
    let addr = ptr.as_ptr() as usize;
    if let Some(i) = table.iter().position(|&(a, _)| a == addr) {
        let (_, layout) = table.swap_remove(i);
        // SAFETY: the block was allocated by `map` with exactly this layout.
        unsafe { dealloc(ptr.as_ptr(), layout) };
        c.count_unmap(layout.size(), false);
    }
}

/// # Safety
/// See [`super::release_pages`].
pub(super) unsafe fn release_pages(_ptr: NonNull<u8>, _len: usize, c: &OsCounters) {
    // The kernel would hand back zero pages on the next touch; nothing in
    // the crate relies on that (a reused block is never reported as zeroed),
    // and zeroing megabytes byte by byte under Miri is what makes it slow.
    c.count_release();
}

/// # Safety
/// See [`super::prefault`].
pub(super) unsafe fn prefault(_ptr: NonNull<u8>, _len: usize, c: &OsCounters) {
    c.count_prefault();
}
