//! A lock-free hash table from byte-string keys to fixed-size slots, in shared memory.
//!
//! Open addressing with linear probing over a fixed number of slots. Every slot is made of
//! 64-bit words:
//!
//! ```text
//! [tag][ident][reach][owner][payload: payload_words][key: key_words]
//! ```
//!
//! * `tag`: `[state: 2][generation: 22][stamp: 40]`. The state machine is
//!   `FREE -> RESERVED -> PENDING -> LIVE -> FREE`, every transition one compare-and-swap.
//!   The generation grows on every claim: it tells the incarnations of a slot apart. The stamp,
//!   in seconds (40 bits: until the year 36812), is the claim time for RESERVED and PENDING,
//!   and for LIVE the time until which the slot must be kept (its data may be read until then).
//! * `ident`: `[generation: 16][key length: 16][fingerprint: 32]`.
//! * `reach`: `[version: 32][distance: 32]`. Of this slot taken as a home position, the farthest
//!   distance at which a slot may hold a key whose home it is. Lookups probe that far and no
//!   farther. A claim raises it and bumps the version; the sweep (see below) lowers it, by a
//!   compare-and-swap that fails if any claim was recorded meanwhile.
//! * `owner`: `[generation: 32][pid: 32]` of the process that claimed the slot, so that a claim
//!   left by a process that no longer exists is taken over at once rather than after a timeout.
//!   The pid is 0 when the claimer's process ids cannot be checked by the others (see
//!   `Table::new`).
//! * `payload`: the caller's words. A claim sets word `i` to `init(i, generation)`, a value the
//!   caller makes unique to the claim, so that a writer that looked the slot up before it was
//!   recycled fails its compare-and-swap.
//! * `key`: the key bytes, 6 to a word under the claim's generation: `[generation: 16][6 bytes]`.
//!
//! A claimer writes the ident, owner, key and payload words while the slot is RESERVED, each with
//! a compare-and-swap made only while the tag still shows its own claim, and every value it writes
//! carries its generation. So a claimer stopped for any time (SIGSTOP, a frozen container) whose
//! claim was taken over meanwhile cannot write into the slot once the new claimer has written a
//! word: its compare-and-swap expects the word it read before it stopped. Once PENDING, a claimer
//! only compares-and-swaps its tag, which fails harmlessly after a takeover.
//!
//! No lock lives here: a process killed at any instruction leaves at worst a slot RESERVED or
//! PENDING, which other processes take over as soon as they see its claimer is gone, or once
//! its stamp is farther than a timeout from their own clock (when they cannot tell).
//!
//! **Capacity and headroom.** A table has more slots than its capacity (the store gives it half
//! as many again), and a count of the slots that are not FREE decides when it is full. So
//! probes stay short at any occupancy up to the capacity, and a new key on a full table is
//! refused without a scan. The count is lowered before a slot is freed and raised after a
//! claim is recorded: a process killed in between leaves it low, never high, so a killed
//! process can only let the table hold more than its capacity (into the headroom), never
//! refuse a key it has room for.
//!
//! **The sweep.** Each new key also sweeps a few slots from a cursor shared by every process:
//! it frees slots whose data has expired or whose claim was abandoned, and lowers the reach of
//! each home it passes to what the slots after it still need. A table at its capacity sweeps
//! more before refusing a key. So expired slots return to the count, and after any churn
//! probes go no farther than the keys stored now need.
//!
//! Two processes inserting the same new key at once each publish a PENDING slot, then
//! (after a sequentially consistent fence, as in Dekker's algorithm, so at least one of them sees
//! the other) look for another PENDING or LIVE slot with that key; whoever sees one withdraws. A
//! PENDING rival whose claimer is gone or timed out is freed first, by compare-and-swap, so that
//! it can never go LIVE afterwards. Two LIVE slots never hold one key, so counts are never split.

use crate::memo::{Memo, Place};
use crate::sync::{fence, AtomicU64, Ordering};

/// Words before a slot's payload: tag, ident, reach, owner.
const HEADER_WORDS: usize = 4;

/// Seconds between a PENDING claim's stamp and a process's clock after which the process may
/// take the claim over (either way: a stamp that far in its future is from a clock that is off).
const PENDING_TIMEOUT: u64 = 2;

/// The same for a RESERVED claim. Only a process killed (or stopped) in the few instructions
/// between claiming a slot and publishing it leaves one behind; taking it over is safe whenever
/// it happens (see the module documentation), this only bounds how long it is left.
const RESERVED_TIMEOUT: u64 = 600;

/// Lookups and claims a call makes before giving up with [`TableError::Contended`].
#[cfg(not(loom))]
const MAX_ATTEMPTS: u32 = 64;
#[cfg(loom)]
const MAX_ATTEMPTS: u32 = 2;

/// Slots each new key sweeps (see the module documentation), and how many more it sweeps when
/// the table is at its capacity before refusing the key. Small under the model checker, which
/// explores every interleaving of their steps.
#[cfg(not(loom))]
const SWEEP_PER_INSERT: usize = 4;
#[cfg(not(loom))]
const SWEEP_AT_CAPACITY: usize = 16;
#[cfg(loom)]
const SWEEP_PER_INSERT: usize = 0;
#[cfg(loom)]
const SWEEP_AT_CAPACITY: usize = 1;

/// Words of a table before its bitmap: the count of slots in use, the sweep's cursor.
const TABLE_HEADER_WORDS: usize = 2;

/// Key bytes a key word holds, below its 16-bit generation.
const KEY_BYTES_PER_WORD: usize = 6;

/// Words that hold a key of up to `max_key_length` bytes.
pub fn key_words(max_key_length: usize) -> usize {
    max_key_length.div_ceil(KEY_BYTES_PER_WORD)
}

/// Words taken by one slot with the given payload and key sizes.
pub fn slot_words(payload_words: usize, key_words: usize) -> usize {
    HEADER_WORDS + payload_words + key_words
}

/// The distance bits of a reach word, below its version.
const REACH_DISTANCE_MASK: u64 = u32::MAX as u64;

fn reach_distance(word: u64) -> usize {
    (word & REACH_DISTANCE_MASK) as usize
}

/// The last stamp a tag can hold.
const MAX_STAMP: u64 = (1 << 40) - 1;

/// The claim statistics, kept in shared words so that every process adds to the same figures.
#[derive(Clone, Copy)]
pub struct Stats<'a> {
    pub claims: &'a AtomicU64,
    pub reclaims: &'a AtomicU64,
    pub full_errors: &'a AtomicU64,
}

impl<'a> Stats<'a> {
    /// Words the statistics take.
    pub const WORDS: usize = 3;

    pub fn new(words: &'a [AtomicU64]) -> Self {
        Self { claims: &words[0], reclaims: &words[1], full_errors: &words[2] }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableError {
    /// The key is longer than a slot can hold.
    KeyTooLong { length: usize, max: usize },
    /// As many slots as the table's capacity hold data that has not expired.
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

const GENERATION_MASK: u32 = (1 << 22) - 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Tag(u64);

impl Tag {
    fn new(state: State, generation: u32, stamp: u64) -> Self {
        Self((state as u64) << 62 | ((generation & GENERATION_MASK) as u64) << 40 | stamp.min(MAX_STAMP))
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
        (self.0 >> 40) as u32 & GENERATION_MASK
    }

    fn stamp(self) -> u64 {
        self.0 & MAX_STAMP
    }

    /// Whether a new key may take this slot at `now`, as far as the tag tells.
    fn claimable(self, now: u64) -> bool {
        let (stamp, now) = (self.stamp(), now.min(MAX_STAMP));
        match self.state() {
            State::Free => true,
            State::Live => stamp < now,
            State::Pending => stamp.abs_diff(now) > PENDING_TIMEOUT,
            State::Reserved => stamp.abs_diff(now) > RESERVED_TIMEOUT,
        }
    }
}

/// The top 16 bits of a word written by the claim of `generation`.
fn word_tag(generation: u32) -> u64 {
    ((generation & 0xffff) as u64) << 48
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

    /// The ident word the claim of `generation` writes for this key.
    fn ident(&self, generation: u32) -> u64 {
        word_tag(generation) | (self.bytes.len() as u64 & 0xffff) << 32 | self.hash >> 32
    }

    /// The key words the claim of `generation` writes: 6 bytes each, little-endian, zero-padded.
    fn words(&self, generation: u32) -> impl Iterator<Item = u64> + '_ {
        let tag = word_tag(generation);
        self.bytes.chunks(KEY_BYTES_PER_WORD).map(move |chunk| tag | le_word(chunk))
    }
}

/// Up to 8 bytes as a little-endian word, zero-padded; without a `memcpy` call for a short
/// chunk, which profiling showed costing more than the hash itself.
#[inline(always)]
fn le_word(chunk: &[u8]) -> u64 {
    match chunk.len() {
        8 => u64::from_le_bytes(chunk.try_into().unwrap()),
        6 => {
            u32::from_le_bytes(chunk[..4].try_into().unwrap()) as u64
                | (u16::from_le_bytes([chunk[4], chunk[5]]) as u64) << 32
        }
        _ => chunk.iter().rev().fold(0, |word, &byte| word << 8 | byte as u64),
    }
}

/// A keyed 64-bit hash of a byte string: one multiply per 8 bytes, then a full avalanche.
/// Collisions only lengthen probes; keys are always compared byte for byte.
pub(crate) fn hash(seed: u64, bytes: &[u8]) -> u64 {
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
        // Acquire: pairs with the Release compare-and-swap of the owner after the claim.
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

    /// The slot's tag, read after the words read before this call: if any of them was written
    /// by a later claim, that claim's tag (set before its Release fence) is the one read here.
    fn tag_after_reads(&self) -> Tag {
        // Acquire fence: pairs with the Release fence a claimer makes before writing.
        fence(Ordering::Acquire);
        // Relaxed: ordered by the fence above.
        Tag(self.tag().load(Ordering::Relaxed))
    }

    /// Whether the words read before this call belong to the claim of `tag`: its key words
    /// change only under a new claim, that is a new generation (PENDING going LIVE, a LIVE slot
    /// extended or freed keep them).
    fn still_claimed_by(&self, tag: Tag) -> bool {
        self.tag_after_reads().generation() == tag.generation()
    }

    /// Whether the slot still holds the same incarnation, in the same state, as `tag`.
    fn still(&self, tag: Tag) -> bool {
        let now = self.tag_after_reads();
        now.state() == tag.state() && now.generation() == tag.generation()
    }

    /// Whether this slot, seen with `tag`, holds `key`. A seqlock read: the ident and key
    /// words are read with relaxed loads, then the tag is read again; a slot recycled meanwhile
    /// shows another generation, and whatever was read of it is discarded. (A slot that only
    /// changed state, PENDING to LIVE say, still holds the key: checking the state too would
    /// make the duplicate-key check miss a rival that went LIVE while it was read.) The words carry the
    /// generation they were written under, so a word of another claim never matches either.
    ///
    /// A key word of another generation under a claim that still holds the slot was written by
    /// whoever wrote over the segment file (every word a claim writes carries its generation).
    /// When the ident and every other key word are `key`'s, the slot is `key`'s: the word is
    /// written back, so that this lookup and the processes whose memo names the slot (it checks
    /// the ident, not the key words) keep agreeing on one slot for the key, rather than this
    /// one claiming a second that they never read.
    fn holds(&self, tag: Tag, key: &Key<'_>) -> bool {
        let generation = tag.generation();
        // Relaxed: validated by `still` below.
        if self.ident().load(Ordering::Relaxed) != key.ident(generation) {
            return false;
        }
        let ours = word_tag(generation);
        // The words of another generation, as read: only those are written back, so that a
        // claim that recycled the slot after the check below keeps every word it wrote.
        let mut written_over = Vec::new();
        for (index, (word, stored)) in key.words(generation).zip(self.key_words()).enumerate() {
            // Relaxed: validated by `still_claimed_by` below.
            let value = stored.load(Ordering::Relaxed);
            if value != word {
                if value & !((1 << 48) - 1) == ours {
                    return false; // another key of the same ident, written by its claim
                }
                written_over.push((index, value, word));
            }
        }
        if !self.still_claimed_by(tag) {
            return false;
        }
        for (index, value, word) in written_over {
            // Relaxed, from the value read: a claim that recycled the slot since wrote its own
            // word there (and this fails), or will write over this one (its compare-and-swap
            // from what it read fails, and it writes again, as over a rival claimer's word).
            let _ = self.key_words()[index].compare_exchange(value, word, Ordering::Relaxed, Ordering::Relaxed);
        }
        true
    }

    /// The key this slot held when seen with `tag`, or `None` if it was recycled while read.
    fn read_key(&self, tag: Tag) -> Option<Vec<u8>> {
        let expected = word_tag(tag.generation());
        // Relaxed loads validated by `still`, as in `holds`.
        let ident = self.ident().load(Ordering::Relaxed);
        let length = ((ident >> 32) & 0xffff) as usize;
        let words = length.div_ceil(KEY_BYTES_PER_WORD);
        if ident & !((1 << 48) - 1) != expected || words > self.key_words().len() {
            return None;
        }
        let mut bytes = Vec::with_capacity(words * KEY_BYTES_PER_WORD);
        for stored in &self.key_words()[..words] {
            let word = stored.load(Ordering::Relaxed);
            if word & !((1 << 48) - 1) != expected {
                return None;
            }
            bytes.extend_from_slice(&word.to_le_bytes()[..KEY_BYTES_PER_WORD]);
        }
        bytes.truncate(length);
        self.still_claimed_by(tag).then_some(bytes)
    }
}

/// Whether a lookup that finds no slot notes the key absent in the memo: for the calls that
/// read, not for those about to create the key (the note would only cost them).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Absence {
    Note,
    Ignore,
}

/// What the memo tells of a key, checked against the table (see `Table::remembered`).
enum Hint<'a> {
    Found(Entry<'a>),
    Absent,
    Unknown,
}

/// How far a slot kept for less than asked is extended.
#[derive(Clone, Copy)]
enum Extension {
    /// 1/16 of the lifetime asked for beyond it (and at least a second), so that a busy key
    /// renews its slot once per 1/16 of its lifetime (see `Table::keep`).
    WithMargin,
    /// To the moment asked for: for a slot kept alongside another's renewal, which has its
    /// margin already.
    Exact,
}

/// A LIVE slot holding the key it was looked up for.
#[derive(Clone, Copy)]
pub struct Entry<'a> {
    slot: Slot<'a>,
    tag: Tag,
    /// Whether the call that gave this entry created the slot or extended its lifetime.
    renewed: bool,
}

