//! The module: INI settings, the segment made at startup, `phpinfo()`, `ganesha_shm_info()`.

use std::collections::HashMap;
use std::ffi::CString;

use ext_php_rs::boxed::ZBox;
use ext_php_rs::exception::PhpException;
use ext_php_rs::flags::IniEntryPermission;
use ext_php_rs::prelude::*;
use ext_php_rs::types::ZendHashTable;
use ext_php_rs::zend::{ExecutorGlobals, IniEntryDef, IniEntryDefs, ModuleEntry};
use ext_php_rs::{info_table_end, info_table_header, info_table_row, info_table_start};
use once_cell::sync::OnceCell;

use crate::adapter::storage_exception;
use crate::segment::{Backing, Segment, Settings};
use crate::store::{Layout, Store};
use crate::table::Stats;

pub const INI_MAX_SERVICES: &str = "ganesha_shm.max_services";
pub const INI_MAX_KEY_LENGTH: &str = "ganesha_shm.max_key_length";
pub const INI_PATH: &str = "ganesha_shm.path";
pub const INI_MODE: &str = "ganesha_shm.mode";

const DEFAULT_MAX_SERVICES: u64 = 1024;
const DEFAULT_MAX_KEY_LENGTH: u64 = 160;
const DEFAULT_MODE: u32 = 0o600;

/// Every setting shapes the segment, so they can only be set where PHP starts (php.ini, `-d`).
static INI_ENTRIES: IniEntryDefs<5> = IniEntryDefs::new([
    IniEntryDef::new(c"ganesha_shm.max_services", c"1024", IniEntryPermission::System),
    IniEntryDef::new(c"ganesha_shm.max_key_length", c"160", IniEntryPermission::System),
    IniEntryDef::new(c"ganesha_shm.path", c"", IniEntryPermission::System),
    IniEntryDef::new(c"ganesha_shm.mode", c"0600", IniEntryPermission::System),
    IniEntryDef::end(),
]);

/// The segment of this process: created or mapped at startup, inherited by the processes
/// forked after. `Err` holds why there is none; every store call then throws that reason.
static SEGMENT: OnceCell<Result<Segment, String>> = OnceCell::new();

/// Why the file of `ganesha_shm.path` was refused, when it was.
static PATH_REFUSAL: OnceCell<String> = OnceCell::new();

#[php_module]
#[php(startup = "startup")]
pub fn get_module(module: ModuleBuilder) -> ModuleBuilder {
    module
        .name("ganesha_shm")
        .class::<crate::adapter::AbstractSlidingTimeWindowShm>()
        .function(wrap_function!(ganesha_shm_info))
        .info_function(info)
}

/// MINIT: registers the settings and makes the segment: the file of `ganesha_shm.path` when
/// one is set and can be used, else an anonymous one.
pub fn startup(_ty: i32, module_number: i32) -> i32 {
    IniEntryDef::register(INI_ENTRIES.as_slice(), module_number);
    let ini = ExecutorGlobals::get().ini_values();
    let settings = Settings {
        max_services: setting(&ini, INI_MAX_SERVICES, DEFAULT_MAX_SERVICES, Settings::MAX_SERVICES_RANGE),
        max_key_length: setting(&ini, INI_MAX_KEY_LENGTH, DEFAULT_MAX_KEY_LENGTH, Settings::MAX_KEY_LENGTH_RANGE),
    };
    let segment = file_segment(&ini, settings).map_or_else(|| anonymous_segment(settings), Ok);
    // A second MINIT in one process (not done by PHP) would keep the first segment.
    let _ = SEGMENT.set(segment);
    0
}

/// The segment file of `ganesha_shm.path`, if one is set and passes the checks; a refused file
/// is logged in one line and its reason kept for `ganesha_shm_info()`.
fn file_segment(ini: &HashMap<String, Option<String>>, settings: Settings) -> Option<Segment> {
    let path = ini.get(INI_PATH).cloned().flatten().filter(|path| !path.is_empty())?;
    Segment::open_file(std::path::Path::new(&path), Layout::regions(settings), Layout::regions, mode_setting(ini))
        .map_err(|refusal| {
            let reason = format!("{INI_PATH}={path:?} refused: {refusal}");
            warn(&format!("{reason}; using an anonymous segment, shared only with this process's children"));
            let _ = PATH_REFUSAL.set(reason);
        })
        .ok()
}

