//! The circuit store: what Ganesha's storage calls mean, over the two tables of the segment and,
//! in fleet mode, its fleet-only region.
//!
//! * Counter keys (success, failure, rejection) map to a [`Ring`] of bucket words
//!   (Rate strategy), a plain counter (Count strategy) and the last failure time. An increment
//!   is one compare-and-swap on one word; a load sums the words of the buckets in the window.
//! * Status keys map to a status with its expiry.
//! * Fleet mode: the fleet-only region ([`FleetOnly`]) holds the other hosts' counts of the
//!   services this host has not counted, which a load reads as it reads a counter's fleet ring.
//!
//! This module also lays out the segment's regions ([`Layout`]): what a payload holds is the
//! store's business, how slots are built the table's, and the segment only maps the regions.
//!
//! Every operation takes the time as an argument, so that it can be tested without a clock.

use crate::circuit::{STATUS_CALMED_DOWN, STATUS_TRIPPED};
use crate::sync::{AtomicU64, Ordering};

use crate::fleet_only::FleetOnly;
#[cfg(not(loom))]
use crate::fleet_only::FleetOnlyShape;
use crate::reset_log::ResetLog;
#[cfg(not(loom))]
use crate::reset_log::ResetLogShape;
#[cfg(not(loom))]
use crate::segment::{Regions, Segment, Settings};
use crate::table::{Entry, Table, TableError, Usage};
#[cfg(not(loom))]
use crate::table::{Shape, Stats};
use crate::window::{generation_byte, timed, total, BucketWord, CountWord, Lap, Ring, Window, COUNT_TTL, STATUS_TTL};

/// Payload word of a counter slot holding the last failure time, and its expiry.
const LAST_FAILURE_VALUE: usize = 0;
const LAST_FAILURE_EXPIRY: usize = 1;
/// Payload word of a counter slot holding the Count strategy's counter.
const COUNT: usize = 2;
/// Payload words of a counter slot holding totals since the slot was claimed: the key's
/// increments, and the half-open trials claimed on it.
const INCREMENTS: usize = 3;
const TRIALS: usize = 4;
/// First payload word of a counter slot's ring.
const RING: usize = 5;
/// Fleet mode: the payload word of a last failure time's slot holding the fleet's trial (see
/// [`trial_word`]): the Count strategy's counter, which fleet mode's Rate strategy leaves unused.
const FLEET_TRIAL: usize = COUNT;
/// Payload words of a status slot.
const STATUS_VALUE: usize = 0;
const STATUS_EXPIRY: usize = 1;
/// Payload words of a status slot holding totals since the slot was claimed: the saves that
/// tripped the circuit, and those that calmed it down.
const TRIPS: usize = 2;
const CALM_DOWNS: usize = 3;

/// Payload words of a counter slot: the last failure time (value, expiry), the Count
/// strategy's counter, two totals, then the ring of buckets; in fleet mode, then a second ring
/// of the same buckets holding the counts the fleet's other hosts published (written by the
/// fleet sidecar alone), and the window the buckets are counted in ([`FleetWindow`]).
pub const fn counter_payload_words(ring: Ring, fleet: bool) -> usize {
    RING + ring.len() as usize * (1 + fleet as usize) + fleet as usize
}

/// The window a counter's buckets are counted in, as fleet mode keeps it in the counter's
/// last payload word, so that the sidecar can name each bucket by its start time and
/// duration: the ring alone says neither. Written by the adapter when a write renews the slot
/// (so within 1/16 of the slot's lifetime of a change of window), and by the sidecar for the
/// counters it creates. The word has a bucket word's shape, the claim's generation on top: in
/// the lap's bits, the window's bucket count (the low 8) and how many times the counter was
/// reset ([`FleetWindow::RESETS`], the 12 above, wrapping), so that the sidecar tells a reset
/// from counts it can no longer read (its clock moved); the bucket duration in the count's.
/// The empty word a claim leaves, a duration of 0, is no window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FleetWindow {
    pub bucket_duration: u64,
    pub window_buckets: u64,
}

impl FleetWindow {
    pub fn of(window: &Window) -> Self {
        Self { bucket_duration: window.bucket_duration(), window_buckets: window.window_buckets() }
    }

    /// Resets a window word counts up to, wrapping to 0.
    pub const RESETS: u16 = 1 << 12;

    fn word(self, generation: u16, resets: u16) -> u64 {
        let lap = u64::from(resets % Self::RESETS) << 8 | self.window_buckets;
        BucketWord::holding(generation, Lap::new(lap), self.bucket_duration).0
    }

    /// The window of a window word, and its resets.
    fn read(word: u64) -> Option<(Self, u16)> {
        let word = BucketWord(word);
        let lap = word.lap().number();
        let window = Self { bucket_duration: word.count(), window_buckets: lap & 0xff };
        (window.bucket_duration > 0).then_some((window, (lap >> 8) as u16))
    }

    /// The bucket number of `now`.
    pub fn bucket_at(self, now: u64) -> u64 {
        now / self.bucket_duration
    }

    /// Seconds a bucket is read by a window after it started: the window and the bucket.
    pub fn lifetime(self) -> u64 {
        (self.window_buckets + 1).saturating_mul(self.bucket_duration)
    }
}

/// Payload words of a status slot: the status (value, expiry), two totals.
pub const STATUS_PAYLOAD_WORDS: usize = 4;

/// Totals of a key since its slot was claimed: they survive every process, and go with the
/// slot when its data has all expired and the slot is given to another key.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Counter keys: increments. Status keys: saves that tripped the circuit.
    pub events: u64,
    /// Counter keys: half-open trials claimed. Status keys: saves that calmed it down.
    pub others: u64,
}

/// What a write tells of its key's slot: `Some(t)` when the write created the slot or
/// extended its lifetime, which it now keeps until `t`; `None` when it was kept long enough
/// already. The slot of a busy key is renewed once per 1/16 of its lifetime: then, and only
/// then, the adapter keeps the other keys of the same service until `t` too ([`Store::keep`]),
/// so that a service's slots, and the totals they hold, live as long as any of its data.
pub type Renewed = Option<u64>;

/// Each table has `capacity / HEADROOM_DIVISOR` slots beyond its capacity, so that at most two
/// slots in three are in use and probes stay short at any occupancy (see `table`).
pub const HEADROOM_DIVISOR: usize = 2;

/// Counter keys per Ganesha service: success, failure and rejection.
pub const COUNTERS_PER_SERVICE: u64 = 3;

/// Times an operation looks its key up again after finding its slot recycled under it.
#[cfg(not(loom))]
const MAX_ATTEMPTS: u32 = 16;
#[cfg(loom)]
const MAX_ATTEMPTS: u32 = 2;

#[cfg(not(loom))]
const _: () = assert!(Stats::WORDS == crate::segment::STATS_WORDS, "the header keeps the tables' statistics");
#[cfg(not(loom))]
const _: () = assert!(
    Settings::MAX_BUCKETS_RANGE.1 == crate::window::MAX_BUCKETS,
    "the setting's range ends at the longest window"
);

/// What a claim of generation `generation` sets counter payload word `index` to: every word
/// empty, in a value unique to the claim (see `BucketWord::empty`).
pub fn init_counter(index: usize, generation: u32) -> u64 {
    match index {
        LAST_FAILURE_VALUE => timed::empty_value(generation),
        LAST_FAILURE_EXPIRY => timed::empty_expiry(generation),
        COUNT => CountWord::empty(generation).0,
        INCREMENTS | TRIALS => total::empty(generation),
        _ => BucketWord::empty(generation).0,
    }
}

/// The same for status payload words.
pub fn init_status(index: usize, generation: u32) -> u64 {
    match index {
        STATUS_VALUE => timed::empty_value(generation),
        STATUS_EXPIRY => timed::empty_expiry(generation),
        _ => total::empty(generation),
    }
}

/// Where the two tables lie in the segment, derived from the settings alone.
#[cfg(not(loom))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub settings: Settings,
    pub counters: Shape,
    pub statuses: Shape,
    /// Fleet mode: the fleet-only region, room for the three counters of as many services as
    /// this host's own (none without fleet mode).
    pub fleet_only: FleetOnlyShape,
    /// Fleet mode: the resets this host made, until the sidecar shares them (none without).
    pub reset_log: ResetLogShape,
}

#[cfg(not(loom))]
impl Layout {
    pub fn new(settings: Settings) -> Self {
        let max_key_length = settings.max_key_length as usize;
        let shape = |capacity: usize, payload_words| Shape {
            slots: capacity + capacity.div_ceil(HEADROOM_DIVISOR),
            capacity,
            payload_words,
            max_key_length,
        };
        Self {
            settings,
            counters: shape(
                (settings.max_services * COUNTERS_PER_SERVICE) as usize,
                counter_payload_words(Self::ring(settings), settings.fleet),
            ),
            statuses: shape(settings.max_services as usize, STATUS_PAYLOAD_WORDS),
            fleet_only: FleetOnlyShape {
                capacity: if settings.fleet { (settings.max_services * COUNTERS_PER_SERVICE) as usize } else { 0 },
                max_key_length,
                span: Self::ring(settings).len() as usize,
            },
            reset_log: ResetLogShape {
                entries: if settings.fleet { crate::reset_log::ENTRIES } else { 0 },
                max_key_length,
            },
        }
    }

    /// The regions the segment maps for this layout.
    pub fn regions(settings: Settings) -> Regions {
        let layout = Self::new(settings);
        Regions {
            settings,
            ring_buckets: Self::ring(settings).len(),
            words: [
                layout.counters.words(),
                layout.statuses.words(),
                layout.fleet_only.words(),
                layout.reset_log.words(),
            ],
        }
    }

    /// The ring every counter keeps, for windows of up to `max_buckets` buckets.
    pub fn ring(settings: Settings) -> Ring {
        Ring::for_windows_of(settings.max_buckets)
    }

    pub fn segment_bytes(&self) -> usize {
        Self::regions(self.settings).segment_bytes()
    }

    /// Shared memory one Ganesha service takes: its three counters and its status, with their
    /// share of the headroom; in fleet mode, and its share of the fleet-only region.
    pub fn bytes_per_service(&self) -> usize {
        let slot_bytes = |shape: &Shape| shape.slots * shape.slot_words() * 8;
        (slot_bytes(&self.counters) + slot_bytes(&self.statuses) + self.fleet_only.words() * 8)
            / self.settings.max_services as usize
    }
}

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
    /// The ring of every counter slot.
    ring: Ring,
    /// Fleet mode: the first payload word of the fleet's ring in every counter slot.
    fleet_ring: Option<usize>,
    /// Fleet mode: the fleet-only region: the services this host has not counted.
    fleet_only: Option<FleetOnly<'a>>,
    /// Fleet mode: the resets this host made, for the sidecar.
    reset_log: Option<ResetLog<'a>>,
    /// Fleet mode: how many of them the fleet's counts reflect (`Segment::fleet_resets_taken`).
    resets_taken: Option<&'a AtomicU64>,
}

/// A counter's own buckets, as the fleet sidecar publishes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnBuckets {
    pub key: Vec<u8>,
    /// The window its buckets are counted in.
    pub window: FleetWindow,
    /// How many times it was reset (`clear`), modulo [`FleetWindow::RESETS`]: a change tells
    /// the sidecar that its counts went down because they were reset.
    pub resets: u16,
    /// `(bucket start, count)` of each bucket with events from the oldest a window may still
    /// read to the next, oldest first (unix seconds, on this host's clock).
    pub buckets: Vec<(u64, u64)>,
}

impl<'a> Store<'a> {
    #[cfg(not(loom))]
    pub fn new(segment: &'a Segment) -> Self {
        let layout = Layout::new(segment.layout().settings);
        let stats = Stats::new(segment.stats_words());
        let (seed, checks) = (segment.hash_seed(), segment.checks_claimers());
        Self {
            counters: Table::new(segment.region(0), layout.counters, seed, checks, stats, init_counter),
            statuses: Table::new(segment.region(1), layout.statuses, seed, checks, stats, init_status),
            ring: Layout::ring(layout.settings),
            fleet_ring: layout.settings.fleet.then(|| RING + Layout::ring(layout.settings).len() as usize),
            fleet_only: layout.settings.fleet.then(|| FleetOnly::new(segment.region(2), layout.fleet_only, seed)),
            reset_log: layout.settings.fleet.then(|| ResetLog::new(segment.region(3), layout.reset_log)),
            resets_taken: layout.settings.fleet.then(|| segment.fleet_resets_taken()),
        }
    }

    /// A store over two tables built elsewhere (the model checker, and tests).
    #[cfg(any(test, loom))]
    pub fn from_tables(counters: Table<'a>, statuses: Table<'a>, ring: Ring) -> Self {
        Self { counters, statuses, ring, fleet_ring: None, fleet_only: None, reset_log: None, resets_taken: None }
    }

    /// How many LIVE counter slots hold `key`.
    #[cfg(any(test, loom))]
    pub fn counter_holders(&self, key: &[u8]) -> usize {
        self.counters.holders(key)
    }