impl<'a> Entry<'a> {
    /// Until when the slot is kept, when the call that gave this entry created it or extended
    /// its lifetime (once per 1/16 of the lifetime asked for, see `Table::keep`): the moment
    /// to keep the keys that go with it as long (see `Store::keep`).
    pub fn renewed_until(&self) -> Option<u64> {
        self.renewed.then_some(self.tag.stamp())
    }

    /// The generation of the claim that gave the slot its key; the payload words carry it.
    pub fn generation(&self) -> u32 {
        self.tag.generation()
    }

    pub fn payload(&self) -> &'a [AtomicU64] {
        self.slot.payload()
    }

    /// Whether the slot still holds the key it was looked up for. Called after reading payload
    /// words, to validate them as a seqlock reader does, and before every compare-and-swap on
    /// them.
    pub fn is_current(&self) -> bool {
        self.slot.still(self.tag)
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

/// The sizes of a table's slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Slots the table has: its capacity and the headroom beyond it.
    pub slots: usize,
    /// Slots that may be in use before a new key is refused.
    pub capacity: usize,
    pub payload_words: usize,
    pub max_key_length: usize,
}

impl Shape {
    pub fn slot_words(&self) -> usize {
        slot_words(self.payload_words, key_words(self.max_key_length))
    }

    /// Words of the occupancy bitmap: one bit a slot.
    pub fn bitmap_words(&self) -> usize {
        self.slots.div_ceil(64)
    }

    /// Words of the table: the count of slots in use and the sweep's cursor, its occupancy
    /// bitmap, then its slots.
    pub fn words(&self) -> usize {
        TABLE_HEADER_WORDS + self.bitmap_words() + self.slots * self.slot_words()
    }
}

/// A claim in progress: the slot a claimer reserved, and for which key. `Table::insert` makes
/// its steps one method each, so that tests and the model checker can stop a claimer between
/// any two of them.
#[derive(Clone, Copy)]
struct Claim<'a> {
    slot: Slot<'a>,
    index: usize,
    home: usize,
    distance: usize,
    /// The tag the slot had when it was claimed.
    seen: Tag,
    /// The claim's tag while RESERVED.
    reserved: Tag,
}

impl Claim<'_> {
    fn generation(&self) -> u32 {
        self.reserved.generation()
    }

    fn pending(&self) -> Tag {
        Tag::new(State::Pending, self.generation(), self.reserved.stamp())
    }
}

pub struct Table<'a> {
    /// Slots that are not FREE, as a wrapping count that may read below zero (see the module
    /// documentation): compared with `capacity` to decide whether the table is full.
    in_use: &'a AtomicU64,
    /// Where the next sweep starts; it only grows, taken modulo the slots.
    sweep_cursor: &'a AtomicU64,
    /// One bit a slot, set when it is claimed, so that the calls that look at every key (usage,
    /// listing, reset) visit the slots in use only and never touch the pages of the others. A
    /// bit may stay set on a freed slot; such a call clears it (see `Table::occupied`).
    bitmap: &'a [AtomicU64],
    words: &'a [AtomicU64],
    slots: usize,
    capacity: usize,
    slot_words: usize,
    payload_words: usize,
    max_key_length: usize,
    seed: u64,
    /// Whether claims record the claimer's process id and are taken over at once when that
    /// process is gone: only when every process recording one shares this one's namespace.
    checks_claimers: bool,
    stats: Stats<'a>,
    /// The value payload word `i` gets from the claim of generation `g`: `init(i, g)`.
    init: fn(usize, u32) -> u64,
    /// Where this process last found keys (see `memo`): in its own memory, not the segment's.
    memo: Memo,
}

impl<'a> Table<'a> {
    /// A table over `words`, which must hold exactly the slots of `shape`. `checks_claimers`:
    /// whether every process that records its id in this table shares this process's
    /// process-id namespace (see `Segment::checks_claimers`). `init`: the value of each payload
    /// word after a claim, from its index and the claim's generation.
    pub fn new(
        words: &'a [AtomicU64],
        shape: Shape,
        seed: u64,
        checks_claimers: bool,
        stats: Stats<'a>,
        init: fn(usize, u32) -> u64,
    ) -> Self {
        let Shape { slots, capacity, payload_words, max_key_length } = shape;
        assert_eq!(words.len(), shape.words(), "table words do not match its layout");
        assert!(capacity > 0 && capacity <= slots, "a table needs at least one slot, and room for its capacity");
        assert!(slots <= u32::MAX as usize, "reach distances are stored in 32 bits");
        assert!(max_key_length <= 0xffff, "key lengths are stored in 16 bits");
        let slot_words = shape.slot_words();
        let (header, words) = words.split_at(TABLE_HEADER_WORDS);
        let (bitmap, words) = words.split_at(shape.bitmap_words());
        Self {
            in_use: &header[0],
            sweep_cursor: &header[1],
            bitmap,
            words,
            slots,
            capacity,
            slot_words,
            payload_words,
            max_key_length,
            seed,
            checks_claimers,
            stats,
            init,
            memo: Memo::default(),
        }
    }

