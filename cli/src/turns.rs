//! Turn-taking between threads, for the report's interleaved timing pass:
//! each back end of a case runs on a thread of its own, and exactly one of
//! them runs at a time, in a fixed rotation, so warm run `r` of every back
//! end is timed next to warm run `r` of the others instead of in a block
//! seconds away from theirs.
//!
//! A thread holds its turn from [`Turn::take`] until the [`Turn`] drops,
//! except while it is inside [`Turn::rotate`], which lets every other
//! thread still taking part run one step first. A thread's set-up, its cold
//! run and its clean-up therefore never overlap another thread's timed run.

use std::sync::{Condvar, Mutex, MutexGuard};

/// The rotation shared by the threads of one case.
#[derive(Debug)]
pub struct Turns {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Debug)]
struct State {
    /// The thread whose turn it is.
    current: usize,
    /// Threads still taking part.
    active: Vec<bool>,
}

impl Turns {
    /// A rotation of `n` threads, starting with thread 0.
    ///
    /// ```
    /// use warmarena_cli::turns::{Turn, Turns};
    /// let turns = Turns::new(2);
    /// let order = std::sync::Mutex::new(Vec::new());
    /// std::thread::scope(|s| {
    ///     for k in 0..2 {
    ///         let (turns, order) = (&turns, &order);
    ///         s.spawn(move || {
    ///             let t = Turn::take(turns, k);
    ///             for step in 0..3 {
    ///                 t.rotate();
    ///                 order.lock().unwrap().push((step, k));
    ///             }
    ///         });
    ///     }
    /// });
    /// let order = order.into_inner().unwrap();
    /// assert_eq!(order, [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]);
    /// ```
    pub fn new(n: usize) -> Self {
        Turns {
            state: Mutex::new(State {
                current: 0,
                active: vec![true; n],
            }),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Blocks until it is thread `k`'s turn.
    fn wait_for(&self, k: usize) {
        let mut st = self.lock();
        while st.current != k {
            st = self.changed.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Gives the turn from `k` to the next active thread after it (or back
    /// to `k` when it is the only one), then wakes the waiters.
    fn pass_from(&self, k: usize, st: &mut State) {
        let n = st.active.len();
        if let Some(next) = (1..=n).map(|i| (k + i) % n).find(|&j| st.active[j]) {
            st.current = next;
        }
        self.changed.notify_all();
    }
}

/// Thread `k`'s place in a [`Turns`] rotation; dropping it leaves the
/// rotation (and passes the turn on).
#[derive(Debug)]
pub struct Turn<'a> {
    turns: &'a Turns,
    k: usize,
}

impl<'a> Turn<'a> {
    /// Joins as thread `k` and waits for its first turn.
    pub fn take(turns: &'a Turns, k: usize) -> Self {
        turns.wait_for(k);
        Turn { turns, k }
    }

    /// Lets every other active thread take one turn, then returns with the
    /// turn held again.
    pub fn rotate(&self) {
        {
            let mut st = self.turns.lock();
            self.turns.pass_from(self.k, &mut st);
        }
        self.turns.wait_for(self.k);
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let mut st = self.turns.lock();
        st.active[self.k] = false;
        if st.current == self.k {
            self.turns.pass_from(self.k, &mut st);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Turn, Turns};
    use std::sync::Mutex;

    /// Threads that leave early (an error, a shorter case) drop out of the
    /// rotation without stalling the others, and no two threads ever run
    /// at once.
    #[test]
    fn a_thread_that_leaves_early_does_not_stall_the_rest() {
        let turns = Turns::new(3);
        let steps = [2, 5, 4];
        let order = Mutex::new(Vec::new());
        let inside = Mutex::new(0u32);
        std::thread::scope(|s| {
            for (k, &n) in steps.iter().enumerate() {
                let (turns, order, inside) = (&turns, &order, &inside);
                s.spawn(move || {
                    let t = Turn::take(turns, k);
                    for step in 0..n {
                        t.rotate();
                        *inside.lock().unwrap() += 1;
                        assert_eq!(*inside.lock().unwrap(), 1, "two threads ran at once");
                        order.lock().unwrap().push((step, k));
                        std::thread::yield_now();
                        *inside.lock().unwrap() -= 1;
                    }
                });
            }
        });
        let order = order.into_inner().unwrap();
        let expected: Vec<(usize, usize)> = (0..5)
            .flat_map(|step| (0..3).map(move |k| (step, k)))
            .filter(|&(step, k)| step < steps[k])
            .collect();
        assert_eq!(order, expected);
    }
}
