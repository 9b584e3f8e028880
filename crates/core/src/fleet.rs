//! Fleet mode: what the hosts of a fleet share through Redis, and how a host's segment holds
//! it. The sidecar (`ganesha-shm-fleet`) runs the sync; this module is what the sidecar and the
//! extension must agree on, and how the fleet's data is named in Redis.
//!
//! * A host is its segment: a random id drawn when the segment file was made
//!   (`Segment::fleet_host_id`), whatever the sidecar's `--host` label says.
//! * A bucket is named by its start (unix seconds, on Redis's clock: see [`bucket_shift`]) and
//!   its duration, never by a ring position: hosts with other windows never write over each
//!   other's buckets, and hosts whose clocks differ count an event in the same bucket.
//! * Redis keeps one hash per shard of the fleet's services ([`shard_key`]): for each bucket,
//!   the fleet's sums of the shard's services and each host's own counts, packed, beside the
//!   shard's birth, version and index, maintained by one script that sets a host's counts and
//!   moves the sums by the difference in one write, so that a call repeated, retried or
//!   delivered late changes nothing, and whatever Redis loses of a shard it loses whole. A host
//!   reads the sums of the buckets that changed, and takes off what it published itself: a sync
//!   costs the same whatever the number of hosts.
//! * The sidecar writes the other hosts' counts into the fleet ring of this host's counter
//!   slots (`Store::write_fleet_buckets`), then records the sync in the header ([`SyncState`]).
//! * A load in fleet mode adds the fleet ring to its own only while the last sync is at most two
//!   intervals old ([`SyncState::is_fresh`]); otherwise the host decides on its own counts.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::defense::{self, Defense};
use crate::reset_log::NotedReset;
use crate::segment::Segment;
use crate::store::{FleetWindow, Store};
use crate::window::MAX_BUCKETS;

/// How far apart the clocks of a fleet's hosts (and Redis's) may be, in seconds: data stamped
/// further ahead of Redis's clock is not shared, and the fields of a bucket stay in Redis this
/// long after every window stopped reading it, so that a host whose clock is behind still reads
/// them as long as its window does.
pub const CLOCK_BOUND_S: u64 = 60;

/// Shards of a fleet's services: the services of one shard are synced by one script call, on
/// one Redis Cluster slot (their keys share the hash tag `{<fleet>:<shard>}`).
pub const SHARDS: u32 = 16;

/// The most a bucket's count may be: what a bucket word holds. A sum read above it is bad data.
pub const MAX_COUNT: u64 = (1 << 28) - 1;

/// What every key of this format starts with; keys of an earlier format are never read.
const PREFIX: &str = "ganesha-shm:4:";

/// What the sidecar last did, as the header keeps it: three words the sidecar writes and any
/// process reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SyncState {
    /// `monotonic_ms()` at the end of the last complete sync; 0 for none (never synced, or the
    /// sidecar stopped and cleared it).
    pub synced_at_ms: u64,
    /// The sidecar's sync interval.
    pub interval_ms: u64,
    /// Hosts that synced in the last three intervals, this one included.
    pub hosts: u64,
    /// Syncs that failed since the segment was made (`ganesha_shm_fleet_sync_errors_total`).
    pub errors: u64,
}

const SYNCED_AT: usize = 0;
const INTERVAL: usize = 1;
/// `[errors: 48][hosts: 16]`.
const HOSTS_AND_ERRORS: usize = 2;
const HOSTS_BITS: u32 = 16;

impl SyncState {
    /// Reads the state from the header's fleet words (`Segment::fleet_words`).
    pub fn read(words: &[AtomicU64]) -> Self {
        // Acquire: pairs with `write`'s Release, so that the interval and the figures read are
        // the ones written with this sync time, or later.
        let synced_at_ms = words[SYNCED_AT].load(Ordering::Acquire);
        // Relaxed: ordered by the Acquire above.
        let packed = words[HOSTS_AND_ERRORS].load(Ordering::Relaxed);
        Self {
            synced_at_ms,
            interval_ms: words[INTERVAL].load(Ordering::Relaxed),
            hosts: packed & ((1 << HOSTS_BITS) - 1),
            errors: packed >> HOSTS_BITS,
        }
    }

