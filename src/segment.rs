//! The shared-memory segment: its creation, its header and the layout of its two tables.
//!
//! The segment is one `MAP_SHARED` mapping made at module startup. In php-fpm that is the
//! master, before it forks its workers: every worker inherits the same mapping, so they all see
//! the same circuits. (`MmapMut::map_anon` would map `MAP_PRIVATE`, giving each forked child a
//! private copy-on-write copy: nothing would be shared.)
//!
//! * Anonymous (the default): the mapping comes from a `memfd` on Linux, elsewhere from a
//!   temporary file unlinked as soon as it is mapped. Only the processes forked afterwards
//!   share it.
//! * A file (`ganesha_shm.path`): every process on the host that maps the same file shares it,
//!   and it outlives the processes. A new file is written in full under a temporary name and
//!   then hard-linked to its path, so nobody ever maps a half-written header; two processes
//!   creating it at once race on `link`, and the loser maps the winner's. An existing file is
//!   checked before it is mapped: a regular file, of this user (or root), with no permission
//!   beyond the configured mode, and a header that matches this build and these settings.
//!
//! Everything in the segment is a 64-bit word accessed atomically: the header, then the counter
//! table, then the status table. This module hands out the words as `&[AtomicU64]`; it is the
//! only place that turns the mapping into Rust references.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use memmap2::MmapMut;

use crate::table::{self, Table};
use crate::window::MAX_BUCKETS;

/// The first word of every segment: a file starts with the bytes "GANESHM1".
pub const MAGIC: u64 = u64::from_ne_bytes(*b"GANESHM1");

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
    /// The process-id namespace of the creator (see [`super::Segment::checks_claimers`]).
    pub const PID_NAMESPACE: usize = 10;
    /// Header length; the rest of the first cache lines is left for later versions.
    pub const WORDS: usize = 16;
}

/// Bytes of the header.
pub const HEADER_BYTES: usize = header::WORDS * 8;

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

    fn in_range(&self) -> bool {
        let within = |value: u64, (min, max): (u64, u64)| (min..=max).contains(&value);
        within(self.max_services, Self::MAX_SERVICES_RANGE) && within(self.max_key_length, Self::MAX_KEY_LENGTH_RANGE)
    }
}

impl fmt::Display for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "max_services={}, max_key_length={}", self.max_services, self.max_key_length)
    }
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

/// Where a segment lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backing {
    /// Shared with the processes forked after its creation only.
    Anonymous,
    /// A file that any process of this user may map.
    File(PathBuf),
}

/// Why a file cannot be used as the segment: each is one line in the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    NotAbsolute,
    Io { doing: &'static str, error: String },
    NotRegularFile,
    Owner { uid: u32, euid: u32 },
    Mode { mode: u32, allowed: u32 },
    Header(HeaderError),
    Size { bytes: u64, expected: u64 },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotAbsolute => write!(f, "the path is not absolute"),
            Self::Io { doing, error } => write!(f, "cannot {doing}: {error}"),
            Self::NotRegularFile => write!(f, "it is not a regular file"),
            Self::Owner { uid, euid } => {
                write!(f, "it belongs to uid {uid}, not to this process's uid {euid} (nor root)")
            }
            Self::Mode { mode, allowed } => {
                write!(f, "its mode {mode:04o} grants more than ganesha_shm.mode allows ({allowed:04o})")
            }
            Self::Header(error) => write!(f, "{error}"),
            Self::Size { bytes, expected } => write!(f, "it is {bytes} bytes long; its header needs {expected}"),
        }
    }
}

/// What is wrong with the header of an existing file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderError {
    /// Shorter than a header.
    Short { bytes: usize },
    /// Not a ganesha_shm segment: the magic is missing.
    Foreign,
    /// Written by a build with another layout.
    Version { found: u64 },
    /// The magic and version are right but the sizes contradict each other.
    Corrupt { what: &'static str },
    /// A segment for other settings.
    Settings { file: Settings, ours: Settings },
}

impl fmt::Display for HeaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Short { bytes } => write!(f, "it is {bytes} bytes long, shorter than a segment header"),
            Self::Foreign => write!(f, "it is not a ganesha_shm segment (no GANESHM1 header)"),
            Self::Version { found } => {
                write!(f, "its layout version is {found}; this build reads version {LAYOUT_VERSION}")
            }
            Self::Corrupt { what } => write!(f, "its header is corrupt ({what})"),
            Self::Settings { file, ours } => write!(
                f,
                "it was created for {file}, not for {ours}: remove it (its circuits are lost) or restore the settings"
            ),
        }
    }
}

