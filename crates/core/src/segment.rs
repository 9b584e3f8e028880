//! The shared-memory segment: its creation, its header and the layout of its regions.
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
//! table, the status table and, in fleet mode, the fleet-only region. This module hands out the
//! words as `&[AtomicU64]`; it is the only place that turns the mapping into Rust references.

use std::fmt;
use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use memmap2::MmapRaw;

/// The first word of every segment: a file starts with the bytes "GANESHM1".
pub const MAGIC: u64 = u64::from_ne_bytes(*b"GANESHM1");

/// Bumped whenever the meaning of any word in the segment changes.
pub const LAYOUT_VERSION: u64 = 6;

/// Header words, by index. The statistics words are updated with `fetch_add` by any process.
mod header {
    pub const MAGIC: usize = 0;
    pub const LAYOUT_VERSION: usize = 1;
    pub const SEGMENT_BYTES: usize = 2;
    pub const MAX_SERVICES: usize = 3;
    pub const MAX_KEY_LENGTH: usize = 4;
    pub const RING_BUCKETS: usize = 5;
    pub const HASH_SEED: usize = 6;
    /// The first of the statistics words the tables above keep (see [`super::STATS_WORDS`]).
    pub const STATS: usize = 7;
    /// The process-id namespace of the creator (see [`super::Segment::checks_claimers`]).
    pub const PID_NAMESPACE: usize = 10;
    pub const MAX_BUCKETS: usize = 11;
    /// Whether the counters keep a ring of the fleet's counts beside their own (1) or not (0).
    /// Segments made before fleet mode have 0 here.
    pub const FLEET: usize = 12;
    /// The [`super::FLEET_WORDS`] words the fleet sidecar writes (see `fleet`).
    pub const FLEET_SYNC: usize = 13;
    /// A random number drawn when the segment is made: the fleet's name for this host, whatever
    /// the sidecar calls it (see [`super::Segment::fleet_host_id`]).
    pub const FLEET_HOST_ID: usize = 16;
    /// The fleet sidecar's last sequence: above every call it made for this host, so that
    /// Redis tells a late call from a new one across the sidecar's restarts (see
    /// [`super::Segment::fleet_sequence`]). Segments made before it have 0 here, as new ones.
    pub const FLEET_SEQUENCE: usize = 17;
    /// The reset log's tickets the fleet sidecar had read when it last wrote the fleet's counts
    /// (see [`super::Segment::fleet_resets_taken`]). 0 in a new segment, as the log's.
    pub const FLEET_RESETS_TAKEN: usize = 18;
    /// The window this host's adapters read in fleet mode, as they last noted it (see
    /// [`super::Segment::fleet_window_noted`]): what the sidecar reads the fleet-only services in.
    pub const FLEET_WINDOW: usize = 19;
    /// How far this host's clock is ahead of Redis's, as the fleet sidecar keeps it (see
    /// [`super::Segment::fleet_clock`]). Segments made before it have 0 here: none, as new ones.
    pub const FLEET_CLOCK: usize = 20;
    /// Since when this segment has its fleet id (see [`super::Segment::renew_fleet_host_id`]):
    /// unix milliseconds, before which the counts its own rings hold are an older id's; 0 when
    /// they are all its id's (a new segment, and one renewed now, whose counts of before were
    /// handed to its fleet rings).
    pub const FLEET_SINCE: usize = 21;
    /// The file this segment was made in, or the sidecar last found it in: its device and inode
    /// (see [`super::Segment::fleet_file`]). 0 for an anonymous segment.
    pub const FILE_DEVICE: usize = 22;
    pub const FILE_INODE: usize = 23;
    /// `FILE_INODE` while a process takes a copy of the segment as its host's own (see
    /// [`super::Segment::claim_copy`]): no file has this inode.
    pub const COPY_BEING_TAKEN: u64 = u64::MAX;
    /// The [`super::FLEET_CLOCK_FIGURES_WORDS`] words of the figures the fleet sidecar stamped
    /// this host's buckets by (see [`super::Segment::fleet_clock_figures`]).
    pub const FLEET_CLOCK_FIGURES: usize = 24;
    /// Header length, four cache lines; the rest is left for later versions.
    pub const WORDS: usize = 32;
}

/// Statistics words the header keeps for the layers above.
pub const STATS_WORDS: usize = 3;

/// Words the header keeps for the fleet sidecar's state (see `fleet::SyncState`).
pub const FLEET_WORDS: usize = 3;
const _: () = assert!(header::FLEET_SYNC + FLEET_WORDS <= header::WORDS, "the fleet's words fit in the header");

/// Words the header keeps for the figures the fleet sidecar stamped buckets by (see
/// `fleet::ClockFigure`).
pub const FLEET_CLOCK_FIGURES_WORDS: usize = 5;
const _: () = assert!(header::FLEET_CLOCK_FIGURES + FLEET_CLOCK_FIGURES_WORDS <= header::WORDS, "the figures fit");

/// Bytes of the header.
pub const HEADER_BYTES: usize = header::WORDS * 8;

/// The settings a segment is sized from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// Services the store has room for.
    pub max_services: u64,
    /// Longest key, in bytes, that a slot can hold.
    pub max_key_length: u64,
    /// Most buckets a time window may be split into: what each counter's ring is sized for.
    pub max_buckets: u64,
    /// Fleet mode: each counter also keeps the counts the other hosts of its fleet published,
    /// which the fleet sidecar writes (see `fleet`).
    pub fleet: bool,
}

impl Settings {
    pub const MAX_SERVICES_RANGE: (u64, u64) = (1, 1 << 20);
    pub const MAX_KEY_LENGTH_RANGE: (u64, u64) = (8, 4096);
    pub const MAX_BUCKETS_RANGE: (u64, u64) = (1, 120);

    fn in_range(&self) -> bool {
        let within = |value: u64, (min, max): (u64, u64)| (min..=max).contains(&value);
        within(self.max_services, Self::MAX_SERVICES_RANGE)
            && within(self.max_key_length, Self::MAX_KEY_LENGTH_RANGE)
            && within(self.max_buckets, Self::MAX_BUCKETS_RANGE)
    }
}

impl fmt::Display for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "max_services={}, max_key_length={}, max_buckets={}, fleet={}",
            self.max_services,
            self.max_key_length,
            self.max_buckets,
            if self.fleet { "on" } else { "off" }
        )
    }
}

/// The regions of a segment after its header, in words, as the layers above lay them out from
/// the settings; the segment only maps them, checks their total size and hands them out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Regions {
    pub settings: Settings,
    /// A figure of the layout the header records and checks (the counters' ring length).
    pub ring_buckets: u64,
    /// Words of each region, in order: the counters, the statuses, the fleet-only region, the
    /// reset log.
    pub words: [usize; 4],
}

impl Regions {
    pub fn total_words(&self) -> usize {
        header::WORDS + self.words.iter().sum::<usize>()
    }

    pub fn segment_bytes(&self) -> usize {
        self.total_words() * 8
    }
}

/// How the layer above lays out the regions for given settings.
pub type LayoutOf = fn(Settings) -> Regions;

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
    /// There is no file to attach to (`Segment::attach_file`).
    Missing,
    Io {
        doing: &'static str,
        error: String,
    },
    NotRegularFile,
    Owner {
        uid: u32,
        euid: u32,
    },
    Mode {
        mode: u32,
        allowed: u32,
    },
    /// The file grants its group access, and its group is neither this process's nor its
    /// setgid directory's.
    Group {
        gid: u32,
        allowed: Vec<u32>,
    },
    /// A directory on the path cannot be trusted to hold the file: `path` is that directory.
    Directory {
        path: PathBuf,
        why: DirectoryFault,
    },
    Header(HeaderError),
    Size {
        bytes: u64,
        expected: u64,
    },
}

