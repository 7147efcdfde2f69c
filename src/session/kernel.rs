//! What kernels are written against: [`RunMemory`], the memory of one run
//! as a kernel sees it (its outputs, workspaces and inputs) and the calls
//! it makes on it, implemented by both [`ArenaRun`] (one arena buffer per
//! value) and [`PlannedRun`] (windows of one planned block), so one
//! executor (e.g. `warmarena_net::Net::run`) runs in either mode; and
//! [`OutputBuffer`], the writable bytes it gets back.

use super::context::{ArenaRun, SessionError};
use super::router::NodeId;
#[cfg(doc)]
use super::PlannedBuffer;
#[cfg(doc)]
use super::PlannedRun;
use crate::{Allocation, IoLease};

/// Writable bytes a kernel fills: an [`Allocation`] or a [`PlannedBuffer`].
pub trait OutputBuffer {
    /// The bytes, for writing.
    fn as_mut_slice(&mut self) -> &mut [u8];
}

impl OutputBuffer for Allocation {
    fn as_mut_slice(&mut self) -> &mut [u8] {
        Allocation::as_mut_slice(self)
    }
}

/// The memory of one run, as kernels use it: what an executor passes to
/// each kernel, in either mode: [`ArenaRun`] (one arena buffer per value)
/// or [`PlannedRun`] (windows of one planned block). `'i` is the lifetime
/// of borrowed inputs.
///
/// ```
/// use warmarena::session::{ArenaRun, Graph, OutputBuffer, PlannedRun, RunMemory, Session};
/// use warmarena::{ExecutionArena, IoArena};
/// // y = (x + 1) * 2 with an intermediate `t`, written once for both modes.
/// fn run<'i, C: RunMemory<'i>>(ctx: &mut C, x: &'i [u8]) -> Vec<u8> {
///     ctx.borrow_input("x", x).unwrap();
///     for (node, f) in [(0, (|b: u8| b + 1) as fn(u8) -> u8), (1, |b| b * 2)] {
///         let mut out = ctx.output(node, 0, x.len(), 1).unwrap();
///         for (o, i) in out.as_mut_slice().iter_mut().zip(ctx.input(node, 0).unwrap()) {
///             *o = f(*i);
///         }
///         ctx.commit(node, 0, out).unwrap();
///         ctx.finish(node).unwrap();
///     }
///     ctx.take_output("y").unwrap().as_slice().to_vec()
/// }
/// let g = Graph::new().input("x").node("inc", &["x"], &["t"]).node("dbl", &["t"], &["y"]).output("y");
/// let s = Session::new(&g, ExecutionArena::new(), IoArena::new()).unwrap();
/// let x = [1u8, 2, 3];
/// assert_eq!(run(&mut ArenaRun::new(&s), &x), [4, 6, 8]);
/// let mut planned = PlannedRun::new(&s).unwrap();
/// planned.prepare(|_| Some(3), |_| 0).unwrap();
/// assert_eq!(run(&mut planned, &x), [4, 6, 8]);
/// ```
pub trait RunMemory<'i> {
    /// What [`output`](Self::output) and [`workspace`](Self::workspace) hand out.
    type Buffer: OutputBuffer;
    /// Memory for output slot `slot` of `node`; write it, then
    /// [`commit`](Self::commit) it.
    fn output(
        &mut self,
        node: NodeId,
        slot: usize,
        bytes: usize,
        align: usize,
    ) -> Result<Self::Buffer, SessionError>;
    /// A workspace for `node`, execution memory dropped when the kernel is
    /// done (in planned mode: the node's one planned workspace window).
    fn workspace(
        &mut self,
        node: NodeId,
        bytes: usize,
        align: usize,
    ) -> Result<Self::Buffer, SessionError>;
    /// Stores a written output as the value of (`node`, `slot`).
    fn commit(&mut self, node: NodeId, slot: usize, buf: Self::Buffer) -> Result<(), SessionError>;
    /// The bytes of input slot `slot` of `node`.
    fn input(&self, node: NodeId, slot: usize) -> Result<&[u8], SessionError>;
    /// Marks `node` done: frees every value whose last use was `node`.
    fn finish(&mut self, node: NodeId) -> Result<(), SessionError>;
    /// Uses the caller's bytes as graph input `name` for this run.
    fn borrow_input(&mut self, name: &str, bytes: &'i [u8]) -> Result<(), SessionError>;
    /// Exports declared output `name` as a lease, without copying.
    fn take_output(&mut self, name: &str) -> Result<IoLease, SessionError>;
}

/// [`RunMemory`] under its former name, for bounds written against it
/// (every `RunMemory` is one; implement `RunMemory` instead).
#[deprecated(note = "renamed `RunMemory`: the memory of one run, as kernels use it")]
pub trait KernelContext<'i>: RunMemory<'i> {}

#[allow(deprecated)]
impl<'i, T: RunMemory<'i> + ?Sized> KernelContext<'i> for T {}

impl<'i> RunMemory<'i> for ArenaRun<'_, 'i> {
    type Buffer = Allocation;
    fn output(
        &mut self,
        node: NodeId,
        slot: usize,
        bytes: usize,
        align: usize,
    ) -> Result<Allocation, SessionError> {
        ArenaRun::output(self, node, slot, bytes, align)
    }
    fn workspace(
        &mut self,
        _node: NodeId,
        bytes: usize,
        align: usize,
    ) -> Result<Allocation, SessionError> {
        ArenaRun::temporary(self, bytes, align)
    }
    fn commit(&mut self, node: NodeId, slot: usize, buf: Allocation) -> Result<(), SessionError> {
        ArenaRun::commit(self, node, slot, buf)
    }
    fn input(&self, node: NodeId, slot: usize) -> Result<&[u8], SessionError> {
        ArenaRun::input(self, node, slot)
    }
    fn finish(&mut self, node: NodeId) -> Result<(), SessionError> {
        ArenaRun::finish(self, node)
    }
    fn borrow_input(&mut self, name: &str, bytes: &'i [u8]) -> Result<(), SessionError> {
        ArenaRun::borrow_input(self, name, bytes)
    }
    fn take_output(&mut self, name: &str) -> Result<IoLease, SessionError> {
        ArenaRun::take_output(self, name)
    }
}