/// The words of a new segment's header.
fn header_words(layout: &Layout, hash_seed: u64, pid_namespace: u64) -> [u64; header::WORDS] {
    let mut words = [0; header::WORDS];
    words[header::MAGIC] = MAGIC;
    words[header::LAYOUT_VERSION] = LAYOUT_VERSION;
    words[header::SEGMENT_BYTES] = layout.segment_bytes() as u64;
    words[header::MAX_SERVICES] = layout.settings.max_services;
    words[header::MAX_KEY_LENGTH] = layout.settings.max_key_length;
    words[header::RING_BUCKETS] = MAX_BUCKETS;
    words[header::HASH_SEED] = hash_seed;
    words[header::PID_NAMESPACE] = pid_namespace;
    words
}

/// The layout a header describes, from its first [`HEADER_BYTES`] bytes (native byte order,
/// as the words were stored); any bytes at all may be given.
pub fn parse_header(bytes: &[u8]) -> Result<Layout, HeaderError> {
    let bytes = bytes.get(..HEADER_BYTES).ok_or(HeaderError::Short { bytes: bytes.len() })?;
    let word = |index: usize| {
        let mut raw = [0; 8];
        raw.copy_from_slice(&bytes[index * 8..index * 8 + 8]);
        u64::from_ne_bytes(raw)
    };
    if word(header::MAGIC) != MAGIC {
        return Err(HeaderError::Foreign);
    }
    if word(header::LAYOUT_VERSION) != LAYOUT_VERSION {
        return Err(HeaderError::Version { found: word(header::LAYOUT_VERSION) });
    }
    if word(header::RING_BUCKETS) != MAX_BUCKETS {
        return Err(HeaderError::Corrupt { what: "ring size" });
    }
    let settings = Settings { max_services: word(header::MAX_SERVICES), max_key_length: word(header::MAX_KEY_LENGTH) };
    if !settings.in_range() {
        return Err(HeaderError::Corrupt { what: "settings out of range" });
    }
    let layout = Layout::new(settings);
    if word(header::SEGMENT_BYTES) != layout.segment_bytes() as u64 {
        return Err(HeaderError::Corrupt { what: "segment size" });
    }
    Ok(layout)
}

