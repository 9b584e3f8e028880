//! What the simulated fleet counted, as the simulation knows it (every event, every reset, every
//! half-open trial granted), and the invariants a host's view is judged by against it.
//!
//! A host's clock and the counts' stamps are known only within a few seconds, and a reset takes
//! whole buckets (the bucket it fell in goes with it), so each event is judged in three ways for
//! each reset of its service: cut (its bucket began before the reset by more than the slack),
//! kept (its bucket began after it by more than the slack), or either. A view may hold at most the
//! events counted but those its own host's resets cut (invariant i: nothing counted twice, and a
//! reset admits requests at once where it was made); once faults stop, at most the events that
//! may be kept by every reset (iii: a reset never undone) and at least the events surely kept
//! that a live segment still holds (ii, and iii: an event after a reset never hidden).

use std::collections::{BTreeMap, BTreeSet};

/// How far a host's judgement of when a bucket began may be from the truth: its clock's figure
/// moves only past a second, and a clock read is late by a round trip.
const SLACK_MS: i64 = 2_000;

/// The three counters, in the sidecar's `--suffixes` order.
pub const COUNTERS: [&str; 3] = ["success", "failure", "rejection"];

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verdict {
    Kept,
    Either,
    Cut,
}

pub struct Event {
    pub service: String,
    pub counter: usize,
    /// When the bucket it was counted in began, on the simulation's (Redis's) clock.
    pub bucket_began_ms: i64,
    /// How every reset made so far judges it.
    pub verdict: Verdict,
    /// The hosts a reset of which cut it.
    pub cut_by: BTreeSet<usize>,
}

/// A half-open trial granted.
pub struct Grant {
    pub at_ms: u64,
    pub host: usize,
    pub service: String,
    /// Whether the host's view of the fleet was fresh when it was granted.
    pub fresh: bool,
}

#[derive(Default)]
pub struct Truth {
    pub events: Vec<Event>,
    pub grants: Vec<Grant>,
    /// By service and counter: the events no reset cut.
    kept: BTreeMap<(String, usize), u64>,
    /// By host, service and counter: the events that host's resets cut (and no earlier one of it).
    cut_by_host: BTreeMap<(usize, String, usize), u64>,
    /// Every event counted, by service and counter.
    counted: BTreeMap<(String, usize), u64>,
}

impl Truth {
    /// An event counted; its id.
    pub fn count(&mut self, service: &str, counter: usize, bucket_began_ms: i64) -> usize {
        *self.kept.entry((service.to_string(), counter)).or_default() += 1;
        *self.counted.entry((service.to_string(), counter)).or_default() += 1;
        self.events.push(Event {
            service: service.to_string(),
            counter,
            bucket_began_ms,
            verdict: Verdict::Kept,
            cut_by: BTreeSet::new(),
        });
        self.events.len() - 1
    }

    /// A reset of `services` at `at_ms` (Redis's clock) made on `host`: each event of them judged
    /// again.
    pub fn reset(&mut self, host: usize, at_ms: i64, services: &BTreeSet<String>) {
        for event in self.events.iter_mut().filter(|event| services.contains(&event.service)) {
            let verdict = if event.bucket_began_ms + SLACK_MS < at_ms {
                Verdict::Cut
            } else if event.bucket_began_ms - SLACK_MS > at_ms {
                Verdict::Kept
            } else {
                Verdict::Either
            };
            let key = (event.service.clone(), event.counter);
            if verdict == Verdict::Cut && event.cut_by.insert(host) {
                *self.cut_by_host.entry((host, key.0.clone(), key.1)).or_default() += 1;
            }
            if verdict > event.verdict {
                if verdict == Verdict::Cut {
                    *self.kept.get_mut(&key).expect("counted") -= 1;
                }
                event.verdict = verdict;
            }
        }
    }

    /// The most host `viewer`'s view of `service`'s `counter` may hold at any time: every event
    /// counted but those its own resets cut (a reset made elsewhere reaches it at its syncs).
    pub fn upper_for(&self, viewer: usize, service: &str, counter: usize) -> u64 {
        let key = (service.to_string(), counter);
        let counted = self.counted.get(&key).copied().unwrap_or(0);
        counted - self.cut_by_host.get(&(viewer, key.0, key.1)).copied().unwrap_or(0)
    }

    /// The most a view may hold once every reset reached every host: the events no reset cut.
    pub fn upper(&self, service: &str, counter: usize) -> u64 {
        self.kept.get(&(service.to_string(), counter)).copied().unwrap_or(0)
    }

    /// The least a view may hold once faults stopped: the events surely kept that one of the
    /// live segments holds (`held`: the ids each holds).
    pub fn lower<'a>(&self, held: impl Iterator<Item = &'a BTreeSet<usize>>) -> BTreeMap<(String, usize), u64> {
        let ids: BTreeSet<usize> = held.flat_map(|ids| ids.iter().copied()).collect();
        let mut lower = BTreeMap::new();
        for id in ids {
            let event = &self.events[id];
            if event.verdict == Verdict::Kept {
                *lower.entry((event.service.clone(), event.counter)).or_default() += 1;
            }
        }
        lower
    }

    /// Every service counted, by name.
    pub fn services(&self) -> BTreeSet<&str> {
        self.counted.keys().map(|(service, _)| service.as_str()).collect()
    }
}
