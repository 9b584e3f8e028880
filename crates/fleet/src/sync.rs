//! One sync of this host's segment with the fleet's Redis, in one round trip once it knows every
//! shard (a shard it publishes whole, at its first sync or after Redis lost it, goes in a round
//! trip of its own; a call Redis refused as late goes again once):
//!
//! 1. for each shard (every one: see the fleet-only region below), the buckets of this host's
//!    counts that changed since the last sync, sent to `sync.lua` (one call per shard, see
//!    `fleet::SHARDS`), which sets this host's counts of each and moves the fleet's sums by the
//!    difference, and returns the sums of the buckets that changed since this host last read
//!    them;
//! 2. beside it, this host's mark in the fleet's set of live hosts, and its name's.
//!
//! Then it writes, for each counter of this host's services, the fleet's sums less what this host
//! published into the segment's fleet ring, and the other services' into the fleet-only region.
//! What a sync costs depends on this host's services and what changed in them, never on how many
//! hosts the fleet has: no host's data is read but the sums.
//!
//! What the sidecar publishes of a bucket only grows: its clock may move so that it reads a
//! bucket no longer (a step back puts it in the future, a step forward out of the window), and a
//! count it can no longer read keeps what was published. A reset of the counter (the segment
//! counts them) is the one thing that lowers it, and the call says so.
//!
//! A reset is shared: a reset made on this host (`reset()`, `resetService()`) is in the
//! segment's reset log (`ResetLog`) with its time, which the call says on Redis's clock, whether
//! or not this host counts the service; Redis keeps the latest of each service, and the call that
//! writes it takes every host's counts of the service in the buckets that began before it (each
//! by that host's clock), and leaves them out of every later call of a host that has not taken it.
//! Every host that reads a reset newer than it knows takes what it counted of the service before
//! it from its segment (`Store::clear_through`: counts, last failure time, status). A marker, not
//! counts set to 0: applied again, or late, or by a host that joins later, it takes nothing
//! counted since.
//!
//! So is the half-open trial: for each service whose circuit rejects requests here, the call
//! sends this host's last failure and whether it wants the trial; Redis keeps the fleet's latest
//! failure and which host holds the trial due after it, on a lease renewed while that host wants
//! it, and the sidecar writes the fleet's failure and this host's grant into the segment
//! (`Store::write_fleet_trial`), where the adapter's claim checks them.
//!
//! A host keeps the fleet's counts in its counters' slots only for the services it counts itself
//! (with events of its own in the buckets its window may still read); those of every other
//! service of the fleet go into the segment's fleet-only region (`FleetOnly`), a region of its
//! own, so that the fleet's data never takes a slot of this host's services: the sync reads every
//! shard, and writes the region, in the window the adapters noted, the services in the most
//! trouble first when they do not all fit.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};

use ganesha_shm_core::defense::{self, Defense};
use ganesha_shm_core::fleet::{self, Bucket, ClockFigure, CLOCK_BOUND_S, CLOCK_MOVED_MS, MAX_COUNT};
use ganesha_shm_core::fleet_only::FleetOnlyEntry;
use ganesha_shm_core::reset_log::NotedReset;
use ganesha_shm_core::segment::Segment;
use ganesha_shm_core::store::{FleetWindow, Store, TableKind};
use redis::{Cmd, Value};

use crate::config::Config;
use crate::link::Link;
use crate::packed::{self, Rows};
use crate::protocol::{self, Grant, Other, Reply, Request, ResetTime, Status, Update};

/// The script every sync runs (see its head for what it takes and gives).
pub const SCRIPT: &str = include_str!("sync.lua");

/// Buckets a bucket may be read for after it started, at the most: the longest window and the
/// two buckets the rings keep beyond it (see `window::Ring`), whatever this host's window.
const LONGEST_READ: u64 = ganesha_shm_core::window::MAX_BUCKETS + 2;

/// Seconds after a service's last rejection here that this host follows the fleet's trial of it:
/// a circuit open for longer rejects at every request it gets.
const TRIAL_FOLLOWED_S: u64 = 10;

/// The longest bucket duration the fleet-only services are read in, in seconds, when no window of
/// this host says (a day: a bucket is a sixtieth of a time window unless the adapter is given
/// one).
const MAX_DURATION_S: u64 = 86_400;

/// How long a process may take to take a copy of the segment as another host (`fleet::take_copy`:
/// a pass over the counters, milliseconds): a claim older is a process's that died doing it, or
/// whoever wrote the segment file's, and this sidecar finishes the taking.
const COPY_TAKEN_WITHIN_MS: u64 = 5_000;

/// A sequence past this is not one this sidecar made (the segment's word was written by
/// someone else): it starts again from 1, and Redis says where to go on from.
const MAX_SEQUENCE: u64 = 1 << 50;

/// What one sync did, for the log and the benchmark.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    pub round_trips: u32,
    /// Buckets sent.
    pub published: usize,
    /// Sums Redis held wrong (not counts, lost, or below a host's count), recounted from every
    /// host's counts.
    pub recounted: usize,
    /// Services synced: those this host counts.
    pub services: usize,
    /// Live hosts in the fleet, this one included.
    pub hosts: usize,
    /// Counters whose fleet ring this sync wrote other hosts' counts into.
    pub written: usize,
    /// Services of the fleet-only region: those this host sees only through the fleet.
    pub fleet_only: usize,
    /// Services of the fleet this host has not counted, and left out of its fleet-only region for
    /// want of room (those in the least trouble).
    pub fleet_only_left_out: usize,
    /// Shards whose key is not a hash (not ganesha-shm's data): their services decide alone.
    pub foreign: Vec<Vec<u8>>,
    /// Keys holding rows that are not counts, with how many were left out.
    pub bad_rows: Vec<(Vec<u8>, u64)>,
    /// Services other hosts count in buckets of another duration: (service, theirs, this host's).
    pub other_durations: Vec<(Vec<u8>, u64, u64)>,
    /// Buckets not shared: stamped further ahead of Redis's clock than the bound.
    pub rejected: u64,
    /// Buckets sent that no window of the fleet reads any more (Redis's clock): not applied.
    pub gone: u64,
    /// Seconds this host's clock is ahead of Redis's (negative: behind).
    pub clock_ahead_s: i64,
    /// Ids of other hosts that synced under this host's name.
    pub namesakes: Vec<String>,
    /// Shards Redis lost since this host published there (evicted, flushed, or a failover to a
    /// replica that missed writes): published again in this sync.
    pub lost_shards: usize,
    /// Calls Redis refused because it had applied one of this host with a later sequence
    /// already: another segment runs under this host's id (a copy of its file, or this file
    /// restored from an older copy).
    pub stale: usize,
    /// The id this host had and the one it took instead, when it found another segment running
    /// under its id.
    pub renewed: Option<(u64, u64)>,
    /// The id the segment had and the one it has, when this sidecar took it as a copy of another
    /// segment (`fleet::take_copy`): the first to map it, or after the process that claimed it
    /// died while it took it.
    pub copy_taken: Option<(u64, u64)>,
    /// Whether another process is taking the segment as a copy: nothing was synced.
    pub copy_being_taken: bool,
    /// Shards Redis could not write (out of memory under `noeviction`), with what it said.
    pub unwritten: Vec<String>,
    /// Counters whose fleet counts the segment refused, with why.
    pub refused: Vec<(Vec<u8>, String)>,
    /// Services another host reset, whose counts before the reset this sync took from the
    /// segment.
    pub resets_taken: Vec<Vec<u8>>,
    /// Whether every shard synced, so that the fleet's counts may decide.
    pub complete: bool,
}

/// By service, its three counts: successes, failures, rejections (in `--suffixes` order).
type Counts = HashMap<Vec<u8>, [u64; 3]>;

/// A service's counts in each bucket of a range, by counter (in `--suffixes` order).
type BucketCounts = [Vec<u64>; 3];

/// What the sidecar keeps of one bucket of a shard.
#[derive(Default)]
struct BucketState {
    /// The fleet's sums, as last read.
    sums: Counts,
    /// This host's counts as Redis holds them: what it published.
    own: Counts,
}

impl BucketState {
    /// What the other hosts counted of `service`'s `counter` here: the fleet's sum less what
    /// this host published.
    fn others(&self, service: &[u8], counter: usize) -> u64 {
        let sum = self.sums.get(service).map_or(0, |counts| counts[counter]);
        let own = self.own.get(service).map_or(0, |counts| counts[counter]);
        sum.saturating_sub(own)
    }
}

/// What the sidecar keeps of a shard.
#[derive(Default)]
struct Shard {
    /// The shard's hash as this host last saw it: its birth ("" for none) and version; `None`
    /// before the first call.
    known: Option<(String, i64)>,
    /// Whether the next call publishes all this host holds and reads every sum: before the
    /// first call, and once Redis lost the shard (or went back to an older copy of it).
    whole: bool,
    /// Whether that call gives the shard a new birth: Redis went back to an older copy of it,
    /// which other hosts may not see (a version past the one they read), so that they too
    /// publish all they hold.
    renew: bool,
    /// The last sequence of this host Redis said it applied in the shard (0 for none, or once
    /// every bucket it published there is gone): Redis holding less tells that it went back.
    applied: u64,
    buckets: BTreeMap<Bucket, BucketState>,
    /// Other bucket durations Redis told of already.
    told: BTreeSet<u64>,
    /// Buckets whose sums held rows that are not counts, or below this host's own: the next
    /// call has them recounted from every host's counts.
    recount: BTreeSet<Bucket>,
    /// Whether a call of this connection has checked the ACL rights.
    checked: bool,
    /// Whether a call of this sidecar had a reply: it read what the shard holds.
    replied: bool,
    /// The version of the shard's resets this host holds (`None`: none).
    resets_known: Option<i64>,
}

impl Shard {
    /// Whether the next call publishes all this host holds, and reads every sum.
    fn whole(&self) -> bool {
        self.whole || self.known.is_none()
    }
}

