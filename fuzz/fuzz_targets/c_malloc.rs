//! Arbitrary sequences of C allocation calls on `libwarmarena.so` (the
//! `malloc/` crate): `malloc`, `calloc`, `realloc`, `reallocarray`,
//! `posix_memalign`, `aligned_alloc`, `memalign`, `valloc`, `pvalloc`,
//! `free`, `malloc_usable_size`, `malloc_trim`, `mallinfo2`, frees on
//! another thread, and foreign pointers (glibc's own `malloc`) passed to
//! the library's `free` and `realloc`. valgrind cannot run under a
//! replaced `malloc`, so this is the library's memory check.
//!
//! The library is loaded with `dlopen` (`RTLD_LOCAL`: it serves only the
//! calls made here, while the fuzzer and ASan keep their own allocator)
//! from `WARMARENA_SO`, else `target/debug/libwarmarena.so` beside this
//! workspace (`scripts/fuzz.sh` builds it first). Its thread state word is
//! initial-exec TLS, so the whole of its TLS block (about 2 KiB) must fit
//! in the static TLS that glibc keeps for libraries loaded later, 512
//! bytes by default: run the target with
//! `GLIBC_TUNABLES=glibc.rtld.optional_static_tls=8192` (`scripts/fuzz.sh`
//! sets it), else the `dlopen` fails. After every operation:
//!
//! - a successful call returned a pointer aligned as asked (at least 16),
//!   with `malloc_usable_size` at least the size asked for;
//! - no two live blocks overlap, and every live block keeps the bytes
//!   written into it (a `calloc` block reads as zero; a `realloc` keeps
//!   what was written below the smaller size);
//! - the library's calls to its own functions (`reallocarray` to
//!   `realloc`, `realloc` to `free`, `mallinfo` to `mallinfo2`) stay in
//!   it, though the process's `malloc` here is ASan's;
//! - bad input gets glibc's answer: `NULL` with `ENOMEM` for a `calloc` or
//!   `reallocarray` whose product overflows and for `malloc(SIZE_MAX)`,
//!   `EINVAL` from `posix_memalign` for a bad alignment (`*out` untouched),
//!   `NULL` with `EINVAL` from `aligned_alloc`, `realloc(p, 0)` frees `p`;
//! - `mallinfo2()` counts exactly the live arena blocks held here.
#![no_main]

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use std::collections::BTreeMap;
use std::ffi::{c_int, c_void, CString};
use std::sync::OnceLock;

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct Mallinfo2 {
    arena: usize,
    ordblks: usize,
    smblks: usize,
    hblks: usize,
    hblkhd: usize,
    usmblks: usize,
    fsmblks: usize,
    uordblks: usize,
    fordblks: usize,
    keepcost: usize,
}

/// The library's functions, and glibc's own `malloc`/`free` for foreign
/// pointers.
struct Lib {
    malloc: unsafe extern "C" fn(usize) -> *mut c_void,
    free: unsafe extern "C" fn(*mut c_void),
    calloc: unsafe extern "C" fn(usize, usize) -> *mut c_void,
    realloc: unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void,
    reallocarray: unsafe extern "C" fn(*mut c_void, usize, usize) -> *mut c_void,
    posix_memalign: unsafe extern "C" fn(*mut *mut c_void, usize, usize) -> c_int,
    aligned_alloc: unsafe extern "C" fn(usize, usize) -> *mut c_void,
    memalign: unsafe extern "C" fn(usize, usize) -> *mut c_void,
    valloc: unsafe extern "C" fn(usize) -> *mut c_void,
    pvalloc: unsafe extern "C" fn(usize) -> *mut c_void,
    usable_size: unsafe extern "C" fn(*mut c_void) -> usize,
    trim: unsafe extern "C" fn(usize) -> c_int,
    mallinfo2: unsafe extern "C" fn() -> Mallinfo2,
    glibc_malloc: unsafe extern "C" fn(usize) -> *mut c_void,
    glibc_free: unsafe extern "C" fn(*mut c_void),
}

fn sym<T: Copy>(h: *mut c_void, name: &str) -> T {
    let c = CString::new(name).unwrap();
    // SAFETY: a valid handle and a NUL-terminated name.
    let p = unsafe { libc::dlsym(h, c.as_ptr()) };
    assert!(!p.is_null(), "dlsym({name}) failed");
    assert_eq!(std::mem::size_of::<T>(), std::mem::size_of::<*mut c_void>());
    // SAFETY: `T` is the function pointer type of the symbol (same size).
    unsafe { std::mem::transmute_copy(&p) }
}

