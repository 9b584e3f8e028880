//! Switches that turn one of fleet mode's defenses off, for the fleet's simulation alone
//! (`crates/sim`, `bash tests/fleet-sim.sh --mutate NAME`), which must then find a history that
//! breaks one of its invariants: the proof that the simulation would notice the defense missing.
//! They exist only with the feature `mutations`, which neither the extension nor the sidecar
//! users run is built with; without it every defense is on, and asking costs nothing.
//!
//! The defenses that live in the sync's script are switched off by the simulation's own copy of
//! the script, not here.

/// A defense of fleet mode written in Rust.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Defense {
    /// The sidecar dates a reset on Redis's clock, not on its host's.
    ResetClock,
    /// The sidecar dates a reset by this host's monotonic clock, which no step of its clock moves.
    ResetMonotonic,
    /// The sidecar shares the resets the segment's reset log keeps, made while it was down too.
    ResetLog,
    /// The fleet's counts decide only while the sidecar's last sync is at most two intervals old.
    Staleness,
    /// A reset made on this host hides the fleet's counts of what it covers until the sidecar has
    /// shared it.
    ResetHidesFleet,
    /// The first process to map a copy of a segment takes it as another host (`fleet::take_copy`).
    CopyTaken,
    /// A copy taken hands over the buckets its ring holds past the export too
    /// (`Store::hand_own_counts_to_fleet`).
    CopyHandsAll,
    /// A sidecar that starts stamps the segment's buckets by the figures the segment keeps, not
    /// by its latest one alone (`fleet::ClockFigure`).
    ClockFigures,
}

#[cfg(feature = "mutations")]
static OFF: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Whether `defense` is switched off (never, without the feature `mutations`).
#[inline(always)]
pub fn is_off(defense: Defense) -> bool {
    #[cfg(feature = "mutations")]
    {
        // Relaxed: set once, before the simulation starts any history.
        OFF.load(std::sync::atomic::Ordering::Relaxed) & (1 << defense as u32) != 0
    }
    #[cfg(not(feature = "mutations"))]
    {
        let _ = defense;
        false
    }
}

/// Switches `defense` off for the rest of the process.
#[cfg(feature = "mutations")]
pub fn switch_off(defense: Defense) {
    // Relaxed: see `is_off`.
    OFF.fetch_or(1 << defense as u32, std::sync::atomic::Ordering::Relaxed);
}
