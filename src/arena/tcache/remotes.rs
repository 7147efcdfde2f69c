//! The arena's remote frees, one stack per small class.
//!
//! A buffer freed on a thread whose cache did not hand it out waits on a
//! remote stack (`remote.rs`) until a thread takes it back. There used to
//! be one stack for the whole arena. With one consumer freeing what two
//! producers allocated, the producer whose bin ran empty took every class's
//! buffers at once, paid a miss on each link, kept what its bins had room
//! for and sent the rest (half of all buffers, measured) back to the arena
//! under its lock, where the other producer's next refill found them: two
//! walks and two locks for a buffer that one walk should have served, and
//! mimalloc's time per buffer was half ours.
//!
//! Now each small class has its own stack, on its own line. A thread whose
//! bin of class `c` ran empty takes only class `c`'s stack: buffers it will
//! hand out next, about as many as the other threads freed since the last
//! take, which is about what its bin has room for. What mimalloc gets from
//! a page owned by one thread, this gets from the class the thread asks for.
//!
//! A lock holder still sees every remote free before it works (the promise
//! `remote.rs` states). So that it need not read every class's line to find
//! them, a flag word says which stacks may hold buffers: the push that finds
//! its stack empty sets the class's bit (after its own compare-exchange, with
//! release), and whoever takes a stack clears the bit first (with acquire).
//! A set bit may stand over an empty stack (a take raced the push that set
//! it: the next lock holder finds nothing); a stack that holds buffers always
//! has its bit set once the push that made it non-empty has returned. The
//! loom model below checks both, and that every buffer comes back once.

use super::remote::{Pushed, Remote};
use super::SMALL_CLASSES;
#[cfg(not(loom))]
use core::sync::atomic::{AtomicU64, Ordering};
#[cfg(loom)]
use loom::sync::atomic::{AtomicU64, Ordering};

/// Flag words: one bit per small class.
const WORDS: usize = SMALL_CLASSES.div_ceil(64);

/// A value on a cache line of its own: the stacks are written by the
/// freeing threads, one class each, and false sharing between two classes'
/// stacks would bring back the shared line this file removes.
#[derive(Debug, Default)]
#[repr(align(64))]
struct Line<T>(T);

/// Word and bit of class `c`'s flag.
#[inline(always)]
const fn flag_of(c: usize) -> (usize, u64) {
    (c / 64, 1 << (c % 64))
}

/// The arena's remote stacks, one per small class, and their flags.
#[derive(Debug)]
pub(crate) struct Remotes {
    /// Bit `c % 64` of word `c / 64`: class `c`'s stack may hold buffers.
    flags: Line<[AtomicU64; WORDS]>,
    stacks: [Line<Remote>; SMALL_CLASSES],
}

impl Default for Remotes {
    fn default() -> Self {
        Remotes {
            flags: Line(core::array::from_fn(|_| AtomicU64::new(0))),
            stacks: core::array::from_fn(|_| Line::default()),
        }
    }
}

impl Remotes {
    /// Pushes the buffer at `addr`, of small class `c`, onto its class's
    /// stack, `link` writing its successor into it as [`Remote::push`]
    /// says; `false`, with nothing pushed, when the stacks are closed (or
    /// `c` is not a small class: never, the caller found it from the
    /// buffer).
    #[inline]
    pub(crate) fn push(&self, c: usize, addr: usize, link: impl FnMut(usize)) -> bool {
        let Some(stack) = self.stacks.get(c) else {
            return false;
        };
        match stack.0.push(addr, link) {
            Pushed::Onto => true,
            Pushed::First => {
                self.flag(c);
                true
            }
            Pushed::Refused => false,
        }
    }

    /// Sets class `c`'s bit after a push (or a put-back) onto its empty
    /// stack. Release: a lock holder whose swap of the word reads this bit
    /// (acquire) then finds the push on the stack.
    #[inline(always)]
    fn flag(&self, c: usize) {
        let (w, bit) = flag_of(c);
        self.flags.0[w].fetch_or(bit, Ordering::Release);
    }

    /// Whether any stack may hold buffers (the flag words, relaxed: one
    /// line, read at every lock acquisition).
    #[inline(always)]
    pub(crate) fn pending(&self) -> bool {
        self.flags.0.iter().any(|w| w.load(Ordering::Relaxed) != 0)
    }

    /// Whether class `c`'s stack holds buffers (one relaxed load of its
    /// line).
    #[inline(always)]
    pub(crate) fn waiting(&self, c: usize) -> bool {
        self.stacks.get(c).is_some_and(|s| s.0.pending())
    }

