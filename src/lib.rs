//! ganesha_shm: a PHP extension giving the Ganesha circuit breaker a sliding-time-window
//! storage adapter in shared memory, shared by every process forked after PHP starts.
//!
//! The store itself, which knows nothing of PHP, is the crate `ganesha_shm_core` (crates/core/): its
//! layers are re-exported here under their own names. This crate's layers, each using only
//! the ones listed before it and the core's:
//! * [`engine`]: the internals of PHP's engine that only raw pointers and foreign calls reach
//!   (call frames, objects' properties, handlers, the module's life), behind a safe API: the
//!   one module of this crate that reaches them;
//! * [`metrics`]: the Prometheus text format, pure;
//! * [`errors`]: the PHP exceptions thrown;
//! * [`context`]: what `setContext()` reads of Ganesha's `Context`;
//! * [`settings`]: the INI settings and their checks;
//! * [`process`]: this process's segment, store and clock;
//! * [`arguments`]: the class's arguments, read as PHP reads an internal function's;
//! * [`adapter`]: the PHP class, and in `adapter::hot` (a file of its own) the handlers of its
//!   methods that every request calls;
//! * [`module`]: what PHP registers, startup, phpinfo.

use ganesha_shm_core::{circuit, fleet, segment, store, table, window};

mod adapter;
mod arguments;
mod context;
mod engine;
mod errors;
mod metrics;
mod module;
mod process;
mod settings;
