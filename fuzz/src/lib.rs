//! Shared by the fuzz targets: operation counters printed once at exit, so a
//! bounded run shows what the harness exercised (libFuzzer's own `cov:` and
//! `ft:` figures say how much code; these say which operations).
//!
//! Set `WARMARENA_FUZZ_QUIET=1` to silence the summary.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Once;

/// A named set of counters, printed at process exit.
pub struct OpCounts {
    pub target: &'static str,
    pub names: &'static [&'static str],
    pub counts: &'static [AtomicU64],
    pub once: Once,
}

impl OpCounts {
    /// Counts one operation `i` (an index into `names`).
    pub fn bump(&'static self, i: usize) {
        self.once.call_once(|| {
            REGISTERED.store(self as *const OpCounts as usize as u64, Relaxed);
            // SAFETY: `print_at_exit` is an `extern "C" fn()` with no
            // arguments, as `atexit` requires; it only reads statics.
            unsafe { libc::atexit(print_at_exit) };
        });
        self.counts[i].fetch_add(1, Relaxed);
    }

    /// Counts `n` more of operation `i`.
    pub fn add(&'static self, i: usize, n: u64) {
        if n > 0 {
            self.bump(i);
            self.counts[i].fetch_add(n - 1, Relaxed);
        }
    }
}

static REGISTERED: AtomicU64 = AtomicU64::new(0);

extern "C" fn print_at_exit() {
    if std::env::var_os("WARMARENA_FUZZ_QUIET").is_some() {
        return;
    }
    let p = REGISTERED.load(Relaxed) as usize;
    if p == 0 {
        return;
    }
    // SAFETY: the pointer was stored from a `&'static OpCounts`.
    let c = unsafe { &*(p as *const OpCounts) };
    let mut line = format!("[{} op counts]", c.target);
    for (n, k) in c.names.iter().zip(c.counts) {
        line.push_str(&format!(" {n}={}", k.load(Relaxed)));
    }
    eprintln!("{line}");
}

/// Declares a static [`OpCounts`] named `$name` with the given op names.
#[macro_export]
macro_rules! op_counts {
    ($name:ident, $target:literal, [$($op:literal),* $(,)?]) => {
        static $name: $crate::OpCounts = {
            const N: usize = [$($op),*].len();
            #[allow(clippy::declare_interior_mutable_const)]
            const Z: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            static COUNTS: [std::sync::atomic::AtomicU64; N] = [Z; N];
            $crate::OpCounts {
                target: $target,
                names: &[$($op),*],
                counts: &COUNTS,
                once: std::sync::Once::new(),
            }
        };
    };
}
