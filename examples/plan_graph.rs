//! A graph planned ahead: its intermediates packed into one block by the
//! planner, run with [`PlannedRun`] (one execution-arena block per run,
//! every intermediate and workspace a window at its planned offset), and
//! drawn with `warmarena plan --svg`.
//!
//! The graph is a small transformer-like block: `x -> embed -> e -> attn
//! -> a -> up -> u -> down -> d`, then `add(a, d) -> y`, the declared
//! output. The kernels are written once against [`RunMemory`] and run
//! under [`ArenaRun`] (one buffer per value) as the reference.
//!
//! The example writes the same graph in the planner's JSON graph format to
//! a temporary folder and prints the command that draws its packing.
//!
//! `cargo run --release --example plan_graph`

use std::path::PathBuf;
use std::time::{Duration, Instant};
use warmarena::planner::plan_trace;
use warmarena::session::{ArenaRun, Graph, NodeId, OutputBuffer, PlannedRun, RunMemory, Session};
use warmarena::{ExecutionArena, IoArena};

/// Each node: its name, inputs, output, and workspace bytes.
const NODES: [(&str, &[&str], &str, usize); 5] = [
    ("embed", &["x"], "e", 96 << 10),
    ("attn", &["e"], "a", 256 << 10),
    ("up", &["a"], "u", 0),
    ("down", &["u"], "d", 64 << 10),
    ("add", &["a", "d"], "y", 0),
];

/// Bytes of each value (the input `x` included).
fn value_bytes(name: &str) -> Option<usize> {
    Some(match name {
        "x" => 64 << 10,
        "e" | "a" | "d" | "y" => 256 << 10,
        "u" => 1 << 20, // the MLP's 4x expansion
        _ => return None,
    })
}

fn graph() -> Graph {
    NODES
        .iter()
        .fold(Graph::new().input("x"), |g, (name, inputs, out, _)| {
            g.node(name, inputs, &[out])
        })
        .output("y")
}

/// One run of the graph in either mode: each node's output byte `i` is a
/// function of byte `i` (cyclically) of its inputs; each node with a
/// workspace fills it first, as a kernel's scratch. Returns `y`.
fn run<'i, C: RunMemory<'i>>(ctx: &mut C, x: &'i [u8]) -> Vec<u8> {
    ctx.borrow_input("x", x).expect("x is the graph's input");
    for (node, (_, inputs, out, ws_bytes)) in NODES.iter().enumerate() {
        let node: NodeId = node;
        let bytes = value_bytes(out).unwrap();
        let ws = (*ws_bytes > 0).then(|| {
            let mut ws = ctx.workspace(node, *ws_bytes, 64).expect("workspace");
            ws.as_mut_slice().fill(node as u8);
            ws
        });
        let mut buf = ctx.output(node, 0, bytes, 64).expect("output");
        {
            let o = buf.as_mut_slice();
            for slot in 0..inputs.len() {
                let input = ctx.input(node, slot).expect("input");
                for (i, b) in o.iter_mut().enumerate() {
                    let v = input[i % input.len()];
                    *b = if slot == 0 {
                        v.wrapping_mul(3).wrapping_add(node as u8)
                    } else {
                        b.wrapping_add(v)
                    };
                }
            }
        }
        drop(ws);
        ctx.commit(node, 0, buf).expect("commit");
        ctx.finish(node).expect("finish");
    }
    ctx.take_output("y").expect("y").as_slice().to_vec()
}

