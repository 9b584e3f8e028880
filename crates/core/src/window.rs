//! Bucket arithmetic of the sliding time window, and the encoding of the words that hold it.
//!
//! Pure functions of (configuration, clock): no shared memory, no PHP. A time window of
//! `time_window` seconds is split into `window_buckets` buckets of `bucket_duration` seconds;
//! an event at time `t` is counted in bucket `t / bucket_duration`, and a load at time `now`
//! sums the `window_buckets` buckets ending with the current one.

/// Most buckets a time window can be split into, whatever the store's rings are sized for.
#[cfg(not(loom))]
pub const MAX_BUCKETS: u64 = 120;
/// Small under the model checker, so that a counter slot has few words.
#[cfg(loom)]
pub const MAX_BUCKETS: u64 = 2;

/// The ring of bucket words of every counter of a store whose windows have at most
/// `max_buckets` buckets: two more than that, so that writers up to two buckets ahead of a
/// reader (their clock a little ahead, or they read it a moment later) never overwrite the
/// oldest bucket the reader sums.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ring {
    ring_len: u64,
}

impl Ring {
    pub const fn for_windows_of(max_buckets: u64) -> Self {
        Self { ring_len: max_buckets + 2 }
    }

    /// Bucket words in the ring.
    pub const fn len(&self) -> u64 {
        self.ring_len
    }

    /// The ring position of a bucket: each counter keeps its last `len()` buckets. (The store
    /// takes both from [`Ring::position`] and [`Ring::positions_from`]; tests check them against
    /// these.)
    #[cfg(test)]
    pub fn index(&self, bucket: u64) -> usize {
        (bucket % self.ring_len) as usize
    }

    /// The lap of the ring a bucket is on (see [`BucketWord`]).
    #[cfg(test)]
    pub fn lap(&self, bucket: u64) -> Lap {
        Lap((bucket / self.ring_len) & LAP_MASK)
    }

    /// The ring position and lap of a bucket, from one division.
    pub fn position(&self, bucket: u64) -> (usize, Lap) {
        let laps = bucket / self.ring_len;
        ((bucket - laps * self.ring_len) as usize, Lap(laps & LAP_MASK))
    }

    /// The ring positions and laps of `first` and the buckets after it, in order: one division
    /// for the first, then a step each, so that a load summing a window does not divide once
    /// per bucket (the ring length is a setting, not a constant the compiler divides by).
    pub fn positions_from(&self, first: u64) -> impl Iterator<Item = (usize, Lap)> {
        let ring_len = self.ring_len as usize;
        let (mut index, Lap(mut lap)) = self.position(first);
        std::iter::from_fn(move || {
            let position = (index, Lap(lap));
            index += 1;
            if index == ring_len {
                index = 0;
                lap = (lap + 1) & LAP_MASK;
            }
            Some(position)
        })
    }
}

/// Which lap of its ring a bucket is on: with the ring position it identifies the bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lap(u64);

impl Lap {
    /// The lap numbered `lap`, modulo 2^20 (as the fleet sidecar reads it from another host).
    pub fn new(lap: u64) -> Self {
        Self(lap & LAP_MASK)
    }

    pub fn number(self) -> u64 {
        self.0
    }

    /// Whether this lap is after `other`, as serial numbers (RFC 1982) of 20 bits: laps of the
    /// same ring position on hosts whose clocks differ by less than 2^19 laps compare right.
    pub fn is_after(self, other: Lap) -> bool {
        let ahead = self.0.wrapping_sub(other.0) & LAP_MASK;
        ahead != 0 && ahead < 1 << (LAP_BITS - 1)
    }
}

/// Buckets a time window is split into when no bucket duration is given.
pub const DEFAULT_BUCKETS: u64 = 60;

/// Seconds a status is kept after it was saved.
pub const STATUS_TTL: u64 = 86_400;

/// Seconds a Count-strategy counter, and its last failure time, are kept after their last write.
pub const COUNT_TTL: u64 = 86_400;

