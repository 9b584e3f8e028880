//! A lock-free hash table from byte-string keys to fixed-size slots, in shared memory.
//!
//! Open addressing with linear probing over a fixed number of slots. Every slot is made of
//! 64-bit words:
//!
//! ```text
//! [tag][ident][reach][owner][payload: payload_words][key: key_words]
//! ```
//!
//! * `tag`: `[state: 2][generation: 30][stamp: 32]`. The state machine is
//!   `FREE -> RESERVED -> PENDING -> LIVE -> FREE`, every transition one compare-and-swap.
//!   The generation grows on every claim: it tells the incarnations of a slot apart. The stamp is
//!   the claim time for RESERVED and PENDING, and for LIVE the time until which the slot must be
//!   kept (its data may still be read until then).
//! * `ident`: `[fingerprint: 32][key length: 32]`, written while the slot is RESERVED.
//! * `reach`: of this slot taken as a home position, the farthest distance at which a key whose
//!   home it is was ever placed. Lookups probe that far and no farther; it only grows.
//! * `owner`: `[generation: 32][pid: 32]` of the process that claimed the slot, so that a claim
//!   left by a process that no longer exists is taken over at once rather than after a timeout.
//!   The pid is 0 when the claimer's process ids cannot be checked by the others (see
//!   `Table::new`).
//! * `payload`: the caller's words. A claim sets each to `generation_byte << 56`, so callers
//!   can keep the slot's generation in their words and have a writer that looked the slot up
//!   before it was recycled fail its compare-and-swap.
//! * `key`: the key bytes, little-endian, zero-padded.
//!
//! No lock lives here: a process killed at any instruction leaves at worst a slot RESERVED or
//! PENDING, which other processes take over as soon as they see its claimer is gone, or once
//! its stamp is older than a timeout (when they cannot tell).
//!
//! Two processes inserting the same new key at once each publish a PENDING slot, then look for
//! another PENDING or LIVE slot with that key (sequentially consistent, as in Dekker's
//! algorithm, so at least one of them sees the other); whoever sees one withdraws. Two LIVE slots
//! never hold one key, so counts are never split.

use std::sync::atomic::{fence, AtomicU64, Ordering};

use crate::segment::Stats;

/// Words before a slot's payload: tag, ident, reach, owner.
const HEADER_WORDS: usize = 4;

/// Seconds after which a slot left PENDING by its claimer may be taken over. A claimer only
/// compares-and-swaps its tag once PENDING, which fails harmlessly after a takeover.
const PENDING_TIMEOUT: u64 = 2;

/// Seconds after which a slot left RESERVED may be taken over. A RESERVED claimer still writes
/// the key with plain stores, so this is long: only a process killed (or stopped) in the few
/// instructions between claiming a slot and publishing it leaves one behind.
const RESERVED_TIMEOUT: u64 = 600;

/// Lookups and claims a call makes before giving up with [`TableError::Contended`].
const MAX_ATTEMPTS: u32 = 64;

/// Words that hold a key of up to `max_key_length` bytes.
pub fn key_words(max_key_length: usize) -> usize {
    max_key_length.div_ceil(8)
}

/// Words taken by one slot with the given payload and key sizes.
pub fn slot_words(payload_words: usize, key_words: usize) -> usize {
    HEADER_WORDS + payload_words + key_words
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableError {
    /// The key is longer than a slot can hold.
    KeyTooLong { length: usize, max: usize },
    /// Every slot holds data that has not expired.
    Full { slots: usize },
    /// Other processes kept winning the race for the same new key.
    Contended,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Free = 0,
    Reserved = 1,
    Pending = 2,
    Live = 3,
}

const GENERATION_MASK: u32 = (1 << 30) - 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Tag(u64);

impl Tag {
    fn new(state: State, generation: u32, stamp: u32) -> Self {
        Self((state as u64) << 62 | ((generation & GENERATION_MASK) as u64) << 32 | stamp as u64)
    }

    fn state(self) -> State {
        match self.0 >> 62 {
            0 => State::Free,
            1 => State::Reserved,
            2 => State::Pending,
            _ => State::Live,
        }
    }

    fn generation(self) -> u32 {
        (self.0 >> 32) as u32 & GENERATION_MASK
    }

    fn stamp(self) -> u32 {
        self.0 as u32
    }

    /// Whether a new key may take this slot at `now`, as far as the tag tells.
    fn claimable(self, now: u64) -> bool {
        let stamp = self.stamp() as u64;
        match self.state() {
            State::Free => true,
            State::Live => stamp < now,
            State::Pending => now > stamp + PENDING_TIMEOUT,
            State::Reserved => now > stamp + RESERVED_TIMEOUT,
        }
    }
}

fn clamp_seconds(seconds: u64) -> u32 {
    seconds.min(u32::MAX as u64) as u32
}

/// A key with its hash, as the table compares it.
struct Key<'k> {
    bytes: &'k [u8],
    hash: u64,
}