/// How one call of a shard went.
enum Outcome {
    Synced,
    /// Redis lost the shard, or another host made it anew: publish all, read all.
    Reborn,
    /// A later call of this host was applied already: again, with a later sequence.
    Stale,
    /// Not ours, or not written: no retry this sync.
    Skipped,
}

/// What this host's segment holds now, by shard.
struct Observed {
    /// By shard, bucket and service, this host's counts.
    counts: BTreeMap<u32, BTreeMap<Bucket, Counts>>,
    /// Each service's counters' windows.
    windows: BTreeMap<Vec<u8>, Vec<(u8, FleetWindow)>>,
    /// Buckets not shared: this host's clock is further from Redis's than the bound.
    unshared: u64,
    /// By bucket (Redis's clock), this host's counts of the buckets that began before its id was
    /// renewed (`Segment::fleet_since`): the fleet has them under its old id, so they are neither
    /// published again nor read as other hosts'.
    inherited: HashMap<Bucket, Counts>,
}

/// The fleet's half-open trial of a service whose circuit rejected requests here lately.
#[derive(Debug, Clone)]
struct TrialAsked {
    /// The key Ganesha keeps the service's last failure time under: its failure counter's.
    key: Vec<u8>,
    /// This host's last failure of the service: unix milliseconds on Redis's clock, 0 for none.
    failure_ms: u64,
    /// Whether its circuit rejected a request in the last two syncs or seconds: it takes the
    /// trial when nobody holds it, and keeps it while it goes on.
    wants: bool,
}

/// A reset of the fleet, as a host knows it.
#[derive(Debug, Clone, Copy, Default)]
struct FleetReset {
    /// When it was made: unix milliseconds, Redis's clock.
    at: u64,
}

/// What the sidecar keeps between syncs.
pub struct Syncer {
    config: Config,
    /// This host's id: its segment's (`Segment::fleet_host_id`).
    host_id: u64,
    shards: HashMap<u32, Shard>,
    /// Each counter's resets as last seen (by key).
    resets_seen: HashMap<Vec<u8>, u16>,
    /// Services whose counters were reset here and not yet said so: a mask of the counters, as
    /// the script takes it, and, for a reset made here (not one of the fleet's taken), when (unix
    /// milliseconds, Redis's clock).
    pending_resets: HashMap<Vec<u8>, (u8, Option<u64>)>,
    /// The fleet's latest reset of each service this host knows of, its own included, while a
    /// bucket before it may be read.
    fleet_resets: HashMap<Vec<u8>, FleetReset>,
    /// Resets of other hosts read in this sync, to take from the segment.
    resets_read: Vec<(Vec<u8>, u64)>,
    /// By service, the half-open trials this host asks of the fleet in this sync.
    trials_asked: BTreeMap<Vec<u8>, TrialAsked>,
    /// The fleet's trials read in this sync, to write into the segment: the service, the fleet's
    /// last failure and, when this host holds the trial, until when (unix milliseconds, Redis's
    /// clock).
    trials_read: Vec<(Vec<u8>, u64, Option<u64>)>,
    /// By service, the bucket after the current one when its fleet rings were last written, and
    /// what this host's segment held then under an old id of it (see `inherited`): a ring whose
    /// range only moved on, with no sum in the buckets it moved to, nor a change of what is left
    /// out of them, holds what it should already.
    rings_written: HashMap<Vec<u8>, (u64, u64)>,
    /// When (this host's seconds) every fleet ring was last written, changed or not: whoever may
    /// write the segment file may write over a ring that `rings_written` says holds what it
    /// should; what they wrote lasts `RINGS_WRITTEN_WHOLE_EVERY_S` at most.
    rings_written_whole_at: u64,
    /// Redis's time at the last sync (seconds), and how far this host's clock is ahead of it.
    redis_time: u64,
    clock_ahead_s: i64,
    /// The same in milliseconds: what a reset is dated and taken by.
    clock_ahead_ms: i64,
    /// The bucket durations the last sync read sums of: a sync that reads one more reads every
    /// shard whole, since the sums of that duration that did not change are not sent otherwise.
    durations_read: BTreeSet<u64>,
    /// How far this host's clock is ahead of Redis's, in milliseconds, as it stamps buckets by
    /// (`Segment::fleet_clock`): moved only when the clock moved more than [`CLOCK_MOVED_MS`].
    clock: Option<i64>,
    /// Since when this segment has its id (`Segment::fleet_since`, unix milliseconds; 0: every
    /// count its own rings hold is its id's, as after `renew`), and this host's counts of the
    /// buckets that began before (see `Observed`).
    since_ms: u64,
    inherited: HashMap<Bucket, Counts>,
    /// The file this sidecar mapped the segment from (`Segment::file`): a segment that records
    /// another is a copy, taken as another host before anything is published (`fleet::take_copy`).
    file: (u64, u64),
    /// Since when (monotonic milliseconds) another process has been taking the segment as a
    /// copy: after [`COPY_TAKEN_WITHIN_MS`], it died doing so, and this sidecar finishes.
    copy_being_taken_since: Option<u64>,
    /// The resets of the segment's reset log (`ResetLog`) taken into `pending_resets` already: by
    /// key and kind, the latest time (unix milliseconds, Redis's clock). A sidecar that starts
    /// takes every one again: sharing a reset twice is the same cut.
    resets_noted: HashMap<(Vec<u8>, bool), u64>,
    /// Each reset the log holds, as this sidecar first dated it on Redis's clock: dated once, so
    /// that a measure of the clock a few milliseconds off at a later sync does not make it
    /// another, later reset to share again.
    resets_dated: HashMap<NotedReset, u64>,
    /// How long after its start this host reads a bucket of each duration, as the last sync said
    /// (see `readers`): whether a shard it finds gone should still have been there.
    readers: BTreeMap<u64, u64>,
    /// Whether a sync since the sidecar attached marked this host's name: the first finds there
    /// the id of the segment this sidecar synced before, if any, which is no other host.
    named: bool,
    /// Whether this sidecar measured the clock since it attached: until then, a sync asks
    /// Redis's time before it stamps anything (the clock may have stepped while it was down).
    clock_checked: bool,
    /// Each bucket of this host's segment (its own clock) by the start it is published under
    /// (Redis's clock), and the figure it was stamped by: a bucket keeps the stamp it was first
    /// published under when the clock figure moves, so that no count is published under two
    /// stamps, and a reset judges it by when it began on Redis's clock.
    stamps: HashMap<Bucket, Stamp>,
    /// The time of the sync under way: unix milliseconds, this host's clock.
    now_ms: u64,
    /// How far this host's clock is ahead of its monotonic clock, in this sync, and when the
    /// figure was last measured: a step of the clock shows as a change.
    now_offset: i64,
    offset_measured: Option<i64>,
    /// The figures this host's buckets are stamped by, oldest first, as the segment keeps them
    /// (`fleet::ClockFigure`): a bucket no stamp names yet takes the one taken before the clock
    /// first reached it.
    figures: Vec<ClockFigure>,
}

impl Syncer {
    pub fn new(config: Config) -> Self {
        Self {
            config,
            host_id: 0,
            shards: HashMap::new(),
            resets_seen: HashMap::new(),
            pending_resets: HashMap::new(),
            fleet_resets: HashMap::new(),
            resets_read: Vec::new(),
            trials_asked: BTreeMap::new(),
            trials_read: Vec::new(),
            rings_written: HashMap::new(),
            rings_written_whole_at: 0,
            redis_time: 0,
            clock_ahead_s: 0,
            clock_ahead_ms: 0,
            durations_read: BTreeSet::new(),
            clock: None,
            clock_checked: false,
            stamps: HashMap::new(),
            now_ms: 0,
            now_offset: 0,
            offset_measured: None,
            figures: Vec::new(),
            readers: BTreeMap::new(),
            named: false,
            resets_noted: HashMap::new(),
            resets_dated: HashMap::new(),
            since_ms: 0,
            inherited: HashMap::new(),
            file: (0, 0),
            copy_being_taken_since: None,
        }
    }

    /// What this sidecar holds of `service`, for a diagnosis: by bucket (Redis's clock), the
    /// fleet's sums as last read and this host's counts as it published them.
    pub fn known_counts(&self, service: &[u8]) -> Vec<(Bucket, [u64; 3], [u64; 3])> {
        let Some(shard) = self.shards.get(&fleet::shard_of(service)) else { return Vec::new() };
        shard
            .buckets
            .iter()
            .map(|(bucket, state)| {
                let of = |counts: &Counts| counts.get(service).copied().unwrap_or_default();
                (*bucket, of(&state.sums), of(&state.own))
            })
            .filter(|(_, sums, own)| *sums != [0; 3] || *own != [0; 3])
            .collect()
    }

    /// The segment attached, with its host id: a new segment is another host, which starts
    /// from nothing.
    pub fn attached(&mut self, host_id: u64) {
        if host_id != self.host_id {
            self.host_id = host_id;
            self.forget();
        }
    }

    /// The segment attached was mapped from `file` (`Segment::file`).
    pub fn attached_file(&mut self, file: (u64, u64)) {
        self.file = file;
    }

    /// Forgets all it knows of Redis and of the segment: the next sync publishes all the segment
    /// holds and reads back what Redis holds of it (a segment attached anew).
    pub fn forget(&mut self) {
        self.shards.clear();
        self.resets_seen.clear();
        self.pending_resets.clear();
        self.fleet_resets.clear();
        self.rings_written.clear();
        self.durations_read.clear();
        self.clock = None;
        self.clock_checked = false;
        self.offset_measured = None;
        self.figures.clear();
        self.stamps.clear();
        self.named = false;
        self.resets_noted.clear();
        self.resets_dated.clear();
    }

