//! The circuit store: what Ganesha's storage calls mean, over the two tables of the segment.
//!
//! * Counter keys (success, failure, rejection) map to a ring of [`MAX_BUCKETS`] bucket words
//!   and the last failure time. An increment is one compare-and-swap on the current bucket's
//!   word; a load sums the words of the buckets in the window.
//! * Status keys map to a status with its expiry.
//!
//! Every operation takes the time as an argument, so that it can be tested without a clock.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::segment::Segment;
use crate::table::{Entry, Table, TableError, Usage};
use crate::window::{ring_index, timed, BucketWord, Window, MAX_BUCKETS, STATUS_TTL};

/// Payload word of a counter slot holding the last failure time, and its expiry.
const LAST_FAILURE_VALUE: usize = 0;
const LAST_FAILURE_EXPIRY: usize = 1;
/// First payload word of a counter slot's ring.
const RING: usize = 2;
/// Payload words of a status slot.
const STATUS_VALUE: usize = 0;
const STATUS_EXPIRY: usize = 1;

/// Times an operation looks its key up again after finding its slot recycled under it.
const MAX_ATTEMPTS: u32 = 16;

const _: () = assert!(RING + MAX_BUCKETS as usize == crate::segment::COUNTER_PAYLOAD_WORDS);

/// Which of the two tables an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableKind {
    Counters,
    Statuses,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreError {
    pub table: TableKind,
    pub error: TableError,
}

pub struct Store<'a> {
    counters: Table<'a>,
    statuses: Table<'a>,
}

impl<'a> Store<'a> {
    pub fn new(segment: &'a Segment) -> Self {
        Self::from_tables(segment.counters(), segment.statuses())
    }

    pub fn from_tables(counters: Table<'a>, statuses: Table<'a>) -> Self {
        Self { counters, statuses }
    }

    fn table(&self, kind: TableKind) -> &Table<'a> {
        match kind {
            TableKind::Counters => &self.counters,
            TableKind::Statuses => &self.statuses,
        }
    }

    /// Runs `write` on the slot of `key`, looked up again whenever `write` finds it recycled.
    fn write(
        &self,
        kind: TableKind,
        key: &[u8],
        now: u64,
        keep_for: u64,
        write: impl Fn(&Entry<'a>) -> bool,
    ) -> Result<(), StoreError> {
        let table = self.table(kind);
        let error = |error| StoreError { table: kind, error };
        for _ in 0..MAX_ATTEMPTS {
            let entry = table.find_or_insert(key, now, now.saturating_add(keep_for)).map_err(error)?;
            if write(&entry) {
                return Ok(());
            }
        }
        Err(error(TableError::Contended))
    }

    fn find(&self, kind: TableKind, key: &[u8]) -> Result<Option<Entry<'a>>, StoreError> {
        self.table(kind).find(key).map_err(|error| StoreError { table: kind, error })
    }

    /// Counts one event of `key` in the current bucket.
    pub fn increment(&self, key: &[u8], window: &Window, now: u64) -> Result<(), StoreError> {
        let bucket = window.bucket_at(now);
        self.write(TableKind::Counters, key, now, window.ttl(), |entry| {
            let word = &entry.payload()[RING + ring_index(bucket)];
            add_event(word, entry, bucket)
        })
    }

    /// The events of `key` in the buckets spanning the window at `now`.
    pub fn load(&self, key: &[u8], window: &Window, now: u64) -> Result<u64, StoreError> {
        let Some(entry) = self.find(TableKind::Counters, key)? else {
            return Ok(0);
        };
        let generation = entry.generation_byte();
        let ring = &entry.payload()[RING..];
        Ok(window
            .buckets_at(now)
            .map(|bucket| {
                // Relaxed: each count stands alone; a load is not a snapshot across buckets.
                let word = BucketWord(ring[ring_index(bucket)].load(Ordering::Relaxed));
                if word.generation() == generation {
                    word.count_in(bucket)
                } else {
                    0
                }
            })
            .sum())
    }

    /// Saves the last failure time of `key`, kept for the window's TTL.
    pub fn save_last_failure_time(&self, key: &[u8], time: i64, window: &Window, now: u64) -> Result<(), StoreError> {
        self.save_timed(TableKind::Counters, key, [LAST_FAILURE_VALUE, LAST_FAILURE_EXPIRY], time, now, window.ttl())
    }

    pub fn load_last_failure_time(&self, key: &[u8], now: u64) -> Result<Option<i64>, StoreError> {
        self.load_timed(TableKind::Counters, key, [LAST_FAILURE_VALUE, LAST_FAILURE_EXPIRY], now)
    }

    /// Saves the status of `key`, kept for [`STATUS_TTL`].
    pub fn save_status(&self, key: &[u8], status: i64, now: u64) -> Result<(), StoreError> {
        self.save_timed(TableKind::Statuses, key, [STATUS_VALUE, STATUS_EXPIRY], status, now, STATUS_TTL)
    }

    pub fn load_status(&self, key: &[u8], now: u64) -> Result<Option<i64>, StoreError> {
        self.load_timed(TableKind::Statuses, key, [STATUS_VALUE, STATUS_EXPIRY], now)
    }

    fn save_timed(&self, kind: TableKind, key: &[u8], [value_at, expiry_at]: [usize; 2], value: i64, now: u64, ttl: u64) -> Result<(), StoreError> {
        self.write(kind, key, now, ttl, |entry| {
            let generation = entry.generation_byte();
            let payload = entry.payload();
            // The value first, then its expiry: a reader reads them the other way round, so
            // a new expiry always comes with the new value (see `load_timed`).
            replace_word(&payload[value_at], entry, timed::encode_value(generation, value))
                && replace_word(&payload[expiry_at], entry, timed::encode_expiry(generation, now.saturating_add(ttl)))
        })
    }

    fn load_timed(&self, kind: TableKind, key: &[u8], [value_at, expiry_at]: [usize; 2], now: u64) -> Result<Option<i64>, StoreError> {
        let Some(entry) = self.find(kind, key)? else {
            return Ok(None);
        };
        let generation = entry.generation_byte();
        let payload = entry.payload();
        // Acquire: pairs with the Release of the expiry's compare-and-swap, which the writer
        // made after the value's, so the value read next is at least as new as the expiry.
        let expiry = payload[expiry_at].load(Ordering::Acquire);
        let value = payload[value_at].load(Ordering::Acquire);
        let ours = timed::generation(expiry) == generation && timed::generation(value) == generation;
        Ok((ours && timed::alive(timed::decode_expiry(expiry), now)).then(|| timed::decode_value(value)))
    }

    /// Deletes every counter and status whose key satisfies `matches`; returns how many.
    pub fn remove_matching(&self, matches: impl Fn(&[u8]) -> bool) -> usize {
        self.counters.remove_matching(&matches) + self.statuses.remove_matching(&matches)
    }

    pub fn usage(&self, now: u64) -> [Usage; 2] {
        [self.counters.usage(now), self.statuses.usage(now)]
    }
}

