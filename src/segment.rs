//! The shared-memory segment: its creation, its header and the layout of its two tables.
//!
//! The segment is one `MAP_SHARED` mapping created at module startup. In php-fpm that is the
//! master, before it forks its workers: every worker inherits the same mapping, so they all see
//! the same circuits. (`MmapMut::map_anon` would map `MAP_PRIVATE`, giving each forked child a
//! private copy-on-write copy: nothing would be shared.) On Linux the mapping comes from a
//! `memfd`; elsewhere from a temporary file that is unlinked as soon as it is mapped.
//!
//! Everything in the segment is a 64-bit word accessed atomically: the header, then the counter
//! table, then the status table. This module hands out the words as `&[AtomicU64]`; it is the
//! only place that turns the mapping into Rust references.

use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

use memmap2::MmapMut;

use crate::table::{self, Table};
use crate::window::MAX_BUCKETS;

/// "GANESHM1" in ASCII: the first word of every segment.
pub const MAGIC: u64 = u64::from_be_bytes(*b"GANESHM1");

/// Bumped whenever the meaning of any word in the segment changes.
pub const LAYOUT_VERSION: u64 = 1;

/// Payload words of a counter slot: the last failure time (value, expiry), the Count
/// strategy's counter, then the ring of buckets.
pub const COUNTER_PAYLOAD_WORDS: usize = 3 + MAX_BUCKETS as usize;

/// Payload words of a status slot: the status (value, expiry).
pub const STATUS_PAYLOAD_WORDS: usize = 2;

/// Counter keys per Ganesha service: success, failure and rejection.
pub const COUNTERS_PER_SERVICE: u64 = 3;

/// Header words, by index. The statistics words are updated with `fetch_add` by any process.
mod header {
    pub const MAGIC: usize = 0;
    pub const LAYOUT_VERSION: usize = 1;
    pub const SEGMENT_BYTES: usize = 2;
    pub const MAX_SERVICES: usize = 3;
    pub const MAX_KEY_LENGTH: usize = 4;
    pub const RING_BUCKETS: usize = 5;
    pub const HASH_SEED: usize = 6;
    pub const CLAIMS: usize = 7;
    pub const RECLAIMS: usize = 8;
    pub const FULL_ERRORS: usize = 9;
    /// Header length; the rest of the first cache lines is left for later versions.
    pub const WORDS: usize = 16;
}

/// The settings a segment is sized from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// Services the store has room for: each takes [`COUNTERS_PER_SERVICE`] counter slots and
    /// one status slot.
    pub max_services: u64,
    /// Longest key, in bytes, that a slot can hold.
    pub max_key_length: u64,
}

impl Settings {
    pub const MAX_SERVICES_RANGE: (u64, u64) = (1, 1 << 20);
    pub const MAX_KEY_LENGTH_RANGE: (u64, u64) = (8, 4096);
}

/// Where every table lives in the segment, in words; derived from the [`Settings`] alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub settings: Settings,
    pub key_words: usize,
    pub counter_slots: usize,
    pub counter_slot_words: usize,
    pub status_slots: usize,
    pub status_slot_words: usize,
}

impl Layout {
    pub fn new(settings: Settings) -> Self {
        let key_words = table::key_words(settings.max_key_length as usize);
        Self {
            settings,
            key_words,
            counter_slots: (settings.max_services * COUNTERS_PER_SERVICE) as usize,
            counter_slot_words: table::slot_words(COUNTER_PAYLOAD_WORDS, key_words),
            status_slots: settings.max_services as usize,
            status_slot_words: table::slot_words(STATUS_PAYLOAD_WORDS, key_words),
        }
    }

    fn counter_offset(&self) -> usize {
        header::WORDS
    }

    fn status_offset(&self) -> usize {
        self.counter_offset() + self.counter_slots * self.counter_slot_words
    }

    pub fn total_words(&self) -> usize {
        self.status_offset() + self.status_slots * self.status_slot_words
    }

    pub fn segment_bytes(&self) -> usize {
        self.total_words() * 8
    }

    /// Shared memory one Ganesha service takes: its three counters and its status.
    pub fn bytes_per_service(&self) -> usize {
        (COUNTERS_PER_SERVICE as usize * self.counter_slot_words + self.status_slot_words) * 8
    }
}

/// Store-wide statistics, kept in the header so that every process adds to the same figures.
#[derive(Clone, Copy)]
pub struct Stats<'a> {
    pub claims: &'a AtomicU64,
    pub reclaims: &'a AtomicU64,
    pub full_errors: &'a AtomicU64,
}

/// A mapped segment. Dropping it unmaps it.
pub struct Segment {
    map: MmapMut,
    layout: Layout,
}

impl Segment {
    /// Creates a zero-filled shared segment for `settings`, not reachable by any name, shared
    /// with the processes this one forks afterwards.
    pub fn create_anonymous(settings: Settings) -> io::Result<Self> {
        let layout = Layout::new(settings);
        let file = anonymous_file()?;
        file.set_len(layout.segment_bytes() as u64)?;
        // SAFETY: `map_mut` is unsafe because another process could truncate or write the file
        // behind our back. Nobody else can reach this file: a memfd or an unlinked file that
        // only this process holds, and only through this mapping from now on.
        let map = unsafe { MmapMut::map_mut(&file)? };
        let segment = Self { map, layout };
        segment.write_header();
        Ok(segment)
    }