    /// A new connection: what Redis holds is checked again at the next call of each shard (the
    /// shard's birth tells whether Redis lost it meanwhile), and the ACL rights with it.
    pub fn reconnected(&mut self) {
        for shard in self.shards.values_mut() {
            shard.checked = false;
        }
    }

    /// Seconds Redis keeps a bucket beyond the window reading it: two intervals and a second,
    /// so that a host's last counts outlive the sync that would refresh them.
    fn margin(&self) -> u64 {
        (self.config.interval * 2).as_secs() + 1
    }

    /// For each bucket duration this host reads, how long after its start it reads a bucket, on
    /// Redis's clock: its longest window of that duration (the fleet-only services' included) and
    /// a bucket, how far a stamp may be off (`fleet::stamp_error_ms`), and the margin.
    fn readers(&self, observed: &Observed, fleet_only: Option<FleetWindow>) -> BTreeMap<u64, u64> {
        let mut readers = BTreeMap::new();
        for window in observed.windows.values().flatten().map(|(_, window)| window).chain(fleet_only.as_ref()) {
            // Buckets are stamped on Redis's clock, each host's within its stamps' error.
            let lag = fleet::stamp_error_ms(window.bucket_duration).div_ceil(1000);
            let seconds = window.lifetime() + lag + self.margin();
            let entry = readers.entry(window.bucket_duration).or_insert(0);
            *entry = seconds.max(*entry);
        }
        readers
    }

    /// What the segment holds now: this host's counts by shard and bucket, and the counters'
    /// resets, noting those reset since the last sync, whose counts it publishes lowered (when
    /// and what was reset, the segment's reset log says: see `take_noted_resets`).
    fn observe(&mut self, store: &Store<'_>, now: u64) -> Observed {
        let mut observed =
            Observed { counts: BTreeMap::new(), windows: BTreeMap::new(), unshared: 0, inherited: HashMap::new() };
        let since_ms = self.since_ms;
        let mut resets = HashMap::new();
        // Beyond the bound, this host's clock is not one the fleet may count on: nothing shared.
        let ahead = self.clock.unwrap_or(0);
        let shares = ahead.unsigned_abs() <= CLOCK_BOUND_S * 1000;
        let mut stamps = HashMap::new();
        for own in store.own_buckets(now, CLOCK_BOUND_S) {
            let Some((service, counter)) = fleet::counter_of(&own.key, &self.config.suffixes) else { continue };
            observed.windows.entry(service.to_vec()).or_default().push((counter, own.window));
            resets.insert(own.key.clone(), own.resets);
            let shard = observed.counts.entry(fleet::shard_of(service)).or_default();
            for &(start, count) in &own.buckets {
                if !shares {
                    observed.unshared += 1;
                    continue;
                }
                let duration = own.window.bucket_duration;
                let counted = Bucket { duration, start };
                // Published under the stamp it was first published under, else on Redis's clock:
                // by the figure taken before the clock first reached it (one taken since a step
                // back would stamp the bucket counted in before the step anew).
                let figure = ClockFigure::of(&self.figures, start, duration).unwrap_or(ahead);
                let stamp =
                    self.stamps.get(&counted).copied().unwrap_or_else(|| Stamp { start: stamp_of(counted, figure), figure });
                stamps.insert(counted, stamp);
                let stamp = stamp.start;
                let bucket = Bucket { duration, start: stamp };
                // What the fleet has under this segment's old id, if it had one: not published
                // again, nor read as another host's.
                let inherited = if start.saturating_mul(1000) < since_ms { count } else { 0 };
                if inherited > 0 {
                    let counts = observed.inherited.entry(bucket).or_default().entry(service.to_vec()).or_default();
                    counts[usize::from(counter)] = (counts[usize::from(counter)] + inherited).min(MAX_COUNT);
                }
                let counts = shard.entry(bucket).or_default().entry(service.to_vec()).or_default();
                // Added: two buckets of this host's share a stamp when its figure moved between.
                counts[usize::from(counter)] = (counts[usize::from(counter)] + count - inherited).min(MAX_COUNT);
            }
        }
        // A bucket the window does not read now keeps its stamp while a step of the clock within
        // the bound may bring it back into the window (a step back puts the buckets counted since
        // in the future, a step forward the ones before out of the window): published again, it
        // would be under its own stamp, not counted twice. Bounded by the windows and the bound.
        for (counted, stamp) in &self.stamps {
            let reach = counted.duration.saturating_mul(LONGEST_READ).saturating_add(2 * CLOCK_BOUND_S);
            if counted.start.abs_diff(now) <= reach {
                stamps.entry(*counted).or_insert(*stamp);
            }
        }
        self.stamps = stamps;
        // A counter whose resets moved was reset: its counts are set as they are now, lower.
        for (key, &count) in &resets {
            if self.resets_seen.get(key).is_some_and(|&seen| seen != count) {
                if let Some((service, counter)) = fleet::counter_of(key, &self.config.suffixes) {
                    self.pending_resets.entry(service.to_vec()).or_default().0 |= 1 << counter;
                }
            }
        }
        self.resets_seen = resets;
        // A service the fleet reset is followed while its reset is known, though the reset took
        // every event this host had of it: its counters' slots stay, and the fleet's counts after
        // the reset come into them as into any this host counts.
        for service in self.fleet_resets.keys() {
            if observed.windows.contains_key(service) {
                continue;
            }
            let windows: Vec<(u8, FleetWindow)> = (0u8..)
                .zip(&self.config.suffixes)
                .filter_map(|(counter, suffix)| {
                    let window = store.fleet_window(&[&service[..], suffix].concat()).ok()??;
                    Some((counter, window))
                })
                .collect();
            if !windows.is_empty() {
                observed.windows.insert(service.clone(), windows);
                observed.counts.entry(fleet::shard_of(service)).or_default();
            }
        }
        observed
    }

