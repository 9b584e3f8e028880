//! Fleet mode: what the hosts of a fleet share through Redis, and how a host's segment holds
//! it. The sidecar (`ganesha-shm-fleet`) runs the sync; this module is what the sidecar and the
//! extension must agree on, and how the fleet's data is named in Redis.
//!
//! * A host is its segment: a random id drawn when the segment file was made
//!   (`Segment::fleet_host_id`), whatever the sidecar's `--host` label says.
//! * A bucket is named by its start (unix seconds, on the clock of the host that counted it) and
//!   its duration, never by a ring position: hosts with other windows, and hosts whose clocks
//!   differ, never write over each other's buckets.
//! * Redis keeps, per service, the fleet's sum of each bucket ([`sums_key`]) beside each host's
//!   own counts ([`host_key`]), maintained on the server by one script that sets a host's count
//!   and moves the sum by the difference, so that a write repeated or retried changes nothing.
//!   A host reads the sums of the services it counts, and only when they changed, and takes
//!   off what it published itself: a sync costs the same whatever the number of hosts.
//! * The sidecar writes the other hosts' counts into the fleet ring of this host's counter
//!   slots (`Store::write_fleet_buckets`), then records the sync in the header ([`SyncState`]).
//! * A load in fleet mode adds the fleet ring to its own only while the last sync is at most two
//!   intervals old ([`SyncState::is_fresh`]); otherwise the host decides on its own counts.

use std::sync::atomic::{AtomicU64, Ordering};

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
const PREFIX: &str = "ganesha-shm:2:";

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
        self.age_ms(now_ms).is_some_and(|age| age <= self.interval_ms.saturating_mul(2))
    }
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

/// The hash tag of a shard: `{<fleet>:<shard>}`, so that a shard's keys are on one node.
fn shard_tag(fleet: &str, shard: u32) -> String {
    format!("{PREFIX}{{{fleet}:{shard}}}")
}

/// The keys of a shard the sync script keeps: its version (a counter moved by every sync
/// that changes a sum of the shard, so that a host finds in one read that nobody changed
/// anything), its changes (a sorted set of the services, each scored with the version that
/// last changed it, so that a host reads only what changed), and its hosts (a set of the ids
/// of the hosts that published in it, for recounting a sum found wrong).
pub fn shard_keys(fleet: &str, shard: u32) -> [Vec<u8>; 3] {
    let tag = shard_tag(fleet, shard);
    [format!("{tag}:v"), format!("{tag}:c"), format!("{tag}:hosts")].map(String::into_bytes)
}

/// The fleet's sums of one service's buckets: a hash of [`bucket_field`]s, and `v`, the
/// version of the sums, moved by every change of one.
pub fn sums_key(fleet: &str, service: &[u8]) -> Vec<u8> {
    [sums_key_prefix(fleet, shard_of(service)), service.to_vec()].concat()
}

/// What the sums keys of a shard are called, but the service.
pub fn sums_key_prefix(fleet: &str, shard: u32) -> Vec<u8> {
    format!("{}:s:", shard_tag(fleet, shard)).into_bytes()
}

/// What the hosts' keys of a shard are called, but the host's id.
pub fn host_key_prefix(fleet: &str, shard: u32) -> Vec<u8> {
    format!("{}:h:", shard_tag(fleet, shard)).into_bytes()
}

/// One host's own counts of the services of one shard: a hash of `<bucket field>:<service>`.
pub fn host_key(fleet: &str, shard: u32, host_id: u64) -> Vec<u8> {
    [host_key_prefix(fleet, shard), host_id_text(host_id).into_bytes()].concat()
}

/// The bucket and the service a field of a host's key names.
pub fn parse_host_field(field: &[u8]) -> Option<(BucketName, &[u8])> {
    let mut colons = field.iter().enumerate().filter(|(_, &byte)| byte == b':').map(|(at, _)| at);
    let third = colons.nth(2)?;
    Some((parse_bucket_field(&field[..third])?, &field[third + 1..]))
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

/// A bucket of one counter, as Redis names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BucketName {
    /// Seconds.
    pub duration: u64,
    /// The counter's place in the sidecar's `--suffixes` (0 success, 1 failure, 2 rejection).
    pub counter: u8,
    /// Unix seconds, on the clock of the host that counted it.
    pub start: u64,
}

/// The hash field of a bucket: `<duration>:<counter>:<start>`.
pub fn bucket_field(bucket: BucketName) -> String {
    format!("{}:{}:{}", bucket.duration, bucket.counter, bucket.start)
}

