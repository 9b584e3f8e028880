//! What this process has of the extension: the segment made at startup (inherited by the
//! processes forked after), the store over it, and the clock. The PHP class and the module
//! both use it; it uses neither.

use once_cell::sync::OnceCell;

use crate::engine::Alone;
use crate::errors::{storage_exception, warn};
use crate::fleet::{self, SyncState};
use crate::segment::{guard, Backing, Segment, Settings};
use crate::settings::{Startup, INI_PATH};
use crate::store::{Layout, Store};
use crate::table::Stats;

use ext_php_rs::exception::PhpException;

/// The segment of this process: created or mapped at startup, inherited by the processes
/// forked after. `Err` holds why there is none; every store call then throws that reason.
static SEGMENT: OnceCell<Result<Segment, String>> = OnceCell::new();

/// Why the file of `ganesha_shm.path` was refused, when it was.
static PATH_REFUSAL: OnceCell<String> = OnceCell::new();

/// Makes the segment (at MINIT): the file of `ganesha_shm.path` when one is set and can be
/// used, else an anonymous one.
///
/// A SAPI may run MSHUTDOWN and MINIT again in one process (Apache's graceful restart does,
/// unloading this library in between): the segment an earlier image left is then found again
/// (the anonymous one, when its settings are the same, with its circuits) or unmapped, so
/// that the process maps one segment however often it restarts. If this library was not
/// unloaded, its statics, the segment included, are still set and kept.
pub fn start(alone: &Alone, startup: &Startup) {
    if SEGMENT.get().is_some() {
        return;
    }
    let segment = file_segment(startup).map_or_else(|| anonymous_segment(alone, startup.settings), Ok);
    if let Ok(segment) = &segment {
        alone.unmap_leftover_segments(segment);
        guard::install(segment);
        // A copy of another segment file is another host in the fleet, taken as one before
        // anything counts in it (a no-op for any other segment).
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |since| since.as_secs());
        let old = segment.fleet_host_id();
        if fleet::take_copy(segment, &Store::new(segment), segment.file(), now) == fleet::Copy::Taken {
            warn(&format!(
                "{} is a copy of another segment file (of an image, a snapshot or a restore): this host is {} in the fleet from now on, and reads what the segment held as the fleet's, under the old id {}",
                backing_name(segment),
                fleet::host_id_text(segment.fleet_host_id()),
                fleet::host_id_text(old)
            ));
        }
    }
    let _ = SEGMENT.set(segment);
}

/// At MSHUTDOWN: nothing of the segment is unmapped (the processes forked from this one use
/// it, and a restart of the module in this process adopts it, see `start`), but the SIGBUS
/// guard is taken down, since the SAPI may unload this library next.
pub fn shutdown() {
    guard::uninstall();
}

/// At RINIT (see `segment::guard::on_request`).
#[inline]
pub fn on_request() {
    guard::on_request();
}

/// What happened to the segment file of this process, if it was lost (see `segment::guard`).
pub fn segment_loss() -> Option<&'static str> {
    guard::lost().then_some(
        "the segment file was truncated under its mapping: this process goes on with an anonymous segment of its own, its circuits closed",
    )
}

/// Logs the loss of the segment file once per process, the first time it is asked after it.
/// Only where PHP code may run (it logs through PHP).
pub fn report_segment_loss() {
    if guard::take_loss() {
        // The segment's memory was replaced, and generations start again in it: where keys
        // were found before says nothing of the new memory.
        if let Ok(store) = store() {
            store.forget_places();
        }
        if let (Some(reason), Some(Ok(segment))) = (segment_loss(), segment_state()) {
            warn(&format!("{}: {reason}", backing_name(segment)));
        }
    }
}

/// Whether the segment file was lost and that is not reported yet: one relaxed load.
#[inline]
pub fn segment_loss_unreported() -> bool {
    guard::unreported()
}

