//! What the planner is told about a model: values, nodes in topological
//! order, graph inputs and outputs, views and in-place hints.

use std::collections::BTreeMap;
use std::fmt;

use super::interval::IntervalError;

/// A value (tensor) of the graph: an index below [`PlanGraph::num_values`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ValueId(pub u32);

impl ValueId {
    /// The index as `usize`.
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

/// One operation: reads `inputs`, writes `outputs`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Node {
    /// Values read.
    pub inputs: Vec<ValueId>,
    /// Values written (defined) by this node.
    pub outputs: Vec<ValueId>,
}

/// The graph as the planner reads it: values by [`ValueId`], nodes in
/// topological order. Values that no node defines and that are not graph
/// inputs (weights, constants) are external: they are read but never
/// planned.
///
/// The graph users build, with named values, is
/// [`session::Graph`](crate::session::Graph); a
/// [`PlannedRun`](crate::session::PlannedRun) makes this form of it
/// ([`planner_graph`](crate::session::PlannedRun::planner_graph)).
///
/// ```
/// use warmarena::planner::{PlanGraph, Node, ValueId};
/// let v = ValueId;
/// let g = PlanGraph {
///     num_values: 3,
///     nodes: vec![
///         Node { inputs: vec![v(0)], outputs: vec![v(1)] },
///         Node { inputs: vec![v(1)], outputs: vec![v(2)] },
///     ],
///     inputs: vec![v(0)],
///     outputs: vec![v(2)],
/// };
/// assert!(g.check().is_ok());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PlanGraph {
    /// Number of values; every [`ValueId`] is below it.
    pub num_values: usize,
    /// Nodes in topological (execution) order.
    pub nodes: Vec<Node>,
    /// Values the caller provides before the run (never planned).
    pub inputs: Vec<ValueId>,
    /// Values handed back after the run: live to the end, never reused.
    pub outputs: Vec<ValueId>,
}

/// Zero-copy views: each view value aliases a source value's buffer and owns
/// none itself. A view of a view aliases the root buffer owner.
///
/// ```
/// use warmarena::planner::{ValueId, ViewMap};
/// let mut views = ViewMap::new();
/// views.insert(ValueId(2), ValueId(1));
/// views.insert(ValueId(3), ValueId(2));
/// assert_eq!(views.root(ValueId(3)), Ok(ValueId(1)));
/// assert!(views.is_view(ValueId(2)));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ViewMap {
    source: BTreeMap<ValueId, ValueId>,
}

impl ViewMap {
    /// An empty map.
    pub fn new() -> Self {
        ViewMap::default()
    }

    /// Records that `view` aliases `source`; returns the previous source.
    pub fn insert(&mut self, view: ValueId, source: ValueId) -> Option<ValueId> {
        self.source.insert(view, source)
    }

    /// The value `view` directly aliases, if it is a view.
    pub fn source_of(&self, view: ValueId) -> Option<ValueId> {
        self.source.get(&view).copied()
    }

    /// True when `v` is a view.
    pub fn is_view(&self, v: ValueId) -> bool {
        self.source.contains_key(&v)
    }

    /// The buffer owner behind `v` (itself when it is not a view).
    pub fn root(&self, v: ValueId) -> Result<ValueId, PlanError> {
        let mut cur = v;
        for _ in 0..=self.source.len() {
            match self.source.get(&cur) {
                Some(&s) => cur = s,
                None => return Ok(cur),
            }
        }
        Err(PlanError::ViewCycle { value: v })
    }

    /// All (view, source) pairs.
    pub fn iter(&self) -> impl Iterator<Item = (ValueId, ValueId)> + '_ {
        self.source.iter().map(|(&v, &s)| (v, s))
    }
}

/// A node may write its `output`-th output over its `input`-th input's
/// memory (an elementwise op, say). The planner uses it only when safe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InPlaceHint {
    /// Index of the node in [`PlanGraph::nodes`].
    pub node: usize,
    /// Position in the node's outputs.
    pub output: usize,
    /// Position in the node's inputs.
    pub input: usize,
}

/// Why no plan could be made.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PlanError {
    /// A value id is not below `num_values`.
    UnknownValue {
        /// The id.
        value: ValueId,
    },
    /// A value is defined twice (two nodes, or a node and the graph inputs).
    DefinedTwice {
        /// The value.
        value: ValueId,
    },
    /// A node reads a value that a later node defines.
    NotTopological {
        /// The value read too early.
        value: ValueId,
        /// The node that reads it.
        node: usize,
    },
    /// Views alias each other in a cycle.
    ViewCycle {
        /// A value on the cycle.
        value: ValueId,
    },
    /// A view's source is never defined, or a graph input is a view.
    BadView {
        /// The view.
        value: ValueId,
    },
    /// An in-place hint names a node, input or output that does not exist.
    BadHint {
        /// The hint's position in the list.
        index: usize,
    },
    /// The alignment is zero or not a power of two.
    BadAlignment,
    /// Sizes overflow `usize` once aligned and summed.
    Overflow,
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlanError::UnknownValue { value } => write!(f, "unknown value {}", value.0),
            PlanError::DefinedTwice { value } => write!(f, "value {} is defined twice", value.0),
            PlanError::NotTopological { value, node } => {
                write!(
                    f,
                    "node {node} reads value {} before it is defined",
                    value.0
                )
            }
            PlanError::ViewCycle { value } => write!(f, "views form a cycle through {}", value.0),
            PlanError::BadView { value } => write!(f, "view {} has no defined source", value.0),
            PlanError::BadHint { index } => write!(f, "in-place hint {index} is out of range"),
            PlanError::BadAlignment => write!(f, "alignment must be a power of two"),
            PlanError::Overflow => write!(f, "sizes overflow usize"),
        }
    }
}

impl std::error::Error for PlanError {}

impl From<IntervalError> for PlanError {
    fn from(_: IntervalError) -> Self {
        PlanError::Overflow
    }
}

/// Where a value comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Def {
    /// Not defined in the graph: a weight or constant.
    External,
    /// A graph input.
    Input,
    /// Output of this node.
    Node(usize),
}

impl PlanGraph {
    /// Checks ids, single definitions and topological order; returns where
    /// each value is defined.
    pub(crate) fn definitions(&self) -> Result<Vec<Def>, PlanError> {
        let known = |v: ValueId| {
            if v.index() < self.num_values {
                Ok(v.index())
            } else {
                Err(PlanError::UnknownValue { value: v })
            }
        };
        let mut def = vec![Def::External; self.num_values];
        for &v in &self.inputs {
            let i = known(v)?;
            if def[i] != Def::External {
                return Err(PlanError::DefinedTwice { value: v });
            }
            def[i] = Def::Input;
        }
        for (n, node) in self.nodes.iter().enumerate() {
            for &v in &node.outputs {
                let i = known(v)?;
                if def[i] != Def::External {
                    return Err(PlanError::DefinedTwice { value: v });
                }
                def[i] = Def::Node(n);
            }
        }
        for (n, node) in self.nodes.iter().enumerate() {
            for &v in &node.inputs {
                if let Def::Node(d) = def[known(v)?] {
                    if d >= n {
                        return Err(PlanError::NotTopological { value: v, node: n });
                    }
                }
            }
        }
        for &v in &self.outputs {
            known(v)?;
        }
        Ok(def)
    }

    /// Checks the graph: ids in range, each value defined once, nodes in
    /// topological order.
    pub fn check(&self) -> Result<(), PlanError> {
        self.definitions().map(|_| ())
    }
}
