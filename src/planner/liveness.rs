//! When each buffer owner is live.
//!
//! Node `i` runs at time `i`. A value defined by node `d` and last read by
//! node `u` is live over `[d, u + 1)`: during node `u` its inputs and outputs
//! are live together, so a node never writes over its own inputs (unless an
//! in-place hint says it may). A view owns no buffer: its reads count as
//! reads of its root owner, so the owner outlives every view of it. A graph
//! output (or a view that is one) keeps its owner live to the end of the run.

use super::graph::{Def, PlanError, PlanGraph, ValueId, ViewMap};

/// A half-open live range `[start, end)` in node indices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interval {
    /// The node that defines the buffer.
    pub start: usize,
    /// One past the last node that needs it (the node count for graph outputs).
    pub end: usize,
}

/// Result of [`compute_liveness`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Liveness {
    /// For each value: the buffer owner backing it (itself for an owner, the
    /// root for a view), or `None` when the value is not planned (graph
    /// inputs, external values, views of those).
    pub owner: Vec<Option<ValueId>>,
    /// For each value: its live interval when it is a planned buffer owner.
    pub interval: Vec<Option<Interval>>,
    /// For each value: one past the last node that reads it directly or
    /// through a view of it (0 when never read).
    pub last_use: Vec<usize>,
    /// Number of nodes (the end of the run).
    pub num_nodes: usize,
}

impl Liveness {
    /// The planned buffer owners, in value order.
    pub fn owners(&self) -> impl Iterator<Item = (ValueId, Interval)> + '_ {
        self.interval
            .iter()
            .enumerate()
            .filter_map(|(i, iv)| iv.map(|iv| (ValueId(i as u32), iv)))
    }
}

/// Computes every buffer owner's live interval, folding views into their
/// root owner and keeping graph outputs live to the end.
///
/// ```
/// use warmarena::planner::{compute_liveness, PlanGraph, Interval, Node, ValueId, ViewMap};
/// let v = ValueId;
/// // 0 -> [n0] -> 1 -> [n1: view] -> 2 -> [n2] -> 3
/// let g = PlanGraph {
///     num_values: 4,
///     nodes: vec![
///         Node { inputs: vec![v(0)], outputs: vec![v(1)] },
///         Node { inputs: vec![v(1)], outputs: vec![v(2)] },
///         Node { inputs: vec![v(2)], outputs: vec![v(3)] },
///     ],
///     inputs: vec![v(0)],
///     outputs: vec![v(3)],
/// };
/// let mut views = ViewMap::new();
/// views.insert(v(2), v(1));
/// let live = compute_liveness(&g, &views).unwrap();
/// // 1 is read through its view by node 2, so it lives to the end of node 2.
/// assert_eq!(live.interval[1], Some(Interval { start: 0, end: 3 }));
/// assert_eq!(live.interval[2], None); // a view owns no buffer
/// assert_eq!(live.interval[3], Some(Interval { start: 2, end: 3 }));
/// ```
pub fn compute_liveness(graph: &PlanGraph, views: &ViewMap) -> Result<Liveness, PlanError> {
    let def = graph.definitions()?;
    let n = graph.num_values;
    let mut root = vec![ValueId(0); n];
    for (i, r) in root.iter_mut().enumerate() {
        *r = views.root(ValueId(i as u32))?;
    }
    // Every id in the view map first: a chain of views may reach an
    // unknown id through a view that is itself in range.
    for (view, source) in views.iter() {
        for v in [view, source] {
            if v.index() >= n {
                return Err(PlanError::UnknownValue { value: v });
            }
        }
    }
    for (view, _) in views.iter() {
        if def[view.index()] == Def::Input {
            return Err(PlanError::BadView { value: view });
        }
        // A view must not exist before the buffer it aliases.
        if let (Def::Node(dv), Def::Node(ds)) = (def[view.index()], def[root[view.index()].index()])
        {
            if dv < ds {
                return Err(PlanError::NotTopological {
                    value: view,
                    node: dv,
                });
            }
        }
    }
    // A node reads a buffer only after the node that writes it, whether it
    // names the buffer or a view of it (a view no node defines included).
    for (u, node) in graph.nodes.iter().enumerate() {
        for &v in &node.inputs {
            if let Def::Node(d) = def[root[v.index()].index()] {
                if d >= u {
                    return Err(PlanError::NotTopological { value: v, node: u });
                }
            }
        }
    }
    let planned = |v: usize| matches!(def[root[v].index()], Def::Node(_));
    let mut last_use = vec![0usize; n];
    let mut end = vec![0usize; n];
    for (u, node) in graph.nodes.iter().enumerate() {
        for &v in &node.inputs {
            last_use[v.index()] = u + 1;
            let r = root[v.index()].index();
            end[r] = end[r].max(u + 1);
        }
    }
    // A view's own readers keep its source alive: fold view reads upward.
    for (view, _) in views.iter() {
        let r = root[view.index()].index();
        last_use[r] = last_use[r].max(last_use[view.index()]);
    }
    for &v in &graph.outputs {
        let r = root[v.index()].index();
        end[r] = graph.nodes.len();
    }
    let mut owner = vec![None; n];
    let mut interval = vec![None; n];
    for v in 0..n {
        if !planned(v) {
            continue;
        }
        owner[v] = Some(root[v]);
        if root[v].index() == v {
            if let Def::Node(d) = def[v] {
                interval[v] = Some(Interval {
                    start: d,
                    end: end[v].max(d + 1),
                });
            }
        }
    }
    Ok(Liveness {
        owner,
        interval,
        last_use,
        num_nodes: graph.nodes.len(),
    })
}
