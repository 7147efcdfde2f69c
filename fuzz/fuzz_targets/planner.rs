//! The planner on arbitrary interval sets and arbitrary graphs: every plan it
//! returns validates, and bad input (reversed ranges, overflowing sizes,
//! unknown ids, values defined twice, nodes out of order, view cycles, bad
//! hints, bad alignment) gets an error, never a panic.
#![no_main]

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use warmarena::planner::{
    check_buffers, plan_intervals, plan_with_budget, validate, validate_placement, Budget, Buffer,
    InPlaceHint, Node, PlanGraph, PlanOptions, PlanStatus, SolveOptions, ValueId, ViewMap,
};

warmarena_fuzz::op_counts!(
    COUNTS,
    "planner",
    [
        "intervals",
        "intervals_ok",
        "intervals_err",
        "graphs",
        "graph_ready",
        "graph_deferred",
        "graph_err",
        "views",
        "hints"
    ]
);

#[derive(Arbitrary, Debug)]
struct Interval {
    lower: u8,
    len: i8,
    size: u32,
    huge: bool,
}

#[derive(Arbitrary, Debug)]
struct FuzzNode {
    inputs: Vec<u8>,
    outputs: Vec<u8>,
}

#[derive(Arbitrary, Debug)]
enum Input {
    Intervals {
        bufs: Vec<Interval>,
        align_shift: u8,
        nodes: u16,
    },
    Graph {
        num_values: u8,
        nodes: Vec<FuzzNode>,
        inputs: Vec<u8>,
        outputs: Vec<u8>,
        views: Vec<(u8, u8)>,
        hints: Vec<(u8, u8, u8)>,
        sizes: Vec<Option<u32>>,
        align_shift: u8,
        nodes_budget: u16,
    },
}

fn options(align_shift: u8, nodes: u16) -> PlanOptions {
    // Mostly a valid alignment; now and then 0 or a non-power of two.
    let alignment = match align_shift {
        250 => 0,
        251 => 48,
        s => 1 << (s % 8),
    };
    PlanOptions::default()
        .alignment(alignment)
        .solve_options(SolveOptions::default().max_nodes(u64::from(nodes % 2048)))
}

fuzz_target!(|input: Input| match input {
    Input::Intervals {
        bufs,
        align_shift,
        nodes,
    } => {
        COUNTS.bump(0);
        let bufs: Vec<Buffer> = bufs
            .iter()
            .take(64)
            .map(|b| {
                let upper = (b.lower as isize + b.len as isize).max(0) as usize;
                let size = if b.huge {
                    usize::MAX - b.size as usize
                } else {
                    b.size as usize % (1 << 24)
                };
                Buffer::new(b.lower as usize, upper, size)
            })
            .collect();
        let opts = options(align_shift, nodes);
        match plan_intervals(&bufs, &opts) {
            Ok(sol) => {
                COUNTS.bump(1);
                let align = opts.alignment;
                let aligned: Vec<Buffer> = bufs
                    .iter()
                    .map(|b| Buffer::new(b.lower, b.upper, b.size.div_ceil(align) * align))
                    .collect();
                validate_placement(&aligned, &sol.placement, align).expect("plan validates");
                assert!(sol.placement.height >= sol.lower_bound);
                if sol.optimal {
                    // Optimal claims are checked at least against the bound.
                    assert!(sol.placement.height >= sol.lower_bound);
                }
            }
            Err(_) => {
                COUNTS.bump(2);
                // An error only for bad alignment, reversed ranges or overflow.
                let align = opts.alignment;
                let bad_align = align == 0 || !align.is_power_of_two();
                // Sizes are rounded up to the alignment first: the rounding
                // itself, or the sum of the rounded sizes, may overflow.
                let aligned: Option<Vec<Buffer>> = bufs
                    .iter()
                    .map(|b| {
                        let size = b.size.checked_add(align.max(1) - 1)? & !(align.max(1) - 1);
                        Some(Buffer::new(b.lower, b.upper, size))
                    })
                    .collect();
                let overflow = aligned.is_none_or(|a| check_buffers(&a).is_err());
                assert!(
                    bad_align || overflow || check_buffers(&bufs).is_err(),
                    "a valid interval problem was refused"
                );
            }
        }
    }
    Input::Graph {
        num_values,
        nodes,
        inputs,
        outputs,
        views,
        hints,
        sizes,
        align_shift,
        nodes_budget,
    } => {
        COUNTS.bump(3);
        let n = num_values as usize % 48;
        // Ids up to n + 2 so that some are unknown.
        let id = |x: u8| ValueId(u32::from(x) % (n as u32 + 3));
        let graph = PlanGraph {
            num_values: n,
            nodes: nodes
                .iter()
                .take(40)
                .map(|f| Node {
                    inputs: f.inputs.iter().take(6).map(|&x| id(x)).collect(),
                    outputs: f.outputs.iter().take(4).map(|&x| id(x)).collect(),
                })
                .collect(),
            inputs: inputs.iter().take(6).map(|&x| id(x)).collect(),
            outputs: outputs.iter().take(6).map(|&x| id(x)).collect(),
        };
        let mut vm = ViewMap::new();
        for &(v, s) in views.iter().take(8) {
            COUNTS.bump(7);
            vm.insert(id(v), id(s));
        }
        let hints: Vec<InPlaceHint> = hints
            .iter()
            .take(8)
            .map(|&(node, output, input)| InPlaceHint {
                node: node as usize % (graph.nodes.len() + 2),
                output: output as usize % 5,
                input: input as usize % 7,
            })
            .collect();
        COUNTS.counts[8].fetch_add(hints.len() as u64, std::sync::atomic::Ordering::Relaxed);
        let size = |v: ValueId| -> Option<usize> {
            match sizes.get(v.index()) {
                Some(s) => s.map(|s| s as usize % (1 << 22)),
                None => Some(64 * (v.index() + 1)),
            }
        };
        let opts = options(align_shift, 0);
        let budget = Budget::nodes(u64::from(nodes_budget % 1024));
        match plan_with_budget(&graph, &vm, &hints, size, &opts, &budget) {
            Ok(PlanStatus::Ready(p)) => {
                COUNTS.bump(4);
                if let Err(e) = validate(&graph, &vm, &p, size) {
                    panic!("plan does not validate: {e:?}\n{graph:?}\n{vm:?}\n{hints:?}\n{p:?}");
                }
            }
            Ok(PlanStatus::Deferred { unknown }) => {
                COUNTS.bump(5);
                assert!(!unknown.is_empty());
                assert!(unknown.iter().all(|v| size(*v).is_none()));
            }
            Err(_) => {
                COUNTS.bump(6);
            }
        }
    }
});