    /// Writes the state (the sidecar alone does).
    pub fn write(&self, words: &[AtomicU64]) {
        let packed = (self.errors << HOSTS_BITS) | self.hosts.min((1 << HOSTS_BITS) - 1);
        // Relaxed: published by the Release store of the sync time below.
        words[INTERVAL].store(self.interval_ms, Ordering::Relaxed);
        words[HOSTS_AND_ERRORS].store(packed, Ordering::Relaxed);
        // Release: a reader that sees this sync time sees the figures above, and the fleet
        // rings the sync wrote before it.
        words[SYNCED_AT].store(self.synced_at_ms, Ordering::Release);
    }

    /// Clears the sync time in the header's fleet words, keeping the rest: the fleet's counts
    /// stop deciding at once (the sidecar stopping, or leaving a segment it attached to).
    pub fn clear(words: &[AtomicU64]) {
        Self { synced_at_ms: 0, ..Self::read(words) }.write(words);
    }

    /// Milliseconds since the last sync at `now_ms`, `None` when there was none, or when it
    /// is in the future (a segment file kept across a reboot, whose clock started again).
    pub fn age_ms(&self, now_ms: u64) -> Option<u64> {
        (self.synced_at_ms != 0 && self.synced_at_ms <= now_ms).then(|| now_ms - self.synced_at_ms)
    }

    /// Whether the fleet's counts may decide at `now_ms`: the last sync is at most two
    /// intervals old. Staler counts could keep a host open on evidence it can no longer
    /// refresh, so they are not used at all.
    pub fn is_fresh(&self, now_ms: u64) -> bool {
        if crate::defense::is_off(crate::defense::Defense::Staleness) {
            return self.synced_at_ms != 0;
        }
        self.age_ms(now_ms).is_some_and(|age| age <= self.interval_ms.saturating_mul(2))
    }
}

/// The window an adapter in fleet mode reads in, as it notes it in the header
/// (`Segment::fleet_window_noted`) for the sidecar, which reads the services this host has not
/// counted in it (the fleet-only region) (a host that counted nothing has no counter to tell it):
/// `[window buckets: 16][bucket duration: 48]`, 0 for none. The last noted wins: a host whose
/// configurations differ in their windows sees the fleet-only services in one of them, and decides
/// alone in the others until it counts.
pub fn note_window(word: &AtomicU64, window: FleetWindow) {
    let value = window.window_buckets << 48 | window.bucket_duration.min((1 << 48) - 1);
    // Relaxed (both): a word standing alone. Loaded first, so that the common case, a window
    // noted already, writes nothing (the word's cache line stays shared by every worker).
    if word.load(Ordering::Relaxed) != value {
        word.store(value, Ordering::Relaxed);
    }
}

/// The window noted in the header, if one is, and one an adapter could have noted (whoever can
/// write the segment file could write anything there).
pub fn noted_window(word: &AtomicU64) -> Option<FleetWindow> {
    // Relaxed: a word standing alone.
    let value = word.load(Ordering::Relaxed);
    let window = FleetWindow { bucket_duration: value & ((1 << 48) - 1), window_buckets: value >> 48 };
    (window.bucket_duration > 0 && (1..=MAX_BUCKETS).contains(&window.window_buckets)).then_some(window)
}

/// How far a host's clock must move against Redis's before the sidecar moves the figure it
/// stamps buckets by (`Segment::fleet_clock`): a reply's time is late by its round trip, which
/// must not move a bucket from one sync to the next.
pub const CLOCK_MOVED_MS: i64 = 1000;

/// Offset of the clock word: 0 is no figure, as a new segment has.
const CLOCK_ZERO: u64 = 1 << 62;

/// The figure the sidecar stamps buckets by, as the segment keeps it: how far this host's clock
/// is ahead of Redis's, in milliseconds (negative: behind); `None` before the sidecar measured
/// it, or for a word no sidecar wrote (more than a year either way).
pub fn read_clock(word: &AtomicU64) -> Option<i64> {
    // Relaxed: a word standing alone, which the sidecar alone writes.
    let value = word.load(Ordering::Relaxed);
    let ahead = value.wrapping_sub(CLOCK_ZERO) as i64;
    (value != 0 && ahead.unsigned_abs() <= 366 * 86_400_000).then_some(ahead)
}