/// Why a bucket duration does not fit a time window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WindowError {
    /// The constructor was given a bucket duration below one second.
    BucketDurationNotPositive(i64),
    /// Ganesha's time window is below one second.
    TimeWindowNotPositive(i64),
    /// The bucket duration is longer than the time window.
    BucketLongerThanWindow { bucket_duration: u64, time_window: u64 },
    /// The bucket duration splits the time window into more buckets than the store's rings
    /// hold (`max_buckets`, at most [`MAX_BUCKETS`]).
    TooManyBuckets { bucket_duration: u64, time_window: u64, window_buckets: u64, max_buckets: u64 },
}

impl std::fmt::Display for WindowError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Self::BucketDurationNotPositive(d) => {
                write!(f, "The bucket duration must be a positive number of seconds, {d} given.")
            }
            Self::TimeWindowNotPositive(w) => {
                write!(f, "The time window must be a positive number of seconds, {w} given.")
            }
            Self::BucketLongerThanWindow { bucket_duration, time_window } => write!(
                f,
                "The bucket duration ({bucket_duration} s) must not exceed the time window ({time_window} s)."
            ),
            Self::TooManyBuckets { bucket_duration, time_window, window_buckets, max_buckets } => write!(
                f,
                "A bucket duration of {bucket_duration} s splits the time window ({time_window} s) \
                 into {window_buckets} buckets, the maximum is {max_buckets} (ganesha_shm.max_buckets, \
                 at most {MAX_BUCKETS})."
            ),
        }
    }
}

/// Checks a bucket duration given to the adapter's constructor (`None`: the default).
pub fn check_bucket_duration(bucket_duration: Option<i64>) -> Result<Option<u64>, WindowError> {
    match bucket_duration {
        None => Ok(None),
        Some(d) if d >= 1 => Ok(Some(d as u64)),
        Some(d) => Err(WindowError::BucketDurationNotPositive(d)),
    }
}

/// A validated split of a time window into buckets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    bucket_duration: u64,
    window_buckets: u64,
}

impl Window {
    /// Splits `time_window` seconds into buckets of `bucket_duration` seconds, or of
    /// ceil(time_window / 60) seconds when none is given, into at most `max_buckets` buckets
    /// (what the store's rings hold).
    pub fn new(time_window: i64, bucket_duration: Option<u64>, max_buckets: u64) -> Result<Self, WindowError> {
        if time_window < 1 {
            return Err(WindowError::TimeWindowNotPositive(time_window));
        }
        let time_window = time_window as u64;
        let bucket_duration = bucket_duration.unwrap_or_else(|| time_window.div_ceil(DEFAULT_BUCKETS));
        if bucket_duration > time_window {
            return Err(WindowError::BucketLongerThanWindow { bucket_duration, time_window });
        }
        let window_buckets = time_window.div_ceil(bucket_duration);
        if window_buckets > max_buckets.min(MAX_BUCKETS) {
            return Err(WindowError::TooManyBuckets { bucket_duration, time_window, window_buckets, max_buckets });
        }
        Ok(Self { bucket_duration, window_buckets })
    }

    pub fn bucket_duration(&self) -> u64 {
        self.bucket_duration
    }

    pub fn window_buckets(&self) -> u64 {
        self.window_buckets
    }

    /// The bucket an event at `now` is counted in.
    pub fn bucket_at(&self, now: u64) -> u64 {
        now / self.bucket_duration
    }

    /// The buckets a load at `now` sums: the current one and the ones before it in the
    /// window (fewer right after the epoch, when there are no earlier buckets).
    pub fn buckets_at(&self, now: u64) -> std::ops::RangeInclusive<u64> {
        let current = self.bucket_at(now);
        let oldest = current.saturating_sub(self.window_buckets - 1);
        oldest..=current
    }

    /// Seconds data written now must be kept: until the bucket it was written in has left the
    /// time window, as the APCu adapter's TTL of (buckets + 1) × bucket duration.
    pub fn ttl(&self) -> u64 {
        (self.window_buckets + 1).saturating_mul(self.bucket_duration)
    }
}