    /// One sync of `segment` (over `store`) at unix time `now_ms` (milliseconds, this host's
    /// clock), `monotonic_ms` on this host's monotonic clock (`fleet::monotonic_ms`).
    pub fn sync(
        &mut self,
        link: &mut impl Link,
        segment: &Segment,
        store: &Store<'_>,
        now_ms: u64,
        monotonic_ms: u64,
    ) -> redis::RedisResult<Report> {
        self.now_ms = now_ms;
        self.now_offset = now_ms as i64 - monotonic_ms as i64;
        let now = now_ms / 1000;
        let mut report = Report { complete: true, ..Report::default() };
        // A copy of the segment is another host, taken as one by the first process that maps it,
        // before it counts or publishes anything: this sidecar, when it is the first.
        let id = segment.fleet_host_id();
        match fleet::take_copy(segment, store, self.file, now) {
            fleet::Copy::Own | fleet::Copy::Taken => self.copy_being_taken_since = None,
            fleet::Copy::BeingTaken => match self.copy_being_taken_since {
                Some(since) if monotonic_ms.saturating_sub(since) >= COPY_TAKEN_WITHIN_MS => {
                    fleet::finish_taking_copy(segment, store, self.file, now);
                    self.copy_being_taken_since = None;
                }
                since => {
                    // Its own rings are moving: nothing is published from them until it is done.
                    self.copy_being_taken_since = since.or(Some(monotonic_ms));
                    (report.complete, report.copy_being_taken) = (false, true);
                    return Ok(report);
                }
            },
        }
        if segment.fleet_host_id() != id {
            report.copy_taken = Some((id, segment.fleet_host_id()));
            self.attached(segment.fleet_host_id());
        }
        // The sidecar's sequence, and how far this host's clock is ahead of Redis's, kept by the
        // segment; the window the adapters noted.
        let (sequence, clock) = (segment.fleet_sequence(), segment.fleet_clock());
        let noted = fleet::noted_window(segment.fleet_window_noted());
        // Relaxed: written by the sidecar, or by a process under a copy's claim, whose end
        // `take_copy` acquired above.
        self.since_ms = segment.fleet_since().load(Ordering::Relaxed);
        let mut round_trips = 0;
        if !self.clock_checked {
            // Before anything is stamped: Redis's time, once after the sidecar attached.
            let time = redis_time_ms(&link.time()?).ok_or_else(|| unexpected("TIME's reply is not a time"))?;
            round_trips += 1;
            self.clock = self.clock.or(fleet::read_clock(clock));
            if self.figures.is_empty() && !defense::is_off(Defense::ClockFigures) {
                self.figures = fleet::read_clock_figures(segment.fleet_clock_figures());
            }
            // The buckets the segment holds may have been published before this sidecar attached,
            // under the figures the segment keeps: they keep the stamps they have under them,
            // though the clock moved since (a count published under two stamps would count twice).
            if let (Some(figure), true) = (self.clock, self.stamps.is_empty()) {
                for own in store.own_buckets(now, CLOCK_BOUND_S) {
                    for &(start, _) in &own.buckets {
                        let counted = Bucket { duration: own.window.bucket_duration, start };
                        let figure = ClockFigure::of(&self.figures, start, counted.duration).unwrap_or(figure);
                        self.stamps.insert(counted, Stamp { start: stamp_of(counted, figure), figure });
                    }
                }
            }
            self.measured(segment, now_ms as i64 - time as i64, now);
            self.clock_checked = true;
        }
        // The clock stepped since the figure was measured (its time moved against the monotonic
        // one): the figure moves by the step before anything is stamped, since Redis, whose reply
        // would tell, may not answer this sync (a bucket keeps the stamp it is first published
        // under).
        if let Some(measured) = self.offset_measured {
            let step = self.now_offset - measured;
            if step.abs() > CLOCK_MOVED_MS {
                // The furthest the clock had reached: where it would be now without the step.
                let reached = u64::try_from((now_ms as i64 - step).div_euclid(1000)).unwrap_or(0);
                self.measured(segment, self.clock_ahead_ms + step, reached);
            }
        }
        let mut observed = self.observe(store, now);
        self.inherited = std::mem::take(&mut observed.inherited);
        // The resets noted so far, which this sync shares before it writes the fleet's counts.
        let tickets = store.reset_log().map_or(0, |log| log.tickets());
        let resets_waiting = self.take_noted_resets(store, &observed);
        report.round_trips = round_trips;
        report.rejected = observed.unshared;
        report.services = observed.windows.len();
        let fleet_only_window =
            store.fleet_only().and_then(|region| self.fleet_only_window(noted, &observed, region.shape().span));
        let readers = self.readers(&observed, fleet_only_window);
        // A duration read for the first time: its sums that did not change since the version
        // this host holds would not come, so every shard is read whole.
        if readers.keys().any(|duration| !self.durations_read.contains(duration)) {
            for shard in self.shards.values_mut() {
                shard.whole = true;
            }
        }
        self.durations_read = readers.keys().copied().collect();
        self.readers = readers.clone();

        // The shards of the services this host counts, and of those it reset: each called at
        // most twice (again when Redis lost it, or refused the call as late).
        self.trials_asked = self.trials_asked_of(store, &observed, now);
        let mut todo: BTreeSet<u32> = observed.counts.keys().copied().collect();
        // With a fleet-only region, every shard: the services this host has not counted are in
        // any of them.
        if store.fleet_only().is_some() {
            todo.extend(0..fleet::SHARDS);
        }
        todo.extend(self.pending_resets.keys().map(|service| fleet::shard_of(service)));
        todo.extend(self.trials_asked.keys().map(|service| fleet::shard_of(service)));
        let mut calls: HashMap<u32, u8> = HashMap::new();
        let mut marked = false;
        // At least once: this host's marks go even when it counts nothing.
        while !todo.is_empty() || !marked {
            // The shards this host knows go in one pipeline, with its marks; a shard it publishes
            // whole goes in a round trip of its own, so that when every host republishes at once
            // (Redis restarted empty) no reply waits behind more than one call of each.
            let (whole, known): (Vec<u32>, Vec<u32>) =
                todo.iter().partition(|shard| self.shards.get(shard).is_none_or(Shard::whole));
            let mut again = BTreeSet::new();
            // One sequence for every call of a round (each shard is called once in it): a
            // segment whose sequence is behind what Redis applied of its id in any shard it wrote
            // since (a copy of it, or an older copy restored) is found at its first round.
            let number = next_sequence(sequence);
            for batch in std::iter::once(known).chain(whole.into_iter().map(|shard| vec![shard])) {
                if batch.is_empty() && marked {
                    continue;
                }
                let mut sent = Vec::new();
                let mut commands = Vec::new();
                for &shard in &batch {
                    let (command, call) = self.call(shard, &observed, &readers, number, link.script());
                    report.published += call.updates.len();
                    commands.push(command);
                    sent.push((shard, call));
                }
                if !marked {
                    commands.extend(self.marks());
                }
                let replies = link.run(commands)?;
                report.round_trips += 1;
                if !marked {
                    self.take_marks(&replies[sent.len()..], &mut report);
                    marked = true;
                }
                let mut stale = false;
                for ((shard, call), reply) in sent.into_iter().zip(&replies) {
                    let called = calls.entry(shard).or_default();
                    *called += 1;
                    match self.take_reply(shard, &call, reply, &observed, sequence, &mut report)? {
                        Outcome::Synced | Outcome::Skipped => {}
                        Outcome::Stale => stale = true,
                        Outcome::Reborn if *called < 2 => {
                            again.insert(shard);
                        }
                        Outcome::Reborn => report.complete = false,
                    }
                }
                if stale {
                    // Redis applied a call of this id with a later sequence than this segment
                    // made: another segment runs under its id.
                    self.renew(segment, store, &mut report);
                    return Ok(report);
                }
            }
            todo = again;
        }
        self.measured(segment, self.clock_ahead_ms, now);
        self.forget_gone(&readers);
        self.take_resets(store, &readers, now, &mut report);
        self.write_rings(store, &observed, now, &mut report);
        self.write_trials(store, &mut report);
        // The durations this sync's replies told of, when no window was known before the calls
        // (a sidecar started anew on a host that has had no request since).
        let fleet_only_window = fleet_only_window.or_else(|| {
            store.fleet_only().and_then(|region| self.fleet_only_window(noted, &observed, region.shape().span))
        });
        match (fleet_only_window, store.fleet_only()) {
            (Some(window), _) => self.write_fleet_only(store, &observed, window, now, &mut report),
            // No window to read the fleet's other services in (none noted, none counted here, none
            // told): what the region holds is an earlier sync's, which a fresh view would read as
            // current. Emptied, as it is rewritten at every sync.
            (None, Some(region)) => {
                region.publish(&[]);
            }
            (None, None) => {}
        }
        if report.complete && !resets_waiting {
            // Release: a load that reads this sees the counts written above, which reflect
            // every reset noted before `tickets` (each shared by a call that succeeded).
            segment.fleet_resets_taken().store(tickets, Ordering::Release);
        }
        Ok(report)
    }

    /// Another segment runs under this host's id (this file restored from an older copy of it, or
    /// a copy that no process took as one: Redis applied a call of the id with a later sequence
    /// than this segment made). This one takes an id of its own, as a copy is taken
    /// (`fleet::take_copy`): every count its own rings hold is the old id's, which the fleet has
    /// from the other segment (or had, before the copy was restored), and goes to its fleet rings,
    /// where this host reads it among the other hosts' from now on; its own rings hold what it
    /// counts after. So no event is counted twice, and the segment keeps the cut across the
    /// sidecar's restarts (should Redis lose the old id's counts, or never have had them, those
    /// that no segment under the old id holds any more are lost with them).
    fn renew(&mut self, segment: &Segment, store: &Store<'_>, report: &mut Report) {
        let old = self.host_id;
        store.hand_own_counts_to_fleet(self.now_ms / 1000, CLOCK_BOUND_S);
        let renewed = segment.renew_fleet_host_id(0);
        // The same segment under another id: its buckets keep their stamps (a count after this
        // one in the same bucket goes under the same), and its clock's figure.
        let (stamps, clock, figures) = (std::mem::take(&mut self.stamps), self.clock, std::mem::take(&mut self.figures));
        self.attached(renewed);
        (self.stamps, self.clock, self.figures, self.clock_checked) = (stamps, clock, figures, true);
        report.renewed = Some((old, renewed));
        report.complete = false;
    }

    /// The resets of the segment's reset log not taken yet, as resets this host shares, dated by
    /// the log on Redis's clock: a reset of one service, whether or not this host counts it (it may
    /// see it only through the fleet), or of every service whose key starts with a prefix
    /// (`reset()`), which this host knows of (its own, and those it read sums of).
    ///
    /// A reset of every service reaches the services this sidecar knows of; until it has called
    /// every shard (it knows the fleet's services only then: a sidecar that just started knows
    /// none), it is taken again at the next sync: whether one is.
    fn take_noted_resets(&mut self, store: &Store<'_>, observed: &Observed) -> bool {
        let Some(log) = store.reset_log().filter(|_| !defense::is_off(Defense::ResetLog)) else { return false };
        let knows_fleet = (0..fleet::SHARDS).all(|shard| self.shards.get(&shard).is_some_and(|state| state.replied));
        let mut waiting = false;
        // By key and kind, the latest, on Redis's clock.
        let ahead_ms = if defense::is_off(Defense::ResetClock) { 0 } else { self.clock_ahead_ms };
        let monotonic_ms = u64::try_from(self.now_ms as i64 - self.now_offset).unwrap_or(0);
        let mut noted: HashMap<(Vec<u8>, bool), u64> = HashMap::new();
        let mut dated = HashMap::new();
        for reset in log.read() {
            let at = match self.resets_dated.get(&reset) {
                Some(&at) => at,
                None => fleet::reset_on_redis_clock(&reset, ahead_ms, self.now_offset, monotonic_ms),
            };
            let latest = noted.entry((reset.key.clone(), reset.every)).or_default();
            *latest = at.max(*latest);
            dated.insert(reset, at);
        }
        self.resets_dated = dated;
        let mut made: Vec<(Vec<u8>, u64)> = Vec::new();
        for ((key, every), &at) in &noted {
            if self.resets_noted.get(&(key.clone(), *every)).is_some_and(|&taken| taken >= at) {
                continue;
            }
            if !every {
                made.push((key.clone(), at));
                continue;
            }
            // Expanded again at the next sync, while this sidecar does not know the fleet yet.
            waiting |= !knows_fleet;
            let counted = observed.windows.keys();
            let read = self.shards.values().flat_map(|shard| shard.buckets.values().flat_map(|bucket| bucket.sums.keys()));
            let services: BTreeSet<&Vec<u8>> = counted.chain(read).filter(|service| service.len() > key.len() && service.starts_with(key)).collect();
            made.extend(services.into_iter().map(|service| (service.clone(), at)));
        }
        for (service, at) in made {
            // The log's time, rather than the one a counter's reset is dated by otherwise: the
            // latest, since a reset of every service is taken again while this sidecar does not
            // know the fleet, after later resets of one.
            let time = &mut self.pending_resets.entry(service).or_default().1;
            *time = Some(time.map_or(at, |earlier| earlier.max(at)));
        }
        if waiting {
            // Taken again at the next sync.
            noted.retain(|(_, every), _| !every);
            noted.extend(self.resets_noted.iter().filter(|((_, every), _)| *every).map(|(k, &v)| (k.clone(), v)));
        }
        self.resets_noted = noted;
        waiting
    }

