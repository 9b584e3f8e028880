//! Fleet mode: the reset log, the resets this host made (`reset()`, `resetService()`), as the
//! segment keeps them until the sidecar has shared them with the fleet.
//!
//! A reset is a fact the segment keeps, not one the sidecar infers: so that a reset made while
//! the sidecar is down, or of a service this host has no slot of (it sees it only through the
//! fleet), reaches the fleet all the same once the sidecar runs, and a sidecar that restarts with
//! nothing in memory shares it again (sharing a reset twice is the same cut at the same time).
//!
//! Every PHP process writes it, the sidecar reads it. A ring of [`ENTRIES`] entries: a writer
//! takes the next ticket of the head word (`fetch_add`), and writes its entry in the ticket's
//! place under a sequence word, odd while it writes (crossbeam's `AtomicCell` keeps such a lock);
//! the reader reads an entry between two reads of its sequence, and takes it only when the
//! sequence is even, the same both times, and the entry's check matches its words. Nothing is
//! held: a writer killed half way leaves an entry the reader passes over, and the next writer of
//! that place writes it whole. Two writers a ring apart may write one place at once: the check
//! (a hash of the time, the kind and the key) tells a mix of their words, which is passed over.
//! So a reset is lost only when more than [`ENTRIES`] come between two reads of the sidecar, or
//! when two writers a whole ring apart collide: the sidecar shares what it reads each interval.
//!
//! An entry: `[sequence][time][monotonic time][check: every 1 | 0 | length 15 | hash 32 (, the
//! rest 0)][key: 8 bytes to a word]`. Whoever can write the segment file can write a reset here, as they can write a
//! count: a reader bounds every figure it reads by the shape, never a crash or a hang.

use crate::sync::{fence, AtomicU64, Ordering};

/// Entries of the ring.
pub const ENTRIES: usize = 64;

/// Words of an entry before its key: its sequence, its time, its monotonic time, its check.
const ENTRY_HEADER_WORDS: usize = 4;

/// Tries a reader makes at an entry written meanwhile before it passes it over.
const MAX_READS: usize = 3;

/// The size of a log, derived from the segment's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResetLogShape {
    /// Entries; 0: no log (not in fleet mode).
    pub entries: usize,
    /// The longest key, in bytes.
    pub max_key_length: usize,
}

impl ResetLogShape {
    fn entry_words(&self) -> usize {
        ENTRY_HEADER_WORDS + self.max_key_length.div_ceil(8)
    }

    /// Words of the log: the head, then the entries.
    pub fn words(&self) -> usize {
        if self.entries == 0 { 0 } else { 1 + self.entries * self.entry_words() }
    }
}

/// A reset as the log keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NotedReset {
    /// When it was made: unix milliseconds, this host's clock.
    pub time_ms: u64,
    /// When it was made on this host's monotonic clock (`fleet::monotonic_ms`), which no step of
    /// the clock moves: the sidecar dates the reset on Redis's clock by it, whenever the clock
    /// stepped, before or after the reset (see `fleet::reset_on_redis_clock`).
    pub monotonic_ms: u64,
    /// `resetService()`: the service's key stem (Ganesha's prefix and the service). `reset()`:
    /// the prefix every service of the configuration starts with.
    pub key: Vec<u8>,
    /// Whether it resets every service whose stem starts with `key` (`reset()`), not one.
    pub every: bool,
}

/// The reset log over its words.
pub struct ResetLog<'a> {
    words: &'a [AtomicU64],
    shape: ResetLogShape,
}

impl<'a> ResetLog<'a> {
    /// The log over `words`, which hold `shape.words()` words.
    pub fn new(words: &'a [AtomicU64], shape: ResetLogShape) -> Self {
        assert_eq!(words.len(), shape.words(), "the reset log's words");
        Self { words, shape }
    }