impl Key<'_> {
    fn home(&self, slots: usize) -> usize {
        // Multiply-shift maps the hash onto 0..slots without a division.
        ((self.hash as u128 * slots as u128) >> 64) as usize
    }

    fn ident(&self) -> u64 {
        (self.hash >> 32) << 32 | self.bytes.len() as u64
    }

    /// The key as the little-endian, zero-padded words a slot stores.
    fn words(&self) -> impl Iterator<Item = u64> + '_ {
        self.bytes.chunks(8).map(le_word)
    }
}

/// Up to 8 bytes as a little-endian word, zero-padded; without a `memcpy` call for the short
/// last chunk, which profiling showed costing more than the hash itself.
#[inline(always)]
fn le_word(chunk: &[u8]) -> u64 {
    match <[u8; 8]>::try_from(chunk) {
        Ok(full) => u64::from_le_bytes(full),
        Err(_) => chunk.iter().rev().fold(0, |word, &byte| word << 8 | byte as u64),
    }
}

/// A keyed 64-bit hash of a byte string: one multiply per 8 bytes, then a full avalanche.
/// Collisions only lengthen probes; keys are always compared byte for byte.
fn hash(seed: u64, bytes: &[u8]) -> u64 {
    let mut h = seed ^ (bytes.len() as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    for chunk in bytes.chunks(8) {
        h = (h ^ le_word(chunk)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h ^= h >> 29;
    }
    h ^= h >> 32;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 29)
}

#[derive(Clone, Copy)]
struct Slot<'a> {
    words: &'a [AtomicU64],
    payload_words: usize,
}

impl<'a> Slot<'a> {
    fn tag(&self) -> &'a AtomicU64 {
        &self.words[0]
    }

    fn ident(&self) -> &'a AtomicU64 {
        &self.words[1]
    }

    fn reach(&self) -> &'a AtomicU64 {
        &self.words[2]
    }

    fn owner(&self) -> &'a AtomicU64 {
        &self.words[3]
    }

    /// Whether a slot seen with `tag` may be taken by a new key at `now`: free, expired, or
    /// claimed by a process that has timed out or (when `check_claimer`) no longer exists.
    fn claimable(&self, tag: Tag, now: u64, check_claimer: bool) -> bool {
        tag.claimable(now)
            || check_claimer && matches!(tag.state(), State::Reserved | State::Pending) && self.claimer_is_gone(tag)
    }

    /// Whether the process that claimed this slot, seen RESERVED or PENDING with `tag`, has
    /// ended. False when unsure: the owner word may still be a previous claim's (another
    /// generation), its pid unrecorded (0), or the process may exist under another user (EPERM).
    fn claimer_is_gone(&self, tag: Tag) -> bool {
        // Acquire: pairs with the Release store of the owner after the claim.
        let owner = self.owner().load(Ordering::Acquire);
        let pid = owner as u32;
        (owner >> 32) as u32 == tag.generation() && pid != 0 && !process_exists(pid)
    }

    fn payload(&self) -> &'a [AtomicU64] {
        &self.words[HEADER_WORDS..HEADER_WORDS + self.payload_words]
    }

    fn key_words(&self) -> &'a [AtomicU64] {
        &self.words[HEADER_WORDS + self.payload_words..]
    }

    /// Whether this slot, seen with `tag`, holds `key`. A seqlock read: the ident and key
    /// words are read with relaxed loads, then the tag is read again; a slot recycled meanwhile
    /// shows another tag, and whatever was read of it is discarded.
    fn holds(&self, tag: Tag, key: &Key<'_>) -> bool {
        // Relaxed: validated by the fence and the tag read below.
        if self.ident().load(Ordering::Relaxed) != key.ident() {
            return false;
        }
        let same_key = key.words().zip(self.key_words()).all(|(word, stored)| stored.load(Ordering::Relaxed) == word);
        // Acquire fence: if any word read above was written by a later claim, that claim's tag
        // change (made before its Release fence) is visible to the tag read below.
        fence(Ordering::Acquire);
        same_key && Tag(self.tag().load(Ordering::Relaxed)).generation() == tag.generation()
    }

    /// The key this slot held when seen with `tag`, or `None` if it changed while being read.
    fn read_key(&self, tag: Tag) -> Option<Vec<u8>> {
        // Relaxed loads validated by the fence and the tag read, as in `holds`.
        let length = (self.ident().load(Ordering::Relaxed) as u32 as usize).min(self.key_words().len() * 8);
        let mut bytes: Vec<u8> =
            self.key_words().iter().flat_map(|w| w.load(Ordering::Relaxed).to_le_bytes()).collect();
        fence(Ordering::Acquire);
        if self.tag().load(Ordering::Relaxed) != tag.0 {
            return None;
        }
        bytes.truncate(length);
        Some(bytes)
    }
}

