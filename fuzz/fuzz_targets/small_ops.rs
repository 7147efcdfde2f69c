//! The run-owning small path (`ArenaConfig::run_ownership`) under
//! arbitrary sequences of allocate / free / free on another thread /
//! allocate on a short-lived thread that exits / run boundary / trim / set
//! cap / drop the arena while buffers of it live. After every operation:
//!
//! - live bytes and buffers match the buffers the harness holds, exactly;
//! - no two live buffers overlap, and every buffer keeps its bytes;
//! - retained bytes never exceed what the arena mapped.
//!
//! The arenas dropped while their buffers live are freed when the last
//! buffer goes (on whichever thread); ASan would see a use after free.
#![no_main]

use libfuzzer_sys::fuzz_target;
use warmarena::{Allocation, ArenaConfig, ExecutionArena, IoArena};

warmarena_fuzz::op_counts!(
    COUNTS,
    "small_ops",
    [
        "alloc",
        "free",
        "free_on_thread",
        "thread_allocs",
        "boundary",
        "trim",
        "set_cap",
        "drop_arena"
    ]
);

enum Arena {
    Exec(ExecutionArena),
    Io(IoArena),
}

impl Arena {
    fn new(io: bool) -> Arena {
        let c = ArenaConfig::default().run_ownership(true).huge_pages(false);
        match io {
            false => Arena::Exec(ExecutionArena::with_config(c)),
            true => Arena::Io(IoArena::with_config(c)),
        }
    }
    fn allocate(&self, size: usize) -> Allocation {
        match self {
            Arena::Exec(a) => a.allocate(size, 8),
            Arena::Io(a) => a.allocate(size, 8),
        }
        .expect("a small request is served")
    }
    fn stats(&self) -> warmarena::ArenaStats {
        match self {
            Arena::Exec(a) => a.stats(),
            Arena::Io(a) => a.stats(),
        }
    }
}

struct Held {
    a: Allocation,
    byte: u8,
    /// The arena generation it came from (buffers of dropped arenas are
    /// held too, and counted against no live arena).
    gen: u32,
}

struct World {
    arena: Arena,
    gen: u32,
    held: Vec<Held>,
    byte: u8,
}

fn fill(a: &mut Allocation, byte: u8) {
    a.as_mut_slice().fill(byte);
}

fn intact(h: &Held) -> bool {
    h.a.as_slice().iter().all(|&b| b == h.byte)
}

impl World {
    fn hold(&mut self, mut a: Allocation) {
        self.byte = self.byte.wrapping_add(1);
        fill(&mut a, self.byte);
        self.held.push(Held {
            a,
            byte: self.byte,
            gen: self.gen,
        });
    }

    fn step(&mut self, op: u8, arg: u8, w: u16) {
        match op % 8 {
            0 => {
                COUNTS.bump(0);
                let a = self.arena.allocate(1 + (w as usize) % (60 << 10));
                self.hold(a);
            }
            1 if !self.held.is_empty() => {
                COUNTS.bump(1);
                let h = self.held.swap_remove(arg as usize % self.held.len());
                assert!(intact(&h), "contents changed while live");
            }
            2 if !self.held.is_empty() => {
                COUNTS.bump(2);
                let h = self.held.swap_remove(arg as usize % self.held.len());
                std::thread::spawn(move || {
                    assert!(intact(&h), "contents changed while live");
                    drop(h.a);
                })
                .join()
                .unwrap();
            }
            3 => {
                COUNTS.bump(3);
                let n = 1 + arg as usize % 16;
                let size = 1 + w as usize % 4096;
                let arena = match &self.arena {
                    Arena::Exec(a) => Arena::Exec(a.clone()),
                    Arena::Io(a) => Arena::Io(a.clone()),
                };
                let got = std::thread::spawn(move || {
                    (0..n).map(|_| arena.allocate(size)).collect::<Vec<_>>()
                })
                .join()
                .unwrap();
                for a in got {
                    self.hold(a);
                }
            }
            4 => {
                COUNTS.bump(4);
                if let Arena::Exec(a) = &self.arena {
                    a.begin_run();
                }
            }
            5 => {
                COUNTS.bump(5);
                match &self.arena {
                    Arena::Exec(a) => a.trim(),
                    Arena::Io(a) => a.trim(),
                };
            }
            6 => {
                COUNTS.bump(6);
                let cap = if arg & 1 == 0 { usize::MAX } else { (w as usize) << 8 };
                match &self.arena {
                    Arena::Exec(a) => a.set_retention_cap(cap),
                    Arena::Io(a) => a.set_retention_cap(cap),
                }
            }
            7 => {
                COUNTS.bump(7);
                self.gen += 1;
                self.arena = Arena::new(arg & 1 == 1);
            }
            _ => {}
        }
    }

    fn check(&self) {
        let mine: Vec<&Held> = self.held.iter().filter(|h| h.gen == self.gen).collect();
        let s = self.arena.stats();
        assert_eq!(s.live_buffers, mine.len(), "live buffers");
        assert_eq!(
            s.live_bytes,
            mine.iter().map(|h| h.a.capacity()).sum::<usize>(),
            "live bytes"
        );
        assert!(s.retained_bytes <= s.mapped_bytes, "retained beyond what was mapped");
        let mut spans: Vec<(usize, usize)> = self
            .held
            .iter()
            .map(|h| (h.a.as_ptr() as usize, h.a.capacity()))
            .collect();
        spans.sort_unstable();
        for w in spans.windows(2) {
            assert!(w[0].0 + w[0].1 <= w[1].0, "live buffers overlap");
        }
        for h in &self.held {
            assert!(intact(h), "contents changed while live");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut w = World {
        arena: Arena::new(false),
        gen: 0,
        held: Vec::new(),
        byte: 0,
    };
    for c in data.chunks_exact(4).take(200) {
        w.step(c[0], c[1], u16::from_le_bytes([c[2], c[3]]));
        w.check();
    }
});