/// The bucket a field names; `None` for any other field, the script's own included.
pub fn parse_bucket_field(field: &[u8]) -> Option<BucketName> {
    let text = std::str::from_utf8(field).ok()?;
    let mut parts = text.split(':');
    let number = |part: Option<&str>| -> Option<u64> {
        let part = part?;
        // Digits only: no sign, no spaces, no leading zero but "0", so that one bucket has one name.
        (!part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()) && (part == "0" || !part.starts_with('0')))
            .then(|| part.parse().ok())
            .flatten()
    };
    let (duration, counter, start) = (number(parts.next())?, number(parts.next())?, number(parts.next())?);
    (parts.next().is_none() && duration > 0 && counter < 3).then_some(BucketName {
        duration,
        counter: counter as u8,
        start,
    })
}

/// A count as Redis holds it: a decimal from 0 to [`MAX_COUNT`]; `None` for anything else.
pub fn parse_count(value: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(value).ok()?;
    (!text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse().ok())
        .flatten()
        .filter(|&count| count <= MAX_COUNT)
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
    fn a_bucket_field_parses_to_what_was_written_and_nothing_else_parses() {
        let bucket = BucketName { duration: 2, counter: 1, start: 1_800_000_000 };
        assert_eq!(bucket_field(bucket), "2:1:1800000000");
        assert_eq!(parse_bucket_field(bucket_field(bucket).as_bytes()), Some(bucket));
        for bad in [
            &b""[..],
            b"v",
            b"c",
            b"x:2:1800000000",
            b"0:1:5",
            b"2:3:5",
            b"2:1",
            b"2:1:5:6",
            b"2:1:-5",
            b"2:1:05",
            b"2:1: 5",
            b"2:1:99999999999999999999",
            b"\xff",
        ] {
            assert_eq!(parse_bucket_field(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn a_count_out_of_range_or_not_a_number_is_none() {
        assert_eq!(parse_count(b"0"), Some(0));
        assert_eq!(parse_count(b"42"), Some(42));
        assert_eq!(parse_count(MAX_COUNT.to_string().as_bytes()), Some(MAX_COUNT));
        for bad in [&b""[..], b"-1", b"1.5", b"1e3", b" 1", b"abc"] {
            assert_eq!(parse_count(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
        assert_eq!(parse_count((MAX_COUNT + 1).to_string().as_bytes()), None);
    }

    #[test]
    fn a_services_keys_share_one_hash_tag_and_name_the_host_by_its_id() {
        let service = b"ganesha_db";
        let shard = shard_of(service);
        let tag = format!("ganesha-shm:2:{{shop:{shard}}}");
        assert_eq!(sums_key("shop", service), format!("{tag}:s:ganesha_db").into_bytes());
        assert_eq!(
            shard_keys("shop", shard),
            [format!("{tag}:v"), format!("{tag}:c"), format!("{tag}:hosts")].map(String::into_bytes)
        );
        assert_eq!(host_key("shop", shard, 0xab), format!("{tag}:h:00000000000000ab").into_bytes());
        assert!(host_key("shop", shard, 7).starts_with(&host_key_prefix("shop", shard)));
        assert_eq!(hosts_key("shop"), b"ganesha-shm:2:{shop}:hosts");
        assert_eq!(name_key("shop", "web1"), b"ganesha-shm:2:{shop}:name:web1");
        let shards: std::collections::BTreeSet<u32> = (0..200).map(|i| shard_of(format!("s{i}").as_bytes())).collect();
        assert_eq!(shards.len(), SHARDS as usize, "services spread over every shard");
    }

    #[test]
    fn a_host_field_names_its_bucket_and_service() {
        let bucket = BucketName { duration: 1, counter: 2, start: 1_800_000_000 };
        let field = format!("{}:svc:with:colons", bucket_field(bucket));
        assert_eq!(parse_host_field(field.as_bytes()), Some((bucket, &b"svc:with:colons"[..])));
        assert_eq!(parse_host_field(b"1:2:3:"), Some((BucketName { duration: 1, counter: 2, start: 3 }, &b""[..])));
        assert_eq!(parse_host_field(b"1:2:3"), None);
        assert_eq!(parse_host_field(b"1:9:3:svc"), None);
    }

    #[test]
    fn keys_fields_and_services() {
        let suffixes = [b"_success".to_vec(), b"_failure".to_vec(), b"_rejection".to_vec()];
        assert_eq!(counter_of(b"ganesha_db_rejection", &suffixes), Some((&b"ganesha_db"[..], 2)));
        assert_eq!(counter_of(b"ganesha_db_status", &suffixes), None);
        assert!(valid_name("web-1.eu_west") && !valid_name("") && !valid_name("a b") && !valid_name(&"x".repeat(65)));
    }
}