/// A LIVE slot holding the key it was looked up for.
#[derive(Clone, Copy)]
pub struct Entry<'a> {
    slot: Slot<'a>,
    tag: Tag,
}

impl<'a> Entry<'a> {
    /// The low byte of the slot's generation, which the payload words carry.
    pub fn generation_byte(&self) -> u8 {
        self.tag.generation() as u8
    }

    pub fn payload(&self) -> &'a [AtomicU64] {
        self.slot.payload()
    }

    /// Whether the slot still holds the key it was looked up for. Called after reading payload
    /// words, to validate them as a seqlock reader does.
    pub fn is_current(&self) -> bool {
        // Acquire fence: if a payload word read before this call was written by a later claim,
        // that claim's tag is visible to the load below (see `Table::insert`).
        fence(Ordering::Acquire);
        let tag = Tag(self.slot.tag().load(Ordering::Relaxed));
        tag.state() == State::Live && tag.generation() == self.tag.generation()
    }
}

/// What slots of a table hold at a given time.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// LIVE slots that must still be kept.
    pub live: usize,
    /// LIVE slots whose data has all expired: the next new key may take them.
    pub expired: usize,
    /// Slots being claimed, or left so by a killed process until their timeout.
    pub claiming: usize,
}

pub struct Table<'a> {
    words: &'a [AtomicU64],
    slots: usize,
    slot_words: usize,
    payload_words: usize,
    max_key_length: usize,
    seed: u64,
    /// Whether claims record the claimer's process id and are taken over at once when that
    /// process is gone: only when every process recording one shares this one's namespace.
    checks_claimers: bool,
    stats: Stats<'a>,
}

impl<'a> Table<'a> {
    /// A table over `words`, which must hold exactly `slots` slots of the given sizes.
    /// `checks_claimers`: whether every process that records its id in this table shares this
    /// process's process-id namespace (see `Segment::checks_claimers`).
    pub fn new(
        words: &'a [AtomicU64],
        slots: usize,
        payload_words: usize,
        max_key_length: usize,
        seed: u64,
        checks_claimers: bool,
        stats: Stats<'a>,
    ) -> Self {
        let key_words = key_words(max_key_length);
        let slot_words = slot_words(payload_words, key_words);
        assert_eq!(words.len(), slots * slot_words, "table words do not match its layout");
        assert!(slots > 0, "a table needs at least one slot");
        Self { words, slots, slot_words, payload_words, max_key_length, seed, checks_claimers, stats }
    }

    #[cfg(test)]
    pub fn slots(&self) -> usize {
        self.slots
    }