/// A mapped segment. Dropping it unmaps it.
pub struct Segment {
    map: MmapMut,
    layout: Layout,
    backing: Backing,
    /// See [`Segment::checks_claimers`]; read once, when the segment is mapped.
    checks_claimers: bool,
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
        Ok(Self::new(map, layout, Backing::Anonymous, true))
    }

    /// Maps the segment file at `path`, creating it with permissions `mode` if it does not
    /// exist. An existing file is refused unless it is a regular file of this user (or root),
    /// grants nothing beyond `mode`, and holds a segment of this layout for `settings`.
    pub fn open_file(path: &Path, settings: Settings, mode: u32) -> Result<Self, Refusal> {
        if !path.is_absolute() {
            return Err(Refusal::NotAbsolute);
        }
        let io = |doing| move |error: io::Error| Refusal::Io { doing, error: error.to_string() };
        // Two rounds at most: the file is missing, and another process links its own first.
        for _ in 0..2 {
            match open_existing(path) {
                Ok(file) => return Self::map_existing(file, path, settings, mode),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io("open it")(e)),
            }
            if let Some(segment) = Self::create_file(path, settings, mode).map_err(io("create it"))? {
                return Ok(segment);
            }
        }
        Err(Refusal::Io { doing: "open it", error: "it keeps being removed and created again".into() })
    }

    /// Writes a new segment under a temporary name beside `path`, then links it to `path`.
    /// `None`: another process linked its own first.
    fn create_file(path: &Path, settings: Settings, mode: u32) -> io::Result<Option<Self>> {
        let layout = Layout::new(settings);
        let temporary = temporary_path(path);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
            .open(&temporary)?;
        let created = (|| {
            // The umask may have taken bits off `mode`; the file gets exactly `mode`.
            file.set_permissions(std::fs::Permissions::from_mode(mode))?;
            allocate(&file, layout.segment_bytes() as u64)?;
            // SAFETY: until it is linked below, the file's only name is a temporary one that this
            // process just created (create_new) and that no other process has a reason to open;
            // once linked, every access to it is atomic (see `words`), and truncating it is what
            // `map_existing` discusses.
            let map = unsafe { MmapMut::map_mut(&file)? };
            let segment = Self::new(map, layout, Backing::File(path.to_path_buf()), true);
            match std::fs::hard_link(&temporary, path) {
                Ok(()) => Ok(Some(segment)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(None),
                Err(e) => Err(e),
            }
        })();
        let _ = std::fs::remove_file(&temporary);
        created
    }

    /// Maps an existing segment file after checking it.
    fn map_existing(file: File, path: &Path, settings: Settings, mode: u32) -> Result<Self, Refusal> {
        let metadata = file.metadata().map_err(|e| Refusal::Io { doing: "stat it", error: e.to_string() })?;
        if !metadata.file_type().is_file() {
            return Err(Refusal::NotRegularFile);
        }
        // SAFETY: geteuid has no preconditions and cannot fail.
        let euid = unsafe { libc::geteuid() };
        if metadata.uid() != euid && metadata.uid() != 0 {
            return Err(Refusal::Owner { uid: metadata.uid(), euid });
        }
        let file_mode = metadata.mode() & 0o7777;
        if file_mode & !mode != 0 {
            return Err(Refusal::Mode { mode: file_mode, allowed: mode });
        }
        let mut header = [0; HEADER_BYTES];
        let read = file.read_at(&mut header, 0).map_err(|e| Refusal::Io { doing: "read it", error: e.to_string() })?;
        let found = parse_header(&header[..read]).map_err(Refusal::Header)?;
        if found.settings != settings {
            return Err(Refusal::Header(HeaderError::Settings { file: found.settings, ours: settings }));
        }
        let expected = found.segment_bytes() as u64;
        if metadata.len() != expected {
            return Err(Refusal::Size { bytes: metadata.len(), expected });
        }
        // SAFETY: other processes map this file and write it while we do; that is its purpose,
        // and every access to it is an atomic operation on an aligned word (see `words`), so it
        // is never a data race. Its length is checked against the layout right below, so the
        // tables never reach past the mapping. What `map_mut` cannot rule out is the file being
        // truncated later, which would raise SIGBUS: only the users the checks above admit can
        // write it (this user or root, and a group when ganesha_shm.mode grants it), the very
        // users trusted to share the circuits, and this user can already signal this process.
        let map =
            unsafe { MmapMut::map_mut(&file) }.map_err(|e| Refusal::Io { doing: "map it", error: e.to_string() })?;
        if map.len() as u64 != expected {
            return Err(Refusal::Size { bytes: map.len() as u64, expected });
        }
        Ok(Self::new(map, found, Backing::File(path.to_path_buf()), false))
    }

    /// A segment over `map`; `fresh`: a new, zero-filled mapping, whose header it writes.
    fn new(map: MmapMut, layout: Layout, backing: Backing, fresh: bool) -> Self {
        let mut segment = Self { map, layout, backing, checks_claimers: false };
        if fresh {
            segment.write_header();
        }
        // Relaxed: written once before the segment was shared.
        let creator = segment.header_word(header::PID_NAMESPACE).load(Ordering::Relaxed);
        segment.checks_claimers = creator != 0 && creator == pid_namespace();
        segment
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
        let words = header_words(&self.layout, random_seed(), pid_namespace());
        for (index, value) in words.into_iter().enumerate() {
            // Relaxed: the segment is being created by the only process that maps it. Others
            // get it through fork, or through `link` and `open` for a file: both order these
            // stores before anything they read.
            self.header_word(index).store(value, Ordering::Relaxed);
        }
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    pub fn backing(&self) -> &Backing {
        &self.backing
    }

    /// Whether this process may take a claim over once its claimer's process is gone. Process
    /// ids name processes only within one process-id namespace: a file may be mapped from
    /// several (containers), where a live claimer could look gone. So only the processes of
    /// the namespace that created the segment record and check process ids; the others leave
    /// abandoned claims to the table's timeouts.
    pub fn checks_claimers(&self) -> bool {
        self.checks_claimers
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
        let max_key_length = self.layout.settings.max_key_length as usize;
        Table::new(words, slots, payload_words, max_key_length, seed, self.checks_claimers(), self.stats())
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

/// Opens an existing file without following a symbolic link (refused as "cannot open") or
/// blocking on a FIFO (refused as not a regular file).
fn open_existing(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
}

/// A name beside `path`, unique to this process and moment, for a file being created.
fn temporary_path(path: &Path) -> PathBuf {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    path.with_file_name(format!(".{name}.{}.{nanos}.tmp", std::process::id()))
}

/// Sets the file's length and reserves its blocks: on a full tmpfs the creation fails here,
/// rather than a process getting SIGBUS on its first write to a page later.
fn allocate(file: &File, bytes: u64) -> io::Result<()> {
    file.set_len(bytes)?;
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: posix_fallocate on a descriptor this function borrows; it returns an error
        // number rather than setting errno.
        let error = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, bytes as libc::off_t) };
        if error != 0 && error != libc::EOPNOTSUPP {
            return Err(io::Error::from_raw_os_error(error));
        }
    }
    Ok(())
}

