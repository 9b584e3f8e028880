//! A process's memo of where it last found keys in a table: a hint, never a proof.
//!
//! Ganesha asks for the same service's keys one call after another (a request loads the
//! failures, the status, then counts a success), and each lookup hashes its key and compares it
//! byte for byte with the slots it probes. The memo keeps, for a few recent keys, the slot that
//! held each and the claim it held it under (the generation and the ident word), so that the
//! next lookup of the key reads that slot's tag instead. The table trusts the hint only when the
//! slot is still LIVE under that same claim (see `Table::remembered`): a slot's key words change
//! only under a new claim, and every claim takes a new generation. So the memo stays right
//! however stale it gets: when the slot was freed or recycled since (by any process, or by a
//! `reset()`), or when this process is a `fork()` child holding its parent's memo, the hint
//! fails that check and the lookup probes as it would without it.
//!
//! It notes absent keys too (a healthy service's failure count and status are absent keys,
//! asked for on every request), with the reach word of the key's home as the probe read it:
//! every claim of a key raises its home's reach, bumping the word's version, before the key
//! can go LIVE. So while that word reads the same, no claim of the key was recorded since,
//! and the key is still absent (see `Table::remembered`).
//!
//! It lives in process-local memory, next to the table that uses it, never in the segment: each
//! process has its own, and no other process can write it. Its words are atomics only so that a
//! table can be shared by threads (a threaded PHP); each entry is a seqlock, so a reader never
//! mixes two entries' words, and a writer that finds another writing simply skips.
//!
//! Direct-mapped: an entry per index of a cheap unkeyed hash. Colliding keys (chosen or not)
//! only evict each other, which costs the probe that the memo would have saved; the table's own
//! hash, keyed per segment, still decides where keys live.

use std::sync::atomic::{fence, AtomicU64, Ordering};

/// Entries of a memo: a power of two. A request of Ganesha's uses 2 counter keys and 1 status
/// key of one service; this many keeps an application's busiest few services.
const ENTRIES: usize = 16;

/// Longest key the memo keeps, in bytes: the default `ganesha_shm.max_key_length`. A longer key
/// (with a setting raised past it) is looked up by probing only.
pub const MAX_KEY_BYTES: usize = 160;

/// Words of an entry's copy of its key.
const KEY_WORDS: usize = MAX_KEY_BYTES / 8;

/// A generation no claim has (they have 22 bits): the place of an entry that holds nothing.
const NO_GENERATION: u64 = u32::MAX as u64;

/// The generation field of an entry that notes a key absent: not a claim's either.
const ABSENT: u64 = u32::MAX as u64 - 1;

/// What the memo says of a key, as the table noted it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// The key was in slot `index`, under the claim of `generation`, whose ident word is
    /// `ident`.
    Slot { index: usize, generation: u32, ident: u64 },
    /// A probe from the key's home `home` found no slot holding it, and no claim in progress,
    /// with the home's reach word reading `reach` before it.
    Absent { home: usize, reach: u64 },
}

struct Entry {
    /// Even while the entry may be read, odd while it is written.
    version: AtomicU64,
    /// `[generation: 32][index: 32]`: the generation is [`NO_GENERATION`] when the entry holds
    /// nothing, [`ABSENT`] when it notes the key absent (the index is then its home).
    place: AtomicU64,
    /// The slot's ident word, or for an absent key the reach word of its home.
    ident: AtomicU64,
    /// Bytes of the key, and the key as [`key_words`] makes it.
    length: AtomicU64,
    key: [AtomicU64; KEY_WORDS],
}

pub struct Memo {
    entries: Box<[Entry; ENTRIES]>,
}

impl Default for Memo {
    fn default() -> Self {
        Self {
            entries: Box::new(std::array::from_fn(|_| Entry {
                version: AtomicU64::new(0),
                place: AtomicU64::new(NO_GENERATION << 32),
                ident: AtomicU64::new(0),
                length: AtomicU64::new(0),
                key: std::array::from_fn(|_| AtomicU64::new(0)),
            })),
        }
    }
}