/// A figure the sidecar stamped this host's buckets by: how far its clock was ahead of Redis's
/// (milliseconds), for the buckets that start after the bucket of `since_s` (this host's clock,
/// seconds), the furthest its clock had reached when the figure was taken. A bucket takes the
/// figure of the time its host's clock first reached it, so that a bucket counted in before a
/// step of the clock and again after it is shared under one stamp, and a sidecar restarted
/// stamps every bucket the segment holds as it was first shared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockFigure {
    pub since_s: u64,
    pub ahead_ms: i64,
}

/// How many figures the segment keeps: a bucket older than the oldest kept (after that many steps
/// of the clock within a window) takes the oldest.
pub const CLOCK_FIGURES: usize = crate::segment::FLEET_CLOCK_FIGURES_WORDS - 1;

/// The most a figure kept may be, either way: past the bound nothing is shared, and the figure
/// is kept as the bound's limit.
const CLOCK_FIGURE_LIMIT_MS: i64 = (1 << 29) - 1;

impl ClockFigure {
    /// `[since: 34][ahead + 2^29: 30]`, never 0 (a word never written).
    fn packed(self) -> u64 {
        let ahead = self.ahead_ms.clamp(-CLOCK_FIGURE_LIMIT_MS, CLOCK_FIGURE_LIMIT_MS) + (1 << 29);
        self.since_s.min((1 << 34) - 1) << 30 | ahead as u64
    }

    fn unpacked(word: u64) -> Option<Self> {
        let ahead = (word & ((1 << 30) - 1)) as i64 - (1 << 29);
        (word != 0 && ahead.abs() <= CLOCK_FIGURE_LIMIT_MS).then_some(Self { since_s: word >> 30, ahead_ms: ahead })
    }

    /// The figure a bucket of `duration` that starts at `start` (this host's clock) is stamped by,
    /// of `figures` (oldest first): the latest taken before the clock first reached it.
    pub fn of(figures: &[ClockFigure], start: u64, duration: u64) -> Option<i64> {
        let duration = duration.max(1);
        let reached = |figure: &&ClockFigure| start > figure.since_s / duration * duration;
        figures.iter().rev().find(reached).or(figures.first()).map(|figure| figure.ahead_ms)
    }
}

/// The figures the segment keeps (`Segment::fleet_clock_figures`), oldest first: what a sidecar
/// that starts stamps the segment's buckets by. Words no sidecar wrote are left out.
pub fn read_clock_figures(words: &[AtomicU64]) -> Vec<ClockFigure> {
    // Acquire: pairs with `push_clock_figure`'s Release, so that the figures it counts are read.
    let count = words[0].load(Ordering::Acquire);
    (count.saturating_sub(CLOCK_FIGURES as u64)..count)
        // Relaxed: ordered by the Acquire above.
        .filter_map(|ticket| ClockFigure::unpacked(words[1 + (ticket % CLOCK_FIGURES as u64) as usize].load(Ordering::Relaxed)))
        .collect()
}

/// Keeps `figure` in the segment, after the others (the sidecar alone writes them).
pub fn push_clock_figure(words: &[AtomicU64], figure: ClockFigure) {
    // Relaxed: the sidecar alone writes the count.
    let count = words[0].load(Ordering::Relaxed);
    // Relaxed: published by the Release store of the count below.
    words[1 + (count % CLOCK_FIGURES as u64) as usize].store(figure.packed(), Ordering::Relaxed);
    // Release: a reader that sees this count sees the figure written above.
    words[0].store(count.wrapping_add(1), Ordering::Release);
}

/// Notes a reset made on this host at `now_ms` (unix milliseconds, its clock), `monotonic_ms` on
/// its monotonic clock ([`monotonic_ms`]), in the segment's reset log (`ResetLog`), for the
/// sidecar to share with the fleet: of the service whose key stem is `key`, or with `every` of
/// every service whose stem starts with it. The sidecar dates it on Redis's clock
/// ([`reset_on_redis_clock`]). `false` when the key is longer than the log holds; `true` without
/// fleet mode, which has no log.
pub fn note_reset(store: &Store<'_>, key: &[u8], every: bool, now_ms: u64, monotonic_ms: u64) -> bool {
    let Some(log) = store.reset_log() else { return true };
    log.note(&NotedReset { time_ms: now_ms, monotonic_ms, key: key.to_vec(), every })
}

