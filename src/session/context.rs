//! [`ArenaRun`]: a run of a session with one arena buffer per value, the
//! state kernels allocate through.

use super::router::{NodeId, Session, ValueIdx};
use crate::arena::ArenaKind;
use crate::handle::ValueMemory;
use crate::{Allocation, ArenaError, IoLease};

/// Why a call on a run ([`ArenaRun`], [`PlannedRun`](super::PlannedRun))
/// was refused. The run is unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionError {
    /// No node with this index.
    UnknownNode(NodeId),
    /// No value with this name.
    UnknownValue(String),
    /// The node has no such output (or input) slot.
    NoSuchSlot {
        /// The node.
        node: String,
        /// The slot asked for.
        slot: usize,
    },
    /// The value is not a graph input (for `borrow_input`/`stage_input`).
    NotAnInput(String),
    /// The value is not a declared graph output (for `take_output`).
    NotAnOutput(String),
    /// The value already holds memory in this run.
    AlreadySet(String),
    /// The value holds no memory (not produced yet, freed, or taken).
    NotSet(String),
    /// A committed buffer is not from the arena that backs the slot.
    WrongArena {
        /// The value.
        value: String,
        /// The arena the slot is routed to.
        expected: Option<ArenaKind>,
    },
    /// The arena refused the allocation.
    Alloc(ArenaError),
    /// Planned mode: the planner refused the session's graph or sizes.
    Plan(crate::planner::PlanError),
    /// Planned mode: the plan did not pass validation (never expected; the
    /// run is refused rather than trusting it).
    InvalidPlan,
    /// Planned mode: no size was given for this planned value.
    NoSize(String),
    /// Planned mode: no plan yet ([`prepare`](crate::session::PlannedRun::prepare) first).
    NotPrepared,
    /// Planned mode: nodes run in execution order; this call named another node.
    OutOfOrder {
        /// The node named.
        node: NodeId,
        /// The node whose turn it is.
        expected: NodeId,
    },
    /// Planned mode: the request does not fit the value's planned window.
    OutsidePlan {
        /// The value (or `node/workspace`).
        value: String,
        /// Bytes planned for it.
        planned: usize,
        /// Bytes asked for.
        asked: usize,
    },
    /// Planned mode: a window handed out for this node is still held (it
    /// must be committed or dropped before the node finishes).
    WindowsOutstanding(String),
    /// Planned mode: the sizes cannot change in the middle of a run.
    RunInProgress,
}

impl core::fmt::Display for SessionError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SessionError::UnknownNode(n) => write!(f, "no node {n}"),
            SessionError::UnknownValue(v) => write!(f, "no value `{v}`"),
            SessionError::NoSuchSlot { node, slot } => {
                write!(f, "node `{node}` has no slot {slot}")
            }
            SessionError::NotAnInput(v) => write!(f, "`{v}` is not a graph input"),
            SessionError::NotAnOutput(v) => write!(f, "`{v}` is not a declared graph output"),
            SessionError::AlreadySet(v) => write!(f, "`{v}` already holds memory in this run"),
            SessionError::NotSet(v) => write!(f, "`{v}` holds no memory"),
            SessionError::WrongArena { value, expected } => {
                write!(
                    f,
                    "buffer for `{value}` is not from its arena ({expected:?})"
                )
            }
            SessionError::Alloc(e) => write!(f, "allocation refused: {e}"),
            SessionError::Plan(e) => write!(f, "planner refused: {e}"),
            SessionError::InvalidPlan => write!(f, "the plan did not validate"),
            SessionError::NoSize(v) => write!(f, "no size for planned value `{v}`"),
            SessionError::NotPrepared => write!(f, "no plan: call prepare first"),
            SessionError::OutOfOrder { node, expected } => {
                write!(f, "node {node} called while node {expected} is running")
            }
            SessionError::OutsidePlan {
                value,
                planned,
                asked,
            } => write!(
                f,
                "`{value}` asks for {asked} bytes, its window holds {planned}"
            ),
            SessionError::WindowsOutstanding(n) => {
                write!(f, "node `{n}` still holds a window")
            }
            SessionError::RunInProgress => write!(f, "a run is in progress"),
        }
    }
}

impl std::error::Error for SessionError {}

impl From<ArenaError> for SessionError {
    fn from(e: ArenaError) -> Self {
        SessionError::Alloc(e)
    }
}

