//! From a graph to offsets: liveness, in-place reuse, packing, validation.

use super::budget::Budget;
use super::graph::{InPlaceHint, PlanError, PlanGraph, ValueId, ViewMap};
use super::interval::{Buffer, IntervalError};
use super::liveness::{compute_liveness, Interval, Liveness};
use super::pack::{solve, Solution, SolveOptions};
use super::validate::{validate_with_ids, ValidateError};

/// Knobs of [`plan`] and [`plan_intervals`]: start from
/// `PlanOptions::default()` and change them with the builder methods, or
/// assign the public fields of a value you hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PlanOptions {
    /// Every offset is a multiple of this (a power of two); sizes are
    /// rounded up to it. Default 64 (a cache line; enough for SIMD kernels).
    pub alignment: usize,
    /// Packing effort; see [`SolveOptions`].
    pub solve: SolveOptions,
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions {
            alignment: 64,
            solve: SolveOptions::default(),
        }
    }
}

impl PlanOptions {
    /// Sets [`alignment`](PlanOptions::alignment).
    ///
    /// ```
    /// use warmarena::planner::{PlanOptions, SolveOptions};
    /// let o = PlanOptions::default()
    ///     .alignment(16)
    ///     .solve_options(SolveOptions::default().max_nodes(0));
    /// assert_eq!((o.alignment, o.solve.max_nodes), (16, 0));
    /// ```
    pub fn alignment(mut self, bytes: usize) -> Self {
        self.alignment = bytes;
        self
    }

    /// Sets [`solve`](PlanOptions::solve), the packing effort.
    pub fn solve_options(mut self, solve: SolveOptions) -> Self {
        self.solve = solve;
        self
    }
}

/// Index of a slot in [`ActivationPlan::slots`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SlotId(pub u32);

/// One region of the block: the values it backs have disjoint lifetimes
/// (an in-place output takes over at the node where its input dies).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotInfo {
    /// Byte offset in the block (a multiple of the alignment).
    pub offset: usize,
    /// Bytes reserved (the largest aligned size of its values).
    pub size: usize,
    /// When the slot is in use.
    pub live: Interval,
}

/// Where every planned value lives inside one block of `height` bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActivationPlan {
    /// For each value: its slot (views share their root's), or `None` when
    /// not planned (graph inputs, external values).
    pub slot_of: Vec<Option<SlotId>>,
    /// The slots.
    pub slots: Vec<SlotInfo>,
    /// Bytes of the block a run needs.
    pub height: usize,
    /// No plan of these slots is lower.
    pub lower_bound: usize,
    /// Bytes one buffer per value would take.
    pub naive_bytes: usize,
    /// Alignment of every offset.
    pub alignment: usize,
    /// True when `height` is proven minimal for these slots.
    pub optimal: bool,
}

impl ActivationPlan {
    /// Offset of value `v` in the block (a view's is its source's).
    pub fn offset_of(&self, v: ValueId) -> Option<usize> {
        let slot = (*self.slot_of.get(v.index())?)?;
        Some(self.slots[slot.0 as usize].offset)
    }
}

/// Outcome of [`plan`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlanStatus {
    /// Every size is known: here is the plan.
    Ready(ActivationPlan),
    /// Some buffer owners have symbolic sizes: plan again once shapes resolve.
    Deferred {
        /// The owners whose size the oracle did not know.
        unknown: Vec<ValueId>,
    },
}

fn align_up(size: usize, align: usize) -> Result<usize, PlanError> {
    size.checked_add(align - 1)
        .map(|s| s & !(align - 1))
        .ok_or(PlanError::Overflow)
}