/// Why a directory on the path of the segment file is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DirectoryFault {
    /// It cannot be opened as a directory without following a symbolic link (ELOOP, ENOTDIR),
    /// or at all.
    Open(String),
    /// A `.` or `..` component: the path must name each directory it goes through.
    NotCanonical,
    /// It belongs to a user other than root and this process's.
    Owner { uid: u32, euid: u32 },
    /// Others than its owner may write it (`mode`), and it has no sticky bit: they could
    /// replace or remove the file.
    Writable { mode: u32 },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotAbsolute => write!(f, "the path is not absolute"),
            Self::Missing => write!(f, "there is no such file (yet): PHP makes it when it starts"),
            Self::Io { doing, error } => write!(f, "cannot {doing}: {error}"),
            Self::NotRegularFile => write!(f, "it is not a regular file"),
            Self::Owner { uid, euid } => {
                write!(f, "it belongs to uid {uid}, not to this process's uid {euid} (nor root)")
            }
            Self::Mode { mode, allowed } => {
                write!(f, "its mode {mode:04o} grants more than ganesha_shm.mode allows ({allowed:04o})")
            }
            Self::Group { gid, allowed } => write!(
                f,
                "its mode grants its group, gid {gid}, which is neither this process's nor its setgid directory's ({allowed:?})"
            ),
            Self::Directory { path, why } => {
                let path = path.display();
                match why {
                    DirectoryFault::Open(error) => {
                        write!(f, "the directory {path} cannot be opened as a directory, symbolic links not followed: {error}")
                    }
                    DirectoryFault::NotCanonical => write!(f, "the path goes through {path}, a . or .. component"),
                    DirectoryFault::Owner { uid, euid } => write!(
                        f,
                        "the directory {path} belongs to uid {uid}, not to root nor to this process's uid {euid}"
                    ),
                    DirectoryFault::Writable { mode } => write!(
                        f,
                        "the directory {path} (mode {mode:04o}) may be written by others than its owner and has no sticky bit"
                    ),
                }
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
fn header_words(layout: &Regions, hash_seed: u64, pid_namespace: u64, fleet_host_id: u64) -> [u64; header::WORDS] {
    let mut words = [0; header::WORDS];
    words[header::MAGIC] = MAGIC;
    words[header::LAYOUT_VERSION] = LAYOUT_VERSION;
    words[header::SEGMENT_BYTES] = layout.segment_bytes() as u64;
    words[header::MAX_SERVICES] = layout.settings.max_services;
    words[header::MAX_KEY_LENGTH] = layout.settings.max_key_length;
    words[header::RING_BUCKETS] = layout.ring_buckets;
    words[header::HASH_SEED] = hash_seed;
    words[header::PID_NAMESPACE] = pid_namespace;
    words[header::MAX_BUCKETS] = layout.settings.max_buckets;
    words[header::FLEET] = layout.settings.fleet as u64;
    words[header::FLEET_HOST_ID] = fleet_host_id;
    words
}

/// The layout a header describes, from its first [`HEADER_BYTES`] bytes (native byte order,
/// as the words were stored); any bytes at all may be given.
pub fn parse_header(bytes: &[u8], layout_of: LayoutOf) -> Result<Regions, HeaderError> {
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
    let settings = Settings {
        max_services: word(header::MAX_SERVICES),
        max_key_length: word(header::MAX_KEY_LENGTH),
        max_buckets: word(header::MAX_BUCKETS),
        fleet: match word(header::FLEET) {
            0 => false,
            1 => true,
            _ => return Err(HeaderError::Corrupt { what: "fleet mode" }),
        },
    };
    if !settings.in_range() {
        return Err(HeaderError::Corrupt { what: "settings out of range" });
    }
    let layout = layout_of(settings);
    if word(header::RING_BUCKETS) != layout.ring_buckets {
        return Err(HeaderError::Corrupt { what: "ring size" });
    }
    if word(header::SEGMENT_BYTES) != layout.segment_bytes() as u64 {
        return Err(HeaderError::Corrupt { what: "segment size" });
    }
    Ok(layout)
}

/// Where a segment is mapped: by this image of the extension, or by an earlier image of it in
/// this same process, found again (see [`Segment::adopt_anonymous`]).
enum Mapping {
    Made(MmapRaw),
    /// `len`: the segment's bytes; the mapping spans them rounded up to whole pages.
    Adopted {
        leftover: Leftover,
        len: usize,
    },
}

impl Mapping {
    fn ptr(&self) -> *mut u8 {
        match self {
            Self::Made(map) => map.as_mut_ptr(),
            Self::Adopted { leftover, .. } => leftover.start as *mut u8,
        }
    }

    fn len(&self) -> usize {
        match self {
            Self::Made(map) => map.len(),
            Self::Adopted { len, .. } => *len,
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if let Self::Adopted { leftover, .. } = self {
            // SAFETY: the range is a whole mapping this segment owns (see `adopt_anonymous`),
            // and nothing borrows its words any more: they are borrowed from the segment.
            unsafe { leftover.unmap() };
        }
    }
}

/// A shared mapping of this process that an earlier image of this extension made and left:
/// PHP runs MSHUTDOWN and MINIT again in one process when a SAPI restarts its modules (Apache's
/// graceful restart), unloading this library in between, and nothing unmaps what a static held.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Leftover {
    start: usize,
    end: usize,
    device: (u32, u32),
    inode: u64,
    /// As /proc/self/maps shows it (a removed file's path ends in " (deleted)").
    path: String,
}

/// What /proc/self/maps calls the anonymous segment's memfd.
const MEMFD_PATH: &str = "/memfd:ganesha_shm (deleted)";

impl Leftover {
    fn len(&self) -> usize {
        self.end - self.start
    }

    /// The shared, writable mappings of this process from offset 0, as /proc/self/maps lists
    /// them, that `is_ours` takes for a segment.
    fn find(is_ours: impl Fn(&Leftover) -> bool) -> Vec<Leftover> {
        let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
            return Vec::new();
        };
        maps.lines().filter_map(Self::parse).filter(|leftover| is_ours(leftover)).collect()
    }

    /// One line of /proc/self/maps: `start-end perms offset major:minor inode path`, for a
    /// shared writable mapping from offset 0 with a path.
    fn parse(line: &str) -> Option<Leftover> {
        let mut fields = line.splitn(6, ' ');
        let (range, perms, offset, device, inode) =
            (fields.next()?, fields.next()?, fields.next()?, fields.next()?, fields.next()?);
        let path = fields.next()?.trim_start();
        if perms != "rw-s" || u64::from_str_radix(offset, 16).ok()? != 0 || path.is_empty() {
            return None;
        }
        let (start, end) = range.split_once('-')?;
        let (major, minor) = device.split_once(':')?;
        Some(Leftover {
            start: usize::from_str_radix(start, 16).ok()?,
            end: usize::from_str_radix(end, 16).ok()?,
            device: (u32::from_str_radix(major, 16).ok()?, u32::from_str_radix(minor, 16).ok()?),
            inode: inode.parse().ok()?,
            path: path.to_string(),
        })
    }

    /// Unmaps it.
    ///
    /// # Safety
    /// Nothing of this image of the extension may use the range: it is a mapping an earlier
    /// image left (see the type's documentation), or one this image owns and no longer uses.
    unsafe fn unmap(&self) {
        // SAFETY: as the caller promises; munmap of a whole mapping touches nothing else.
        unsafe { libc::munmap(self.start as *mut libc::c_void, self.len()) };
    }
}

/// A mapped segment. Dropping it unmaps it.
pub struct Segment {
    map: Mapping,
    layout: Regions,
    backing: Backing,
    /// See [`Segment::checks_claimers`]; read once, when the segment is mapped.
    checks_claimers: bool,
    /// See [`Segment::file`].
    file: (u64, u64),
}

impl Segment {
    /// Creates a zero-filled shared segment for `settings`, not reachable by any name, shared
    /// with the processes this one forks afterwards.
    pub fn create_anonymous(layout: Regions) -> io::Result<Self> {
        // Sealed against shrinking and growing (on Linux): no process can truncate it under the
        // mapping, not even through /proc/PID/fd, so no access ever raises SIGBUS.
        let file = anonymous_file(layout.segment_bytes() as u64)?;
        let map = MmapRaw::map_raw(&file)?;
        Ok(Self::new(Mapping::Made(map), layout, Backing::Anonymous, true))
    }

    /// The anonymous segment an earlier image of this extension left in this process, when it
    /// has the layout asked for: so that a SAPI that restarts its modules (Apache's graceful
    /// restart) keeps its circuits, and maps one segment however often it restarts. Any other
    /// one left (of other settings) is unmapped.
    ///
    /// # Safety
    /// To be called only by an image of the extension that has no segment yet, at startup while
    /// no other thread runs PHP: every mapping of a `ganesha_shm` memfd in the process is then
    /// one that an earlier image made and that nothing uses any more. Such a memfd is sealed
    /// against shrinking (see `anonymous_file`), so reading its header cannot fault.
    pub unsafe fn adopt_anonymous(layout: Regions, layout_of: LayoutOf) -> Option<Self> {
        let mut adopted = None;
        for leftover in Leftover::find(|leftover| leftover.path == MEMFD_PATH) {
            let fits = leftover.len() == layout.segment_bytes().next_multiple_of(page_size()) && {
                // SAFETY: the mapping is at least HEADER_BYTES long (a segment's length), readable
                // and sealed against shrinking; its words are read atomically, as everywhere.
                let header = unsafe { std::slice::from_raw_parts(leftover.start as *const AtomicU64, header::WORDS) };
                // Relaxed: written before the segment was shared, by the image that made it.
                let bytes: Vec<u8> =
                    header.iter().flat_map(|word| word.load(Ordering::Relaxed).to_ne_bytes()).collect();
                parse_header(&bytes, layout_of).is_ok_and(|found| found == layout)
            };
            if fits && adopted.is_none() {
                let len = layout.segment_bytes();
                adopted = Some(Self::new(Mapping::Adopted { leftover, len }, layout, Backing::Anonymous, false));
            } else {
                // SAFETY: left by an earlier image, as the caller promises.
                unsafe { leftover.unmap() };
            }
        }
        adopted
    }

