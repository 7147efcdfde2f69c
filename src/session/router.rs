//! [`Session`]: a validated graph compiled into what each run needs — the
//! arena that backs every (node, output slot), and the values each node's
//! completion frees — plus the arenas themselves, which outlive every run.

use super::context::SessionError;
use super::graph::{Graph, GraphError};
use crate::arena::shared::{ArenaCore, CoreHandle};
use crate::arena::ArenaKind;
use crate::planner::ValueId;
use crate::{ExecutionArena, IoArena};
use core::ptr::NonNull;
use std::collections::HashMap;

/// Index of a node in execution order.
pub type NodeId = usize;
/// A value's index in the session's tables: [`ValueId::index`] of its id.
pub(crate) type ValueIdx = usize;

/// Where a value's memory comes from.
#[derive(Clone)]
pub(crate) enum Target {
    /// Provided by the caller (borrowed or staged).
    Input,
    /// An execution arena.
    Execution(ExecutionArena),
    /// An I/O arena.
    Io(IoArena),
}

impl Target {
    pub(crate) fn kind(&self) -> Option<ArenaKind> {
        match self {
            Target::Input => None,
            Target::Execution(_) => Some(ArenaKind::Execution),
            Target::Io(_) => Some(ArenaKind::Io),
        }
    }

    /// The arena's body behind the slot (`None` for an input).
    #[inline(always)]
    pub(crate) fn handle(&self) -> Option<&CoreHandle> {
        match self {
            Target::Input => None,
            Target::Execution(a) => Some(&a.core),
            Target::Io(a) => Some(&a.core),
        }
    }

    pub(crate) fn core(&self) -> Option<NonNull<ArenaCore>> {
        match self {
            Target::Input => None,
            Target::Execution(a) => Some(a.core.ptr()),
            Target::Io(a) => Some(a.core.ptr()),
        }
    }
}

pub(crate) struct NodeInfo {
    pub name: String,
    pub inputs: Vec<ValueIdx>,
    pub outputs: Vec<ValueIdx>,
    /// The arena body each output slot is routed to (`None`: the slot
    /// names a graph input), so that a kernel's `output` finds it in one
    /// step from the node (`ArenaRun::output`).
    pub routes: Box<[Option<CoreHandle>]>,
    /// Values whose last use is this node: freed by `finish`.
    pub frees: Vec<ValueIdx>,
}

/// A graph compiled for running: each (node, output slot) mapped to its
/// arena before any run, and each intermediate's last use. Sessions share
/// arenas: several sessions may draw from one `ExecutionArena`/`IoArena`
/// pair, and the arenas outlive every run.
///
/// ```
/// use warmarena::session::{Graph, Session};
/// use warmarena::{ArenaKind, ExecutionArena, IoArena};
/// let g = Graph::new().input("x").node("f", &["x"], &["y", "t"]).node("g", &["t"], &["z"]).output("y").output("z");
/// let s = Session::new(&g, ExecutionArena::new(), IoArena::new()).unwrap();
/// let f = s.node_id("f").unwrap();
/// assert_eq!(s.slot_role(f, 0), Some(ArenaKind::Io));
/// assert_eq!(s.slot_role(f, 1), Some(ArenaKind::Execution));
/// ```
pub struct Session {
    pub(crate) exec: ExecutionArena,
    pub(crate) io: IoArena,
    pub(crate) names: Vec<String>,
    pub(crate) by_name: HashMap<String, ValueIdx>,
    pub(crate) nodes: Vec<NodeInfo>,
    pub(crate) targets: Vec<Target>,
    pub(crate) is_output: Vec<bool>,
    pub(crate) is_input: Vec<bool>,
    /// For each value, the last node that reads it (or its producer).
    pub(crate) last_use: Vec<Option<NodeId>>,
}

// Sessions are shared by the threads that run them: each route holds an
// arena handle, which keeps `Session` `Send` and `Sync`.
const _: fn() = || {
    fn shared<T: Send + Sync>() {}
    shared::<Session>();
};