/// When `reset` was made on Redis's clock (unix milliseconds), as the sidecar dates it in a sync
/// in which this host's clock is `ahead_ms` ahead of Redis's and `now_offset_ms` ahead of its
/// monotonic clock: by the monotonic clock, which no step of the clock moves, so that a step
/// between the sidecar's last measure and the reset, or between the reset and this sync, does
/// not move it (a reset dated early keeps counts of before it; dated late, it takes counts of
/// after it). A reset whose monotonic time is not this boot's (a segment file kept across a
/// reboot, or copied from another machine: its clock ran apart from this one's by more than the
/// bound) is dated by its clock time, as the clock is now.
pub fn reset_on_redis_clock(reset: &NotedReset, ahead_ms: i64, now_offset_ms: i64, monotonic_now_ms: u64) -> u64 {
    let offset_then = reset.time_ms as i64 - reset.monotonic_ms as i64;
    let this_boot = reset.monotonic_ms <= monotonic_now_ms
        && offset_then.abs_diff(now_offset_ms) <= CLOCK_BOUND_S * 1000
        && !defense::is_off(Defense::ResetMonotonic);
    let time_ms = if this_boot { reset.monotonic_ms as i64 + now_offset_ms } else { reset.time_ms as i64 };
    u64::try_from(time_ms - ahead_ms).unwrap_or(0)
}

/// What [`take_copy`] found of a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Copy {
    /// The segment is in the file it records (or has no file): nothing to take.
    Own,
    /// It was a copy, and this process took it: it is another host from now on.
    Taken,
    /// Another process claimed it, and has not finished taking it (or died while it did).
    BeingTaken,
}

/// A segment mapped from another file than the one it records (`Segment::fleet_file`) is a copy
/// of a segment (an image of the machine, a snapshot, a restore), whose original holds every
/// count it holds, under the same id, and publishes them. The first process that maps the copy
/// takes it, before anything counts in it: it hands every count the copy holds to the fleet
/// rings (`Store::hand_own_counts_to_fleet`), as the old id's, which this host reads among the
/// other hosts' from then on; gives the segment a new id, every count of whose own rings is then
/// its own; and notes the file, which ends its claim. So the events counted on the copy before its
/// sidecar's first sync are the new id's, as those after; and none is published twice.
/// `file` is the file this process mapped (`Segment::file`; `(0, 0)` for none), `now` its time.
pub fn take_copy(segment: &Segment, store: &Store<'_>, file: (u64, u64), now: u64) -> Copy {
    if !store.has_fleet() || file == (0, 0) || defense::is_off(Defense::CopyTaken) {
        return Copy::Own;
    }
    let recorded = segment.fleet_file();
    if segment.copy_being_taken() {
        return Copy::BeingTaken;
    }
    if recorded == file || recorded == (0, 0) {
        return Copy::Own;
    }
    if !segment.claim_copy(recorded) {
        // Another process claimed it since, or took it already.
        return if segment.copy_being_taken() { Copy::BeingTaken } else { Copy::Own };
    }
    finish_taking_copy(segment, store, file, now);
    Copy::Taken
}

/// Takes the copy that a process claimed (`take_copy`): by that process, or by the sidecar when
/// the claim outlived the time taking it takes (the process died while it took it); then the
/// events other processes counted meanwhile go to the old id too, as before the copy was taken.
pub fn finish_taking_copy(segment: &Segment, store: &Store<'_>, file: (u64, u64), now: u64) {
    store.hand_own_counts_to_fleet(now, CLOCK_BOUND_S);
    segment.renew_fleet_host_id(0);
    segment.note_fleet_file(file);
}

/// Keeps `ahead_ms` in the clock word (the sidecar alone does).
pub fn write_clock(word: &AtomicU64, ahead_ms: i64) {
    // Relaxed: see `read_clock`.
    word.store((ahead_ms as u64).wrapping_add(CLOCK_ZERO), Ordering::Relaxed);
}

/// Seconds a host whose clock is `ahead_ms` ahead of Redis's takes from the start of each of its
/// buckets of `duration` to name it on Redis's clock (and adds to a bucket Redis names, to read
/// it on its own): the figure rounded to whole buckets, so that every host's buckets of one
/// duration start at the same seconds, and an event counted anywhere at one moment lands in one
/// bucket, within half a bucket and [`CLOCK_MOVED_MS`] of when it came on Redis's clock.
pub fn bucket_shift(ahead_ms: i64, duration: u64) -> i64 {
    let span = (duration.max(1) as i64).saturating_mul(1000);
    let buckets = (ahead_ms + span / 2).div_euclid(span);
    buckets.saturating_mul(duration as i64)
}