/// The segment file of `ganesha_shm.path`, if one is set and passes the checks; a refused file
/// is logged in one line and its reason kept for `ganesha_shm_info()`.
fn file_segment(startup: &Startup) -> Option<Segment> {
    let path = startup.path.as_deref()?;
    Segment::open_file(std::path::Path::new(path), Layout::regions(startup.settings), Layout::regions, startup.mode)
        .map_err(|refusal| {
            let reason = format!("{INI_PATH}={path:?} refused: {refusal}");
            warn(&format!("{reason}; using an anonymous segment, shared only with this process's children"));
            let _ = PATH_REFUSAL.set(reason);
        })
        .ok()
}

/// An anonymous segment, or why none could be created.
fn anonymous_segment(alone: &Alone, settings: Settings) -> Result<Segment, String> {
    if let Some(segment) = alone.adopt_anonymous_segment(Layout::regions(settings), Layout::regions) {
        return Ok(segment);
    }
    Segment::create_anonymous(Layout::regions(settings)).map_err(|e| {
        let reason =
            format!("cannot create a shared memory segment of {} bytes: {e}", Layout::new(settings).segment_bytes());
        warn(&reason);
        reason
    })
}

/// The segment, or why there is none: `Err` of the reason when it could not be made, `None`
/// before startup.
pub fn segment_state() -> Option<Result<&'static Segment, &'static str>> {
    SEGMENT.get().map(|segment| segment.as_ref().map_err(String::as_str))
}

/// Why this process has no segment: the reason it could not be made, or that the extension
/// was not started. Plain data, so that the hot methods can return it without building an
/// exception (see `hot`); it becomes Ganesha's `StorageException`.
#[derive(Debug, Clone, Copy)]
pub struct Unavailable(&'static str);

impl From<Unavailable> for PhpException {
    fn from(Unavailable(reason): Unavailable) -> Self {
        storage_exception(format!("ganesha_shm: {reason}"))
    }
}

/// The segment, or why there is none.
pub fn segment() -> Result<&'static Segment, Unavailable> {
    match segment_state() {
        Some(Ok(segment)) => Ok(segment),
        Some(Err(reason)) => Err(Unavailable(reason)),
        None => Err(Unavailable("the extension has not been started")),
    }
}

/// Why the file of `ganesha_shm.path` was refused, when it was.
pub fn path_refusal() -> Option<&'static str> {
    PATH_REFUSAL.get().map(String::as_str)
}

/// What `ganesha_shm_info()` and `phpinfo()` say the segment is: "anonymous" or its path.
pub fn backing_name(segment: &Segment) -> String {
    match segment.backing() {
        Backing::Anonymous => "anonymous".into(),
        Backing::File(path) => path.display().to_string(),
    }
}

/// The store of this process's segment, built once: the tables' bounds and hash seed are
/// fixed when the segment is created.
pub fn store() -> Result<&'static Store<'static>, Unavailable> {
    static STORE: OnceCell<Store<'static>> = OnceCell::new();
    // Every adapter call starts here: once built, the store is one load away.
    if let Some(store) = STORE.get() {
        return Ok(store);
    }
    let segment = segment()?;
    Ok(STORE.get_or_init(|| Store::new(segment)))
}

/// Whether the fleet's counts may decide now: fleet mode (`ganesha_shm.fleet`), and the
/// sidecar's last sync at most two intervals old (see `SyncState::is_fresh`).
pub fn fleet_is_fresh() -> bool {
    segment().is_ok_and(|segment| {
        segment.layout().settings.fleet && SyncState::read(segment.fleet_words()).is_fresh(fleet::monotonic_ms())
    })
}

/// The Unix time in seconds, as PHP's `time()` reads it.
pub use crate::engine::unix_time;

/// The settings of this process's segment, once it is set up.
fn segment_settings() -> Option<Settings> {
    SEGMENT.get().and_then(|s| s.as_ref().ok()).map(|s| s.layout().settings)
}

/// The effective `ganesha_shm.max_services`, for messages.
pub fn max_services() -> u64 {
    segment_settings().map_or(0, |settings| settings.max_services)
}

/// The effective `ganesha_shm.max_buckets`: the longest window the store's rings hold (the
/// largest there is when the store could not be set up: every call then fails anyway).
pub fn max_buckets() -> u64 {
    segment_settings().map_or(crate::window::MAX_BUCKETS, |settings| settings.max_buckets)
}