impl core::fmt::Debug for Session {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Session")
            .field("nodes", &self.nodes.len())
            .field("values", &self.names.len())
            .finish()
    }
}

impl Session {
    /// Validates `graph` and records, before any run, the arena of every
    /// (node, output slot): the I/O arena for declared graph outputs, the
    /// execution arena otherwise.
    pub fn new(graph: &Graph, exec: ExecutionArena, io: IoArena) -> Result<Session, GraphError> {
        Self::build(graph, exec, io, &[])
    }

    /// Compiles a subgraph (an If/Loop body, a function) that runs inside
    /// node `parent_node` of this session. Its internal values use `exec`,
    /// its own execution arena; its declared outputs, which become the
    /// parent node's outputs in order, are allocated where the parent
    /// routes that slot — so a value crossing back needs no copy.
    ///
    /// ```
    /// use warmarena::session::{Graph, Session};
    /// use warmarena::{ArenaKind, ExecutionArena, IoArena};
    /// let outer = Graph::new().input("x").node("loop", &["x"], &["y"]).output("y");
    /// let s = Session::new(&outer, ExecutionArena::new(), IoArena::new()).unwrap();
    /// let body = Graph::new().input("xb").node("a", &["xb"], &["t"]).node("b", &["t"], &["yb"]).output("yb");
    /// let child = s.subgraph(s.node_id("loop").unwrap(), &body, ExecutionArena::new()).unwrap();
    /// assert_eq!(child.slot_role(child.node_id("b").unwrap(), 0), Some(ArenaKind::Io));
    /// assert_eq!(child.slot_role(child.node_id("a").unwrap(), 0), Some(ArenaKind::Execution));
    /// ```
    pub fn subgraph(
        &self,
        parent_node: NodeId,
        body: &Graph,
        exec: ExecutionArena,
    ) -> Result<Session, GraphError> {
        let outer: Vec<Target> = self
            .nodes
            .get(parent_node)
            .map(|n| n.outputs.iter().map(|&v| self.targets[v].clone()).collect())
            .unwrap_or_default();
        Self::build(body, exec, self.io.clone(), &outer)
    }

    fn build(
        graph: &Graph,
        exec: ExecutionArena,
        io: IoArena,
        outer: &[Target],
    ) -> Result<Session, GraphError> {
        graph.validate()?;
        let mut names: Vec<String> = Vec::new();
        let mut by_name: HashMap<String, ValueIdx> = HashMap::new();
        let mut id = |n: &str, names: &mut Vec<String>| -> ValueIdx {
            *by_name.entry(n.to_string()).or_insert_with(|| {
                names.push(n.to_string());
                names.len() - 1
            })
        };
        for i in &graph.inputs {
            id(i, &mut names);
        }
        let mut nodes = Vec::with_capacity(graph.nodes.len());
        for n in &graph.nodes {
            let inputs = n.inputs.iter().map(|v| id(v, &mut names)).collect();
            let outputs = n.outputs.iter().map(|v| id(v, &mut names)).collect();
            nodes.push(NodeInfo {
                name: n.name.clone(),
                inputs,
                outputs,
                routes: Box::default(),
                frees: Vec::new(),
            });
        }
        let count = names.len();
        let mut is_output = vec![false; count];
        let mut is_input = vec![false; count];
        for i in &graph.inputs {
            is_input[by_name[i.as_str()]] = true;
        }
        let mut targets: Vec<Target> = (0..count)
            .map(|v| {
                if is_input[v] {
                    Target::Input
                } else {
                    Target::Execution(exec.clone())
                }
            })
            .collect();
        for (k, o) in graph.outputs.iter().enumerate() {
            let v = by_name[o.as_str()];
            is_output[v] = true;
            targets[v] = match outer.get(k) {
                Some(t) => t.clone(),
                None => Target::Io(io.clone()),
            };
        }
        for n in &mut nodes {
            n.routes = n
                .outputs
                .iter()
                .map(|&v| targets[v].handle().cloned())
                .collect();
        }
        let mut last_use: Vec<Option<NodeId>> = vec![None; count];
        for (k, n) in nodes.iter().enumerate() {
            for &v in n.outputs.iter().chain(n.inputs.iter()) {
                last_use[v] = Some(k);
            }
        }
        for v in 0..count {
            if is_output[v] {
                continue;
            }
            if let Some(k) = last_use[v] {
                nodes[k].frees.push(v);
            }
        }
        Ok(Session {
            exec,
            io,
            names,
            by_name,
            nodes,
            targets,
            is_output,
            is_input,
            last_use,
        })
    }

