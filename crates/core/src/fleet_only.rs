//! Fleet mode: the fleet-only region, the counts of the services this host sees only through the
//! fleet (other hosts count them, this host has not), as the sidecar last read them from Redis.
//!
//! A region of its own, apart from the counter table, so that the fleet's services never take a
//! slot of this host's own, whatever Redis holds: the host's own room stays its own, and the
//! table's lock-free protocol stays as it is. The sidecar is the only writer; every PHP process
//! only reads. So there is no claim to take over and nothing a reader holds: a reader stopped for
//! any time, or killed, leaves nothing behind.
//!
//! The region holds two halves, each holding every fleet-only service, and a control word naming
//! the half readers read. The sidecar writes the other half and then names it, so that readers
//! never see a half half written. Each half has a sequence word, odd while the sidecar writes it,
//! which a reader reads before and after its reads (a sequence lock, as crossbeam's `AtomicCell`
//! keeps one): a reader stalled across two syncs, whose half was written again meanwhile, sees
//! the sequence moved and reads again; after [`MAX_READS`] tries it sees nothing there, and
//! decides alone as a host without the fleet does.
//!
//! A half: `[sequence][entries][index: 2 × capacity words][entries: capacity × entry words]`.
//! * An index word is `[fingerprint: 32][entry + 1: 32]`, 0 for none, placed by linear probing
//!   from the key's home: a lookup stops at the first empty index word, and the index is never
//!   more than half full, so that a key the region does not hold (the common case: each of this
//!   host's own) costs a probe or two.
//! * An entry is `[key length: 16][fingerprint: 32]`, the bucket duration, the number of its
//!   first bucket, the key's bytes (8 to a word), then the counts of `span` buckets from the
//!   first, two to a word (32 bits each: a bucket's count fits in 28, see `fleet::MAX_COUNT`).
//!
//! Whoever can write the segment file can write anything here. A reader bounds every figure it
//! reads (entry numbers, key lengths, probes, tries) by the shape, so what it reads may be wrong
//! counts, never a crash or a hang.

use std::ops::RangeInclusive;

use crate::sync::{fence, AtomicU64, Ordering};
use crate::table::hash;

/// Words before the halves: the control word, `[entries: 63][half: 1]`, naming the half readers
/// read and how many entries it holds, so that a load from an empty region reads one word.
const CONTROL_WORDS: usize = 1;
/// Words of a half before its index: its sequence, its number of entries.
const HALF_HEADER_WORDS: usize = 2;
/// Words of an entry before its key: its ident, its bucket duration, its first bucket.
const ENTRY_HEADER_WORDS: usize = 3;
/// Index words per entry of the capacity: so that the index is never more than half full.
const INDEX_PER_ENTRY: usize = 2;
/// Bucket counts per word.
const COUNTS_PER_WORD: usize = 2;
/// Tries a reader makes at a half the sidecar writes meanwhile, before it sees no region.
const MAX_READS: usize = 3;

/// The size of a region, derived from the segment's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FleetOnlyShape {
    /// Counter keys the region holds at most; 0: no region (not in fleet mode).
    pub capacity: usize,
    /// The longest key, in bytes.
    pub max_key_length: usize,
    /// Buckets an entry holds: the counters' ring's length, so that it holds every bucket a
    /// window may read.
    pub span: usize,
}

impl FleetOnlyShape {
    fn index_words(&self) -> usize {
        self.capacity * INDEX_PER_ENTRY
    }

    fn key_words(&self) -> usize {
        self.max_key_length.div_ceil(8)
    }

    fn entry_words(&self) -> usize {
        ENTRY_HEADER_WORDS + self.key_words() + self.span.div_ceil(COUNTS_PER_WORD)
    }

    fn half_words(&self) -> usize {
        HALF_HEADER_WORDS + self.index_words() + self.capacity * self.entry_words()
    }

    /// Words of the region.
    pub fn words(&self) -> usize {
        if self.capacity == 0 {
            0
        } else {
            CONTROL_WORDS + 2 * self.half_words()
        }
    }
}