/// The figures shown by `ganesha_shm_info()`, `phpinfo()` and the metrics, in order, with
/// what each means.
pub fn figures(segment: &Segment) -> Vec<(&'static str, u64, &'static str)> {
    let layout = Layout::new(segment.layout().settings);
    let stats = Stats::new(segment.stats_words());
    let [counters, statuses] = Store::new(segment).usage(unix_time());
    // Relaxed: statistics.
    let stat = |word: &std::sync::atomic::AtomicU64| word.load(std::sync::atomic::Ordering::Relaxed);
    let mut figures = vec![
        ("segment_bytes", layout.segment_bytes() as u64, "Size of the shared-memory segment."),
        ("layout_version", segment.layout_version(), "Version of the segment's layout."),
        ("max_services", layout.settings.max_services, "Services the store has room for (ganesha_shm.max_services)."),
        ("max_key_length", layout.settings.max_key_length, "Longest key in bytes (ganesha_shm.max_key_length)."),
        (
            "max_buckets",
            layout.settings.max_buckets,
            "Most buckets a time window may be split into (ganesha_shm.max_buckets).",
        ),
        ("counter_slots", layout.counters.capacity as u64, "Counter slots new keys may take: 3 per service."),
        (
            "counter_headroom_slots",
            (layout.counters.slots - layout.counters.capacity) as u64,
            "Counter slots beyond the capacity, that keep probes short.",
        ),
        ("counter_slot_bytes", layout.counters.slot_words() as u64 * 8, "Bytes of one counter slot."),
        ("status_slots", layout.statuses.capacity as u64, "Status slots new keys may take: 1 per service."),
        (
            "status_headroom_slots",
            (layout.statuses.slots - layout.statuses.capacity) as u64,
            "Status slots beyond the capacity, that keep probes short.",
        ),
        ("status_slot_bytes", layout.statuses.slot_words() as u64 * 8, "Bytes of one status slot."),
        (
            "bytes_per_service",
            layout.bytes_per_service() as u64,
            "Shared memory one service takes, with its share of the headroom.",
        ),
        ("counter_slots_used", counters.live as u64, "Counter slots holding unexpired data."),
        ("status_slots_used", statuses.live as u64, "Status slots holding unexpired data."),
        (
            "expired_slots",
            (counters.expired + statuses.expired) as u64,
            "Slots whose data has expired, free for new keys.",
        ),
        ("claims", stat(stats.claims), "Slots given to new keys."),
        ("reclaims", stat(stats.reclaims), "Slots given to new keys after their data expired."),
        ("full_errors", stat(stats.full_errors), "New keys refused because the store was full."),
    ];
    if layout.settings.fleet {
        let sync = SyncState::read(segment.fleet_words());
        let now_ms = fleet::monotonic_ms();
        figures.push((
            "fleet_attached",
            sync.is_fresh(now_ms) as u64,
            "1 while the fleet's counts decide: the sidecar's last sync is at most two intervals old.",
        ));
        if let Some(age) = sync.age_ms(now_ms) {
            figures.push(("fleet_sync_age_ms", age, "Milliseconds since the fleet sidecar's last sync."));
        }
        figures.push(("fleet_sync_interval_ms", sync.interval_ms, "The fleet sidecar's sync interval."));
        figures.push(("fleet_hosts", sync.hosts, "Hosts that synced in the last three intervals, this one included."));
        figures.push(("fleet_sync_errors", sync.errors, "Syncs of the fleet sidecar that failed."));
    }
    figures
}

/// Names of the figures that only grow: `_total` counters in the metrics.
const COUNTERS: [&str; 4] = ["claims", "reclaims", "full_errors", "fleet_sync_errors"];

/// The store's figures for the metrics: name (counters end in `_total`), value, help.
pub fn metric_figures() -> Result<Vec<(String, u64, &'static str)>, PhpException> {
    Ok(figures(segment()?)
        .into_iter()
        .map(|(name, value, help)| {
            (if COUNTERS.contains(&name) { format!("{name}_total") } else { name.to_string() }, value, help)
        })
        .collect())
}