    /// Takes a measure of how far this host's clock is ahead of Redis's: the figure buckets are
    /// stamped by moves, and is kept in the segment, only when the clock moved by more than
    /// [`CLOCK_MOVED_MS`] from it (a reply's time is late by its round trip), for the buckets
    /// after the one of `reached_s`, the furthest the clock had reached (this host's seconds).
    fn measured(&mut self, segment: &Segment, ahead_ms: i64, reached_s: u64) {
        self.offset_measured = Some(self.now_offset);
        self.clock_ahead_ms = ahead_ms;
        self.clock_ahead_s = ahead_ms.div_euclid(1000);
        if self.clock.is_some_and(|figure| (figure - ahead_ms).abs() <= CLOCK_MOVED_MS) {
            return;
        }
        let words = segment.fleet_clock_figures();
        // The figure every bucket before has (one the segment kept without the figures that
        // came with it: none, or whoever can write the file wrote them).
        if let (Some(figure), true) = (self.clock, self.figures.is_empty()) {
            let first = ClockFigure { since_s: 0, ahead_ms: figure };
            self.figures.push(first);
            fleet::push_clock_figure(words, first);
        }
        let since_s = match self.figures.last() {
            Some(last) => reached_s.max(last.since_s),
            None => 0,
        };
        let figure = ClockFigure { since_s, ahead_ms };
        self.figures.push(figure);
        if self.figures.len() > fleet::CLOCK_FIGURES {
            self.figures.remove(0);
        }
        fleet::push_clock_figure(words, figure);
        self.clock = Some(ahead_ms);
        fleet::write_clock(segment.fleet_clock(), ahead_ms);
    }

    /// The bucket, on Redis's clock, that this host reads as `counted` (its own clock).
    fn on_redis(&self, counted: Bucket) -> Bucket {
        let shift = fleet::bucket_shift(self.clock.unwrap_or(0), counted.duration);
        Bucket { start: counted.start.saturating_add_signed(-shift), ..counted }
    }

    /// The bucket number this host reads a bucket Redis names as (its own clock).
    fn local_number(&self, bucket: Bucket) -> u64 {
        let shift = fleet::bucket_shift(self.clock.unwrap_or(0), bucket.duration);
        bucket.start.saturating_add_signed(shift) / bucket.duration
    }

    /// The window the fleet-only services are read in: the one the adapters noted; before any did
    /// (no request yet), the one most of this host's counters are counted in; before any counted,
    /// the shortest bucket duration the fleet counts in, with the longest window a ring holds
    /// (`span`, less the two buckets beyond the window), so that a host that just joined sees the
    /// fleet's services before its first request.
    fn fleet_only_window(&self, noted: Option<FleetWindow>, observed: &Observed, span: usize) -> Option<FleetWindow> {
        if noted.is_some() {
            return noted;
        }
        let mut counted: HashMap<FleetWindow, usize> = HashMap::new();
        for window in observed.windows.values().flatten().map(|(_, window)| window) {
            *counted.entry(*window).or_default() += 1;
        }
        if let Some((window, _)) = counted.into_iter().max_by_key(|&(window, count)| (count, window.bucket_duration)) {
            return Some(window);
        }
        // A duration Redis told of is anybody's data: one no window has is not read.
        let told = self
            .shards
            .values()
            .flat_map(|shard| shard.told.iter())
            .filter(|&&d| (1..=MAX_DURATION_S).contains(&d))
            .min()
            .copied()?;
        Some(FleetWindow { bucket_duration: told, window_buckets: span.saturating_sub(2).max(1) as u64 })
    }

    /// The fleet's trials this host follows: those of the services whose circuit rejected a
    /// request here in the last [`TRIAL_FOLLOWED_S`] seconds (the buckets of `observed`: a
    /// circuit that rejects is open), with a last failure time.
    fn trials_asked_of(&self, store: &Store<'_>, observed: &Observed, now: u64) -> BTreeMap<Vec<u8>, TrialAsked> {
        let lately = (2 * self.config.interval.as_millis() as u64).div_ceil(1000).max(2);
        // The buckets are stamped on Redis's clock.
        let redis_now = now.saturating_add_signed(-fleet::bucket_shift(self.clock.unwrap_or(0), 1));
        // By service, the end of the latest bucket with a rejection.
        let mut rejected: BTreeMap<&[u8], u64> = BTreeMap::new();
        for buckets in observed.counts.values() {
            for (bucket, counts) in buckets {
                for (service, _) in counts.iter().filter(|(_, counts)| counts[2] > 0) {
                    let end = rejected.entry(service).or_default();
                    *end = (*end).max(bucket.start + bucket.duration);
                }
            }
        }
        let mut asked = BTreeMap::new();
        for (service, end) in rejected {
            if end.saturating_add(TRIAL_FOLLOWED_S) < redis_now {
                continue;
            }
            let key = [service, &self.config.suffixes[1][..]].concat();
            let Ok(Some(failure)) = store.peek_last_failure_time(&key, now) else { continue };
            let failure_ms =
                u64::try_from(failure.saturating_mul(1000).saturating_sub(self.clock_ahead_ms)).unwrap_or(0);
            asked.insert(service.to_vec(), TrialAsked { key, failure_ms, wants: end.saturating_add(lately) >= redis_now });
        }
        asked
    }

    /// The fleet's trials read into the segment: its last failure of each service, on this
    /// host's clock, and this host's grant, valid until a second before its lease ends on Redis's
    /// clock, so that it never overlaps the next holder's. A failure within a second of this
    /// host's own is that one (times are whole seconds of different clocks).
    fn write_trials(&mut self, store: &Store<'_>, report: &mut Report) {
        let ahead_ms = self.clock_ahead_ms;
        let on_this_clock = |ms: u64| u64::try_from((ms as i64).saturating_add(ahead_ms)).unwrap_or(0);
        for (service, failure_ms, lease_ms) in std::mem::take(&mut self.trials_read) {
            let Some(asked) = self.trials_asked.get(&service) else { continue };
            let own = store.peek_last_failure_time(&asked.key, self.now_ms / 1000).ok().flatten();
            let mut failure = (on_this_clock(failure_ms) + 500) / 1000;
            if let Some(own) = own.and_then(|own| u64::try_from(own).ok()) {
                if own <= failure + 1 {
                    failure = failure.max(own);
                }
            }
            let until = lease_ms.map(|ms| (on_this_clock(ms) / 1000).saturating_sub(1));
            if let Err(error) = store.write_fleet_trial(&asked.key, failure, until) {
                report.refused.push((asked.key.clone(), format!("{:?}", error.error)));
            }
        }
    }

    /// The call of `shard`, with the request it sends.
    fn call(
        &mut self,
        shard: u32,
        observed: &Observed,
        readers: &BTreeMap<u64, u64>,
        sequence: u64,
        script: &str,
    ) -> (Cmd, Request) {
        let state = self.shards.entry(shard).or_default();
        let full = state.whole();
        let resets: Vec<protocol::Reset> = self
            .pending_resets
            .iter()
            .filter(|(service, _)| fleet::shard_of(service) == shard)
            .map(|(service, &(mask, _))| protocol::Reset { service: service.clone(), mask })
            .collect();
        // The resets this host shares: those it made; with full, every one it knows of, so that
        // they come back with the counts when Redis lost them.
        let mut reset_times: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
        let known = self.fleet_resets.iter().filter(|_| full).map(|(service, reset)| (service, reset.at));
        let made = self.pending_resets.iter().filter_map(|(service, &(_, at))| Some((service, at?)));
        for (service, at) in known.chain(made) {
            if fleet::shard_of(service) == shard {
                let latest = reset_times.entry(service.clone()).or_default();
                *latest = at.max(*latest);
            }
        }
        let nothing = BTreeMap::new();
        let seen = observed.counts.get(&shard).unwrap_or(&nothing);
        // Every bucket this host counted in, or published to: what it publishes of each is what
        // it published, raised to what it counts now, or set to it for the counters it reset.
        let buckets: BTreeSet<Bucket> = seen.keys().chain(state.buckets.keys()).copied().collect();
        let mut updates = Vec::new();
        for bucket in buckets {
            let published = state.buckets.get(&bucket).map(|b| &b.own);
            let touched_by_reset = published.is_some_and(|own| resets.iter().any(|reset| own.contains_key(&reset.service)));
            if !full && !seen.contains_key(&bucket) && !touched_by_reset {
                continue;
            }
            let rows = publishing(published, seen.get(&bucket), &resets);
            let unchanged = published.is_some_and(|own| same_counts(own, &rows));
            if rows.is_empty() && published.is_none_or(Counts::is_empty) {
                continue;
            }
            if full || !unchanged {
                updates.push(Update { bucket, counts: rows });
            }
        }
        let (born, version) = state.known.clone().unwrap_or_default();
        // This host's newest bucket in the shard, by how long it is read.
        let read_until = |bucket: &Bucket| bucket.start.saturating_add(read_for(readers, bucket.duration));
        let newest = state
            .buckets
            .iter()
            .filter(|(_, b)| !b.own.is_empty())
            .map(|(bucket, _)| *bucket)
            .max_by_key(read_until);
        // A lease of three intervals (three seconds at least), renewed at each sync while this
        // host wants the trial: a holder that stops asking, or whose sidecar stops, loses it
        // that soon to another host that asks.
        let lease_ms = (3 * self.config.interval.as_millis() as u64).max(3000);
        let trials = self
            .trials_asked
            .iter()
            .filter(|(service, _)| fleet::shard_of(service) == shard)
            .map(|(service, trial)| protocol::Trial {
                service: service.clone(),
                failure: trial.failure_ms,
                wants: trial.wants,
                lease: lease_ms,
            })
            .collect();
        // The resets this host took of the services it sends: what it counted since is counted.
        let services: BTreeSet<&Vec<u8>> =
            updates.iter().flat_map(|update| update.counts.iter().map(|(service, _)| service)).collect();
        let taken = services
            .into_iter()
            .filter_map(|service| Some(ResetTime { service: service.clone(), time: self.fleet_resets.get(service)?.at }))
            .collect();
        let request = Request {
            host: fleet::host_id_text(self.host_id),
            sequence,
            born,
            version: if state.known.is_some() { version } else { -1 },
            full,
            readers: readers.iter().map(|(&duration, &seconds)| protocol::Reader { duration, seconds }).collect(),
            live: (3 * self.config.interval.as_millis() as u64).div_ceil(1000) + 1,
            updates,
            resets,
            bound: CLOCK_BOUND_S,
            check: !state.checked,
            durations: state.told.iter().copied().collect(),
            recount: state.recount.iter().copied().collect(),
            applied: state.applied,
            newest,
            renew: full && state.renew,
            reset_times: reset_times.into_iter().map(|(service, time)| ResetTime { service, time }).collect(),
            resets_known: if full { -1 } else { state.resets_known.unwrap_or(-1) },
            trials,
            // The figure this host's buckets are stamped by: when each began, on Redis's clock.
            clock: self.clock.unwrap_or(0),
            taken,
        };
        let mut command = redis::cmd("EVALSHA");
        command.arg(script).arg(1).arg(fleet::shard_key(&self.config.fleet, shard));
        command.arg(request.encode());
        (command, request)
    }

