//! A request loop on a worker pool, without HTTP: client threads send
//! requests over a channel, worker threads run a small "model" for each
//! one and send the output back as an [`IoLease`]. Each worker owns one
//! model instance (its arenas, made on the main thread at start-up, as a
//! server does); each request runs
//!
//! 1. `exec.begin_run()` on the worker: the execution heap (buffers of
//!    64 KiB and up) moves to the thread that runs the request while no
//!    heap buffer is live, so a repeated run lands at the same addresses;
//! 2. inside `global::enter(&exec)`: the scoped global allocator sends
//!    the worker's own `Vec`, `String` and `HashMap` allocations (code you
//!    do not own: a tokenizer, serde, a BLAS wrapper) to the same arena;
//! 3. its output from the I/O arena, exported as a lease that the client
//!    reads and drops on its own thread.
//!
//! The worker counts its page faults per request ([`FaultCounter`]); after
//! each worker's first requests the count must be 0 under load. One thing
//! makes that hold whatever the clients' timing: outputs belong to the
//! callers, so a run may start while every client still holds an earlier
//! output, and its own output then needs one more buffer. Each worker
//! takes (and writes) that many output buffers once at start-up.
//!
//! `cargo run --release --example server [WORKERS] [CLIENTS] [REQUESTS_PER_CLIENT]`
//! (default 4 workers, 8 clients, 50 requests each).
//!
//! In an async server (tokio), do the same in the synchronous part of a
//! request (`spawn_blocking`, or a plain function called from the task): a
//! `ScopeGuard` is not `Send` and must not be held across an `.await`,
//! while arenas and leases may be (`docs/guide/threads-and-servers.md`).