/// A run of a [`Session`] whose every value is its own arena buffer,
/// reusable across runs. `'i` is the lifetime of the caller's borrowed
/// inputs.
///
/// A kernel asks for its outputs by slot ([`output`](Self::output)), never
/// by role, writes them, and hands them back ([`commit`](Self::commit)); it
/// reads inputs with [`input`](Self::input) and takes workspaces with
/// [`temporary`](Self::temporary). [`finish`](Self::finish) frees every
/// value whose last use was that node, so live memory follows the graph's
/// concurrent live set.
///
/// ```
/// use warmarena::session::{Graph, ArenaRun, Session};
/// use warmarena::{ExecutionArena, IoArena};
/// let g = Graph::new().input("x").node("inc", &["x"], &["t"]).node("dbl", &["t"], &["y"]).output("y");
/// let s = Session::new(&g, ExecutionArena::new(), IoArena::new()).unwrap();
/// let x = [1u8, 2, 3];
/// let mut ctx = ArenaRun::new(&s);
/// ctx.borrow_input("x", &x).unwrap();
/// for (node, f) in [(0, (|b: u8| b + 1) as fn(u8) -> u8), (1, |b| b * 2)] {
///     let mut out = ctx.output(node, 0, 3, 1).unwrap();
///     for (o, i) in out.as_mut_slice().iter_mut().zip(ctx.input(node, 0).unwrap()) {
///         *o = f(*i);
///     }
///     ctx.commit(node, 0, out).unwrap();
///     ctx.finish(node).unwrap();
/// }
/// let y = ctx.take_output("y").unwrap();
/// assert_eq!(y.as_slice(), &[4, 6, 8]);
/// ```
pub struct ArenaRun<'s, 'i> {
    session: &'s Session,
    values: Vec<Option<ValueMemory<'i>>>,
}

impl<'s, 'i> ArenaRun<'s, 'i> {
    /// An empty context for runs of `session`, on the calling thread: a
    /// run boundary for the execution heap (it moves to this thread when
    /// no heap buffer is live; see
    /// [`ExecutionArena::begin_run`](crate::ExecutionArena::begin_run)).
    pub fn new(session: &'s Session) -> Self {
        session.exec.core.heap_boundary();
        ArenaRun {
            session,
            values: (0..session.names.len()).map(|_| None).collect(),
        }
    }

    fn name(&self, v: ValueIdx) -> String {
        self.session.names[v].clone()
    }

    /// Memory for output slot `slot` of `node`, from the arena the session
    /// routed that slot to. Write it, then [`commit`](Self::commit) it.
    #[inline(always)]
    pub fn output(
        &self,
        node: NodeId,
        slot: usize,
        bytes: usize,
        align: usize,
    ) -> Result<Allocation, SessionError> {
        // The slot's arena in one step from the node; both arenas allocate
        // alike, so one inlined copy of the hit serves either.
        let Some(core) = self.session.output_route(node, slot) else {
            return Err(self.output_refused(node, slot));
        };
        match Allocation::allocate_on(core, bytes, align) {
            Ok(a) => Ok(a),
            Err(e) => Err(SessionError::Alloc(e)),
        }
    }

    /// Why [`output`](Self::output) found no arena for (`node`, `slot`):
    /// no such slot, or a slot that names a graph input.
    #[cold]
    #[inline(never)]
    fn output_refused(&self, node: NodeId, slot: usize) -> SessionError {
        match self.session.output_value(node, slot) {
            Ok(v) => SessionError::NotAnOutput(self.name(v)),
            Err(e) => e,
        }
    }

    /// A kernel workspace: always execution memory, also inside a node that
    /// writes a declared output. Dropped by the kernel when done.
    #[inline(always)]
    pub fn temporary(&self, bytes: usize, align: usize) -> Result<Allocation, SessionError> {
        Ok(self.session.exec.allocate(bytes, align)?)
    }

    /// Stores a written output as the value of (`node`, `slot`). The buffer
    /// must come from the slot's arena (no migration copy is ever made).
    pub fn commit(
        &mut self,
        node: NodeId,
        slot: usize,
        buf: Allocation,
    ) -> Result<(), SessionError> {
        let v = self.session.output_value(node, slot)?;
        let target = &self.session.targets[v];
        if target.core() != Some(buf.parts().0) {
            return Err(SessionError::WrongArena {
                value: self.name(v),
                expected: target.kind(),
            });
        }
        if self.values[v].is_some() {
            return Err(SessionError::AlreadySet(self.name(v)));
        }
        self.values[v] = Some(ValueMemory::Owned(buf));
        Ok(())
    }

    /// The bytes of input slot `slot` of `node`.
    pub fn input(&self, node: NodeId, slot: usize) -> Result<&[u8], SessionError> {
        let v = self.session.input_value(node, slot)?;
        self.values[v]
            .as_ref()
            .map(ValueMemory::as_slice)
            .ok_or_else(|| SessionError::NotSet(self.name(v)))
    }