    /// The counter table (for tests playing a stalled process by hand).
    #[cfg(test)]
    pub fn counters(&self) -> &Table<'a> {
        &self.counters
    }

    fn table(&self, kind: TableKind) -> &Table<'a> {
        match kind {
            TableKind::Counters => &self.counters,
            TableKind::Statuses => &self.statuses,
        }
    }

    /// Runs `write` on the slot of `key`, looked up again whenever `write` finds it recycled.
    /// A missing key is created, unless `create` is false: then nothing is written.
    fn write(
        &self,
        kind: TableKind,
        key: &[u8],
        now: u64,
        keep_for: u64,
        create: bool,
        write: impl Fn(&Entry<'a>) -> bool,
    ) -> Result<Renewed, StoreError> {
        let table = self.table(kind);
        let error = |error| StoreError { table: kind, error };
        let keep_until = now.saturating_add(keep_for);
        for _ in 0..MAX_ATTEMPTS {
            let entry = if create {
                table.find_or_insert(key, now, keep_until).map_err(error)?
            } else {
                match table.find_and_keep(key, now, keep_until).map_err(error)? {
                    Some(entry) => entry,
                    None => return Ok(None),
                }
            };
            if write(&entry) {
                return Ok(entry.renewed_until());
            }
        }
        Err(error(TableError::Contended))
    }

    fn find(&self, kind: TableKind, key: &[u8]) -> Result<Option<Entry<'a>>, StoreError> {
        self.table(kind).find(key).map_err(|error| StoreError { table: kind, error })
    }

    /// Counts one event of `key` in the current bucket.
    // Inlined across the crate boundary, as it was when the store and the extension were one
    // crate: the hot path must not pay for the split.
    #[inline]
    pub fn increment(&self, key: &[u8], window: &Window, now: u64) -> Result<Renewed, StoreError> {
        debug_assert!(window.window_buckets() < self.ring.len(), "windows are made for this store's rings");
        let bucket = window.bucket_at(now);
        let (index, lap) = self.ring.position(bucket);
        self.write(TableKind::Counters, key, now, window.ttl(), true, |entry| {
            let generation = BucketWord::generation_of(entry.generation());
            let counted = update_word(&entry.payload()[RING + index], entry, |word| {
                let word = BucketWord(word);
                (word.generation() == generation).then(|| word.incremented(lap).0)
            });
            if counted {
                // Counted in the window, so in the total too (unless the slot went meanwhile).
                add_one(&entry.payload()[INCREMENTS], entry);
            }
            counted
        })
    }

    /// The events of `key` in the buckets spanning the window at `now`.
    #[inline]
    pub fn load(&self, key: &[u8], window: &Window, now: u64) -> Result<u64, StoreError> {
        self.fold_buckets(key, window, now, 0, |sum, _, count| sum + count)
    }

    /// The count of each bucket of `key` in the window at `now`, oldest first, with the
    /// bucket's number (its start is the number times the bucket duration); zeros when the key
    /// is absent.
    pub fn bucket_counts(&self, key: &[u8], window: &Window, now: u64) -> Result<Vec<(u64, u64)>, StoreError> {
        self.fold_buckets(key, window, now, Vec::new(), |mut counts, bucket, count| {
            counts.push((bucket, count));
            counts
        })
    }

    /// Folds `f` over the buckets of `key` in the window at `now`, oldest first.
    fn fold_buckets<T>(
        &self,
        key: &[u8],
        window: &Window,
        now: u64,
        init: T,
        mut f: impl FnMut(T, u64, u64) -> T,
    ) -> Result<T, StoreError> {
        let Some(entry) = self.find(TableKind::Counters, key)? else {
            return Ok(window.buckets_at(now).fold(init, |acc, bucket| f(acc, bucket, 0)));
        };
        debug_assert!(window.window_buckets() < self.ring.len(), "windows are made for this store's rings");
        let generation = BucketWord::generation_of(entry.generation());
        let ring = &entry.payload()[RING..];
        let buckets = window.buckets_at(now);
        let positions = self.ring.positions_from(*buckets.start());
        Ok(buckets.zip(positions).fold(init, |acc, (bucket, (index, lap))| {
            // Relaxed: each count stands alone; a load is not a snapshot across buckets.
            let word = BucketWord(ring[index].load(Ordering::Relaxed));
            let count = if word.generation() == generation { word.count_in(lap) } else { 0 };
            f(acc, bucket, count)
        }))
    }

    /// Buckets in every counter's ring.
    pub fn ring_len(&self) -> usize {
        self.ring.len() as usize
    }

    /// Whether the counters keep the fleet's ring (fleet mode).
    #[inline]
    pub fn has_fleet(&self) -> bool {
        self.fleet_ring.is_some()
    }

    /// The events of `key` in the window at `now`: this host's, and those the fleet's other
    /// hosts published at the sidecar's last sync (0 without fleet mode). Both rings are read
    /// at the same buckets, so the fleet's events leave the window as this host's do. The
    /// fleet-only region is read too: it holds the key while this host has not counted it, and for
    /// the sync or so that both hold it (its first count here), the larger is the fleet's, as
    /// both are the same hosts' counts read at two syncs.
    ///
    /// A key that a reset made here since the sidecar last wrote the fleet's counts covers
    /// reads none of them: they may hold the other hosts' events from before it until the
    /// sidecar has shared it (a reset admits requests at once, on this host as without fleet
    /// mode).
    pub fn load_with_fleet(&self, key: &[u8], window: &Window, now: u64) -> Result<(u64, u64), StoreError> {
        let Some(fleet_ring) = self.fleet_ring else {
            return Ok((self.load(key, window, now)?, 0));
        };
        if self.reset_since_fleet_counts(key) {
            return Ok((self.load(key, window, now)?, 0));
        }
        let fleet_only = || match &self.fleet_only {
            Some(region) if !region.is_empty() => region.load(key, window.bucket_duration(), window.buckets_at(now)),
            _ => None,
        };
        let Some(entry) = self.find(TableKind::Counters, key)? else {
            return Ok((0, fleet_only().unwrap_or(0)));
        };
        let generation = BucketWord::generation_of(entry.generation());
        let (own, fleet) = (&entry.payload()[RING..], &entry.payload()[fleet_ring..]);
        let buckets = window.buckets_at(now);
        let positions = self.ring.positions_from(*buckets.start());
        Ok(buckets.zip(positions).fold((0, 0), |(own_sum, fleet_sum), (_, (index, lap))| {
            // Relaxed: each count stands alone, as in `fold_buckets`.
            let count = |ring: &[AtomicU64]| {
                let word = BucketWord(ring[index].load(Ordering::Relaxed));
                if word.generation() == generation {
                    word.count_in(lap)
                } else {
                    0
                }
            };
            (own_sum + count(own), fleet_sum + count(fleet))
        }))
        .map(|(own, fleet)| (own, fleet_only().map_or(fleet, |only| only.max(fleet))))
    }

    /// Fleet mode: whether a reset noted since the fleet's counts were written covers `key`.
    fn reset_since_fleet_counts(&self, key: &[u8]) -> bool {
        let (Some(log), Some(taken)) = (&self.reset_log, self.resets_taken) else { return false };
        if crate::defense::is_off(crate::defense::Defense::ResetHidesFleet) {
            return false;
        }
        // Acquire: pairs with the sidecar's Release store, after the counts it wrote.
        let taken = taken.load(Ordering::Acquire);
        log.tickets() > taken && log.covers_since(taken, key)
    }

    /// Fleet mode: the fleet-only region: the services this host has not counted.
    pub fn fleet_only(&self) -> Option<&FleetOnly<'a>> {
        self.fleet_only.as_ref()
    }

    /// Fleet mode: the log of the resets this host made (`ResetLog`), which the sidecar shares.
    pub fn reset_log(&self) -> Option<&ResetLog<'a>> {
        self.reset_log.as_ref()
    }

    /// Fleet mode: the payload word of a counter slot holding its [`FleetWindow`].
    fn fleet_window_at(&self) -> Option<usize> {
        self.fleet_ring.map(|fleet_ring| fleet_ring + self.ring.len() as usize)
    }

    /// Fleet mode: the window noted for `key`, if it has a slot and one is noted.
    pub fn fleet_window(&self, key: &[u8]) -> Result<Option<FleetWindow>, StoreError> {
        let Some(at) = self.fleet_window_at() else { return Ok(None) };
        let Some(entry) = self.find(TableKind::Counters, key)? else { return Ok(None) };
        // Relaxed: a word standing alone, whose generation says whether it is this claim's.
        let word = BucketWord(entry.payload()[at].load(Ordering::Relaxed));
        let current = word.generation() == BucketWord::generation_of(entry.generation()) && entry.is_current();
        Ok(FleetWindow::read(word.0).filter(|_| current).map(|(window, _)| window))
    }

    /// Fleet mode: notes the window `key` is counted in, when a count renewed its slot
    /// ([`Renewed`]); nothing without fleet mode, or for a key with no slot.
    pub fn note_fleet_window(&self, key: &[u8], window: &Window) -> Result<(), StoreError> {
        let Some(at) = self.fleet_window_at() else { return Ok(()) };
        let Some(entry) = self.find(TableKind::Counters, key)? else { return Ok(()) };
        note_window(&entry, at, FleetWindow::of(window));
        Ok(())
    }

    /// Every live counter's own buckets that hold events in the buckets a window may still read,
    /// and in those up to `ahead_s` past `now` that the ring still holds (counted before the
    /// clock stepped back: their events are this host's still), named by their start (fleet
    /// mode's export), with none for a counter reset since or one whose fleet ring alone holds
    /// counts: the counters whose window is noted, so not the Count strategy's, which have no
    /// buckets.
    pub fn own_buckets(&self, now: u64, ahead_s: u64) -> Vec<OwnBuckets> {
        let Some(window_at) = self.fleet_window_at() else { return Vec::new() };
        self.counters
            .live_entries(now)
            .into_iter()
            .filter_map(|(key, entry)| {
                let generation = BucketWord::generation_of(entry.generation());
                // Relaxed: validated as a whole by `is_current` below.
                let window_word = BucketWord(entry.payload()[window_at].load(Ordering::Relaxed));
                if window_word.generation() != generation {
                    return None;
                }
                let (window, resets) = FleetWindow::read(window_word.0)?;
                let count_at = |ring: &[AtomicU64], index: usize, lap: Lap| {
                    // Relaxed: validated as a whole by `is_current` below.
                    let word = BucketWord(ring[index].load(Ordering::Relaxed));
                    if word.generation() == generation {
                        word.count_in(lap)
                    } else {
                        0
                    }
                };
                let (own, fleet) = (&entry.payload()[RING..], &entry.payload()[self.fleet_ring?..]);
                let buckets: Vec<_> = self
                    .ring_range_ahead(window, now, ahead_s)
                    .filter_map(|(bucket, (index, lap))| {
                        let count = count_at(own, index, lap);
                        (count > 0).then(|| (bucket * window.bucket_duration, count))
                    })
                    .collect();
                // A counter that holds only the fleet's counts is the sidecar's to follow too:
                // whoever wrote them (a sidecar before a restart, or the one of the segment this
                // one is a copy of) is not there to write them again when the fleet resets it.
                let holds_fleet_counts =
                    || self.ring_range(window, now).any(|(_, (index, lap))| count_at(fleet, index, lap) > 0);
                (entry.is_current() && (!buckets.is_empty() || resets != 0 || holds_fleet_counts())).then_some(
                    OwnBuckets { key, window, resets, buckets },
                )
            })
            .collect()
    }

    /// Fleet mode: moves every counter's own counts into its fleet ring, bucket by bucket, when
    /// the segment is taken as a copy (`fleet::take_copy`): they are the old id's, which the
    /// fleet has from the segment copied, and this host reads them as the fleet's from now on,
    /// its view unchanged, while its own rings hold only what it counts after. Each count leaves
    /// the own ring before it reaches the fleet's: a load in between reads less, never more.
    pub fn hand_own_counts_to_fleet(&self, now: u64, ahead_s: u64) {
        let (Some(fleet_ring), Some(window_at)) = (self.fleet_ring, self.fleet_window_at()) else { return };
        for (_, entry) in self.counters.live_entries(now) {
            let generation = BucketWord::generation_of(entry.generation());
            // Relaxed: a word standing alone, whose generation says whether it is this claim's.
            let window_word = BucketWord(entry.payload()[window_at].load(Ordering::Relaxed));
            // Only the counters noted in a window have buckets.
            let Some((window, _)) = FleetWindow::read(window_word.0).filter(|_| window_word.generation() == generation)
            else {
                continue;
            };
            let (own, fleet) = (&entry.payload()[RING..], &entry.payload()[fleet_ring..]);
            // The buckets `own_buckets` exports: those a window may read, and those ahead of a
            // clock that stepped back.
            for (_, (index, lap)) in self.ring_range_ahead(window, now, ahead_s) {
                let moved = std::cell::Cell::new(0);
                let taken = update_word(&own[index], &entry, |word| {
                    let word = BucketWord(word);
                    moved.set(if word.generation() == generation { word.count_in(lap) } else { 0 });
                    (moved.get() > 0).then(|| BucketWord::holding(generation, lap, 0).0)
                });
                if !taken {
                    continue;
                }
                // The position is this bucket's: a word of another lap there is an older bucket's.
                update_word(&fleet[index], &entry, |word| {
                    let word = BucketWord(word);
                    let before = if word.generation() == generation { word.count_in(lap) } else { 0 };
                    Some(BucketWord::holding(generation, lap, before + moved.get()).0)
                });
            }
            // What the ring holds past that reach (a bucket ahead of a clock that stepped back
            // further than the ring has room for ahead of the window) is the old id's too, which
            // the segment copied publishes: emptied, or this host would publish it as its own
            // once its clock reaches it.
            for word in own[..self.ring.len() as usize].iter().filter(|_| !crate::defense::is_off(crate::defense::Defense::CopyHandsAll)) {
                update_word(word, &entry, |word| {
                    let word = BucketWord(word);
                    (word.generation() == generation && word.count() > 0).then(|| BucketWord::holding(generation, word.lap(), 0).0)
                });
            }
        }
    }

    /// The buckets a counter's ring holds at `now` for `window`, with their ring positions,
    /// oldest first: from the oldest a window may still read to the one after the current, as
    /// many as the ring holds (a writer may be a bucket ahead, see `window`).
    pub fn ring_range(&self, window: FleetWindow, now: u64) -> impl Iterator<Item = (u64, (usize, Lap))> {
        self.ring_range_ahead(window, now, 0)
    }

    /// `ring_range`, and the buckets after it up to `ahead_s` past `now`, as many as the ring
    /// holds with no position read twice (a position past them holds a bucket of the range).
    fn ring_range_ahead(&self, window: FleetWindow, now: u64, ahead_s: u64) -> impl Iterator<Item = (u64, (usize, Lap))> {
        let next = window.bucket_at(now) + 1;
        let first = next.saturating_sub(window.window_buckets.min(self.ring.len() - 2) + 1);
        let last = (next + ahead_s.div_ceil(window.bucket_duration.max(1))).min(first + self.ring.len() - 1).max(next);
        (first..=last).zip(self.ring.positions_from(first))
    }

    /// Writes what the fleet's other hosts counted of `key` into its fleet ring:
    /// `buckets[position]` is the bucket that position must hold with its count, or `None` to
    /// leave the word as it is; words that hold it already are not written. Creates the key,
    /// kept until `keep_until` and noted as counted in `window`, when `create` is true and this
    /// host has none (a counter of a service this host counts, which has not counted itself).
    /// Does nothing without fleet mode, or when `keep_until` is not after `now`.
    pub fn write_fleet_buckets(
        &self,
        key: &[u8],
        now: u64,
        keep_until: u64,
        window: FleetWindow,
        buckets: &[Option<(Lap, u64)>],
        create: bool,
    ) -> Result<(), StoreError> {
        let (Some(fleet_ring), Some(window_at)) =
            (self.fleet_ring.filter(|_| keep_until > now), self.fleet_window_at())
        else {
            return Ok(());
        };
        debug_assert_eq!(buckets.len(), self.ring.len() as usize);
        self.write(TableKind::Counters, key, now, keep_until.saturating_sub(now), create, |entry| {
            let generation = BucketWord::generation_of(entry.generation());
            if entry.renewed_until().is_some() {
                note_window(entry, window_at, window);
            }
            buckets.iter().enumerate().all(|(index, bucket)| {
                let Some((lap, count)) = *bucket else { return true };
                let word = &entry.payload()[fleet_ring + index];
                let next = BucketWord::holding(generation, lap, count).0;
                // Relaxed: only whether to write; the compare-and-swap decides.
                let current = BucketWord(word.load(Ordering::Relaxed));
                if current.0 == next || (count == 0 && current.generation() == generation && !current.holds(lap)) {
                    return true; // holds it already (another bucket's count reads as 0 here)
                }
                // False only once the slot is no longer this key's: then it is looked up again. A
                // word of another claim's generation in a slot still this claim's was written by
                // whoever wrote over the segment file (see `note_window`): written over, not kept.
                update_word(word, entry, |_| Some(next))
            })
        })
        .map(|_| ())
    }

    /// The Count strategy's counter of `key` (0 when absent or expired).
    pub fn load_count(&self, key: &[u8], now: u64) -> Result<u64, StoreError> {
        let Some(entry) = self.find(TableKind::Counters, key)? else {
            return Ok(0);
        };
        // Relaxed: one word, read on its own.
        let word = CountWord(entry.payload()[COUNT].load(Ordering::Relaxed));
        Ok(if word.generation() == generation_byte(entry.generation()) { word.count_at(now) } else { 0 })
    }

    /// Changes the Count strategy's counter of `key` to `change(current)` in one
    /// compare-and-swap, and keeps it [`COUNT_TTL`] from now. `create`: false leaves a missing
    /// key missing (a decrement of nothing).
    pub fn change_count(
        &self,
        key: &[u8],
        now: u64,
        create: bool,
        change: impl Fn(u64) -> u64,
    ) -> Result<Renewed, StoreError> {
        self.change_count_counting(key, now, create, change, false)
    }

    /// An increment of the Count strategy's counter of `key`, counted in its total too.
    pub fn increment_count(&self, key: &[u8], now: u64) -> Result<Renewed, StoreError> {
        self.change_count_counting(key, now, true, |count| count + 1, true)
    }

    fn change_count_counting(
        &self,
        key: &[u8],
        now: u64,
        create: bool,
        change: impl Fn(u64) -> u64,
        counts: bool,
    ) -> Result<Renewed, StoreError> {
        let expires_at = now.saturating_add(COUNT_TTL);
        self.write(TableKind::Counters, key, now, COUNT_TTL, create, |entry| {
            let changed = update_word(&entry.payload()[COUNT], entry, |word| {
                let word = CountWord(word);
                (word.generation() == generation_byte(entry.generation()))
                    .then(|| word.with_count(change(word.count_at(now)), expires_at).0)
            });
            if changed && counts {
                add_one(&entry.payload()[INCREMENTS], entry);
            }
            changed
        })
    }

    /// The totals of counter `key` (increments, trials) or of status `key` (trips,
    /// calm-downs): `None` when the key has no slot.
    pub fn totals(&self, kind: TableKind, key: &[u8]) -> Result<Option<Totals>, StoreError> {
        let Some(entry) = self.find(kind, key)? else {
            return Ok(None);
        };
        let [events_at, others_at] = match kind {
            TableKind::Counters => [INCREMENTS, TRIALS],
            TableKind::Statuses => [TRIPS, CALM_DOWNS],
        };
        let payload = entry.payload();
        // Relaxed: each total stands alone.
        let (events, others) = (payload[events_at].load(Ordering::Relaxed), payload[others_at].load(Ordering::Relaxed));
        if !total::belongs(events, entry.generation()) || !total::belongs(others, entry.generation()) {
            return Ok(None); // recycled under the reader
        }
        Ok(Some(Totals { events: total::count(events), others: total::count(others) }))
    }

    /// Clears what `key` holds (its counts, last failure time, status) but its totals: the
    /// key then reads as if never written, and its totals go on.
    pub fn clear(&self, kind: TableKind, key: &[u8]) -> Result<(), StoreError> {
        let Some(entry) = self.find(kind, key)? else {
            return Ok(());
        };
        let generation = entry.generation();
        let (init, kept): (fn(usize, u32) -> u64, [usize; 2]) = match kind {
            TableKind::Counters => (init_counter, [INCREMENTS, TRIALS]),
            TableKind::Statuses => (init_status, [TRIPS, CALM_DOWNS]),
        };
        // Last word first, so that each expiry (`*_EXPIRY`) is emptied before its value: a
        // reader, which reads the expiry first, then sees the value as it was or the expiry
        // absent. (A save racing the clear may still leave a live expiry over the emptied
        // value: `read_timed` takes an empty value for absent.)
        let window_at = self.fleet_window_at().filter(|_| kind == TableKind::Counters);
        for (index, word) in entry.payload().iter().enumerate().rev().filter(|(index, _)| !kept.contains(index)) {
            // A word of another claim stays as it is: the slot is no longer this key's. The
            // window of a fleet counter stays, counting the reset.
            let emptied = |current: u64| {
                belongs(index, current, generation, kind).then(|| match window_at {
                    Some(at) if at == index => cleared_window(current, generation),
                    _ => init(index, generation),
                })
            };
            if !update_word(word, &entry, emptied) {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Fleet mode: takes from `key` what it held from before `through` (unix seconds, this
    /// host's clock) and nothing newer: a counter's own buckets that start at or before
    /// `through`, and its last failure time when it is not after `through`; a status saved at
    /// or before `through`. What a reset another host of the fleet made at `through` takes from
    /// this one (see `fleet`): taken again, or late, it takes nothing counted since. Unlike
    /// [`Store::clear`] it counts no reset: the sidecar applies the fleet's reset, which the
    /// host that made it has said already. Whether it took anything.
    ///
    /// A status is taken by a compare-and-swap of the word read: a save of the same status
    /// between the read of its expiry and the swap (a circuit tripping again within the second
    /// it was reset) is taken with it, and trips again on the counts.
    pub fn clear_through(&self, kind: TableKind, key: &[u8], through: u64, now: u64) -> Result<bool, StoreError> {
        let Some(entry) = self.find(kind, key)? else {
            return Ok(false);
        };
        let payload = entry.payload();
        let through_value = through.min(timed::MAX_VALUE as u64) as i64;
        // A timed value (a last failure time, a status) emptied when `taken` says so: the value
        // word alone, which leaves a live expiry over an empty value, read as absent.
        let take_timed = |[value_at, expiry_at]: [usize; 2], taken: &dyn Fn(i64, u64) -> bool| {
            let Timed::Alive { word, value } = read_timed(&entry, [value_at, expiry_at], now) else { return false };
            // Acquire: as in `read_timed`.
            let expires_at = timed::decode_expiry(payload[expiry_at].load(Ordering::Acquire));
            let empty = timed::empty_value(entry.generation());
            taken(value, expires_at)
                && update_word(&payload[value_at], &entry, |current| (current == word).then_some(empty))
        };
        let mut took = false;
        match kind {
            TableKind::Counters => {
                took |= take_timed([LAST_FAILURE_VALUE, LAST_FAILURE_EXPIRY], &|time, _| time <= through_value);
                let Some(window_at) = self.fleet_window_at() else { return Ok(took) };
                let generation = BucketWord::generation_of(entry.generation());
                // Relaxed: the compare-and-swaps below check each word's generation.
                let window_word = BucketWord(payload[window_at].load(Ordering::Relaxed));
                let Some((window, _)) =
                    FleetWindow::read(window_word.0).filter(|_| window_word.generation() == generation)
                else {
                    return Ok(took);
                };
                for (bucket, (index, lap)) in self.ring_range(window, now) {
                    if bucket.saturating_mul(window.bucket_duration) > through {
                        break; // oldest first: the rest are newer
                    }
                    let empty = init_counter(RING + index, entry.generation());
                    took |= update_word(&payload[RING + index], &entry, |current| {
                        let current = BucketWord(current);
                        (current.generation() == generation && current.count_in(lap) > 0).then_some(empty)
                    });
                }
            }
            TableKind::Statuses => {
                took |= take_timed([STATUS_VALUE, STATUS_EXPIRY], &|_, expires_at| {
                    expires_at.saturating_sub(STATUS_TTL) <= through
                });
            }
        }
        Ok(took)
    }

    /// Keeps the slots of `counters` and `statuses` that exist until at least `until`, creating
    /// none: what the adapter does with a service's other keys when a write renewed one of
    /// them (see [`Renewed`]). Their data keeps its own expiry; only the slots, and the totals
    /// they hold, stay. `until` is the renewed slot's own, its margin included: the other slots
    /// get exactly that, never a margin more, so that they are reusable when it is.
    pub fn keep(&self, counters: &[&[u8]], statuses: &[&[u8]], now: u64, until: u64) {
        for (kind, keys) in [(TableKind::Counters, counters), (TableKind::Statuses, statuses)] {
            for key in keys {
                // A key too long has no slot to keep; a contended one is kept by its own writes.
                let _ = self.table(kind).find_and_keep_alongside(key, now, until);
            }
        }
    }

    /// Saves the last failure time of `key`, kept for `ttl` seconds.
    pub fn save_last_failure_time(&self, key: &[u8], time: i64, ttl: u64, now: u64) -> Result<Renewed, StoreError> {
        self.save_timed(TableKind::Counters, key, [LAST_FAILURE_VALUE, LAST_FAILURE_EXPIRY], time, now, ttl)
    }

    /// The last failure time of `key`, without changing anything.
    pub fn peek_last_failure_time(&self, key: &[u8], now: u64) -> Result<Option<i64>, StoreError> {
        self.load_timed(TableKind::Counters, key, [LAST_FAILURE_VALUE, LAST_FAILURE_EXPIRY], now)
    }

    /// The last failure time of `key` as Ganesha's half-open check should see it, claiming the
    /// half-open trial for this caller when one is due.
    ///
    /// Ganesha lets a request through when `time() - lastFailureTime > intervalToHalfOpen`,
    /// then writes `time()` back: two calls, between which every concurrent caller would see
    /// the old time and get through too. Here the first caller to find a trial due swaps the
    /// current time in with one compare-and-swap and gets the old time, so Ganesha admits it;
    /// every other caller gets the new time and is rejected. A caller that finds no trial due
    /// gets a time no older than `now + 1 - interval`, so that Ganesha, whose `time()` may have
    /// moved to the next second since `now` was read, does not admit it either.
    pub fn claim_trial(&self, key: &[u8], now: u64, interval: u64, ttl: u64) -> Result<Option<i64>, StoreError> {
        self.claim_trial_of(key, now, interval, ttl, false)
    }

    /// [`Store::claim_trial`] in fleet mode with the fleet's view fresh: the trial is due an
    /// interval after the fleet's last failure too, and it is this host's only while the sidecar's
    /// grant of it, for that failure, is valid ([`Store::write_fleet_trial`]). A slot the sidecar
    /// wrote no trial into is claimed as on a host alone.
    pub fn claim_fleet_trial(&self, key: &[u8], now: u64, interval: u64, ttl: u64) -> Result<Option<i64>, StoreError> {
        self.claim_trial_of(key, now, interval, ttl, true)
    }

    fn claim_trial_of(
        &self,
        key: &[u8],
        now: u64,
        interval: u64,
        ttl: u64,
        fleet: bool,
    ) -> Result<Option<i64>, StoreError> {
        let [value_at, expiry_at] = [LAST_FAILURE_VALUE, LAST_FAILURE_EXPIRY];
        let now_value = now.min(timed::MAX_VALUE as u64) as i64;
        let latest_refused = now_value.saturating_add(1).saturating_sub(interval.min(i64::MAX as u64) as i64);
        for _ in 0..MAX_ATTEMPTS {
            let Some(entry) = self.find(TableKind::Counters, key)? else {
                return Ok(None);
            };
            let (value, last_failure) = match read_timed(&entry, [value_at, expiry_at], now) {
                Timed::Recycled => continue,
                Timed::Absent => return Ok(None),
                Timed::Alive { word, value } => (word, value),
            };
            let fleet_trial = if fleet && self.has_fleet() { fleet_trial_of(&entry) } else { None };
            // The fleet's last failure counts as this host's: the trial is due an interval after
            // the later of both.
            let since = fleet_trial.map_or(last_failure, |trial| trial.since(last_failure));
            if now_value.saturating_sub(since) <= interval.min(i64::MAX as u64) as i64 {
                // No trial due: a read, which neither writes nor extends the slot.
                return Ok(Some(since.max(latest_refused)));
            }
            // Due, and the fleet's trial is another host's (or nobody's yet): refused, as when
            // none is due.
            if fleet_trial.is_some_and(|trial| !trial.granted_for(since, now)) {
                return Ok(Some(latest_refused));
            }
            // The claim is a write: the slot must then be kept as long as a saved time.
            let Some(entry) = self.counters.keep_entry(entry, now, now.saturating_add(ttl)) else {
                continue;
            };
            let generation = generation_byte(entry.generation());
            let payload = entry.payload();
            // AcqRel: the claim is the value other callers must see; Relaxed on failure:
            // someone else changed the time first, so look again.
            if payload[value_at]
                .compare_exchange(
                    value,
                    timed::encode_value(generation, now_value),
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_ok()
            {
                // The trial restarts the interval: keep the time as long as a saved one.
                replace_word(&payload[expiry_at], &entry, timed::encode_expiry(generation, now.saturating_add(ttl)));
                add_one(&payload[TRIALS], &entry);
                return Ok(Some(since));
            }
        }
        Err(StoreError { table: TableKind::Counters, error: TableError::Contended })
    }

    /// Fleet mode: writes the fleet's last failure of `key` (unix seconds, this host's clock),
    /// and this host's grant of the trial due after it, valid through `granted_until`, or none:
    /// one word, so that a reader sees both as one sidecar wrote them. Nothing for a key with no
    /// slot.
    pub fn write_fleet_trial(&self, key: &[u8], failure: u64, granted_until: Option<u64>) -> Result<(), StoreError> {
        if !self.has_fleet() {
            return Ok(());
        }
        let Some(entry) = self.find(TableKind::Counters, key)? else { return Ok(()) };
        let next = trial_word::word(generation_byte(entry.generation()), failure, granted_until.unwrap_or(0));
        update_word(&entry.payload()[FLEET_TRIAL], &entry, |current| {
            (CountWord(current).generation() == generation_byte(entry.generation()) && current != next).then_some(next)
        });
        Ok(())
    }

    /// Saves the status of `key`, kept for [`STATUS_TTL`]. A save of [`STATUS_TRIPPED`] over
    /// another status (or none) counts a trip, one of [`STATUS_CALMED_DOWN`] over
    /// [`STATUS_TRIPPED`] a calm-down: the status word's compare-and-swap gives each save the
    /// status it replaced, so that of processes saving the same status at once, one counts.
    pub fn save_status(&self, key: &[u8], status: i64, now: u64) -> Result<Renewed, StoreError> {
        let ttl = STATUS_TTL;
        self.write(TableKind::Statuses, key, now, ttl, true, |entry| {
            let generation = generation_byte(entry.generation());
            let payload = entry.payload();
            // Acquire: as in `read_timed`, the expiry first.
            let expiry = payload[STATUS_EXPIRY].load(Ordering::Acquire);
            let read = payload[STATUS_VALUE].load(Ordering::Acquire);
            if timed::generation(expiry) != generation || timed::generation(read) != generation {
                return false; // recycled under us
            }
            // A live expiry over an empty value (a clear raced a save) holds no status.
            let expiry_alive = timed::alive(timed::decode_expiry(expiry), now);
            let alive = expiry_alive && timed::is_written(read);
            let replaced = std::cell::Cell::new(None);
            let replaced_expiry = std::cell::Cell::new(None);
            let expiry_word = timed::encode_expiry(generation, now.saturating_add(ttl));
            let saved = update_word(&payload[STATUS_VALUE], entry, |current| {
                replaced.set(Some(current));
                (timed::generation(current) == generation).then_some(timed::encode_value(generation, status))
            }) && update_word(&payload[STATUS_EXPIRY], entry, |current| {
                replaced_expiry.set(Some(current));
                (timed::generation(current) == generation).then_some(expiry_word)
            });
            if saved {
                // The status this save replaced, if it was alive: a value written since it was
                // read is a live save's; the value read is what it was, if it was alive.
                let replaced_status = match replaced.get() {
                    Some(word) if timed::is_written(word) && (word != read || alive) => Some(timed::decode_value(word)),
                    _ => None,
                };
                // A trip is counted by the one save that makes a tripped status alive where none
                // was: the first whose expiry replaces one that is not alive, or one that replaces
                // another live status, or the empty value a clear left under a live expiry (which
                // it read so: a save's expiry is written after its value, so an expiry read first
                // and alive over an empty value is no save under way). Not by its value alone: a
                // save writes its value, then its expiry, and another save that reads the value
                // between the two cannot tell it from an expired one, so two saves tripping a new
                // circuit at once would both count it.
                let expiry_was_alive =
                    replaced_expiry.get().is_some_and(|word| timed::alive(timed::decode_expiry(word), now));
                let cleared =
                    replaced.get().is_some_and(|word| !timed::is_written(word) && word == read && expiry_alive);
                let trip =
                    !expiry_was_alive || cleared || replaced_status.is_some_and(|status| status != STATUS_TRIPPED);
                if status == STATUS_TRIPPED && trip {
                    add_one(&payload[TRIPS], entry);
                } else if status == STATUS_CALMED_DOWN && replaced_status == Some(STATUS_TRIPPED) {
                    add_one(&payload[CALM_DOWNS], entry);
                }
            }
            saved
        })
    }

    pub fn load_status(&self, key: &[u8], now: u64) -> Result<Option<i64>, StoreError> {
        self.load_timed(TableKind::Statuses, key, [STATUS_VALUE, STATUS_EXPIRY], now)
    }

    fn save_timed(
        &self,
        kind: TableKind,
        key: &[u8],
        [value_at, expiry_at]: [usize; 2],
        value: i64,
        now: u64,
        ttl: u64,
    ) -> Result<Renewed, StoreError> {
        self.write(kind, key, now, ttl, true, |entry| {
            let generation = generation_byte(entry.generation());
            let payload = entry.payload();
            // The value first, then its expiry: a reader reads them the other way round, so
            // a new expiry always comes with the new value (see `load_timed`).
            replace_word(&payload[value_at], entry, timed::encode_value(generation, value))
                && replace_word(&payload[expiry_at], entry, timed::encode_expiry(generation, now.saturating_add(ttl)))
        })
    }

    fn load_timed(
        &self,
        kind: TableKind,
        key: &[u8],
        [value_at, expiry_at]: [usize; 2],
        now: u64,
    ) -> Result<Option<i64>, StoreError> {
        let Some(entry) = self.find(kind, key)? else {
            return Ok(None);
        };
        Ok(match read_timed(&entry, [value_at, expiry_at], now) {
            Timed::Alive { value, .. } => Some(value),
            Timed::Absent | Timed::Recycled => None,
        })
    }

    /// Deletes every counter and status whose key satisfies `matches`; returns how many.
    pub fn remove_matching(&self, matches: impl Fn(&[u8]) -> bool) -> usize {
        self.counters.remove_matching(&matches) + self.statuses.remove_matching(&matches)
    }

    /// Clears ([`Store::clear`]) every counter and status whose key satisfies `matches`, keeping
    /// their slots: a reset in fleet mode, where the sidecar finds a counter reset by its slot
    /// (see [`FleetWindow`]) and says so to the fleet. Returns how many it cleared.
    pub fn clear_matching(&self, matches: impl Fn(&[u8]) -> bool) -> usize {
        [TableKind::Counters, TableKind::Statuses]
            .into_iter()
            .map(|kind| {
                // Every live slot, its data expired or not (no time is before 0).
                let keys = self.table(kind).live_keys(0).into_iter().filter(|key| matches(key));
                keys.filter(|key| self.clear(kind, key).is_ok()).count()
            })
            .sum()
    }

    /// Every key holding data that may not all have expired at `now`, counters and statuses.
    pub fn live_keys(&self, now: u64) -> Vec<Vec<u8>> {
        let mut keys = self.counters.live_keys(now);
        keys.extend(self.statuses.live_keys(now));
        keys
    }

    /// Forgets where this process found its keys (see `Table::forget_places`).
    pub fn forget_places(&self) {
        self.counters.forget_places();
        self.statuses.forget_places();
    }

    pub fn usage(&self, now: u64) -> [Usage; 2] {
        [self.counters.usage(now), self.statuses.usage(now)]
    }
}

/// A timed value as read from a slot.
enum Timed {
    /// Never saved, or expired.
    Absent,
    /// The words belong to another generation: the slot was recycled under the reader.
    Recycled,
    /// The value, and the word that holds it (for a compare-and-swap).
    Alive { word: u64, value: i64 },
}

fn read_timed(entry: &Entry<'_>, [value_at, expiry_at]: [usize; 2], now: u64) -> Timed {
    let generation = generation_byte(entry.generation());
    let payload = entry.payload();
    // Acquire: pairs with the Release of the expiry's compare-and-swap, which the writer made
    // after the value's, so the value read next is at least as new as the expiry.
    let expiry = payload[expiry_at].load(Ordering::Acquire);
    let word = payload[value_at].load(Ordering::Acquire);
    if timed::generation(expiry) != generation || timed::generation(word) != generation {
        Timed::Recycled
    } else if timed::alive(timed::decode_expiry(expiry), now) && timed::is_written(word) {
        // An empty value under a live expiry is a clear's (or a claim's) work under way, or a
        // clear that raced a save: never a value, so never a status or a time to claim a trial on.
        Timed::Alive { word, value: timed::decode_value(word) }
    } else {
        Timed::Absent
    }
}

/// Replaces `word` by `next(word)` in one compare-and-swap, retried while other writers change
/// it first; false, without writing, when `next` returns `None` (the word is of another
/// generation: the slot was recycled under us) or the slot no longer holds the entry's key.
///
/// Before every attempt the slot's tag is checked to show the entry's claim still (its whole
/// generation, not the byte the words carry). So only a writer stopped between that check and
/// its compare-and-swap can reach a recycled slot, and then the word must hold exactly the
/// value it read before it stopped: a claim sets every word to a value unique to the claim,
/// and the words later written under it carry its generation byte, so that takes 256 more
/// claims of that slot during the stop and the very same value (a count, to the second).
fn update_word(word: &AtomicU64, entry: &Entry<'_>, next: impl Fn(u64) -> Option<u64>) -> bool {
    // Relaxed: the compare-and-swap below decides.
    let mut current = word.load(Ordering::Relaxed);
    loop {
        // The slot may have been recycled between the lookup (or the last attempt) and the
        // read of `current`.
        if !entry.is_current() {
            return false;
        }
        let Some(new) = next(current) else {
            return false;
        };
        // Release on success: a reader that acquires this word sees the words written before
        // it (a timed value's value before its expiry). Relaxed on failure: retried with it.
        match word.compare_exchange_weak(current, new, Ordering::Release, Ordering::Relaxed) {
            Ok(_) => return true,
            Err(actual) => current = actual,
        }
    }
}

/// Notes `window` in the fleet window word of `entry` (payload word `at`), unless it holds it.
///
/// The fleet's words heal: a claim writes every payload word under its generation before the
/// slot goes live, and `update_word` asks for the next value only while the slot is still the
/// claim's, so a word of another generation there was written by whoever wrote over the segment
/// file. Kept, it would refuse every write for as long as the slot lives (a service counted
/// without a pause keeps it for ever); it is written over, as the claim's.
fn note_window(entry: &Entry<'_>, at: usize, window: FleetWindow) {
    let generation = BucketWord::generation_of(entry.generation());
    update_word(&entry.payload()[at], entry, |word| {
        // The resets go on with the new window; a word written over holds none of this claim's.
        let ours = BucketWord(word).generation() == generation;
        let resets = FleetWindow::read(word).filter(|_| ours).map_or(0, |(_, resets)| resets);
        let next = window.word(generation, resets);
        (word != next).then_some(next)
    });
}

/// The fleet's trial of a service, as the sidecar wrote it in the slot.
#[derive(Debug, Clone, Copy)]
struct FleetTrial {
    /// The fleet's last failure (unix seconds).
    failure: i64,
    /// Through which second this host holds the trial due after that failure, if it does.
    granted_until: Option<u64>,
}

impl FleetTrial {
    /// The failure a trial is due an interval after, this host's last being `last_failure`.
    fn since(self, last_failure: i64) -> i64 {
        last_failure.max(self.failure)
    }

    /// Whether this host holds the trial due after a failure at `since` at `now`: the grant is
    /// of the fleet's last failure, and no later failure of this host's came since.
    fn granted_for(self, since: i64, now: u64) -> bool {
        self.granted_until.is_some_and(|until| self.failure >= since && now <= until)
    }
}

/// The fleet's trial in `entry`, a last failure time's slot; `None` while the sidecar wrote none.
fn fleet_trial_of(entry: &Entry<'_>) -> Option<FleetTrial> {
    // Acquire: pairs with the sidecar's Release (`update_word`); the word stands alone.
    let word = entry.payload()[FLEET_TRIAL].load(Ordering::Acquire);
    let (failure, granted_until) = trial_word::read(word, generation_byte(entry.generation()))?;
    Some(FleetTrial { failure: failure as i64, granted_until })
}

/// The word of the fleet's trial: `[generation 8 | written 1 | span 23 | failure 32]`, the
/// fleet's last failure (unix seconds) and, when this host holds the trial due after it, through
/// how many seconds after the failure (0: it does not). The empty word of a claim never has the
/// written bit (a [`CountWord`]'s is 0).
mod trial_word {
    const WRITTEN: u64 = 1 << 55;
    const SECONDS: u64 = u32::MAX as u64;
    /// The most seconds after its failure a grant holds: 97 days.
    const SPAN: u64 = (1 << 23) - 1;

    pub fn word(generation: u8, failure: u64, granted_until: u64) -> u64 {
        let failure = failure.min(SECONDS);
        let span = granted_until.saturating_sub(failure).min(SPAN);
        u64::from(generation) << 56 | WRITTEN | span << 32 | failure
    }

    /// `(failure, granted until)`, when `word` was written under the claim of `generation`.
    pub fn read(word: u64, generation: u8) -> Option<(u64, Option<u64>)> {
        if (word >> 56) as u8 != generation || word & WRITTEN == 0 {
            return None;
        }
        let (failure, span) = (word & SECONDS, word >> 32 & SPAN);
        Some((failure, (span > 0).then_some(failure + span)))
    }
}

/// What a clear leaves in a counter's window word `word` of the claim of `generation`: a window
/// noted stays, with one more reset; else an empty word.
fn cleared_window(word: u64, generation: u32) -> u64 {
    match FleetWindow::read(word) {
        Some((window, resets)) => window.word(BucketWord::generation_of(generation), resets.wrapping_add(1)),
        None => BucketWord::empty(generation).0,
    }
}

/// One more in a total word of `entry`'s claim; false when the slot is no longer its.
fn add_one(word: &AtomicU64, entry: &Entry<'_>) -> bool {
    let generation = entry.generation();
    update_word(word, entry, |current| total::belongs(current, generation).then(|| total::incremented(current)))
}

/// Whether payload word `index` of a slot of `kind`, holding `word`, belongs to the claim of
/// `generation`.
fn belongs(index: usize, word: u64, generation: u32, kind: TableKind) -> bool {
    match (kind, index) {
        (TableKind::Counters, LAST_FAILURE_VALUE | LAST_FAILURE_EXPIRY) | (TableKind::Statuses, _) => {
            timed::generation(word) == generation_byte(generation)
        }
        (TableKind::Counters, COUNT) => CountWord(word).generation() == generation_byte(generation),
        (TableKind::Counters, _) => BucketWord(word).generation() == BucketWord::generation_of(generation),
    }
}

/// Replaces a timed value's word with `new` if it still belongs to `entry`'s generation.
fn replace_word(word: &AtomicU64, entry: &Entry<'_>, new: u64) -> bool {
    let generation = generation_byte(entry.generation());
    update_word(word, entry, |current| (timed::generation(current) == generation).then_some(new))
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::segment::{Segment, Settings};
    use crate::window::MAX_BUCKETS;

    /// The ring of the tests' stores, sized for the longest windows.
    const RING_OF_TESTS: Ring = Ring::for_windows_of(MAX_BUCKETS);

    fn segment(max_services: u64) -> Segment {
        Segment::create_anonymous(Layout::regions(Settings {
            max_services,
            max_key_length: 64,
            max_buckets: MAX_BUCKETS,
            fleet: false,
        }))
        .unwrap()
    }

    fn window(time_window: i64, bucket_duration: Option<u64>) -> Window {
        Window::new(time_window, bucket_duration, MAX_BUCKETS).unwrap()
    }

    /// Tables with no headroom, over process-local words: a new key can only take the slot
    /// last freed, for tests that recycle one slot.
    struct Tight {
        max_services: usize,
        counters: Vec<AtomicU64>,
        statuses: Vec<AtomicU64>,
        stats: Vec<AtomicU64>,
    }

    impl Tight {
        fn new(max_services: usize) -> Self {
            let words = |n: usize| (0..n).map(|_| AtomicU64::new(0)).collect();
            let [counters, statuses] = Self::shapes(max_services);
            Self {
                max_services,
                counters: words(counters.words()),
                statuses: words(statuses.words()),
                stats: words(Stats::WORDS),
            }
        }

        fn shapes(max_services: usize) -> [Shape; 2] {
            let shape =
                |capacity, payload_words| Shape { slots: capacity, capacity, payload_words, max_key_length: 64 };
            [
                shape(3 * max_services, counter_payload_words(RING_OF_TESTS, false)),
                shape(max_services, STATUS_PAYLOAD_WORDS),
            ]
        }

        fn store(&self) -> Store<'_> {
            let [counters, statuses] = Self::shapes(self.max_services);
            let stats = Stats::new(&self.stats);
            Store::from_tables(
                Table::new(&self.counters, counters, 7, true, stats, init_counter),
                Table::new(&self.statuses, statuses, 7, true, stats, init_status),
                RING_OF_TESTS,
            )
        }
    }

    const T0: u64 = 1_800_000_000;

    fn fleet_segment(max_services: u64) -> Segment {
        let settings = Settings { max_services, max_key_length: 64, max_buckets: MAX_BUCKETS, fleet: true };
        Segment::create_anonymous(Layout::regions(settings)).unwrap()
    }

    #[test]
    fn fleet_mode_gives_every_counter_a_second_ring() {
        let settings = Settings { max_services: 1024, max_key_length: 160, max_buckets: 120, fleet: true };
        let layout = Layout::new(settings);
        // 1264 bytes as without fleet mode, a ring of 122 words more and the window's word
        assert_eq!(layout.counters.slot_words() * 8, 1264 + 123 * 8);
        // and the fleet-only region: for each of its three counters, in each of its two halves,
        // two index words and an entry (3 words, the key's 20 and 61 of counts): 4,128 bytes
        assert_eq!(layout.fleet_only.words(), 1 + 2 * (2 + 1024 * 3 * (2 + 3 + 20 + 61)));
        assert_eq!(layout.bytes_per_service(), 10536 + 4128);
    }

    #[test]
    fn the_fleet_ring_adds_to_loads_over_the_same_window() {
        let segment = fleet_segment(4);
        let store = Store::new(&segment);
        let window = window(60, Some(10));
        let now = 1_000_000;
        for _ in 0..3 {
            store.increment(b"k", &window, now).unwrap();
        }
        store.increment(b"k", &window, now - 20).unwrap();
        assert!(store.own_buckets(now, 0).is_empty(), "no window noted: nothing to name the buckets by");
        store.note_fleet_window(b"k", &window).unwrap();
        let own = store.own_buckets(now, 0);
        assert_eq!(own.len(), 1);
        let ring = RING_OF_TESTS;
        let at = |time: u64| ring.position(window.bucket_at(time));
        let start = |time: u64| window.bucket_at(time) * 10;
        assert_eq!(own[0].window, FleetWindow { bucket_duration: 10, window_buckets: 6 });
        assert_eq!(
            (own[0].key.as_slice(), own[0].buckets.clone()),
            (&b"k"[..], vec![(start(now - 20), 1), (start(now), 3)]),
            "named by their start, oldest first"
        );
        let (current, current_lap) = at(now);

        // Another host's 5 events now, 7 events a whole window ago, and some of another lap.
        let mut fleet = vec![None; ring.len() as usize];
        fleet[current] = Some((current_lap, 5));
        let (gone, gone_lap) = at(now - 70);
        fleet[gone] = Some((gone_lap, 7));
        let fleet_window = FleetWindow::of(&window);
        store.write_fleet_buckets(b"k", now, now + 100, fleet_window, &fleet, true).unwrap();
        assert_eq!(store.load_with_fleet(b"k", &window, now).unwrap(), (4, 5));
        assert_eq!(store.load(b"k", &window, now).unwrap(), 4, "a plain load reads this host's alone");
        // 70 s later, the current bucket has left the window: the fleet's with it.
        assert_eq!(store.load_with_fleet(b"k", &window, now + 70).unwrap(), (0, 0));
        // Not published by this host: its export is of its own ring alone.
        assert_eq!(store.own_buckets(now, 0)[0].buckets.len(), 2);

        // A key this host never counted is created by the fleet's counts.
        store.write_fleet_buckets(b"absent", now, now + 100, fleet_window, &fleet, false).unwrap();
        assert_eq!(store.load_with_fleet(b"absent", &window, now).unwrap(), (0, 0), "not created unless asked");
        store.write_fleet_buckets(b"fresh", now, now + 100, fleet_window, &fleet, true).unwrap();
        assert_eq!(store.load_with_fleet(b"fresh", &window, now).unwrap(), (0, 5));
        let fresh = store.own_buckets(now, 0).into_iter().find(|own| own.key == b"fresh");
        assert_eq!(
            fresh.map(|own| own.buckets),
            Some(vec![]),
            "exported for the fleet's counts it holds, which the sidecar follows, with nothing of its own to publish"
        );
    }

    /// A copy of the segment hands its own counts to the fleet rings (`fleet::take_copy`): a load
    /// reads what it read, and the sidecar publishes only what is counted after.
    #[test]
    fn own_counts_handed_to_the_fleet_ring_keep_the_view_and_leave_nothing_to_publish() {
        let segment = fleet_segment(4);
        let store = Store::new(&segment);
        let window = window(60, Some(10));
        let now = 1_000_000;
        for _ in 0..3 {
            store.increment(b"k", &window, now).unwrap();
        }
        store.increment(b"k", &window, now - 20).unwrap();
        // Counted before the clock stepped back 30 s: three buckets ahead of it.
        store.increment(b"k", &window, now + 30).unwrap();
        store.increment(b"uncounted", &window, now).unwrap();
        store.note_fleet_window(b"k", &window).unwrap();
        let ring = RING_OF_TESTS;
        let (current, lap) = ring.position(window.bucket_at(now));
        let mut fleet = vec![None; ring.len() as usize];
        fleet[current] = Some((lap, 5));
        store.write_fleet_buckets(b"k", now, now + 100, FleetWindow::of(&window), &fleet, true).unwrap();
        assert_eq!(store.load_with_fleet(b"k", &window, now).unwrap(), (4, 5));
        assert_eq!(store.load_with_fleet(b"k", &window, now + 30).unwrap(), (5, 5), "with the bucket ahead");

        store.hand_own_counts_to_fleet(now, 60);
        assert_eq!(store.load_with_fleet(b"k", &window, now).unwrap(), (0, 9), "the same view, all the fleet's");
        assert_eq!(store.load_with_fleet(b"k", &window, now + 30).unwrap(), (0, 10), "the bucket ahead too");
        assert_eq!(store.load(b"uncounted", &window, now).unwrap(), 1, "no window noted: not fleet mode's");
        let own = store.own_buckets(now, 60);
        assert_eq!(own.iter().map(|own| (own.key.clone(), own.buckets.clone())).collect::<Vec<_>>(), vec![(b"k".to_vec(), vec![])]);
        store.increment(b"k", &window, now).unwrap();
        assert_eq!(store.load_with_fleet(b"k", &window, now).unwrap(), (1, 9));
        assert_eq!(store.own_buckets(now, 60)[0].buckets, vec![(window.bucket_at(now) * 10, 1)], "what it counts after");
    }

    /// A bucket counted before the clock stepped back further than the ring has room for ahead
    /// of a window (one that fills the ring has none) is handed over with the rest: the copy
    /// never publishes it as its own when its clock reaches it.
    #[test]
    fn a_copy_hands_over_the_buckets_its_ring_holds_past_the_export() {
        let segment = fleet_segment(4);
        let store = Store::new(&segment);
        let window = window(MAX_BUCKETS as i64 * 10, Some(10));
        let now = 1_000_000;
        store.increment(b"k", &window, now).unwrap();
        // Counted before the clock stepped back 30 s: three buckets ahead, past the export.
        store.increment(b"k", &window, now + 30).unwrap();
        store.note_fleet_window(b"k", &window).unwrap();
        assert_eq!(store.own_buckets(now, 60)[0].buckets, vec![(window.bucket_at(now) * 10, 1)]);
        store.hand_own_counts_to_fleet(now, 60);
        for later in [now, now + 30] {
            assert_eq!(store.own_buckets(later, 60)[0].buckets, vec![], "nothing its own at {later}");
        }
    }

    /// A clock stepped back puts the buckets counted before the step in its future: the export
    /// reads them still, up to the reach it is given and no further than the ring holds, so that
    /// what a host counted before a step back is never published short (a bucket counted after
    /// the step may share its stamp in the fleet with one of them).
    #[test]
    fn the_export_reads_the_buckets_a_clock_stepped_back_put_in_its_future() {
        let segment = fleet_segment(4);
        let store = Store::new(&segment);
        let window = window(60, Some(10));
        let now = 1_000_000;
        for _ in 0..3 {
            store.increment(b"k", &window, now).unwrap();
        }
        store.note_fleet_window(b"k", &window).unwrap();
        let start = window.bucket_at(now) * 10;
        // 30 s back: the bucket of `now` is three buckets ahead.
        let stepped = now - 30;
        store.increment(b"k", &window, stepped).unwrap();
        let buckets = |ahead_s: u64| store.own_buckets(stepped, ahead_s)[0].buckets.clone();
        assert_eq!(buckets(0), vec![(window.bucket_at(stepped) * 10, 1)], "the ring range alone");
        assert_eq!(buckets(60), vec![(window.bucket_at(stepped) * 10, 1), (start, 3)]);
        assert_eq!(buckets(10), vec![(window.bucket_at(stepped) * 10, 1)], "beyond the reach given");
        // Never a position read twice: as far ahead as the ring holds, each bucket once.
        let far = store.own_buckets(stepped, u64::MAX / 2)[0].buckets.clone();
        assert_eq!(far, buckets(60));
    }

    #[test]
    fn a_load_reads_the_fleet_only_counts_of_a_key_this_host_has_not_counted_and_the_larger_once_it_did() {
        use crate::fleet_only::FleetOnlyEntry;
        let segment = fleet_segment(4);
        let store = Store::new(&segment);
        let (window, other) = (window(60, Some(10)), window(60, Some(5)));
        let now = 1_000_000;
        let current = window.bucket_at(now);
        let region = store.fleet_only().expect("fleet mode has a fleet-only region");
        let entry = |counts: Vec<u64>| FleetOnlyEntry {
            key: b"k".to_vec(),
            bucket_duration: 10,
            first_bucket: current - 6,
            counts,
        };
        // Another host's 2 events a window and a bucket ago (out of it), 3 in it, 4 now.
        region.publish(&[entry(vec![2, 3, 0, 0, 0, 0, 4])]);
        assert_eq!(store.load_with_fleet(b"k", &window, now).unwrap(), (0, 7));
        assert_eq!(store.counter_holders(b"k"), 0, "the region takes no slot");
        assert_eq!(store.load_with_fleet(b"k", &other, now).unwrap(), (0, 0), "buckets of another duration");

        // This host counts it: its ring, once the sidecar wrote it, and the region are the same
        // hosts' counts at two syncs: the larger, never the sum.
        store.increment(b"k", &window, now).unwrap();
        assert_eq!(store.load_with_fleet(b"k", &window, now).unwrap(), (1, 7));
        let mut ring = vec![None; store.ring_len()];
        ring[RING_OF_TESTS.position(current).0] = Some((RING_OF_TESTS.position(current).1, 9));
        store.write_fleet_buckets(b"k", now, now + 100, FleetWindow::of(&window), &ring, true).unwrap();
        assert_eq!(store.load_with_fleet(b"k", &window, now).unwrap(), (1, 9));
        region.publish(&[]);
        assert_eq!(store.load_with_fleet(b"k", &window, now).unwrap(), (1, 9));
    }

    #[test]
    fn a_reset_made_here_hides_the_fleets_counts_of_what_it_covers_until_the_sidecar_wrote_them_again() {
        use crate::fleet_only::FleetOnlyEntry;
        use crate::reset_log::NotedReset;
        let segment = fleet_segment(4);
        let store = Store::new(&segment);
        let window = window(60, Some(10));
        let now = 1_000_000;
        let current = window.bucket_at(now);
        let region = store.fleet_only().expect("fleet mode has a fleet-only region");
        let entry = |key: &[u8]| FleetOnlyEntry { key: key.to_vec(), bucket_duration: 10, first_bucket: current, counts: vec![5] };
        // The other hosts' events of two services this host has not counted, and of one it has.
        region.publish(&[entry(b"svc_failure"), entry(b"other_failure")]);
        store.increment(b"mine_failure", &window, now).unwrap();
        let mut ring = vec![None; store.ring_len()];
        ring[RING_OF_TESTS.position(current).0] = Some((RING_OF_TESTS.position(current).1, 3));
        store.write_fleet_buckets(b"mine_failure", now, now + 100, FleetWindow::of(&window), &ring, true).unwrap();
        assert_eq!(store.load_with_fleet(b"svc_failure", &window, now).unwrap(), (0, 5));
        assert_eq!(store.load_with_fleet(b"mine_failure", &window, now).unwrap(), (1, 3));

        // resetService("svc"): the fleet's events of it from before the reset are not read
        // until the sidecar shared the reset and wrote the fleet's counts again.
        let log = store.reset_log().unwrap();
        assert!(log.note(&NotedReset { time_ms: now * 1000, monotonic_ms: now * 1000, key: b"svc".to_vec(), every: false }));
        assert_eq!(store.load_with_fleet(b"svc_failure", &window, now).unwrap(), (0, 0));
        assert_eq!(store.load_with_fleet(b"other_failure", &window, now).unwrap(), (0, 5), "another service");
        // reset(): every service under the prefix, those counted here too (the sidecar may
        // write the ring again before it shares the reset).
        assert!(log.note(&NotedReset { time_ms: now * 1000, monotonic_ms: now * 1000, key: b"m".to_vec(), every: true }));
        assert_eq!(store.load_with_fleet(b"mine_failure", &window, now).unwrap(), (1, 0));

        // The sidecar's sync that shared them: what it writes counts again.
        segment.fleet_resets_taken().store(log.tickets(), Ordering::Release);
        assert_eq!(store.load_with_fleet(b"svc_failure", &window, now).unwrap(), (0, 5));
        assert_eq!(store.load_with_fleet(b"mine_failure", &window, now).unwrap(), (1, 3));
    }

    #[test]
    fn a_reset_is_counted_in_the_window_word_and_exported_with_no_buckets() {
        let segment = fleet_segment(4);
        let store = Store::new(&segment);
        let (window, longer) = (window(60, Some(10)), window(120, Some(10)));
        let now = 1_000_000;
        store.increment(b"k", &window, now).unwrap();
        store.note_fleet_window(b"k", &window).unwrap();
        assert_eq!(store.own_buckets(now, 0)[0].resets, 0);

        store.clear(TableKind::Counters, b"k").unwrap();
        let own = store.own_buckets(now, 0);
        assert_eq!(own.len(), 1, "a counter reset is exported, to say so");
        assert_eq!((own[0].resets, own[0].buckets.len()), (1, 0));
        assert_eq!(own[0].window, FleetWindow::of(&window), "the window stays");
        assert_eq!(store.load(b"k", &window, now).unwrap(), 0);

        // Counting again, and a window noted again (another one, a deploy), keep the resets.
        store.increment(b"k", &window, now).unwrap();
        store.note_fleet_window(b"k", &longer).unwrap();
        let own = store.own_buckets(now, 0);
        assert_eq!((own[0].resets, own[0].window), (1, FleetWindow::of(&longer)));
        store.clear(TableKind::Counters, b"k").unwrap();
        assert_eq!(store.own_buckets(now, 0)[0].resets, 2);

        // A counter never noted (no window) is cleared to nothing, as without fleet mode.
        store.increment(b"plain", &window, now).unwrap();
        store.clear(TableKind::Counters, b"plain").unwrap();
        assert!(store.own_buckets(now, 0).iter().all(|own| own.key != b"plain"));
    }

    #[test]
    fn a_fleet_reset_takes_what_came_before_it_and_nothing_since() {
        let segment = fleet_segment(4);
        let store = Store::new(&segment);
        let window = window(60, Some(10));
        let now = 1_000_000; // a bucket's start: buckets of 10 s start at now - 20, now - 10, now
        for (time, events) in [(now - 20, 2), (now - 10, 3), (now + 1, 4)] {
            for _ in 0..events {
                store.increment(b"k", &window, time).unwrap();
            }
        }
        store.note_fleet_window(b"k", &window).unwrap();
        store.save_last_failure_time(b"k", (now - 5) as i64, 3_600, now).unwrap();
        store.save_status(b"s", STATUS_TRIPPED, now - 5).unwrap();

        // A reset at now - 10: the buckets that start at or before it go (the one it fell in
        // too), the last failure time and the status saved after it stay.
        assert!(store.clear_through(TableKind::Counters, b"k", now - 10, now + 1).unwrap());
        assert_eq!(store.bucket_counts(b"k", &window, now + 1).unwrap().iter().map(|b| b.1).sum::<u64>(), 4);
        assert_eq!(store.peek_last_failure_time(b"k", now).unwrap(), Some((now - 5) as i64));
        assert!(!store.clear_through(TableKind::Statuses, b"s", now - 10, now).unwrap());
        assert_eq!(store.load_status(b"s", now).unwrap(), Some(STATUS_TRIPPED));
        let own = store.own_buckets(now + 1, 0);
        assert_eq!((own[0].resets, own[0].buckets.clone()), (0, vec![(now, 4)]), "no reset counted: not this host's");

        // Taken again: nothing more. A reset at now - 5 takes the failure time and the status too.
        assert!(!store.clear_through(TableKind::Counters, b"k", now - 10, now + 1).unwrap());
        assert!(store.clear_through(TableKind::Counters, b"k", now - 5, now + 1).unwrap());
        assert_eq!(store.peek_last_failure_time(b"k", now).unwrap(), None);
        assert!(store.clear_through(TableKind::Statuses, b"s", now - 5, now).unwrap());
        assert_eq!(store.load_status(b"s", now).unwrap(), None);
        assert_eq!(store.load(b"k", &window, now + 1).unwrap(), 4, "the bucket after it stays");
        // Saved again after the reset: kept.
        store.save_status(b"s", STATUS_TRIPPED, now).unwrap();
        assert!(!store.clear_through(TableKind::Statuses, b"s", now - 5, now).unwrap());
        assert!(!store.clear_through(TableKind::Counters, b"absent", now, now).unwrap());
    }

    #[test]
    fn the_fleets_trial_goes_to_the_host_the_sidecar_granted_it_to() {
        let segment = fleet_segment(4);
        let store = Store::new(&segment);
        let (t0, interval, ttl) = (1_000_000, 5, 600);
        store.save_last_failure_time(b"f", t0 as i64, ttl, t0).unwrap();
        // No trial written by the sidecar: as a host alone.
        assert_eq!(store.claim_fleet_trial(b"f", t0 + 6, interval, ttl).unwrap(), Some(t0 as i64));
        store.save_last_failure_time(b"f", t0 as i64, ttl, t0).unwrap();

        // The fleet failed later than this host: due an interval after it; and then only with a grant.
        store.write_fleet_trial(b"f", t0 + 3, None).unwrap();
        let refused = |now: u64| Some(now as i64 + 1 - interval as i64);
        assert_eq!(store.claim_fleet_trial(b"f", t0 + 6, interval, ttl).unwrap(), Some(t0 as i64 + 3), "not due");
        assert_eq!(store.claim_fleet_trial(b"f", t0 + 9, interval, ttl).unwrap(), refused(t0 + 9), "another host's");
        // The grant of an earlier failure of the fleet, or one that ended, is none.
        store.write_fleet_trial(b"f", t0 + 3, Some(t0 + 8)).unwrap();
        assert_eq!(store.claim_fleet_trial(b"f", t0 + 9, interval, ttl).unwrap(), refused(t0 + 9), "ended");
        store.save_last_failure_time(b"f", t0 as i64 + 4, ttl, t0 + 4).unwrap();
        store.write_fleet_trial(b"f", t0 + 3, Some(t0 + 20)).unwrap();
        assert_eq!(
            store.claim_fleet_trial(b"f", t0 + 10, interval, ttl).unwrap(),
            refused(t0 + 10),
            "a later failure here"
        );
        // Granted: claimed once, as on a host alone.
        store.write_fleet_trial(b"f", t0 + 4, Some(t0 + 20)).unwrap();
        assert_eq!(store.claim_fleet_trial(b"f", t0 + 10, interval, ttl).unwrap(), Some(t0 as i64 + 4));
        assert_eq!(store.claim_fleet_trial(b"f", t0 + 10, interval, ttl).unwrap(), Some(t0 as i64 + 10), "claimed");
        assert_eq!(store.totals(TableKind::Counters, b"f").unwrap().unwrap().others, 2, "two trials");
        // A clear takes the fleet's trial with the rest.
        store.clear(TableKind::Counters, b"f").unwrap();
        assert!(fleet_trial_of(&store.find(TableKind::Counters, b"f").unwrap().unwrap()).is_none());
    }

    #[test]
    fn without_fleet_mode_the_fleet_is_nothing() {
        let segment = segment(4);
        let store = Store::new(&segment);
        let window = window(60, Some(10));
        store.increment(b"k", &window, 1_000).unwrap();
        let fleet = vec![Some((RING_OF_TESTS.position(window.bucket_at(1_000)).1, 9)); RING_OF_TESTS.len() as usize];
        store.write_fleet_buckets(b"k", 1_000, 1_100, FleetWindow::of(&window), &fleet, true).unwrap();
        assert_eq!(store.load_with_fleet(b"k", &window, 1_000).unwrap(), (1, 0));
    }

    /// Whoever can write the segment file may leave a word of another claim's generation among a
    /// live slot's fleet words. The next writes take the words back: kept, they refused every
    /// write for as long as the slot lived, so the fleet's counts of a service counted without a
    /// pause stayed wrong for ever, and this host's were no longer exported.
    #[test]
    fn fleet_words_written_over_under_another_generation_are_written_again() {
        let segment = fleet_segment(4);
        let store = Store::new(&segment);
        let window = window(60, Some(10));
        let now = 1_000_000;
        store.increment(b"k", &window, now).unwrap();
        store.note_fleet_window(b"k", &window).unwrap();
        let (position, lap) = RING_OF_TESTS.position(window.bucket_at(now));
        let mut fleet = vec![None; RING_OF_TESTS.len() as usize];
        fleet[position] = Some((lap, 5));
        let entry = store.find(TableKind::Counters, b"k").unwrap().unwrap();
        let written_over = |at: usize| {
            entry.payload()[at].fetch_xor(1 << 48, Ordering::Relaxed);
        };

        written_over(store.fleet_ring.unwrap() + position);
        store.write_fleet_buckets(b"k", now, now + 100, FleetWindow::of(&window), &fleet, true).unwrap();
        assert_eq!(store.load_with_fleet(b"k", &window, now).unwrap(), (1, 5));

        written_over(store.fleet_window_at().unwrap());
        assert_eq!(store.fleet_window(b"k").unwrap(), None);
        assert!(store.own_buckets(now, 0).is_empty(), "no window to name the buckets by");
        store.note_fleet_window(b"k", &window).unwrap();
        assert_eq!(store.fleet_window(b"k").unwrap(), Some(FleetWindow::of(&window)));
        assert_eq!(store.own_buckets(now, 0)[0].buckets, vec![(window.bucket_at(now) * 10, 1)]);
    }

    #[test]
    fn a_recycled_slot_starts_with_an_empty_fleet_ring() {
        let segment = fleet_segment(1);
        let store = Store::new(&segment);
        let window = window(10, Some(1));
        let (now, later) = (5_000, 5_100);
        // Counts of the bucket the new keys count in, 100 s later (a fleet ring holds any lap).
        let (position, lap) = RING_OF_TESTS.position(window.bucket_at(later));
        let mut fleet = vec![None; RING_OF_TESTS.len() as usize];
        fleet[position] = Some((lap, 9));
        // Three keys at the capacity of 3, in 3 of the 5 slots, then expired: three new keys
        // take at least one of their slots over.
        for key in [&b"o1"[..], b"o2", b"o3"] {
            store.write_fleet_buckets(key, now, now + 11, FleetWindow::of(&window), &fleet, true).unwrap();
            assert_eq!(store.load_with_fleet(key, &window, later).unwrap(), (0, 9));
        }
        for key in [&b"a"[..], b"b", b"c"] {
            store.increment(key, &window, later).unwrap();
        }
        for key in [&b"a"[..], b"b", b"c"] {
            assert_eq!(store.load_with_fleet(key, &window, later).unwrap(), (1, 0), "{key:?}");
        }
    }

    /// Goal 7 of issue 11: at most 4 KB a service, with the headroom, for windows of 60 buckets.
    #[test]
    fn layout_for_windows_of_sixty_buckets() {
        let layout = Layout::new(Settings { max_services: 1024, max_key_length: 160, max_buckets: 60, fleet: false });
        // header 4 + last failure 2 + count 1 + totals 2 + ring 62 + key 27 words
        assert_eq!(layout.counters.slot_words() * 8, 784);
        assert_eq!(layout.bytes_per_service(), (4608 * 784 + 1536 * 280) / 1024);
        assert_eq!(layout.bytes_per_service(), 3948);
        assert!(layout.bytes_per_service() <= 4096);
    }

    #[test]
    fn layout_of_the_default_settings() {
        let layout = Layout::new(Settings { max_services: 1024, max_key_length: 160, max_buckets: 120, fleet: false });
        // half as many slots again as the capacity
        assert_eq!((layout.counters.capacity, layout.counters.slots), (3072, 4608));
        assert_eq!((layout.statuses.capacity, layout.statuses.slots), (1024, 1536));
        // header 4 + last failure 2 + count 1 + totals 2 + ring 122 + key 27 words
        assert_eq!(layout.counters.slot_words() * 8, 1264);
        // header 4 + status 2 + totals 2 + key 27 words
        assert_eq!(layout.statuses.slot_words() * 8, 280);
        assert_eq!(layout.bytes_per_service(), (4608 * 1264 + 1536 * 280) / 1024);
        assert_eq!(layout.bytes_per_service(), 6108);
        // segment header, then each table: its count and cursor, its bitmap, its slots
        assert_eq!(layout.segment_bytes(), 256 + 16 + 576 + 4608 * 1264 + 16 + 192 + 1536 * 280);
        assert_eq!(layout.segment_bytes(), 6_255_648);
    }

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
    fn bucket_counts_are_the_window_oldest_first() {
        let segment = segment(4);
        let store = Store::new(&segment);
        let w = window(4, Some(2)); // buckets of 2 s, 2 in the window
        let bucket = T0 / 2;
        store.increment(b"k", &w, T0).unwrap();
        store.increment(b"k", &w, T0 + 2).unwrap();
        store.increment(b"k", &w, T0 + 3).unwrap();
        assert_eq!(store.bucket_counts(b"k", &w, T0 + 3).unwrap(), [(bucket, 1), (bucket + 1, 2)]);
        assert_eq!(store.bucket_counts(b"k", &w, T0 + 5).unwrap(), [(bucket + 1, 2), (bucket + 2, 0)]);
        assert_eq!(store.bucket_counts(b"missing", &w, T0).unwrap(), [(bucket - 1, 0), (bucket, 0)]);
        let sum: u64 = store.bucket_counts(b"k", &w, T0 + 3).unwrap().iter().map(|(_, count)| count).sum();
        assert_eq!(sum, store.load(b"k", &w, T0 + 3).unwrap());
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
        assert_eq!(store.peek_last_failure_time(b"f", T0).unwrap(), None);
        store.save_last_failure_time(b"f", 1_700_000_000, w.ttl(), T0).unwrap();
        assert_eq!(store.peek_last_failure_time(b"f", T0 + 3).unwrap(), Some(1_700_000_000));
        assert_eq!(store.peek_last_failure_time(b"f", T0 + 4).unwrap(), None);
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
        assert_eq!(store.peek_last_failure_time(b"k", T0).unwrap(), None);
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
        store.save_last_failure_time(b"p_a_failure", 5, w.ttl(), T0).unwrap();
        store.save_status(b"p_a_status", 2, T0).unwrap();
        store.increment(b"other", &w, T0).unwrap();
        assert_eq!(store.remove_matching(|k| k.starts_with(b"p_")), 2);
        assert_eq!(store.load(b"p_a_failure", &w, T0).unwrap(), 0);
        assert_eq!(store.peek_last_failure_time(b"p_a_failure", T0).unwrap(), None);
        assert_eq!(store.load_status(b"p_a_status", T0).unwrap(), None);
        assert_eq!(store.load(b"other", &w, T0).unwrap(), 1);
    }

    #[test]
    fn a_writer_holding_a_recycled_slot_does_not_count_in_it() {
        let segment = segment(1);
        let store = Store::new(&segment);
        let w = window(60, None);
        store.increment(b"old", &w, T0).unwrap();
        let stale = store.counters().find(b"old").unwrap().unwrap();
        store.remove_matching(|k| k == b"old");
        store.increment(b"new", &w, T0).unwrap();
        let word = &stale.payload()[RING + RING_OF_TESTS.index(w.bucket_at(T0))];
        assert!(!update_word(word, &stale, |w| Some(w + 1)), "the stale writer is turned away");
        assert_eq!(store.load(b"new", &w, T0).unwrap(), 1);
    }

    #[test]
    fn the_first_caller_past_the_interval_claims_the_trial_and_the_others_see_it_taken() {
        let segment = segment(1);
        let store = Store::new(&segment);
        let ttl = 100;
        assert_eq!(store.claim_trial(b"f", T0, 5, ttl).unwrap(), None, "no failure, no trial");
        store.save_last_failure_time(b"f", T0 as i64, ttl, T0).unwrap();
        // Not due yet: a time Ganesha does not admit, even if its clock reads one second more.
        assert_eq!(store.claim_trial(b"f", T0 + 5, 5, ttl).unwrap(), Some(T0 as i64 + 1));
        assert_eq!(store.claim_trial(b"f", T0 + 2, 5, ttl).unwrap(), Some(T0 as i64));
        // Due: the winner sees the old time, everyone after it the claimed one.
        assert_eq!(store.claim_trial(b"f", T0 + 6, 5, ttl).unwrap(), Some(T0 as i64));
        assert_eq!(store.claim_trial(b"f", T0 + 6, 5, ttl).unwrap(), Some(T0 as i64 + 6));
        assert_eq!(store.peek_last_failure_time(b"f", T0 + 6).unwrap(), Some(T0 as i64 + 6));
        // The claim restarts the interval and keeps the time as long as a save does.
        assert_eq!(store.claim_trial(b"f", T0 + 12, 5, ttl).unwrap(), Some(T0 as i64 + 6));
        assert_eq!(store.peek_last_failure_time(b"f", T0 + 12 + ttl).unwrap(), Some(T0 as i64 + 12));
    }

    #[test]
    fn racing_callers_claim_exactly_one_trial() {
        let segment = segment(1);
        let store = Store::new(&segment);
        store.save_last_failure_time(b"f", T0 as i64, 100, T0).unwrap();
        let winners = std::sync::atomic::AtomicU64::new(0);
        std::thread::scope(|scope| {
            for _ in 0..8 {
                scope.spawn(|| {
                    let store = Store::new(&segment);
                    for _ in 0..100 {
                        if store.claim_trial(b"f", T0 + 10, 5, 100).unwrap() == Some(T0 as i64) {
                            winners.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        assert_eq!(winners.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn totals_count_increments_and_trials_and_outlive_the_window() {
        let segment = segment(2);
        let store = Store::new(&segment);
        let w = window(2, Some(1));
        for at in [T0, T0, T0 + 1] {
            store.increment(b"f", &w, at).unwrap();
        }
        store.increment_count(b"c", T0).unwrap();
        store.change_count(b"c", T0, false, |count| count.saturating_sub(1)).unwrap();
        store.save_last_failure_time(b"f", T0 as i64, 100, T0).unwrap();
        assert_eq!(store.claim_trial(b"f", T0 + 10, 5, 100).unwrap(), Some(T0 as i64));
        assert_eq!(store.load(b"f", &w, T0 + 10).unwrap(), 0, "the window is empty");
        assert_eq!(store.totals(TableKind::Counters, b"f").unwrap(), Some(Totals { events: 3, others: 1 }));
        assert_eq!(
            store.totals(TableKind::Counters, b"c").unwrap(),
            Some(Totals { events: 1, others: 0 }),
            "a decrement is no increment"
        );
        assert_eq!(store.totals(TableKind::Counters, b"missing").unwrap(), None);
    }

    #[test]
    fn totals_count_the_saves_that_trip_and_calm_down() {
        let segment = segment(2);
        let store = Store::new(&segment);
        let totals = || store.totals(TableKind::Statuses, b"s").unwrap().unwrap();
        for (status, trips, calm_downs) in [
            (STATUS_TRIPPED, 1, 0),
            (STATUS_TRIPPED, 1, 0),
            (STATUS_CALMED_DOWN, 1, 1),
            (STATUS_CALMED_DOWN, 1, 1),
            (STATUS_TRIPPED, 2, 1),
            (STATUS_CALMED_DOWN, 2, 2),
        ] {
            store.save_status(b"s", status, T0).unwrap();
            assert_eq!(totals(), Totals { events: trips, others: calm_downs }, "after saving {status}");
        }
        // A tripped status that expired is no status: the next trip counts.
        store.save_status(b"s", STATUS_TRIPPED, T0).unwrap();
        store.save_status(b"s", STATUS_TRIPPED, T0 + STATUS_TTL + 1).unwrap();
        assert_eq!(totals(), Totals { events: 4, others: 2 });
    }

    #[test]
    fn of_processes_tripping_one_circuit_at_once_one_counts_the_trip() {
        for _ in 0..50 {
            let segment = segment(1);
            std::thread::scope(|scope| {
                for _ in 0..4 {
                    scope.spawn(|| Store::new(&segment).save_status(b"s", STATUS_TRIPPED, T0).unwrap());
                }
            });
            let totals = Store::new(&segment).totals(TableKind::Statuses, b"s").unwrap().unwrap();
            assert_eq!(totals.events, 1);
        }
    }

    /// Finding 3 of issue 21: garbage written into the counter table (its count of slots in
    /// use, its sweep cursor, its occupancy marks and every slot word) by whoever may write the
    /// segment file. The store then takes new keys until as many slots as its capacity hold
    /// unexpired data, and the refusals before it does are bounded: the count is repaired from
    /// the marks at the first refusal, and the sweep clears the marks of free slots within two
    /// laps of the table.
    #[test]
    fn garbage_in_the_table_does_not_leave_the_store_part_full() {
        let segment = segment(64);
        let store = Store::new(&segment);
        let w = window(60, None);
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        for word in segment.region(0) {
            // xorshift64: the same garbage on every run
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            word.store(state, Ordering::Relaxed);
        }
        let layout = Layout::new(segment.layout().settings);
        let (capacity, slots) = (layout.counters.capacity, layout.counters.slots);
        // The count of slots in use (the table's first word) wedged above the capacity: what
        // a garbage count below zero would not do (the table would fill its headroom instead).
        segment.region(0)[0].store((capacity + slots) as u64, Ordering::Relaxed);
        let (mut accepted, mut refused_before_last) = (0, 0);
        let mut refused = 0;
        for i in 0..2 * slots {
            match store.increment(format!("new{i}").as_bytes(), &w, T0) {
                Ok(_) => {
                    accepted += 1;
                    refused_before_last = refused;
                }
                Err(StoreError { error: TableError::Full { .. }, .. }) => refused += 1,
                Err(error) => panic!("{error:?}"),
            }
        }
        let [counters, _] = store.usage(T0);
        assert!(
            counters.live >= capacity,
            "{} slots of {capacity} hold unexpired data after {accepted} new keys",
            counters.live
        );
        assert!(accepted > 0);
        assert!(
            refused_before_last <= 2 * slots.div_ceil(16) + 2,
            "{refused_before_last} refusals before the last new key"
        );
    }

    /// Defect 3 of issue 19: a write renews its slot once per 1/16 of its lifetime, and says
    /// so; `keep` then keeps the other keys' slots, totals and all, without creating any or
    /// reviving their expired data.
    #[test]
    fn renewals_are_reported_and_keep_keeps_slots_but_not_their_data() {
        let segment = segment(1);
        let store = Store::new(&segment);
        let w = window(4, None);
        let created = store.increment(b"s_failure", &w, T0).unwrap();
        assert_eq!(created, Some(T0 + w.ttl()), "a new slot is a renewal");
        assert_eq!(store.increment(b"s_failure", &w, T0).unwrap(), None, "kept long enough already");
        assert_eq!(store.increment(b"s_success", &w, T0).unwrap(), Some(T0 + w.ttl()));
        // Every write of s_success renews it at most once per 2 s (a lifetime of 5 s: 1/16 is
        // less than a second), and each renewal keeps s_failure as long.
        let mut renewals = 0;
        for t in T0 + 1..T0 + 101 {
            if let Some(until) = store.increment(b"s_success", &w, t).unwrap() {
                renewals += 1;
                assert!(until > t + w.ttl() - 1);
                store.keep(&[b"s_failure", b"s_rejection"], &[b"s_status"], t, until);
            }
        }
        assert!((40..=60).contains(&renewals), "{renewals} renewals in 100 s");
        assert_eq!(store.totals(TableKind::Counters, b"s_failure").unwrap(), Some(Totals { events: 2, others: 0 }));
        assert_eq!(store.load(b"s_failure", &w, T0 + 100).unwrap(), 0, "its data expired all the same");
        assert!(store.find(TableKind::Counters, b"s_rejection").unwrap().is_none(), "keep creates nothing");
        assert!(store.find(TableKind::Statuses, b"s_status").unwrap().is_none());
        // Without the keeps, the slot is reclaimed as soon as it expired (the sweep of new keys).
        for i in 0..3u8 {
            store.increment(&[b'n', i], &w, T0 + 200).unwrap();
        }
        assert_eq!(store.totals(TableKind::Counters, b"s_failure").unwrap(), None);
    }

    /// What a clear racing a save can leave: the save's live expiry over the clear's empty
    /// value (the save wrote its value, the clear emptied both words, the save wrote its
    /// expiry). The empty value holds the claim's generation: read as a value, it was a status
    /// that stopped trips and a last failure time that took a trial that was not due.
    #[test]
    fn a_live_expiry_over_an_empty_value_reads_as_absent() {
        let segment = segment(1);
        let store = Store::new(&segment);
        store.save_status(b"s", STATUS_TRIPPED, T0).unwrap();
        store.save_last_failure_time(b"f", T0 as i64, 600, T0).unwrap();
        let empty_value = |kind: TableKind, key: &[u8], index: usize, init: fn(usize, u32) -> u64| {
            let entry = store.find(kind, key).unwrap().unwrap();
            entry.payload()[index].store(init(index, entry.generation()), Ordering::SeqCst);
        };
        empty_value(TableKind::Statuses, b"s", STATUS_VALUE, init_status);
        empty_value(TableKind::Counters, b"f", LAST_FAILURE_VALUE, init_counter);

        assert_eq!(store.load_status(b"s", T0 + 1).unwrap(), None);
        assert_eq!(store.peek_last_failure_time(b"f", T0 + 1).unwrap(), None);
        assert_eq!(store.claim_trial(b"f", T0 + 1_000, 5, 600).unwrap(), None, "no trial on a time never saved");
        assert_eq!(store.totals(TableKind::Counters, b"f").unwrap().unwrap().others, 0);
        store.save_status(b"s", STATUS_TRIPPED, T0 + 1).unwrap();
        assert_eq!(store.totals(TableKind::Statuses, b"s").unwrap().unwrap().events, 2, "a trip over no status");
        assert_eq!(store.load_status(b"s", T0 + 1).unwrap(), Some(STATUS_TRIPPED));
    }

    /// Issue 27, defect 2: a slot kept alongside another's renewal was given a margin of its
    /// own on top of the other's, so it outlived it by up to 1/16 more.
    #[test]
    fn a_slot_kept_alongside_another_is_reusable_when_that_one_is() {
        let segment = segment(1);
        let store = Store::new(&segment);
        let w = window(60, None);
        let counters: [&[u8]; 3] = [b"a_success", b"a_failure", b"a_rejection"];
        for key in counters {
            store.increment(key, &w, T0).unwrap();
        }
        let until = store.save_status(b"a_status", STATUS_TRIPPED, T0).unwrap().expect("a new slot is a renewal");
        assert_eq!(until, T0 + STATUS_TTL);
        store.keep(&counters, &[], T0, until);
        let renewed =
            store.save_status(b"a_status", STATUS_TRIPPED, T0 + 1).unwrap().expect("renewed, with its margin");
        assert_eq!(renewed, T0 + 1 + STATUS_TTL + STATUS_TTL / 16);
        store.keep(&counters, &[], T0 + 1, renewed);
        // The service's three counters fill the table: a fourth key needs one of their slots.
        let refused = store.increment(b"b_failure", &w, renewed).unwrap_err();
        assert!(matches!(refused.error, TableError::Full { .. }), "kept as long as the status: {refused:?}");
        store.increment(b"b_failure", &w, renewed + 1).expect("and not a second longer");
    }

    #[test]
    fn clear_empties_a_key_but_its_totals() {
        let segment = segment(2);
        let store = Store::new(&segment);
        let w = window(60, None);
        store.increment(b"f", &w, T0).unwrap();
        store.save_last_failure_time(b"f", T0 as i64, 100, T0).unwrap();
        store.save_status(b"s", STATUS_TRIPPED, T0).unwrap();
        store.clear(TableKind::Counters, b"f").unwrap();
        store.clear(TableKind::Statuses, b"s").unwrap();
        store.clear(TableKind::Counters, b"missing").unwrap();
        assert_eq!(store.load(b"f", &w, T0).unwrap(), 0);
        assert_eq!(store.peek_last_failure_time(b"f", T0).unwrap(), None);
        assert_eq!(store.load_status(b"s", T0).unwrap(), None);
        assert_eq!(store.totals(TableKind::Counters, b"f").unwrap(), Some(Totals { events: 1, others: 0 }));
        assert_eq!(store.totals(TableKind::Statuses, b"s").unwrap(), Some(Totals { events: 1, others: 0 }));
        store.increment(b"f", &w, T0).unwrap();
        assert_eq!(store.load(b"f", &w, T0).unwrap(), 1, "the key counts again from nothing");
        assert_eq!(store.totals(TableKind::Counters, b"f").unwrap(), Some(Totals { events: 2, others: 0 }));
    }

    #[test]
    fn count_counters_never_go_below_zero_and_expire() {
        let segment = segment(2);
        let store = Store::new(&segment);
        store.change_count(b"missing", T0, false, |c| c.saturating_sub(1)).unwrap();
        assert_eq!(store.usage(T0)[0].live, 0, "decrementing nothing stores nothing");
        for _ in 0..3 {
            store.change_count(b"c", T0, true, |c| c + 1).unwrap();
        }
        assert_eq!(store.load_count(b"c", T0).unwrap(), 3);
        for _ in 0..5 {
            store.change_count(b"c", T0, false, |c| c.saturating_sub(1)).unwrap();
        }
        assert_eq!(store.load_count(b"c", T0).unwrap(), 0);
        store.change_count(b"c", T0, true, |_| 7).unwrap();
        assert_eq!(store.load_count(b"c", T0 + COUNT_TTL).unwrap(), 7);
        assert_eq!(store.load_count(b"c", T0 + COUNT_TTL + 1).unwrap(), 0);
        store.change_count(b"c", T0 + COUNT_TTL + 1, true, |c| c + 1).unwrap();
        assert_eq!(store.load_count(b"c", T0 + COUNT_TTL + 1).unwrap(), 1, "an expired counter restarts from 0");
    }

    #[test]
    fn concurrent_count_changes_are_exact() {
        let segment = segment(1);
        store_count_race(&segment);
    }

    /// Two processes adding 1 and two taking 1 away, 1,000 times each, from 2,000: as many as the
    /// decrements, so that the count never reaches 0 whatever the order (a count stops at 0, so
    /// from 1,000 the decrements ran ahead of the increments lost up to 1,000 of them, and the
    /// count ended anywhere from 1,000 to 2,000), and a lost update shows.
    fn store_count_race(segment: &Segment) {
        let store = Store::new(segment);
        store.change_count(b"c", T0, true, |_| 2_000).unwrap();
        std::thread::scope(|scope| {
            for thread in 0..4 {
                scope.spawn(move || {
                    let store = Store::new(segment);
                    for _ in 0..1_000 {
                        let change = if thread % 2 == 0 { |c: u64| c + 1 } else { |c: u64| c.saturating_sub(1) };
                        store.change_count(b"c", T0, true, change).unwrap();
                    }
                });
            }
        });
        assert_eq!(store.load_count(b"c", T0).unwrap(), 2_000);
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

    /// Defect 4 of issue 11: stamps and Count expiries were clamped to 32 bits.
    #[test]
    fn times_past_2106_keep_live_slots_and_counts() {
        let t = (1u64 << 32) + 1_000;
        let segment = segment(1);
        let store = Store::new(&segment);
        let w = window(60, None);
        for key in [b"a", b"b", b"c"] {
            store.increment(key, &w, t).unwrap();
        }
        assert!(store.increment(b"d", &w, t + 1).is_err(), "a, b and c are live");
        assert_eq!(store.load(b"a", &w, t + 1).unwrap(), 1);
        store.remove_matching(|_| true);
        store.change_count(b"n", t, true, |c| c + 3).unwrap();
        assert_eq!(store.load_count(b"n", t + 1).unwrap(), 3);
    }

    /// Defect 5 of issue 11: the ring was exactly as long as the longest window.
    #[test]
    fn a_writer_one_bucket_ahead_does_not_erase_the_oldest_bucket_of_a_120_bucket_window() {
        let segment = segment(1);
        let store = Store::new(&segment);
        let w = window(120, Some(1));
        store.increment(b"k", &w, T0).unwrap();
        store.increment(b"k", &w, T0 + 119).unwrap();
        store.increment(b"k", &w, T0 + 120).unwrap(); // another process, one bucket ahead
        assert_eq!(store.load(b"k", &w, T0 + 119).unwrap(), 2);
    }

    /// Defect 7 of issue 11: slots were kept about twice their TTL.
    #[test]
    fn a_status_saved_twice_frees_its_slot_soon_after_it_expired() {
        let segment = segment(1);
        let store = Store::new(&segment);
        store.save_status(b"s", 1, T0).unwrap();
        store.save_status(b"s", 2, T0 + 1).unwrap();
        let expired = T0 + 1 + STATUS_TTL;
        store.save_status(b"t", 1, expired + STATUS_TTL / 16 + 1).expect("the slot is reused");
    }

    /// Defect 8 of issue 11: a writer stalled across 256 recycles counted into another key.
    #[test]
    fn a_writer_stalled_across_256_recycles_does_not_count_in_another_key() {
        let tight = Tight::new(1);
        let store = tight.store();
        let w = window(60, None);
        store.increment(b"old", &w, T0).unwrap();
        // the two other counter slots stay taken, so every new key gets the slot of "old"
        store.increment(b"x1", &w, T0).unwrap();
        store.increment(b"x2", &w, T0).unwrap();
        let stale = store.counters().find(b"old").unwrap().unwrap();
        let word = &stale.payload()[RING + RING_OF_TESTS.index(w.bucket_at(T0))];
        let recycled = std::cell::Cell::new(false);
        let wrote = update_word(word, &stale, |current| {
            if !recycled.replace(true) {
                // stalled here while the slot is recycled 256 times
                for round in 0..256 {
                    store.remove_matching(|key| key != b"x1" && key != b"x2");
                    store.increment(if round == 255 { b"new" } else { b"mid" }, &w, T0).unwrap();
                }
            }
            let current = BucketWord(current);
            (current.generation() == BucketWord::generation_of(stale.generation()))
                .then(|| current.incremented(RING_OF_TESTS.lap(w.bucket_at(T0))).0)
        });
        let new = store.counters().find(b"new").unwrap().unwrap();
        assert_eq!(new.generation(), stale.generation() + 256, "the same slot, 256 claims later");
        assert!(!wrote);
        assert_eq!(store.load(b"new", &w, T0).unwrap(), 1);
    }

    /// Defect 9 of issue 11: clocks years apart left keys answering Contended.
    #[test]
    fn processes_years_apart_leave_no_key_stuck() {
        let segment = segment(1);
        let store = Store::new(&segment);
        let w = window(60, None);
        let years = 3 * 365 * 86_400;
        // A process whose clock reads T0 reserves the slot of "svc" and stops; one whose clock
        // is years ahead takes the claim over as timed out and counts an event.
        let stalled = store.counters().hand_reserve(b"svc", T0).unwrap();
        store.increment(b"svc", &w, T0 + years).unwrap();
        // The first resumes: its writes must not reach the slot taken over from it.
        assert!(!store.counters().hand_resume(&stalled, b"svc", T0, T0 + w.ttl()));
        store.increment(b"svc", &w, T0 + years).expect("not contended");
        assert_eq!(store.load(b"svc", &w, T0 + years).unwrap(), 2);
    }

    /// A store over arbitrary table words: whatever a segment file holds past a valid header,
    /// every operation returns, without panicking (a panic would abort the PHP process) and
    /// without reaching outside the mapping.
    mod fuzz {
        use super::*;
        use proptest::collection::vec;
        use proptest::prelude::*;
        use std::fs::OpenOptions;
        use std::os::unix::fs::FileExt;

        use crate::segment::tests::TempDir;

        const HEADER_BYTES: usize = crate::segment::HEADER_BYTES;

        fn settings(max_services: u64) -> Settings {
            Settings { max_services, max_key_length: 160, max_buckets: 120, fleet: false }
        }

        fn header_bytes(words: &[u64]) -> Vec<u8> {
            words.iter().flat_map(|w| w.to_ne_bytes()).collect()
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 150, failure_persistence: None, ..ProptestConfig::default() })]

            #[test]
            fn a_store_over_garbage_tables_never_panics(
                garbage in vec((0u8..4, any::<u64>()), Layout::regions(settings(2)).total_words() - HEADER_BYTES / 8),
                now in 0u64..4_000_000_000,
            ) {
                let dir = TempDir::new();
                let path = dir.file("circuits");
                let keys = [&b"svc.failure"[..], b"", &[0xff; 160]];
                let window = Window::new(60, None, MAX_BUCKETS).unwrap();
                let exercise = |store: &Store<'_>| {
                    for key in keys {
                        let _ = store.increment(key, &window, now);
                        let _ = store.load(key, &window, now);
                        let _ = store.change_count(key, now, true, |count| count.saturating_sub(1));
                        let _ = store.load_count(key, now);
                        let _ = store.save_last_failure_time(key, now as i64, 60, now);
                        let _ = store.claim_trial(key, now, 10, 60);
                        let _ = store.peek_last_failure_time(key, now);
                        let _ = store.save_status(key, 2, now);
                        let _ = store.load_status(key, now);
                    }
                    let _ = store.live_keys(now);
                    let _ = store.usage(now);
                    let _ = store.remove_matching(|key| key.starts_with(b"svc"));
                };
                // real slots first, so that the damage below hits keys the store will look up
                let open = || Segment::open_file(&path, Layout::regions(settings(2)), Layout::regions, 0o600).unwrap();
                exercise(&Store::new(&open()));
                let file = OpenOptions::new().read(true).write(true).open(&path).unwrap();
                let mut bytes = vec![0; garbage.len() * 8];
                file.read_exact_at(&mut bytes, HEADER_BYTES as u64).unwrap();
                let damaged: Vec<u64> = bytes
                    .chunks(8)
                    .zip(&garbage)
                    .map(|(word, &(how, noise))| {
                        let word = u64::from_ne_bytes(word.try_into().unwrap());
                        match how {
                            0 => word,
                            1 => word ^ noise,
                            2 => noise % 300,
                            _ => noise,
                        }
                    })
                    .collect();
                file.write_all_at(&header_bytes(&damaged), HEADER_BYTES as u64).unwrap();

                let open = || Segment::open_file(&path, Layout::regions(settings(2)), Layout::regions, 0o600).unwrap();
                exercise(&Store::new(&open()));
            }
        }
    }
}
