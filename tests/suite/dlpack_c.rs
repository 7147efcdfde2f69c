//! A DLPack round trip through a real C consumer: the suite compiles
//! `tests/c/dlpack_consumer.c` into a shared object with the system C
//! compiler, loads it, hands it a tensor, and checks that the consumer's
//! deleter put the buffer back in the I/O arena.

use std::path::PathBuf;
use warmarena::handle::dlpack::{DLDataType, DLManagedTensorVersioned};
use warmarena::IoArena;

type Consume = unsafe extern "C" fn(*mut DLManagedTensorVersioned, *mut *const u8) -> f64;

fn build_consumer() -> Result<PathBuf, String> {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/c/dlpack_consumer.c");
    let out = std::env::temp_dir().join(format!("warmarena_dlpack_{}.so", std::process::id()));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = std::process::Command::new(&cc)
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .map_err(|e| format!("cannot run {cc}: {e}"))?;
    if !status.success() {
        return Err(format!("{cc} failed on {}", src.display()));
    }
    Ok(out)
}

#[test]
fn dlpack_round_trip_through_a_c_consumer() {
    let so = match build_consumer() {
        Ok(p) => p,
        Err(e) => {
            println!("skipping the C DLPack consumer: {e}");
            return;
        }
    };
    let path = std::ffi::CString::new(so.to_str().unwrap()).unwrap();
    // SAFETY: loading a library we just compiled; the symbol has the declared signature.
    let (lib, consume) = unsafe {
        let lib = libc::dlopen(path.as_ptr(), libc::RTLD_NOW);
        assert!(!lib.is_null(), "dlopen failed");
        let sym = libc::dlsym(lib, c"consume_f32".as_ptr());
        assert!(!sym.is_null(), "dlsym failed");
        (lib, std::mem::transmute::<*mut libc::c_void, Consume>(sym))
    };
    let io = IoArena::new();
    for round in 0..3 {
        let mut a = io.allocate(1000 * 4, 64).unwrap();
        for (i, c) in a.as_mut_slice().chunks_exact_mut(4).enumerate() {
            c.copy_from_slice(&(i as f32).to_ne_bytes());
        }
        let addr = a.as_ptr();
        let t = a
            .into_lease()
            .unwrap()
            .into_dlpack(DLDataType::F32, &[10, 100])
            .unwrap();
        assert_eq!(io.stats().leases, 1);
        let mut seen: *const u8 = std::ptr::null();
        // SAFETY: the consumer reads the tensor and calls its deleter once.
        let sum = unsafe { consume(t.as_ptr(), &mut seen) };
        assert_eq!(sum, (0..1000).sum::<i32>() as f64, "round {round}");
        assert_eq!(seen, addr, "the consumer saw the arena buffer itself");
        let s = io.stats();
        assert_eq!((s.leases, s.live_buffers, s.retained_buffers), (0, 0, 1));
        if round > 0 {
            assert!(s.warm_allocations >= round);
        }
    }
    assert_eq!(io.stats().copies, 0);
    // SAFETY: no pointer into the library outlives this point.
    unsafe { libc::dlclose(lib) };
    let _ = std::fs::remove_file(so);
}
