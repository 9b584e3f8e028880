//! The fleet sidecar's parts, below its daemon (`main.rs`): its settings, its connection to
//! Redis, the MessagePack its script speaks, the protocol of a shard call, and the sync. A library
//! so that the fleet's simulation (`crates/sim`) runs the very sync the sidecar runs.

pub mod config;
pub mod link;
pub mod man;
pub mod packed;
pub mod protocol;
pub mod sync;
