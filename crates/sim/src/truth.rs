//! What the simulated fleet counted, as the simulation knows it (every event, every reset, every
//! half-open trial granted), and the invariants a host's view is judged by against it.
//!
//! A host's clock and the counts' stamps are known only within a few seconds (and, once its clock
//! stepped, a bucket's start only within the step: see `Truth::began`), and a reset takes
//! whole buckets (the bucket it fell in goes with it, on every host that learns of it after it
//! counted there), so each event is judged in three ways for each reset of its service: cut (its
//! bucket began before the reset by more than the slack), kept (its bucket began after it by more
//! than the slack), or either. A reset that may or may not reach a service (`reset()` reaches the
//! services its host knows of), or that may never have left its host (the host left, or its
//! segment was restored from an older copy, before its sidecar synced), makes the events before it
//! either. A view may hold at most the events counted but those its own host's resets cut
//! (invariant i: nothing counted twice, and a reset admits requests at once where it was made);
//! once faults stop, at most the events that every reset may have kept (iii: a reset never
//! undone) and at least the events surely kept that a live segment still holds (ii, and iii: an
//! event after a reset never hidden).

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
    /// When it was counted, and when the bucket it was counted in began, on Redis's clock.
    pub at_ms: i64,
    pub bucket_began_ms: i64,
    /// The host that counted it, and its bucket's start on that host's clock.
    host: usize,
    bucket_local_ms: i64,
    /// When its bucket began on Redis's clock, as its host may judge it: the earliest and the
    /// latest by the figures its clock had since the bucket's first event (see `began`).
    began: (i64, i64),
    /// The resetters a reset of which cut it where it was made.
    cut_here: BTreeSet<usize>,
}

/// A reset as the simulation judges it.
pub struct Reset {
    /// Who made it (`World`'s resetter of the host).
    pub resetter: usize,
    pub at_ms: i64,
    /// The services it takes; `None`: every service, those counted since included (a
    /// `reset()`, which the sidecar expands to the services it knows of, later ones too).
    pub services: Option<BTreeSet<String>>,
    /// Whether it surely takes its services (else it may).
    pub sure: bool,
    /// Whether its host's sidecar synced whole since (it reached Redis).
    pub shared: bool,
    pub void: bool,
}

impl Reset {
    fn covers(&self, service: &str) -> bool {
        self.services.as_ref().is_none_or(|services| services.contains(service))
    }
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
    pub resets: Vec<Reset>,
    pub grants: Vec<Grant>,
    /// By resetter, service and counter: the events its resets cut when it made them.
    cut_by: BTreeMap<(usize, String, usize), u64>,
    /// Every event counted, by service and counter.
    counted: BTreeMap<(String, usize), u64>,
    /// By host, how far its clock was ahead of Redis's, from when (Redis's clock).
    skews: BTreeMap<usize, Vec<(i64, i64)>>,
    /// By host and a bucket's start on its clock, when its first event was counted.
    bucket_first: BTreeMap<(usize, i64), i64>,
}

impl Truth {
    /// An event counted at `at_ms` (Redis's clock) by `host`, whose clock is `skew_ms` ahead of
    /// Redis's, in its bucket that starts at `bucket_local_ms` on its clock; its id.
    pub fn count(&mut self, service: &str, counter: usize, at_ms: i64, host: usize, skew_ms: i64, bucket_local_ms: i64) -> usize {
        *self.counted.entry((service.to_string(), counter)).or_default() += 1;
        self.clock(host, at_ms, skew_ms);
        self.bucket_first.entry((host, bucket_local_ms)).or_insert(at_ms);
        let bucket_began_ms = bucket_local_ms - skew_ms;
        let (cut_here, began) = (BTreeSet::new(), (bucket_began_ms, bucket_began_ms));
        let event = Event { service: service.to_string(), counter, at_ms, bucket_began_ms, host, bucket_local_ms, began, cut_here };
        self.events.push(event);
        let id = self.events.len() - 1;
        self.events[id].began = self.began(&self.events[id]);
        id
    }

    /// `host`'s clock is `skew_ms` ahead of Redis's from `at_ms` (Redis's clock) on.
    pub fn clock(&mut self, host: usize, at_ms: i64, skew_ms: i64) {
        let skews = self.skews.entry(host).or_default();
        match skews.last() {
            None => skews.push((at_ms, skew_ms)),
            Some(&(_, last)) if last != skew_ms => {
                skews.push((at_ms, skew_ms));
                // A step: the buckets of before it may be judged to begin at other times now.
                for event in self.events.iter_mut().filter(|event| event.host == host) {
                    let began = event.bucket_local_ms - skew_ms;
                    event.began = (event.began.0.min(began), event.began.1.max(began));
                }
                self.cut_where_made();
            }
            Some(_) => {}
        }
    }