fn lib() -> &'static Lib {
    static LIB: OnceLock<Lib> = OnceLock::new();
    LIB.get_or_init(|| {
        let path = std::env::var("WARMARENA_SO").unwrap_or_else(|_| {
            concat!(env!("CARGO_MANIFEST_DIR"), "/../target/debug/libwarmarena.so").to_string()
        });
        let c = CString::new(path.clone()).unwrap();
        // SAFETY: a NUL-terminated path; the library's constructors only
        // set up its own arena.
        let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if h.is_null() {
            // SAFETY: dlerror's message is NUL-terminated (or null).
            let why = unsafe {
                let e = libc::dlerror();
                if e.is_null() {
                    String::new()
                } else {
                    std::ffi::CStr::from_ptr(e).to_string_lossy().into_owned()
                }
            };
            panic!(
                "cannot load {path}: {why}\n(build it with `cargo build -p warmarena-malloc`, or set \
                 WARMARENA_SO; \"cannot allocate memory in static TLS block\": run with \
                 GLIBC_TUNABLES=glibc.rtld.optional_static_tls=8192, as scripts/fuzz.sh does)"
            );
        }
        // SAFETY: a NUL-terminated name of a library the process has loaded.
        let glibc = unsafe { libc::dlopen(c"libc.so.6".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
        assert!(!glibc.is_null(), "libc.so.6 is not loaded");
        Lib {
            malloc: sym(h, "malloc"),
            free: sym(h, "free"),
            calloc: sym(h, "calloc"),
            realloc: sym(h, "realloc"),
            reallocarray: sym(h, "reallocarray"),
            posix_memalign: sym(h, "posix_memalign"),
            aligned_alloc: sym(h, "aligned_alloc"),
            memalign: sym(h, "memalign"),
            valloc: sym(h, "valloc"),
            pvalloc: sym(h, "pvalloc"),
            usable_size: sym(h, "malloc_usable_size"),
            trim: sym(h, "malloc_trim"),
            mallinfo2: sym(h, "mallinfo2"),
            glibc_malloc: sym(glibc, "malloc"),
            glibc_free: sym(glibc, "free"),
        }
    })
}

warmarena_fuzz::op_counts!(
    COUNTS,
    "c_malloc",
    [
        "malloc",
        "calloc",
        "realloc",
        "realloc_zero",
        "reallocarray",
        "posix_memalign",
        "aligned_alloc",
        "memalign",
        "valloc",
        "pvalloc",
        "free",
        "free_on_thread",
        "foreign_free",
        "foreign_realloc",
        "bad_input",
        "trim"
    ]
);

/// A size: mostly small, sometimes large (up to 8 MiB), sometimes an edge.
#[derive(Debug, Clone, Copy, Arbitrary)]
enum Size {
    Small(u8),
    Medium(u16),
    Large(u16),
    Edge(u8),
}

impl Size {
    fn get(self) -> usize {
        match self {
            Size::Small(n) => n as usize,
            Size::Medium(n) => n as usize * 4,
            Size::Large(n) => (n as usize) << 7,
            Size::Edge(k) => [
                0,
                1,
                15,
                16,
                17,
                4095,
                4096,
                4097,
                65535,
                65536,
                65537,
                (2 << 20) - 1,
                2 << 20,
            ][k as usize % 13],
        }
    }
}

#[derive(Debug, Arbitrary)]
enum Op {
    Malloc(Size),
    Calloc(u8, Size),
    Realloc(u8, Size),
    ReallocZero(u8),
    Reallocarray(u8, u8, Size),
    PosixMemalign(u8, Size),
    AlignedAlloc(u8, Size),
    Memalign(u8, Size),
    Valloc(Size),
    Pvalloc(Size),
    Free(u8),
    FreeOnThread(u8),
    ForeignFree(Size),
    ForeignRealloc(Size, Size),
    Bad(u8),
    Trim,
}

/// A live block: its size as asked, and the byte it was filled with
/// (`None`: zeroed by `calloc`, then filled).
struct Block {
    size: usize,
    fill: u8,
}

struct State {
    live: BTreeMap<usize, Block>,
    next_fill: u8,
}

fn errno() -> c_int {
    // SAFETY: this thread's errno.
    unsafe { *libc::__errno_location() }
}

fn set_errno(v: c_int) {
    // SAFETY: this thread's errno.
    unsafe { *libc::__errno_location() = v };
}

/// Bytes written and checked at each end of a block (a large block is not
/// written whole).
const EDGE: usize = 256;

/// The ranges of a block of `size` bytes that [`fill_bytes`] writes: all
/// of it up to `2 * EDGE` bytes, else its first and last `EDGE` bytes.
fn written(size: usize) -> [(usize, usize); 2] {
    if size <= 2 * EDGE {
        [(0, size), (size, size)]
    } else {
        [(0, EDGE), (size - EDGE, size)]
    }
}

/// Checks that the bytes [`fill_bytes`] wrote into a block of `size` bytes
/// at `p` still read `fill`.
fn check_bytes(p: usize, size: usize, fill: u8) {
    check_kept(p, size, size, fill);
}

/// Checks what a resize from `old` to `new` bytes keeps: the bytes
/// [`fill_bytes`] wrote into the block of `old` bytes, below `new` (a
/// shrunk block's end was never written).
fn check_kept(p: usize, old: usize, new: usize, fill: u8) {
    for (from, to) in written(old) {
        let to = to.min(new);
        if from >= to {
            continue;
        }
        // SAFETY: `from..to` lies inside a live block of at least `new` bytes.
        let s = unsafe { std::slice::from_raw_parts((p + from) as *const u8, to - from) };
        if let Some(i) = s.iter().position(|&b| b != fill) {
            panic!(
                "block {p:#x} ({old} B, now {new} B) byte {} is {:#x}, not {fill:#x}",
                from + i,
                s[i]
            );
        }
    }
}

fn fill_bytes(p: usize, size: usize, fill: u8) {
    for (from, to) in written(size) {
        // SAFETY: `from..to` lies inside a live block of `size` bytes, ours.
        unsafe { std::ptr::write_bytes((p + from) as *mut u8, fill, to - from) };
    }
}

impl State {
    fn pick(&self, i: u8) -> Option<usize> {
        if self.live.is_empty() {
            return None;
        }
        self.live.keys().nth(i as usize % self.live.len()).copied()
    }

    /// Records a new block from a call that asked for `size` at `align`.
    fn add(&mut self, p: *mut c_void, size: usize, align: usize, zeroed: bool) {
        let l = lib();
        let a = p as usize;
        assert!(a != 0);
        assert_eq!(a % align.max(16), 0, "{a:#x} not aligned to {align}");
        // SAFETY: a live block of the library.
        let usable = unsafe { (l.usable_size)(p) };
        assert!(usable >= size, "usable size {usable} below {size}");
        let end = a + size.max(1);
        if let Some((&b, blk)) = self.live.range(..end).next_back() {
            assert!(
                b + blk.size.max(1) <= a,
                "{a:#x}+{size} overlaps {b:#x}+{}",
                blk.size
            );
        }
        if zeroed {
            check_bytes(a, size, 0);
        }
        self.next_fill = self.next_fill.wrapping_add(1) | 1;
        let fill = self.next_fill;
        fill_bytes(a, size, fill);
        self.live.insert(a, Block { size, fill });
    }

    fn take(&mut self, a: usize) -> Block {
        let b = self.live.remove(&a).unwrap();
        check_bytes(a, b.size, b.fill);
        b
    }

    fn check_count(&self) {
        // SAFETY: no preconditions.
        let m = unsafe { (lib().mallinfo2)() };
        assert_eq!(m.hblks, self.live.len(), "mallinfo2 live blocks");
    }
}

fn aligns(k: u8) -> usize {
    1usize << (k % 17) // 1 .. 64 KiB
}

fuzz_target!(|ops: Vec<Op>| {
    let l = lib();
    let mut st = State {
        live: BTreeMap::new(),
        next_fill: 0,
    };
    // SAFETY: every call below is a C allocation call with its documented
    // arguments; pointers freed or resized are live blocks of the library
    // (or glibc's, for the foreign operations).
    unsafe {
        st.check_count();
        for op in ops.into_iter().take(64) {
            match op {
                Op::Malloc(s) => {
                    COUNTS.bump(0);
                    let n = s.get();
                    let p = (l.malloc)(n);
                    st.add(p, n, 16, false);
                }
                Op::Calloc(k, s) => {
                    COUNTS.bump(1);
                    let n = (k % 8) as usize + 1;
                    let size = s.get() / n;
                    let p = (l.calloc)(n, size);
                    st.add(p, n * size, 16, true);
                }
                Op::Realloc(i, s) => {
                    let Some(a) = st.pick(i) else { continue };
                    COUNTS.bump(2);
                    let n = s.get().max(1);
                    let b = st.take(a);
                    let q = (l.realloc)(a as *mut c_void, n);
                    assert!(!q.is_null());
                    check_kept(q as usize, b.size, n, b.fill);
                    st.add(q, n, 16, false);
                }
                Op::ReallocZero(i) => {
                    let Some(a) = st.pick(i) else { continue };
                    COUNTS.bump(3);
                    st.take(a);
                    assert!((l.realloc)(a as *mut c_void, 0).is_null());
                }
                Op::Reallocarray(i, k, s) => {
                    COUNTS.bump(4);
                    let n = (k % 8) as usize + 1;
                    let size = s.get().max(1) / n + 1;
                    match st.pick(i) {
                        Some(a) => {
                            let b = st.take(a);
                            let q = (l.reallocarray)(a as *mut c_void, n, size);
                            check_kept(q as usize, b.size, n * size, b.fill);
                            st.add(q, n * size, 16, false);
                        }
                        None => {
                            let q = (l.reallocarray)(std::ptr::null_mut(), n, size);
                            st.add(q, n * size, 16, false);
                        }
                    }
                }
                Op::PosixMemalign(k, s) => {
                    COUNTS.bump(5);
                    let align = aligns(k).max(8);
                    let mut out = std::ptr::null_mut();
                    assert_eq!((l.posix_memalign)(&mut out, align, s.get()), 0);
                    st.add(out, s.get(), align, false);
                }
                Op::AlignedAlloc(k, s) => {
                    COUNTS.bump(6);
                    let align = aligns(k);
                    let p = (l.aligned_alloc)(align, s.get());
                    st.add(p, s.get(), align, false);
                }
                Op::Memalign(k, s) => {
                    COUNTS.bump(7);
                    // Not a power of two: rounded up (glibc).
                    let asked = aligns(k) + (k as usize % 3);
                    let p = (l.memalign)(asked, s.get());
                    st.add(p, s.get(), asked.next_power_of_two(), false);
                }
                Op::Valloc(s) => {
                    COUNTS.bump(8);
                    let p = (l.valloc)(s.get());
                    st.add(p, s.get(), 4096, false);
                }
                Op::Pvalloc(s) => {
                    COUNTS.bump(9);
                    let p = (l.pvalloc)(s.get());
                    let n = s.get().max(1).next_multiple_of(4096);
                    st.add(p, n, 4096, false);
                }
                Op::Free(i) => {
                    let Some(a) = st.pick(i) else { continue };
                    COUNTS.bump(10);
                    st.take(a);
                    (l.free)(a as *mut c_void);
                }
                Op::FreeOnThread(i) => {
                    let Some(a) = st.pick(i) else { continue };
                    COUNTS.bump(11);
                    st.take(a);
                    let free = l.free;
                    std::thread::spawn(move || free(a as *mut c_void))
                        .join()
                        .unwrap();
                }
                Op::ForeignFree(s) => {
                    COUNTS.bump(12);
                    let p = (l.glibc_malloc)(s.get());
                    assert!(!p.is_null());
                    (l.free)(p);
                }
                Op::ForeignRealloc(s, t) => {
                    COUNTS.bump(13);
                    let n = s.get().max(1);
                    let p = (l.glibc_malloc)(n);
                    fill_bytes(p as usize, n, 0x5a);
                    let m = t.get().max(1);
                    let q = (l.realloc)(p, m);
                    assert!(!q.is_null());
                    check_kept(q as usize, n, m, 0x5a);
                    // A foreign pointer stays with glibc.
                    (l.glibc_free)(q);
                }
                Op::Bad(k) => {
                    COUNTS.bump(14);
                    set_errno(0);
                    match k % 7 {
                        0 => {
                            assert!((l.calloc)(usize::MAX / 2 + 1, 2).is_null());
                            assert_eq!(errno(), libc::ENOMEM);
                        }
                        1 => {
                            assert!((l.malloc)(usize::MAX).is_null());
                            assert_eq!(errno(), libc::ENOMEM);
                        }
                        2 => {
                            let mut out = 1usize as *mut c_void;
                            assert_eq!((l.posix_memalign)(&mut out, 24, 8), libc::EINVAL);
                            assert_eq!(out as usize, 1, "*out untouched");
                        }
                        3 => {
                            assert!((l.aligned_alloc)(48, 96).is_null());
                            assert_eq!(errno(), libc::EINVAL);
                        }
                        4 => {
                            assert!((l.reallocarray)(std::ptr::null_mut(), usize::MAX, 3).is_null());
                            assert_eq!(errno(), libc::ENOMEM);
                        }
                        5 => {
                            (l.free)(std::ptr::null_mut());
                            assert_eq!((l.usable_size)(std::ptr::null_mut()), 0);
                        }
                        _ => {
                            assert!((l.pvalloc)(usize::MAX - 10).is_null());
                            assert_eq!(errno(), libc::ENOMEM);
                        }
                    }
                }
                Op::Trim => {
                    COUNTS.bump(15);
                    (l.trim)(0);
                }
            }
            st.check_count();
        }
        for (&a, _) in std::mem::take(&mut st.live).iter() {
            (l.free)(a as *mut c_void);
        }
        st.check_count();
    }
});