/// One counter key of the region, as the sidecar writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetOnlyEntry {
    pub key: Vec<u8>,
    /// The duration of its buckets, in seconds.
    pub bucket_duration: u64,
    /// The number of its first bucket (its start over the duration).
    pub first_bucket: u64,
    /// The other hosts' counts of the buckets from the first, at most `span` of them.
    pub counts: Vec<u64>,
}

/// The fleet-only services over their region of the segment.
pub struct FleetOnly<'a> {
    words: &'a [AtomicU64],
    shape: FleetOnlyShape,
    seed: u64,
}

/// The ident of an entry, and the fingerprint its index word carries: the top of the hash.
fn ident(key: &[u8], hash: u64) -> u64 {
    (key.len() as u64 & 0xffff) << 32 | hash >> 32
}

impl<'a> FleetOnly<'a> {
    /// The fleet-only services over `words`, which must be `shape.words()` long (the segment's
    /// region); `seed` keys the hash, as the tables' (a host's Redis data cannot aim at long
    /// probes).
    pub fn new(words: &'a [AtomicU64], shape: FleetOnlyShape, seed: u64) -> Self {
        assert_eq!(words.len(), shape.words(), "the region is laid out for this shape");
        Self { words, shape, seed }
    }

    pub fn shape(&self) -> FleetOnlyShape {
        self.shape
    }