    /// Without the arena's lock: class `c`'s buffers, as
    /// [`Remote::take_shared`] returns them (0: none, or closed). The
    /// caller operates on the arena through a handle, as there.
    pub(crate) fn take_class(&self, c: usize) -> usize {
        let Some(stack) = self.stacks.get(c) else {
            return 0;
        };
        let (w, bit) = flag_of(c);
        let word = &self.flags.0[w];
        // Cleared before the take (a later push onto the emptied stack sets
        // it again); acquire pairs with the release of the push that set
        // it, so that push is on the stack for the take below. A bit seen
        // clear is left alone: a set that this load missed stays set, over
        // a stack this take may empty, which costs the next lock holder one
        // swap that finds nothing; the flag line is not written on every
        // take.
        if word.load(Ordering::Relaxed) & bit != 0 {
            word.fetch_and(!bit, Ordering::AcqRel);
        }
        stack.0.take_shared()
    }

    /// Without the arena's lock: puts the chain at `chain` (class `c`'s
    /// buffers, newest first, from [`Remotes::take_class`]) back onto its
    /// class's stack, joining what was pushed since on top of it (`join`
    /// links the newer chain's last buffer to the older one and returns
    /// the newer's head). Returns 0, or the whole chain when the stack is
    /// closed (the caller returns it under the lock).
    pub(crate) fn restore(
        &self,
        c: usize,
        mut chain: usize,
        mut join: impl FnMut(usize, usize) -> usize,
    ) -> usize {
        let Some(stack) = self.stacks.get(c) else {
            return chain;
        };
        loop {
            match stack.0.restore(chain) {
                Pushed::First => {
                    self.flag(c);
                    return 0;
                }
                Pushed::Refused => return chain,
                Pushed::Onto => {
                    let newer = self.take_class(c);
                    if newer != 0 {
                        chain = join(newer, chain);
                    }
                }
            }
        }
    }

    /// Under the arena's lock: every flagged stack's buffers, one chain
    /// per class, each as [`Remote::take`] returns it, passed to `f` with
    /// its class.
    pub(crate) fn take_flagged(&self, mut f: impl FnMut(usize, usize)) {
        for (w, word) in self.flags.0.iter().enumerate() {
            if word.load(Ordering::Relaxed) == 0 {
                continue;
            }
            // Acquire: pairs with each flagging push's release, as in
            // `take_class`.
            let mut m = word.swap(0, Ordering::Acquire);
            while m != 0 {
                let c = w * 64 + m.trailing_zeros() as usize;
                m &= m - 1;
                let head = self.stacks.get(c).map_or(0, |s| s.0.take());
                if head != 0 {
                    f(c, head);
                }
            }
        }
    }