    /// Maps the segment file at `path`, creating it with permissions `mode` if it does not
    /// exist. Every directory from the root down is opened without following a symbolic link and
    /// checked (see [`TrustedDirectory`]), and the file is opened and created relative to the
    /// last one, so that nobody can redirect it while it is checked. An existing file is refused
    /// unless it is a regular file of this user (or root), grants nothing beyond `mode`, gives
    /// its group access only for this process's group or its setgid directory's, and holds a
    /// segment of this layout for `settings`.
    pub fn open_file(path: &Path, layout: Regions, layout_of: LayoutOf, mode: u32) -> Result<Self, Refusal> {
        let (directory, name) = Self::directory_of(path)?;
        let io = |doing| move |error: io::Error| Refusal::Io { doing, error: error.to_string() };
        // Two rounds at most: the file is missing, and another process links its own first.
        for _ in 0..2 {
            match directory.open_file(&name) {
                Ok(file) => return Self::map_existing(file, path, Some(layout), layout_of, mode, &directory),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io("open it")(e)),
            }
            if let Some(segment) = Self::create_file(&directory, &name, path, layout, mode).map_err(io("create it"))? {
                return Ok(segment);
            }
        }
        Err(Refusal::Io { doing: "open it", error: "it keeps being removed and created again".into() })
    }

    /// Maps the existing segment file at `path`, whatever settings its header gives (the fleet
    /// sidecar has none of its own), after the checks of [`Segment::open_file`], with `mode` as
    /// the most the file may grant. Never creates it: a missing file is [`Refusal::Missing`].
    pub fn attach_file(path: &Path, layout_of: LayoutOf, mode: u32) -> Result<Self, Refusal> {
        let (directory, name) = Self::directory_of(path)?;
        match directory.open_file(&name) {
            Ok(file) => Self::map_existing(file, path, None, layout_of, mode, &directory),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(Refusal::Missing),
            Err(e) => Err(Refusal::Io { doing: "open it", error: e.to_string() }),
        }
    }

    /// The checked directory of the absolute `path`, and the file's name in it.
    fn directory_of(path: &Path) -> Result<(TrustedDirectory, std::ffi::CString), Refusal> {
        if !path.is_absolute() {
            return Err(Refusal::NotAbsolute);
        }
        let name = path
            .file_name()
            .ok_or(Refusal::Directory { path: path.to_path_buf(), why: DirectoryFault::NotCanonical })?;
        let name = std::ffi::CString::new(name.as_encoded_bytes())
            .map_err(|_| Refusal::Io { doing: "open it", error: "the path holds a NUL byte".into() })?;
        let directory = TrustedDirectory::open(path.parent().unwrap_or(Path::new("/")))?;
        Ok((directory, name))
    }

    /// Writes a new segment under a temporary name in `directory`, then links it to `name`
    /// there. `None`: another process linked its own first.
    fn create_file(
        directory: &TrustedDirectory,
        name: &std::ffi::CStr,
        path: &Path,
        layout: Regions,
        mode: u32,
    ) -> io::Result<Option<Self>> {
        let temporary = temporary_name(name);
        let file = directory.create_file(&temporary, mode)?;
        let created = (|| {
            // The umask may have taken bits off `mode`; the file gets exactly `mode`.
            file.set_permissions(std::fs::Permissions::from_mode(mode))?;
            allocate(&file, layout.segment_bytes() as u64)?;
            // Until it is linked below, the file's only name is a temporary one that this process
            // just created (O_EXCL) and that no other process has a reason to open; once
            // linked, every access to it is atomic (see `words`), and a truncation of it is what
            // `guard` handles. (`MmapRaw` hands out only a raw pointer: mapping it is safe.)
            let map = MmapRaw::map_raw(&file)?;
            let mut segment = Self::new(Mapping::Made(map), layout, Backing::File(path.to_path_buf()), true);
            // Before it is linked, as the header: a copy of the file is another file.
            let metadata = file.metadata()?;
            segment.file = (metadata.dev(), metadata.ino());
            segment.note_fleet_file(segment.file);
            match directory.link(&temporary, name) {
                Ok(()) => Ok(Some(segment)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(None),
                Err(e) => Err(e),
            }
        })();
        directory.remove(&temporary);
        created
    }

    /// Maps an existing segment file after checking it: for `layout`'s settings, or for any
    /// (`None`).
    fn map_existing(
        file: File,
        path: &Path,
        layout: Option<Regions>,
        layout_of: LayoutOf,
        mode: u32,
        directory: &TrustedDirectory,
    ) -> Result<Self, Refusal> {
        let metadata = file.metadata().map_err(|e| Refusal::Io { doing: "stat it", error: e.to_string() })?;
        if !metadata.file_type().is_file() {
            return Err(Refusal::NotRegularFile);
        }
        // SAFETY: geteuid has no preconditions and cannot fail.
        let euid = unsafe { libc::geteuid() };
        check_owner(metadata.uid(), euid)?;
        let file_mode = metadata.mode() & 0o7777;
        if file_mode & !mode != 0 {
            return Err(Refusal::Mode { mode: file_mode, allowed: mode });
        }
        if file_mode & 0o070 != 0 {
            // SAFETY: getegid has no preconditions and cannot fail.
            let mut allowed = vec![unsafe { libc::getegid() }];
            allowed.extend(directory.setgid_group());
            if !allowed.contains(&metadata.gid()) {
                return Err(Refusal::Group { gid: metadata.gid(), allowed });
            }
        }
        let mut header = [0; HEADER_BYTES];
        let read = file.read_at(&mut header, 0).map_err(|e| Refusal::Io { doing: "read it", error: e.to_string() })?;
        let found = parse_header(&header[..read], layout_of).map_err(Refusal::Header)?;
        if let Some(ours) = layout.map(|layout| layout.settings).filter(|&ours| ours != found.settings) {
            return Err(Refusal::Header(HeaderError::Settings { file: found.settings, ours }));
        }
        let expected = found.segment_bytes() as u64;
        if metadata.len() != expected {
            return Err(Refusal::Size { bytes: metadata.len(), expected });
        }
        // Other processes map this file and write it while we do; that is its purpose, and every
        // access to it is an atomic operation on an aligned word (see `words`), so it is never a
        // data race. Its length is checked against the layout right below, so the tables never
        // reach past the mapping. What cannot be ruled out is the file being truncated later
        // (a regular file cannot be sealed), which would raise SIGBUS: only the users the checks
        // above admit can write it (this user or root, and a group when ganesha_shm.mode grants
        // it), the very users trusted to share the circuits, and this user can already signal
        // this process.
        let map = MmapRaw::map_raw(&file).map_err(|e| Refusal::Io { doing: "map it", error: e.to_string() })?;
        if map.len() as u64 != expected {
            return Err(Refusal::Size { bytes: map.len() as u64, expected });
        }
        let mut segment = Self::new(Mapping::Made(map), found, Backing::File(path.to_path_buf()), false);
        segment.file = (metadata.dev(), metadata.ino());
        Ok(segment)
    }

    /// Unmaps the segments an earlier image of this extension left in this process (see
    /// [`Segment::adopt_anonymous`]), but this one: anonymous ones, every other mapping of this
    /// segment's file, and those of files that were at its path and were replaced or removed.
    /// (A file that was at another path, before the settings changed, is not recognised.)
    ///
    /// # Safety
    /// As for `adopt_anonymous`: called by the image that just made or adopted this segment, at
    /// startup.
    pub unsafe fn unmap_leftovers(&self) {
        let own = self.map.ptr() as usize;
        let file = match &self.backing {
            Backing::File(path) => std::fs::metadata(path).ok().map(|metadata| (path, metadata)),
            Backing::Anonymous => None,
        };
        let of_the_file = |leftover: &Leftover| {
            let Some((path, metadata)) = &file else {
                return false;
            };
            let shown = path.to_string_lossy();
            let name = path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
            // A file this process created shows the temporary name it was written under.
            let temporary = format!("{}/.{name}.", path.parent().map(|dir| dir.to_string_lossy()).unwrap_or_default());
            (leftover.device, leftover.inode)
                == ((libc::major(metadata.dev()), libc::minor(metadata.dev())), metadata.ino())
                || leftover.path == shown
                || leftover.path == format!("{shown} (deleted)")
                || leftover.path.starts_with(&temporary) && leftover.path.ends_with(".tmp (deleted)")
        };
        for leftover in
            Leftover::find(|leftover| leftover.start != own && (leftover.path == MEMFD_PATH || of_the_file(leftover)))
        {
            // SAFETY: left by an earlier image, as the caller promises.
            unsafe { leftover.unmap() };
        }
    }

    /// A segment over `map`; `fresh`: a new, zero-filled mapping, whose header it writes.
    fn new(map: Mapping, layout: Regions, backing: Backing, fresh: bool) -> Self {
        let mut segment = Self { map, layout, backing, checks_claimers: false, file: (0, 0) };
        if fresh {
            segment.write_header();
        }
        // Relaxed: written once before the segment was shared.
        let creator = segment.header_word(header::PID_NAMESPACE).load(Ordering::Relaxed);
        segment.checks_claimers = creator != 0 && creator == pid_namespace();
        segment
    }

    /// Every word of the segment: what a copy of its file holds.
    pub fn words(&self) -> &[AtomicU64] {
        let words = self.map.len() / 8;
        // SAFETY: the pointer is the start of the mapping (a raw one, or one adopted whole: no
        // shared `&[u8]` is ever made of it, through which writing would be undefined), page-aligned, hence
        // aligned for `AtomicU64`, and `words * 8` bytes are mapped; the mapping lives as long
        // as `self`, which the returned slice borrows. `AtomicU64` has the size and alignment of
        // `u64` and is written through a shared reference by design, and every access to the
        // segment, from this process or another one, is an atomic operation on one of these
        // words, so concurrent access is never a data race.
        unsafe { std::slice::from_raw_parts(self.map.ptr().cast::<AtomicU64>().cast_const(), words) }
    }

    fn header_word(&self, index: usize) -> &AtomicU64 {
        &self.words()[index]
    }

    fn write_header(&self) {
        // Two draws: the host id is published to Redis, the hash seed must stay unknown.
        let words = header_words(&self.layout, random_seed(), pid_namespace(), random_seed());
        for (index, value) in words.into_iter().enumerate() {
            // Relaxed: the segment is being created by the only process that maps it. Others
            // get it through fork, or through `link` and `open` for a file: both order these
            // stores before anything they read.
            self.header_word(index).store(value, Ordering::Relaxed);
        }
    }

    pub fn layout(&self) -> &Regions {
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

    /// The key hash's seed, which differs per segment.
    pub fn hash_seed(&self) -> u64 {
        // Relaxed: written once, before the segment is shared.
        self.header_word(header::HASH_SEED).load(Ordering::Relaxed)
    }

    /// The [`STATS_WORDS`] statistics words, which any process may add to.
    pub fn stats_words(&self) -> &[AtomicU64] {
        &self.words()[header::STATS..header::STATS + STATS_WORDS]
    }

    /// This host's id in the fleet: drawn at random when the segment was made, so that it
    /// names the segment, not the machine or the sidecar's `--host` (which two hosts may share,
    /// and which a restarted sidecar may change).
    pub fn fleet_host_id(&self) -> u64 {
        // Relaxed: written before the segment is shared, and then by the sidecar alone (see
        // `renew_fleet_host_id`), which reads it.
        self.header_word(header::FLEET_HOST_ID).load(Ordering::Relaxed)
    }

    /// Gives this segment a new id in the fleet, noting since when (`now_ms`, unix milliseconds;
    /// 0: every count it holds is the new id's): the sidecar does, once it found that another
    /// segment runs under its id (this file restored from an older copy), so that the two are two
    /// hosts, and what the segment counted before, the fleet has under the old id; so does the
    /// process that takes a copy of the segment (`fleet::take_copy`), under its claim, after it
    /// gave the fleet every count the copy holds. Those two alone write both words, never at once.
    pub fn renew_fleet_host_id(&self, now_ms: u64) -> u64 {
        let id = random_seed();
        // Relaxed (both): words one writer at a time writes (see above), published to other
        // processes by the Release of `note_fleet_file` after a copy, read by the sidecar.
        self.words()[header::FLEET_SINCE].store(now_ms, Ordering::Relaxed);
        self.words()[header::FLEET_HOST_ID].store(id, Ordering::Relaxed);
        id
    }

    /// The file this segment was made in, as `(device, inode)`, or the one a process found it
    /// in when it took it as a copy (`fleet::take_copy`): a segment found in another file is a
    /// copy (an image, a snapshot, a restore), which another host may run too. The inode is
    /// [`header::COPY_BEING_TAKEN`] while a process takes it.
    pub fn fleet_file(&self) -> (u64, u64) {
        // Relaxed: written before the file is linked, then under a claim (`claim_copy`), whose
        // end the inode's Acquire sees, after the device's.
        let inode = self.words()[header::FILE_INODE].load(Ordering::Acquire);
        (self.words()[header::FILE_DEVICE].load(Ordering::Relaxed), inode)
    }

    /// Notes the file this segment is in (see [`Segment::fleet_file`]).
    pub fn note_fleet_file(&self, (device, inode): (u64, u64)) {
        // Relaxed: see `fleet_file`. Release: a process that finds the file noted by a
        // process that took a copy of the segment (`claim_copy`) sees what it wrote before.
        self.words()[header::FILE_DEVICE].store(device, Ordering::Relaxed);
        self.words()[header::FILE_INODE].store(inode, Ordering::Release);
    }

    /// The file this process mapped the segment from, as `(device, inode)`; `(0, 0)` for an
    /// anonymous segment.
    pub fn file(&self) -> (u64, u64) {
        self.file
    }

    /// Claims the taking of this segment as a copy of the segment of `recorded`, the file it
    /// records (see `fleet::take_copy`): true for the one process that claims it, until it
    /// notes its file ([`Segment::note_fleet_file`]), which ends the claim.
    pub fn claim_copy(&self, recorded: (u64, u64)) -> bool {
        // Acquire on success: pairs with the Release of `note_fleet_file`, which recorded the
        // file claimed from. Relaxed on failure: another process claimed it, nothing is read.
        self.words()[header::FILE_INODE]
            .compare_exchange(recorded.1, header::COPY_BEING_TAKEN, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Whether a process claimed the taking of this segment as a copy and has not finished.
    pub fn copy_being_taken(&self) -> bool {
        // Acquire: pairs with the Release of `note_fleet_file`, which ends the claim.
        self.words()[header::FILE_INODE].load(Ordering::Acquire) == header::COPY_BEING_TAKEN
    }

    /// Since when this segment has its fleet id (unix milliseconds): its own counts of the
    /// buckets that began before are an older id's. 0: every count of its own rings is its id's.
    pub fn fleet_since(&self) -> &AtomicU64 {
        &self.words()[header::FLEET_SINCE]
    }

    /// The fleet sidecar's call sequence (the sidecar alone writes it): each call the sidecar
    /// makes to Redis carries a number above the last, which Redis keeps per host, so that a
    /// call delivered late, or again, is refused. Kept in the segment, which is the host, so
    /// that it goes on across the sidecar's restarts.
    pub fn fleet_sequence(&self) -> &AtomicU64 {
        &self.words()[header::FLEET_SEQUENCE]
    }

    /// The window an adapter in fleet mode reads in, as it last noted it (`fleet::note_window`):
    /// the sidecar reads the services this host has not counted in it (the fleet-only region).
    pub fn fleet_window_noted(&self) -> &AtomicU64 {
        &self.words()[header::FLEET_WINDOW]
    }

    /// How far this host's clock is ahead of Redis's (`fleet::read_clock`): the sidecar alone
    /// writes it, and moves it only when the clock moved by more than a second, so that the
    /// buckets it shares are stamped on Redis's clock alike across its syncs and restarts.
    pub fn fleet_clock(&self) -> &AtomicU64 {
        &self.words()[header::FLEET_CLOCK]
    }

    /// The figures the fleet sidecar stamped this host's buckets by, and since when (see
    /// `fleet::ClockFigure`): the sidecar alone writes and reads them, so that one restarted
    /// stamps every bucket the segment holds as it was first shared, across steps of the clock.
    pub fn fleet_clock_figures(&self) -> &[AtomicU64] {
        &self.words()[header::FLEET_CLOCK_FIGURES..header::FLEET_CLOCK_FIGURES + FLEET_CLOCK_FIGURES_WORDS]
    }

    /// How many resets of the reset log (`ResetLog::tickets`) the fleet's counts in the segment
    /// (the fleet rings, the fleet-only region) reflect: the sidecar read that many before the
    /// sync that wrote them. A key that a reset noted since covers reads none of the fleet's
    /// counts until the sidecar has shared it and written them again (see
    /// `Store::load_with_fleet`). The sidecar alone writes it.
    pub fn fleet_resets_taken(&self) -> &AtomicU64 {
        &self.words()[header::FLEET_RESETS_TAKEN]
    }

    /// The [`FLEET_WORDS`] words of the fleet sidecar's state: the sidecar writes them, any
    /// process reads them.
    pub fn fleet_words(&self) -> &[AtomicU64] {
        &self.words()[header::FLEET_SYNC..header::FLEET_SYNC + FLEET_WORDS]
    }

    /// The words of region `index` of the layout.
    pub fn region(&self, index: usize) -> &[AtomicU64] {
        let start = header::WORDS + self.layout.words[..index].iter().sum::<usize>();
        &self.words()[start..start + self.layout.words[index]]
    }
}

/// The guard of a segment file against truncation.
///
/// A regular file cannot be sealed: whoever may write a segment file may also shrink it, and
/// every process mapping it would then get SIGBUS at its next access past the new end, which
/// kills it (and, in php-fpm, every worker forked from a master whose mapping is broken). So a
/// process that maps a file installs a SIGBUS handler: a fault inside the segment maps
/// zero-filled shared anonymous memory over the whole segment (`MAP_FIXED`: the same addresses,
/// so everything that refers to the segment stays valid), writes the header back, notes the
/// loss and returns, and the faulting access runs again on the new memory. The process goes on
/// with a segment of its own, its circuits closed (they were lost with the file), and says so
/// once (`take_loss`). A fault anywhere else goes to the handler installed before ours, or ends
/// the process as it would have without ours.
///
/// A server may install a SIGBUS handler of its own after PHP started: Apache's prefork parent
/// does, for its core dumps, and its children inherit it. So the guard is checked again at the
/// start of the first request of every process (`on_request`, after a fork: one relaxed load
/// otherwise), and put back in front of whatever handler is there, which it then calls for the
/// faults that are not in the segment.
///
/// A threaded server (Apache's event MPM, FrankenPHP) may start that first request on several
/// threads at once, and so may check and change the action at once: that is done under
/// `CHANGING`, a lock of this process's memory.
#[cfg(target_os = "linux")]
pub mod guard {
    use std::cell::UnsafeCell;
    use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

    use super::{header, page_size, Backing, Segment};

    /// The guarded range: start and length, 0 when none is guarded.
    static START: AtomicUsize = AtomicUsize::new(0);
    static LENGTH: AtomicUsize = AtomicUsize::new(0);
    /// The segment's header, to write into the memory mapped over the segment.
    static HEADER: [AtomicU64; header::WORDS] = [const { AtomicU64::new(0) }; header::WORDS];
    /// `INTACT`, `LOST` (not reported yet) or `REPORTED`.
    static STATE: AtomicU32 = AtomicU32::new(INTACT);
    const INTACT: u32 = 0;
    const LOST: u32 = 1;
    const REPORTED: u32 = 2;

    /// The SIGBUS action in place before ours, restored by `uninstall`.
    struct Previous(UnsafeCell<Option<libc::sigaction>>);
    // SAFETY: written only under `CHANGING` and while ours is not the SIGBUS action (before it
    // is put in front, or as it is taken down); the handler reads it only while it is installed.
    unsafe impl Sync for Previous {}
    static PREVIOUS: Previous = Previous(UnsafeCell::new(None));

    /// Whether this process's SIGBUS action was checked to be ours since it was forked.
    static CHECKED: AtomicBool = AtomicBool::new(false);

    /// Held while the SIGBUS action and `PREVIOUS` are read and changed: by one thread at a
    /// time, for two `sigaction` calls. A spin lock, not a mutex: a fork child, which has only
    /// the forking thread, frees it (`forked`), so a fork while another thread held it cannot
    /// leave the child's first request waiting for ever.
    static CHANGING: AtomicBool = AtomicBool::new(false);

    /// Runs `change` holding `CHANGING`.
    fn changing<R>(change: impl FnOnce() -> R) -> R {
        // Acquire: what the last holder wrote (`PREVIOUS`, `CHECKED`) is seen by this one.
        while CHANGING.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
            std::thread::yield_now();
        }
        let result = change();
        // Release: what this holder wrote is seen by the next one.
        CHANGING.store(false, Ordering::Release);
        result
    }

    /// Guards `segment` when it is a file; once per process image, at startup.
    pub fn install(segment: &Segment) {
        if !matches!(segment.backing, Backing::File(_)) || LENGTH.load(Ordering::Relaxed) != 0 {
            return;
        }
        for (index, (word, value)) in HEADER.iter().zip(&segment.words()[..header::WORDS]).enumerate() {
            // The fleet's state is left out: a segment restored from this copy has no fleet view
            // until the sidecar syncs again, rather than one that looks as fresh as at startup.
            let fleet = (header::FLEET_SYNC..header::FLEET_SYNC + super::FLEET_WORDS).contains(&index)
                || [header::FLEET_SEQUENCE, header::FLEET_CLOCK, header::FLEET_SINCE].contains(&index)
                || (header::FLEET_CLOCK_FIGURES..header::FLEET_CLOCK_FIGURES + super::FLEET_CLOCK_FIGURES_WORDS)
                    .contains(&index);
            // Relaxed: read and written before the handler is installed.
            word.store(if fleet { 0 } else { value.load(Ordering::Relaxed) }, Ordering::Relaxed);
        }
        START.store(segment.map.ptr() as usize, Ordering::Relaxed);
        LENGTH.store(segment.map.len().next_multiple_of(page_size()), Ordering::Relaxed);
        // SAFETY: `forked` only stores to an atomic, which is async-signal-safe as a fork child
        // handler must be; glibc drops the registration when this library is unloaded.
        unsafe { libc::pthread_atfork(None, None, Some(forked)) };
        changing(put_in_front);
    }

    /// At the start of a request: the guard is put back in front of a SIGBUS handler
    /// installed since, once per process (see the module documentation).
    #[inline]
    pub fn on_request() {
        // Relaxed: a thread that finds the flag unset checks again under `CHANGING`, which
        // orders what the setting thread did; one that finds it set needs nothing of it.
        if !CHECKED.load(Ordering::Relaxed) && LENGTH.load(Ordering::Relaxed) != 0 {
            changing(|| {
                if !CHECKED.load(Ordering::Relaxed) {
                    put_in_front();
                }
            });
        }
    }

    extern "C" fn forked() {
        // Relaxed: the child has one thread, this one, until it starts others.
        CHECKED.store(false, Ordering::Relaxed);
        CHANGING.store(false, Ordering::Relaxed);
    }

    /// Makes `on_sigbus` the SIGBUS action, keeping the one it replaces to call for the other
    /// faults; nothing if it already is. Only under `CHANGING`.
    fn put_in_front() {
        // Relaxed: read under `CHANGING`, which orders it.
        CHECKED.store(true, Ordering::Relaxed);
        // SAFETY: a zeroed sigaction is a valid one to fill; `on_sigbus` has the signature
        // SA_SIGINFO asks for; the action replaced is written into `PREVIOUS`, which only the
        // holder of `CHANGING` writes, and the handler reads only once it is installed (see
        // `Previous`).
        unsafe {
            let mut current: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut current) != 0
                || current.sa_sigaction == on_sigbus as *const () as usize
            {
                return;
            }
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_sigbus as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut action.sa_mask);
            *PREVIOUS.0.get() = Some(current);
            #[cfg(test)]
            tests::PREVIOUS_WRITES.fetch_add(1, Ordering::Relaxed);
            if libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut()) != 0 {
                *PREVIOUS.0.get() = None;
            }
        }
    }

    /// Puts the action in place before ours back (at MSHUTDOWN: the SAPI may unload this
    /// library next, and a handler must not be left pointing into it).
    pub fn uninstall() {
        // SAFETY: as in `put_in_front`, under `CHANGING`. The action before ours is put back
        // only while ours is the one in place: a handler installed over ours since (Apache's
        // parent installs one) stays, and calls nothing of this library.
        changing(|| unsafe {
            let mut current: libc::sigaction = std::mem::zeroed();
            let ours = libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut current) == 0
                && current.sa_sigaction == on_sigbus as *const () as usize;
            if let Some(previous) = (*PREVIOUS.0.get()).take().filter(|_| ours) {
                libc::sigaction(libc::SIGBUS, &previous, std::ptr::null_mut());
            }
        });
        LENGTH.store(0, Ordering::Relaxed);
        // A segment installed after this (the fleet sidecar attaching to a new file) starts intact.
        STATE.store(INTACT, Ordering::Relaxed);
    }

    /// Whether the segment file was lost (truncated under the mapping) in this process.
    #[inline]
    pub fn lost() -> bool {
        STATE.load(Ordering::Relaxed) != INTACT
    }

    /// Whether the segment file was lost and `take_loss` has not said so yet: one relaxed load.
    #[inline]
    pub fn unreported() -> bool {
        STATE.load(Ordering::Relaxed) == LOST
    }

    /// True once, the first time it is asked after the segment file was lost: for the one
    /// warning line.
    #[inline]
    pub fn take_loss() -> bool {
        unreported() && STATE.compare_exchange(LOST, REPORTED, Ordering::Relaxed, Ordering::Relaxed).is_ok()
    }

    extern "C" fn on_sigbus(signal: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
        // Only async-signal-safe steps: atomics, mmap, sigaction.
        let (start, length) = (START.load(Ordering::Relaxed), LENGTH.load(Ordering::Relaxed));
        // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
        let address = unsafe { (*info).si_addr() } as usize;
        if length != 0 && (start..start + length).contains(&address) {
            // SAFETY: the range is the whole segment mapping, which this process made and owns;
            // mapping anonymous memory over it in one call replaces it for every thread at once,
            // at the same addresses, so every reference to the segment stays valid (its words are
            // only ever accessed atomically, and zero is a value they may hold).
            let mapped = unsafe {
                libc::mmap(
                    start as *mut libc::c_void,
                    length,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                    -1,
                    0,
                )
            };
            if mapped as usize == start {
                // SAFETY: the new memory holds the header's words, aligned and mapped.
                let words = unsafe { std::slice::from_raw_parts(start as *const AtomicU64, header::WORDS) };
                for (word, value) in words.iter().zip(&HEADER) {
                    // Relaxed: this process's own memory now; the layers above read it atomically.
                    word.store(value.load(Ordering::Relaxed), Ordering::Relaxed);
                }
                let _ = STATE.compare_exchange(INTACT, LOST, Ordering::Relaxed, Ordering::Relaxed);
                return;
            }
        }
        // Not ours: the action before ours, or the default one (the fault repeats on return).
        // SAFETY: `PREVIOUS` is not written while the handler is installed (see `Previous`).
        let Some(previous) = (unsafe { *PREVIOUS.0.get() }) else {
            // SAFETY: restoring the default action of SIGBUS, async-signal-safe.
            unsafe { libc::signal(libc::SIGBUS, libc::SIG_DFL) };
            return;
        };
        match previous.sa_sigaction {
            libc::SIG_DFL | libc::SIG_IGN => {
                // SAFETY: as above, the previous action, then the fault repeats under it.
                unsafe { libc::sigaction(libc::SIGBUS, &previous, std::ptr::null_mut()) };
            }
            handler if previous.sa_flags & libc::SA_SIGINFO != 0 => {
                // SAFETY: an SA_SIGINFO handler someone installed, called as the kernel would.
                let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    unsafe { std::mem::transmute(handler) };
                handler(signal, info, context);
            }
            handler => {
                // SAFETY: a plain handler someone installed, called as the kernel would.
                let handler: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(handler) };
                handler(signal);
            }
        }
    }

    #[cfg(test)]
    pub(super) mod tests {
        use super::*;
        use crate::segment::tests::{regions, settings};

        /// How often `put_in_front` wrote `PREVIOUS`.
        pub static PREVIOUS_WRITES: AtomicUsize = AtomicUsize::new(0);

        extern "C" fn foreign(_signal: libc::c_int) {}

        /// The first request after a fork, started on 8 threads at once (Apache's event MPM): one
        /// of them puts the guard back in front of the handler installed over it, and keeps that
        /// handler to call, while the others wait and find it done.
        #[test]
        fn threads_starting_their_first_requests_at_once_put_the_guard_back_once() {
            let dir = std::env::temp_dir().join(format!("ganesha-shm-guard-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let segment = Segment::open_file(&dir.join("segment"), regions(settings(4)), regions, 0o600).unwrap();
            install(&segment);
            for round in 0..3000 {
                // SAFETY: a plain handler that does nothing, installed over ours as Apache's parent
                // installs one; this test is the only one of the binary that touches SIGBUS.
                unsafe { libc::signal(libc::SIGBUS, foreign as *const () as libc::sighandler_t) };
                forked();
                PREVIOUS_WRITES.store(0, Ordering::Relaxed);
                let start = std::sync::Barrier::new(8);
                std::thread::scope(|scope| {
                    for _ in 0..8 {
                        scope.spawn(|| {
                            start.wait();
                            on_request();
                        });
                    }
                });
                assert_eq!(PREVIOUS_WRITES.load(Ordering::Relaxed), 1, "round {round}: the action changed once");
                // SAFETY: reads the current action into a zeroed one; `PREVIOUS` is read with the
                // threads that wrote it joined.
                let (current, previous) = unsafe {
                    let mut current: libc::sigaction = std::mem::zeroed();
                    libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut current);
                    (current.sa_sigaction, (*PREVIOUS.0.get()).map(|action| action.sa_sigaction))
                };
                assert_eq!(current, on_sigbus as *const () as usize, "round {round}: the guard in front");
                assert_eq!(
                    previous,
                    Some(foreign as *const () as usize),
                    "round {round}: the handler it replaced kept"
                );
            }
            uninstall();
            // SAFETY: the default action back, as before the test.
            unsafe { libc::signal(libc::SIGBUS, libc::SIG_DFL) };
            drop(segment);
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }
}

/// A new memfd of `bytes` bytes, sealed so that nobody can shrink or grow it (or change its
/// seals) from now on.
#[cfg(target_os = "linux")]
fn anonymous_file(bytes: u64) -> io::Result<File> {
    use std::os::fd::{AsRawFd, FromRawFd};
    // SAFETY: the name is a NUL-terminated C string; memfd_create returns a new descriptor or
    // -1, and a new descriptor is owned by nobody else, so `File` may take ownership of it.
    let file = unsafe {
        let fd = libc::memfd_create(c"ganesha_shm".as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        File::from_raw_fd(fd)
    };
    file.set_len(bytes)?;
    let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
    // SAFETY: fcntl on a descriptor `file` owns; F_ADD_SEALS takes an int and touches no memory.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(file)
}

#[cfg(not(target_os = "linux"))]
fn anonymous_file(bytes: u64) -> io::Result<File> {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let path = std::env::temp_dir().join(format!("ganesha_shm.{}.{nanos}", std::process::id()));
    let file = std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(&path)?;
    std::fs::remove_file(&path)?;
    file.set_len(bytes)?;
    Ok(file)
}

/// A file owned by `uid` may be mapped by a process of effective uid `euid`: its own, or root's.
fn check_owner(uid: u32, euid: u32) -> Result<(), Refusal> {
    if uid != euid && uid != 0 {
        return Err(Refusal::Owner { uid, euid });
    }
    Ok(())
}

/// A directory trusted to hold the segment file, open: every directory from the root down to
/// it was opened relative to the one before, without following a symbolic link, and each
/// belongs to root or to this process's user and may be written by others than its owner only
/// with the sticky bit (as OpenSSH checks the files it trusts). So nobody but root and this
/// user can replace, remove or create the file, or point the path elsewhere, while or after it
/// is checked: the file is opened and created relative to this directory.
struct TrustedDirectory {
    fd: std::os::fd::OwnedFd,
    metadata: std::fs::Metadata,
}

impl TrustedDirectory {
    fn open(path: &Path) -> Result<Self, Refusal> {
        use std::path::Component;
        let mut walked = PathBuf::from("/");
        let mut directory = Self::open_at(libc::AT_FDCWD, c"/", &walked)?;
        for component in path.components() {
            match component {
                Component::RootDir => {}
                Component::Normal(name) => {
                    walked.push(name);
                    let name = std::ffi::CString::new(name.as_encoded_bytes()).map_err(|_| Refusal::Directory {
                        path: walked.clone(),
                        why: DirectoryFault::Open("a NUL byte in its name".into()),
                    })?;
                    directory = Self::open_at(std::os::fd::AsRawFd::as_raw_fd(&directory.fd), &name, &walked)?;
                }
                Component::CurDir | Component::ParentDir | Component::Prefix(_) => {
                    return Err(Refusal::Directory { path: walked, why: DirectoryFault::NotCanonical });
                }
            }
        }
        Ok(directory)
    }

    /// Opens `name` in the directory `at` as a directory, without following a symbolic link,
    /// and checks it; `path` names it in a refusal.
    fn open_at(at: libc::c_int, name: &std::ffi::CStr, path: &Path) -> Result<Self, Refusal> {
        use std::os::fd::FromRawFd;
        let refuse = |why| Refusal::Directory { path: path.to_path_buf(), why };
        // SAFETY: openat with a NUL-terminated name and a directory descriptor this process
        // holds (or AT_FDCWD); a new descriptor is owned by nobody else.
        let fd = unsafe {
            let fd = libc::openat(
                at,
                name.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            );
            if fd < 0 {
                return Err(refuse(DirectoryFault::Open(io::Error::last_os_error().to_string())));
            }
            std::os::fd::OwnedFd::from_raw_fd(fd)
        };
        let file = File::from(fd);
        let metadata = file.metadata().map_err(|e| refuse(DirectoryFault::Open(e.to_string())))?;
        // SAFETY: geteuid has no preconditions and cannot fail.
        let euid = unsafe { libc::geteuid() };
        if metadata.uid() != 0 && metadata.uid() != euid {
            return Err(refuse(DirectoryFault::Owner { uid: metadata.uid(), euid }));
        }
        let mode = metadata.mode() & 0o7777;
        if mode & 0o022 != 0 && mode & libc::S_ISVTX == 0 {
            return Err(refuse(DirectoryFault::Writable { mode }));
        }
        Ok(Self { fd: file.into(), metadata })
    }

    /// The directory's group, when it is setgid: the group it gives the files made in it.
    fn setgid_group(&self) -> Option<u32> {
        (self.metadata.mode() & libc::S_ISGID != 0).then(|| self.metadata.gid())
    }

    fn raw(&self) -> libc::c_int {
        std::os::fd::AsRawFd::as_raw_fd(&self.fd)
    }

    /// Opens the existing file `name` for reading and writing, without following a symbolic
    /// link (refused as "cannot open") or blocking on a FIFO (refused once its type is checked).
    fn open_file(&self, name: &std::ffi::CStr) -> io::Result<File> {
        self.openat(name, libc::O_RDWR | libc::O_CLOEXEC | libc::O_NOFOLLOW | libc::O_NONBLOCK, 0)
    }

    /// Creates the file `name`, which must not exist, with permissions `mode` (less the umask).
    fn create_file(&self, name: &std::ffi::CStr, mode: u32) -> io::Result<File> {
        self.openat(name, libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC | libc::O_NOFOLLOW, mode)
    }

    fn openat(&self, name: &std::ffi::CStr, flags: libc::c_int, mode: u32) -> io::Result<File> {
        use std::os::fd::FromRawFd;
        // SAFETY: openat with a NUL-terminated name relative to a directory this value holds open;
        // a new descriptor is owned by nobody else.
        unsafe {
            let fd = libc::openat(self.raw(), name.as_ptr(), flags, mode as libc::c_uint);
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(File::from_raw_fd(fd))
        }
    }

    /// Gives the file `from` the name `to` too (failing with AlreadyExists if `to` exists).
    fn link(&self, from: &std::ffi::CStr, to: &std::ffi::CStr) -> io::Result<()> {
        // SAFETY: linkat with NUL-terminated names relative to a directory this value holds open.
        if unsafe { libc::linkat(self.raw(), from.as_ptr(), self.raw(), to.as_ptr(), 0) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Removes the name `name`, if it is there.
    fn remove(&self, name: &std::ffi::CStr) {
        // SAFETY: unlinkat with a NUL-terminated name relative to a directory this value holds.
        unsafe { libc::unlinkat(self.raw(), name.as_ptr(), 0) };
    }
}

/// A name beside `name`, unique to this process and moment, for a file being created.
fn temporary_name(name: &std::ffi::CStr) -> std::ffi::CString {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let mut temporary = b".".to_vec();
    temporary.extend_from_slice(name.to_bytes());
    temporary.extend_from_slice(format!(".{}.{nanos}.tmp", std::process::id()).as_bytes());
    std::ffi::CString::new(temporary).unwrap_or_default()
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

/// The size of a page, which mappings span whole.
fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).unwrap_or(4096)
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
pub(crate) mod tests {
    use super::*;
    use std::fs::OpenOptions;

    pub(crate) fn settings(max_services: u64) -> Settings {
        Settings { max_services, max_key_length: 160, max_buckets: 120, fleet: false }
    }

    /// A layout of two regions for the segment's own tests, shaped like the store's.
    pub(crate) fn regions(settings: Settings) -> Regions {
        Regions {
            settings,
            ring_buckets: settings.max_buckets + 2,
            words: [
                settings.max_services as usize * 300,
                settings.max_services as usize * 10 + settings.max_key_length as usize,
                0,
                0,
            ],
        }
    }

    fn anonymous(max_services: u64) -> Segment {
        Segment::create_anonymous(regions(settings(max_services))).unwrap()
    }

    fn open(path: &Path, settings: Settings, mode: u32) -> Result<Segment, Refusal> {
        Segment::open_file(path, regions(settings), regions, mode)
    }

    #[test]
    fn a_created_segment_has_its_header_and_zeroed_regions() {
        let segment = anonymous(4);
        assert_eq!(segment.header_word(header::MAGIC).load(Ordering::Relaxed), MAGIC);
        assert_eq!(segment.layout_version(), LAYOUT_VERSION);
        assert_eq!(segment.map.len(), segment.layout().segment_bytes());
        assert!(segment.words()[header::WORDS..].iter().all(|w| w.load(Ordering::Relaxed) == 0));
        assert_eq!(segment.region(0).len(), 1200);
        assert_eq!(segment.region(1).len(), 200);
        assert!(std::ptr::eq(&segment.region(1)[0], &segment.words()[header::WORDS + 1200]));
    }

    #[test]
    fn the_mapping_is_shared_with_forked_children() {
        let segment = anonymous(1);
        let word = segment.header_word(header::STATS);
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
    pub(crate) struct TempDir(PathBuf);

    impl TempDir {
        pub(crate) fn new() -> Self {
            let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
            let dir = std::env::temp_dir().join(format!("ganesha_shm_test.{}.{nanos}", std::process::id()));
            std::fs::create_dir(&dir).unwrap();
            Self(dir)
        }

        pub(crate) fn file(&self, name: &str) -> PathBuf {
            self.0.join(name)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn refusal(path: &Path, settings: Settings, mode: u32) -> Refusal {
        open(path, settings, mode).err().expect("the file should be refused")
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
        let first = open(&path, settings(2), 0o600).unwrap();
        assert_eq!(first.backing(), &Backing::File(path.clone()));
        let metadata = std::fs::metadata(&path).unwrap();
        assert_eq!(metadata.len(), first.layout().segment_bytes() as u64);
        assert_eq!(metadata.mode() & 0o7777, 0o600);
        assert_eq!(&std::fs::read(&path).unwrap()[..8], b"GANESHM1");
        assert_eq!(std::fs::read_dir(&dir.0).unwrap().count(), 1, "no temporary file is left behind");

        let second = open(&path, settings(2), 0o600).unwrap();
        first.header_word(header::STATS).fetch_add(7, Ordering::SeqCst);
        assert_eq!(second.header_word(header::STATS).load(Ordering::SeqCst), 7);
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
        let created = open(&path, settings(1), 0o660);
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
            let openers: Vec<_> = (0..8).map(|_| scope.spawn(|| open(&path, settings(1), 0o600).unwrap())).collect();
            openers.into_iter().map(|opener| opener.join().unwrap()).collect()
        });
        segments[0].header_word(header::STATS + 1).fetch_add(1, Ordering::SeqCst);
        assert!(segments.iter().all(|s| s.header_word(header::STATS + 1).load(Ordering::SeqCst) == 1));
        assert_eq!(std::fs::read_dir(&dir.0).unwrap().count(), 1);
    }

    #[test]
    fn other_settings_are_refused_without_touching_the_file() {
        let dir = TempDir::new();
        let path = dir.file("circuits");
        open(&path, settings(2), 0o600).unwrap();
        let before = std::fs::read(&path).unwrap();
        for other in [
            settings(1),
            settings(3),
            Settings { max_key_length: 64, ..settings(2) },
            Settings { max_buckets: 60, ..settings(2) },
        ] {
            let expected = HeaderError::Settings { file: settings(2), ours: other };
            assert_eq!(refusal(&path, other, 0o600), Refusal::Header(expected));
        }
        assert_eq!(std::fs::read(&path).unwrap(), before);
    }

    #[test]
    fn files_granting_more_than_the_mode_are_refused() {
        let dir = TempDir::new();
        let path = dir.file("circuits");
        open(&path, settings(1), 0o600).unwrap();
        for mode in [0o620, 0o602, 0o640, 0o4600] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            assert_eq!(refusal(&path, settings(1), 0o600), Refusal::Mode { mode, allowed: 0o600 });
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        open(&path, settings(1), 0o660).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o400)).unwrap();
        open(&path, settings(1), 0o600).expect("granting less is fine (as root, still writable)");
    }

    #[test]
    fn files_of_the_wrong_size_are_refused() {
        let dir = TempDir::new();
        let path = dir.file("circuits");
        let expected = regions(settings(1)).segment_bytes() as u64;
        open(&path, settings(1), 0o600).unwrap();
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
            open(&path, settings(1), 0o600).unwrap();
        };
        let cases = [
            (header::MAGIC, u64::from_ne_bytes(*b"APCU0001"), HeaderError::Foreign),
            (header::LAYOUT_VERSION, 1, HeaderError::Version { found: 1 }),
            (header::RING_BUCKETS, 60, HeaderError::Corrupt { what: "ring size" }),
            (header::MAX_SERVICES, 0, HeaderError::Corrupt { what: "settings out of range" }),
            (header::SEGMENT_BYTES, 4096, HeaderError::Corrupt { what: "segment size" }),
        ];
        for (index, value, error) in cases {
            create();
            write_word(&path, index, value);
            assert_eq!(refusal(&path, settings(1), 0o600), Refusal::Header(error));
        }
        std::fs::write(&path, vec![0; regions(settings(1)).segment_bytes()]).unwrap();
        assert_eq!(refusal(&path, settings(1), 0o600), Refusal::Header(HeaderError::Foreign));
    }

    /// Finding 2 of issue 21: every directory of the path is checked, not only the file.
    #[test]
    fn a_symbolic_link_or_a_dot_dot_anywhere_on_the_path_is_refused() {
        let dir = TempDir::new();
        std::fs::create_dir(dir.file("target")).unwrap();
        std::os::unix::fs::symlink(dir.file("target"), dir.file("dir")).unwrap();
        let refused = refusal(&dir.file("dir").join("circuits"), settings(1), 0o600);
        assert!(
            matches!(&refused, Refusal::Directory { path, why: DirectoryFault::Open(_) } if *path == dir.file("dir")),
            "{refused:?}"
        );
        assert!(!dir.file("target").join("circuits").exists(), "nothing created where the link points");
        let dotted = dir.file("target").join("..").join("target").join("circuits");
        assert!(matches!(
            refusal(&dotted, settings(1), 0o600),
            Refusal::Directory { why: DirectoryFault::NotCanonical, .. }
        ));
        assert!(open(&dir.file("target").join("circuits"), settings(1), 0o600).is_ok(), "the real directory is fine");
    }

    #[test]
    fn a_directory_others_may_write_is_refused_unless_it_is_sticky() {
        let dir = TempDir::new();
        let open_dir = dir.file("open");
        std::fs::create_dir(&open_dir).unwrap();
        for mode in [0o777, 0o770, 0o2770, 0o757] {
            std::fs::set_permissions(&open_dir, std::fs::Permissions::from_mode(mode)).unwrap();
            let refused = refusal(&open_dir.join("circuits"), settings(1), 0o600);
            assert_eq!(refused, Refusal::Directory { path: open_dir.clone(), why: DirectoryFault::Writable { mode } });
            assert!(refused.to_string().contains("no sticky bit"), "{refused}");
        }
        for mode in [0o1777, 0o3770, 0o755, 0o700] {
            std::fs::set_permissions(&open_dir, std::fs::Permissions::from_mode(mode)).unwrap();
            assert!(open(&open_dir.join("circuits"), settings(1), 0o600).is_ok(), "{mode:o}");
            std::fs::remove_file(open_dir.join("circuits")).unwrap();
        }
    }

    /// As root: a directory owned by another user is refused (`nobody` could put any file there,
    /// or take the file away), and so is a file granting its group access for a group that is
    /// neither this process's nor its setgid directory's.
    #[test]
    fn a_directory_of_another_user_and_a_file_of_another_group_are_refused() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: needs root to give files to other users");
            return;
        }
        let dir = TempDir::new();
        let theirs = dir.file("theirs");
        std::fs::create_dir(&theirs).unwrap();
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
        assert_eq!(
            refusal(&theirs.join("circuits"), settings(1), 0o600),
            Refusal::Directory { path: theirs, why: DirectoryFault::Owner { uid: 65534, euid: 0 } }
        );
        let path = dir.file("circuits");
        drop(open(&path, settings(1), 0o660).unwrap());
        std::os::unix::fs::chown(&path, None, Some(65534)).unwrap();
        assert!(matches!(refusal(&path, settings(1), 0o660), Refusal::Group { gid: 65534, .. }));
        assert!(open(&path, settings(1), 0o600).is_err(), "nor does a narrower mode admit it (it grants more)");
        // a setgid directory of that group gives it to its files: then it is the one expected
        std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o2700)).unwrap();
        std::os::unix::fs::chown(&dir.0, None, Some(65534)).unwrap();
        assert!(open(&path, settings(1), 0o660).is_ok());
    }

    #[test]
    fn links_directories_fifos_and_relative_paths_are_refused() {
        let dir = TempDir::new();
        let target = dir.file("target");
        open(&target, settings(1), 0o600).unwrap();
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
    fn the_owner_check_admits_this_user_and_root_only() {
        assert_eq!(check_owner(1000, 1000), Ok(()));
        assert_eq!(check_owner(0, 1000), Ok(()), "a file owned by root is accepted");
        assert_eq!(check_owner(65534, 1000), Err(Refusal::Owner { uid: 65534, euid: 1000 }));
        assert_eq!(check_owner(65534, 0), Err(Refusal::Owner { uid: 65534, euid: 0 }));
    }

    /// Giving a file to another user needs root (CI runs as root). As another user the test
    /// checks the refusal on a file of its own through the same check, as if it belonged to
    /// someone else, and says that the chown part did not run, instead of passing silently.
    #[test]
    fn files_of_another_user_are_refused() {
        // SAFETY: geteuid cannot fail.
        let euid = unsafe { libc::geteuid() };
        if euid != 0 {
            let dir = TempDir::new();
            let path = dir.file("circuits");
            open(&path, settings(1), 0o600).unwrap();
            let owner = std::fs::metadata(&path).unwrap().uid();
            assert_eq!(owner, euid);
            assert_eq!(check_owner(owner, euid + 1), Err(Refusal::Owner { uid: owner, euid: euid + 1 }));
            eprintln!("files_of_another_user_are_refused: not root, so the file was not given to another user");
            return;
        }
        let dir = TempDir::new();
        let path = dir.file("circuits");
        open(&path, settings(1), 0o600).unwrap();
        std::os::unix::fs::chown(&path, Some(65534), None).unwrap();
        assert_eq!(refusal(&path, settings(1), 0o600), Refusal::Owner { uid: 65534, euid: 0 });
    }

    #[test]
    fn a_valid_header_parses_to_its_layout() {
        let layout = regions(settings(3));
        let bytes: Vec<u8> = header_words(&layout, 1, 2, 3).iter().flat_map(|w| w.to_ne_bytes()).collect();
        assert_eq!(parse_header(&bytes, regions), Ok(layout));
        assert_eq!(
            parse_header(&bytes[..HEADER_BYTES - 1], regions),
            Err(HeaderError::Short { bytes: HEADER_BYTES - 1 })
        );
    }

    /// The header parser fed arbitrary bytes: whatever a file holds, opening it either refuses
    /// it or describes a consistent layout (the store over damaged tables: see store.rs).
    mod fuzz {
        use super::*;
        use proptest::collection::vec;
        use proptest::prelude::*;

        fn header_bytes(words: &[u64]) -> Vec<u8> {
            words.iter().flat_map(|w| w.to_ne_bytes()).collect()
        }

        /// Header words the parser checks; the others (seed, statistics, namespace, spare) may
        /// hold anything.
        const CHECKED: [usize; 8] = [
            header::MAGIC,
            header::LAYOUT_VERSION,
            header::SEGMENT_BYTES,
            header::MAX_SERVICES,
            header::MAX_KEY_LENGTH,
            header::RING_BUCKETS,
            header::MAX_BUCKETS,
            header::FLEET,
        ];

        proptest! {
            #![proptest_config(ProptestConfig { cases: 4000, failure_persistence: None, ..ProptestConfig::default() })]

            /// Arbitrary bytes, half of the time over a valid header (random bytes alone would
            /// need 64 random bits to match the magic, so the parsing past it would never run).
            #[test]
            fn arbitrary_bytes_parse_to_an_error_or_a_consistent_layout(
                over_header in any::<bool>(),
                max_services in 1u64..5000,
                noise in vec((0usize..HEADER_BYTES + 8, any::<u8>()), 0..6),
                length in 0usize..200,
            ) {
                let mut bytes = if over_header {
                    header_bytes(&header_words(&regions(Settings { max_services, ..settings(1) }), 1, 2, 3))
                } else {
                    vec![0; 0]
                };
                bytes.resize(if over_header { bytes.len().max(length) } else { length }, 0);
                for (at, byte) in noise {
                    if let Some(b) = bytes.get_mut(at) {
                        *b = byte;
                    }
                }
                if let Ok(layout) = parse_header(&bytes, regions) {
                    prop_assert!(layout.settings.in_range());
                    prop_assert_eq!(&bytes[..8], b"GANESHM1");
                    prop_assert_eq!(layout.segment_bytes() as u64, u64::from_ne_bytes(bytes[16..24].try_into().unwrap()));
                    prop_assert_eq!(layout, regions(layout.settings));
                }
            }

            #[test]
            fn a_header_with_one_word_changed_is_refused_or_describes_what_it_says(
                max_services in 1u64..5000,
                max_key_length in 8u64..4097,
                max_buckets in 1u64..121,
                index in 0..header::WORDS,
                value in prop_oneof![any::<u64>(), 0u64..10_000_000],
            ) {
                let layout = regions(Settings { max_services, max_key_length, max_buckets, fleet: false });
                let mut words = header_words(&layout, 7, 9, 11);
                words[index] = value;
                match parse_header(&header_bytes(&words), regions) {
                    Ok(parsed) => {
                        prop_assert_eq!(parsed.segment_bytes() as u64, words[header::SEGMENT_BYTES]);
                        prop_assert_eq!(parsed.settings.max_services, words[header::MAX_SERVICES]);
                        prop_assert_eq!(parsed.settings.max_key_length, words[header::MAX_KEY_LENGTH]);
                        prop_assert_eq!(parsed.settings.max_buckets, words[header::MAX_BUCKETS]);
                        prop_assert_eq!(parsed.settings.fleet as u64, words[header::FLEET]);
                    }
                    Err(_) => prop_assert!(CHECKED.contains(&index), "word {} is not checked", index),
                }
            }
        }
    }
}
#[cfg(all(test, target_os = "linux"))]
mod sealed {
    use std::os::fd::AsRawFd;