/// This process's process-id namespace, as the inode of `/proc/self/ns/pid`; 0 when unknown.
fn pid_namespace() -> u64 {
    std::fs::metadata("/proc/self/ns/pid").map_or(0, |metadata| metadata.ino())
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

    /// A fresh directory for segment files, removed when dropped.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new() -> Self {
            let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
            let dir = std::env::temp_dir().join(format!("ganesha_shm_test.{}.{nanos}", std::process::id()));
            std::fs::create_dir(&dir).unwrap();
            Self(dir)
        }

        fn file(&self, name: &str) -> PathBuf {
            self.0.join(name)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn refusal(path: &Path, settings: Settings, mode: u32) -> Refusal {
        Segment::open_file(path, settings, mode).err().expect("the file should be refused")
    }

    /// Overwrites header word `index` of the file at `path`.
    fn write_word(path: &Path, index: usize, value: u64) {
        let file = OpenOptions::new().write(true).open(path).unwrap();
        file.write_all_at(&value.to_ne_bytes(), index as u64 * 8).unwrap();
    }

    #[test]
    fn a_file_segment_is_created_complete_and_shared_by_whoever_maps_it() {
        let dir = TempDir::new();
        let path = dir.file("circuits");
        let first = Segment::open_file(&path, settings(2), 0o600).unwrap();
        assert_eq!(first.backing(), &Backing::File(path.clone()));
        let metadata = std::fs::metadata(&path).unwrap();
        assert_eq!(metadata.len(), first.layout().segment_bytes() as u64);
        assert_eq!(metadata.mode() & 0o7777, 0o600);
        assert_eq!(&std::fs::read(&path).unwrap()[..8], b"GANESHM1");
        assert_eq!(std::fs::read_dir(&dir.0).unwrap().count(), 1, "no temporary file is left behind");

        let second = Segment::open_file(&path, settings(2), 0o600).unwrap();
        first.header_word(header::CLAIMS).fetch_add(7, Ordering::SeqCst);
        assert_eq!(second.header_word(header::CLAIMS).load(Ordering::SeqCst), 7);
        let seed = |s: &Segment| s.header_word(header::HASH_SEED).load(Ordering::Relaxed);
        assert_eq!(seed(&first), seed(&second), "keys hash alike in both");
        assert!(second.checks_claimers(), "one process-id namespace");
    }

    #[test]
    fn the_mode_is_exactly_the_setting_whatever_the_umask() {
        let dir = TempDir::new();
        let path = dir.file("circuits");
        // SAFETY: umask only sets this process's file-creation mask; no other test depends on
        // the modes it gives (segment files get theirs explicitly).
        let previous = unsafe { libc::umask(0o077) };
        let created = Segment::open_file(&path, settings(1), 0o660);
        // SAFETY: as above, restoring the previous mask.
        unsafe { libc::umask(previous) };
        created.unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o7777, 0o660);
    }

    #[test]
    fn processes_creating_the_file_at_once_all_map_the_same_one() {
        let dir = TempDir::new();
        let path = dir.file("circuits");
        let segments: Vec<Segment> = std::thread::scope(|scope| {
            let openers: Vec<_> =
                (0..8).map(|_| scope.spawn(|| Segment::open_file(&path, settings(1), 0o600).unwrap())).collect();
            openers.into_iter().map(|opener| opener.join().unwrap()).collect()
        });
        segments[0].header_word(header::RECLAIMS).fetch_add(1, Ordering::SeqCst);
        assert!(segments.iter().all(|s| s.header_word(header::RECLAIMS).load(Ordering::SeqCst) == 1));
        assert_eq!(std::fs::read_dir(&dir.0).unwrap().count(), 1);
    }

    #[test]
    fn other_settings_are_refused_without_touching_the_file() {
        let dir = TempDir::new();
        let path = dir.file("circuits");
        Segment::open_file(&path, settings(2), 0o600).unwrap();
        let before = std::fs::read(&path).unwrap();
        for other in [settings(1), settings(3), Settings { max_services: 2, max_key_length: 64 }] {
            let expected = HeaderError::Settings { file: settings(2), ours: other };
            assert_eq!(refusal(&path, other, 0o600), Refusal::Header(expected));
        }
        assert_eq!(std::fs::read(&path).unwrap(), before);
    }

    #[test]
    fn files_granting_more_than_the_mode_are_refused() {
        let dir = TempDir::new();
        let path = dir.file("circuits");
        Segment::open_file(&path, settings(1), 0o600).unwrap();
        for mode in [0o620, 0o602, 0o640, 0o4600] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            assert_eq!(refusal(&path, settings(1), 0o600), Refusal::Mode { mode, allowed: 0o600 });
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        Segment::open_file(&path, settings(1), 0o660).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o400)).unwrap();
        Segment::open_file(&path, settings(1), 0o600).expect("granting less is fine (as root, still writable)");
    }

    #[test]
    fn files_of_the_wrong_size_are_refused() {
        let dir = TempDir::new();
        let path = dir.file("circuits");
        let expected = Layout::new(settings(1)).segment_bytes() as u64;
        Segment::open_file(&path, settings(1), 0o600).unwrap();
        for bytes in [expected + 8, expected - 8, HEADER_BYTES as u64] {
            OpenOptions::new().write(true).open(&path).unwrap().set_len(bytes).unwrap();
            assert_eq!(refusal(&path, settings(1), 0o600), Refusal::Size { bytes, expected });
        }
        OpenOptions::new().write(true).open(&path).unwrap().set_len(5).unwrap();
        assert_eq!(refusal(&path, settings(1), 0o600), Refusal::Header(HeaderError::Short { bytes: 5 }));
    }

    #[test]
    fn foreign_corrupt_and_other_version_headers_are_refused() {
        let dir = TempDir::new();
        let path = dir.file("circuits");
        let create = || {
            let _ = std::fs::remove_file(&path);
            Segment::open_file(&path, settings(1), 0o600).unwrap();
        };
        let cases = [
            (header::MAGIC, u64::from_ne_bytes(*b"APCU0001"), HeaderError::Foreign),
            (header::LAYOUT_VERSION, 2, HeaderError::Version { found: 2 }),
            (header::RING_BUCKETS, 60, HeaderError::Corrupt { what: "ring size" }),
            (header::MAX_SERVICES, 0, HeaderError::Corrupt { what: "settings out of range" }),
            (header::SEGMENT_BYTES, 4096, HeaderError::Corrupt { what: "segment size" }),
        ];
        for (index, value, error) in cases {
            create();
            write_word(&path, index, value);
            assert_eq!(refusal(&path, settings(1), 0o600), Refusal::Header(error));
        }
        std::fs::write(&path, vec![0; Layout::new(settings(1)).segment_bytes()]).unwrap();
        assert_eq!(refusal(&path, settings(1), 0o600), Refusal::Header(HeaderError::Foreign));
    }

    #[test]
    fn links_directories_fifos_and_relative_paths_are_refused() {
        let dir = TempDir::new();
        let target = dir.file("target");
        Segment::open_file(&target, settings(1), 0o600).unwrap();
        let link = dir.file("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(matches!(refusal(&link, settings(1), 0o600), Refusal::Io { doing: "open it", .. }));
        assert!(matches!(refusal(&dir.0, settings(1), 0o600), Refusal::Io { doing: "open it", .. }));
        let fifo = dir.file("fifo");
        let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: mkfifo with a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        assert_eq!(refusal(&fifo, settings(1), 0o600), Refusal::NotRegularFile);
        assert_eq!(refusal(Path::new("circuits"), settings(1), 0o600), Refusal::NotAbsolute);
    }

    #[test]
    fn files_of_another_user_are_refused() {
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: giving a file to another user needs root");
            return;
        }
        let dir = TempDir::new();
        let path = dir.file("circuits");
        Segment::open_file(&path, settings(1), 0o600).unwrap();
        std::os::unix::fs::chown(&path, Some(65534), None).unwrap();
        assert_eq!(refusal(&path, settings(1), 0o600), Refusal::Owner { uid: 65534, euid: 0 });
    }

    #[test]
    fn a_valid_header_parses_to_its_layout() {
        let layout = Layout::new(settings(3));
        let bytes: Vec<u8> = header_words(&layout, 1, 2).iter().flat_map(|w| w.to_ne_bytes()).collect();
        assert_eq!(parse_header(&bytes), Ok(layout));
        assert_eq!(parse_header(&bytes[..HEADER_BYTES - 1]), Err(HeaderError::Short { bytes: HEADER_BYTES - 1 }));
    }

    /// The header parser and the store, fed arbitrary bytes: whatever a file holds, opening it
    /// either refuses it or gives a store whose every operation returns, without panicking
    /// (a panic would abort the PHP process) and without reaching outside the mapping.
    mod fuzz {
        use super::*;
        use crate::store::Store;
        use crate::window::Window;
        use proptest::collection::vec;
        use proptest::prelude::*;

        fn header_bytes(words: &[u64]) -> Vec<u8> {
            words.iter().flat_map(|w| w.to_ne_bytes()).collect()
        }

        /// Header words the parser checks; the others (seed, statistics, namespace, spare) may
        /// hold anything.
        const CHECKED: [usize; 6] = [
            header::MAGIC,
            header::LAYOUT_VERSION,
            header::SEGMENT_BYTES,
            header::MAX_SERVICES,
            header::MAX_KEY_LENGTH,
            header::RING_BUCKETS,
        ];

        proptest! {
            #![proptest_config(ProptestConfig { cases: 4000, failure_persistence: None, ..ProptestConfig::default() })]

            #[test]
            fn arbitrary_bytes_parse_to_an_error_or_a_consistent_layout(bytes in vec(any::<u8>(), 0..200)) {
                if let Ok(layout) = parse_header(&bytes) {
                    prop_assert!(layout.settings.in_range());
                    prop_assert_eq!(&bytes[..8], b"GANESHM1");
                }
            }

            #[test]
            fn a_header_with_one_word_changed_is_refused_or_describes_what_it_says(
                max_services in 1u64..5000,
                max_key_length in 8u64..4097,
                index in 0..header::WORDS,
                value in prop_oneof![any::<u64>(), 0u64..10_000_000],
            ) {
                let layout = Layout::new(Settings { max_services, max_key_length });
                let mut words = header_words(&layout, 7, 9);
                words[index] = value;
                match parse_header(&header_bytes(&words)) {
                    Ok(parsed) => {
                        prop_assert_eq!(parsed.segment_bytes() as u64, words[header::SEGMENT_BYTES]);
                        prop_assert_eq!(parsed.settings.max_services, words[header::MAX_SERVICES]);
                        prop_assert_eq!(parsed.settings.max_key_length, words[header::MAX_KEY_LENGTH]);
                    }
                    Err(_) => prop_assert!(CHECKED.contains(&index), "word {} is not checked", index),
                }
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 150, failure_persistence: None, ..ProptestConfig::default() })]

            #[test]
            fn a_store_over_garbage_tables_never_panics(
                garbage in vec((0u8..4, any::<u64>()), Layout::new(settings(2)).total_words() - header::WORDS),
                now in 0u64..4_000_000_000,
            ) {
                let dir = TempDir::new();
                let path = dir.file("circuits");
                let keys = [&b"svc.failure"[..], b"", &[0xff; 160]];
                let window = Window::new(60, None).unwrap();
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
                exercise(&Store::new(&Segment::open_file(&path, settings(2), 0o600).unwrap()));
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

                exercise(&Store::new(&Segment::open_file(&path, settings(2), 0o600).unwrap()));
            }
        }
    }
}
