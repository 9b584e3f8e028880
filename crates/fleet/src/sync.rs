//! One sync of this host's segment with the fleet's Redis, in one round trip:
//!
//! 1. for each service this host counts, the buckets whose count changed since the last sync,
//!    sent to `sync.lua` (one call per shard of services, see `fleet::SHARDS`), which sets this
//!    host's count of each and moves the fleet's sum by the difference, and returns the sums
//!    of each service another host changed since this host last read them;
//! 2. beside it, this host's mark in the fleet's set of live hosts, and its name's.
//!
//! Then it writes, for each counter of those services, the fleet's sums less what this host
//! published into the segment's fleet ring. What a sync costs depends on this host's services
//! and what changed in them, never on how many hosts the fleet has: no host's data is read but
//! the sums.
//!
//! A host keeps the fleet's counts only for the services it counts itself (with events of its
//! own in the buckets its window may still read): the fleet's data never takes a slot for a
//! service this host does not use, so its own services always come first. A host decides alone
//! for a service it has not counted yet; from the sync after its first event, with the fleet.

use std::collections::{BTreeMap, HashMap};

use ganesha_shm_core::fleet::{self, BucketName, CLOCK_BOUND_S};
use ganesha_shm_core::store::{FleetWindow, Store};
use redis::{Cmd, Value};

use crate::config::Config;
use crate::link::Link;

/// The script every sync runs (see its head for what it takes and gives).
pub const SCRIPT: &str = include_str!("sync.lua");

/// What one sync did, for the log and the benchmark.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    pub round_trips: u32,
    /// Bucket counts sent.
    pub published: usize,
    /// Sums Redis had lost or held wrong, recounted from every host's counts.
    pub republished: usize,
    /// Services synced: those this host counts.
    pub services: usize,
    /// Live hosts in the fleet, this one included.
    pub hosts: usize,
    /// Counters whose fleet ring this sync wrote other hosts' counts into.
    pub written: usize,
    /// Services whose keys could not be used (another type: not ganesha-shm's data), with why.
    pub unusable: Vec<(Vec<u8>, String)>,
    /// Sums hashes with fields that are not a bucket's count, with how many.
    pub bad_fields: Vec<(Vec<u8>, u64)>,
    /// Services other hosts count in buckets of another duration: (service, theirs, this host's).
    pub other_durations: Vec<(Vec<u8>, u64, u64)>,
    /// Buckets not shared: stamped further ahead of Redis's clock than the bound.
    pub rejected: u64,
    /// Seconds this host's clock is ahead of Redis's (negative: behind).
    pub clock_ahead_s: i64,
    /// Ids of other hosts that synced under this host's name.
    pub namesakes: Vec<String>,
    /// Shards whose keys Redis lost since the last sync (flushed): published again next sync.
    pub lost_shards: usize,
    /// Counters whose fleet counts the segment refused, with why.
    pub refused: Vec<(Vec<u8>, String)>,
}

/// What the sidecar keeps of a service this host counts.
struct Service {
    /// The window its counters are counted in.
    window: FleetWindow,
    /// The version of `sums` (`v` in Redis); `None` before its first sync.
    version: Option<String>,
    /// The fleet's sums of its buckets of this host's bucket duration, at `version`.
    sums: BTreeMap<BucketName, u64>,
    /// This host's counts as Redis holds them: what it published.
    published: BTreeMap<BucketName, u64>,
    /// Until when (this host's clock) Redis keeps its sums, as they were last renewed.
    kept_until: u64,
    /// The bucket after the current one when its fleet ring was last written, and whether the
    /// sums or what this host published changed since: a ring whose range only moved on, with
    /// no sum in the buckets it moved to, holds what it should already.
    ring_written: Option<u64>,
    changed: bool,
}

