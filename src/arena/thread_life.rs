//! Whether a thread has exited, for whoever kept its flag: the execution
//! heap keeps its thread's (`heap_owner.rs`), so that the next thread may
//! take the heap once that one is gone.
//!
//! A thread's flag is made at its first [`Life::current`] (one small
//! allocation a thread, not an arena) and cleared by a thread-local
//! destructor when the thread exits. Thread-local addresses, which tell
//! live threads apart (`heap::thread_token`), are reused by later threads,
//! so they cannot say whether a thread is gone; a shared flag can.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// One thread's life flag, shared.
#[derive(Debug, Clone)]
pub(crate) struct Life(Arc<AtomicBool>);

/// The thread-local owner of the flag: clears it on the way out.
struct Owner(Life);

impl Drop for Owner {
    fn drop(&mut self) {
        // Release: whatever the thread did before exiting comes before a
        // reader that sees the flag cleared.
        (self.0).0.store(false, Ordering::Release);
    }
}

std::thread_local! {
    static OWNER: Owner = Owner(Life(Arc::new(AtomicBool::new(true))));
}

impl Life {
    /// The calling thread's flag; `None` while the thread is exiting (its
    /// thread-locals already gone) or if it cannot be made.
    pub(crate) fn current() -> Option<Life> {
        OWNER.try_with(|o| o.0.clone()).ok()
    }

    /// Whether the flag's thread has not exited yet.
    pub(crate) fn alive(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::Life;

    #[test]
    fn a_flag_is_cleared_when_its_thread_exits_and_not_before() {
        let me = Life::current().unwrap();
        assert!(me.alive());
        let (tx, rx) = std::sync::mpsc::channel();
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            tx.send(Life::current().unwrap()).unwrap();
            wait.recv().unwrap();
        });
        let other = rx.recv().unwrap();
        assert!(other.alive(), "its thread still runs");
        go.send(()).unwrap();
        // A native join: the thread's destructors have run.
        t.join().unwrap();
        assert!(!other.alive());
        assert!(me.alive());
    }
}