    fn slot(&self, index: usize) -> Slot<'a> {
        let start = index * self.slot_words;
        Slot { words: &self.words[start..start + self.slot_words], payload_words: self.payload_words }
    }

    fn key<'k>(&self, bytes: &'k [u8]) -> Result<Key<'k>, TableError> {
        if bytes.len() > self.max_key_length {
            return Err(TableError::KeyTooLong { length: bytes.len(), max: self.max_key_length });
        }
        Ok(Key { bytes, hash: hash(self.seed, bytes) })
    }

    /// The slots a key with home `home` may be in, nearest first.
    fn probe(&self, home: usize, distances: usize) -> impl Iterator<Item = (usize, Slot<'a>)> + '_ {
        (0..distances.min(self.slots)).map(move |distance| {
            let index = (home + distance) % self.slots;
            (index, self.slot(index))
        })
    }

    fn reach(&self, home: usize, ordering: Ordering) -> usize {
        self.slot(home).reach().load(ordering) as usize + 1
    }

    /// The LIVE slot holding `key`, if any. Never writes.
    pub fn find(&self, key: &[u8]) -> Result<Option<Entry<'a>>, TableError> {
        let key = self.key(key)?;
        Ok(self.lookup(&key))
    }

    fn lookup(&self, key: &Key<'_>) -> Option<Entry<'a>> {
        let home = key.home(self.slots);
        // Acquire: a key placed farther than we read here is being inserted right now, and the
        // inserter's own check settles which slot wins.
        let reach = self.reach(home, Ordering::Acquire);
        self.probe(home, reach).find_map(|(_, slot)| {
            // Acquire: pairs with the Release publication of the slot, so its key is visible.
            let tag = Tag(slot.tag().load(Ordering::Acquire));
            (tag.state() == State::Live && slot.holds(tag, key)).then_some(Entry { slot, tag })
        })
    }

    /// The LIVE slot holding `key`, inserted if missing, and kept until at least `keep_until`.
    pub fn find_or_insert(&self, key: &[u8], now: u64, keep_until: u64) -> Result<Entry<'a>, TableError> {
        let key = self.key(key)?;
        let keep_until = clamp_seconds(keep_until);
        for attempt in 0..MAX_ATTEMPTS {
            if let Some(entry) = self.lookup(&key) {
                if let Some(entry) = self.keep(entry, now, keep_until) {
                    return Ok(entry);
                }
                continue;
            }
            if let Some(entry) = self.insert(&key, now, keep_until)? {
                return Ok(entry);
            }
            back_off(attempt);
        }
        Err(TableError::Contended)
    }

    /// The LIVE slot holding `key`, if any, kept until at least `keep_until`: for a write that
    /// must not create the key.
    pub fn find_and_keep(&self, key: &[u8], now: u64, keep_until: u64) -> Result<Option<Entry<'a>>, TableError> {
        let key = self.key(key)?;
        let keep_until = clamp_seconds(keep_until);
        for _ in 0..MAX_ATTEMPTS {
            let Some(entry) = self.lookup(&key) else {
                return Ok(None);
            };
            if let Some(entry) = self.keep(entry, now, keep_until) {
                return Ok(Some(entry));
            }
        }
        Err(TableError::Contended)
    }

    /// Makes sure `entry`, found with `find`, is kept until at least `keep_until`: for a write
    /// decided after reading. `None` if its slot was recycled meanwhile.
    pub fn keep_entry(&self, entry: Entry<'a>, now: u64, keep_until: u64) -> Option<Entry<'a>> {
        self.keep(entry, now, clamp_seconds(keep_until))
    }

    /// Makes sure `entry` is kept until `keep_until`; `None` if its slot was recycled.
    fn keep(&self, entry: Entry<'a>, now: u64, keep_until: u32) -> Option<Entry<'a>> {
        let mut tag = entry.tag;
        loop {
            if tag.stamp() >= keep_until {
                return Some(Entry { slot: entry.slot, tag });
            }
            // Extend to twice what is needed, so that a busy key extends once per TTL rather
            // than on every write.
            let extended = clamp_seconds((keep_until as u64) * 2 - now.min(keep_until as u64));
            let new = Tag::new(State::Live, tag.generation(), extended);
            // AcqRel on success: the extension is ordered before the writes that rely on it;
            // Acquire on failure: the tag read is then used as the new expected value.
            match entry.slot.tag().compare_exchange(tag.0, new.0, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Some(Entry { slot: entry.slot, tag: new }),
                Err(current) => {
                    let current = Tag(current);
                    if current.state() != State::Live || current.generation() != tag.generation() {
                        return None;
                    }
                    tag = current;
                }
            }
        }
    }

    /// Claims a slot for `key` and publishes it. `Ok(None)`: another process raced us for the
    /// key or the slot; look again.
    fn insert(&self, key: &Key<'_>, now: u64, keep_until: u32) -> Result<Option<Entry<'a>>, TableError> {
        let home = key.home(self.slots);
        let stamp = clamp_seconds(now);
        for (distance, (index, slot)) in self.probe(home, self.slots).enumerate() {
            // Acquire: a FREE or expired slot's old contents are overwritten only after this.
            let seen = Tag(slot.tag().load(Ordering::Acquire));
            if !slot.claimable(seen, now, self.checks_claimers) {
                continue;
            }
            let generation = seen.generation().wrapping_add(1) & GENERATION_MASK;
            let reserved = Tag::new(State::Reserved, generation, stamp);
            // AcqRel: the claim is ordered after whatever the previous owner wrote, and before
            // the writes below. Relaxed on failure: someone else took it; try the next slot.
            if slot.tag().compare_exchange(seen.0, reserved.0, Ordering::AcqRel, Ordering::Relaxed).is_err() {
                continue;
            }
            // The process id is read now, not when the table was built: a process forked since
            // must record its own. Release: whoever reads this owner with our generation reads it.
            let pid = if self.checks_claimers { std::process::id() } else { 0 };
            slot.owner().store((generation as u64) << 32 | pid as u64, Ordering::Release);
            // Relaxed: statistics only.
            self.stats.claims.fetch_add(1, Ordering::Relaxed);
            if seen.state() != State::Free {
                self.stats.reclaims.fetch_add(1, Ordering::Relaxed);
            }
            // SeqCst: part of the Dekker-style check below; lookups from `home` must probe this
            // far before the slot can hold the key.
            self.slot(home).reach().fetch_max(distance as u64, Ordering::SeqCst);
            // Release fence: a reader whose relaxed loads see the writes below also sees the
            // claim above, so its seqlock check rejects what it read (see `Slot::holds`).
            fence(Ordering::Release);
            // Relaxed: published by the Release half of the PENDING compare-and-swap.
            slot.ident().store(key.ident(), Ordering::Relaxed);
            let mut key_words = key.words();
            for stored in slot.key_words() {
                stored.store(key_words.next().unwrap_or(0), Ordering::Relaxed);
            }
            let empty = (generation as u8 as u64) << 56;
            for word in slot.payload() {
                word.store(empty, Ordering::Relaxed);
            }
            let pending = Tag::new(State::Pending, generation, stamp);
            // SeqCst: the publication half of the Dekker-style check.
            if slot.tag().compare_exchange(reserved.0, pending.0, Ordering::SeqCst, Ordering::Relaxed).is_err() {
                return Ok(None); // taken over after RESERVED_TIMEOUT
            }
            let next = if self.rival(key, home, index, now) {
                Tag::new(State::Free, generation, 0)
            } else {
                Tag::new(State::Live, generation, keep_until)
            };
            // SeqCst/Relaxed: publishes LIVE (or withdraws) unless the slot was taken over.
            let published = slot.tag().compare_exchange(pending.0, next.0, Ordering::SeqCst, Ordering::Relaxed).is_ok();
            return Ok((published && next.state() == State::Live).then_some(Entry { slot, tag: next }));
        }
        self.stats.full_errors.fetch_add(1, Ordering::Relaxed);
        Err(TableError::Full { slots: self.slots })
    }

    /// Whether a slot other than `own` holds `key` as PENDING (not abandoned) or LIVE.
    fn rival(&self, key: &Key<'_>, home: usize, own: usize, now: u64) -> bool {
        // SeqCst loads, after our SeqCst publication: the reading half of the Dekker check.
        let reach = self.reach(home, Ordering::SeqCst);
        self.probe(home, reach).any(|(index, slot)| {
            let tag = Tag(slot.tag().load(Ordering::SeqCst));
            let contender = match tag.state() {
                State::Live => true,
                State::Pending => !slot.claimable(tag, now, self.checks_claimers),
                State::Free | State::Reserved => false,
            };
            index != own && contender && slot.holds(tag, key)
        })
    }

    /// Frees every LIVE slot whose key satisfies `matches`; returns how many.
    pub fn remove_matching(&self, matches: impl Fn(&[u8]) -> bool) -> usize {
        (0..self.slots)
            .filter(|&index| {
                let slot = self.slot(index);
                // Acquire: the key read below is the published one.
                let tag = Tag(slot.tag().load(Ordering::Acquire));
                tag.state() == State::Live
                    && slot.read_key(tag).is_some_and(|key| matches(&key))
                    // AcqRel/Relaxed: frees the slot only if it still holds that key.
                    && slot
                        .tag()
                        .compare_exchange(tag.0, Tag::new(State::Free, tag.generation(), 0).0, Ordering::AcqRel, Ordering::Relaxed)
                        .is_ok()
            })
            .count()
    }

    /// The keys of the LIVE slots whose data may not all have expired at `now`.
    pub fn live_keys(&self, now: u64) -> Vec<Vec<u8>> {
        (0..self.slots)
            .filter_map(|index| {
                let slot = self.slot(index);
                // Acquire: the key read below is the published one.
                let tag = Tag(slot.tag().load(Ordering::Acquire));
                (tag.state() == State::Live && !tag.claimable(now)).then(|| slot.read_key(tag)).flatten()
            })
            .collect()
    }

    /// How the slots are used at `now`.
    pub fn usage(&self, now: u64) -> Usage {
        let mut usage = Usage::default();
        for index in 0..self.slots {
            // Relaxed: a snapshot for reporting.
            let tag = Tag(self.slot(index).tag().load(Ordering::Relaxed));
            match tag.state() {
                State::Free => {}
                State::Live if tag.claimable(now) => usage.expired += 1,
                State::Live => usage.live += 1,
                State::Reserved | State::Pending => usage.claiming += 1,
            }
        }
        usage
    }
}

/// Whether a process with this id, in this process's process-id namespace, exists.
fn process_exists(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return true;
    };
    // SAFETY: kill with signal 0 sends nothing; it only checks that the process exists and may
    // be signalled.
    let sent = unsafe { libc::kill(pid, 0) };
    sent == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// Waits a little, longer at each attempt and differently in each process, so that processes
/// racing for the same new key stop colliding.
fn back_off(attempt: u32) {
    let jitter = hash(std::process::id() as u64, &attempt.to_le_bytes()) % 64;
    for _ in 0..(jitter + 1) << attempt.min(6) {
        std::hint::spin_loop();
    }
    if attempt >= 8 {
        std::thread::yield_now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A table over process-local words, with its statistics words.
    pub(crate) struct Fixture {
        words: Vec<AtomicU64>,
        stats: [AtomicU64; 3],
        slots: usize,
        payload_words: usize,
        key_words: usize,
    }

    impl Fixture {
        /// `key_words` words of key: keys of up to `8 × key_words` bytes.
        pub(crate) fn new(slots: usize, payload_words: usize, key_words: usize) -> Self {
            let words = (0..slots * slot_words(payload_words, key_words)).map(|_| AtomicU64::new(0)).collect();
            Self { words, stats: Default::default(), slots, payload_words, key_words }
        }

        pub(crate) fn table(&self) -> Table<'_> {
            self.table_checking_claimers(true)
        }

        /// The table as a process that records and checks claimers' ids, or does not.
        pub(crate) fn table_checking_claimers(&self, checks_claimers: bool) -> Table<'_> {
            let stats = Stats { claims: &self.stats[0], reclaims: &self.stats[1], full_errors: &self.stats[2] };
            Table::new(&self.words, self.slots, self.payload_words, self.key_words * 8, 42, checks_claimers, stats)
        }
    }

    #[test]
    fn short_chunks_are_zero_padded_little_endian_words() {
        assert_eq!(le_word(b"\x01\x02\x03"), 0x03_02_01);
        assert_eq!(le_word(b""), 0);
        assert_eq!(le_word(b"abcdefgh"), u64::from_le_bytes(*b"abcdefgh"));
    }

    #[test]
    fn tags_round_trip() {
        let tag = Tag::new(State::Pending, GENERATION_MASK, u32::MAX);
        assert_eq!((tag.state(), tag.generation(), tag.stamp()), (State::Pending, GENERATION_MASK, u32::MAX));
        assert_eq!(Tag(0).state(), State::Free, "zeroed memory is a table of free slots");
    }

    #[test]
    fn a_key_is_found_only_once_inserted_and_keeps_its_slot() {
        let fixture = Fixture::new(8, 1, 4);
        let table = fixture.table();
        assert!(table.find(b"a").unwrap().is_none());
        let entry = table.find_or_insert(b"a", 100, 110).unwrap();
        entry.payload()[0].store(7, Ordering::Relaxed);
        let again = table.find(b"a").unwrap().unwrap();
        assert_eq!(again.payload()[0].load(Ordering::Relaxed), 7);
        assert!(std::ptr::eq(again.payload(), table.find_or_insert(b"a", 101, 111).unwrap().payload()));
        assert_eq!(table.usage(100), Usage { live: 1, expired: 0, claiming: 0 });
    }

    #[test]
    fn keys_that_differ_in_any_byte_or_length_get_different_slots() {
        let fixture = Fixture::new(16, 1, 4);
        let table = fixture.table();
        let keys: [&[u8]; 7] = [b"", b"\0", b"\0\0", b"a\0b", b"a\0c", b"\xff\xfe", b"12345678\0"];
        for (i, key) in keys.iter().enumerate() {
            table.find_or_insert(key, 0, 10).unwrap().payload()[0].store(i as u64 + 1, Ordering::Relaxed);
        }
        for (i, key) in keys.iter().enumerate() {
            assert_eq!(table.find(key).unwrap().unwrap().payload()[0].load(Ordering::Relaxed), i as u64 + 1);
        }
    }

    #[test]
    fn claims_set_the_payload_to_the_generation_byte() {
        let fixture = Fixture::new(1, 3, 1);
        let table = fixture.table();
        let first = table.find_or_insert(b"x", 0, 5).unwrap();
        assert!(first.payload().iter().all(|w| w.load(Ordering::Relaxed) == (first.generation_byte() as u64) << 56));
        first.payload()[1].store(99, Ordering::Relaxed);
        assert_eq!(table.remove_matching(|k| k == b"x"), 1);
        let second = table.find_or_insert(b"y", 0, 5).unwrap();
        assert_ne!(second.generation_byte(), first.generation_byte());
        assert!(!first.is_current(), "the old entry sees its slot recycled");
        assert_eq!(second.payload()[1].load(Ordering::Relaxed), (second.generation_byte() as u64) << 56);
    }

    #[test]
    fn keys_longer_than_a_slot_are_refused() {
        let fixture = Fixture::new(2, 1, 2);
        let table = fixture.table();
        assert!(table.find_or_insert(&[1u8; 16], 0, 1).is_ok());
        assert_eq!(table.find(&[1u8; 17]).err(), Some(TableError::KeyTooLong { length: 17, max: 16 }));
        assert_eq!(
            table.find_or_insert(&vec![0u8; 100_000], 0, 1).err(),
            Some(TableError::KeyTooLong { length: 100_000, max: 16 })
        );
    }

    #[test]
    fn a_full_table_refuses_new_keys_and_keeps_the_old_ones() {
        let fixture = Fixture::new(3, 1, 1);
        let table = fixture.table();
        for key in [b"a", b"b", b"c"] {
            table.find_or_insert(key, 100, 200).unwrap().payload()[0].fetch_add(1, Ordering::Relaxed);
        }
        assert_eq!(table.find_or_insert(b"d", 150, 250).err(), Some(TableError::Full { slots: 3 }));
        assert_eq!(fixture.stats[2].load(Ordering::Relaxed), 1);
        for key in [b"a", b"b", b"c"] {
            assert!(table.find_or_insert(key, 150, 250).is_ok(), "existing keys still work when full");
        }
    }

    #[test]
    fn expired_slots_are_reclaimed_for_new_keys() {
        let fixture = Fixture::new(2, 1, 1);
        let table = fixture.table();
        table.find_or_insert(b"old", 100, 110).unwrap();
        table.find_or_insert(b"kept", 100, 500).unwrap();
        assert_eq!(
            table.find_or_insert(b"new", 110, 120).err(),
            Some(TableError::Full { slots: 2 }),
            "not expired at 110"
        );
        assert_eq!(table.usage(111), Usage { live: 1, expired: 1, claiming: 0 });
        table.find_or_insert(b"new", 111, 120).unwrap();
        assert!(table.find(b"old").unwrap().is_none());
        assert!(table.find(b"kept").unwrap().is_some());
        assert_eq!(fixture.stats[1].load(Ordering::Relaxed), 1, "one reclaim");
    }

    #[test]
    fn writes_extend_a_slot_so_it_is_not_reclaimed_under_them() {
        let fixture = Fixture::new(1, 1, 1);
        let table = fixture.table();
        table.find_or_insert(b"k", 100, 110).unwrap();
        table.find_or_insert(b"k", 109, 119).unwrap();
        assert_eq!(table.find_or_insert(b"other", 115, 125).err(), Some(TableError::Full { slots: 1 }));
    }

    #[test]
    fn abandoned_claims_are_taken_over_after_their_timeout() {
        let fixture = Fixture::new(2, 1, 1);
        let table = fixture.table();
        // A process killed while PENDING on one slot and while RESERVED on the other.
        table.slot(0).tag().store(Tag::new(State::Pending, 1, 100).0, Ordering::Relaxed);
        table.slot(1).tag().store(Tag::new(State::Reserved, 1, 100).0, Ordering::Relaxed);
        assert_eq!(table.usage(100).claiming, 2);
        assert!(table.find_or_insert(b"a", 101, 200).is_err(), "both claims are recent");
        table.find_or_insert(b"a", 100 + PENDING_TIMEOUT + 1, 200).unwrap();
        assert!(table.find_or_insert(b"b", 200, 300).is_err());
        table.find_or_insert(b"b", 100 + RESERVED_TIMEOUT + 1, 800).unwrap();
    }

    #[test]
    fn claims_of_processes_that_no_longer_exist_are_taken_over_at_once() {
        let fixture = Fixture::new(2, 1, 1);
        let table = fixture.table();
        let dead = dead_pid();
        for (index, state) in [(0, State::Pending), (1, State::Reserved)] {
            table.slot(index).tag().store(Tag::new(state, 5, 100).0, Ordering::Relaxed);
            table.slot(index).owner().store(5 << 32 | dead as u64, Ordering::Relaxed);
        }
        table.find_or_insert(b"a", 100, 200).unwrap();
        table.find_or_insert(b"b", 100, 200).unwrap();
        assert_eq!(table.usage(100), Usage { live: 2, expired: 0, claiming: 0 });
    }

    #[test]
    fn claims_whose_owner_is_alive_or_unknown_wait_for_their_timeout() {
        let fixture = Fixture::new(2, 1, 1);
        let table = fixture.table();
        table.slot(0).tag().store(Tag::new(State::Reserved, 5, 100).0, Ordering::Relaxed);
        table.slot(0).owner().store(5 << 32 | std::process::id() as u64, Ordering::Relaxed);
        // the owner word of an older claim says nothing of this one
        table.slot(1).tag().store(Tag::new(State::Pending, 6, 100).0, Ordering::Relaxed);
        table.slot(1).owner().store(5 << 32 | dead_pid() as u64, Ordering::Relaxed);
        assert_eq!(table.find_or_insert(b"a", 101, 200).err(), Some(TableError::Full { slots: 2 }));
    }

    #[test]
    fn processes_that_cannot_check_claimers_neither_record_nor_trust_pids() {
        let fixture = Fixture::new(2, 1, 1);
        let unchecked = fixture.table_checking_claimers(false);
        let dead = dead_pid();
        for (index, state) in [(0, State::Pending), (1, State::Reserved)] {
            unchecked.slot(index).tag().store(Tag::new(state, 5, 100).0, Ordering::Relaxed);
            unchecked.slot(index).owner().store(5 << 32 | dead as u64, Ordering::Relaxed);
        }
        assert_eq!(unchecked.find_or_insert(b"a", 101, 200).err(), Some(TableError::Full { slots: 2 }));
        unchecked.find_or_insert(b"a", 100 + PENDING_TIMEOUT + 1, 200).unwrap();
        // its own claims carry no pid, so a checking process never judges them by one
        let claimed = unchecked.slot(0).owner().load(Ordering::Relaxed);
        assert_eq!(claimed as u32, 0);
        let checking = fixture.table();
        checking.slot(0).tag().store(Tag::new(State::Reserved, (claimed >> 32) as u32, 300).0, Ordering::Relaxed);
        assert!(!checking.slot(0).claimer_is_gone(Tag(checking.slot(0).tag().load(Ordering::Relaxed))));
    }

    #[test]
    fn a_process_forked_after_the_table_was_built_records_its_own_id() {
        let fixture = Fixture::new(2, 1, 1);
        let table = fixture.table();
        table.find_or_insert(b"parent", 100, 200).unwrap();
        // SAFETY: fork in a test process: the child only uses the table (its own copy of the
        // fixture's words) and leaves with _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let entry = table.find_or_insert(b"child", 100, 200);
            let recorded = (0..2).map(|index| table.slot(index).owner().load(Ordering::Relaxed) as u32);
            let own = recorded.filter(|&pid| pid == std::process::id()).count();
            // SAFETY: _exit ends the child without running the parent's test harness.
            unsafe { libc::_exit(if entry.is_ok() && own == 1 { 0 } else { 1 }) };
        }
        let mut status = 0;
        // SAFETY: waiting for the child forked above.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "the child's claim carries the child's id");
    }

    /// The id of a process that has exited and been reaped.
    fn dead_pid() -> u32 {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    }

    #[test]
    fn a_rival_pending_claim_for_the_same_key_makes_the_newcomer_withdraw() {
        let fixture = Fixture::new(4, 1, 1);
        let table = fixture.table();
        let entry = table.find_or_insert(b"k", 100, 200).unwrap();
        // Make the existing slot look like another process's claim in progress.
        let live = entry.tag;
        entry.slot.tag().store(Tag::new(State::Pending, live.generation(), 100).0, Ordering::SeqCst);
        assert_eq!(table.find_or_insert(b"k", 100, 200).err(), Some(TableError::Contended));
        assert_eq!(table.usage(100), Usage { live: 0, expired: 0, claiming: 1 }, "the newcomer freed its slot");
        entry.slot.tag().store(live.0, Ordering::SeqCst);
        assert!(std::ptr::eq(table.find_or_insert(b"k", 100, 200).unwrap().payload(), entry.payload()));
    }

    #[test]
    fn long_probe_chains_are_found_after_removals() {
        let fixture = Fixture::new(32, 1, 1);
        let table = fixture.table();
        let keys: Vec<[u8; 2]> = (0..32u8).map(|i| [b'k', i]).collect();
        for (i, key) in keys.iter().enumerate() {
            table.find_or_insert(key, 0, 10).unwrap().payload()[0].store(i as u64, Ordering::Relaxed);
        }
        assert_eq!(table.remove_matching(|k| k[1] % 2 == 0), 16);
        for (i, key) in keys.iter().enumerate() {
            let found = table.find(key).unwrap();
            assert_eq!(found.map(|e| e.payload()[0].load(Ordering::Relaxed)), (i % 2 == 1).then_some(i as u64));
        }
    }

    #[test]
    fn concurrent_inserts_of_the_same_keys_never_split_them() {
        let fixture = Arc::new(Fixture::new(64, 1, 2));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let fixture = Arc::clone(&fixture);
                std::thread::spawn(move || {
                    let table = fixture.table();
                    for round in 0..2_000u32 {
                        let key = format!("key-{}", round % 48);
                        loop {
                            match table.find_or_insert(key.as_bytes(), 0, 10) {
                                Ok(entry) => {
                                    entry.payload()[0].fetch_add(1, Ordering::Relaxed);
                                    break;
                                }
                                Err(TableError::Contended) => continue,
                                Err(e) => panic!("{e:?}"),
                            }
                        }
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        let table = fixture.table();
        let total: u64 = (0..48)
            .map(|i| {
                table.find(format!("key-{i}").as_bytes()).unwrap().unwrap().payload()[0].load(Ordering::Relaxed)
                    & ((1 << 56) - 1)
            })
            .sum();
        assert_eq!(total, 8_000);
        assert_eq!(table.usage(0).live, 48, "one slot per key");
    }
}
