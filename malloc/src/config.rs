//! Configuration from `WARMARENA_*` environment variables, read from
//! `environ` directly (no `getenv` copy, no `std::env`, no allocation):
//!
//! - `WARMARENA_STATS=1`: print a summary to standard error at exit.
//! - `WARMARENA_RETAIN_CAP=BYTES` (suffixes `k`, `m`, `g`): the arena's
//!   retention cap (default: unbounded), until run-aware retention lands.
//! - `WARMARENA_HUGE_PAGES=0`: no transparent-huge-page advice.
//! - `WARMARENA_DISABLE=1`: pass every call to the system allocator.
//! - `WARMARENA_RUN_OWNERSHIP=0`: the arena's small path on the thread
//!   caches instead of run ownership (`ArenaConfig::run_ownership`), to
//!   compare; on by default, as in the library.

use core::ffi::c_char;

extern "C" {
    static environ: *const *const c_char;
}

/// What the environment asked for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Config {
    pub(crate) stats: bool,
    pub(crate) retain_cap: Option<usize>,
    pub(crate) huge_pages: bool,
    pub(crate) disable: bool,
    pub(crate) run_ownership: bool,
}

/// The value of `name` (bytes after `name=`), if set.
fn var(name: &[u8]) -> Option<&'static [u8]> {
    // SAFETY: `environ` is the process's environment array, NUL-terminated
    // strings ending with a null pointer, set up before any constructor
    // runs; it is read here, never changed.
    let mut e = unsafe { environ };
    if e.is_null() {
        return None;
    }
    loop {
        // SAFETY: `e` points into the array, which ends with a null entry.
        let s = unsafe { *e };
        if s.is_null() {
            return None;
        }
        // SAFETY: each entry is a NUL-terminated string that lives as long
        // as the process (unless the program replaces it: read at start-up).
        let bytes = unsafe { core::ffi::CStr::from_ptr(s) }.to_bytes();
        if bytes.len() > name.len() && bytes.starts_with(name) && bytes[name.len()] == b'=' {
            return Some(&bytes[name.len() + 1..]);
        }
        // SAFETY: not past the terminating null entry (checked above).
        e = unsafe { e.add(1) };
    }
}

fn flag(name: &[u8]) -> Option<bool> {
    var(name).map(|v| !matches!(v, b"" | b"0" | b"no" | b"false" | b"off"))
}

/// A byte count: digits with an optional `k`, `m` or `g` (binary) suffix.
fn bytes(v: &[u8]) -> Option<usize> {
    let (digits, shift) = match v.last()? {
        b'k' | b'K' => (&v[..v.len() - 1], 10),
        b'm' | b'M' => (&v[..v.len() - 1], 20),
        b'g' | b'G' => (&v[..v.len() - 1], 30),
        _ => (v, 0),
    };
    if digits.is_empty() {
        return None;
    }
    let mut n: usize = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(usize::from(d - b'0'))?;
    }
    n.checked_mul(1 << shift)
}

/// Reads the environment.
pub(crate) fn read() -> Config {
    Config {
        stats: flag(b"WARMARENA_STATS").unwrap_or(false),
        retain_cap: var(b"WARMARENA_RETAIN_CAP").and_then(bytes),
        huge_pages: flag(b"WARMARENA_HUGE_PAGES").unwrap_or(true),
        disable: flag(b"WARMARENA_DISABLE").unwrap_or(false),
        run_ownership: flag(b"WARMARENA_RUN_OWNERSHIP").unwrap_or(true),
    }
}