    /// Under the arena's lock, when its last handle goes: every stack's
    /// buffers, as [`Remotes::take_flagged`] passes them, and no pushes
    /// from now on (each stack closes as [`Remote::close`] says).
    pub(crate) fn close(&self, mut f: impl FnMut(usize, usize)) {
        for (c, s) in self.stacks.iter().enumerate() {
            let head = s.0.close();
            if head != 0 {
                f(c, head);
            }
        }
        for w in &self.flags.0 {
            w.store(0, Ordering::Relaxed);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::remote::link;
    use super::*;

    #[repr(C, align(16))]
    struct Buffers([[u64; 2]; 8]);

    fn push(r: &Remotes, c: usize, a: usize) -> bool {
        // SAFETY: a test buffer of 16 bytes, 16-aligned, ours to write.
        r.push(c, a, |next| unsafe { link::write(a, next, 0) })
    }

    fn count(mut head: usize) -> usize {
        let mut n = 0;
        while head != 0 {
            // SAFETY: a chain of test buffers written by `push`.
            head = unsafe { link::read(head) }.0;
            n += 1;
        }
        n
    }

    #[test]
    fn each_class_is_taken_on_its_own_and_its_flag_follows_its_stack() {
        let mut b = Buffers([[0; 2]; 8]);
        let base = b.0.as_mut_ptr() as usize;
        let a = |k: usize| base + 16 * k;
        let r = Remotes::default();
        let last = SMALL_CLASSES - 1;
        assert!(!r.pending());
        assert!(push(&r, 3, a(0)) && push(&r, 3, a(1)) && push(&r, last, a(2)));
        assert!(r.pending() && r.waiting(3) && r.waiting(last) && !r.waiting(4));
        assert_eq!(count(r.take_class(3)), 2, "class 3 only");
        assert!(!r.waiting(3) && r.waiting(last));
        assert!(
            r.pending(),
            "the last class's bit (second word) is still set"
        );
        let mut chains = Vec::new();
        r.take_flagged(|c, h| chains.push((c, count(h))));
        assert_eq!(
            chains,
            vec![(last, 1)],
            "the last class's chain, with its class"
        );
        assert!(!r.pending(), "every taken stack's bit is clear");
        assert!(!push(&r, SMALL_CLASSES, a(3)), "not a small class");
        assert!(push(&r, 0, a(4)));
        let mut closed = 0;
        r.close(|c, h| {
            assert_eq!(c, 0);
            closed += count(h)
        });
        assert_eq!(closed, 1);
        assert!(!push(&r, 0, a(5)), "closed: the free goes through the lock");
        assert!(!r.pending());
        assert_eq!(r.take_class(0), 0);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::super::remote::loom_tests::walk;
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    /// Three buffers' links (addresses 16, 32, 48).
    type Links = super::super::remote::loom_tests::Links<3>;

    fn links() -> Arc<Links> {
        Arc::new(Links::new())
    }

    fn push(r: &Remotes, l: &Links, c: usize, a: usize) -> bool {
        // SAFETY (model): the buffer is this thread's until pushed.
        r.push(c, a, |next| {
            l.0[a / 16 - 1].with_mut(|p| unsafe { *p = next })
        })
    }

    /// A thread frees two buffers of one class while a second takes that
    /// class's stack without the lock and the lock holder takes what is
    /// flagged: once all are done, whatever is still on the stack is
    /// flagged (no buffer hides from the next lock holder), and every
    /// buffer comes back exactly once.
    #[test]
    fn loom_a_stack_that_holds_buffers_is_flagged_and_each_comes_back_once() {
        crate::sync::loom_model(3, || {
            let r = Arc::new(Remotes::default());
            let links = links();
            let pusher = {
                let (r, l) = (Arc::clone(&r), Arc::clone(&links));
                thread::spawn(move || {
                    for a in [16, 32] {
                        assert!(push(&r, &l, 5, a), "nobody closes in this model");
                    }
                })
            };
            let collector = {
                let (r, l) = (Arc::clone(&r), Arc::clone(&links));
                thread::spawn(move || walk(&l, r.take_class(5)))
            };
            let mut back = 0;
            r.take_flagged(|_, h| back += walk(&links, h));
            pusher.join().unwrap();
            back += collector.join().unwrap();
            if r.waiting(5) {
                assert!(r.pending(), "a stack holding buffers is flagged");
            }
            r.take_flagged(|_, h| back += walk(&links, h));
            assert_eq!(back, 2);
            assert!(!r.waiting(5));
        });
    }

    /// A thread collects a class's stack, keeps the newest buffer and puts
    /// the older back (`collect.rs`) while another frees onto the stack and
    /// the lock holder takes what is flagged: every buffer comes back
    /// exactly once, the put-back joins what was pushed meanwhile without
    /// losing it, and a stack left holding buffers is flagged.
    #[test]
    fn loom_a_put_back_chain_joins_new_pushes_and_nothing_is_lost() {
        crate::sync::loom_model(3, || {
            let r = Arc::new(Remotes::default());
            let links = links();
            // Two older buffers wait: 32 on top of 48.
            assert!(push(&r, &links, 7, 48) && push(&r, &links, 7, 32));
            let pusher = {
                let (r, l) = (Arc::clone(&r), Arc::clone(&links));
                thread::spawn(move || assert!(push(&r, &l, 7, 16)))
            };
            let collector = {
                let (r, l) = (Arc::clone(&r), Arc::clone(&links));
                thread::spawn(move || {
                    let head = r.take_class(7);
                    if head == 0 {
                        return 0;
                    }
                    // SAFETY (model): taken after the pushes' release.
                    let older = l.0[head / 16 - 1].with(|p| unsafe { *p });
                    if older != 0 {
                        let left = r.restore(7, older, |newer, older| {
                            let mut last = newer;
                            loop {
                                // SAFETY (model): as above.
                                let next = l.0[last / 16 - 1].with(|p| unsafe { *p });
                                if next == 0 {
                                    break;
                                }
                                last = next;
                            }
                            // SAFETY (model): the collector's to link.
                            l.0[last / 16 - 1].with_mut(|p| unsafe { *p = older });
                            newer
                        });
                        assert_eq!(left, 0, "open: put back");
                    }
                    1
                })
            };
            let mut back = 0;
            r.take_flagged(|_, h| back += walk(&links, h));
            pusher.join().unwrap();
            back += collector.join().unwrap();
            if r.waiting(7) {
                assert!(r.pending(), "a stack holding buffers is flagged");
            }
            r.close(|_, h| back += walk(&links, h));
            assert_eq!(back, 3);
        });
    }
}
