//! Bad input gets a typed error and leaves the arena exactly as it was.

use crate::support::state;
use warmarena::arena::MAX_ALIGN;
use warmarena::size_class::MAX_CLASS_SIZE;
use warmarena::{ArenaError, ExecutionArena, IoArena};

#[test]
fn zero_size_is_a_typed_error() {
    let arena = ExecutionArena::new();
    assert_eq!(arena.allocate(0, 8).unwrap_err(), ArenaError::ZeroSize);
    assert_eq!(state(arena.stats()), state(ExecutionArena::new().stats()));
}

#[test]
fn bad_and_unsupported_alignments() {
    let arena = IoArena::new();
    for align in [0usize, 3, 48, usize::MAX] {
        assert_eq!(
            arena.allocate(64, align).unwrap_err(),
            ArenaError::BadAlignment { align }
        );
    }
    let too_big = MAX_ALIGN * 2;
    assert_eq!(
        arena.allocate(64, too_big).unwrap_err(),
        ArenaError::UnsupportedAlignment {
            align: too_big,
            max: MAX_ALIGN
        }
    );
    let a = arena.allocate(64, MAX_ALIGN).unwrap();
    assert_eq!(a.as_ptr() as usize % MAX_ALIGN, 0);
}

#[test]
fn sizes_whose_rounding_overflows() {
    let arena = ExecutionArena::new();
    let before = state(arena.stats());
    for (size, align) in [(usize::MAX, 4096), (usize::MAX - 10, 64), (usize::MAX, 1)] {
        let e = arena.allocate(size, align).unwrap_err();
        assert!(
            matches!(
                e,
                ArenaError::SizeOverflow { .. } | ArenaError::OutOfMemory { .. }
            ),
            "{e:?}"
        );
    }
    assert_eq!(state(arena.stats()), before);
}

#[test]
fn above_the_largest_class_is_dedicated_or_refused_cleanly() {
    let arena = ExecutionArena::new();
    let size = MAX_CLASS_SIZE + 1;
    match arena.allocate(size, 64) {
        Ok(a) => {
            assert_eq!(arena.stats().dedicated_allocations, 1);
            drop(a);
            let s = arena.stats();
            assert_eq!((s.retained_bytes, s.live_bytes), (0, 0));
            assert_eq!(s.os.unmapped_bytes, s.os.mapped_bytes);
        }
        Err(e) => {
            println!("the OS refused {size} bytes ({e}); checking the arena is untouched");
            assert!(matches!(e, ArenaError::OutOfMemory { .. }));
            let s = arena.stats();
            assert_eq!(
                (s.live_bytes, s.cold_allocations, s.mapped_bytes),
                (0, 0, 0)
            );
        }
    }
}

/// The child half of `os_refusal_leaves_the_arena_usable`: runs only when the
/// parent sets the variable, in a process whose address space it may shrink.
#[test]
#[ignore = "run by os_refusal_leaves_the_arena_usable in a child process"]
fn child_under_rlimit_as() {
    if std::env::var("WARMARENA_RLIMIT_CHILD").is_err() {
        return;
    }
    let arena = ExecutionArena::new();
    let small = arena.allocate(1 << 20, 64).unwrap();
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let vm_kib: u64 = status
        .lines()
        .find(|l| l.starts_with("VmSize:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap();
    let limit = (vm_kib * 1024) + (64 << 20);
    let rl = libc::rlimit {
        rlim_cur: limit,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: setrlimit with a valid struct only changes this child's limits.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &rl) }, 0);
    let before = arena.stats();
    let e = arena.allocate(1 << 30, 64).unwrap_err();
    assert!(
        matches!(e, ArenaError::OutOfMemory { errno, .. } if errno == libc::ENOMEM),
        "{e:?}"
    );
    let after = arena.stats();
    assert_eq!(after.live_bytes, before.live_bytes);
    assert_eq!(after.cold_allocations, before.cold_allocations);
    assert_eq!(after.mapped_bytes, before.mapped_bytes);
    // The arena still serves what fits.
    drop(small);
    let again = arena.allocate(1 << 20, 64).unwrap();
    assert!(again.served_warm());
    let more = arena.allocate(8 << 20, 64).unwrap();
    assert!(!more.served_warm());
    println!("CHILD-OK");
}

#[test]
fn os_refusal_leaves_the_arena_usable() {
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args([
            "--exact",
            "arena_bad_input::child_under_rlimit_as",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("WARMARENA_RLIMIT_CHILD", "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child failed: {text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("CHILD-OK"), "child did not run: {text}");
}

#[test]
fn cap_of_zero_is_defined() {
    let arena = ExecutionArena::new();
    arena.set_retention_cap(0);
    drop(arena.allocate(4096, 8).unwrap());
    let s = arena.stats();
    assert_eq!((s.retained_bytes, s.retention_cap), (0, 0));
}