/// What the sidecar keeps of a shard.
#[derive(Default)]
struct Shard {
    /// The shard's version this host last read (`fleet::shard_keys`); `None` before the first
    /// sync of the shard, whose reply gives this host's counts of the shard as Redis holds them.
    version: Option<String>,
    /// Until when (this host's clock) this host's key of the shard must live, and until when
    /// it was last made to.
    kept_until: u64,
    renewed_until: u64,
    /// This host's counts of services it does not count now, as the first sync found them (a
    /// sidecar restarted, or reconnected): what it published of them, should it count them again.
    published: HashMap<Vec<u8>, BTreeMap<BucketName, u64>>,
}

/// One bucket count to send.
struct Update {
    bucket: BucketName,
    expected: Option<u64>,
    count: u64,
}

/// What one service sends in a sync.
struct Sent {
    service: Vec<u8>,
    /// Seconds to keep its sums from now; 0 to leave them.
    keep: u64,
    updates: Vec<Update>,
    /// Buckets no window may read any more: deleted from Redis.
    gone: Vec<BucketName>,
}

/// Buckets a bucket may be read for after it started, at the most: the longest window and the
/// two buckets the rings keep beyond it (see `window::Ring`), whatever this host's window.
const LONGEST_READ: u64 = ganesha_shm_core::window::MAX_BUCKETS + 2;

/// Whether no window may read `bucket` at `now` any more, and the clock bound has passed since
/// (Redis checks it again before it deletes it). Saturating: a start read from Redis may be any
/// number.
fn gone(bucket: &BucketName, now: u64) -> bool {
    bucket.start.saturating_add(bucket.duration.saturating_mul(LONGEST_READ)).saturating_add(CLOCK_BOUND_S) < now
}

/// What the sidecar keeps between syncs.
pub struct Syncer {
    config: Config,
    /// This host's id: its segment's (`Segment::fleet_host_id`).
    host_id: u64,
    services: HashMap<Vec<u8>, Service>,
    shards: HashMap<u32, Shard>,
    /// Redis's time at the last sync (seconds), to mark this host live in Redis's time.
    redis_time: u64,
}

impl Syncer {
    pub fn new(config: Config) -> Self {
        Self { config, host_id: 0, services: HashMap::new(), shards: HashMap::new(), redis_time: 0 }
    }

    /// The segment attached, with its host id: a new segment is another host, which starts
    /// from nothing.
    pub fn attached(&mut self, host_id: u64) {
        if host_id != self.host_id {
            self.host_id = host_id;
            self.forget_published();
        }
    }

    /// Forgets what Redis holds, so that the next sync reads this host's counts back from it
    /// and publishes what differs (after a reconnection: Redis may have restarted empty).
    pub fn forget_published(&mut self) {
        self.services.clear();
        self.shards.clear();
    }

    /// Seconds Redis keeps a bucket beyond the window reading it: two intervals and a second,
    /// so that a host's last counts outlive the sync that would refresh them.
    fn margin(&self) -> u64 {
        (self.config.interval * 2).as_secs() + 1
    }