    fn half(&self, which: u64) -> &'a [AtomicU64] {
        let start = CONTROL_WORDS + (which as usize & 1) * self.shape.half_words();
        &self.words[start..start + self.shape.half_words()]
    }

    fn entry(&self, half: &'a [AtomicU64], number: usize) -> &'a [AtomicU64] {
        let start = HALF_HEADER_WORDS + self.shape.index_words() + number * self.shape.entry_words();
        &half[start..start + self.shape.entry_words()]
    }

    fn home(&self, hash: u64) -> usize {
        // Multiply-shift, as the tables map a hash onto their slots.
        ((hash as u128 * self.shape.index_words() as u128) >> 64) as usize
    }

    /// Runs `read` on the half readers read now, again when the sidecar wrote that half
    /// meanwhile; `None` when it kept writing it, or without a region.
    fn read<T>(&self, read: impl Fn(&'a [AtomicU64]) -> T) -> Option<T> {
        if self.shape.capacity == 0 {
            return None;
        }
        for _ in 0..MAX_READS {
            // Acquire: pairs with `publish`'s Release store of the control word, so that the
            // half it names is read as written.
            let half = self.half(self.words[0].load(Ordering::Acquire));
            // Acquire: the reads below come after it.
            let sequence = half[0].load(Ordering::Acquire);
            if sequence & 1 == 1 {
                continue;
            }
            let value = read(half);
            // Acquire: the reads above come before the sequence is read again, so that any of
            // them that read a word the sidecar wrote since makes the sequence read as moved
            // (it made the sequence odd, then a Release fence, before writing that word).
            fence(Ordering::Acquire);
            // Relaxed: ordered by the fence above.
            if half[0].load(Ordering::Relaxed) == sequence {
                return Some(value);
            }
        }
        None
    }

    /// The entry of `key` in `half`, if it holds one.
    fn find(&self, half: &'a [AtomicU64], key: &[u8]) -> Option<&'a [AtomicU64]> {
        // Relaxed (here and below): validated as a whole by the sequence in `read`. An empty region
        // (every service of the fleet counted here) costs no hash.
        let entries = (half[1].load(Ordering::Relaxed) as usize).min(self.shape.capacity);
        if entries == 0 || key.len() > self.shape.max_key_length {
            return None;
        }
        let hash = hash(self.seed, key);
        let (ident, slots) = (ident(key, hash), self.shape.index_words());
        let index = &half[HALF_HEADER_WORDS..HALF_HEADER_WORDS + slots];
        let home = self.home(hash);
        for probe in 0..slots {
            let word = index[(home + probe) % slots].load(Ordering::Relaxed);
            if word == 0 {
                return None;
            }
            let number = (word & u64::from(u32::MAX)) as usize;
            if word >> 32 != hash >> 32 || number == 0 || number > entries {
                continue;
            }
            let entry = self.entry(half, number - 1);
            if entry[0].load(Ordering::Relaxed) == ident && self.key_matches(entry, key) {
                return Some(entry);
            }
        }
        None
    }

    fn key_matches(&self, entry: &[AtomicU64], key: &[u8]) -> bool {
        let words = &entry[ENTRY_HEADER_WORDS..ENTRY_HEADER_WORDS + self.shape.key_words()];
        key.chunks(8).zip(words).all(|(chunk, word)| word.load(Ordering::Relaxed) == key_word(chunk))
    }

    /// The other hosts' events of `key` in `buckets` (bucket numbers of `bucket_duration`
    /// seconds), as the region holds them; `None` when it holds none of `key` in buckets of that
    /// duration (or could not be read).
    pub fn load(&self, key: &[u8], bucket_duration: u64, buckets: RangeInclusive<u64>) -> Option<u64> {
        let span = self.shape.span as u64;
        self.read(|half| {
            let entry = self.find(half, key)?;
            // Relaxed: validated by the sequence in `read`.
            if entry[1].load(Ordering::Relaxed) != bucket_duration {
                return None;
            }
            let first = entry[2].load(Ordering::Relaxed);
            let counts = &entry[ENTRY_HEADER_WORDS + self.shape.key_words()..];
            let from = (*buckets.start()).max(first);
            let to = (*buckets.end()).min(first.saturating_add(span - 1));
            Some((from..=to).fold(0u64, |sum, bucket| {
                let at = (bucket - first) as usize;
                let word = counts[at / COUNTS_PER_WORD].load(Ordering::Relaxed);
                sum + (word >> (32 * (at % COUNTS_PER_WORD)) & u64::from(u32::MAX))
            }))
        })
        .flatten()
    }

    /// Whether the region holds nothing: every load in fleet mode asks first, so that where every
    /// service of the fleet is counted here (the common case) a load reads one more word.
    #[inline]
    pub fn is_empty(&self) -> bool {
        // Relaxed: only whether to read at all; `read` loads the word again, Acquire.
        self.shape.capacity == 0 || self.words[0].load(Ordering::Relaxed) >> 1 == 0
    }

    /// The keys the region holds now, in no order (for `snapshot()` and the metrics).
    pub fn keys(&self) -> Vec<Vec<u8>> {
        self.read(|half| {
            // Relaxed: validated by the sequence in `read`.
            let entries = (half[1].load(Ordering::Relaxed) as usize).min(self.shape.capacity);
            (0..entries)
                .map(|number| {
                    let entry = self.entry(half, number);
                    let length = ((entry[0].load(Ordering::Relaxed) >> 32) as usize).min(self.shape.max_key_length);
                    let words = &entry[ENTRY_HEADER_WORDS..ENTRY_HEADER_WORDS + self.shape.key_words()];
                    let bytes = words.iter().flat_map(|word| word.load(Ordering::Relaxed).to_le_bytes());
                    bytes.take(length).collect()
                })
                .collect()
        })
        .unwrap_or_default()
    }

    /// Writes `entries` as the region (the sidecar alone does): into the half readers do not read,
    /// which it then names. At most the capacity are written, in the order given (the caller
    /// puts first those it keeps when room is short); a key longer than a slot holds, or given
    /// twice, is left out. Returns how many were written.
    pub fn publish(&self, entries: &[FleetOnlyEntry]) -> usize {
        if self.shape.capacity == 0 {
            return 0;
        }
        // Relaxed: the sidecar alone writes the control word.
        let target = !self.words[0].load(Ordering::Relaxed) & 1;
        let half = self.half(target);
        let slots = self.shape.index_words();
        // Relaxed: the sidecar alone writes the sequence.
        let sequence = half[0].load(Ordering::Relaxed);
        let writing = sequence.wrapping_add(1) | 1;
        half[0].store(writing, Ordering::Relaxed);
        // Release: a reader that reads any word written below reads the sequence odd (or later)
        // after its Acquire fence: it reads again.
        fence(Ordering::Release);
        let index = &half[HALF_HEADER_WORDS..HALF_HEADER_WORDS + slots];
        for word in index {
            word.store(0, Ordering::Relaxed);
        }
        let mut written = 0;
        for entry in entries {
            if written == self.shape.capacity {
                break;
            }
            if entry.key.len() > self.shape.max_key_length {
                continue;
            }
            let hash = hash(self.seed, &entry.key);
            let home = self.home(hash);
            // Never full: at most half the index words are taken.
            let Some(slot) = (0..slots).map(|probe| (home + probe) % slots).find(|&slot| {
                let word = index[slot].load(Ordering::Relaxed);
                word == 0 || {
                    let number = (word & u64::from(u32::MAX)) as usize;
                    word >> 32 == hash >> 32 && self.key_matches(self.entry(half, number - 1), &entry.key)
                }
            }) else {
                break;
            };
            if index[slot].load(Ordering::Relaxed) != 0 {
                continue; // given twice
            }
            let words = self.entry(half, written);
            words[0].store(ident(&entry.key, hash), Ordering::Relaxed);
            words[1].store(entry.bucket_duration, Ordering::Relaxed);
            words[2].store(entry.first_bucket, Ordering::Relaxed);
            let key_words = &words[ENTRY_HEADER_WORDS..ENTRY_HEADER_WORDS + self.shape.key_words()];
            let mut chunks = entry.key.chunks(8);
            for word in key_words {
                word.store(chunks.next().map_or(0, key_word), Ordering::Relaxed);
            }
            let count_words = &words[ENTRY_HEADER_WORDS + self.shape.key_words()..];
            for (at, word) in count_words.iter().enumerate() {
                let count = |i: usize| entry.counts.get(i).map_or(0, |&count| count.min(u64::from(u32::MAX)));
                word.store(count(at * 2) | count(at * 2 + 1) << 32, Ordering::Relaxed);
            }
            written += 1;
            index[slot].store((hash >> 32) << 32 | written as u64, Ordering::Relaxed);
        }
        half[1].store(written as u64, Ordering::Relaxed);
        // Release: a reader that reads this sequence reads every word written above.
        half[0].store(writing.wrapping_add(1), Ordering::Release);
        // Release: a reader that reads this half named reads it whole.
        self.words[0].store((written as u64) << 1 | target, Ordering::Release);
        written
    }
}

/// Up to 8 bytes of a key as one word, little-endian, zero-padded.
fn key_word(chunk: &[u8]) -> u64 {
    chunk.iter().rev().fold(0, |word, &byte| word << 8 | u64::from(byte))
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn words_of(shape: FleetOnlyShape) -> Vec<AtomicU64> {
        (0..shape.words()).map(|_| AtomicU64::new(0)).collect()
    }

    fn entry(key: &str, first_bucket: u64, counts: &[u64]) -> FleetOnlyEntry {
        FleetOnlyEntry { key: key.as_bytes().to_vec(), bucket_duration: 2, first_bucket, counts: counts.to_vec() }
    }

    const SHAPE: FleetOnlyShape = FleetOnlyShape { capacity: 4, max_key_length: 20, span: 5 };

    #[test]
    fn a_region_reads_what_was_published_over_the_buckets_asked() {
        let words = words_of(SHAPE);
        let region = FleetOnly::new(&words, SHAPE, 7);
        assert_eq!(region.load(b"db_failure", 2, 0..=100), None, "nothing published");
        assert_eq!(region.publish(&[entry("db_failure", 10, &[1, 2, 3, 4, 5]), entry("api_success", 12, &[7])]), 2);
        assert_eq!(region.load(b"db_failure", 2, 10..=14), Some(15));
        assert_eq!(region.load(b"db_failure", 2, 12..=13), Some(7));
        assert_eq!(region.load(b"db_failure", 2, 13..=40), Some(9), "buckets past the span count nothing");
        assert_eq!(region.load(b"db_failure", 2, 0..=9), Some(0));
        assert_eq!(region.load(b"db_failure", 3, 10..=14), None, "buckets of another duration are not these");
        assert_eq!(region.load(b"api_success", 2, 12..=12), Some(7));
        assert_eq!(region.load(b"db_success", 2, 10..=14), None);
        let mut keys = region.keys();
        keys.sort();
        assert_eq!(keys, [b"api_success".to_vec(), b"db_failure".to_vec()]);
        // The next publication replaces it whole.
        assert_eq!(region.publish(&[entry("api_success", 12, &[8])]), 1);
        assert_eq!(region.load(b"db_failure", 2, 10..=14), None);
        assert_eq!(region.load(b"api_success", 2, 12..=12), Some(8));
    }

    #[test]
    fn a_region_keeps_the_first_entries_up_to_its_capacity_and_leaves_out_what_does_not_fit() {
        let words = words_of(SHAPE);
        let region = FleetOnly::new(&words, SHAPE, 7);
        let long = "x".repeat(21);
        let entries: Vec<_> =
            [long.as_str(), "a", "a", "b", "c", "d", "e"].iter().map(|key| entry(key, 0, &[1])).collect();
        assert_eq!(region.publish(&entries), 4);
        assert_eq!(region.load(long.as_bytes(), 2, 0..=0), None);
        for key in ["a", "b", "c", "d"] {
            assert_eq!(region.load(key.as_bytes(), 2, 0..=0), Some(1), "{key}");
        }
        assert_eq!(region.load(b"e", 2, 0..=0), None, "past the capacity");
    }

    #[test]
    fn a_reader_sees_no_region_of_a_half_being_written() {
        let words = words_of(SHAPE);
        let region = FleetOnly::new(&words, SHAPE, 7);
        region.publish(&[entry("a", 0, &[1])]);
        // The sidecar stopped half way through writing the half readers read (two syncs on).
        let half = region.half(words[0].load(Ordering::Relaxed));
        half[0].fetch_add(1, Ordering::Relaxed);
        assert_eq!(region.load(b"a", 2, 0..=0), None);
        assert!(region.keys().is_empty());
        // The sidecar's next region is read.
        region.publish(&[entry("a", 0, &[3])]);
        assert_eq!(region.load(b"a", 2, 0..=0), Some(3));
    }

    #[test]
    fn a_region_without_capacity_takes_no_room_and_holds_nothing() {
        let shape = FleetOnlyShape { capacity: 0, ..SHAPE };
        assert_eq!(shape.words(), 0);
        let region = FleetOnly::new(&[], shape, 7);
        assert_eq!(region.publish(&[entry("a", 0, &[1])]), 0);
        assert_eq!(region.load(b"a", 2, 0..=0), None);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]
        /// Whoever can write the segment file can write any word of the region: reads then give
        /// wrong counts at worst, never a panic or a hang.
        #[test]
        fn a_region_over_garbage_never_panics(
            garbage in proptest::collection::vec(proptest::prelude::any::<u64>(), SHAPE.words()),
            small in proptest::collection::vec(0u64..8, SHAPE.words()),
            key in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..24),
        ) {
            for values in [garbage, small] {
                let words: Vec<AtomicU64> = values.into_iter().map(AtomicU64::new).collect();
                let region = FleetOnly::new(&words, SHAPE, 7);
                let _ = region.load(&key, 2, 0..=u64::MAX);
                let _ = region.keys();
                region.publish(&[FleetOnlyEntry { key: key.clone(), bucket_duration: 2, first_bucket: 0, counts: vec![1] }]);
                let _ = region.load(&key, 2, 0..=u64::MAX);
            }
        }
    }
}