/// The word of `key` at `at` (a multiple of 8 below its length), as the memo compares keys: 8
/// bytes little-endian, or for the last word of a key whose length is not a multiple of 8, the 8
/// bytes that end the key, overlapping the word before (so no byte is copied one at a time); a key
/// shorter than 8 bytes is one zero-padded word. Two keys of the same length have the same words
/// exactly when they are the same key.
#[inline(always)]
fn key_word(key: &[u8], at: usize) -> u64 {
    if at + 8 <= key.len() {
        u64::from_le_bytes(key[at..at + 8].try_into().unwrap())
    } else if key.len() >= 8 {
        u64::from_le_bytes(key[key.len() - 8..].try_into().unwrap())
    } else {
        key.iter().rev().fold(0, |word, &byte| word << 8 | byte as u64)
    }
}

/// How many words [`key_word`] makes of a key of `length` bytes.
#[inline(always)]
fn key_word_count(length: usize) -> usize {
    length.div_ceil(8).max(1)
}

/// The entry for `key`: a multiply-shift of its words' xor, mixed with its length.
#[inline(always)]
fn entry_index(key: &[u8]) -> usize {
    let mixed = (0..key_word_count(key.len())).fold(key.len() as u64, |mixed, word| mixed ^ key_word(key, word * 8));
    (mixed.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - ENTRIES.trailing_zeros())) as usize
}

impl Memo {
    /// Where `key` was last found, if the memo has it.
    #[inline(always)]
    pub fn recall(&self, key: &[u8]) -> Option<Place> {
        if key.len() > MAX_KEY_BYTES {
            return None;
        }
        let entry = &self.entries[entry_index(key)];
        // Acquire: pairs with the Release store that ended the last write, so the words read
        // below are at least that write's.
        let version = entry.version.load(Ordering::Acquire);
        // Relaxed, all of them: validated by the version read again below.
        if version & 1 != 0 || entry.length.load(Ordering::Relaxed) != key.len() as u64 {
            return None;
        }
        let words = key_word_count(key.len());
        if !(0..words).all(|word| entry.key[word].load(Ordering::Relaxed) == key_word(key, word * 8)) {
            return None;
        }
        let (place, ident) = (entry.place.load(Ordering::Relaxed), entry.ident.load(Ordering::Relaxed));
        // Acquire fence: if any word read above is from a later write, so is the version read
        // next (that write made it odd before its Release fence).
        fence(Ordering::Acquire);
        if entry.version.load(Ordering::Relaxed) != version {
            return None;
        }
        let index = place as u32 as usize;
        match place >> 32 {
            NO_GENERATION => None,
            ABSENT => Some(Place::Absent { home: index, reach: ident }),
            generation => Some(Place::Slot { index, generation: generation as u32, ident }),
        }
    }

    /// Notes that `key` was found at `place`. Skipped for a key too long to keep, and while
    /// another thread writes the same entry.
    pub fn remember(&self, key: &[u8], place: Place) {
        if key.len() > MAX_KEY_BYTES {
            return;
        }
        let entry = &self.entries[entry_index(key)];
        self.write(entry, |entry| {
            for word in 0..key_word_count(key.len()) {
                entry.key[word].store(key_word(key, word * 8), Ordering::Relaxed);
            }
            entry.length.store(key.len() as u64, Ordering::Relaxed);
            let (generation, index, ident) = match place {
                Place::Slot { index, generation, ident } => (generation as u64, index, ident),
                Place::Absent { home, reach } => (ABSENT, home, reach),
            };
            entry.place.store(generation << 32 | index as u64, Ordering::Relaxed);
            entry.ident.store(ident, Ordering::Relaxed);
        });
    }

    /// Empties every entry: for a table whose memory was replaced under it (see
    /// `segment::guard`), where generations start again and a slot's old place could be
    /// mistaken for a new claim's.
    pub fn forget(&self) {
        for entry in self.entries.iter() {
            self.write(entry, |entry| entry.place.store(NO_GENERATION << 32, Ordering::Relaxed));
        }
    }