    /// The indexes of the slots whose bit is set, with their tags (Acquire: the key read after is
    /// the published one). A bit found on a FREE slot is cleared, then the tag read again: a claim
    /// made meanwhile sets its bit after its tag, so if the clearing came after that setting,
    /// the tag read here shows the claim (the setting is Release, the clearing AcqRel), and the
    /// bit is set again; if before, the claim's own setting follows it.
    fn occupied(&self) -> impl Iterator<Item = (usize, Slot<'a>, Tag)> + '_ {
        self.bitmap.iter().enumerate().flat_map(move |(at, word)| {
            // Acquire: pairs with the Release setting of a bit after a claim.
            let mut bits = word.load(Ordering::Acquire);
            std::iter::from_fn(move || {
                while bits != 0 {
                    let bit = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    let index = at * 64 + bit;
                    if index >= self.slots {
                        return None;
                    }
                    let slot = self.slot(index);
                    let tag = Tag(slot.tag().load(Ordering::Acquire));
                    if tag.state() != State::Free {
                        return Some((index, slot, tag));
                    }
                    if let Some(tag) = self.clear_bit(index, slot) {
                        return Some((index, slot, tag));
                    }
                }
                None
            })
        })
    }

    /// Clears the bit of slot `index`, seen FREE, then reads its tag again: `Some` of it, with
    /// the bit set again, if the slot was claimed meanwhile (see `occupied`).
    fn clear_bit(&self, index: usize, slot: Slot<'a>) -> Option<Tag> {
        let (word, bit) = (&self.bitmap[index / 64], index % 64);
        // AcqRel: see `occupied`.
        word.fetch_and(!(1 << bit), Ordering::AcqRel);
        // Acquire: pairs with the claim's AcqRel compare-and-swap of the tag.
        let tag = Tag(slot.tag().load(Ordering::Acquire));
        if tag.state() == State::Free {
            return None;
        }
        // Release: as a claimer's own setting.
        word.fetch_or(1 << bit, Ordering::Release);
        Some(tag)
    }

    /// Repairs the count of slots in use from the occupancy bitmap, when a key is about to be
    /// refused: a count above the slots marked in use (or below zero) can only come from
    /// garbage written into the table by whoever may write the segment file, and would refuse
    /// every new key for ever. The count is lowered (or raised from below zero) to the marks:
    /// at most the slots in use, and low only by claims in flight, whose marks are set before
    /// their count is raised, which is the safe way (see the module documentation). Marks left
    /// on free slots are cleared by the sweep, so the marks converge on the slots in use.
    fn repair_count(&self) {
        let last_bits = self.slots % 64;
        let marked: u64 = self
            .bitmap
            .iter()
            .enumerate()
            .map(|(at, word)| {
                // Relaxed: a count, low-biased as explained above whatever it reads.
                let bits = word.load(Ordering::Relaxed);
                let bits =
                    if at + 1 == self.bitmap.len() && last_bits != 0 { bits & ((1 << last_bits) - 1) } else { bits };
                u64::from(bits.count_ones())
            })
            .sum();
        // Relaxed: the count only decides fullness, and a low count is always safe.
        let mut current = self.in_use.load(Ordering::Relaxed);
        while (current as i64) < 0 || current > marked {
            match self.in_use.compare_exchange(current, marked, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return,
                Err(changed) => current = changed,
            }
        }
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

    /// How many slots from `home` on a lookup of a key with that home probes.
    fn reach(&self, home: usize) -> usize {
        // Acquire: pairs with the Release compare-and-swap of a claimer placing a key farther;
        // a key placed farther than we read is being inserted right now, and the inserter's own
        // check settles which slot wins.
        reach_distance(self.slot(home).reach().load(Ordering::Acquire)) + 1
    }

    /// Whether as many slots as the capacity are in use.
    fn at_capacity(&self) -> bool {
        // Acquire: pairs with the Release increment after a claim is recorded, so a claimer
        // seeing the table at capacity because of a claim also sees that claim's reach.
        let in_use = self.in_use.load(Ordering::Acquire) as i64;
        in_use >= self.capacity as i64
    }

    /// Frees `slot`, seen with `tag`, by a compare-and-swap to FREE: lowering the count first,
    /// and raising it again if the compare-and-swap fails, so that a process killed in between
    /// leaves the count low (see the module documentation).
    fn free(&self, slot: Slot<'a>, tag: Tag) -> bool {
        // Relaxed: the count only decides fullness, and a low count is always safe.
        self.in_use.fetch_sub(1, Ordering::Relaxed);
        // AcqRel: ordered after the writes of the slot's claimer and writers. Relaxed on
        // failure: it changed, and is not freed.
        let freed = slot
            .tag()
            .compare_exchange(tag.0, Tag::new(State::Free, tag.generation(), 0).0, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok();
        if !freed {
            self.in_use.fetch_add(1, Ordering::Relaxed);
        }
        freed
    }

    /// Sweeps `budget` slots from the shared cursor: frees those whose data has expired at
    /// `now` or whose claim was abandoned, and lowers the reach of each as a home. Returns how
    /// many it freed.
    fn sweep(&self, now: u64, budget: usize) -> usize {
        if budget == 0 {
            return 0;
        }
        // Relaxed: the cursor only spreads the sweeps over the table; any value is correct.
        let start = self.sweep_cursor.fetch_add(budget as u64, Ordering::Relaxed);
        let index = |step: u64| ((start.wrapping_add(step)) % self.slots as u64) as usize;
        // The slots' first cache lines, read all at once before any is used, so that their
        // cache misses overlap instead of coming one after another (a table larger than the
        // caches misses on every slot). Relaxed: the values are not used.
        #[cfg(not(loom))]
        for step in 0..budget as u64 {
            self.slot(index(step)).tag().load(Ordering::Relaxed);
        }
        (0..budget as u64)
            .filter(|&step| {
                let index = index(step);
                let slot = self.slot(index);
                // Acquire: a slot freed here was seen with its claimer's writes done.
                let tag = Tag(slot.tag().load(Ordering::Acquire));
                let freed = tag.state() != State::Free
                    && slot.claimable(tag, now, self.checks_claimers)
                    && self.free(slot, tag);
                if freed && tag.state() == State::Live {
                    // Relaxed: statistics only. The slot is reclaimed for the next new key.
                    self.stats.reclaims.fetch_add(1, Ordering::Relaxed);
                }
                // A free slot's mark goes (see `repair_count`); the mark is read first (Relaxed:
                // `clear_bit` decides), so that a sweep over marked-free slots only is what costs.
                // Left out of the model checker, whose scenario of a scan racing a claim covers
                // `clear_bit`, and whose other properties no mark or count decides.
                #[cfg(not(loom))]
                if (freed || tag.state() == State::Free)
                    && self.bitmap[index / 64].load(Ordering::Relaxed) & 1 << (index % 64) != 0
                {
                    self.clear_bit(index, slot);
                }
                self.shrink(index);
                freed
            })
            .count()
    }

    /// Lowers the reach of `home` to the farthest slot within it that holds, or may come to
    /// hold, a key whose home it is: a RESERVED slot (its key is not known yet), or a PENDING
    /// or LIVE one whose key has this home (or was recycled while read).
    ///
    /// Sound against a claim racing it: a claim records its reach (bumping the version) after
    /// reserving its slot. If that recording came before our load of the reach word, we read
    /// its version (Acquire, pairing with its Release), so our load of the slot's tag below sees
    /// the claim or what followed it, and we keep the slot; if after, our compare-and-swap
    /// expects the old version and fails, or comes first and the claim raises the reach again.
    fn shrink(&self, home: usize) {
        let word = self.slot(home).reach();
        // Acquire: see above.
        let seen = word.load(Ordering::Acquire);
        let reach = reach_distance(seen).min(self.slots - 1);
        if reach == 0 {
            return;
        }
        let needed = (1..=reach)
            .rev()
            .find(|&distance| {
                let slot = self.slot((home + distance) % self.slots);
                // Acquire: pairs with the Release publication, so the key read is the claimer's.
                let tag = Tag(slot.tag().load(Ordering::Acquire));
                match tag.state() {
                    State::Free => false,
                    State::Reserved => true,
                    State::Pending | State::Live => self.may_have_home(slot, tag, home),
                }
            })
            .unwrap_or(0);
        if needed < reach_distance(seen) {
            // Release: as a claim's recording. Relaxed on failure: a claim was recorded
            // meanwhile; the next sweep tries again.
            let _ = word.compare_exchange(
                seen,
                seen & !REACH_DISTANCE_MASK | needed as u64,
                Ordering::Release,
                Ordering::Relaxed,
            );
        }
    }

    /// The LIVE slot holding `key`, if any. Never writes.
    pub fn find(&self, key: &[u8]) -> Result<Option<Entry<'a>>, TableError> {
        match self.remembered(key) {
            Hint::Found(entry) => return Ok(Some(entry)),
            Hint::Absent => return Ok(None),
            Hint::Unknown => {}
        }
        let key = self.key(key)?;
        Ok(self.lookup(&key, Absence::Note))
    }

    /// The LIVE slot holding `key`, probed for from its home; noted in the memo when found, and
    /// with `Absence::Note` when not.
    fn lookup(&self, key: &Key<'_>, absence: Absence) -> Option<Entry<'a>> {
        let home = key.home(self.slots);
        // Acquire: as in `reach`, and for the memo's note of an absent key (see `remembered`).
        let reach = self.slot(home).reach().load(Ordering::Acquire);
        let mut claims_seen = false;
        let found = self.probe(home, reach_distance(reach) + 1).find_map(|(index, slot)| {
            // Acquire: pairs with the Release publication of the slot, so its key is visible.
            let tag = Tag(slot.tag().load(Ordering::Acquire));
            match tag.state() {
                State::Live if slot.holds(tag, key) => {
                    self.note(key, index, tag);
                    Some(Entry { slot, tag, renewed: false })
                }
                State::Reserved | State::Pending => {
                    claims_seen = true;
                    None
                }
                State::Free | State::Live => None,
            }
        });
        if found.is_none() && !claims_seen && absence == Absence::Note {
            self.memo.remember(key.bytes, Place::Absent { home, reach });
        }
        found
    }

    /// Notes in the memo that `key` is in slot `index`, under the claim of `tag`.
    fn note(&self, key: &Key<'_>, index: usize, tag: Tag) {
        let generation = tag.generation();
        self.memo.remember(key.bytes, Place::Slot { index, generation, ident: key.ident(generation) });
    }

    /// What the memo says of `key`, once checked against the table.
    ///
    /// A slot: its entry, if it is still LIVE under the claim it was found under: the same
    /// generation (a slot's key words change only under a new claim, with a new generation), and
    /// the same ident word, which carries the key's length and fingerprint. Only 2^22 claims of
    /// that slot since, the last of them for a key of the same length and 32-bit fingerprint,
    /// could mislead it.
    ///
    /// An absence: still absent if the reach word of the key's home reads what it read before
    /// the probe that found no slot holding the key and no claim in progress. Every claim of
    /// the key raises that word, with a new version, after reserving its slot and before the
    /// key can go LIVE (see `record`). If a claim's raise came before the probe's read of the
    /// word, the read saw it (Acquire, pairing with the raise's Release), and so the probe saw
    /// its reservation or what followed it: a claim in progress, a LIVE slot holding the key, or a
    /// slot freed or given to another key since, which took another claim, and another raise, to
    /// hold the key again. If it came after, the word reads another value now. (Only 2^32 raises
    /// of that home's reach since, back to the same distance, could mislead it.)
    #[inline(always)]
    fn remembered(&self, key: &[u8]) -> Hint<'a> {
        match self.memo.recall(key) {
            Some(Place::Slot { index, generation, ident }) => {
                // The memo holds only indexes of this table's slots; `get` keeps that from being
                // trusted.
                let Some(words) = self.words.get(index * self.slot_words..(index + 1) * self.slot_words) else {
                    return Hint::Unknown;
                };
                let slot = Slot { words, payload_words: self.payload_words };
                // Acquire: pairs with the Release publication of the slot, as in `lookup`.
                let tag = Tag(slot.tag().load(Ordering::Acquire));
                // Relaxed: a claim since would have written another ident, with its own generation.
                let same = tag.state() == State::Live
                    && tag.generation() == generation
                    && slot.ident().load(Ordering::Relaxed) == ident;
                if same {
                    Hint::Found(Entry { slot, tag, renewed: false })
                } else {
                    Hint::Unknown
                }
            }
            Some(Place::Absent { home, reach }) if home < self.slots => {
                // Acquire: pairs with the Release raise of a claim, as in `lookup`.
                if self.slot(home).reach().load(Ordering::Acquire) == reach {
                    Hint::Absent
                } else {
                    Hint::Unknown
                }
            }
            Some(Place::Absent { .. }) | None => Hint::Unknown,
        }
    }

    /// Forgets where keys were found: for a table whose memory was replaced under it (a lost
    /// segment file, see `segment::guard`), where generations start again.
    pub fn forget_places(&self) {
        self.memo.forget();
    }

    /// The LIVE slot holding `key`, inserted if missing, and kept until at least `keep_until`.
    pub fn find_or_insert(&self, key: &[u8], now: u64, keep_until: u64) -> Result<Entry<'a>, TableError> {
        let keep_until = keep_until.min(MAX_STAMP);
        if let Hint::Found(entry) = self.remembered(key) {
            if let Some(entry) = self.keep(entry, now, keep_until) {
                return Ok(entry);
            }
        }
        let key = self.key(key)?;
        for attempt in 0..MAX_ATTEMPTS {
            if let Some(entry) = self.lookup(&key, Absence::Ignore) {
                if let Some(entry) = self.keep(entry, now, keep_until) {
                    return Ok(entry);
                }
                continue;
            }
            match self.insert(&key, now, keep_until, attempt + 1 == MAX_ATTEMPTS) {
                Ok(Some(entry)) => return Ok(entry),
                Ok(None) => {}
                // Another process may have published the key while we scanned: look again.
                Err(full) => {
                    match self.lookup(&key, Absence::Ignore).and_then(|entry| self.keep(entry, now, keep_until)) {
                        Some(entry) => return Ok(entry),
                        None => {
                            // Relaxed: statistics only.
                            self.stats.full_errors.fetch_add(1, Ordering::Relaxed);
                            return Err(full);
                        }
                    }
                }
            }
            back_off(attempt);
        }
        Err(TableError::Contended)
    }

    /// The LIVE slot holding `key`, if any, kept until at least `keep_until`: for a write that
    /// must not create the key.
    pub fn find_and_keep(&self, key: &[u8], now: u64, keep_until: u64) -> Result<Option<Entry<'a>>, TableError> {
        self.find_and_extend(key, now, keep_until, Extension::WithMargin)
    }