/// One bucket of a counter's ring, as one 64-bit word, so that an increment is one
/// compare-and-swap: `[generation: 16][lap: 20][count: 28]`.
///
/// * `generation` is the low 16 bits of the generation of the claim the word belongs to: a
///   writer that looked the slot up before it was recycled for another key holds a word of the
///   old generation, and its compare-and-swap fails.
/// * `lap` is `bucket / ring length` (mod 2^20, see [`Ring::lap`]): with the ring position it
///   identifies the bucket, so a word left from an older lap of the ring is not counted. It
///   repeats only after 2^20 × ring length buckets: with the shortest ring (3 words), a month of
///   one-second buckets; with the longest (122), four years.
/// * A claim sets the word to [`BucketWord::empty`]: no events, under a lap made of the rest of
///   the claim's generation, so that an empty word is unique to its claim and a writer stalled
///   since it read an empty word of an earlier claim fails its compare-and-swap.
/// * `count` saturates at 2^28 - 1 (268 million events in one bucket) instead of wrapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BucketWord(pub u64);

const LAP_BITS: u32 = 20;
const LAP_MASK: u64 = (1 << LAP_BITS) - 1;
const COUNT_BITS: u32 = 28;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;

/// The low byte of a claim's generation, which the Count and timed words carry in their top byte.
pub fn generation_byte(generation: u32) -> u8 {
    generation as u8
}

impl BucketWord {
    /// The word the claim of `generation` starts with: no events.
    pub fn empty(generation: u32) -> Self {
        Self((Self::generation_of(generation) as u64) << 48 | (generation as u64 >> 16 & LAP_MASK) << COUNT_BITS)
    }

    /// What a bucket word of the claim of `generation` carries of it.
    pub fn generation_of(generation: u32) -> u16 {
        generation as u16
    }

    pub fn generation(self) -> u16 {
        (self.0 >> 48) as u16
    }

    pub fn count(self) -> u64 {
        self.0 & COUNT_MASK
    }

    /// The lap of the bucket this word counts (for an empty word, a value unique to its claim).
    pub fn lap(self) -> Lap {
        Lap((self.0 >> COUNT_BITS) & LAP_MASK)
    }

    /// The word of the claim whose words carry `generation` (see [`BucketWord::generation_of`])
    /// holding `count` events (saturated) of the bucket on `lap`.
    pub fn holding(generation: u16, lap: Lap, count: u64) -> Self {
        Self((generation as u64) << 48 | lap.0 << COUNT_BITS | count.min(COUNT_MASK))
    }

    /// Whether this word holds events of the bucket on `lap` (the ring position is the caller's).
    pub fn holds(self, lap: Lap) -> bool {
        (self.0 >> COUNT_BITS) & LAP_MASK == lap.0
    }

    /// The count this word adds to a load of the bucket on `lap`.
    pub fn count_in(self, lap: Lap) -> u64 {
        if self.holds(lap) {
            self.count()
        } else {
            0
        }
    }

    /// The word after one more event in the bucket on `lap`: one more if the word already
    /// holds that bucket, else a fresh count of one replacing the old lap's.
    pub fn incremented(self, lap: Lap) -> Self {
        let generation = (self.generation() as u64) << 48;
        let count = if self.holds(lap) { (self.count() + 1).min(COUNT_MASK) } else { 1 };
        Self(generation | lap.0 << COUNT_BITS | count)
    }
}

/// A Count-strategy counter with its expiry, as one word, so that every change is one
/// compare-and-swap that sees whether the counter is still there:
/// `[generation: 8][count: 24][expiry: 32]`. An expired counter counts from zero again.
///
/// The expiry is kept modulo 2^32 seconds and compared as a serial number (RFC 1982): the
/// counter is alive while `now` is at most 2^31 s (68 years) before its expiry, so it stays right
/// past 2106; only a counter left unwritten for 68 years in a slot kept alive by other data
/// could read as alive again. A claim sets the word to [`CountWord::empty`]: count 0 under an
/// expiry field made of the claim's generation, unique to the claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CountWord(pub u64);