    /// Defect 10 of issue 11: nothing, not even a path through /proc/PID/fd, can truncate the
    /// memory under the mapping (a SIGBUS on the next access).
    #[test]
    fn the_anonymous_segment_cannot_be_shrunk_or_grown() {
        let file = super::anonymous_file(8192).unwrap();
        // SAFETY: fcntl F_GET_SEALS on a descriptor `file` owns.
        let seals = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GET_SEALS) };
        let wanted = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
        assert_eq!(seals & wanted, wanted);
        let by_path =
            std::fs::OpenOptions::new().write(true).open(format!("/proc/self/fd/{}", file.as_raw_fd())).unwrap();
        assert!(by_path.set_len(4096).is_err(), "shrinking is refused");
        assert!(by_path.set_len(16384).is_err(), "growing is refused");
        assert_eq!(file.metadata().unwrap().len(), 8192);
    }
}

/// A SAPI that runs MSHUTDOWN and MINIT again in one process (Apache's graceful restart)
/// unloads this library in between, so the statics holding the segment are gone without being
/// dropped. Each scenario runs in a forked child, alone in its process as MINIT is: the
/// scenario maps and forgets segments, and looks at every segment mapping of its process.
#[cfg(all(test, target_os = "linux"))]
mod restarts {
    use super::tests::{regions, settings};
    use super::*;