/// Packs buffers given directly by live range and size: the entry point for
/// callers that track liveness themselves. Sizes are rounded up to
/// `options.alignment`, so every offset is a multiple of it.
///
/// ```
/// use warmarena::planner::{plan_intervals, Buffer, PlanOptions};
/// let bufs = [Buffer::new(0, 2, 100), Buffer::new(1, 3, 60), Buffer::new(2, 4, 100)];
/// let sol = plan_intervals(&bufs, &PlanOptions::default()).unwrap();
/// assert_eq!(sol.placement.height, 128 + 64); // aligned sizes 128, 64, 128
/// assert!(sol.placement.offsets.iter().all(|o| o % 64 == 0));
/// ```
pub fn plan_intervals(buffers: &[Buffer], options: &PlanOptions) -> Result<Solution, PlanError> {
    let align = options.alignment;
    if align == 0 || !align.is_power_of_two() {
        return Err(PlanError::BadAlignment);
    }
    let aligned = buffers
        .iter()
        .map(|b| {
            Ok(Buffer {
                size: align_up(b.size, align)?,
                ..*b
            })
        })
        .collect::<Result<Vec<_>, PlanError>>()?;
    solve(&aligned, &options.solve, &Budget::nodes(u64::MAX)).map_err(|e: IntervalError| e.into())
}

/// Plans the activations of `graph`: which values share memory and at which
/// offset each lives in one block. `size` gives each value's bytes, `None`
/// while symbolic (then the answer is [`PlanStatus::Deferred`]).
///
/// An in-place hint is taken when the input's buffer dies at that node, is
/// no graph output, is not still read through a view, was not already taken
/// by another output of the node, and is at least as large as the output.
///
/// ```
/// use warmarena::planner::{plan, validate, PlanGraph, InPlaceHint, Node, PlanOptions, PlanStatus, ValueId, ViewMap};
/// let v = ValueId;
/// // x -> relu -> a -> add(a, a) -> b -> neg -> c
/// let g = PlanGraph {
///     num_values: 4,
///     nodes: vec![
///         Node { inputs: vec![v(0)], outputs: vec![v(1)] },
///         Node { inputs: vec![v(1), v(1)], outputs: vec![v(2)] },
///         Node { inputs: vec![v(2)], outputs: vec![v(3)] },
///     ],
///     inputs: vec![v(0)],
///     outputs: vec![v(3)],
/// };
/// let hints = [InPlaceHint { node: 2, output: 0, input: 0 }];
/// let size = |_: ValueId| Some(1000);
/// let PlanStatus::Ready(p) = plan(&g, &ViewMap::new(), &hints, size, &PlanOptions::default()).unwrap() else {
///     unreachable!()
/// };
/// assert_eq!(p.offset_of(v(3)), p.offset_of(v(2))); // neg wrote over b
/// assert_eq!(p.height, 2 * 1024);
/// assert!(validate(&g, &ViewMap::new(), &p, size).is_ok());
/// ```
pub fn plan(
    graph: &PlanGraph,
    views: &ViewMap,
    hints: &[InPlaceHint],
    size: impl Fn(ValueId) -> Option<usize>,
    options: &PlanOptions,
) -> Result<PlanStatus, PlanError> {
    plan_with_budget(graph, views, hints, size, options, &Budget::nodes(u64::MAX))
}

/// [`plan`] with a [`Budget`]: its callback (a wall-clock limit, say) is
/// checked in every phase of the packing, the constructive passes included;
/// liveness and validation are linear and always run.
pub fn plan_with_budget(
    graph: &PlanGraph,
    views: &ViewMap,
    hints: &[InPlaceHint],
    size: impl Fn(ValueId) -> Option<usize>,
    options: &PlanOptions,
    budget: &Budget<'_>,
) -> Result<PlanStatus, PlanError> {
    let slots = match graph_slots(graph, views, hints, &size, options.alignment)? {
        Ok(slots) => slots,
        Err(unknown) => return Ok(PlanStatus::Deferred { unknown }),
    };
    let sol = solve(&slots.bufs, &options.solve, budget)?;
    let plan = slots.into_plan(&sol);
    debug_assert_eq!(validate(graph, views, &plan, &size), Ok(()));
    Ok(PlanStatus::Ready(plan))
}

/// A graph's slots: one buffer per group of values that share memory.
pub(crate) struct Slots {
    /// One buffer per slot: the group's live range and largest aligned size.
    pub(crate) bufs: Vec<Buffer>,
    /// Bytes one buffer per value would take.
    pub(crate) naive_bytes: usize,
    align: usize,
    live: Liveness,
    groups: Groups,
    slot_of_owner: Vec<u32>,
}