/// An anonymous segment, or why none could be created.
fn anonymous_segment(settings: Settings) -> Result<Segment, String> {
    Segment::create_anonymous(Layout::regions(settings)).map_err(|e| {
        let reason =
            format!("cannot create a shared memory segment of {} bytes: {e}", Layout::new(settings).segment_bytes());
        warn(&reason);
        reason
    })
}

/// An integer setting within `range`; out of range or not a number: a startup warning and the
/// default, as PHP does for its own settings.
fn setting(ini: &HashMap<String, Option<String>>, name: &str, default: u64, (min, max): (u64, u64)) -> u64 {
    let Some(Some(raw)) = ini.get(name) else {
        return default;
    };
    match raw.trim().parse::<u64>() {
        Ok(value) if (min..=max).contains(&value) => value,
        _ => {
            warn(&format!("{name}={raw:?} is not a whole number from {min} to {max}; using {default}"));
            default
        }
    }
}

/// `ganesha_shm.mode`: octal permissions for a new segment file and the most an existing one
/// may grant; it must let the owner read and write. Otherwise a startup warning and 0600.
fn mode_setting(ini: &HashMap<String, Option<String>>) -> u32 {
    let raw = ini.get(INI_MODE).cloned().flatten().unwrap_or_default();
    match u32::from_str_radix(raw.trim().trim_start_matches("0o"), 8) {
        Ok(mode) if mode <= 0o777 && mode & 0o600 == 0o600 => mode,
        _ => {
            warn(&format!(
                "{INI_MODE}={raw:?} is not octal permissions from 0600 to 0777 that let the owner read and write; using 0600"
            ));
            DEFAULT_MODE
        }
    }
}

/// What `ganesha_shm_info()` and `phpinfo()` say the segment is: "anonymous" or its path.
fn backing_name(segment: &Segment) -> String {
    match segment.backing() {
        Backing::Anonymous => "anonymous".into(),
        Backing::File(path) => path.display().to_string(),
    }
}

/// Logs a startup warning where PHP logs its own (error_log, or stderr).
fn warn(message: &str) {
    let message = CString::new(format!("ganesha_shm: {message}")).unwrap_or_default();
    // SAFETY: php_error_docref is PHP's variadic logging function; the format "%s" takes
    // exactly the one NUL-terminated string passed, which outlives the call.
    unsafe {
        ext_php_rs::ffi::php_error_docref(
            std::ptr::null(),
            ext_php_rs::ffi::E_CORE_WARNING as i32,
            c"%s".as_ptr(),
            message.as_ptr(),
        );
    }
}

fn segment() -> PhpResult<&'static Segment> {
    match SEGMENT.get() {
        Some(Ok(segment)) => Ok(segment),
        Some(Err(reason)) => Err(storage_exception(format!("ganesha_shm: {reason}"))),
        None => Err(storage_exception("ganesha_shm: the extension has not been started".into())),
    }
}

/// The store of this process's segment, built once: the tables' bounds and hash seed are
/// fixed when the segment is created.
pub fn store() -> Result<&'static Store<'static>, PhpException> {
    static STORE: OnceCell<Store<'static>> = OnceCell::new();
    let segment = segment()?;
    Ok(STORE.get_or_init(|| Store::new(segment)))
}

/// The Unix time in seconds, read as PHP's and Ganesha's `time()` read it: with `time(NULL)`,
/// a few times cheaper than `SystemTime::now()`, and never a second apart from Ganesha's.
pub fn unix_time() -> u64 {
    // SAFETY: time(NULL) only reads the clock; the null pointer tells it not to store it.
    let now = unsafe { libc::time(std::ptr::null_mut()) };
    now.max(0) as u64
}

/// The effective `ganesha_shm.max_services`, for messages.
pub fn max_services() -> u64 {
    SEGMENT.get().and_then(|s| s.as_ref().ok()).map_or(0, |s| s.layout().settings.max_services)
}