    /// One sync at unix time `now` (seconds, this host's clock).
    pub fn sync(&mut self, link: &mut Link, store: &Store<'_>, now: u64) -> redis::RedisResult<Report> {
        let mut report = Report::default();
        let margin = self.margin();

        // What this host counted, by service: each counter's window and buckets.
        let mut counted: BTreeMap<Vec<u8>, Vec<(u8, FleetWindow, Vec<(u64, u64)>)>> = BTreeMap::new();
        for own in store.own_buckets(now) {
            if let Some((service, counter)) = fleet::counter_of(&own.key, &self.config.suffixes) {
                counted.entry(service.to_vec()).or_default().push((counter, own.window, own.buckets));
            }
        }
        // A service this host no longer counts is synced no more: its counts in Redis, and the
        // fleet's in its ring, leave the window on their own. What it published of it is kept
        // while Redis may hold it, should it count the service again.
        let shards = &mut self.shards;
        self.services.retain(|service, state| {
            let counts = counted.contains_key(service);
            if !counts {
                let shard = shards.entry(fleet::shard_of(service)).or_default();
                shard.published.insert(service.clone(), std::mem::take(&mut state.published));
            }
            counts
        });
        for shard in self.shards.values_mut() {
            shard.published.retain(|_, published| {
                published.retain(|bucket, _| !gone(bucket, now));
                !published.is_empty()
            });
        }
        report.services = counted.len();

        // 1. What each service sends, by shard.
        let mut sent: BTreeMap<u32, Vec<Sent>> = BTreeMap::new();
        for (service, counters) in &counted {
            let window = counters[0].1;
            let shard = self.shards.entry(fleet::shard_of(service)).or_default();
            let state = self.services.entry(service.clone()).or_insert_with(|| Service {
                window,
                version: None,
                sums: BTreeMap::new(),
                published: shard.published.remove(service).unwrap_or_default(),
                kept_until: 0,
                ring_written: None,
                changed: true,
            });
            if state.window != window {
                // The window changed here (a deploy): the sums of the old duration are not read.
                state.window = window;
                state.sums.clear();
                state.changed = true;
            }
            let mut wanted: BTreeMap<BucketName, u64> = BTreeMap::new();
            for (counter, counter_window, buckets) in counters {
                for &(start, count) in buckets {
                    wanted.insert(
                        BucketName { duration: counter_window.bucket_duration, counter: *counter, start },
                        count,
                    );
                }
            }
            let read_now = |bucket: &BucketName| {
                // Saturating: a start read from Redis may be any number.
                bucket
                    .start
                    .saturating_add(FleetWindow { bucket_duration: bucket.duration, ..window }.lifetime() + margin)
                    >= now
            };
            // Read by no window any more, the clock bound past that (Redis checks it again).
            let gone = |bucket: &BucketName| gone(bucket, now);
            // What it published and no longer counts, in buckets still read (a reset): 0.
            let known = shard.version.is_some();
            let mut updates: Vec<Update> = state
                .published
                .iter()
                .filter(|&(bucket, &count)| count > 0 && !wanted.contains_key(bucket) && read_now(bucket))
                .map(|(&bucket, &count)| (bucket, 0, Some(count)))
                .chain(
                    wanted
                        .iter()
                        .filter(|&(bucket, count)| state.published.get(bucket) != Some(count))
                        .map(|(&bucket, &count)| (bucket, count, state.published.get(&bucket).copied())),
                )
                // Before the shard's first sync this host does not know what Redis holds of it.
                .map(|(bucket, count, published)| Update {
                    bucket,
                    expected: known.then(|| published.unwrap_or(0)),
                    count,
                })
                .collect();
            updates.sort_by_key(|update| update.bucket);
            let mut old: Vec<BucketName> =
                state.published.keys().chain(state.sums.keys()).copied().filter(gone).collect();
            old.sort();
            old.dedup();
            state.published.retain(|bucket, _| !gone(bucket));
            state.sums.retain(|bucket, _| !gone(bucket));

            // Lifetimes: the sums as long as the newest bucket this host reads or wrote, renewed
            // with an eighth more, so that a busy service renews them once per eighth of its
            // lifetime, not every sync; this host's key of the shard as long as its newest bucket.
            let newest_own = wanted.keys().map(|bucket| bucket.start).max().unwrap_or(now);
            let newest_read =
                state.sums.keys().map(|bucket| bucket.start).filter(|&start| start <= now + CLOCK_BOUND_S).max();
            let own_until = newest_own.saturating_add(window.lifetime() + margin);
            let kept_until =
                own_until.max(newest_read.map_or(0, |start| start.saturating_add(window.lifetime() + margin)));
            let keep = if state.version.is_none() || kept_until > state.kept_until {
                state.kept_until = kept_until.saturating_add(window.lifetime() / 8);
                state.kept_until.saturating_sub(now).max(1)
            } else {
                0
            };
            shard.kept_until = shard.kept_until.max(own_until);
            report.published += updates.len();
            // What another host changed comes back unasked, unless this host holds no version
            // of the shard: then every service goes, each with the version this host holds.
            let send_all = shard.version.as_deref().is_none_or(str::is_empty);
            if send_all || state.version.is_none() || keep > 0 || !updates.is_empty() || !old.is_empty() {
                let sending = Sent { service: service.clone(), keep, updates, gone: old };
                sent.entry(fleet::shard_of(service)).or_default().push(sending);
            } else {
                sent.entry(fleet::shard_of(service)).or_default();
            }
        }

        // 2. One pipeline: the shards' script calls, then this host's marks.
        let host_id = fleet::host_id_text(self.host_id);
        let mut commands: Vec<Cmd> = Vec::new();
        let mut firsts: Vec<bool> = Vec::new();
        for (&shard, services) in &sent {
            let state = self.shards.entry(shard).or_default();
            let [version, changes, hosts] = fleet::shard_keys(&self.config.fleet, shard);
            let mut command = redis::cmd("EVALSHA");
            command.arg(&link.script).arg(4 + services.len());
            command.arg(version).arg(changes).arg(hosts).arg(fleet::host_key(&self.config.fleet, shard, self.host_id));
            for service in services {
                command.arg(fleet::sums_key(&self.config.fleet, &service.service));
            }
            // This host's key lives as long as its newest bucket, renewed with an eighth more.
            let keep_own = if state.version.is_none() || state.kept_until > state.renewed_until {
                state.renewed_until = state.kept_until + state.kept_until.saturating_sub(now) / 8;
                state.renewed_until.saturating_sub(now).max(1)
            } else {
                0
            };
            firsts.push(state.version.is_none());
            command
                .arg(&host_id)
                .arg(fleet::host_key_prefix(&self.config.fleet, shard))
                .arg(LONGEST_READ)
                .arg(CLOCK_BOUND_S)
                .arg(state.version.as_deref().unwrap_or(""))
                .arg(keep_own)
                .arg(if state.version.is_none() { "1" } else { "0" })
                .arg(fleet::sums_key_prefix(&self.config.fleet, shard));
            for service in services {
                let version = self.services[&service.service].version.clone().unwrap_or_default();
                command
                    .arg(&service.service[..])
                    .arg(version)
                    .arg(service.keep)
                    .arg(service.updates.len())
                    .arg(service.gone.len());
                for update in &service.updates {
                    command
                        .arg(fleet::bucket_field(update.bucket))
                        .arg(update.bucket.start)
                        .arg(update.expected.map(|count| count.to_string()).unwrap_or_default())
                        .arg(update.count);
                }
                for bucket in &service.gone {
                    command.arg(fleet::bucket_field(*bucket));
                }
            }
            commands.push(command);
        }
        let interval_ms = self.config.interval.as_millis() as u64;
        let redis_time = if self.redis_time == 0 { now } else { self.redis_time };
        let hosts = fleet::hosts_key(&self.config.fleet);
        let live_s = (3 * interval_ms).div_ceil(1000).max(2);
        commands.push(redis::cmd("ZADD").arg(&hosts).arg(redis_time).arg(&host_id).to_owned());
        commands.push(
            redis::cmd("ZREMRANGEBYSCORE")
                .arg(&hosts)
                .arg("-inf")
                .arg(redis_time.saturating_sub(live_s + 1))
                .to_owned(),
        );
        commands.push(redis::cmd("ZCOUNT").arg(&hosts).arg(redis_time.saturating_sub(live_s)).arg("+inf").to_owned());
        commands.push(redis::cmd("EXPIRE").arg(&hosts).arg(live_s + 1).to_owned());
        commands.push(
            redis::cmd("SET")
                .arg(fleet::name_key(&self.config.fleet, &self.config.host))
                .arg(&host_id)
                .arg("PX")
                .arg(3 * interval_ms)
                .arg("GET")
                .to_owned(),
        );
        let replies = link.run(commands)?;
        report.round_trips += 1;

        // What the shards answered.
        let marks = &replies[sent.len()..];
        report.hosts = int(&marks[2]).unwrap_or(1).max(1) as usize;
        if let Some(Value::BulkString(previous)) = marks.get(4) {
            if previous != host_id.as_bytes() {
                report.namesakes.push(String::from_utf8_lossy(previous).into_owned());
            }
        }
        for (((&shard, services), reply), first) in sent.iter().zip(&replies).zip(firsts) {
            let Value::Array(items) = reply else { return Err(unexpected("a shard's reply is not a list")) };
            let [time, version, own, changed, answers @ ..] = &items[..] else {
                return Err(unexpected("a shard's reply lacks the time, version, own counts or changes"));
            };
            let redis_now = int(time).ok_or_else(|| unexpected("no time in a shard's reply"))?;
            self.redis_time = redis_now as u64;
            report.clock_ahead_s = now as i64 - redis_now;
            let state = self.shards.entry(shard).or_default();
            if text(version) == "lost" {
                // Redis lost the shard (flushed): the next sync publishes it all again, as after
                // a reconnection.
                self.shards.remove(&shard);
                self.services.retain(|service, _| fleet::shard_of(service) != shard);
                report.lost_shards += 1;
                continue;
            }
            // An empty version (the shard's is not a counter: not ours) makes the next sync
            // look at every service again.
            state.version = Some(text(version));
            let mut published: HashMap<Vec<u8>, BTreeMap<BucketName, u64>> = HashMap::new();
            if first {
                // This host's counts of the shard as Redis holds them, after this call's writes.
                for (field, count) in counts(own) {
                    if let Some((bucket, service)) = fleet::parse_host_field(&field) {
                        published.entry(service.to_vec()).or_default().insert(bucket, count);
                    }
                }
            }
            for (service, answer) in services.iter().zip(answers) {
                if let Some(mine) = first.then(|| published.remove(&service.service).unwrap_or_default()) {
                    let Some(state) = self.services.get_mut(&service.service) else { continue };
                    state.published = mine;
                    state.changed = true;
                }
                self.take_answer(service, answer, redis_now as u64, first, &mut report)?;
            }
            if first {
                if let Some(state) = self.shards.get_mut(&shard) {
                    state.published = published;
                }
            }
            // The services another host changed, of those this host did not send.
            if let Value::Array(changed) = changed {
                for four in changed.chunks_exact(4) {
                    let [Value::BulkString(service), version, sums, skipped] = four else { continue };
                    if let Some(state) = self.services.get_mut(&service[..]) {
                        state.version = Some(text(version));
                        take_sums(state, service, sums, &mut report);
                        note_skipped(&self.config.fleet, service, skipped, &mut report);
                    }
                }
            }
        }

        // 3. The other hosts' counts into the fleet rings.
        for (service, counters) in &counted {
            // None: a shard Redis lost, whose services start again at the next sync.
            let Some(state) = self.services.get_mut(service) else { continue };
            let next = state.window.bucket_at(now) + 1;
            let duration = state.window.bucket_duration;
            let unchanged = !state.changed
                && state.ring_written.is_some_and(|written| {
                    // The buckets the range moved to hold no sum: they read as 0 as they are.
                    state.sums.keys().all(|bucket| bucket.start < written * duration || bucket.start > next * duration)
                });
            state.ring_written = Some(next);
            state.changed = false;
            if unchanged {
                continue;
            }
            for (counter, suffix) in self.config.suffixes.iter().enumerate() {
                let counter = counter as u8;
                // A counter this host has not counted yet takes its service's window.
                let window = counters.iter().find(|(c, ..)| *c == counter).map_or(state.window, |(_, w, _)| *w);
                let mut ring = vec![None; store.ring_len()];
                let mut newest = None;
                for (bucket, (index, lap)) in store.ring_range(window, now) {
                    let name = BucketName {
                        duration: window.bucket_duration,
                        counter,
                        start: bucket * window.bucket_duration,
                    };
                    let sum = state.sums.get(&name).copied().unwrap_or(0);
                    let others = sum.saturating_sub(state.published.get(&name).copied().unwrap_or(0));
                    if others > 0 {
                        newest = Some(name.start);
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
        Ok(report)
    }

    /// Takes what the script answered for a service: `sent` was sent, and this host's counts
    /// are read back already when the shard's sync is its `first`.
    fn take_answer(
        &mut self,
        sent: &Sent,
        answer: &Value,
        redis_now: u64,
        first: bool,
        report: &mut Report,
    ) -> redis::RedisResult<()> {
        // The version alone: every update applied, nothing to read.
        let brief = [Value::BulkString(Vec::new()), Value::Int(0), Value::Int(0), Value::Int(0), Value::Nil];
        let (version, [error, rejected, recounted, skipped, sums]) = match answer {
            Value::BulkString(_) => (answer, &brief),
            Value::Array(fields) => match &fields[..] {
                [version, rest @ ..] => (
                    version,
                    <&[Value; 5]>::try_from(rest).map_err(|_| unexpected("a service's answer has not 6 items"))?,
                ),
                [] => return Err(unexpected("a service's answer is empty")),
            },
            _ => return Err(unexpected("a service's answer is neither a version nor a list")),
        };
        let error = text(error);
        if !error.is_empty() {
            report.unusable.push((sent.service.clone(), error));
            return Ok(());
        }
        report.rejected += int(rejected).unwrap_or(0) as u64;
        report.republished += int(recounted).unwrap_or(0) as usize;
        note_skipped(&self.config.fleet, &sent.service, skipped, report);
        let Some(state) = self.services.get_mut(&sent.service) else { return Ok(()) };
        let was_known = state.version.is_some();
        let duration = state.window.bucket_duration;
        if !first {
            // What was applied: every update but those stamped past the bound.
            for update in sent.updates.iter().filter(|update| update.bucket.start <= redis_now + CLOCK_BOUND_S) {
                let before = state.published.insert(update.bucket, update.count).unwrap_or(0);
                if was_known && update.bucket.duration == duration {
                    // Another host's change comes with the sums; this host's own moves them alike.
                    let sum = state.sums.entry(update.bucket).or_insert(0);
                    *sum = (*sum + update.count).saturating_sub(before);
                }
            }
            // This host's own counts moved the sums as much as what it published: what the
            // other hosts counted, and so the fleet ring, is as it was.
        }
        state.version = Some(text(version));
        take_sums(state, &sent.service, sums, report);
        Ok(())
    }
}

/// The fields of the sums of `service` the script skipped, when there were any.
fn note_skipped(fleet: &str, service: &[u8], skipped: &Value, report: &mut Report) {
    let skipped = int(skipped).unwrap_or(0) as u64;
    if skipped > 0 {
        report.bad_fields.push((fleet::sums_key(fleet, service), skipped));
    }
}

/// The sums the script gave for `service`, when it gave them: the buckets of this host's
/// duration are kept; those of another noted.
fn take_sums(state: &mut Service, service: &[u8], sums: &Value, report: &mut Report) {
    if !matches!(sums, Value::Array(_)) {
        return;
    }
    let duration = state.window.bucket_duration;
    state.changed = true;
    state.sums.clear();
    for (field, count) in counts(sums) {
        let Some(bucket) = fleet::parse_bucket_field(&field) else { continue };
        if bucket.duration == duration {
            state.sums.insert(bucket, count);
        } else if !report.other_durations.iter().any(|(s, d, _)| s == service && *d == bucket.duration) {
            report.other_durations.push((service.to_vec(), bucket.duration, duration));
        }
    }
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

fn text(value: &Value) -> String {
    match value {
        Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        Value::SimpleString(text) => text.clone(),
        Value::Int(n) => n.to_string(),
        _ => String::new(),
    }
}

/// The fields and counts of a flat field, count list (the script checked their shape; the
/// counts are checked again here, as anything from Redis is); none for the script's false.
fn counts(value: &Value) -> Vec<(Vec<u8>, u64)> {
    let Value::Array(items) = value else { return Vec::new() };
    items
        .chunks_exact(2)
        .filter_map(|pair| match pair {
            [Value::BulkString(field), Value::BulkString(count)] => Some((field.clone(), fleet::parse_count(count)?)),
            _ => None,
        })
        .collect()
}