    /// The memory behind value `name`, if it holds some.
    pub fn value(&self, name: &str) -> Option<&ValueMemory<'i>> {
        self.values.get(self.session.value_index(name)?)?.as_ref()
    }

    fn input_slot(&self, name: &str) -> Result<ValueIdx, SessionError> {
        let v = self.session.value_named(name)?;
        if !self.session.is_input[v] {
            return Err(SessionError::NotAnInput(name.to_string()));
        }
        if self.values[v].is_some() {
            return Err(SessionError::AlreadySet(name.to_string()));
        }
        Ok(v)
    }

    /// Uses the caller's bytes as graph input `name` for this run: no
    /// allocation, no copy, and the bytes never enter a free list.
    pub fn borrow_input(&mut self, name: &str, bytes: &'i [u8]) -> Result<(), SessionError> {
        let v = self.input_slot(name)?;
        self.values[v] = Some(ValueMemory::Borrowed(bytes));
        Ok(())
    }

    /// Copies the caller's bytes into the I/O arena as graph input `name`
    /// (for inputs that cannot be borrowed: unaligned, non-contiguous, or
    /// not outliving the run). The copy is counted in the arena's stats.
    pub fn stage_input(
        &mut self,
        name: &str,
        bytes: &[u8],
        align: usize,
    ) -> Result<(), SessionError> {
        self.stage_input_with(name, bytes.len(), align, |dst| dst.copy_from_slice(bytes))
    }

    /// Stages graph input `name` as `len` bytes of the I/O arena written by
    /// `convert` (a copy or a conversion). Counted as one payload copy.
    pub fn stage_input_with(
        &mut self,
        name: &str,
        len: usize,
        align: usize,
        convert: impl FnOnce(&mut [u8]),
    ) -> Result<(), SessionError> {
        let v = self.input_slot(name)?;
        let mut buf = self.session.io.allocate(len, align)?;
        convert(buf.as_mut_slice());
        self.session.io.core.note_copy(len);
        self.values[v] = Some(ValueMemory::Owned(buf));
        Ok(())
    }

    /// Marks `node` done: frees every value whose last use was `node`.
    pub fn finish(&mut self, node: NodeId) -> Result<(), SessionError> {
        let n = self
            .session
            .nodes
            .get(node)
            .ok_or(SessionError::UnknownNode(node))?;
        for &v in &n.frees {
            self.values[v] = None;
        }
        Ok(())
    }

    /// Exports declared output `name` as a lease, without copying. An
    /// output routed to an execution arena (a subgraph's output that its
    /// parent keeps internal) cannot be leased: use [`take_value`](Self::take_value).
    pub fn take_output(&mut self, name: &str) -> Result<IoLease, SessionError> {
        let v = self.session.value_named(name)?;
        if !self.session.is_output[v] {
            return Err(SessionError::NotAnOutput(name.to_string()));
        }
        match self.values[v].take() {
            Some(ValueMemory::Owned(a)) => match a.into_lease() {
                Ok(l) => Ok(l),
                Err(a) => {
                    self.values[v] = Some(ValueMemory::Owned(a));
                    Err(SessionError::WrongArena {
                        value: name.to_string(),
                        expected: Some(ArenaKind::Io),
                    })
                }
            },
            Some(ValueMemory::Leased(l)) => Ok(l),
            other => {
                self.values[v] = other;
                Err(SessionError::NotSet(name.to_string()))
            }
        }
    }

    /// Moves declared output `name` out as an owned allocation — how a
    /// subgraph's output crosses back to its parent (which commits it to
    /// the parent node's slot, from the same arena: no copy).
    pub fn take_value(&mut self, name: &str) -> Result<Allocation, SessionError> {
        let v = self.session.value_named(name)?;
        if !self.session.is_output[v] {
            return Err(SessionError::NotAnOutput(name.to_string()));
        }
        match self.values[v].take() {
            Some(ValueMemory::Owned(a)) => Ok(a),
            other => {
                self.values[v] = other;
                Err(SessionError::NotSet(name.to_string()))
            }
        }
    }

    /// Drops every value of the run; the arenas keep their retained memory
    /// and exported outputs stay valid. A run boundary for pattern mode
    /// ([`ExecutionArena::begin_run`](crate::ExecutionArena::begin_run) on
    /// the session's execution arena).
    pub fn clear(&mut self) {
        for v in &mut self.values {
            *v = None;
        }
        self.session.exec.begin_run();
    }

    /// Clears the context and reuses it for a run whose borrowed inputs
    /// have another lifetime; the value table is reused in place.
    pub fn recycle<'j>(mut self) -> ArenaRun<'s, 'j> {
        self.clear();
        let session = self.session;
        let values: Vec<Option<ValueMemory<'j>>> = self.values.into_iter().map(|_| None).collect();
        ArenaRun { session, values }
    }

    /// The session this context runs.
    pub fn session(&self) -> &'s Session {
        self.session
    }
}