    /// This host's marks beside the calls: in the fleet's set of live hosts (whose size is the
    /// number of hosts), and under its name.
    fn marks(&self) -> Vec<Cmd> {
        let host_id = fleet::host_id_text(self.host_id);
        let interval_ms = self.config.interval.as_millis() as u64;
        let redis_time = if self.redis_time == 0 { self.now_ms / 1000 } else { self.redis_time };
        let hosts = fleet::hosts_key(&self.config.fleet);
        let live_s = (3 * interval_ms).div_ceil(1000).max(2);
        vec![
            redis::cmd("ZADD").arg(&hosts).arg(redis_time).arg(&host_id).to_owned(),
            redis::cmd("ZREMRANGEBYSCORE")
                .arg(&hosts)
                .arg("-inf")
                .arg(redis_time.saturating_sub(live_s + 1))
                .to_owned(),
            redis::cmd("ZCOUNT").arg(&hosts).arg(redis_time.saturating_sub(live_s)).arg("+inf").to_owned(),
            redis::cmd("EXPIRE").arg(&hosts).arg(live_s + 1).to_owned(),
            redis::cmd("SET")
                .arg(fleet::name_key(&self.config.fleet, &self.config.host))
                .arg(&host_id)
                .arg("PX")
                .arg(3 * interval_ms)
                .arg("GET")
                .to_owned(),
        ]
    }

    fn take_marks(&mut self, marks: &[Value], report: &mut Report) {
        report.hosts = marks.get(2).and_then(int).unwrap_or(1).max(1) as usize;
        // The first mark since the sidecar attached may find the id of the segment it synced
        // before (PHP restarted with a new file): a namesake shows at the next.
        let named = std::mem::replace(&mut self.named, true);
        if let (true, Some(Value::BulkString(previous))) = (named, marks.get(4)) {
            if previous != fleet::host_id_text(self.host_id).as_bytes() {
                report.namesakes.push(String::from_utf8_lossy(previous).into_owned());
            }
        }
    }

    /// Takes what the script answered for `shard` to `sent`.
    fn take_reply(
        &mut self,
        shard: u32,
        sent: &Request,
        reply: &Value,
        observed: &Observed,
        sequence: &AtomicU64,
        report: &mut Report,
    ) -> redis::RedisResult<Outcome> {
        let reply = match reply {
            Value::BulkString(bytes) => Reply::decode(bytes).map_err(|why| {
                redis::RedisError::from((redis::ErrorKind::UnexpectedReturnType, "a shard's reply is malformed", why))
            })?,
            // An error of the script's, as a value: a failed call, as when the round trip fails.
            Value::ServerError(error) => return Err(error.clone().into()),
            _ => return Err(unexpected("a shard's reply is not the script's packed map")),
        };
        let redis_now_ms = reply.time;
        let redis_now = redis_now_ms.div_euclid(1000);
        self.redis_time = redis_now as u64;
        self.clock_ahead_s = (self.now_ms / 1000) as i64 - redis_now;
        self.clock_ahead_ms = self.now_ms as i64 - redis_now_ms;
        report.clock_ahead_s = self.clock_ahead_s;
        let state = self.shards.entry(shard).or_default();
        state.checked = true;
        state.replied = true;
        let key = fleet::shard_key(&self.config.fleet, shard);
        match &reply.status {
            Status::Ok => {}
            status @ (Status::Reborn | Status::Regressed) => {
                // Redis lost the shard, or went back to an older copy of it (or another host made
                // it first): what this host published there is published again, with full, and
                // the sums are read again; an older copy gets a new birth, so that every host
                // does the same.
                // Lost, unless it expired as it should have: no bucket this host holds of it is
                // read any more (a shard lives as long as its newest bucket is read).
                let read = |bucket: &Bucket| bucket.start.saturating_add(read_for(&self.readers, bucket.duration));
                if state.known.as_ref().is_some_and(|(born, _)| !born.is_empty())
                    && state.buckets.keys().any(|bucket| read(bucket) > self.redis_time)
                {
                    report.lost_shards += 1;
                }
                state.whole = true;
                state.renew = *status == Status::Regressed;
                state.applied = 0;
                for bucket in state.buckets.values_mut() {
                    bucket.sums.clear();
                }
                self.mark_services_of(shard);
                return Ok(Outcome::Reborn);
            }
            Status::Stale => {
                report.stale += 1;
                // Relaxed: the sidecar alone writes the word, from this thread.
                sequence.fetch_max(reply.sequence.min(MAX_SEQUENCE), Ordering::Relaxed);
                return Ok(Outcome::Stale);
            }
            Status::Foreign => {
                report.foreign.push(key);
                state.known = None;
                state.whole = true;
                state.buckets.clear();
                self.mark_services_of(shard);
                return Ok(Outcome::Skipped);
            }
            Status::Unwritten(why) => {
                // Redis refused the write (out of memory, evicting nothing).
                report.unwritten.push(format!("{} (unwritten: {why})", String::from_utf8_lossy(&key)));
                report.complete = false;
                return Ok(Outcome::Skipped);
            }
        }
        let figures = reply.figures;
        report.rejected += figures.rejected;
        report.gone += figures.gone;
        report.recounted += figures.recounted as usize;
        let mut bad = figures.skipped;

        state.known = Some((reply.born, reply.version));
        state.whole = false;
        state.renew = false;
        state.applied = reply.sequence;
        state.recount.clear();
        let mut dirty: HashSet<Vec<u8>> = HashSet::new();
        // What was applied: what this host sent, but where Redis holds more (below).
        for Update { bucket, counts } in &sent.updates {
            let applies = bucket.start <= self.redis_time + CLOCK_BOUND_S;
            if applies {
                let own = &mut state.buckets.entry(*bucket).or_default().own;
                dirty.extend(counts.iter().map(|(service, _)| service.clone()));
                dirty.extend(own.keys().cloned());
                *own = counts.iter().cloned().collect();
            }
        }
        // The buckets whose rows of this host Redis holds as this call sent them, or returned as
        // it holds them: known after this call, whatever a reset did.
        let told: HashSet<Bucket> =
            sent.updates.iter().map(|update| update.bucket).chain(reply.own.iter().map(|(bucket, _)| *bucket)).collect();
        for (bucket, blob) in reply.own {
            let Some((rows, skipped)) = packed::unpack_rows(&blob, MAX_COUNT) else {
                bad += 1;
                continue;
            };
            bad += skipped;
            let own = &mut state.buckets.entry(bucket).or_default().own;
            dirty.extend(rows.iter().map(|(service, _)| service.clone()));
            *own = rows.into_iter().collect();
        }
        // The fleet's resets, when Redis holds another version than this host: those newer than
        // it knows of are taken from the segment at the end of the sync. The call that wrote one
        // took this host's counts of its service in the buckets that began before it out of
        // Redis, as this host knows from now on.
        let mut learned = Vec::new();
        if let Some(resets) = reply.resets {
            state.resets_known = resets.version;
            let (resets, skipped) = packed::unpack_resets(&resets.list).unwrap_or((Vec::new(), 1));
            bad += skipped;
            for (service, at) in resets {
                // A reset dated past Redis's time and the bound is no host's.
                if fleet::shard_of(&service) != shard || at / 1000 > self.redis_time + CLOCK_BOUND_S {
                    continue;
                }
                learned.push((service, at));
            }
        }
        let ahead = self.clock.unwrap_or(0);
        // In the others, the call that wrote a reset this host did not know of took its counts of
        // the buckets that began before it.
        let stripped =
            learned.iter().filter(|(service, at)| self.fleet_resets.get(service).is_none_or(|known| *at > known.at));
        for (service, at) in stripped {
            for (bucket, bucket_state) in state.buckets.iter_mut().filter(|(bucket, _)| !told.contains(bucket)) {
                if fleet::began_at_ms(*bucket, ahead) < *at as i64 && bucket_state.own.remove(service).is_some() {
                    dirty.insert(service.clone());
                }
            }
        }
        for (bucket, blob) in reply.sums {
            let (rows, skipped) = packed::unpack_rows(&blob, MAX_COUNT).unwrap_or((Rows::new(), 1));
            bad += skipped;
            let bucket_state = state.buckets.entry(bucket).or_default();
            dirty.extend(bucket_state.sums.keys().cloned());
            dirty.extend(rows.iter().map(|(service, _)| service.clone()));
            bucket_state.sums = rows.into_iter().collect();
            // Rows that are not counts, or a sum below what this host published: not what the
            // hosts counted. The next call has the bucket recounted.
            let below = bucket_state.own.iter().any(|(service, own)| {
                let sum = bucket_state.sums.get(service).copied().unwrap_or_default();
                (0..3).any(|c| sum[c] < own[c])
            });
            if skipped > 0 || below {
                state.recount.insert(bucket);
            }
        }
        if bad > 0 {
            report.bad_rows.push((key, bad));
        }
        // Other durations: each service this host counts in them is said once.
        for Other { duration, sums } in reply.others {
            state.told.insert(duration);
            let Some((rows, _)) = packed::unpack_rows(&sums, MAX_COUNT) else { continue };
            for (service, _) in rows {
                if let Some(windows) = observed.windows.get(&service) {
                    let ours = windows[0].1.bucket_duration;
                    report.other_durations.push((service, duration, ours));
                }
            }
        }
        // The resets sent are said, and known: this host's own reset is never taken again.
        for reset in &sent.resets {
            self.pending_resets.remove(&reset.service);
        }
        for reset in &sent.reset_times {
            self.learn_reset(&reset.service, reset.time);
        }
        for (service, at) in learned {
            if self.learn_reset(&service, at) {
                self.resets_read.push((service, at));
            }
        }
        for service in dirty {
            self.rings_written.remove(&service);
        }
        // The fleet's trials of the services this host asks one of.
        for Grant { service, failure, lease } in reply.trials {
            if fleet::shard_of(&service) == shard && failure > 0 {
                let lease = u64::try_from(lease).ok().filter(|&lease| lease > 0);
                self.trials_read.push((service, failure as u64, lease));
            }
        }
        Ok(Outcome::Synced)
    }