    /// Every word of the segment.
    fn words(&self) -> &[AtomicU64] {
        let words = self.map.len() / 8;
        // SAFETY: the mapping is page-aligned, hence aligned for `AtomicU64`, and `words * 8`
        // bytes long; it lives as long as `self`, which the returned slice borrows. `AtomicU64`
        // has the size and alignment of `u64`, and every access to the segment, from this
        // process or another one, is an atomic operation on one of these words, so concurrent
        // access is never a data race. No `&mut` to the mapping is ever created after this.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().cast::<AtomicU64>(), words) }
    }

    fn header_word(&self, index: usize) -> &AtomicU64 {
        &self.words()[index]
    }

    fn write_header(&self) {
        let layout = &self.layout;
        // Relaxed: the segment is being created by the only process that maps it; the
        // processes forked later see these values through fork itself.
        let store = |index: usize, value: u64| self.header_word(index).store(value, Ordering::Relaxed);
        store(header::LAYOUT_VERSION, LAYOUT_VERSION);
        store(header::SEGMENT_BYTES, layout.segment_bytes() as u64);
        store(header::MAX_SERVICES, layout.settings.max_services);
        store(header::MAX_KEY_LENGTH, layout.settings.max_key_length);
        store(header::RING_BUCKETS, MAX_BUCKETS);
        store(header::HASH_SEED, random_seed());
        store(header::MAGIC, MAGIC);
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    pub fn layout_version(&self) -> u64 {
        // Relaxed: written once before any other process could read it.
        self.header_word(header::LAYOUT_VERSION).load(Ordering::Relaxed)
    }

    pub fn stats(&self) -> Stats<'_> {
        Stats {
            claims: self.header_word(header::CLAIMS),
            reclaims: self.header_word(header::RECLAIMS),
            full_errors: self.header_word(header::FULL_ERRORS),
        }
    }

    fn table(&self, offset: usize, slots: usize, slot_words: usize, payload_words: usize) -> Table<'_> {
        let words = &self.words()[offset..offset + slots * slot_words];
        // Relaxed: the seed is written once, before the segment is shared.
        let seed = self.header_word(header::HASH_SEED).load(Ordering::Relaxed);
        Table::new(words, slots, payload_words, self.layout.settings.max_key_length as usize, seed, self.stats())
    }

    /// Keys to rings of buckets and last failure times.
    pub fn counters(&self) -> Table<'_> {
        let l = &self.layout;
        self.table(l.counter_offset(), l.counter_slots, l.counter_slot_words, COUNTER_PAYLOAD_WORDS)
    }

    /// Keys to statuses.
    pub fn statuses(&self) -> Table<'_> {
        let l = &self.layout;
        self.table(l.status_offset(), l.status_slots, l.status_slot_words, STATUS_PAYLOAD_WORDS)
    }
}

#[cfg(target_os = "linux")]
fn anonymous_file() -> io::Result<File> {
    use std::os::fd::FromRawFd;
    // SAFETY: the name is a NUL-terminated C string; memfd_create returns a new descriptor or
    // -1, and a new descriptor is owned by nobody else, so `File` may take ownership of it.
    unsafe {
        let fd = libc::memfd_create(c"ganesha_shm".as_ptr(), libc::MFD_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(File::from_raw_fd(fd))
    }
}

#[cfg(not(target_os = "linux"))]
fn anonymous_file() -> io::Result<File> {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let path = std::env::temp_dir().join(format!("ganesha_shm.{}.{nanos}", std::process::id()));
    let file = std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(&path)?;
    std::fs::remove_file(&path)?;
    Ok(file)
}

/// A seed for the key hash that differs per segment, so that which keys collide cannot be
/// worked out in advance.
fn random_seed() -> u64 {
    use std::hash::BuildHasher;
    std::collections::hash_map::RandomState::new().hash_one(std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn settings(max_services: u64) -> Settings {
        Settings { max_services, max_key_length: 160 }
    }

    #[test]
    fn layout_of_the_default_settings() {
        let layout = Layout::new(Settings { max_services: 1024, max_key_length: 160 });
        assert_eq!(layout.key_words, 20);
        assert_eq!(layout.counter_slots, 3072);
        // header 4 + last failure 2 + count 1 + ring 120 + key 20 words
        assert_eq!(layout.counter_slot_words * 8, 1176);
        assert_eq!(layout.status_slot_words * 8, 208);
        assert_eq!(layout.bytes_per_service(), 3736);
        assert_eq!(layout.segment_bytes(), 128 + 1024 * 3736);
    }

    #[test]
    fn a_created_segment_has_its_header_and_zeroed_tables() {
        let segment = Segment::create_anonymous(settings(4)).unwrap();
        assert_eq!(segment.header_word(header::MAGIC).load(Ordering::Relaxed), MAGIC);
        assert_eq!(segment.layout_version(), LAYOUT_VERSION);
        assert_eq!(segment.map.len(), segment.layout().segment_bytes());
        assert!(segment.words()[header::WORDS..].iter().all(|w| w.load(Ordering::Relaxed) == 0));
        assert_eq!(segment.counters().slots(), 12);
        assert_eq!(segment.statuses().slots(), 4);
    }

    #[test]
    fn the_mapping_is_shared_with_forked_children() {
        let segment = Segment::create_anonymous(settings(1)).unwrap();
        let word = segment.header_word(header::CLAIMS);
        // SAFETY: fork in a test process: the child only touches the atomic and exits at once.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            word.fetch_add(41, Ordering::SeqCst);
            // SAFETY: _exit ends the child without running the parent's test harness.
            unsafe { libc::_exit(0) };
        }
        let mut status = 0;
        // SAFETY: waiting for the child forked above.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert_eq!(word.load(Ordering::SeqCst), 41, "a MAP_PRIVATE mapping would read 0");
    }
}