/// Liveness, sizes and in-place groups of `graph`: its slots, or the owners
/// whose size is unknown.
pub(crate) fn graph_slots(
    graph: &PlanGraph,
    views: &ViewMap,
    hints: &[InPlaceHint],
    size: &impl Fn(ValueId) -> Option<usize>,
    align: usize,
) -> Result<Result<Slots, Vec<ValueId>>, PlanError> {
    if align == 0 || !align.is_power_of_two() {
        return Err(PlanError::BadAlignment);
    }
    let live = compute_liveness(graph, views)?;
    let owners: Vec<(ValueId, Interval)> = live.owners().collect();
    let mut sizes = vec![0usize; graph.num_values];
    let mut unknown = Vec::new();
    for &(v, _) in &owners {
        match size(v) {
            Some(s) => sizes[v.index()] = align_up(s, align)?,
            None => unknown.push(v),
        }
    }
    if !unknown.is_empty() {
        return Ok(Err(unknown));
    }
    let groups = in_place_groups(graph, &live, hints, &sizes)?;
    // One slot per group, numbered by its first owner.
    let mut slot_of_owner = vec![u32::MAX; graph.num_values];
    let mut slot_bufs: Vec<Buffer> = Vec::new();
    for &(v, iv) in &owners {
        let g = groups.find(v.index());
        if slot_of_owner[g] == u32::MAX {
            slot_of_owner[g] = slot_bufs.len() as u32;
            slot_bufs.push(Buffer::new(iv.start, iv.end, 0));
        }
        let b = &mut slot_bufs[slot_of_owner[g] as usize];
        b.lower = b.lower.min(iv.start);
        b.upper = b.upper.max(iv.end);
        b.size = b.size.max(sizes[v.index()]);
    }
    let naive_bytes = owners
        .iter()
        .try_fold(0usize, |acc, &(v, _)| acc.checked_add(sizes[v.index()]))
        .ok_or(PlanError::Overflow)?;
    Ok(Ok(Slots {
        bufs: slot_bufs,
        naive_bytes,
        align,
        live,
        groups,
        slot_of_owner,
    }))
}

impl Slots {
    /// The plan that puts the slots at `sol`'s offsets.
    pub(crate) fn into_plan(self, sol: &Solution) -> ActivationPlan {
        let slots = self
            .bufs
            .iter()
            .zip(&sol.placement.offsets)
            .map(|(b, &offset)| SlotInfo {
                offset,
                size: b.size,
                live: Interval {
                    start: b.lower,
                    end: b.upper,
                },
            })
            .collect();
        let slot_of = self
            .live
            .owner
            .iter()
            .map(|o| o.map(|r| SlotId(self.slot_of_owner[self.groups.find(r.index())])))
            .collect();
        ActivationPlan {
            slot_of,
            slots,
            height: sol.placement.height,
            lower_bound: sol.lower_bound,
            naive_bytes: self.naive_bytes,
            alignment: self.align,
            optimal: sol.optimal,
        }
    }
}

/// Union-find over values: in-place outputs join their input's group.
struct Groups(Vec<usize>);

impl Groups {
    fn find(&self, mut v: usize) -> usize {
        while self.0[v] != v {
            v = self.0[v];
        }
        v
    }
}