impl CountWord {
    pub const MAX: u64 = (1 << 24) - 1;

    /// The word the claim of `generation` starts with: no count.
    pub fn empty(generation: u32) -> Self {
        Self((generation_byte(generation) as u64) << 56 | generation as u64)
    }

    pub fn generation(self) -> u8 {
        (self.0 >> 56) as u8
    }

    /// The count at `now`: 0 once expired.
    pub fn count_at(self, now: u64) -> u64 {
        let count = (self.0 >> 32) & Self::MAX;
        let until_expiry = (self.0 as u32).wrapping_sub(now as u32);
        if count > 0 && (until_expiry as i32) >= 0 {
            count
        } else {
            0
        }
    }

    /// The same counter holding `count` (saturated), kept until `expires_at`.
    pub fn with_count(self, count: u64, expires_at: u64) -> Self {
        let generation = (self.generation() as u64) << 56;
        Self(generation | count.min(Self::MAX) << 32 | expires_at as u32 as u64)
    }
}

/// A value with an expiry, as two words of a slot: `[generation: 8][value: 56, signed]` and
/// `[generation: 8][expires_at: 56]` (seconds since the epoch, at most 2^55 - 1; 0, or a word
/// with bit 55 set, = absent). A claim, and a clear, set them to [`timed::empty_value`] and
/// [`timed::empty_expiry`]: absent, with the claim's generation in the spare bits, so that they
/// are unique to the claim.
///
/// The two words are written value first and read expiry first, each with its own
/// compare-and-swap: a reader can see a new value with the previous expiry, never a new expiry
/// with the previous value. A clear empties the expiry first. Since a save and a clear racing
/// can still leave a live expiry over an emptied value, the empty value is one no save writes
/// (the lowest 2^32 values of the 56 bits, below [`timed::MIN_VALUE`]), and a reader takes a
/// value that was not written for absent, whatever the expiry says.
pub mod timed {
    pub const VALUE_BITS: u32 = 56;
    const PAYLOAD_MASK: u64 = (1 << VALUE_BITS) - 1;
    /// The lowest value a save may write: the 2^32 below it are the empty values of claims.
    pub const MIN_VALUE: i64 = -(1 << (VALUE_BITS - 1)) + (1 << 32);
    pub const MAX_VALUE: i64 = (1 << (VALUE_BITS - 1)) - 1;

    pub fn generation(word: u64) -> u8 {
        (word >> 56) as u8
    }

    pub fn encode_value(generation: u8, value: i64) -> u64 {
        debug_assert!((MIN_VALUE..=MAX_VALUE).contains(&value));
        (generation as u64) << 56 | (value as u64 & PAYLOAD_MASK)
    }

    pub fn decode_value(word: u64) -> i64 {
        // Sign-extend the 56-bit payload.
        ((word << 8) as i64) >> 8
    }

    /// Bit of an expiry word that marks it absent.
    const ABSENT: u64 = 1 << 55;

    /// Bit of a value word's payload that, with none of bits 32 to 54, marks it empty: the
    /// 56-bit values from -2^55 to -2^55 + 2^32 - 1, below [`MIN_VALUE`].
    const EMPTY_VALUE: u64 = 1 << (VALUE_BITS - 1);

    pub fn empty_value(generation: u32) -> u64 {
        (super::generation_byte(generation) as u64) << 56 | EMPTY_VALUE | generation as u64
    }

    /// Whether value word `word` holds a value a save wrote, not a claim's or a clear's empty
    /// value.
    pub fn is_written(word: u64) -> bool {
        (word & PAYLOAD_MASK) >> 32 != EMPTY_VALUE >> 32
    }

    pub fn empty_expiry(generation: u32) -> u64 {
        (super::generation_byte(generation) as u64) << 56 | ABSENT | generation as u64
    }

    pub fn encode_expiry(generation: u8, expires_at: u64) -> u64 {
        (generation as u64) << 56 | expires_at.min(ABSENT - 1)
    }