use std::collections::HashMap;
use std::sync::mpsc::{channel, sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread;
use warmarena::faults::{pre_touch_code, pre_touch_stack, FaultCounter, FaultSource};
use warmarena::global::{self, ScopedGlobal};
use warmarena::{ExecutionArena, IoArena, IoLease};

/// Allocations on a thread inside `global::enter` go to the scope's arena;
/// everything else goes to the system allocator.
#[global_allocator]
static GLOBAL: ScopedGlobal = ScopedGlobal::system();

/// Width of the model's hidden layer, in floats (1 MiB).
const HIDDEN: usize = 1 << 18;
/// Output floats per request (16 KiB).
const OUT: usize = 4096;
/// Requests each worker serves before its runs count as warm.
const WARM_UP: usize = 3;

/// One request: its input tokens; the reply goes to `reply`.
struct Request {
    tokens: Arc<[u32]>,
    reply: SyncSender<IoLease>,
}

/// A model instance: its arenas, made once, used by one worker at a time.
struct Instance {
    exec: ExecutionArena,
    io: IoArena,
}

/// Floats as bytes, for writing a buffer.
fn floats(bytes: &mut [u8]) -> &mut [f32] {
    // SAFETY: every bit pattern is a valid f32, and `align_to_mut` puts
    // any unaligned prefix in `head`.
    let (head, body, _) = unsafe { bytes.align_to_mut::<f32>() };
    assert!(head.is_empty(), "arena buffers here are 64-byte aligned");
    body
}

/// The model: an embedding into a hidden layer, a second layer, a
/// vocabulary map built by "library code", and the output. Every buffer
/// but the output dies inside the run.
fn run_model(m: &Instance, tokens: &[u32]) -> IoLease {
    // Intermediates: explicit allocations from the execution arena.
    let mut h1 = m.exec.allocate(HIDDEN * 4, 64).expect("hidden layer");
    for (i, x) in floats(h1.as_mut_slice()).iter_mut().enumerate() {
        *x = tokens[i % tokens.len()] as f32 * 0.001;
    }
    let mut h2 = m.exec.allocate(HIDDEN * 4, 64).expect("second layer");
    {
        let (a, b) = (floats(h1.as_mut_slice()), floats(h2.as_mut_slice()));
        for (y, x) in b.iter_mut().zip(a.iter()) {
            *y = (x * 1.5 + 0.25).max(0.0);
        }
    }
    drop(h1);
    // "Library code": ordinary std collections, which the scoped global
    // allocator serves from the execution arena while the scope is open.
    let vocab: HashMap<u32, usize> = tokens.iter().enumerate().map(|(i, &t)| (t, i)).collect();
    let labels: Vec<String> = (0..16).map(|k| format!("class-{k}")).collect();
    // The output: from the I/O arena, handed out as a lease (no copy).
    let mut out = m.io.allocate(OUT * 4, 64).expect("output");
    {
        let h = floats(h2.as_mut_slice());
        let bias = (vocab.len() + labels.len()) as f32;
        for (k, y) in floats(out.as_mut_slice()).iter_mut().enumerate() {
            *y = h[k * (HIDDEN / OUT)] + bias;
        }
    }
    m.io.export(out).expect("an I/O allocation exports")
}

/// What a worker saw: requests served, faults in its first `WARM_UP`
/// requests and in the rest, and how its faults were counted.
struct WorkerReport {
    served: usize,
    cold_faults: u64,
    warm_faults: u64,
    source: FaultSource,
    heap_moves: u64,
}

fn worker(queue: Arc<Mutex<Receiver<Request>>>, model: Instance, clients: usize) -> WorkerReport {
    // Outputs are the callers': while a run goes on, up to one per client
    // may still be held, and the run's own output needs a buffer beside
    // them. Taking that many once, here on the worker, makes every later
    // run find one ready, however the clients' timing falls.
    let ready: Vec<_> = (0..clients + 1)
        .map(|_| {
            let mut out = model.io.allocate(OUT * 4, 64).expect("output");
            out.as_mut_slice().fill(0); // its pages, in memory from now on
            out
        })
        .collect();
    drop(ready);
    let mut faults = FaultCounter::new();
    let (mut served, mut cold_faults, mut warm_faults) = (0, 0, 0);
    loop {
        // Wait for a request (the lock is held only while waiting).
        let Ok(req) = queue.lock().unwrap().recv() else {
            break;
        };
        pre_touch_stack();
        faults.reset();
        // A run starts on this thread: the heap follows it here.
        model.exec.begin_run();
        let output = {
            let _scope = global::enter(&model.exec);
            run_model(&model, &req.tokens)
        };
        let f = faults.read().minor;
        if served < WARM_UP {
            cold_faults += f;
        } else {
            warm_faults += f;
        }
        served += 1;
        // The client may have gone; the lease then comes back here.
        let _ = req.reply.send(output);
    }
    WorkerReport {
        served,
        cold_faults,
        warm_faults,
        source: faults.source(),
        heap_moves: model.exec.stats().heap_moves,
    }
}

fn arg(n: usize, default: usize) -> usize {
    std::env::args()
        .nth(n)
        .and_then(|a| a.parse().ok())
        .filter(|&v| v > 0)
        .unwrap_or(default)
}

fn main() {
    let (workers, clients, per_client) = (arg(1, 4), arg(2, 8), arg(3, 50));
    // So that the first run of a code path is not counted as a fault of
    // the memory under test.
    pre_touch_code();

    // Start-up: one model instance per worker, made here on the main thread.
    let (submit, queue) = channel::<Request>();
    let queue = Arc::new(Mutex::new(queue));
    let pool: Vec<_> = (0..workers)
        .map(|_| {
            let model = Instance {
                exec: ExecutionArena::new(),
                io: IoArena::new(),
            };
            let queue = Arc::clone(&queue);
            thread::spawn(move || worker(queue, model, clients))
        })
        .collect();

    // The load: every client sends its requests one after another and
    // checks each reply; all clients at once.
    let load: Vec<_> = (0..clients)
        .map(|c| {
            let submit = submit.clone();
            thread::spawn(move || {
                let tokens: Arc<[u32]> = (0..512u32).map(|t| (t * 7 + c as u32) % 1000).collect();
                let (reply, replies) = sync_channel(1);
                let mut first = None;
                for _ in 0..per_client {
                    submit
                        .send(Request {
                            tokens: Arc::clone(&tokens),
                            reply: reply.clone(),
                        })
                        .expect("the pool is up");
                    let lease = replies.recv().expect("a reply");
                    assert_eq!(lease.len(), OUT * 4);
                    let head = lease.as_slice()[..64].to_vec();
                    assert_eq!(
                        *first.get_or_insert(head.clone()),
                        head,
                        "same input, same output"
                    );
                    drop(lease); // back to its worker's I/O arena, from this thread
                }
            })
        })
        .collect();
    for c in load {
        c.join().expect("client");
    }
    drop(submit); // the workers' queue ends
    let reports: Vec<WorkerReport> = pool
        .into_iter()
        .map(|w| w.join().expect("worker"))
        .collect();

    let source = reports[0].source;
    match source {
        FaultSource::PerfEvents => println!("faults: perf events of each worker thread"),
        FaultSource::Getrusage => println!(
            "faults: getrusage(RUSAGE_THREAD) (perf events were refused, e.g. perf_event_paranoid); \
             it also counts faults the kernel takes for the thread"
        ),
    }
    let mut warm_total = 0;
    for (k, r) in reports.iter().enumerate() {
        println!(
            "worker {k}: {} requests, faults in its first {WARM_UP}: {}, in the {} warm ones: {}, heap moves {}",
            r.served,
            r.cold_faults,
            r.served.saturating_sub(WARM_UP),
            r.warm_faults,
            r.heap_moves
        );
        warm_total += r.warm_faults;
    }
    let served: usize = reports.iter().map(|r| r.served).sum();
    assert_eq!(served, clients * per_client);
    println!("{served} requests on {workers} workers from {clients} clients: {warm_total} page faults in warm runs");
    assert_eq!(warm_total, 0, "a warm run under load takes no page fault");
}
