//! ganesha_shm: a PHP extension giving the Ganesha circuit breaker a sliding-time-window
//! storage adapter in shared memory, shared by every process forked after PHP starts.
//!
//! One layer per file:
//! * [`segment`]: the shared mapping, its header and layout (the only `unsafe` besides logging);
//! * [`table`]: the lock-free hash table from keys to slots;
//! * [`window`]: bucket arithmetic and word encodings, pure;
//! * [`store`]: Ganesha's storage operations over the tables;
//! * [`circuit`]: what Ganesha would decide for a service, from its figures, pure;
//! * [`metrics`]: the Prometheus text format, pure;
//! * [`errors`]: the PHP exceptions thrown;
//! * [`settings`]: the INI settings and their checks;
//! * [`process`]: this process's segment, store and clock;
//! * [`adapter`]: the PHP class;
//! * [`module`]: what PHP registers, startup, phpinfo.

mod adapter;
mod circuit;
mod errors;
mod metrics;
// Model-based (proptest) tests of the store against an in-memory model.
#[cfg(test)]
mod model_tests;
mod module;
mod process;
mod segment;
mod settings;
mod store;
mod table;
mod window;