    pub fn decode_expiry(word: u64) -> u64 {
        if word & ABSENT != 0 {
            0
        } else {
            word & PAYLOAD_MASK
        }
    }

    /// Whether a value that expires at `expires_at` is still there at `now` (the APCu rule:
    /// an entry lives while `now - saved_at <= ttl`).
    pub fn alive(expires_at: u64, now: u64) -> bool {
        expires_at != 0 && now <= expires_at
    }
}

/// A total since a slot was claimed (a key's events, trials, trips, calm-downs): one word
/// `[generation 24 | count 40]`, the claim's 24 low generation bits, so that the word a claim
/// starts with is unique to it (see `BucketWord::empty`) and a writer holding a recycled slot
/// fails its compare-and-swap. A count stops at 2^40 - 1, a trillion events.
pub mod total {
    const COUNT_BITS: u32 = 40;
    const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;
    const GENERATION_MASK: u32 = (1 << (64 - COUNT_BITS)) - 1;

    /// The word the claim of `generation` starts with: a count of 0.
    pub fn empty(generation: u32) -> u64 {
        ((generation & GENERATION_MASK) as u64) << COUNT_BITS
    }

    /// Whether `word` belongs to the claim of `generation`.
    pub fn belongs(word: u64, generation: u32) -> bool {
        word >> COUNT_BITS == empty(generation) >> COUNT_BITS
    }

    pub fn count(word: u64) -> u64 {
        word & COUNT_MASK
    }