    /// Runs `write` on `entry` under its seqlock, unless another thread is writing it.
    fn write(&self, entry: &Entry, write: impl FnOnce(&Entry)) {
        let version = entry.version.load(Ordering::Relaxed);
        // Acquire on success: the writes below stay after the version turns odd. Relaxed on
        // failure: another writer has the entry, and this note is dropped.
        if version & 1 != 0
            || entry.version.compare_exchange(version, version + 1, Ordering::Acquire, Ordering::Relaxed).is_err()
        {
            return;
        }
        // Release fence: a reader whose relaxed loads see any write below also sees the odd
        // version (see `recall`).
        fence(Ordering::Release);
        write(entry);
        // Release: a reader that sees this version sees the writes above.
        entry.version.store(version + 2, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(index: usize) -> Place {
        Place::Slot { index, generation: 7, ident: 0xabc }
    }

    #[test]
    fn a_key_is_recalled_where_it_was_last_found_and_no_other_key_is() {
        let memo = Memo::default();
        let key = b"ganesha_profile-service_failure";
        assert_eq!(memo.recall(key), None);
        memo.remember(key, place(3));
        assert_eq!(memo.recall(key), Some(place(3)));
        memo.remember(key, place(5));
        assert_eq!(memo.recall(key), Some(place(5)), "the last place found wins");
        for other in [&b"ganesha_profile-service_failurE"[..], b"ganesha_profile-service_failur", b"", b"g"] {
            assert_eq!(memo.recall(other), None, "{:?}", String::from_utf8_lossy(other));
        }
    }

    #[test]
    fn keys_of_every_length_are_told_apart_by_each_byte() {
        for length in 0..=MAX_KEY_BYTES {
            let memo = Memo::default();
            let key: Vec<u8> = (0..length).map(|i| i as u8).collect();
            memo.remember(&key, place(length));
            assert_eq!(memo.recall(&key), Some(place(length)), "length {length}");
            for at in 0..length {
                let mut other = key.clone();
                other[at] ^= 0x80;
                assert_eq!(memo.recall(&other), None, "length {length}, byte {at}");
            }
            // A key one byte shorter or longer, zero bytes included, is another key.
            assert_eq!(memo.recall(&[&key[..], b"\0"].concat()), None);
            if length > 0 {
                assert_eq!(memo.recall(&key[..length - 1]), None);
            }
        }
    }

    #[test]
    fn an_absence_is_recalled_as_noted_and_replaced_by_a_place() {
        let memo = Memo::default();
        let key = b"ganesha_svc_failure";
        let absent = Place::Absent { home: 9, reach: 3 << 32 | 1 };
        memo.remember(key, absent);
        assert_eq!(memo.recall(key), Some(absent));
        memo.remember(key, place(4));
        assert_eq!(memo.recall(key), Some(place(4)));
    }

    #[test]
    fn keys_too_long_are_never_kept() {
        let memo = Memo::default();
        let key = vec![b'k'; MAX_KEY_BYTES + 1];
        memo.remember(&key, place(1));
        assert_eq!(memo.recall(&key), None);
    }

    #[test]
    fn forget_empties_every_entry() {
        let memo = Memo::default();
        let keys: Vec<Vec<u8>> = (0..64).map(|i| format!("ganesha_service{i}_success").into_bytes()).collect();
        for (i, key) in keys.iter().enumerate() {
            memo.remember(key, place(i));
        }
        assert!(keys.iter().any(|key| memo.recall(key).is_some()));
        memo.forget();
        assert!(keys.iter().all(|key| memo.recall(key).is_none()));
    }

    #[test]
    fn a_writer_in_progress_is_never_read_nor_overwritten() {
        let memo = Memo::default();
        let key = b"ganesha_svc_status";
        memo.remember(key, place(1));
        let entry = &memo.entries[entry_index(key)];
        // Another thread stopped in the middle of writing the entry.
        entry.version.fetch_add(1, Ordering::Relaxed);
        assert_eq!(memo.recall(key), None, "a half-written entry is no hint");
        memo.remember(key, place(2));
        entry.version.fetch_add(1, Ordering::Relaxed);
        assert_eq!(memo.recall(key), Some(place(1)), "the second writer skipped");
    }
}