fn in_place_groups(
    graph: &PlanGraph,
    live: &Liveness,
    hints: &[InPlaceHint],
    sizes: &[usize],
) -> Result<Groups, PlanError> {
    let n = graph.num_values;
    let mut groups = Groups((0..n).collect());
    // Per group root: current end, the size it was made with, node it was last taken at.
    let mut end: Vec<usize> = live
        .interval
        .iter()
        .map(|iv| iv.map_or(0, |iv| iv.end))
        .collect();
    let mut taken = vec![usize::MAX; n];
    let mut is_output = vec![false; n];
    for &o in &graph.outputs {
        if let Some(r) = live.owner[o.index()] {
            is_output[r.index()] = true;
        }
    }
    let mut order: Vec<usize> = (0..hints.len()).collect();
    order.sort_by_key(|&k| hints[k].node);
    for k in order {
        let h = hints[k];
        let node = graph
            .nodes
            .get(h.node)
            .ok_or(PlanError::BadHint { index: k })?;
        let (&out, &inp) = match (node.outputs.get(h.output), node.inputs.get(h.input)) {
            (Some(o), Some(i)) => (o, i),
            _ => return Err(PlanError::BadHint { index: k }),
        };
        // The output must own its buffer; the input must be backed by a planned one.
        let (Some(_), Some(r)) = (live.interval[out.index()], live.owner[inp.index()]) else {
            continue;
        };
        let g = groups.find(r.index());
        let fits = sizes[out.index()] <= sizes[g];
        if end[g] == h.node + 1
            && !is_output[r.index()]
            && taken[g] != h.node
            && fits
            && g != out.index()
        {
            groups.0[out.index()] = g;
            end[g] = end[out.index()];
            taken[g] = h.node;
            is_output[g] |= is_output[out.index()];
        }
    }
    Ok(groups)
}

