//! The atomics the shared-memory code is written against.
//!
//! Normally `std`'s. Under `--cfg loom` (tests/model-check.sh) loom's, wrapped so that the
//! model checker can stop a thread for ever, as a SIGKILL would: a thread given a budget of `n`
//! writes unwinds (without running the panic hook) at its first atomic access after its `n`-th
//! write, and the test catches the unwind at the top of the thread. Every atomic access of the
//! table and the store goes through these types.
//!
//! The stops are placed after each write (a store, a read-modify-write, a compare-and-swap,
//! which may write), not before each access: between two writes a thread only loads, and a load
//! changes nothing another thread can see (it publishes nothing; a SeqCst one can only narrow
//! what the others may read). So a thread stopped after some loads leaves the others nothing
//! that one stopped right after the write before them does not, and checking that stop checks
//! them all.

#[cfg(not(loom))]
pub use std::sync::atomic::{fence, AtomicU64, Ordering};

#[cfg(loom)]
pub use self::model::{fence, AtomicU64, Ordering};

#[cfg(loom)]
pub mod model {
    use std::cell::Cell;
    pub use std::sync::atomic::Ordering;

    // loom's thread-locals: loom runs its threads as coroutines of one OS thread.
    loom::thread_local! {
        /// Writes this thread may still make; `None`: no limit.
        static BUDGET: Cell<Option<u32>> = Cell::new(None);
    }

    /// What a thread stopped by its budget unwinds with.
    pub struct Stopped;

    /// Runs `body` as a process that stops for ever at its first atomic access after `writes`
    /// writes (`None`: never). Returns `None` when it was stopped.
    pub fn run_stopping_after<T>(writes: Option<u32>, body: impl FnOnce() -> T) -> Option<T> {
        BUDGET.with(|budget| budget.set(writes));
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body));
        BUDGET.with(|budget| budget.set(None));
        match outcome {
            Ok(value) => Some(value),
            Err(payload) if payload.is::<Stopped>() => None,
            Err(payload) => std::panic::resume_unwind(payload),
        }
    }

    /// Before any access: a thread whose budget of writes is spent stops here.
    fn step() {
        if BUDGET.with(Cell::get) == Some(0) {
            std::panic::resume_unwind(Box::new(Stopped));
        }
    }

    /// After an access that may write: one write less in the budget.
    fn wrote() {
        BUDGET.with(|budget| budget.set(budget.get().map(|n| n - 1)));
    }

    pub fn fence(order: Ordering) {
        step();
        loom::sync::atomic::fence(order)
    }

    /// loom's `AtomicU64`: a thread may stop before each access (see `step`), and each access
    /// that may write counts against its budget.
    #[derive(Debug)]
    pub struct AtomicU64(loom::sync::atomic::AtomicU64);

    impl AtomicU64 {
        pub fn new(value: u64) -> Self {
            Self(loom::sync::atomic::AtomicU64::new(value))
        }
        pub fn load(&self, order: Ordering) -> u64 {
            step();
            self.0.load(order)
        }
        pub fn store(&self, value: u64, order: Ordering) {
            step();
            self.0.store(value, order);
            wrote();
        }
        pub fn compare_exchange(
            &self,
            current: u64,
            new: u64,
            success: Ordering,
            failure: Ordering,
        ) -> Result<u64, u64> {
            step();
            let result = self.0.compare_exchange(current, new, success, failure);
            wrote();
            result
        }
        pub fn compare_exchange_weak(
            &self,
            current: u64,
            new: u64,
            success: Ordering,
            failure: Ordering,
        ) -> Result<u64, u64> {
            // loom's weak compare-and-swap never fails spuriously; the strong one is the same.
            self.compare_exchange(current, new, success, failure)
        }
        pub fn fetch_add(&self, value: u64, order: Ordering) -> u64 {
            step();
            let previous = self.0.fetch_add(value, order);
            wrote();
            previous
        }
        pub fn fetch_or(&self, value: u64, order: Ordering) -> u64 {
            step();
            let previous = self.0.fetch_or(value, order);
            wrote();
            previous
        }
        pub fn fetch_and(&self, value: u64, order: Ordering) -> u64 {
            step();
            let previous = self.0.fetch_and(value, order);
            wrote();
            previous
        }
        pub fn fetch_sub(&self, value: u64, order: Ordering) -> u64 {
            step();
            let previous = self.0.fetch_sub(value, order);
            wrote();
            previous
        }
    }
}