    /// Mappings of the anonymous segment's memfd in this process.
    fn memfd_mappings() -> usize {
        Leftover::find(|leftover| leftover.path == MEMFD_PATH).len()
    }

    /// Runs `scenario` in a child process; the test fails if the child's scenario failed.
    fn in_child(scenario: fn()) {
        // SAFETY: the child runs `scenario` alone (the test harness's other threads are not in
        // it) and ends with `_exit`, running none of the parent's exit handlers.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork: {}", io::Error::last_os_error());
        if pid == 0 {
            let passed = std::panic::catch_unwind(scenario).is_ok();
            // SAFETY: ends the child at once, as it must after fork.
            unsafe { libc::_exit(if passed { 0 } else { 1 }) };
        }
        let mut status = 0;
        // SAFETY: waits for the child just forked; `status` outlives the call.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "the scenario failed in the child (status {status})"
        );
    }

    /// An earlier image's anonymous segment of the same settings is adopted, with its words; one
    /// of other settings is unmapped. However many restarts, one mapping.
    #[test]
    fn a_restart_adopts_the_anonymous_segment_left_by_the_earlier_image() {
        in_child(|| {
            let layout = regions(settings(4));
            let first = Segment::create_anonymous(layout).unwrap();
            first.region(0)[7].store(42, Ordering::SeqCst);
            let seed = first.hash_seed();
            std::mem::forget(first); // the image is unloaded with its statics
            for _ in 0..5 {
                // SAFETY: nothing in this process uses the forgotten segment any more.
                let adopted =
                    unsafe { Segment::adopt_anonymous(layout, regions) }.expect("the segment left is adopted");
                assert_eq!(adopted.region(0)[7].load(Ordering::SeqCst), 42, "its words are kept");
                assert_eq!(adopted.hash_seed(), seed);
                // SAFETY: as above.
                unsafe { adopted.unmap_leftovers() };
                std::mem::forget(adopted);
                assert_eq!(memfd_mappings(), 1);
            }
            // Other settings: the segment left is unmapped and none is adopted.
            // SAFETY: as above.
            assert!(unsafe { Segment::adopt_anonymous(regions(settings(8)), regions) }.is_none());
            assert_eq!(memfd_mappings(), 0);
        });
    }

    /// A file segment mapped again after a restart: the mapping the earlier image left is
    /// unmapped, whether it was made under the file's path or under the temporary name it was
    /// created with, and so is an anonymous one left.
    #[test]
    fn a_restart_unmaps_the_mappings_of_the_file_left_by_the_earlier_image() {
        in_child(|| {
            let dir = super::tests::TempDir::new();
            let path = dir.file("circuits");
            let layout = regions(settings(4));
            let of_the_file = || Leftover::find(|leftover| leftover.path.contains("circuits")).len();
            std::mem::forget(Segment::create_anonymous(layout).unwrap());
            std::mem::forget(Segment::open_file(&path, layout, regions, 0o600).unwrap()); // created
            std::mem::forget(Segment::open_file(&path, layout, regions, 0o600).unwrap()); // opened
            assert_eq!(of_the_file(), 2);
            let segment = Segment::open_file(&path, layout, regions, 0o600).unwrap();
            // SAFETY: nothing in this process uses the forgotten segments any more.
            unsafe { segment.unmap_leftovers() };
            assert_eq!(of_the_file(), 1, "only the new mapping");
            assert_eq!(memfd_mappings(), 0);
        });
    }
}