/// When a bucket of this host's that it stamped `bucket` began, on Redis's clock (unix
/// milliseconds), its clock `ahead_ms` ahead of Redis's: the stamp less what the rounding of
/// [`bucket_shift`] left (the sync script judges every host's buckets against a reset so).
pub fn began_at_ms(bucket: Bucket, ahead_ms: i64) -> i64 {
    let shift = bucket_shift(ahead_ms, bucket.duration);
    (bucket.start as i64 + shift).saturating_mul(1000) - ahead_ms
}

/// Milliseconds a bucket of `duration` named on Redis's clock may be off from when its events
/// came: half a bucket of rounding ([`bucket_shift`]), and the clock's move before its figure
/// moves.
pub fn stamp_error_ms(duration: u64) -> u64 {
    duration.saturating_mul(500) + CLOCK_MOVED_MS as u64
}

/// Milliseconds of CLOCK_MONOTONIC: the same clock for every process of the host (containers
/// included), which no one steps, so that staleness is judged alike by the sidecar and PHP.
pub fn monotonic_ms() -> u64 {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is a valid, writable timespec; CLOCK_MONOTONIC exists on every Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    now.tv_sec as u64 * 1000 + now.tv_nsec as u64 / 1_000_000
}

/// The shard of `service` (FNV-1a): which script call syncs it, on which Cluster slot.
pub fn shard_of(service: &[u8]) -> u32 {
    let hash = service.iter().fold(0x811c_9dc5_u32, |hash, &byte| (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193));
    hash % SHARDS
}

/// This host's id as Redis keys and logs show it: 16 hex digits.
pub fn host_id_text(id: u64) -> String {
    format!("{id:016x}")
}

/// The one key of a shard: a hash of everything the fleet keeps of the shard's services
/// (see the sync script, `crates/fleet/src/sync.lua`), tagged `{<fleet>:<shard>}` so that a
/// Redis Cluster keeps each shard on one node.
pub fn shard_key(fleet: &str, shard: u32) -> Vec<u8> {
    format!("{PREFIX}{{{fleet}:{shard}}}").into_bytes()
}

/// The fleet's live hosts: a sorted set of host ids, each scored with Redis's time of its last
/// sync.
pub fn hosts_key(fleet: &str) -> Vec<u8> {
    format!("{PREFIX}{{{fleet}}}:hosts").into_bytes()
}

/// Which host last synced under the label `name`, for a short while: how two hosts given one
/// `--host` find out.
pub fn name_key(fleet: &str, name: &str) -> Vec<u8> {
    format!("{PREFIX}{{{fleet}}}:name:{name}").into_bytes()
}

/// A bucket, as Redis names it: its duration and its start, whatever ring holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bucket {
    /// Seconds.
    pub duration: u64,
    /// Unix seconds, on Redis's clock (as the host that counted it shifted it: [`bucket_shift`]).
    pub start: u64,
}

/// The name of a bucket in its shard's hash: `<duration>:<start>`.
pub fn bucket_field(bucket: Bucket) -> String {
    format!("{}:{}", bucket.duration, bucket.start)
}

/// The bucket a field names; `None` for anything else.
pub fn parse_bucket_field(field: &[u8]) -> Option<Bucket> {
    let text = std::str::from_utf8(field).ok()?;
    let (duration, start) = text.split_once(':')?;
    let number = |part: &str| -> Option<u64> {
        // Digits only: no sign, no spaces, no leading zero but "0", so that one bucket has one name.
        (!part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()) && (part == "0" || !part.starts_with('0')))
            .then(|| part.parse().ok())
            .flatten()
    };
    let (duration, start) = (number(duration)?, number(start)?);
    (duration > 0).then_some(Bucket { duration, start })
}

/// The counter a key is, of its service: the key without the first of `suffixes` it ends
/// with, and that suffix's place; `None` for a key with none of them.
pub fn counter_of<'k>(key: &'k [u8], suffixes: &[Vec<u8>]) -> Option<(&'k [u8], u8)> {
    suffixes
        .iter()
        .enumerate()
        .find_map(|(index, suffix)| key.strip_suffix(&suffix[..]).map(|service| (service, index as u8)))
}