    /// The fleet rings of the services of `shard` are written again at the end of the sync.
    fn mark_services_of(&mut self, shard: u32) {
        self.rings_written.retain(|service, _| fleet::shard_of(service) != shard);
    }

    /// Forgets the buckets no window reads any more (by Redis's clock, as the script does).
    fn forget_gone(&mut self, readers: &BTreeMap<u64, u64>) {
        let now = self.redis_time;
        for shard in self.shards.values_mut() {
            shard.buckets.retain(|bucket, state| {
                // A bucket past Redis's time and the bound is no host's (someone wrote it there).
                let kept = bucket.start.saturating_add(read_for(readers, bucket.duration)) >= now
                    && bucket.start <= now + CLOCK_BOUND_S;
                kept && !(state.own.is_empty() && state.sums.is_empty())
            });
            if shard.buckets.values().all(|state| state.own.is_empty()) {
                // Nothing of this host left there: Redis deletes its record with its last bucket.
                shard.applied = 0;
            }
        }
    }

    /// Notes the fleet's reset of `service` at `at`; whether it is newer than any this host knew.
    fn learn_reset(&mut self, service: &[u8], at: u64) -> bool {
        let known = self.fleet_resets.entry(service.to_vec()).or_default();
        let newer = at > known.at;
        if newer {
            *known = FleetReset { at };
        }
        newer
    }

    /// The second on this host's clock up to which a reset at `at` (milliseconds, Redis's clock)
    /// takes from its segment (the buckets that start at or before it, and the times saved by
    /// then): the reset's time on this clock as it is, or, when the clock stepped back since, the
    /// start of the latest bucket that began before the reset by the figure it was stamped by.
    fn reset_through(&self, at: u64) -> u64 {
        let on_this_clock = u64::try_from((at as i64 + self.clock_ahead_ms).div_euclid(1000)).unwrap_or(0);
        // A bucket counted before the clock stepped back, in its future now, takes with it the
        // buckets counted since that start before it (their events may be after the reset): a
        // reset's bucket is taken whole, and here a few more.
        let began_before =
            |counted: &Bucket, stamp: &Stamp| (counted.start as i64).saturating_mul(1000) - stamp.figure < at as i64;
        let stamped = self.stamps.iter().filter(|(counted, stamp)| began_before(counted, stamp)).map(|(counted, _)| counted.start);
        stamped.max().map_or(on_this_clock, |start| start.max(on_this_clock))
    }

    /// Takes from the segment what this host counted before each reset of another host read in
    /// this sync (see `Store::clear_through`), on this host's clock, and forgets the resets no
    /// bucket before them is read any more.
    fn take_resets(&mut self, store: &Store<'_>, readers: &BTreeMap<u64, u64>, now: u64, report: &mut Report) {
        for (service, at) in std::mem::take(&mut self.resets_read) {
            let through = self.reset_through(at);
            // What the segment held of the service in the buckets the reset takes from it (those
            // that start at or before `through`, as `Store::clear_through` takes them) is no
            // longer left out of the sums as the old id's, from this sync's rings on.
            let cleared: HashSet<Bucket> = self
                .stamps
                .iter()
                .filter(|(counted, _)| counted.start <= through)
                .map(|(counted, stamp)| Bucket { start: stamp.start, ..*counted })
                .collect();
            for (_, counts) in self.inherited.iter_mut().filter(|(bucket, _)| cleared.contains(*bucket)) {
                counts.remove(&service);
            }
            let [last_failure, status] = &self.config.state_suffixes;
            let counters = self.config.suffixes.iter().chain([last_failure]);
            let keys = counters.map(|suffix| (TableKind::Counters, suffix)).chain([(TableKind::Statuses, status)]);
            let mut took = false;
            for (kind, suffix) in keys {
                let key = [&service[..], suffix].concat();
                match store.clear_through(kind, &key, through, now) {
                    Ok(taken) => took |= taken,
                    Err(error) => report.refused.push((key, format!("{:?}", error.error))),
                }
            }
            if took {
                report.resets_taken.push(service.clone());
            }
            // What this host published of the service is set to what it holds now, lower, at the
            // next sync, as after a reset of its own (with no reset of its own to share).
            self.pending_resets.entry(service.clone()).or_default().0 |= 0b111;
            self.rings_written.remove(&service);
        }
        // Kept as long as this host reads a bucket, of any duration, that started before it.
        let redis_now = self.redis_time;
        let longest = readers.keys().map(|&duration| read_for(readers, duration)).max().unwrap_or(0);
        let longest = longest.max(read_for(&BTreeMap::new(), 1));
        self.fleet_resets.retain(|_, reset| (reset.at / 1000).saturating_add(longest) >= redis_now);
    }

    /// When the fleet's latest reset of `service` was made, as this host knows it (unix
    /// milliseconds, Redis's clock, as the buckets of the sums are stamped).
    fn reset_of(&self, service: &[u8]) -> Option<u64> {
        self.fleet_resets.get(service).map(|reset| reset.at)
    }

    /// What the other hosts counted of `service`'s `counter` in `bucket` (on Redis's clock): the
    /// fleet's sum less what this host published. The call that wrote the fleet's latest reset
    /// of the service (`reset`) took every host's counts of before it out of Redis; the buckets
    /// that ended before it read as 0 here besides (see `hidden_by_reset`).
    fn others_counted(&self, service: &[u8], reset: Option<u64>, bucket: Bucket, counter: usize) -> u64 {
        if hidden_by_reset(reset, bucket) {
            return 0;
        }
        let shard = self.shards.get(&fleet::shard_of(service));
        let others = shard.and_then(|shard| shard.buckets.get(&bucket)).map_or(0, |state| state.others(service, counter));
        // What this host counted under its old id is in the sums as another host's.
        let inherited = self.inherited.get(&bucket).and_then(|counts| counts.get(service)).map_or(0, |counts| counts[counter]);
        others.saturating_sub(inherited)
    }

    /// The other hosts' counts into the fleet rings of the services this host counts.
    fn write_rings(&mut self, store: &Store<'_>, observed: &Observed, now: u64, report: &mut Report) {
        let mut marks = Vec::new();
        // Every ring written again, changed or not, now and then (also when the clock stepped).
        if now.abs_diff(self.rings_written_whole_at) >= RINGS_WRITTEN_WHOLE_EVERY_S {
            self.rings_written.clear();
            self.rings_written_whole_at = now;
        }
        for (service, counters) in &observed.windows {
            let window = counters[0].1;
            let next = window.bucket_at(now) + 1;
            let reset = self.reset_of(service);
            // The ring's buckets are this host's; the sums', Redis's.
            let sum_of =
                |bucket: Bucket, counter: usize| self.others_counted(service, reset, self.on_redis(bucket), counter);
            // What is left out of the service's sums as this segment's under an old id.
            let inherited: u64 = self
                .inherited
                .values()
                .filter_map(|counts| counts.get(service))
                .flat_map(|counts| counts.iter())
                .sum();
            let unchanged = self.rings_written.get(service).is_some_and(|&(written, left_out)| {
                    left_out == inherited &&
                    // The range moved on (not back, nor past the whole ring: a clock that
                    // stepped), and the buckets it moved to hold no sum: they read as 0 as they
                    // are.
                    written <= next
                        && next - written <= store.ring_len() as u64
                        && (written + 1..=next).all(|number| {
                            let bucket =
                                Bucket { duration: window.bucket_duration, start: number * window.bucket_duration };
                            (0..3).all(|counter| sum_of(bucket, counter) == 0)
                        })
                });
            marks.push((service.clone(), (next, inherited)));
            if unchanged {
                continue;
            }
            for (counter, suffix) in self.config.suffixes.iter().enumerate() {
                // A counter this host has not counted yet takes its service's window.
                let window = counters.iter().find(|(c, _)| usize::from(*c) == counter).map_or(window, |(_, w)| *w);
                let mut ring = vec![None; store.ring_len()];
                let mut newest = None;
                for (number, (index, lap)) in store.ring_range(window, now) {
                    let bucket = Bucket { duration: window.bucket_duration, start: number * window.bucket_duration };
                    let others = sum_of(bucket, counter);
                    if others > 0 {
                        newest = Some(bucket.start);
                    }
                    ring[index] = Some((lap, others));
                }
                let key = [&service[..], suffix].concat();
                // Kept as long as the newest of the fleet's buckets is read, never longer: so
                // that the fleet's data never keeps a slot alive on its own.
                let keep_until = newest.map_or(now + 1, |start| start.saturating_add(window.lifetime()));
                match store.write_fleet_buckets(&key, now, keep_until, window, &ring, newest.is_some()) {
                    Ok(()) => report.written += usize::from(newest.is_some()),
                    Err(error) => report.refused.push((key, format!("{:?}", error.error))),
                }
            }
        }
        // Only the services of this sync: the marks of names that left every window go.
        self.rings_written = marks.into_iter().collect();
    }