    /// The LIVE slot holding `key`, if any, kept until at least `until` and no longer: for a
    /// key kept alongside another whose write renewed its slot until `until`, margin included
    /// (`Store::keep`). A margin of its own on top would keep it up to 1/16 longer than the
    /// data that keeps it, and each key of a service would outlive the one before.
    pub fn find_and_keep_alongside(&self, key: &[u8], now: u64, until: u64) -> Result<Option<Entry<'a>>, TableError> {
        self.find_and_extend(key, now, until, Extension::Exact)
    }

    fn find_and_extend(
        &self,
        key: &[u8],
        now: u64,
        keep_until: u64,
        extension: Extension,
    ) -> Result<Option<Entry<'a>>, TableError> {
        let keep_until = keep_until.min(MAX_STAMP);
        match self.remembered(key) {
            Hint::Found(entry) => {
                if let Some(entry) = self.extend(entry, now, keep_until, extension) {
                    return Ok(Some(entry));
                }
            }
            Hint::Absent => return Ok(None),
            Hint::Unknown => {}
        }
        let key = self.key(key)?;
        for _ in 0..MAX_ATTEMPTS {
            let Some(entry) = self.lookup(&key, Absence::Note) else {
                return Ok(None);
            };
            if let Some(entry) = self.extend(entry, now, keep_until, extension) {
                return Ok(Some(entry));
            }
        }
        Err(TableError::Contended)
    }

    /// Whether the key of `slot`, seen PENDING or LIVE with `tag`, may have `home` as its home,
    /// from its ident alone (in the slot's first cache line, with the tag): the fingerprint is
    /// the hash's top 32 bits, and the home taken from them is the key's home or one below it.
    /// True when unsure: the ident is another claim's, or the slot was recycled while read.
    fn may_have_home(&self, slot: Slot<'a>, tag: Tag, home: usize) -> bool {
        // Relaxed: validated by `still_claimed_by`, as in `Slot::holds`.
        let ident = slot.ident().load(Ordering::Relaxed);
        if ident & !((1 << 48) - 1) != word_tag(tag.generation()) {
            return true;
        }
        let below = (((ident & 0xffff_ffff) * self.slots as u64) >> 32) as usize;
        below == home || (below + 1) % self.slots == home || !slot.still_claimed_by(tag)
    }

    /// Makes sure `entry`, found with `find`, is kept until at least `keep_until`: for a write
    /// decided after reading. `None` if its slot was recycled meanwhile.
    pub fn keep_entry(&self, entry: Entry<'a>, now: u64, keep_until: u64) -> Option<Entry<'a>> {
        self.keep(entry, now, keep_until.min(MAX_STAMP))
    }

    /// Makes sure `entry` is kept until `keep_until`; `None` if its slot was recycled.
    ///
    /// A slot kept for less is extended by 1/16 more than needed, and at least a second:
    /// `keep_until + max(1, (keep_until - now) / 16)`. So a busy key pays one compare-and-swap
    /// per 1/16 of its TTL (per 2 seconds at most), not one per write, and a slot is reusable
    /// at most max(1, TTL / 16) seconds after its data expired.
    fn keep(&self, entry: Entry<'a>, now: u64, keep_until: u64) -> Option<Entry<'a>> {
        self.extend(entry, now, keep_until, Extension::WithMargin)
    }

    /// `keep`, with the margin `extension` says.
    fn extend(&self, entry: Entry<'a>, now: u64, keep_until: u64, extension: Extension) -> Option<Entry<'a>> {
        let mut tag = entry.tag;
        loop {
            if tag.stamp() >= keep_until {
                return Some(Entry { tag, ..entry });
            }
            let extended = match extension {
                Extension::WithMargin => keep_until.saturating_add((keep_until.saturating_sub(now) / 16).max(1)),
                Extension::Exact => keep_until,
            };
            let new = Tag::new(State::Live, tag.generation(), extended);
            // AcqRel on success: the extension is ordered before the writes that rely on it;
            // Acquire on failure: the tag read is then used as the new expected value.
            match entry.slot.tag().compare_exchange(tag.0, new.0, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Some(Entry { slot: entry.slot, tag: new, renewed: true }),
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
    /// key or the slot; look again. `Err(Full)` only when the table is at its capacity, no slot
    /// within the reach of the key's home is claimable, and no claim of this key is in progress
    /// there (nor, unless `last_attempt`, of any key).
    ///
    /// Below the capacity the probe takes the first claimable slot from the key's home; the
    /// headroom keeps it short. At the capacity it may only reclaim a slot that is not FREE
    /// (expired, or abandoned by its claimer) within the reach of the key's home, and it looks
    /// there for claims in progress: a claim that made the table reach its capacity recorded its
    /// reach first, and our Acquire load of the count saw that (see `at_capacity`).
    fn insert(
        &self,
        key: &Key<'_>,
        now: u64,
        keep_until: u64,
        last_attempt: bool,
    ) -> Result<Option<Entry<'a>>, TableError> {
        // A table at its capacity sweeps more, and is at its capacity no more if that freed a slot.
        let at_capacity = if self.at_capacity() {
            self.sweep(now, SWEEP_AT_CAPACITY);
            self.at_capacity()
        } else {
            self.sweep(now, SWEEP_PER_INSERT);
            false
        };
        let home = key.home(self.slots);
        let distances = if at_capacity { self.reach(home) } else { self.slots };
        // The first claim seen in progress of this key (PENDING), and of a key not known yet
        // (RESERVED): what a last attempt takes over (see below).
        let (mut this_key_claim, mut reserved, mut other_claims) = (None, None, false);
        for (distance, (index, slot)) in self.probe(home, distances).enumerate() {
            // Acquire: a FREE or expired slot's old contents are overwritten only after this.
            let seen = Tag(slot.tag().load(Ordering::Acquire));
            if !slot.claimable(seen, now, self.checks_claimers) || at_capacity && seen.state() == State::Free {
                match seen.state() {
                    State::Pending if slot.holds(seen, key) => {
                        this_key_claim.get_or_insert((distance, index, slot, seen));
                    }
                    State::Reserved => {
                        other_claims = true;
                        reserved.get_or_insert((distance, index, slot, seen));
                    }
                    State::Pending => other_claims = true,
                    State::Free | State::Live => {}
                }
                continue;
            }
            let Some(claim) = self.reserve(slot, index, home, distance, seen, now) else {
                // Another process claimed it first, maybe for this very key.
                other_claims = true;
                continue;
            };
            return Ok(self.complete(&claim, key, now, keep_until));
        }
        if !last_attempt && (this_key_claim.is_some() || other_claims) {
            return Ok(None);
        }
        // A claim still in progress after every attempt belongs to a process that is stopped
        // (SIGSTOP, a frozen cgroup) or far slower than us; refusing this caller until that
        // claim times out would refuse a key that is being created. So the last attempt takes
        // over, as is safe at any time (see the module documentation), a PENDING claim of this
        // key, or at the capacity a RESERVED claim within the reach: it may be of this very key
        // by a process stopped before it wrote the key (its reach is raised before it reserves,
        // see `reserve`), which would create the key over the capacity once resumed. The table
        // does not grow: the slot was already counted, or its stopped claimer counts it.
        if let Some((distance, index, slot, seen)) = this_key_claim.or(reserved.filter(|_| at_capacity)) {
            let claim = self.reserve(slot, index, home, distance, seen, now);
            return Ok(claim.and_then(|claim| self.complete(&claim, key, now, keep_until)));
        }
        // Left out of the model checker: it only lowers the count, or raises one below zero, and
        // the count decides nothing but fullness (see `repair_count`).
        #[cfg(not(loom))]
        self.repair_count();
        Err(TableError::Full { slots: self.capacity })
    }

    /// Step 1 of a claim: the slot seen with `seen` becomes RESERVED by this claimer.
    fn reserve(
        &self,
        slot: Slot<'a>,
        index: usize,
        home: usize,
        distance: usize,
        seen: Tag,
        now: u64,
    ) -> Option<Claim<'a>> {
        let generation = seen.generation().wrapping_add(1) & GENERATION_MASK;
        let reserved = Tag::new(State::Reserved, generation, now);
        // The reach covers the slot before it is reserved, so that a creator of the same key
        // that finds the table at its capacity (and probes only the reach) sees this claim even
        // if we stop right after reserving (see `insert`). `record` raises it again after the
        // reservation, which is what keeps a sweep from lowering it under the claim (`shrink`).
        // (A home's reach always covers the home itself: a key placed there needs nothing.)
        if distance > 0 && self.reach(home) <= distance {
            self.raise_reach(home, distance);
        }
        // AcqRel: the claim is ordered after whatever the previous owner wrote, and before
        // the writes below. Relaxed on failure: someone else took it; try the next slot.
        slot.tag().compare_exchange(seen.0, reserved.0, Ordering::AcqRel, Ordering::Relaxed).ok()?;
        // Release: a scan that reads this bit reads the claim's tag (see `occupied`).
        self.bitmap[index / 64].fetch_or(1 << (index % 64), Ordering::Release);
        Some(Claim { slot, index, home, distance, seen, reserved })
    }

    /// Steps 2 to 5 of a claim: record it, write the key, publish it PENDING, settle it. The
    /// LIVE entry of the key: this claim's, or, when the claim was taken over or withdrew
    /// before a rival, the one that holds the key now (`None` if none does yet).
    fn complete(&self, claim: &Claim<'a>, key: &Key<'_>, now: u64, keep_until: u64) -> Option<Entry<'a>> {
        self.record(claim);
        let settled =
            if self.write(claim, key) && self.publish(claim) { self.settle(claim, key, now, keep_until) } else { None };
        settled.or_else(|| self.lookup(key, Absence::Ignore).and_then(|entry| self.keep(entry, now, keep_until)))
    }

    /// Step 2: the statistics, how far the key lies from its home, and who claimed the slot.
    fn record(&self, claim: &Claim<'a>) {
        // Relaxed: statistics only.
        self.stats.claims.fetch_add(1, Ordering::Relaxed);
        if claim.seen.state() != State::Free {
            self.stats.reclaims.fetch_add(1, Ordering::Relaxed);
        }
        self.raise_reach(claim.home, claim.distance);
        if claim.seen.state() == State::Free {
            // Release: after the reach above, so a claimer that sees the table at capacity
            // (Acquire) because of this claim also sees its reach (see `insert`).
            self.in_use.fetch_add(1, Ordering::Release);
        }
        // Release fence: a reader whose relaxed loads see any of the writes below also sees
        // the claim, so its seqlock check rejects what it read (see `Slot::still`).
        fence(Ordering::Release);
        // The process id is read now, not when the table was built: a process forked since
        // must record its own.
        let pid = if self.checks_claimers { std::process::id() } else { 0 };
        self.write_word(claim, claim.slot.owner(), (claim.generation() as u64) << 32 | pid as u64);
    }

    /// Makes the reach of `home` at least `distance`, bumping its version so that a sweep that
    /// read it before cannot lower it under this claim (see `shrink`), and so that a process that
    /// noted a key of this home absent before sees it may be there now (see `remembered`).
    fn raise_reach(&self, home: usize, distance: usize) {
        let word = self.slot(home).reach();
        // Relaxed: the compare-and-swap below decides.
        let mut seen = word.load(Ordering::Relaxed);
        loop {
            let version = (seen >> 32).wrapping_add(1) << 32;
            let new = version | reach_distance(seen).max(distance) as u64;
            // Release: a lookup that reads this reach (Acquire) and then this slot's LIVE tag
            // finds the key. Growing it from a claim later taken over only lengthens probes
            // until the sweep passes. Relaxed on failure: retried with the value read.
            match word.compare_exchange(seen, new, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => return,
                Err(current) => seen = current,
            }
        }
    }

    /// Step 3: the ident, key and payload words, while the slot is still ours. False if the
    /// claim was taken over.
    fn write(&self, claim: &Claim<'a>, key: &Key<'_>) -> bool {
        let generation = claim.generation();
        let slot = claim.slot;
        if !self.write_word(claim, slot.ident(), key.ident(generation)) {
            return false;
        }
        let mut words = key.words(generation);
        let padding = word_tag(generation);
        if !slot.key_words().iter().all(|stored| self.write_word(claim, stored, words.next().unwrap_or(padding))) {
            return false;
        }
        slot.payload()
            .iter()
            .enumerate()
            .all(|(index, word)| self.write_word(claim, word, (self.init)(index, generation)))
    }

    /// Writes `value` into `word` of the claimed slot with a compare-and-swap from the value
    /// read just before the tag was found still ours. A claimer stopped after that check and
    /// taken over meanwhile finds the word changed by the new claimer (every value a claim
    /// writes is its own) and fails; if it wrote first, the new claimer's compare-and-swap
    /// fails, and it writes again.
    fn write_word(&self, claim: &Claim<'a>, word: &AtomicU64, value: u64) -> bool {
        loop {
            // Relaxed: the compare-and-swap below decides.
            let current = word.load(Ordering::Relaxed);
            // The check is a compare-and-swap of the tag with itself, not a load: a load may
            // read our claim's tag after a takeover, and `current` may then already be the new
            // claimer's word, which we would overwrite. A read-modify-write reads the latest tag;
            // AcqRel: if the new claimer's takeover comes after it, it synchronizes with it, so
            // the load of `current` above happened before the new claimer wrote anything and
            // cannot have read its words (found by the model checker).
            if claim
                .slot
                .tag()
                .compare_exchange(claim.reserved.0, claim.reserved.0, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
            {
                return false;
            }
            // Relaxed: these writes are published by the Release publication of PENDING.
            if word.compare_exchange(current, value, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
                return true;
            }
        }
    }

    /// Step 4: RESERVED becomes PENDING, unless the claim was taken over.
    fn publish(&self, claim: &Claim<'a>) -> bool {
        // Release: whoever reads PENDING (Acquire) reads the key written above.
        claim
            .slot
            .tag()
            .compare_exchange(claim.reserved.0, claim.pending().0, Ordering::Release, Ordering::Relaxed)
            .is_ok()
    }

    /// Step 5: unless a rival slot holds the key, PENDING becomes LIVE; otherwise we withdraw.
    fn settle(&self, claim: &Claim<'a>, key: &Key<'_>, now: u64, keep_until: u64) -> Option<Entry<'a>> {
        // SeqCst fence, between our publication above and our reads of the other slots below:
        // of two claimers of one key, the one whose fence comes second sees the other's PENDING
        // (or what followed it), as in Dekker's algorithm.
        fence(Ordering::SeqCst);
        if self.rival(key, claim.home, claim.index, now) {
            self.free(claim.slot, claim.pending());
            return None;
        }
        let live = Tag::new(State::Live, claim.generation(), keep_until);
        // Release: a lookup that reads LIVE (Acquire) reads the key. Relaxed on failure: the
        // claim was taken over; look again.
        let published =
            claim.slot.tag().compare_exchange(claim.pending().0, live.0, Ordering::Release, Ordering::Relaxed).is_ok();
        if !published {
            return None;
        }
        self.note(key, claim.index, live);
        Some(Entry { slot: claim.slot, tag: live, renewed: true })
    }

    /// Whether a slot other than `own` holds `key` as LIVE, or as PENDING with its claimer
    /// still there. A PENDING one whose claimer is gone or timed out is freed, so that it can
    /// never go LIVE; if that fails (it changed), it counts as a rival.
    fn rival(&self, key: &Key<'_>, home: usize, own: usize, now: u64) -> bool {
        self.probe(home, self.reach(home)).any(|(index, slot)| {
            if index == own {
                return false;
            }
            // Acquire: pairs with the Release publications, so the key read is the claimer's.
            let tag = Tag(slot.tag().load(Ordering::Acquire));
            match tag.state() {
                State::Live => slot.holds(tag, key),
                State::Pending if slot.holds(tag, key) => {
                    // If freeing it fails, the slot changed: it counts as a rival.
                    !slot.claimable(tag, now, self.checks_claimers) || !self.free(slot, tag)
                }
                State::Free | State::Reserved | State::Pending => false,
            }
        })
    }

    /// Frees every LIVE slot whose key satisfies `matches`; returns how many.
    pub fn remove_matching(&self, matches: impl Fn(&[u8]) -> bool) -> usize {
        self.occupied().filter(|&(_, slot, tag)| self.remove_if(slot, tag, &matches)).count()
    }

    /// Frees `slot`, seen with `tag`, if it is LIVE with a key that satisfies `matches`,
    /// retrying while its lifetime is extended under us.
    fn remove_if(&self, slot: Slot<'a>, mut tag: Tag, matches: &impl Fn(&[u8]) -> bool) -> bool {
        if tag.state() != State::Live || !slot.read_key(tag).is_some_and(|key| matches(&key)) {
            return false;
        }
        loop {
            if self.free(slot, tag) {
                return true;
            }
            // Acquire: the new tag is checked and retried.
            let current = Tag(slot.tag().load(Ordering::Acquire));
            if current.state() != State::Live || current.generation() != tag.generation() {
                return false;
            }
            tag = current;
        }
    }

    /// The keys of the LIVE slots whose data may not all have expired at `now`.
    pub fn live_keys(&self, now: u64) -> Vec<Vec<u8>> {
        self.live_entries(now).into_iter().map(|(key, _)| key).collect()
    }

    /// The LIVE slots whose data may not all have expired at `now`, each with its key.
    pub fn live_entries(&self, now: u64) -> Vec<(Vec<u8>, Entry<'a>)> {
        self.occupied()
            .filter(|(_, _, tag)| tag.state() == State::Live && !tag.claimable(now))
            .filter_map(|(_, slot, tag)| Some((slot.read_key(tag)?, Entry { slot, tag, renewed: false })))
            .collect()
    }

    /// How the slots are used at `now`.
    pub fn usage(&self, now: u64) -> Usage {
        let mut usage = Usage::default();
        for (_, _, tag) in self.occupied() {
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

#[cfg(any(test, loom))]
impl Table<'_> {
    /// The home position of `key`.
    pub(crate) fn home_of(&self, key: &[u8]) -> usize {
        self.key(key).unwrap().home(self.slots)
    }

    /// The sweep's step that lowers the reach of `home`.
    pub(crate) fn shrink_reach_of(&self, home: usize) {
        self.shrink(home);
    }

    /// The distances a lookup of a key whose home is `home` probes.
    pub(crate) fn probes_from(&self, home: usize) -> usize {
        self.reach(home)
    }

    /// How many LIVE slots hold `key`: one at most, whatever happened.
    pub(crate) fn holders(&self, key: &[u8]) -> usize {
        let key = self.key(key).unwrap();
        (0..self.slots)
            .filter(|&index| {
                let slot = self.slot(index);
                // SeqCst: a check made after every thread has finished.
                let tag = Tag(slot.tag().load(Ordering::SeqCst));
                tag.state() == State::Live && slot.holds(tag, &key)
            })
            .count()
    }
}

/// A claim stopped by hand, for the tests of other modules that play a stalled process.
#[cfg(test)]
pub(crate) struct HandClaim<'a>(Claim<'a>);

#[cfg(test)]
impl<'a> Table<'a> {
    /// A claimer of `key` reserves a slot at `now` and stops there; `None` if no slot was free.
    pub(crate) fn hand_reserve(&self, key: &[u8], now: u64) -> Option<HandClaim<'a>> {
        let home = self.key(key).unwrap().home(self.slots);
        self.probe(home, self.slots).enumerate().find_map(|(distance, (index, slot))| {
            let seen = Tag(slot.tag().load(Ordering::SeqCst));
            if !slot.claimable(seen, now, self.checks_claimers) {
                return None;
            }
            self.reserve(slot, index, home, distance, seen, now).map(HandClaim)
        })
    }

    /// The stopped claimer resumes and makes every remaining step; whether its own claim went
    /// LIVE (rather than the key being found in the slot of whoever took the claim over).
    pub(crate) fn hand_resume(&self, claim: &HandClaim<'a>, key: &[u8], now: u64, keep_until: u64) -> bool {
        let entry = self.complete(&claim.0, &self.key(key).unwrap(), now, keep_until);
        entry.is_some_and(|entry| {
            std::ptr::eq(entry.payload(), claim.0.slot.payload()) && entry.generation() == claim.0.generation()
        })
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A table over process-local words, with its statistics words.
    pub(crate) struct Fixture {
        words: Vec<AtomicU64>,
        stats: [AtomicU64; 3],
        shape: Shape,
    }

    /// Payload words of the fixture's claims: the generation in the top 16 bits, so that tests
    /// can count in the low ones.
    pub(crate) fn init(_: usize, generation: u32) -> u64 {
        word_tag(generation)
    }

    impl Fixture {
        /// `key_words` words of key: keys of up to `6 × key_words` bytes.
        pub(crate) fn new(slots: usize, payload_words: usize, key_words: usize) -> Self {
            Self::with_capacity(slots, slots, payload_words, key_words)
        }

        /// A table of `slots` slots of which `capacity` may be in use.
        pub(crate) fn with_capacity(capacity: usize, slots: usize, payload_words: usize, key_words: usize) -> Self {
            let shape = Shape { slots, capacity, payload_words, max_key_length: key_words * KEY_BYTES_PER_WORD };
            let words = (0..shape.words()).map(|_| AtomicU64::new(0)).collect();
            Self { words, stats: Default::default(), shape }
        }

        pub(crate) fn table(&self) -> Table<'_> {
            self.table_checking_claimers(true)
        }

        /// The table as a process that records and checks claimers' ids, or does not.
        pub(crate) fn table_checking_claimers(&self, checks_claimers: bool) -> Table<'_> {
            Table::new(&self.words, self.shape, 42, checks_claimers, Stats::new(&self.stats), init)
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
        let tag = Tag::new(State::Pending, GENERATION_MASK, MAX_STAMP);
        assert_eq!((tag.state(), tag.generation(), tag.stamp()), (State::Pending, GENERATION_MASK, MAX_STAMP));
        assert_eq!(Tag::new(State::Live, 1, u64::MAX).stamp(), MAX_STAMP, "stamps saturate");
        assert_eq!(Tag::new(State::Live, 1, (1 << 32) + 5).stamp(), (1 << 32) + 5, "past 2106");
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
        assert!(first.payload().iter().all(|w| w.load(Ordering::Relaxed) == init(0, first.generation())));
        first.payload()[1].store(99, Ordering::Relaxed);
        assert_eq!(table.remove_matching(|k| k == b"x"), 1);
        let second = table.find_or_insert(b"y", 0, 5).unwrap();
        assert_ne!(second.generation(), first.generation());
        assert!(!first.is_current(), "the old entry sees its slot recycled");
        assert_eq!(second.payload()[1].load(Ordering::Relaxed), init(1, second.generation()));
    }

    #[test]
    fn keys_longer_than_a_slot_are_refused() {
        let fixture = Fixture::new(2, 1, 2);
        let table = fixture.table();
        assert!(table.find_or_insert(&[1u8; 12], 0, 1).is_ok());
        assert_eq!(table.find(&[1u8; 13]).err(), Some(TableError::KeyTooLong { length: 13, max: 12 }));
        assert_eq!(
            table.find_or_insert(&vec![0u8; 100_000], 0, 1).err(),
            Some(TableError::KeyTooLong { length: 100_000, max: 12 })
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
        put(&table, 0, Tag::new(State::Pending, 1, 100));
        put(&table, 1, Tag::new(State::Reserved, 1, 100));
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
            put(&table, index, Tag::new(state, 5, 100));
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
        put(&table, 0, Tag::new(State::Reserved, 5, 100));
        table.slot(0).owner().store(5 << 32 | std::process::id() as u64, Ordering::Relaxed);
        // the owner word of an older claim says nothing of this one
        put(&table, 1, Tag::new(State::Pending, 6, 100));
        table.slot(1).owner().store(5 << 32 | dead_pid() as u64, Ordering::Relaxed);
        assert_eq!(table.find_or_insert(b"a", 101, 200).err(), Some(TableError::Full { slots: 2 }));
    }

    #[test]
    fn processes_that_cannot_check_claimers_neither_record_nor_trust_pids() {
        let fixture = Fixture::new(2, 1, 1);
        let unchecked = fixture.table_checking_claimers(false);
        let dead = dead_pid();
        for (index, state) in [(0, State::Pending), (1, State::Reserved)] {
            put(&unchecked, index, Tag::new(state, 5, 100));
            unchecked.slot(index).owner().store(5 << 32 | dead as u64, Ordering::Relaxed);
        }
        assert_eq!(unchecked.find_or_insert(b"a", 101, 200).err(), Some(TableError::Full { slots: 2 }));
        unchecked.find_or_insert(b"a", 100 + PENDING_TIMEOUT + 1, 200).unwrap();
        // its own claims carry no pid, so a checking process never judges them by one
        let claimed = unchecked.slot(0).owner().load(Ordering::Relaxed);
        assert_eq!(claimed as u32, 0);
        let checking = fixture.table();
        put(&checking, 0, Tag::new(State::Reserved, (claimed >> 32) as u32, 300));
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
                    & ((1 << 48) - 1)
            })
            .sum();
        assert_eq!(total, 8_000);
        assert_eq!(table.usage(0).live, 48, "one slot per key");
    }

    /// Sets slot `index`'s tag by hand, as a process that made that claim (its bit set).
    fn put(table: &Table<'_>, index: usize, tag: Tag) {
        table.slot(index).tag().store(tag.0, Ordering::SeqCst);
        table.bitmap[index / 64].fetch_or(1 << (index % 64), Ordering::SeqCst);
    }

    fn holders(table: &Table<'_>, key: &[u8]) -> usize {
        table.holders(key)
    }

    /// A claimer of `key`, at `now`, reserving slot `index` and stopping there.
    fn reserve_by_hand<'a>(table: &Table<'a>, key: &[u8], index: usize, now: u64) -> Claim<'a> {
        let home = table.key(key).unwrap().home(table.slots);
        let slot = table.slot(index);
        let seen = Tag(slot.tag().load(Ordering::SeqCst));
        table.reserve(slot, index, home, (index + table.slots - home) % table.slots, seen, now).unwrap()
    }

    /// Defect 1 of issue 11: a claimer stopped while PENDING, past the PENDING timeout, while
    /// its key's home became free and another process inserted the key there.
    #[test]
    fn a_pending_claimer_resuming_after_its_timeout_never_gives_a_key_two_slots() {
        let fixture = Fixture::new(4, 1, 1);
        let table = fixture.table_checking_claimers(false);
        let home = table.key(b"k").unwrap().home(4);
        let a = (home + 1) % 4;
        // home holds another key, so A, at 100, claims the next slot
        put(&table, home, Tag::new(State::Live, 1, 1000));
        let key = table.key(b"k").unwrap();
        let claim = reserve_by_hand(&table, b"k", a, 100);
        table.record(&claim);
        assert!(table.write(&claim, &key) && table.publish(&claim));
        // A is descheduled for 3 s; home becomes free; C, at 103, inserts the key.
        put(&table, home, Tag::new(State::Free, 1, 0));
        table.find_or_insert(b"k", 103, 200).unwrap();
        // A resumes: finds no rival (or does), and tries to go LIVE.
        let _ = table.settle(&claim, &key, 100, 200);
        assert_eq!(holders(&table, b"k"), 1, "one key, one slot");
        // Likewise when A's own check ran before C's and C's clock is the one ahead.
        let fixture = Fixture::new(4, 1, 1);
        let table = fixture.table_checking_claimers(false);
        put(&table, home, Tag::new(State::Live, 1, 1000));
        let claim = reserve_by_hand(&table, b"k", a, 100);
        table.record(&claim);
        assert!(table.write(&claim, &key) && table.publish(&claim));
        fence(Ordering::SeqCst);
        assert!(!table.rival(&key, home, a, 100), "A sees no rival and is about to go LIVE");
        put(&table, home, Tag::new(State::Free, 1, 0));
        table.find_or_insert(b"k", 103, 200).unwrap();
        let published = table.slot(a).tag().compare_exchange(
            claim.pending().0,
            Tag::new(State::Live, claim.generation(), 200).0,
            Ordering::SeqCst,
            Ordering::SeqCst,
        );
        assert!(published.is_err(), "C freed A's claim as timed out, so A cannot go LIVE");
        assert_eq!(holders(&table, b"k"), 1);
    }

    /// Defect 2 of issue 11: a claimer stopped right after its RESERVED claim, taken over after
    /// the timeout, resumes.
    #[test]
    fn a_reserved_claimer_resuming_after_a_takeover_leaves_the_new_key_intact() {
        let fixture = Fixture::new(1, 1, 1);
        let table = fixture.table_checking_claimers(false);
        let claim = reserve_by_hand(&table, b"a", 0, 100);
        let c = table.find_or_insert(b"c", 100 + RESERVED_TIMEOUT + 1, 2000).unwrap();
        c.payload()[0].fetch_add(5, Ordering::SeqCst);
        assert!(table.complete(&claim, &table.key(b"a").unwrap(), 100, 200).is_none(), "A's claim fails");
        let found = table.find(b"c").unwrap().expect("c keeps its slot");
        assert_eq!(found.payload()[0].load(Ordering::SeqCst), init(0, c.generation()) + 5);
        assert!(table.find(b"a").unwrap().is_none());
        // A stopped between its check of the tag and one of its compare-and-swaps: it read the
        // word, then C took over and wrote it. A's compare-and-swap fails.
        let fixture = Fixture::new(1, 1, 1);
        let table = fixture.table_checking_claimers(false);
        let claim = reserve_by_hand(&table, b"a", 0, 100);
        let key_word = &table.slot(0).key_words()[0];
        let read_by_a = key_word.load(Ordering::SeqCst);
        table.find_or_insert(b"c", 100 + RESERVED_TIMEOUT + 1, 2000).unwrap();
        let a_word = table.key(b"a").unwrap().words(claim.generation()).next().unwrap();
        assert!(key_word.compare_exchange(read_by_a, a_word, Ordering::SeqCst, Ordering::SeqCst).is_err());
        // the same with the key A and C share
        let fixture = Fixture::new(1, 1, 1);
        let table = fixture.table_checking_claimers(false);
        let claim = reserve_by_hand(&table, b"same", 0, 100);
        let read_by_a = key_word_of(&table).load(Ordering::SeqCst);
        table.find_or_insert(b"same", 100 + RESERVED_TIMEOUT + 1, 2000).unwrap();
        let a_word = table.key(b"same").unwrap().words(claim.generation()).next().unwrap();
        assert!(key_word_of(&table).compare_exchange(read_by_a, a_word, Ordering::SeqCst, Ordering::SeqCst).is_err());
        assert!(table.find(b"same").unwrap().is_some());
    }

    fn key_word_of<'a>(table: &Table<'a>) -> &'a AtomicU64 {
        &table.slot(0).key_words()[0]
    }

    /// Defect 3 of issue 11: reset while another process extends the key's lifetime.
    #[test]
    fn reset_removes_a_key_whose_lifetime_is_extended_meanwhile() {
        let fixture = Fixture::new(8, 1, 1);
        let mut survived = 0;
        for round in 0..200u64 {
            let table = fixture.table();
            table.remove_matching(|_| true);
            table.find_or_insert(b"k", 0, 1).unwrap();
            let stop = std::sync::atomic::AtomicBool::new(false);
            std::thread::scope(|scope| {
                scope.spawn(|| {
                    // find_and_keep never creates the key: once reset, it stays absent.
                    let table = fixture.table();
                    let mut until = 2 + round * 1_000_000;
                    while !stop.load(Ordering::Relaxed) {
                        until += 1;
                        let _ = table.find_and_keep(b"k", until, until + 1);
                    }
                });
                for _ in 0..20_000 {
                    std::hint::spin_loop();
                }
                table.remove_matching(|k| k == b"k");
                stop.store(true, Ordering::Relaxed);
            });
            survived += table.find(b"k").unwrap().is_some() as usize;
        }
        assert_eq!(survived, 0, "rounds of 200 in which the key survived its reset");
    }

    /// Defect 3 of issue 11, by hand: the key is read, then its lifetime extended, then reset
    /// tries to free it.
    #[test]
    fn reset_and_listing_compare_the_key_not_the_stamp() {
        let fixture = Fixture::new(2, 1, 1);
        let table = fixture.table();
        let entry = table.find_or_insert(b"k", 100, 110).unwrap();
        let slot = entry.slot;
        let seen = Tag(slot.tag().load(Ordering::SeqCst));
        table.keep(entry, 105, 500).unwrap();
        assert_eq!(slot.read_key(seen).as_deref(), Some(&b"k"[..]), "an extension is no recycle");
        let mut tag = seen;
        let free = Tag::new(State::Free, tag.generation(), 0);
        assert!(slot.tag().compare_exchange(tag.0, free.0, Ordering::SeqCst, Ordering::SeqCst).is_err());
        tag = Tag(slot.tag().load(Ordering::SeqCst));
        assert_eq!(tag.generation(), seen.generation());
        assert_eq!(table.remove_matching(|k| k == b"k"), 1);
        assert!(table.find(b"k").unwrap().is_none());
    }

    /// Defect 6 of issue 11: one free slot, two processes creating the same key.
    #[test]
    fn a_second_creator_of_a_key_being_claimed_is_not_told_full() {
        let fixture = Fixture::new(2, 1, 1);
        let table = fixture.table();
        let home = table.key(b"k").unwrap().home(2);
        put(&table, 1 - home, Tag::new(State::Live, 1, 1000));
        let key = table.key(b"k").unwrap();
        let claim = reserve_by_hand(&table, b"k", home, 100);
        table.record(&claim);
        assert!(table.write(&claim, &key) && table.publish(&claim));
        // The claim stands through every attempt: the last one takes it over (issue 19).
        let b = table.find_or_insert(b"k", 100, 200);
        assert!(b.is_ok(), "neither Full nor Contended: {:?}", b.err());
        assert!(table.settle(&claim, &key, 100, 200).is_none(), "the claim taken over never goes LIVE");
        assert_eq!(table.holders(b"k"), 1);
        assert!(table.find_or_insert(b"k", 100, 200).is_ok());
    }

    /// Defect 6 of issue 11, racing: the loser of the race for the last slot finds the key.
    #[test]
    fn racing_creators_of_one_key_in_the_last_free_slot_are_never_told_full() {
        let fixture = Fixture::new(2, 1, 1);
        let mut full = 0;
        for round in 0..2_000u64 {
            let table = fixture.table();
            table.remove_matching(|_| true);
            table.find_or_insert(b"other", round, round + 1_000_000).unwrap();
            let start = std::sync::Barrier::new(2);
            std::thread::scope(|scope| {
                let racers: Vec<_> = (0..2)
                    .map(|_| {
                        scope.spawn(|| {
                            let table = fixture.table();
                            start.wait();
                            table.find_or_insert(b"k", round, round + 10).err()
                        })
                    })
                    .collect();
                full += racers
                    .into_iter()
                    .map(|r| r.join().unwrap())
                    .filter(|r| *r == Some(TableError::Full { slots: 2 }))
                    .count();
            });
            table.remove_matching(|_| true);
        }
        assert_eq!(full, 0);
    }

    /// Defect 7 of issue 11: a slot is reusable within 1/16 of its TTL after its data expired.
    #[test]
    fn a_kept_slot_is_reusable_within_a_sixteenth_of_its_ttl() {
        let fixture = Fixture::new(1, 1, 1);
        let table = fixture.table();
        table.find_or_insert(b"k", 100, 200).unwrap();
        let kept = table.find_or_insert(b"k", 150, 250).unwrap();
        assert_eq!(kept.tag.stamp(), 250 + 100 / 16);
        // a busy key does not extend on every write
        let again = table.find_or_insert(b"k", 151, 251).unwrap();
        assert_eq!(again.tag.stamp(), kept.tag.stamp(), "no compare-and-swap");
        assert_eq!(table.find_or_insert(b"other", 256, 400).err(), Some(TableError::Full { slots: 1 }));
        table
            .find_or_insert(b"other", 250 + 100 / 16 + 1, 400)
            .expect("reusable 1/16 of the TTL after its data expired");
    }

    /// Claims stamped far in the future (a clock years ahead) are timed out too.
    #[test]
    fn claims_stamped_far_in_the_future_time_out() {
        let fixture = Fixture::new(1, 1, 1);
        let table = fixture.table_checking_claimers(false);
        put(&table, 0, Tag::new(State::Reserved, 1, 100 + 10 * RESERVED_TIMEOUT));
        table.find_or_insert(b"k", 100, 200).expect("a claim from a clock that far ahead is stale");
    }

    /// The calls that look at every key visit the slots whose bit is set; a freed slot's bit is
    /// cleared by the next of them, and a slot claimed again has it again.
    #[test]
    fn scans_visit_occupied_slots_only_and_clear_freed_ones() {
        let fixture = Fixture::new(130, 1, 1);
        let table = fixture.table();
        let bits = |table: &Table<'_>| table.bitmap.iter().map(|w| w.load(Ordering::SeqCst).count_ones()).sum::<u32>();
        assert_eq!((bits(&table), table.usage(0)), (0, Usage::default()));
        for i in 0..40u8 {
            table.find_or_insert(&[b'k', i], 0, 10).unwrap();
        }
        assert_eq!(bits(&table), 40);
        assert_eq!(table.live_keys(0).len(), 40);
        assert_eq!(table.remove_matching(|k| k[1] % 2 == 0), 20);
        assert_eq!(bits(&table), 40, "freeing leaves the bit");
        assert_eq!(table.usage(0).live, 20);
        assert_eq!(bits(&table), 20, "the scan cleared the freed slots' bits");
        table.find_or_insert(b"new", 0, 10).unwrap();
        assert_eq!((bits(&table), table.usage(0).live), (21, 21));
        // a bit cleared by a scan that raced a claim is set again when the claim shows
        let index = (0..130).find(|&i| Tag(table.slot(i).tag().load(Ordering::SeqCst)).state() == State::Free).unwrap();
        table.bitmap[index / 64].fetch_or(1 << (index % 64), Ordering::SeqCst);
        put(&table, index, Tag::new(State::Reserved, 9, 0));
        table.bitmap[index / 64].fetch_and(!(1 << (index % 64)), Ordering::SeqCst);
        assert_eq!(table.usage(0).claiming, 0, "an unset bit hides the slot");
        table.bitmap[index / 64].fetch_or(1 << (index % 64), Ordering::SeqCst);
        assert_eq!(table.usage(0).claiming, 1);
    }

    /// Keys whose home, in `table`, is `home`.
    fn keys_with_home(table: &Table<'_>, home: usize, count: usize) -> Vec<Vec<u8>> {
        (0u32..).map(|i| format!("k{i}").into_bytes()).filter(|key| table.home_of(key) == home).take(count).collect()
    }

    /// The memo answers for a key it has seen without probing: with the home's reach lowered
    /// under the key (which no sweep does, see `shrink`), only the memo can still find it.
    #[test]
    fn a_remembered_key_is_found_without_probing() {
        let fixture = Fixture::new(8, 1, 4);
        let table = fixture.table();
        let home = 2;
        let keys = keys_with_home(&table, home, 2);
        table.find_or_insert(&keys[0], 100, 1000).unwrap();
        let entry = table.find_or_insert(&keys[1], 100, 1000).unwrap();
        entry.payload()[0].fetch_add(5, Ordering::Relaxed);
        table.slot(home).reach().store(0, Ordering::Relaxed);
        let found = table.find(&keys[1]).unwrap().expect("found through the memo");
        assert!(std::ptr::eq(found.payload(), entry.payload()));
        table.forget_places();
        assert!(table.find(&keys[1]).unwrap().is_none(), "a probe no longer reaches it");
    }

    /// A key's slot freed and given to another key since the memo noted it, by a reset or by
    /// another process (or, after a fork, by the parent): the memo's hint fails the generation
    /// check, and the key is looked up as if never seen. Nothing is counted into the other key.
    #[test]
    fn a_remembered_slot_recycled_for_another_key_is_not_trusted() {
        let fixture = Fixture::new(1, 1, 4);
        let (this, other) = (fixture.table(), fixture.table());
        let entry = this.find_or_insert(b"k", 100, 1000).unwrap();
        entry.payload()[0].fetch_add(1, Ordering::Relaxed);
        assert!(this.find(b"k").unwrap().is_some(), "noted by this process");
        assert_eq!(other.remove_matching(|key| key == b"k"), 1);
        let recycled = other.find_or_insert(b"j", 100, 1000).unwrap();
        assert!(std::ptr::eq(recycled.payload(), entry.payload()), "the same slot, for another key");
        assert!(this.find(b"k").unwrap().is_none());
        assert!(matches!(this.find_or_insert(b"k", 100, 1000), Err(TableError::Full { .. })));
        assert!(this.find_and_keep(b"k", 100, 1000).unwrap().is_none());
        assert_eq!(recycled.payload()[0].load(Ordering::Relaxed), init(0, recycled.generation()));
    }

    /// A key found absent, noted so, then created by another process: the note goes with the
    /// other process's claim (it raised the home's reach), and the key is found.
    #[test]
    fn a_key_noted_absent_is_found_once_another_process_creates_it() {
        let fixture = Fixture::new(8, 1, 4);
        let (this, other) = (fixture.table(), fixture.table());
        assert!(this.find(b"k").unwrap().is_none());
        assert!(this.find_and_keep(b"k", 100, 1000).unwrap().is_none(), "the noted absence");
        let entry = other.find_or_insert(b"k", 100, 1000).unwrap();
        let found = this.find(b"k").unwrap().expect("created since the absence was noted");
        assert!(std::ptr::eq(found.payload(), entry.payload()));
    }

    /// A probe that finds a claim in progress notes no absence: a claimer stopped after it
    /// recorded its claim (the home's reach raised) and published it PENDING goes LIVE with no
    /// raise of the reach after that, and the key must be found then.
    #[test]
    fn an_absence_is_not_noted_while_a_claim_is_in_progress() {
        let fixture = Fixture::new(8, 1, 4);
        let (this, claimer) = (fixture.table(), fixture.table());
        let key = claimer.key(b"k").unwrap();
        let home = key.home(claimer.slots);
        let slot = claimer.slot(home);
        let seen = Tag(slot.tag().load(Ordering::SeqCst));
        let claim = claimer.reserve(slot, home, home, 0, seen, 100).unwrap();
        claimer.record(&claim);
        assert!(claimer.write(&claim, &key) && claimer.publish(&claim));
        assert!(this.find(b"k").unwrap().is_none(), "PENDING is not LIVE yet");
        assert!(claimer.settle(&claim, &key, 100, 1000).is_some());
        assert!(this.find(b"k").unwrap().is_some(), "an absence noted while the claim was PENDING");
    }

    /// The generation a slot's tag shows repeats after 2^22 claims of that slot: a memo older
    /// than that could see its generation again under another key. The ident word, which
    /// carries the key's length and fingerprint, tells them apart.
    #[test]
    fn a_remembered_generation_seen_again_under_another_key_is_not_trusted() {
        let fixture = Fixture::new(1, 1, 4);
        let table = fixture.table();
        let entry = table.find_or_insert(b"k", 100, 1000).unwrap();
        let slot = table.slot(0);
        // What 2^22 claims would leave: the same generation, LIVE, with another key's ident.
        let other = table.key(b"another").unwrap();
        slot.ident().store(other.ident(entry.generation()), Ordering::Relaxed);
        assert!(table.find(b"k").unwrap().is_none());
    }

    /// Whoever can write the segment file overwrites a key word of a key's slot: the processes
    /// whose memo names the slot keep reading it (the memo checks the ident, not the key
    /// words), so a lookup finds it too, and writes its key back, rather than claiming a second
    /// slot for the key that those processes never read (the fleet's counts the sidecar wrote
    /// there were never seen).
    #[test]
    fn a_key_word_written_over_keeps_the_key_in_its_slot_for_every_process() {
        let fixture = Fixture::new(8, 1, 4);
        let (this, other) = (fixture.table(), fixture.table());
        let key = b"a key of three words, at most";
        let entry = this.find_or_insert(&key[..18], 100, 1000).unwrap();
        assert!(this.find(&key[..18]).unwrap().is_some(), "noted by this process");
        let index = (0..8).find(|&index| std::ptr::eq(this.slot(index).payload(), entry.payload())).unwrap();
        let written_over = &this.slot(index).key_words()[1];
        let kept = written_over.load(Ordering::Relaxed);
        written_over.store(0x0000_1234_5678_9abc, Ordering::Relaxed);

        let found = other.find_or_insert(&key[..18], 100, 1000).unwrap();
        assert!(std::ptr::eq(found.payload(), entry.payload()), "the same slot, not a second one");
        assert_eq!(written_over.load(Ordering::Relaxed), kept, "its key written back");
        assert_eq!(this.usage(100), Usage { live: 1, expired: 0, claiming: 0 });
        // A word of the slot's own generation that differs is another key's: no match.
        written_over.store(kept ^ 1, Ordering::Relaxed);
        assert!(fixture.table().find(&key[..18]).unwrap().is_none());
    }

    /// A creator of a key stopped between reserving its slot and recording its reach, while
    /// another key brings the table to its capacity: a second creator of the same key is not
    /// told the table is full (it takes the stopped claim over), and the stopped creator, once
    /// resumed, finds the key that second creator made. The count ends at what the slots hold.
    #[test]
    fn a_creator_stopped_after_reserving_does_not_make_the_same_key_full() {
        let fixture = Fixture::with_capacity(2, 4, 1, 1);
        let table = fixture.table();
        let home = 1;
        let keys = keys_with_home(&table, home, 2);
        let (x, k) = (&keys[0], &keys[1]);
        table.find_or_insert(x, 100, 1000).unwrap(); // x in k's home
        let slot = table.slot(home + 1);
        let seen = Tag(slot.tag().load(Ordering::SeqCst));
        let claim = table.reserve(slot, home + 1, home, 1, seen, 100).unwrap(); // A stops here
        let y = keys_with_home(&table, 3, 1).remove(0);
        table.find_or_insert(&y, 100, 1000).unwrap(); // C: the count reaches the capacity
        let b = table.find_or_insert(k, 100, 1000).err(); // B
        assert!(table.complete(&claim, &table.key(k).unwrap(), 100, 1000).is_some());
        assert_eq!(b, None, "B was told {b:?} while A was creating the same key");
        assert_eq!(table.holders(k), 1);
        assert_eq!(fixture.table().in_use.load(Ordering::SeqCst), 3, "x, y and k");
        let z = keys_with_home(&table, 0, 1).remove(0);
        assert_eq!(table.find_or_insert(&z, 100, 1000).err(), Some(TableError::Full { slots: 2 }));
    }

    /// Goal 7 of issue 11: a table at its capacity refuses a new key although its headroom is
    /// free, and the refusal sweeps a bounded number of slots instead of scanning them all.
    #[test]
    fn a_table_at_its_capacity_refuses_new_keys_and_leaves_its_headroom_free() {
        let fixture = Fixture::with_capacity(3, 1_000, 1, 1);
        let table = fixture.table();
        for key in [b"a", b"b", b"c"] {
            table.find_or_insert(key, 100, 200).unwrap();
        }
        let cursor = table.sweep_cursor.load(Ordering::SeqCst);
        assert_eq!(table.find_or_insert(b"d", 150, 250).err(), Some(TableError::Full { slots: 3 }));
        assert_eq!(table.usage(150), Usage { live: 3, expired: 0, claiming: 0 });
        let swept = table.sweep_cursor.load(Ordering::SeqCst) - cursor;
        assert_eq!(swept, SWEEP_AT_CAPACITY as u64, "one sweep, not a scan of the 1,000 slots");
        table.remove_matching(|key| key == b"a");
        table.find_or_insert(b"d", 150, 250).expect("a freed slot is room again");
    }

    /// The count of slots in use follows every claim and every way of freeing one.
    #[test]
    fn the_count_of_slots_in_use_follows_claims_and_frees() {
        let fixture = Fixture::with_capacity(20, 30, 1, 1);
        let table = fixture.table();
        let in_use = |table: &Table<'_>| table.in_use.load(Ordering::SeqCst) as i64;
        for i in 0..20u8 {
            table.find_or_insert(&[b'k', i], 100, 100 + i as u64).unwrap();
        }
        assert_eq!(in_use(&table), 20);
        assert_eq!(table.remove_matching(|key| key[1] < 5), 5);
        assert_eq!(in_use(&table), 15);
        // keys 5..=9 expired by 110; the sweep frees them
        assert_eq!(table.sweep(110, 30), 5);
        assert_eq!(in_use(&table), 10);
        assert_eq!(table.usage(110), Usage { live: 10, expired: 0, claiming: 0 });
        // a rival claim of a key that exists withdraws, gives its slot back, and returns the
        // slot that holds the key
        let claim = reserve_by_hand(
            &table,
            b"k\x0f",
            (0..30).find(|&i| Tag(table.slot(i).tag().load(Ordering::SeqCst)).state() == State::Free).unwrap(),
            110,
        );
        let entry = table.complete(&claim, &table.key(b"k\x0f").unwrap(), 110, 200).unwrap();
        assert!(!std::ptr::eq(entry.payload(), claim.slot.payload()), "the key's own slot, not the withdrawn one");
        assert!(std::ptr::eq(entry.payload(), table.find(b"k\x0f").unwrap().unwrap().payload()));
        assert_eq!(in_use(&table), 10);
    }

    /// Goal 7 of issue 11: once the keys placed far from their home are gone, the sweep
    /// lowers the home's reach, so lookups probe no farther than the keys stored now need.
    #[test]
    fn the_reach_of_a_home_shrinks_once_the_keys_placed_far_from_it_are_gone() {
        let fixture = Fixture::new(64, 1, 1);
        let table = fixture.table();
        let keys = keys_with_home(&table, 10, 5);
        for key in &keys {
            table.find_or_insert(key, 100, 200).unwrap();
        }
        assert_eq!(table.probes_from(10), 5);
        // the farthest key stays: nothing shrinks
        assert_eq!(table.remove_matching(|key| keys[1..4].iter().any(|k| k == key)), 3);
        table.shrink_reach_of(10);
        assert_eq!(table.probes_from(10), 5);
        assert!(table.find(&keys[4]).unwrap().is_some());
        // a key of another home placed past them does not hold the reach either
        table.remove_matching(|key| key == keys[4].as_slice());
        assert_eq!(table.probes_from(10), 5, "freeing alone does not shrink it");
        let other = keys_with_home(&table, 14, 1).remove(0);
        table.find_or_insert(&other, 100, 200).unwrap();
        table.sweep(100, 64);
        assert_eq!(table.probes_from(10), 1, "only the home slot's key is left");
        assert!(table.find(&keys[0]).unwrap().is_some() && table.find(&other).unwrap().is_some());
    }

    /// A claim recorded while a sweep shrinks its home's reach keeps the reach it needs: the
    /// sweep's compare-and-swap expects the version it read, which the claim bumped.
    #[test]
    fn a_claim_recorded_during_a_shrink_keeps_its_reach() {
        let fixture = Fixture::new(64, 1, 1);
        let table = fixture.table();
        let keys = keys_with_home(&table, 20, 3);
        for key in &keys[..2] {
            table.find_or_insert(key, 100, 200).unwrap();
        }
        table.remove_matching(|key| key == keys[1].as_slice());
        // the shrink reads the reach word, then a claim of keys[2] lands at distance 1 and
        // records its reach, then the shrink's compare-and-swap comes
        let word = table.slot(20).reach();
        let seen = word.load(Ordering::SeqCst);
        table.find_or_insert(&keys[2], 100, 200).unwrap();
        assert!(word.compare_exchange(seen, seen & !REACH_DISTANCE_MASK, Ordering::SeqCst, Ordering::SeqCst).is_err());
        assert!(table.find(&keys[2]).unwrap().is_some());
    }

    /// Shrinking every home of a table two thirds full loses no key: each slot's home is told
    /// from its ident, and never taken for another.
    #[test]
    fn shrinking_every_reach_keeps_every_key_found() {
        let fixture = Fixture::new(1_500, 1, 1);
        let table = fixture.table();
        let keys: Vec<Vec<u8>> = (0..1_000u32).map(|i| format!("s{i}").into_bytes()).collect();
        for key in &keys {
            table.find_or_insert(key, 100, 200).unwrap();
        }
        table.remove_matching(|key| key.len() % 2 == 0);
        for home in 0..1_500 {
            table.shrink_reach_of(home);
        }
        for key in &keys {
            assert_eq!(table.find(key).unwrap().is_some(), key.len() % 2 == 1, "{key:?}");
        }
    }
}
