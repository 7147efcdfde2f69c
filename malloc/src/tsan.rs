//! The ThreadSanitizer build (`scripts/tsan-malloc.sh`: nightly,
//! `-Zsanitizer=thread --cfg warmarena_tsan`): `malloc`, `free`, `calloc`
//! and `realloc` are exported from here as naked functions (no
//! instrumentation at all: even a function the sanitizer skips would call
//! its runtime at entry and exit), so that the calls the sanitizer's
//! runtime makes while it starts (its interceptors' `dlsym` allocates)
//! reach glibc's allocator (`__libc_malloc` and the rest) before any
//! instrumented code runs. From the library's constructor on (the process
//! state is no longer `UNINIT`), each jumps to the instrumented function
//! of the same name in `lib.rs`.

use core::ffi::c_void;

extern "C" {
    fn __libc_malloc(size: usize) -> *mut c_void;
    fn __libc_free(p: *mut c_void);
    fn __libc_calloc(n: usize, size: usize) -> *mut c_void;
    fn __libc_realloc(p: *mut c_void, size: usize) -> *mut c_void;
}

/// One trampoline: glibc's function while the library has not started,
/// else the library's (a tail jump: the arguments stay in their registers).
macro_rules! trampoline {
    ($name:ident, $libc:ident, ($($arg:ident: $ty:ty),*) $(-> $ret:ty)?) => {
        /// # Safety
        /// As the C function of this name.
        #[unsafe(naked)]
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) $(-> $ret)? {
            core::arch::naked_asm!(
                "cmp byte ptr [rip + {process}], 0",
                "je 2f",
                "jmp {imp}",
                "2:",
                "jmp {libc}@PLT",
                process = sym crate::PROCESS,
                imp = sym crate::$name,
                libc = sym $libc,
            )
        }
    };
}

const _: () = assert!(crate::UNINIT == 0, "the trampolines compare with 0");

trampoline!(malloc, __libc_malloc, (size: usize) -> *mut c_void);
trampoline!(free, __libc_free, (p: *mut c_void));
trampoline!(calloc, __libc_calloc, (n: usize, size: usize) -> *mut c_void);
trampoline!(realloc, __libc_realloc, (p: *mut c_void, size: usize) -> *mut c_void);