    fn entry(&self, index: usize) -> &'a [AtomicU64] {
        let words = self.shape.entry_words();
        &self.words[1 + index * words..1 + (index + 1) * words]
    }

    /// Notes a reset made at `time_ms` (see [`NotedReset`]); `false` when the key is longer than
    /// the segment's keys, and nothing was noted.
    pub fn note(&self, reset: &NotedReset) -> bool {
        if self.shape.entries == 0 || reset.key.len() > self.shape.max_key_length {
            return false;
        }
        // Relaxed: the ticket only picks the place; the entry's sequence orders its words.
        let ticket = self.words[0].fetch_add(1, Ordering::Relaxed);
        let entry = self.entry((ticket % self.shape.entries as u64) as usize);
        // The sequence is odd while the entry is written: `2 × ticket + 1`, then one more.
        let sequence = ticket.wrapping_mul(2) | 1;
        // Relaxed, then a Release fence: a reader that sees any word written below sees the odd
        // sequence too (as crossbeam's seqlock writer does).
        entry[0].store(sequence, Ordering::Relaxed);
        fence(Ordering::Release);
        let key_words = pack_key(&reset.key, self.shape.max_key_length.div_ceil(8));
        // Relaxed: published by the Release store of the even sequence below.
        entry[1].store(reset.time_ms, Ordering::Relaxed);
        entry[2].store(reset.monotonic_ms, Ordering::Relaxed);
        entry[3].store(check(reset.time_ms, reset.monotonic_ms, reset.every, &reset.key), Ordering::Relaxed);
        for (word, value) in entry[ENTRY_HEADER_WORDS..].iter().zip(key_words) {
            word.store(value, Ordering::Relaxed);
        }
        // Release: a reader that acquires this sequence sees every word above.
        entry[0].store(sequence.wrapping_add(1), Ordering::Release);
        true
    }

    /// Every reset the log holds whole, in no order.
    pub fn read(&self) -> Vec<NotedReset> {
        (0..self.shape.entries).filter_map(|index| self.read_entry(index).and_then(|(_, reset)| reset)).collect()
    }

    /// How many resets were ever noted: the next one's ticket.
    pub fn tickets(&self) -> u64 {
        if self.shape.entries == 0 {
            return 0;
        }
        // Acquire: a reader that finds a ticket taken looks for its entry next.
        self.words[0].load(Ordering::Acquire)
    }

    /// Whether a reset noted with a ticket from `since` on may cover `key`: its key (a service's
    /// stem, or a configuration's prefix) starts `key`. An entry being written, or one the ring
    /// has written over since (more than [`ENTRIES`] resets), may: the answer errs towards yes.
    pub fn covers_since(&self, since: u64, key: &[u8]) -> bool {
        if self.tickets().saturating_sub(since) > self.shape.entries as u64 {
            return true;
        }
        (0..self.shape.entries).any(|index| match self.read_entry(index) {
            Some((ticket, reset)) if ticket >= since => reset.is_none_or(|reset| key.starts_with(&reset.key)),
            _ => false,
        })
    }

    /// The entry at `index`: its ticket, and the reset it holds (`None` while it is being
    /// written, or when its words do not check); `None` for an entry never written.
    fn read_entry(&self, index: usize) -> Option<(u64, Option<NotedReset>)> {
        let entry = self.entry(index);
        let mut ticket = None;
        for _ in 0..MAX_READS {
            // Acquire: pairs with the writer's Release store of the even sequence.
            let before = entry[0].load(Ordering::Acquire);
            if before == 0 {
                return None;
            }
            // The sequence is the ticket's double, odd while it is written.
            ticket = Some(before / 2 - u64::from(before & 1 == 0));
            if before & 1 == 1 {
                continue;
            }
            // Relaxed: ordered by the Acquire above and the fence below.
            let time_ms = entry[1].load(Ordering::Relaxed);
            let monotonic_ms = entry[2].load(Ordering::Relaxed);
            let checked = entry[3].load(Ordering::Relaxed);
            let key_words: Vec<u64> =
                entry[ENTRY_HEADER_WORDS..].iter().map(|word| word.load(Ordering::Relaxed)).collect();
            // Acquire: the words above were read before the sequence is read again (a writer
            // that came meanwhile moved it).
            fence(Ordering::Acquire);
            if entry[0].load(Ordering::Relaxed) != before {
                continue;
            }
            let every = checked >> 63 == 1;
            let length = (checked >> 32 & 0x7fff) as usize;
            if length > self.shape.max_key_length {
                return ticket.map(|ticket| (ticket, None));
            }
            let key = unpack_key(&key_words, length);
            let reset = (check(time_ms, monotonic_ms, every, &key) == checked)
                .then_some(NotedReset { time_ms, monotonic_ms, key, every });
            return ticket.map(|ticket| (ticket, reset));
        }
        ticket.map(|ticket| (ticket, None))
    }
}

