//! ganesha_shm_core: the circuit store of ganesha-shm, in shared memory, without PHP. The PHP
//! extension (the crate at the repository's root) and the fleet sidecar (`crates/fleet/`) both build
//! on it.
//!
//! One layer per file, each using only the ones listed before it:
//! * [`sync`]: the atomics the shared-memory code uses (std's, or loom's for the model checker);
//! * [`defense`]: fleet mode's defenses the fleet's simulation may switch off (only in its build);
//! * [`segment`]: the shared mapping, its header and regions (its `unsafe` maps memory);
//! * [`window`]: bucket arithmetic and word encodings, pure;
//! * [`memo`]: a process's memo of where it last found keys, in its own memory;
//! * [`table`]: the lock-free hash table from keys to slots;
//! * [`circuit`]: what Ganesha would decide for a service, from its figures, pure;
//! * [`fleet_only`]: fleet mode's region of the services this host sees only through the fleet;
//! * [`reset_log`]: fleet mode's log of the resets this host made, for the sidecar to share;
//! * [`store`]: Ganesha's storage operations over the tables and that region;
//! * [`fleet`]: what the hosts of a fleet share, and how a segment holds it.

// Under loom most of the crate is left out, so what only it uses is unused there.
#![cfg_attr(loom, allow(dead_code, unused_imports))]

pub mod circuit;
pub mod defense;
#[cfg(not(loom))]
pub mod fleet;
#[cfg(loom)]
mod loom_tests;
// Model-based (proptest) tests of the store against an in-memory model.
#[cfg(all(test, not(loom)))]
mod model_tests;
// Under `--cfg loom` (tests/model-check.sh) only the layers the model checker runs are built:
// the shared-memory ones work on loom's atomics, which a real mapping cannot hold.
pub mod fleet_only;
mod memo;
pub mod reset_log;
#[cfg(not(loom))]
pub mod segment;
pub mod store;
pub mod sync;
pub mod table;
pub mod window;
