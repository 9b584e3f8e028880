//! Fleet mode: what the hosts of a fleet share through Redis, and how a host's segment holds
//! it. The sidecar (`ganesha-shm-fleet`) runs the sync; this module is what the sidecar and the
//! extension must agree on.
//!
//! * Each host publishes its counters' own buckets ([`Published`]), one Redis hash per service
//!   ([`redis_key`]), one field per host and counter ([`field`]).
//! * Each host's sidecar sums what the *other* hosts published, bucket by bucket ([`merge`]),
//!   into the fleet ring of its own counter slots (`Store::write_fleet_buckets`), then records
//!   the sync in the header ([`SyncState`]).
//! * A load in fleet mode adds the fleet ring to its own only while the last sync is at most two
//!   intervals old ([`SyncState::is_fresh`]); otherwise the host decides on its own counts.
//!
//! Buckets travel as (ring position, lap, count), never as times: a bucket's number is
//! `time / bucket duration` on the host that counted it, and every host's loads check a lap
//! against their own window, so the sidecar needs to know no window at all.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::window::Lap;

/// The format of a published value; a reader skips a value of another version.
pub const FORMAT: &str = "1";

/// What the sidecar last did, as the header keeps it: three words the sidecar writes and any
/// process reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SyncState {
    /// `monotonic_ms()` at the end of the last complete sync; 0 for none (never synced, or the
    /// sidecar stopped and cleared it).
    pub synced_at_ms: u64,
    /// The sidecar's sync interval.
    pub interval_ms: u64,
    /// Hosts whose data the last sync read, this one included.
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

/// One host's buckets of one counter, as published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    /// The publisher's ring length: hosts whose rings differ (another `ganesha_shm.max_buckets`)
    /// cannot add their buckets.
    pub ring_len: u64,
    /// Until when the publisher keeps the counter (unix seconds): after it the value is
    /// removed from Redis.
    pub kept_until: u64,
    /// `(ring position, lap, count)`.
    pub buckets: Vec<(usize, Lap, u64)>,
}

impl Published {
    /// `"1 <ring length> <kept until> <position>:<lap>:<count> ..."`.
    pub fn encode(&self) -> String {
        let mut text = format!("{FORMAT} {} {}", self.ring_len, self.kept_until);
        for (position, lap, count) in &self.buckets {
            text.push_str(&format!(" {position}:{}:{count}", lap.number()));
        }
        text
    }

    /// The value `encode` made, checked: a position within the ring, a count and a lap in
    /// their ranges. Anything else is an error naming what is wrong, never a panic.
    pub fn decode(bytes: &[u8]) -> Result<Self, String> {
        let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8".to_string())?;
        let mut words = text.split(' ');
        match words.next() {
            Some(FORMAT) => {}
            other => return Err(format!("format {:?}, not {FORMAT}", other.unwrap_or(""))),
        }
        let number = |word: Option<&str>, what: &str| -> Result<u64, String> {
            word.and_then(|word| word.parse().ok()).ok_or_else(|| format!("no {what}"))
        };
        let ring_len = number(words.next(), "ring length")?;
        if !(1..=1 << 16).contains(&ring_len) {
            return Err(format!("ring length {ring_len} out of range"));
        }
        let kept_until = number(words.next(), "lifetime")?;
        let mut buckets = Vec::new();
        for word in words {
            let mut parts = word.split(':');
            let position = number(parts.next(), "bucket position")?;
            let lap = number(parts.next(), "bucket lap")?;
            let count = number(parts.next(), "bucket count")?;
            if parts.next().is_some() || position >= ring_len || Lap::new(lap).number() != lap {
                return Err(format!("bucket {word:?} out of range"));
            }
            buckets.push((position as usize, Lap::new(lap), count));
        }
        Ok(Self { ring_len, kept_until, buckets })
    }
}

/// The fleet ring of one counter from what the other hosts published: at each position the
/// newest lap any of them has there, with the sum of their counts on that lap (counts of an
/// older lap at the same position are buckets that left every window long ago).
pub fn merge<'p>(ring_len: usize, published: impl IntoIterator<Item = &'p Published>) -> Vec<Option<(Lap, u64)>> {
    let mut ring: Vec<Option<(Lap, u64)>> = vec![None; ring_len];
    for value in published {
        if value.ring_len != ring_len as u64 {
            continue;
        }
        for &(position, lap, count) in &value.buckets {
            let slot = &mut ring[position];
            *slot = match *slot {
                Some((newest, sum)) if newest == lap => Some((lap, sum.saturating_add(count))),
                Some((newest, sum)) if !lap.is_after(newest) => Some((newest, sum)),
                _ => Some((lap, count)),
            };
        }
    }
    ring
}