    /// The events each host's sure resets cut where they were made, at once: they leave that
    /// host's view.
    fn cut_where_made(&mut self) {
        let mut cut_here: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); self.events.len()];
        for reset in self.resets.iter().filter(|reset| reset.sure) {
            for (id, event) in self.events.iter().enumerate() {
                if reset.covers(&event.service) && self.judge(event, reset) == Verdict::Cut {
                    cut_here[id].insert(reset.resetter);
                }
            }
        }
        self.cut_by.clear();
        for (event, cut_here) in self.events.iter_mut().zip(cut_here) {
            for &resetter in &cut_here {
                *self.cut_by.entry((resetter, event.service.clone(), event.counter)).or_default() += 1;
            }
            event.cut_here = cut_here;
        }
    }

    /// When `event`'s bucket began on Redis's clock, as its host may judge it: by its clock's
    /// figure at any time since the bucket's first event. A bucket's start is judged by the figure
    /// its host has when it is judged, and a clock stepped back counts again in a bucket it
    /// counted in before the step: the bucket began at two times.
    fn began(&self, event: &Event) -> (i64, i64) {
        let first = self.bucket_first.get(&(event.host, event.bucket_local_ms)).copied().unwrap_or(event.at_ms);
        let skews = self.skews.get(&event.host).map_or(&[][..], Vec::as_slice);
        let since = skews.iter().rposition(|&(from, _)| from <= first).unwrap_or(0);
        skews[since..].iter().fold((event.bucket_began_ms, event.bucket_began_ms), |(earliest, latest), &(_, skew)| {
            let began = event.bucket_local_ms - skew;
            (earliest.min(began), latest.max(began))
        })
    }

    /// A reset made at `at_ms` (Redis's clock) by `resetter`, which surely takes `services`
    /// (`sure`), or may.
    pub fn reset(&mut self, resetter: usize, at_ms: i64, services: Option<BTreeSet<String>>, sure: bool) {
        self.resets.push(Reset { resetter, at_ms, services, sure, shared: false, void: false });
        self.cut_where_made();
    }

    /// `resetter`'s sidecar synced whole: its resets reached Redis.
    pub fn shared(&mut self, resetter: usize) {
        for reset in self.resets.iter_mut().filter(|reset| reset.resetter == resetter) {
            reset.shared = true;
        }
    }

    /// `resetter`'s resets that did not reach Redis may never: its host left, or its segment
    /// (and the log of them) was restored from an older copy.
    pub fn lost(&mut self, resetter: usize) {
        for reset in self.resets.iter_mut().filter(|reset| reset.resetter == resetter && !reset.shared) {
            reset.void = true;
        }
    }

    /// How every reset judges `event`.
    fn verdict(&self, event: &Event) -> Verdict {
        self.resets
            .iter()
            .filter(|reset| reset.covers(&event.service))
            .map(|reset| match self.judge(event, reset) {
                Verdict::Cut if !reset.sure || reset.void => Verdict::Either,
                verdict => verdict,
            })
            .max()
            .unwrap_or(Verdict::Kept)
    }

    /// The most host `resetter`'s view of `service`'s `counter` may hold at any time: every
    /// event counted but those its own resets cut (one made elsewhere reaches it at its syncs).
    pub fn upper_for(&self, resetter: usize, service: &str, counter: usize) -> u64 {
        let key = (service.to_string(), counter);
        let counted = self.counted.get(&key).copied().unwrap_or(0);
        counted - self.cut_by.get(&(resetter, key.0, key.1)).copied().unwrap_or(0)
    }

    /// By service and counter, the most a view may hold once every reset reached every host:
    /// the events no reset surely cut.
    pub fn upper(&self) -> BTreeMap<(String, usize), u64> {
        let mut upper = BTreeMap::new();
        for event in &self.events {
            if self.verdict(event) != Verdict::Cut {
                *upper.entry((event.service.clone(), event.counter)).or_default() += 1;
            }
        }
        upper
    }

    /// The least a view may hold once faults stopped: the events surely kept that one of the
    /// live segments holds (`held`: the ids each holds). A bucket stamped on Redis's clock by a
    /// host ahead of another may be in the other's future by up to half a bucket: only the events
    /// of buckets that began before `settled_ms` are required.
    pub fn lower<'a>(
        &self,
        held: impl Iterator<Item = &'a BTreeSet<usize>>,
        settled_ms: i64,
    ) -> BTreeMap<(String, usize), u64> {
        let ids: BTreeSet<usize> = held.flat_map(|ids| ids.iter().copied()).collect();
        let mut lower = BTreeMap::new();
        for id in ids {
            let event = &self.events[id];
            if event.bucket_began_ms + SLACK_MS < settled_ms && self.verdict(event) == Verdict::Kept {
                *lower.entry((event.service.clone(), event.counter)).or_default() += 1;
            }
        }
        lower
    }

    /// Every service counted, by name.
    pub fn services(&self) -> BTreeSet<&str> {
        self.counted.keys().map(|(service, _)| service.as_str()).collect()
    }

    /// How the resets judge event `id`, and whose cut it: for a failing seed's history.
    pub fn describe(&self, id: usize) -> String {
        let event = &self.events[id];
        let cut_by: Vec<usize> = self
            .resets
            .iter()
            .filter(|reset| reset.covers(&event.service) && self.judge(event, reset) == Verdict::Cut)
            .map(|reset| reset.resetter)
            .collect();
        format!("{:?}, cut by the resets of {cut_by:?}", self.verdict(event))
    }

    /// How one reset judges an event: cut when its bucket began before the reset (by more than
    /// the slack, however its host judges when it began) and it was counted before it, either
    /// when it was counted after it in a bucket that began before it (a host that learns of the
    /// reset later takes the bucket whole), kept when its bucket began after it.
    fn judge(&self, event: &Event, reset: &Reset) -> Verdict {
        let (earliest, latest) = event.began;
        if earliest - SLACK_MS > reset.at_ms {
            Verdict::Kept
        } else if latest + SLACK_MS < reset.at_ms && event.at_ms < reset.at_ms {
            Verdict::Cut
        } else {
            Verdict::Either
        }
    }
}