/// Checks a plan against its graph: no two values live at the same time
/// share bytes; every graph output's memory is its own from its definition
/// to the end; each view's source outlives the view; offsets are aligned and
/// below the height; every slot holds its values.
///
/// ```
/// use warmarena::planner::{plan, validate, PlanGraph, Node, PlanOptions, PlanStatus, ValueId, ViewMap};
/// let v = ValueId;
/// let g = PlanGraph {
///     num_values: 3,
///     nodes: vec![Node { inputs: vec![v(0)], outputs: vec![v(1)] }, Node { inputs: vec![v(1)], outputs: vec![v(2)] }],
///     inputs: vec![v(0)],
///     outputs: vec![v(2)],
/// };
/// let size = |_: ValueId| Some(64);
/// let PlanStatus::Ready(mut p) = plan(&g, &ViewMap::new(), &[], size, &PlanOptions::default()).unwrap() else {
///     unreachable!()
/// };
/// assert!(validate(&g, &ViewMap::new(), &p, size).is_ok());
/// p.slots[1].offset = p.slots[0].offset; // both live during node 1
/// assert!(validate(&g, &ViewMap::new(), &p, size).is_err());
/// ```
pub fn validate(
    graph: &PlanGraph,
    views: &ViewMap,
    plan: &ActivationPlan,
    size: impl Fn(ValueId) -> Option<usize>,
) -> Result<(), ValidateError> {
    let live = compute_liveness(graph, views).map_err(|_| ValidateError::LengthMismatch)?;
    if plan.slot_of.len() != graph.num_values {
        return Err(ValidateError::LengthMismatch);
    }
    let slot = |v: usize| {
        plan.slot_of[v]
            .map(|s| s.0 as usize)
            .filter(|&s| s < plan.slots.len())
    };
    // Members of each slot: planned owners, by start.
    let mut members: Vec<Vec<(Interval, usize)>> = vec![Vec::new(); plan.slots.len()];
    for v in 0..graph.num_values {
        let owner = live.owner[v];
        if owner.is_some() != plan.slot_of[v].is_some() {
            return Err(ValidateError::Unplaced { value: v });
        }
        let Some(s) = owner.map(|_| slot(v)) else {
            continue;
        };
        let s = s.ok_or(ValidateError::Unplaced { value: v })?;
        if let Some(iv) = live.interval[v] {
            let need = size(ValueId(v as u32)).ok_or(ValidateError::Unplaced { value: v })?;
            let si = plan.slots[s];
            if need > si.size || iv.start < si.live.start || iv.end > si.live.end {
                return Err(ValidateError::Unplaced { value: v });
            }
            members[s].push((iv, v));
        } else if let Some(r) = live.owner[v] {
            // A view shares its root's slot, and the slot outlives the view's reads.
            if slot(r.index()) != Some(s) {
                return Err(ValidateError::Unplaced { value: v });
            }
            if plan.slots[s].live.end < live.last_use[v] {
                return Err(ValidateError::ViewOutlivesSource { view: v });
            }
        }
    }
    // Values sharing a slot follow each other: the next may start only at
    // the node where the previous dies (in place), and never at the node
    // that wrote the previous one (both would be written at once).
    for m in &mut members {
        m.sort_unstable_by_key(|&(iv, v)| (iv.start, v));
        for w in m.windows(2) {
            if w[1].0.start + 1 < w[0].0.end || w[1].0.start == w[0].0.start {
                return Err(ValidateError::Overlap {
                    a: w[0].1,
                    b: w[1].1,
                });
            }
        }
    }
    for &o in &graph.outputs {
        let Some(s) = slot(o.index()) else { continue };
        let r = live.owner[o.index()].map_or(o.index(), |r| r.index());
        let def = live.interval[r].map_or(0, |iv| iv.start);
        if plan.slots[s].live.end < graph.nodes.len() {
            return Err(ValidateError::ViewOutlivesSource { view: o.index() });
        }
        if let Some(&(_, by)) = members[s].iter().find(|(iv, _)| iv.start > def) {
            return Err(ValidateError::OutputReused {
                output: o.index(),
                by,
            });
        }
    }
    let bufs: Vec<Buffer> = plan
        .slots
        .iter()
        .map(|s| Buffer::new(s.live.start, s.live.end, s.size))
        .collect();
    let offsets: Vec<usize> = plan.slots.iter().map(|s| s.offset).collect();
    // Report overlaps by a value of each slot.
    let first: Vec<usize> = members
        .iter()
        .map(|m| m.first().map_or(usize::MAX, |&(_, v)| v))
        .collect();
    validate_with_ids(&bufs, &offsets, plan.height, plan.alignment, |s| first[s])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planner::graph::Node;

    #[test]
    fn two_outputs_of_one_node_never_share_a_slot() {
        let v = ValueId;
        // Node 0 writes 1 and 2; nothing reads 1 (it dies at node 0), node 1 reads 2.
        let g = PlanGraph {
            num_values: 3,
            nodes: vec![
                Node {
                    inputs: vec![v(0)],
                    outputs: vec![v(1), v(2)],
                },
                Node {
                    inputs: vec![v(2)],
                    outputs: vec![],
                },
            ],
            inputs: vec![v(0)],
            outputs: vec![],
        };
        let size = |_: ValueId| Some(64);
        let PlanStatus::Ready(mut p) =
            plan(&g, &ViewMap::new(), &[], size, &PlanOptions::default()).unwrap()
        else {
            panic!("sizes are known")
        };
        assert_eq!(validate(&g, &ViewMap::new(), &p, size), Ok(()));
        assert_eq!(p.height, 128);
        // One slot for both, as if 2 took over 1 in place at the node that wrote 1.
        p.slot_of[2] = p.slot_of[1];
        let s = p.slot_of[1].unwrap().0 as usize;
        p.slots[s].live = Interval { start: 0, end: 2 };
        assert_eq!(
            validate(&g, &ViewMap::new(), &p, size),
            Err(ValidateError::Overlap { a: 1, b: 2 })
        );
    }

    #[test]
    fn diamond_plan_validates() {
        let v = ValueId;
        // x -> a, x -> b, (a, b) -> c
        let g = PlanGraph {
            num_values: 4,
            nodes: vec![
                Node {
                    inputs: vec![v(0)],
                    outputs: vec![v(1)],
                },
                Node {
                    inputs: vec![v(0)],
                    outputs: vec![v(2)],
                },
                Node {
                    inputs: vec![v(1), v(2)],
                    outputs: vec![v(3)],
                },
            ],
            inputs: vec![v(0)],
            outputs: vec![v(3)],
        };
        let size = |x: ValueId| Some(10 * (x.0 as usize + 1));
        let PlanStatus::Ready(p) =
            plan(&g, &ViewMap::new(), &[], size, &PlanOptions::default()).unwrap()
        else {
            panic!("sizes are known")
        };
        assert_eq!(validate(&g, &ViewMap::new(), &p, size), Ok(()));
        assert_eq!(p.height, 3 * 64);
        assert_eq!(p.offset_of(v(0)), None);
    }
}