    /// `word` with one more, or unchanged at the most a count holds.
    pub fn incremented(word: u64) -> u64 {
        if count(word) == COUNT_MASK {
            word
        } else {
            word + 1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_count_under_their_claim_and_stop_at_their_most() {
        let word = total::empty(0x0123_4567);
        assert_eq!(total::count(word), 0);
        assert!(total::belongs(word, 0x0123_4567));
        assert!(!total::belongs(word, 0x0123_4568), "another claim");
        assert!(!total::belongs(word, 0x0124_4567), "the generation's bits 16 to 23 are in the word too");
        let word = total::incremented(total::incremented(word));
        assert_eq!((total::count(word), total::belongs(word, 0x0123_4567)), (2, true));
        let most = total::empty(7) | ((1 << 40) - 1);
        assert_eq!(total::incremented(most), most);
    }

    fn window(time_window: i64, bucket_duration: Option<u64>) -> Window {
        Window::new(time_window, bucket_duration, MAX_BUCKETS).unwrap()
    }

    #[test]
    fn default_bucket_duration_splits_into_sixty_or_one_second_buckets() {
        assert_eq!((window(30, None).bucket_duration(), window(30, None).window_buckets()), (1, 30));
        assert_eq!((window(61, None).bucket_duration(), window(61, None).window_buckets()), (2, 31));
        assert_eq!((window(600, None).bucket_duration(), window(600, None).window_buckets()), (10, 60));
        assert_eq!((window(1, None).bucket_duration(), window(1, None).window_buckets()), (1, 1));
    }

    #[test]
    fn explicit_bucket_durations_that_fit() {
        assert_eq!(window(120, Some(1)).window_buckets(), 120);
        assert_eq!(window(10, Some(3)).window_buckets(), 4);
        assert_eq!(window(600, Some(600)).window_buckets(), 1);
    }

    #[test]
    fn bucket_durations_that_do_not_fit_are_refused_with_the_numbers() {
        let longer = Window::new(10, Some(20), MAX_BUCKETS).unwrap_err();
        assert_eq!(longer, WindowError::BucketLongerThanWindow { bucket_duration: 20, time_window: 10 });
        assert!(longer.to_string().contains("(20 s)") && longer.to_string().contains("(10 s)"));
        let many = Window::new(241, Some(2), MAX_BUCKETS).unwrap_err();
        let too_many = |window_buckets, max_buckets| WindowError::TooManyBuckets {
            bucket_duration: 2,
            time_window: 241,
            window_buckets,
            max_buckets,
        };
        assert_eq!(many, too_many(121, 120));
        assert!(many.to_string().contains("121 buckets, the maximum is 120 (ganesha_shm.max_buckets, at most 120)"));
        assert!(matches!(Window::new(600, Some(1), MAX_BUCKETS), Err(WindowError::TooManyBuckets { .. })));
        assert_eq!(Window::new(0, None, MAX_BUCKETS), Err(WindowError::TimeWindowNotPositive(0)));
        assert_eq!(check_bucket_duration(Some(0)), Err(WindowError::BucketDurationNotPositive(0)));
        assert_eq!(check_bucket_duration(Some(5)), Ok(Some(5)));
    }

    #[test]
    fn absurd_windows_stay_in_range() {
        let huge = window(1_000_000_000, None);
        assert_eq!(huge.bucket_duration(), 16_666_667);
        assert_eq!(huge.window_buckets(), 60);
        assert_eq!(huge.buckets_at(1_800_000_000).collect::<Vec<_>>(), (48..=107).collect::<Vec<_>>());
        let largest = window(i64::MAX, None);
        assert_eq!(largest.bucket_at(1_800_000_000), 0);
        assert_eq!(largest.buckets_at(1_800_000_000).collect::<Vec<_>>(), vec![0]);
        assert_eq!(largest.ttl(), 61 * largest.bucket_duration());
    }

    #[test]
    fn a_load_sums_the_current_bucket_and_the_ones_before_it_in_the_window() {
        let w = window(60, Some(10));
        assert_eq!(w.buckets_at(1_000).collect::<Vec<_>>(), vec![95, 96, 97, 98, 99, 100]);
        assert_eq!(w.buckets_at(1_009).collect::<Vec<_>>(), vec![95, 96, 97, 98, 99, 100]);
        assert_eq!(w.buckets_at(1_010).collect::<Vec<_>>(), vec![96, 97, 98, 99, 100, 101]);
        assert_eq!(w.buckets_at(25).collect::<Vec<_>>(), vec![0, 1, 2]);
        assert_eq!(w.ttl(), 70);
    }

    #[test]
    fn buckets_of_one_window_never_share_a_ring_position() {
        for max_buckets in [1, 7, 60, MAX_BUCKETS] {
            let ring = Ring::for_windows_of(max_buckets);
            assert!(ring.len() > max_buckets, "the ring is longer than the longest window");
            let w = Window::new(max_buckets as i64, Some(1), max_buckets).unwrap();
            let mut seen = std::collections::HashSet::new();
            assert!(w.buckets_at(1_234_567).all(|b| seen.insert(ring.index(b))));
        }
    }

    /// Stepping through the ring gives each bucket the position and lap that dividing gives,
    /// across the end of the ring and of the lap counter.
    #[test]
    fn positions_from_a_bucket_step_as_dividing_does() {
        for ring in [Ring::for_windows_of(1), Ring::for_windows_of(60)] {
            for first in [0, 61, ring.len() * (LAP_MASK + 1) - 5] {
                let stepped: Vec<_> = ring.positions_from(first).take(130).collect();
                let divided: Vec<_> = (first..first + 130).map(|b| (ring.index(b), ring.lap(b))).collect();
                assert_eq!(stepped, divided, "ring of {}, from bucket {first}", ring.len());
                assert!((first..first + 130).all(|b| ring.position(b) == (ring.index(b), ring.lap(b))));
            }
        }
    }

    /// A store sized for shorter windows refuses longer ones, with the setting to raise.
    #[test]
    fn windows_longer_than_the_rings_are_refused() {
        assert_eq!(Window::new(60, None, 60).unwrap().window_buckets(), 60);
        assert_eq!(Window::new(60, Some(1), 60).unwrap().window_buckets(), 60);
        let refused = Window::new(61, Some(1), 60).unwrap_err();
        assert_eq!(
            refused,
            WindowError::TooManyBuckets { bucket_duration: 1, time_window: 61, window_buckets: 61, max_buckets: 60 }
        );
        assert!(refused.to_string().contains("the maximum is 60 (ganesha_shm.max_buckets"), "{refused}");
        assert!(Window::new(600, None, 1).is_err() && Window::new(600, Some(600), 1).is_ok());
    }

    #[test]
    fn bucket_words_count_per_bucket_and_restart_on_a_new_lap() {
        let ring = Ring::for_windows_of(MAX_BUCKETS);
        let lap = |bucket| ring.lap(bucket);
        let empty = BucketWord::empty(7);
        assert_eq!(empty.generation(), 7);
        assert!((0..1000).all(|bucket| empty.count_in(lap(bucket)) == 0), "an empty word holds no events");
        assert_ne!(BucketWord::empty(7), BucketWord::empty(7 + 256), "empty words are unique to their claim");
        let one = empty.incremented(lap(500));
        let two = one.incremented(lap(500));
        assert_eq!((two.count_in(lap(500)), two.generation()), (2, 7));
        assert_eq!(ring.index(500), ring.index(500 + ring.len()));
        assert_eq!(two.count_in(lap(500 + ring.len())), 0, "same ring position, next lap");
        let next_lap = two.incremented(lap(500 + ring.len()));
        assert_eq!((next_lap.count_in(lap(500 + ring.len())), next_lap.count_in(lap(500))), (1, 0));
    }

    #[test]
    fn bucket_words_saturate_instead_of_wrapping() {
        let lap = Ring::for_windows_of(MAX_BUCKETS).lap(9);
        let full = BucketWord((3u64 << 48) | lap.0 << COUNT_BITS | COUNT_MASK);
        assert_eq!(full.incremented(lap).count_in(lap), COUNT_MASK);
        assert_eq!(full.incremented(lap).generation(), 3);
    }

    #[test]
    fn count_words_expire_saturate_and_keep_their_generation() {
        let empty = CountWord::empty(9);
        assert_eq!(empty.count_at(1_000), 0, "a fresh counter is absent");
        assert_ne!(CountWord::empty(9), CountWord::empty(9 + 256), "empty words are unique to their claim");
        let three = empty.with_count(3, 1_000);
        assert_eq!((three.count_at(1_000), three.count_at(1_001), three.generation()), (3, 0, 9));
        assert_eq!(three.with_count(u64::MAX, 1_000).count_at(5), CountWord::MAX);
        let late = (1 << 32) + 5; // past 2106
        assert_eq!(three.with_count(1, late + 86_400).count_at(late), 1);
        assert_eq!(three.with_count(1, late).count_at(late + 1), 0);
        assert_eq!(three.with_count(1, u32::MAX as u64 + 3).count_at(u32::MAX as u64 - 3), 1, "across 2^32");
    }

    #[test]
    fn timed_words_round_trip_signed_values_and_clamp_expiry() {
        for value in [0, 1, -1, 1_700_000_000, timed::MIN_VALUE, timed::MAX_VALUE] {
            let word = timed::encode_value(200, value);
            assert_eq!((timed::decode_value(word), timed::generation(word)), (value, 200));
            assert!(timed::is_written(word), "{value} is a written value");
        }
        let expiry = timed::encode_expiry(9, u64::MAX);
        assert_eq!(timed::decode_expiry(expiry), (1 << 55) - 1);
        assert_eq!(timed::decode_expiry(timed::empty_expiry(9)), 0, "a claim's empty expiry is absent");
        assert_ne!(timed::empty_expiry(9), timed::empty_expiry(9 + 256));
        assert_ne!(timed::empty_value(9), timed::empty_value(9 + 256));
        for generation in [0, 6, 9 + 256, (1 << 22) - 1, u32::MAX] {
            let empty = timed::empty_value(generation);
            assert!(!timed::is_written(empty), "a claim's empty value is not a written one");
            assert!(timed::decode_value(empty) < timed::MIN_VALUE, "no save writes an empty value");
        }
        assert!(timed::alive(100, 100));
        assert!(!timed::alive(100, 101));
        assert!(!timed::alive(0, 0), "an expiry of 0 means no value");
    }
}