/// The Redis key of the hash holding every host's buckets of one service:
/// `ganesha-shm:{<fleet>:<service>}`. The braces are Redis Cluster's hash tag: every key of a
/// service is on one node.
pub fn redis_key(fleet: &str, service: &[u8]) -> Vec<u8> {
    [b"ganesha-shm:{", fleet.as_bytes(), b":", service, b"}"].concat()
}

/// The Redis key of the fleet's index of services: a sorted set of service names, each scored
/// with the unix time until which some host keeps it.
pub fn index_key(fleet: &str) -> Vec<u8> {
    format!("ganesha-shm:{fleet}:services").into_bytes()
}

/// The hash field of one host's counter: `<host> <counter key>` (a host name has no space).
pub fn field(host: &str, key: &[u8]) -> Vec<u8> {
    [host.as_bytes(), b" ", key].concat()
}

/// The host and counter key of a field.
pub fn parse_field(field: &[u8]) -> Option<(&[u8], &[u8])> {
    let space = field.iter().position(|&byte| byte == b' ')?;
    Some((&field[..space], &field[space + 1..]))
}

/// The service a counter key belongs to: the key without the first of `suffixes` it ends with
/// (Ganesha's `_success`, `_failure`, `_rejection` unless its storage keys were changed), or
/// the whole key.
pub fn service_of<'k>(key: &'k [u8], suffixes: &[Vec<u8>]) -> &'k [u8] {
    suffixes.iter().find_map(|suffix| key.strip_suffix(&suffix[..])).unwrap_or(key)
}

/// Whether `name` may name a host or a fleet: 1 to 64 of `A-Z a-z 0-9 . _ -`.
pub fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.bytes().all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn published(ring_len: u64, buckets: &[(usize, u64, u64)]) -> Published {
        Published {
            ring_len,
            kept_until: 1_000,
            buckets: buckets.iter().map(|&(position, lap, count)| (position, Lap::new(lap), count)).collect(),
        }
    }

    #[test]
    fn a_published_value_decodes_to_what_was_encoded() {
        let value = published(122, &[(0, 7, 3), (121, 1_048_575, 268_435_455)]);
        assert_eq!(value.encode(), "1 122 1000 0:7:3 121:1048575:268435455");
        assert_eq!(Published::decode(value.encode().as_bytes()), Ok(value));
        assert_eq!(Published::decode(b"1 3 5"), Ok(published(3, &[])).map(|p| Published { kept_until: 5, ..p }));
    }

    #[test]
    fn a_bad_value_is_an_error_never_a_panic() {
        for bad in [
            &b""[..],
            b"2 3 5",
            b"1",
            b"1 0 5",
            b"1 3",
            b"1 3 5 3:1:1",
            b"1 3 5 0:1048576:1",
            b"1 3 5 0:1",
            b"1 3 5 0:1:1:1",
            b"1 3 5 0:1:-1",
            b"1 3 5  0:1:1",
            b"\xff",
            b"1 99999999999999999999 5",
        ] {
            assert!(Published::decode(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn merging_sums_the_newest_lap_at_each_position() {
        let a = published(4, &[(0, 5, 2), (1, 5, 1), (2, 4, 9)]);
        let b = published(4, &[(0, 5, 3), (1, 4, 100), (2, 5, 1)]);
        let other_ring = published(5, &[(3, 5, 1_000)]);
        let ring = merge(4, [&a, &b, &other_ring]);
        assert_eq!(
            ring,
            vec![Some((Lap::new(5), 5)), Some((Lap::new(5), 1)), Some((Lap::new(5), 1)), None],
            "position 1 and 2: lap 4 is older than lap 5, whichever came first; a ring of 5 is left out"
        );
    }

    #[test]
    fn laps_compare_as_serial_numbers_across_the_wrap() {
        assert!(Lap::new(0).is_after(Lap::new(1_048_575)));
        assert!(!Lap::new(1_048_575).is_after(Lap::new(0)));
        assert!(!Lap::new(7).is_after(Lap::new(7)));
        let ring = merge(1, [&published(1, &[(0, 1_048_575, 1)]), &published(1, &[(0, 0, 2)])]);
        assert_eq!(ring, vec![Some((Lap::new(0), 2))]);
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
    fn keys_fields_and_services() {
        assert_eq!(redis_key("shop", b"ganesha_db"), b"ganesha-shm:{shop:ganesha_db}");
        assert_eq!(
            parse_field(&field("web1", b"ganesha_db_failure")),
            Some((&b"web1"[..], &b"ganesha_db_failure"[..]))
        );
        assert_eq!(parse_field(b"nospace"), None);
        let suffixes = [b"_success".to_vec(), b"_failure".to_vec()];
        assert_eq!(service_of(b"ganesha_db_failure", &suffixes), b"ganesha_db");
        assert_eq!(service_of(b"other", &suffixes), b"other");
        assert!(valid_name("web-1.eu_west") && !valid_name("") && !valid_name("a b") && !valid_name(&"x".repeat(65)));
    }
}
