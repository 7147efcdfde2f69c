//! Every input a fuzz target (fuzz/, `bash scripts/fuzz.sh`) ever crashed
//! on, as a plain test, so the fix stays fixed without a nightly toolchain.
//! The inputs are also in the seed corpora under fuzz/corpus/<target>/.

use warmarena::planner::{
    compute_liveness, parse_csv, plan, write_csv, Buffer, InPlaceHint, Node, PlanError, PlanGraph,
    PlanOptions, ValueId, ViewMap,
};

/// fuzz/corpus/planner/regress-view-chain-unknown: a view whose own id is
/// in range, aliasing a view whose source is not, made `compute_liveness`
/// index past the end of its table (a panic) instead of answering
/// `UnknownValue`.
#[test]
fn a_view_chain_reaching_an_unknown_value_is_an_error_not_a_panic() {
    let v = ValueId;
    let g = PlanGraph {
        num_values: 10,
        nodes: vec![Node {
            inputs: vec![v(0)],
            outputs: vec![],
        }],
        inputs: vec![],
        outputs: vec![],
    };
    let mut views = ViewMap::new();
    views.insert(v(1), v(8));
    views.insert(v(0), v(8));
    views.insert(v(8), v(12));
    let r = plan(&g, &views, &[], |_| Some(64), &PlanOptions::default());
    assert_eq!(r, Err(PlanError::UnknownValue { value: v(12) }));
}

/// fuzz/corpus/csv/regress-hash-id-*: an id starting with `#` was written
/// first on its line, which the reader then skipped as a comment, so a
/// written solution read back with a buffer missing.
#[test]
fn ids_starting_with_a_hash_survive_a_write_and_read() {
    let inst = parse_csv("size,id,upper,lower,offset\n8,a,3,1,0\n9,#,4,2,16\n").unwrap();
    assert_eq!(inst.ids, ["a", "#"]);
    let text = write_csv(&inst.ids, &inst.buffers, inst.offsets.as_deref().unwrap());
    assert_eq!(parse_csv(&text).unwrap(), inst);
    let ids = ["#x".to_string(), "\0".to_string()];
    let bufs = [Buffer::new(1, 1, 8), Buffer::new(3, 4, 9)];
    let text = write_csv(&ids, &bufs, &[2, 16]);
    let back = parse_csv(&text).unwrap();
    assert_eq!(
        (back.ids.as_slice(), back.buffers.as_slice()),
        (&ids[..], &bufs[..])
    );
}

/// CI fuzz run of the `planner` target: a node read, through a
/// view no node defines, a buffer the same node writes. Liveness took the
/// read as the buffer's last use, so an in-place hint let another output of
/// that node share the buffer while both were being written: the plan
/// failed its own validation (`Overlap`). A read of a buffer at or before
/// the node that defines it, directly or through any view, is now refused.
#[test]
fn a_node_reading_its_own_output_through_a_view_is_refused() {
    let v = ValueId;
    // 0: graph input; 1, 2: outputs of node 0; 3: a view of 1 nobody defines.
    let g = PlanGraph {
        num_values: 4,
        nodes: vec![
            Node {
                inputs: vec![v(0), v(3)],
                outputs: vec![v(2), v(1)],
            },
            Node {
                inputs: vec![v(2)],
                outputs: vec![],
            },
        ],
        inputs: vec![v(0)],
        outputs: vec![],
    };
    let mut views = ViewMap::new();
    views.insert(v(3), v(1));
    let hints = [InPlaceHint {
        node: 0,
        output: 0,
        input: 1,
    }];
    let r = plan(&g, &views, &hints, |_| Some(64), &PlanOptions::default());
    assert_eq!(
        r,
        Err(PlanError::NotTopological {
            value: v(3),
            node: 0
        })
    );
    assert!(compute_liveness(&g, &views).is_err());
}

/// fuzz/corpus/planner/regress-sizes-summing-to-usize-max: two buffers live
/// together whose sizes summed to exactly `usize::MAX` were accepted, and
/// the skyline placed both at offset 0. No plan taller than `isize::MAX`
/// can be allocated, so such inputs are now `Overflow`; just below, the
/// plan validates.
#[test]
fn sizes_summing_past_isize_max_are_an_overflow_and_just_below_plan_validly() {
    use warmarena::planner::{check_buffers, plan_intervals, validate_placement, IntervalError};
    let opts = PlanOptions::default().alignment(1);
    let big = usize::MAX - 65280;
    let bufs = [Buffer::new(126, 252, 65280), Buffer::new(126, 252, big)];
    assert_eq!(check_buffers(&bufs), Err(IntervalError::Overflow));
    assert!(plan_intervals(&bufs, &opts).is_err());
    let big = isize::MAX as usize - 65280;
    let bufs = [Buffer::new(126, 252, 65280), Buffer::new(126, 252, big)];
    let sol = plan_intervals(&bufs, &opts).expect("fits isize::MAX");
    assert_eq!(validate_placement(&bufs, &sol.placement, 1), Ok(()));
    assert_eq!(sol.placement.height, isize::MAX as usize);
}
