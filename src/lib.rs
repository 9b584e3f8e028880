//! ganesha_shm: a PHP extension giving the Ganesha circuit breaker a sliding-time-window
//! storage adapter in shared memory, shared by every process forked after PHP starts.
//!
//! One layer per file:
//! * [`segment`]: the shared mapping, its header and regions (its `unsafe` maps memory);
//! * [`sync`]: the atomics the shared-memory code uses (std's, or loom's for the model checker);
//! * [`table`]: the lock-free hash table from keys to slots;
//! * [`window`]: bucket arithmetic and word encodings, pure;
//! * [`store`]: Ganesha's storage operations over the tables;
//! * [`circuit`]: what Ganesha would decide for a service, from its figures, pure;
//! * [`metrics`]: the Prometheus text format, pure;
//! * [`errors`]: the PHP exceptions thrown;
//! * [`context`]: what `setContext()` reads of Ganesha's `Context`;
//! * [`settings`]: the INI settings and their checks;
//! * [`process`]: this process's segment, store and clock;
//! * [`adapter`]: the PHP class;
//! * [`module`]: what PHP registers, startup, phpinfo.

// Under loom most of the crate is left out, so what only it uses is unused there.
#![cfg_attr(loom, allow(dead_code, unused_imports))]

// Under `--cfg loom` (tests/model-check.sh) only the layers the model checker runs are built:
// the shared-memory ones work on loom's atomics, which a real mapping cannot hold.
#[cfg(not(loom))]
mod adapter;
mod circuit;
#[cfg(not(loom))]
mod context;
#[cfg(not(loom))]
mod errors;
#[cfg(loom)]
mod loom_tests;
#[cfg(not(loom))]
mod metrics;
// Model-based (proptest) tests of the store against an in-memory model.
#[cfg(all(test, not(loom)))]
mod model_tests;
#[cfg(not(loom))]
mod module;
#[cfg(not(loom))]
mod process;
#[cfg(not(loom))]
mod segment;
#[cfg(not(loom))]
mod settings;
mod store;
mod sync;
mod table;
mod window;