/// The check word of an entry: `[every: 1][0: 1][length: 15][hash: 32]`, the hash (FNV-1a) of
/// the times, the kind and the key, so that a mix of two writers' words shows.
fn check(time_ms: u64, monotonic_ms: u64, every: bool, key: &[u8]) -> u64 {
    let times = time_ms.to_le_bytes().into_iter().chain(monotonic_ms.to_le_bytes());
    let bytes = times.chain([u8::from(every)]).chain(key.iter().copied());
    let hash = bytes.fold(0x811c_9dc5_u32, |hash, byte| (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193));
    u64::from(every) << 63 | (key.len() as u64 & 0x7fff) << 32 | u64::from(hash)
}

fn pack_key(key: &[u8], words: usize) -> Vec<u64> {
    let mut packed = vec![0u64; words];
    for (word, chunk) in packed.iter_mut().zip(key.chunks(8)) {
        let mut bytes = [0u8; 8];
        bytes[..chunk.len()].copy_from_slice(chunk);
        *word = u64::from_le_bytes(bytes);
    }
    packed
}

fn unpack_key(words: &[u64], length: usize) -> Vec<u8> {
    words.iter().flat_map(|word| word.to_le_bytes()).take(length).collect()
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn words(shape: ResetLogShape) -> Vec<AtomicU64> {
        (0..shape.words()).map(|_| AtomicU64::new(0)).collect()
    }

    const SHAPE: ResetLogShape = ResetLogShape { entries: ENTRIES, max_key_length: 40 };

    fn reset(key: &str, time_ms: u64, every: bool) -> NotedReset {
        NotedReset { time_ms, monotonic_ms: time_ms / 2, key: key.as_bytes().to_vec(), every }
    }

    #[test]
    fn what_is_noted_reads_back() {
        let words = words(SHAPE);
        let log = ResetLog::new(&words, SHAPE);
        assert_eq!(log.read(), Vec::new());
        assert!(log.note(&reset("ganesha_payments", 1_800_000_000_123, false)));
        assert!(log.note(&reset("ganesha_", 1_800_000_000_456, true)));
        assert!(!log.note(&reset(&"x".repeat(41), 1, false)), "a key longer than the segment's");
        assert_eq!(log.read(), vec![reset("ganesha_payments", 1_800_000_000_123, false), reset("ganesha_", 1_800_000_000_456, true)]);
    }

    #[test]
    fn the_ring_keeps_the_latest_entries() {
        let words = words(SHAPE);
        let log = ResetLog::new(&words, SHAPE);
        for i in 0..(ENTRIES as u64 + 10) {
            log.note(&reset(&format!("ganesha_s{i}"), 1000 + i, false));
        }
        let mut times: Vec<u64> = log.read().iter().map(|reset| reset.time_ms).collect();
        times.sort();
        assert_eq!(times, (1010..1010 + ENTRIES as u64).collect::<Vec<_>>());
    }

    #[test]
    fn an_entry_half_written_or_mixed_is_passed_over() {
        let words = words(SHAPE);
        let log = ResetLog::new(&words, SHAPE);
        log.note(&reset("ganesha_a", 5, false));
        log.note(&reset("ganesha_b", 6, false));
        let entry = log.entry(0);
        // A writer killed half way: its sequence odd.
        entry[0].fetch_add(1, Ordering::Relaxed);
        assert_eq!(log.read(), vec![reset("ganesha_b", 6, false)]);
        // Two writers' words mixed: another time, or another monotonic time, under the first's
        // check.
        entry[0].fetch_add(1, Ordering::Relaxed);
        entry[1].store(99, Ordering::Relaxed);
        assert_eq!(log.read(), vec![reset("ganesha_b", 6, false)]);
        entry[1].store(5, Ordering::Relaxed);
        assert_eq!(log.read().len(), 2, "the first's words again");
        entry[2].store(99, Ordering::Relaxed);
        assert_eq!(log.read(), vec![reset("ganesha_b", 6, false)]);
    }

    proptest::proptest! {
        /// Whatever the words hold (someone wrote the segment file), a read returns, with keys
        /// no longer than the segment's.
        #[test]
        fn garbage_reads_to_bounded_entries(garbage in proptest::collection::vec(proptest::num::u64::ANY, SHAPE.words())) {
            let words: Vec<AtomicU64> = garbage.into_iter().map(AtomicU64::new).collect();
            let log = ResetLog::new(&words, SHAPE);
            for reset in log.read() {
                proptest::prop_assert!(reset.key.len() <= SHAPE.max_key_length);
            }
        }
    }
}