/// Adds one event of `bucket` to `word`; false if the slot was recycled under us.
fn add_event(word: &AtomicU64, entry: &Entry<'_>, bucket: u64) -> bool {
    // Relaxed: the count is the only data; the compare-and-swap below decides.
    let mut current = BucketWord(word.load(Ordering::Relaxed));
    // The slot may have been recycled between the lookup and the read above; after this check
    // a recycle changes the word's generation byte, which fails the compare-and-swap.
    if !entry.is_current() {
        return false;
    }
    loop {
        if current.generation() != entry.generation_byte() {
            return false;
        }
        // Relaxed both ways: one word, no other data published with it.
        match word.compare_exchange_weak(current.0, current.incremented(bucket).0, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return true,
            Err(actual) => current = BucketWord(actual),
        }
    }
}

/// Replaces `word` with `new` if it still belongs to `entry`'s generation.
fn replace_word(word: &AtomicU64, entry: &Entry<'_>, new: u64) -> bool {
    // Relaxed: the value is checked by the compare-and-swap below.
    let mut current = word.load(Ordering::Relaxed);
    if !entry.is_current() {
        return false;
    }
    loop {
        if timed::generation(current) != entry.generation_byte() {
            return false;
        }
        // Release on success: a reader that acquires this word sees the words written before it.
        match word.compare_exchange_weak(current, new, Ordering::Release, Ordering::Relaxed) {
            Ok(_) => return true,
            Err(actual) => current = actual,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::segment::{Segment, Settings};

    fn segment(max_services: u64) -> Segment {
        Segment::create_anonymous(Settings { max_services, max_key_length: 64 }).unwrap()
    }

    fn window(time_window: i64, bucket_duration: Option<u64>) -> Window {
        Window::new(time_window, bucket_duration).unwrap()
    }

    const T0: u64 = 1_800_000_000;

    #[test]
    fn loads_sum_the_buckets_in_the_window_as_it_slides() {
        let segment = segment(4);
        let store = Store::new(&segment);
        let w = window(2, Some(1));
        store.increment(b"f", &w, T0).unwrap();
        store.increment(b"s", &w, T0).unwrap();
        store.increment(b"f", &w, T0 + 1).unwrap();
        assert_eq!((store.load(b"f", &w, T0 + 1).unwrap(), store.load(b"s", &w, T0 + 1).unwrap()), (2, 1));
        assert_eq!((store.load(b"f", &w, T0 + 2).unwrap(), store.load(b"s", &w, T0 + 2).unwrap()), (1, 0));
        assert_eq!(store.load(b"f", &w, T0 + 3).unwrap(), 0);
        assert_eq!(store.load(b"missing", &w, T0).unwrap(), 0);
    }

    #[test]
    fn a_bucket_left_from_an_earlier_lap_of_the_ring_is_not_counted() {
        let segment = segment(1);
        let store = Store::new(&segment);
        let w = window(120, Some(1));
        store.increment(b"k", &w, T0).unwrap();
        store.increment(b"k", &w, T0 + 119).unwrap();
        assert_eq!(store.load(b"k", &w, T0 + 119).unwrap(), 2);
        assert_eq!(store.load(b"k", &w, T0 + 120).unwrap(), 1);
        store.increment(b"k", &w, T0 + 120).unwrap(); // same ring position as T0
        assert_eq!(store.load(b"k", &w, T0 + 120).unwrap(), 2);
    }

    #[test]
    fn the_last_failure_time_lives_as_long_as_the_buckets() {
        let segment = segment(1);
        let store = Store::new(&segment);
        let w = window(2, Some(1)); // TTL (2 + 1) × 1 s
        assert_eq!(store.load_last_failure_time(b"f", T0).unwrap(), None);
        store.save_last_failure_time(b"f", 1_700_000_000, &w, T0).unwrap();
        assert_eq!(store.load_last_failure_time(b"f", T0 + 3).unwrap(), Some(1_700_000_000));
        assert_eq!(store.load_last_failure_time(b"f", T0 + 4).unwrap(), None);
        assert_eq!(store.load(b"f", &w, T0).unwrap(), 0, "the time is not a count");
    }

    #[test]
    fn statuses_live_a_day_and_are_apart_from_counters() {
        let segment = segment(1);
        let store = Store::new(&segment);
        assert_eq!(store.load_status(b"k", T0).unwrap(), None);
        store.save_status(b"k", 2, T0).unwrap();
        store.save_status(b"k", -5, T0).unwrap();
        assert_eq!(store.load_status(b"k", T0 + STATUS_TTL).unwrap(), Some(-5));
        assert_eq!(store.load_status(b"k", T0 + STATUS_TTL + 1).unwrap(), None);
        assert_eq!(store.load_last_failure_time(b"k", T0).unwrap(), None);
    }

    #[test]
    fn full_tables_are_reported_as_such() {
        let segment = segment(1);
        let store = Store::new(&segment);
        let w = window(60, None);
        for key in [b"a", b"b", b"c"] {
            store.increment(key, &w, T0).unwrap();
        }
        let full = store.increment(b"d", &w, T0).unwrap_err();
        assert_eq!(full, StoreError { table: TableKind::Counters, error: TableError::Full { slots: 3 } });
        store.save_status(b"a", 2, T0).unwrap();
        assert_eq!(store.save_status(b"b", 2, T0).unwrap_err().table, TableKind::Statuses);
        store.increment(b"a", &w, T0).unwrap();
        assert_eq!(store.load(b"a", &w, T0).unwrap(), 2, "existing keys keep counting");
        // Once the window and its TTL have passed, the slots are reused.
        store.increment(b"d", &w, T0 + w.ttl() * 2 + 1).unwrap();
    }

    #[test]
    fn remove_matching_deletes_counters_times_and_statuses() {
        let segment = segment(2);
        let store = Store::new(&segment);
        let w = window(60, None);
        store.increment(b"p_a_failure", &w, T0).unwrap();
        store.save_last_failure_time(b"p_a_failure", 5, &w, T0).unwrap();
        store.save_status(b"p_a_status", 2, T0).unwrap();
        store.increment(b"other", &w, T0).unwrap();
        assert_eq!(store.remove_matching(|k| k.starts_with(b"p_")), 2);
        assert_eq!(store.load(b"p_a_failure", &w, T0).unwrap(), 0);
        assert_eq!(store.load_last_failure_time(b"p_a_failure", T0).unwrap(), None);
        assert_eq!(store.load_status(b"p_a_status", T0).unwrap(), None);
        assert_eq!(store.load(b"other", &w, T0).unwrap(), 1);
    }

    #[test]
    fn a_writer_holding_a_recycled_slot_does_not_count_in_it() {
        let segment = segment(1);
        let store = Store::new(&segment);
        let w = window(60, None);
        store.increment(b"old", &w, T0).unwrap();
        let stale = segment.counters().find(b"old").unwrap().unwrap();
        store.remove_matching(|k| k == b"old");
        store.increment(b"new", &w, T0).unwrap();
        let bucket = w.bucket_at(T0);
        let word = &stale.payload()[RING + ring_index(bucket)];
        assert!(!add_event(word, &stale, bucket), "the stale writer is turned away");
        assert_eq!(store.load(b"new", &w, T0).unwrap(), 1);
    }

    #[test]
    fn concurrent_increments_are_exact() {
        let segment = segment(2);
        let w = window(60, None);
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    let store = Store::new(&segment);
                    for i in 0..5_000 {
                        store.increment(if i % 2 == 0 { b"even" } else { b"odd_" }, &w, T0).unwrap();
                    }
                });
            }
        });
        let store = Store::new(&segment);
        assert_eq!((store.load(b"even", &w, T0).unwrap(), store.load(b"odd_", &w, T0).unwrap()), (10_000, 10_000));
    }
}
