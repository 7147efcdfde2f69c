//! What the library writes to standard error: the `WARMARENA_STATS=1`
//! summary at exit, and a note on a bad free. Formatted into a buffer on
//! the stack and written with `write(2)`: no allocation, no stdio.

use core::fmt::Write;

/// A fixed buffer that drops what does not fit.
struct Buf {
    bytes: [u8; 2048],
    len: usize,
}

impl Write for Buf {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let room = self.bytes.len() - self.len;
        let n = s.len().min(room);
        self.bytes[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

impl Buf {
    fn new() -> Self {
        Buf {
            bytes: [0; 2048],
            len: 0,
        }
    }

    fn flush(&self) {
        let mut done = 0;
        while done < self.len {
            // SAFETY: writes initialised bytes of our own buffer to fd 2.
            let n = unsafe { libc::write(2, self.bytes[done..].as_ptr().cast(), self.len - done) };
            if n <= 0 {
                return;
            }
            done += n as usize;
        }
    }
}

/// Bytes in KiB/MiB/GiB, one decimal.
struct Size(usize);

impl core::fmt::Display for Size {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let b = self.0 as f64;
        if self.0 >= 1 << 30 {
            write!(f, "{:.1} GiB", b / (1u64 << 30) as f64)
        } else if self.0 >= 1 << 20 {
            write!(f, "{:.1} MiB", b / (1u64 << 20) as f64)
        } else if self.0 >= 1 << 10 {
            write!(f, "{:.1} KiB", b / 1024.0)
        } else {
            write!(f, "{} B", self.0)
        }
    }
}

/// The summary `WARMARENA_STATS=1` prints at exit.
pub(crate) fn summary(arena: &warmarena_core::ExecutionArena) {
    let s = arena.stats();
    let g = warmarena_core::global::stats();
    // SAFETY: `ru` is a plain struct getrusage fills.
    let mut ru: libc::rusage = unsafe { core::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid out pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let mut b = Buf::new();
    let _ = writeln!(
        b,
        "warmarena: pid {}: peak live {}, live {} in {} buffers, retained {} in {} buffers, mapped {}",
        // SAFETY: getpid has no preconditions.
        unsafe { libc::getpid() },
        Size(s.peak_live_bytes),
        Size(s.live_bytes),
        s.live_buffers,
        Size(s.retained_bytes),
        s.retained_buffers,
        Size(s.mapped_bytes),
    );
    let _ = writeln!(
        b,
        "warmarena: allocations: {} warm (served from retained memory: no system call, no new fault), {} cold, {} frees; {} evicted ({}) by the retention cap{}",
        s.warm_allocations,
        s.cold_allocations,
        s.frees,
        s.evictions,
        Size(s.evicted_bytes),
        if s.retention_cap == usize::MAX {
            ""
        } else {
            " in force"
        },
    );
    let _ = writeln!(
        b,
        "warmarena: to the system allocator: {} requests ({}) the arena did not take; process: {} minor faults, max RSS {}",
        g.fallback_allocs,
        Size(g.fallback_bytes as usize),
        ru.ru_minflt,
        Size(ru.ru_maxrss as usize * 1024),
    );
    b.flush();
}

/// A `free` or `realloc` of an address inside arena memory where no live
/// buffer starts (a double free or an interior pointer): reported, and the
/// call does nothing.
#[cold]
#[inline(never)]
pub(crate) fn bad_pointer(what: &str, p: *const u8) {
    let mut b = Buf::new();
    let _ = writeln!(
        b,
        "warmarena: {what}({p:p}): not a live buffer of the arena (double free or interior pointer); ignored"
    );
    b.flush();
}