/// The figures shown by `ganesha_shm_info()`, `phpinfo()` and the metrics, in order, with
/// what each means.
fn figures(segment: &Segment) -> Vec<(&'static str, u64, &'static str)> {
    let layout = Layout::new(segment.layout().settings);
    let stats = Stats::new(segment.stats_words());
    let [counters, statuses] = Store::new(segment).usage(unix_time());
    // Relaxed: statistics.
    let stat = |word: &std::sync::atomic::AtomicU64| word.load(std::sync::atomic::Ordering::Relaxed);
    vec![
        ("segment_bytes", layout.segment_bytes() as u64, "Size of the shared-memory segment."),
        ("layout_version", segment.layout_version(), "Version of the segment's layout."),
        ("max_services", layout.settings.max_services, "Services the store has room for (ganesha_shm.max_services)."),
        ("max_key_length", layout.settings.max_key_length, "Longest key in bytes (ganesha_shm.max_key_length)."),
        ("counter_slots", layout.counters.slots as u64, "Counter slots: 3 per service."),
        ("counter_slot_bytes", layout.counters.slot_words() as u64 * 8, "Bytes of one counter slot."),
        ("status_slots", layout.statuses.slots as u64, "Status slots: 1 per service."),
        ("status_slot_bytes", layout.statuses.slot_words() as u64 * 8, "Bytes of one status slot."),
        ("bytes_per_service", layout.bytes_per_service() as u64, "Shared memory one service takes."),
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
    ]
}

/// Names of the figures that only grow: `_total` counters in the metrics.
const COUNTERS: [&str; 3] = ["claims", "reclaims", "full_errors"];

/// The store's figures for the metrics: name (counters end in `_total`), value, help.
pub fn metric_figures() -> PhpResult<Vec<(String, u64, &'static str)>> {
    Ok(figures(segment()?)
        .into_iter()
        .map(|(name, value, help)| {
            (if COUNTERS.contains(&name) { format!("{name}_total") } else { name.to_string() }, value, help)
        })
        .collect())
}

/// Figures of this process's shared-memory store: its size and layout, how many slots hold
/// live data, and how often slots were claimed, reclaimed after expiring, or refused.
#[php_function]
pub fn ganesha_shm_info() -> PhpResult<ZBox<ZendHashTable>> {
    let segment = segment()?;
    let mut info = ZendHashTable::new();
    let failed = |e: ext_php_rs::error::Error| storage_exception(format!("ganesha_shm: {e}"));
    info.insert("version", env!("CARGO_PKG_VERSION")).map_err(failed)?;
    info.insert("segment", backing_name(segment).as_str()).map_err(failed)?;
    if let Some(reason) = PATH_REFUSAL.get() {
        info.insert("path_refused", reason.as_str()).map_err(failed)?;
    }
    for (name, value, _) in figures(segment) {
        info.insert(name, value.min(i64::MAX as u64) as i64).map_err(failed)?;
    }
    Ok(info)
}

/// MINFO: `phpinfo()` and `php --ri ganesha_shm`.
pub extern "C" fn info(_module: *mut ModuleEntry) {
    info_table_start!();
    info_table_header!("ganesha_shm support", "enabled");
    info_table_row!("Version", env!("CARGO_PKG_VERSION"));
    match SEGMENT.get() {
        Some(Ok(segment)) => {
            match segment.backing() {
                Backing::Anonymous => {
                    info_table_row!("Segment", "anonymous (shared with the processes forked after startup)")
                }
                Backing::File(_) => info_table_row!("Segment", backing_name(segment)),
            }
            if let Some(reason) = PATH_REFUSAL.get() {
                info_table_row!("Path refused", reason.as_str());
            }
            for (name, value, _) in figures(segment) {
                info_table_row!(name, value.to_string());
            }
        }
        Some(Err(reason)) => info_table_row!("Segment", reason.as_str()),
        None => info_table_row!("Segment", "not created"),
    }
    info_table_end!();
    info_table_start!();
    info_table_header!("Directive", "Value");
    let ini = ExecutorGlobals::get().ini_values();
    for name in [INI_MAX_SERVICES, INI_MAX_KEY_LENGTH, INI_PATH, INI_MODE] {
        let value = ini.get(name).cloned().flatten().unwrap_or_default();
        info_table_row!(name, value);
    }
    info_table_end!();
}