    /// The other hosts' counts of the services this host has not counted, in `window`, into the
    /// segment's fleet-only region (`FleetOnly`), where a load reads them as it reads a counter's
    /// fleet ring. Its room is the region's own, never the counters': when the fleet
    /// has more services than it holds, those kept are those in the most trouble, rejected
    /// somewhere (a circuit open), then with the most failures, then the busiest.
    fn write_fleet_only(
        &mut self,
        store: &Store<'_>,
        observed: &Observed,
        window: FleetWindow,
        now: u64,
        report: &mut Report,
    ) {
        let Some(region) = store.fleet_only() else { return };
        let duration = window.bucket_duration;
        let (mut range, span) = (store.ring_range(window, now).map(|(number, _)| number), region.shape().span);
        let Some(first) = range.next() else { return };
        let last = range.last().unwrap_or(first);
        // By service: its counts in each bucket of the range, by counter. Only the buckets Redis
        // holds sums of are visited: a sync's work grows with what the fleet counted, not with
        // the window.
        let mut counted: BTreeMap<&[u8], BucketCounts> = BTreeMap::new();
        // By service, its latest reset (see `Syncer::reset_of`), looked up once.
        let mut resets: HashMap<&[u8], Option<u64>> = HashMap::new();
        for shard in self.shards.values() {
            for (bucket, state) in &shard.buckets {
                if bucket.duration != duration || bucket.start % duration != 0 {
                    continue;
                }
                let number = self.local_number(*bucket);
                if !(first..=last).contains(&number) {
                    continue;
                }
                let at = (number - first) as usize;
                for service in state.sums.keys().filter(|service| !observed.windows.contains_key(*service)) {
                    let reset = *resets.entry(service).or_insert_with(|| self.reset_of(service));
                    if hidden_by_reset(reset, *bucket) {
                        continue;
                    }
                    let counts = counted.entry(service).or_insert_with(|| std::array::from_fn(|_| vec![0; span]));
                    for (counter, counts) in counts.iter_mut().enumerate() {
                        counts[at] = state.others(service, counter);
                    }
                }
            }
        }
        // How each ranks: rejected somewhere first, then by failures, then by requests.
        let mut seen: Vec<([u64; 3], &[u8], BucketCounts)> = Vec::new();
        for (service, counts) in counted {
            let [successes, failures, rejections]: [u64; 3] =
                std::array::from_fn(|counter| counts[counter].iter().sum());
            if successes + failures + rejections > 0 {
                seen.push(([u64::from(rejections > 0), failures, successes + failures + rejections], service, counts));
            }
        }
        seen.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
        let services = region.shape().capacity / self.config.suffixes.len();
        report.fleet_only = seen.len().min(services);
        report.fleet_only_left_out = seen.len() - report.fleet_only;
        let entries: Vec<FleetOnlyEntry> = seen
            .into_iter()
            .take(services)
            .flat_map(|(_, service, counts)| {
                self.config.suffixes.iter().zip(counts).map(move |(suffix, counts)| FleetOnlyEntry {
                    key: [service, &suffix[..]].concat(),
                    bucket_duration: window.bucket_duration,
                    first_bucket: first,
                    counts,
                })
            })
            .collect();
        // Written at every sync, even unchanged: whatever someone wrote into the region
        // lasts until the next at most.
        region.publish(&entries);
    }
}

/// Whether the fleet's latest reset of a service, made at `reset` (milliseconds, Redis's clock),
/// hides `bucket`: one that ended before it by more than a stamp may be off
/// (`fleet::stamp_error_ms`), whatever the clock of the host that counted it, so that it holds
/// nothing counted after the reset. (Redis holds nothing of such a bucket since the reset was
/// written; a host's view leaves it out all the same.)
fn hidden_by_reset(reset: Option<u64>, bucket: Bucket) -> bool {
    reset.is_some_and(|at_ms| {
        let end_ms = (bucket.start + bucket.duration).saturating_mul(1000);
        end_ms.saturating_add(fleet::stamp_error_ms(bucket.duration)) <= at_ms
    })
}

/// The start on Redis's clock a bucket of this host's segment is published under, and the figure
/// (how far its clock was ahead of Redis's, ms) it was stamped by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    start: u64,
    figure: i64,
}

/// How often every fleet ring is written again, whether the fleet's counts changed or not.
const RINGS_WRITTEN_WHOLE_EVERY_S: u64 = 2;

/// The start on Redis's clock that a bucket this host counted (`counted`, on its own clock) is
/// published under when its clock is `ahead_ms` ahead of Redis's: less the figure in whole buckets.
fn stamp_of(counted: Bucket, ahead_ms: i64) -> u64 {
    let duration = counted.duration;
    counted.start.saturating_add_signed(-fleet::bucket_shift(ahead_ms, duration)) / duration * duration
}

/// Redis's time in a reply of `TIME`, in unix milliseconds.
fn redis_time_ms(reply: &Value) -> Option<u64> {
    let Value::Array(parts) = reply else { return None };
    let [seconds, micros] = &parts[..] else { return None };
    let (seconds, micros) = (u64::try_from(int(seconds)?).ok()?, u64::try_from(int(micros)?).ok()?);
    Some(seconds.checked_mul(1000)? + micros / 1000)
}

/// How long after its start a bucket of `duration` is read: by this host's windows of that
/// duration (`readers`); by the longest window and the clock bound past it, for another duration.
fn read_for(readers: &BTreeMap<u64, u64>, duration: u64) -> u64 {
    readers.get(&duration).copied().unwrap_or(duration.saturating_mul(LONGEST_READ).saturating_add(CLOCK_BOUND_S))
}

/// The next call's sequence: one more than the segment's last.
fn next_sequence(sequence: &AtomicU64) -> u64 {
    // Relaxed: the sidecar alone writes the word, from this thread; it orders nothing else.
    let next = sequence.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
    if next == 0 || next > MAX_SEQUENCE {
        sequence.store(1, Ordering::Relaxed);
        return 1;
    }
    next
}

/// What this host publishes of a bucket: what it published, raised to what its segment holds,
/// or set to that for the counters it reset; rows of all zeros left out; in service order.
fn publishing(published: Option<&Counts>, seen: Option<&Counts>, resets: &[protocol::Reset]) -> Rows {
    let empty = Counts::new();
    let (published, seen) = (published.unwrap_or(&empty), seen.unwrap_or(&empty));
    let services: BTreeSet<&Vec<u8>> = published.keys().chain(seen.keys()).collect();
    let mut rows = Rows::new();
    for service in services {
        let mask = resets.iter().find(|reset| &reset.service == service).map_or(0, |reset| reset.mask);
        let (before, now) =
            (published.get(service).copied().unwrap_or_default(), seen.get(service).copied().unwrap_or_default());
        let counts: [u64; 3] =
            std::array::from_fn(|c| if mask & (1 << c) != 0 { now[c] } else { before[c].max(now[c]) });
        if counts != [0; 3] {
            rows.push((service.clone(), counts));
        }
    }
    rows
}

fn same_counts(own: &Counts, rows: &Rows) -> bool {
    own.len() == rows.len() && rows.iter().all(|(service, counts)| own.get(service) == Some(counts))
}

fn unexpected(what: &'static str) -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::UnexpectedReturnType, what))
}

fn int(value: &Value) -> Option<i64> {
    match value {
        Value::Int(n) => Some(*n),
        Value::BulkString(bytes) => std::str::from_utf8(bytes).ok()?.parse().ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(rows: &[(&str, [u64; 3])]) -> Counts {
        rows.iter().map(|(service, counts)| (service.as_bytes().to_vec(), *counts)).collect()
    }

    #[test]
    fn what_is_published_only_grows_but_for_a_reset() {
        let published = counts(&[("a", [5, 2, 0]), ("b", [1, 1, 1])]);
        // The clock moved: the segment reads less of a bucket (or none of b): nothing goes down.
        let seen = counts(&[("a", [3, 4, 0])]);
        assert_eq!(
            publishing(Some(&published), Some(&seen), &[]),
            vec![(b"a".to_vec(), [5, 4, 0]), (b"b".to_vec(), [1, 1, 1])]
        );
        // a's failures reset (bit 1): set as the segment holds them; its successes grow as ever.
        assert_eq!(
            publishing(Some(&published), Some(&seen), &[protocol::Reset { service: b"a".to_vec(), mask: 0b010 }]),
            vec![(b"a".to_vec(), [5, 4, 0]), (b"b".to_vec(), [1, 1, 1])],
            "a failure count reset to 4 stays 4"
        );
        assert_eq!(
            publishing(Some(&published), None, &[protocol::Reset { service: b"b".to_vec(), mask: 0b111 }]),
            vec![(b"a".to_vec(), [5, 2, 0])],
            "b reset whole: its row goes"
        );
        assert_eq!(publishing(None, Some(&counts(&[("c", [0, 0, 0])])), &[]), Vec::new(), "no row of zeros");
        assert!(same_counts(&published, &publishing(Some(&published), None, &[])));
        assert!(!same_counts(&published, &publishing(Some(&published), Some(&seen), &[])));
    }

    #[test]
    fn the_sequence_grows_and_starts_again_from_a_word_not_ours() {
        let word = AtomicU64::new(41);
        assert_eq!((next_sequence(&word), next_sequence(&word)), (42, 43));
        word.store(u64::MAX, Ordering::Relaxed);
        assert_eq!(next_sequence(&word), 1, "a word someone else wrote: from 1, and Redis says where to go on");
        word.store(MAX_SEQUENCE + 7, Ordering::Relaxed);
        assert_eq!((next_sequence(&word), word.load(Ordering::Relaxed)), (1, 1));
    }
}