    #[inline]
    fn slot_of(
        &self,
        node: NodeId,
        slot: usize,
        side: fn(&NodeInfo) -> &[ValueIdx],
    ) -> Result<ValueIdx, SessionError> {
        match self.nodes.get(node).and_then(|n| side(n).get(slot)) {
            Some(&v) => Ok(v),
            None => Err(self.slot_error(node, slot)),
        }
    }

    /// Why (`node`, `slot`) names no value; out of line, off the kernels' path.
    #[cold]
    #[inline(never)]
    fn slot_error(&self, node: NodeId, slot: usize) -> SessionError {
        match self.nodes.get(node) {
            None => SessionError::UnknownNode(node),
            Some(n) => SessionError::NoSuchSlot {
                node: n.name.clone(),
                slot,
            },
        }
    }

    /// The arena body output slot `slot` of `node` is routed to; `None`
    /// for no such slot, or a slot that names a graph input.
    #[inline(always)]
    pub(crate) fn output_route(&self, node: NodeId, slot: usize) -> Option<&CoreHandle> {
        self.nodes.get(node)?.routes.get(slot)?.as_ref()
    }

    /// The value written by output slot `slot` of `node`.
    #[inline]
    pub(crate) fn output_value(&self, node: NodeId, slot: usize) -> Result<ValueIdx, SessionError> {
        self.slot_of(node, slot, |n| &n.outputs)
    }

    /// The value read by input slot `slot` of `node`.
    #[inline]
    pub(crate) fn input_value(&self, node: NodeId, slot: usize) -> Result<ValueIdx, SessionError> {
        self.slot_of(node, slot, |n| &n.inputs)
    }

    /// The value called `name`, or `UnknownValue`.
    pub(crate) fn value_named(&self, name: &str) -> Result<ValueIdx, SessionError> {
        self.value_index(name)
            .ok_or_else(|| SessionError::UnknownValue(name.to_string()))
    }

    /// The node called `name`.
    pub fn node_id(&self, name: &str) -> Option<NodeId> {
        self.nodes.iter().position(|n| n.name == name)
    }

    /// The value called `name`: its id is also its id in the planner's
    /// graph of a [`PlannedRun`](super::PlannedRun)
    /// ([`planner_graph`](super::PlannedRun::planner_graph)).
    pub fn value_id(&self, name: &str) -> Option<ValueId> {
        self.value_index(name).map(|v| ValueId(v as u32))
    }

    /// The index of the value called `name` in the session's tables.
    pub(crate) fn value_index(&self, name: &str) -> Option<ValueIdx> {
        self.by_name.get(name).copied()
    }

    /// The arena that backs output slot `slot` of `node` (`None` for a
    /// slot that does not exist).
    pub fn slot_role(&self, node: NodeId, slot: usize) -> Option<ArenaKind> {
        let v = *self.nodes.get(node)?.outputs.get(slot)?;
        self.targets[v].kind()
    }

    /// The last node that uses value `name` (reads it, or produces it if
    /// nothing reads it); `None` for declared outputs, which live until taken.
    pub fn last_use(&self, name: &str) -> Option<NodeId> {
        let v = self.value_index(name)?;
        if self.is_output[v] {
            return None;
        }
        self.last_use[v]
    }

    /// Nodes in execution order.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The session's execution arena.
    pub fn execution_arena(&self) -> &ExecutionArena {
        &self.exec
    }

    /// The session's I/O arena.
    pub fn io_arena(&self) -> &IoArena {
        &self.io
    }
}