/// Whether `name` may name a host or a fleet: 1 to 64 of `A-Z a-z 0-9 . _ -`.
pub fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.bytes().all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reset_is_noted_with_both_clocks_and_dated_on_redis_clock_by_the_monotonic_one() {
        use crate::segment::Settings;
        use crate::store::Layout;
        let settings = Settings { max_services: 4, max_key_length: 64, max_buckets: 60, fleet: true };
        let segment = Segment::create_anonymous(Layout::regions(settings)).unwrap();
        let store = Store::new(&segment);
        // This host booted at 1_800_000_000_000 by its clock, then 20 s ahead of Redis's.
        let (booted, made) = (1_800_000_000_000_u64, 50_000_u64);
        assert!(note_reset(&store, b"ganesha_a", false, booted + made, made));
        assert!(!note_reset(&store, &[b'k'; 65], false, 1, 1), "a key longer than the log holds");
        let noted = store.reset_log().unwrap().read();
        let reset = NotedReset { time_ms: booted + made, monotonic_ms: made, key: b"ganesha_a".to_vec(), every: false };
        assert_eq!(noted, vec![reset.clone()]);
        let on_redis = booted + made - 20_000;
        // No step: its clock's time less the figure.
        let offset = booted as i64;
        assert_eq!(reset_on_redis_clock(&reset, 20_000, offset, made + 900), on_redis);
        // The clock stepped back 30 s before the reset, and the sidecar measured the figure again
        // since: the reset's clock time is 30 s early, its monotonic time is not.
        let stepped = NotedReset { time_ms: booted + made - 30_000, ..reset.clone() };
        assert_eq!(reset_on_redis_clock(&stepped, -10_000, offset - 30_000, made + 900), on_redis);
        // The clock stepped forward 15 s after the reset, and the sidecar's figure moved with it.
        assert_eq!(reset_on_redis_clock(&reset, 35_000, offset + 15_000, made + 900), on_redis);
        // Another boot's monotonic time (ahead of this one's, or its clock apart by more than the
        // bound): dated by its clock time, less the figure.
        assert_eq!(reset_on_redis_clock(&reset, 20_000, offset, made - 1), on_redis);
        assert_eq!(reset_on_redis_clock(&reset, 20_000, offset + 3_600_000, made + 900), on_redis);
    }

    #[test]
    fn a_bucket_is_stamped_by_the_figure_taken_before_the_clock_first_reached_it() {
        let words: Vec<AtomicU64> = (0..crate::segment::FLEET_CLOCK_FIGURES_WORDS).map(|_| AtomicU64::new(0)).collect();
        assert_eq!(read_clock_figures(&words), vec![], "a new segment has none");
        assert_eq!(ClockFigure::of(&[], 100, 10), None);
        // Taken at first; then the clock, at 1,000 s, stepped back 30 s; then, at 1,200 s, 20 s
        // forward.
        let figures = [
            ClockFigure { since_s: 0, ahead_ms: 35_000 },
            ClockFigure { since_s: 1_000, ahead_ms: 5_000 },
            ClockFigure { since_s: 1_200, ahead_ms: 25_000 },
        ];
        for figure in figures {
            push_clock_figure(&words, figure);
        }
        assert_eq!(read_clock_figures(&words), figures.to_vec());
        let of = |start| ClockFigure::of(&figures, start, 10);
        assert_eq!(of(990), Some(35_000), "counted in before the step back");
        assert_eq!(of(1_000), Some(35_000), "the bucket the clock was in at the step back");
        assert_eq!(of(1_010), Some(5_000), "reached after it");
        assert_eq!(of(1_190), Some(5_000));
        assert_eq!(of(1_200), Some(5_000), "the bucket the clock was in at the step forward");
        assert_eq!(of(1_210), Some(25_000));
        // The segment keeps the latest few: an older bucket takes the oldest kept.
        for since_s in 2_000..2_000 + CLOCK_FIGURES as u64 {
            push_clock_figure(&words, ClockFigure { since_s, ahead_ms: -(since_s as i64) });
        }
        let kept = read_clock_figures(&words);
        assert_eq!(kept.len(), CLOCK_FIGURES);
        assert_eq!(ClockFigure::of(&kept, 990, 10), Some(-2_000));
        // Whoever can write the segment file can write anything here: figures within the limit.
        words[1].store(u64::MAX, Ordering::Relaxed);
        words[0].store(u64::MAX, Ordering::Relaxed);
        assert!(read_clock_figures(&words).iter().all(|figure| figure.ahead_ms.abs() < 1 << 29));
    }

    #[test]
    fn the_first_process_to_map_a_copy_takes_it_as_another_host_and_the_others_find_it_taken() {
        use crate::segment::Settings;
        use crate::store::Layout;
        use crate::window::Window;
        let settings = Settings { max_services: 4, max_key_length: 64, max_buckets: 60, fleet: true };
        let segment = Segment::create_anonymous(Layout::regions(settings)).unwrap();
        let store = Store::new(&segment);
        let (window, now) = (Window::new(60, Some(10), 60).unwrap(), 1_000_000);
        store.increment(b"k", &window, now).unwrap();
        store.increment(b"k", &window, now).unwrap();
        store.note_fleet_window(b"k", &window).unwrap();
        segment.note_fleet_file((1, 10));
        let id = segment.fleet_host_id();
        assert_eq!(take_copy(&segment, &store, (1, 10), now), Copy::Own, "in the file it records");
        assert_eq!(take_copy(&segment, &store, (0, 0), now), Copy::Own, "no file");
        assert_eq!(store.load_with_fleet(b"k", &window, now).unwrap(), (2, 0));

        // Copied into (1, 11): a process claims it, and has not finished.
        assert!(segment.claim_copy((1, 10)));
        assert!(!segment.claim_copy((1, 10)), "one claim");
        assert_eq!(take_copy(&segment, &store, (1, 11), now), Copy::BeingTaken);
        assert_eq!(segment.fleet_host_id(), id, "nothing taken by the others");
        finish_taking_copy(&segment, &store, (1, 11), now);
        let taken = segment.fleet_host_id();
        assert_ne!(taken, id);
        assert_eq!(segment.fleet_since().load(Ordering::Relaxed), 0, "all its own counts are the new id's");
        assert_eq!(segment.fleet_file(), (1, 11));
        assert_eq!(store.load_with_fleet(b"k", &window, now).unwrap(), (0, 2), "the old id's, read as the fleet's");
        assert_eq!(take_copy(&segment, &store, (1, 11), now), Copy::Own, "taken once");

        // Copied again, into another device's file: taken by the first process, once.
        store.increment(b"k", &window, now).unwrap();
        assert_eq!(take_copy(&segment, &store, (2, 11), now), Copy::Taken);
        assert_eq!(take_copy(&segment, &store, (2, 11), now), Copy::Own);
        assert!(segment.fleet_host_id() != taken && segment.fleet_file() == (2, 11));
        assert_eq!(store.load_with_fleet(b"k", &window, now).unwrap(), (0, 3));
    }

    #[test]
    fn a_sync_is_fresh_for_two_intervals() {
        let state = SyncState { synced_at_ms: 10_000, interval_ms: 1_000, hosts: 3, errors: 0 };
        assert!(state.is_fresh(10_000) && state.is_fresh(12_000));
        assert!(!state.is_fresh(12_001));
        assert!(!state.is_fresh(9_999), "a sync in the future is another boot's");
        assert!(!SyncState { synced_at_ms: 0, ..state }.is_fresh(0));
    }

    #[test]
    fn the_sync_state_round_trips_through_the_header_words() {
        let words: Vec<AtomicU64> = (0..3).map(|_| AtomicU64::new(0)).collect();
        assert_eq!(SyncState::read(&words), SyncState::default());
        let state = SyncState { synced_at_ms: 123, interval_ms: 1_000, hosts: 3, errors: 1 << 40 };
        state.write(&words);
        assert_eq!(SyncState::read(&words), state);
    }

    #[test]
    fn a_noted_window_reads_back_and_garbage_reads_as_none() {
        let word = AtomicU64::new(0);
        assert_eq!(noted_window(&word), None);
        let window = FleetWindow { bucket_duration: 2, window_buckets: 60 };
        note_window(&word, window);
        assert_eq!(noted_window(&word), Some(window));
        for garbage in [u64::MAX, 5, 121 << 48 | 2, 60 << 48] {
            word.store(garbage, Ordering::Relaxed);
            assert_eq!(noted_window(&word), None, "{garbage:#x}");
        }
    }

    #[test]
    fn a_clock_figure_round_trips_and_garbage_reads_as_none() {
        let word = AtomicU64::new(0);
        assert_eq!(read_clock(&word), None, "a new segment has none");
        for ahead in [0, 1, -1, 20_000, -59_999, 366 * 86_400_000] {
            write_clock(&word, ahead);
            assert_eq!(read_clock(&word), Some(ahead));
        }
        for garbage in [u64::MAX, 1, CLOCK_ZERO - 366 * 86_400_000 - 1] {
            word.store(garbage, Ordering::Relaxed);
            assert_eq!(read_clock(&word), None, "{garbage:#x}");
        }
    }

    #[test]
    fn a_shift_is_whole_buckets_and_within_half_a_bucket_of_the_clock() {
        assert_eq!(bucket_shift(0, 1), 0);
        assert_eq!(bucket_shift(20_400, 1), 20);
        assert_eq!(bucket_shift(20_600, 1), 21);
        assert_eq!(bucket_shift(-20_400, 1), -20);
        assert_eq!(bucket_shift(-20_600, 1), -21);
        assert_eq!(bucket_shift(-4_999, 10), 0);
        assert_eq!(bucket_shift(-5_000, 10), 0);
        assert_eq!(bucket_shift(-5_001, 10), -10);
        assert_eq!(bucket_shift(14_000, 10), 10);
        for duration in [1, 2, 7, 60] {
            for ahead in (-65_000..65_000).step_by(333) {
                let shift = bucket_shift(ahead, duration);
                assert_eq!(shift % duration as i64, 0, "{ahead} ms, {duration} s buckets");
                assert!((shift * 1000 - ahead).unsigned_abs() <= duration * 500, "{ahead} ms, {duration} s buckets");
            }
        }
    }

    #[test]
    fn a_bucket_began_when_its_host_counted_it_on_redis_clock() {
        // A host 20.4 s ahead stamps its bucket 1020 (its clock) as 1000: it began at 999.6 s.
        assert_eq!(began_at_ms(Bucket { duration: 1, start: 1000 }, 20_400), 999_600);
        assert_eq!(began_at_ms(Bucket { duration: 1, start: 1000 }, -20_600), 999_600);
        assert_eq!(began_at_ms(Bucket { duration: 10, start: 1000 }, 0), 1_000_000);
    }

    #[test]
    fn a_bucket_field_parses_to_what_was_written_and_nothing_else_parses() {
        let bucket = Bucket { duration: 2, start: 1_800_000_000 };
        assert_eq!(bucket_field(bucket), "2:1800000000");
        assert_eq!(parse_bucket_field(bucket_field(bucket).as_bytes()), Some(bucket));
        for bad in [
            &b""[..],
            b"v",
            b"x:1800000000",
            b"0:5",
            b"2",
            b"2:1:5",
            b"2:-5",
            b"2:05",
            b"2: 5",
            b"2:99999999999999999999",
            b"\xff",
        ] {
            assert_eq!(parse_bucket_field(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn a_shards_key_carries_its_hash_tag() {
        let shard = shard_of(b"ganesha_db");
        assert_eq!(shard_key("shop", shard), format!("ganesha-shm:4:{{shop:{shard}}}").into_bytes());
        assert_eq!(hosts_key("shop"), b"ganesha-shm:4:{shop}:hosts");
        assert_eq!(name_key("shop", "web1"), b"ganesha-shm:4:{shop}:name:web1");
        let shards: std::collections::BTreeSet<u32> = (0..200).map(|i| shard_of(format!("s{i}").as_bytes())).collect();
        assert_eq!(shards.len(), SHARDS as usize, "services spread over every shard");
    }

    #[test]
    fn keys_fields_and_services() {
        let suffixes = [b"_success".to_vec(), b"_failure".to_vec(), b"_rejection".to_vec()];
        assert_eq!(counter_of(b"ganesha_db_rejection", &suffixes), Some((&b"ganesha_db"[..], 2)));
        assert_eq!(counter_of(b"ganesha_db_status", &suffixes), None);
        assert!(valid_name("web-1.eu_west") && !valid_name("") && !valid_name("a b") && !valid_name(&"x".repeat(65)));
    }
}