/// The same graph in the planner's JSON graph format
/// (`docs/design/planner.md`), each workspace a value its node writes and
/// nobody reads.
fn graph_json() -> String {
    let mut values = vec![format!(
        "{{\"name\": \"x\", \"size\": {}}}",
        value_bytes("x").unwrap()
    )];
    let mut nodes = Vec::new();
    for (name, inputs, out, ws) in NODES {
        values.push(format!(
            "{{\"name\": \"{out}\", \"size\": {}}}",
            value_bytes(out).unwrap()
        ));
        let mut outputs = vec![format!("\"{out}\"")];
        if ws > 0 {
            values.push(format!(
                "{{\"name\": \"{name}.workspace\", \"size\": {ws}}}"
            ));
            outputs.push(format!("\"{name}.workspace\""));
        }
        let inputs: Vec<String> = inputs.iter().map(|i| format!("\"{i}\"")).collect();
        nodes.push(format!(
            "{{\"name\": \"{name}\", \"inputs\": [{}], \"outputs\": [{}]}}",
            inputs.join(", "),
            outputs.join(", ")
        ));
    }
    format!(
        "{{\n  \"values\": [\n    {}\n  ],\n  \"nodes\": [\n    {}\n  ],\n  \"inputs\": [\"x\"],\n  \"outputs\": [\"y\"],\n  \"alignment\": 64\n}}\n",
        values.join(",\n    "),
        nodes.join(",\n    ")
    )
}

fn main() {
    let session = Session::new(&graph(), ExecutionArena::new(), IoArena::new()).expect("graph");
    let x: Vec<u8> = (0..value_bytes("x").unwrap())
        .map(|i| (i % 253) as u8)
        .collect();
    let reference = run(&mut ArenaRun::new(&session), &x);

    // Plan once for these sizes; a repeated shape is a cache hit.
    let mut ctx = PlannedRun::new(&session).expect("planned run");
    let plan = ctx
        .prepare(value_bytes, |node| NODES[node].3)
        .expect("a plan");
    let (height, naive, bound) = (plan.height, plan.naive_bytes, plan.lower_bound);
    println!(
        "plan: one block of {} KiB per run (lower bound {} KiB); one buffer per value would take {} KiB",
        height >> 10,
        bound >> 10,
        naive >> 10
    );
    for (name, _, out, _) in NODES {
        match ctx.offset_of(out) {
            Some(off) => println!(
                "  {out:<2} (written by {name:<5}) at offset {:>5} KiB",
                off >> 10
            ),
            None => {
                println!("  {out:<2} (written by {name:<5}) a declared output: from the I/O arena")
            }
        }
    }
    for (node, (name, _, _, ws)) in NODES.iter().enumerate() {
        if let (true, Some(off)) = (*ws > 0, ctx.workspace_offset(node)) {
            println!("  {name}'s workspace at offset {:>5} KiB", off >> 10);
        }
    }

    // Runs: the first takes the block from the arena, the next reuse it.
    let exec = session.execution_arena();
    let before = exec.stats();
    for r in 0..3 {
        ctx.clear();
        assert_eq!(run(&mut ctx, &x), reference, "planned run {r} = reference");
    }
    ctx.clear();
    let after = exec.stats();
    let (cold, warm) = (
        after.cold_allocations - before.cold_allocations,
        after.warm_allocations - before.warm_allocations,
    );
    println!(
        "3 planned runs: {cold} cold and {warm} warm execution-arena allocations (one block per run); plan cache (hits, misses) {:?}",
        ctx.cache_stats()
    );
    assert!(cold <= 1, "only the first planned run may take new memory");
    assert_eq!(cold + warm, 3, "one block per run");

    // The same graph for the command line.
    let dir = std::env::temp_dir().join(format!("warmarena-plan-graph-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    let file: PathBuf = dir.join("graph.json");
    std::fs::write(&file, graph_json()).expect("write the graph");
    let check = plan_trace(&file, Instant::now(), Duration::from_millis(200)).expect("it plans");
    println!(
        "wrote {} ({} buffers; the command line plans it to {} KiB, lower bound {} KiB)",
        file.display(),
        check.buffers.len(),
        check.solution.placement.height >> 10,
        check.solution.lower_bound >> 10
    );
    println!("draw it:");
    println!(
        "  warmarena plan {} --svg {}",
        file.display(),
        dir.join("plan.svg").display()
    );
    println!("  (from the repository: cargo run --release -- plan ...)");
}
