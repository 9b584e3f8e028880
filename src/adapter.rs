//! The PHP class: Ganesha's storage adapter contract, implemented over the shared store.
//!
//! `Zeusi\GaneshaShmAdapter\AbstractSlidingTimeWindowShm` carries every method of Ganesha's
//! `AdapterInterface`; the PHP class `SlidingTimeWindowShm` (php/) extends it and declares
//! Ganesha's interfaces, so that this extension loads and runs without Ganesha's code.

// PHP parameter names follow Ganesha's interface (`$lastFailureTime`), for named arguments.
#![allow(non_snake_case)]

use ext_php_rs::binary_slice::BinarySlice;
use ext_php_rs::exception::PhpException;
use ext_php_rs::flags::ClassFlags;
use ext_php_rs::prelude::*;
use ext_php_rs::types::{ZendObject, Zval};
use ext_php_rs::zend::ClassEntry;

use crate::module::{self, INI_MAX_KEY_LENGTH, INI_MAX_SERVICES};
use crate::store::{StoreError, TableKind};
use crate::table::TableError;
use crate::window::{self, timed, Window, WindowError};

/// Ganesha's `Ganesha::STATUS_CALMED_DOWN`: what a status reads as when none is stored.
const STATUS_CALMED_DOWN: i64 = 1;

/// The storage keys of one Ganesha configuration: what `reset()` may delete.
struct StorageKeys {
    prefix: Vec<u8>,
    suffixes: [Vec<u8>; 5],
}

impl StorageKeys {
    /// Whether `key` is `prefix . service . suffix` with a non-empty service, for one of the
    /// configuration's suffixes (as Ganesha's own adapters match `/^prefix.+(suffixes)$/`).
    fn covers(&self, key: &[u8]) -> bool {
        key.starts_with(&self.prefix)
            && self.suffixes.iter().any(|suffix| key.len() > self.prefix.len() + suffix.len() && key.ends_with(suffix))
    }
}

/// What `setContext()` gives the adapter.
struct Configured {
    window: Window,
    storage_keys: StorageKeys,
}

#[php_class]
#[php(name = "Zeusi\\GaneshaShmAdapter\\AbstractSlidingTimeWindowShm")]
#[php(flags = ClassFlags::Abstract)]
pub struct AbstractSlidingTimeWindowShm {
    bucket_duration: Option<u64>,
    configured: Option<Configured>,
}

#[php_impl]
impl AbstractSlidingTimeWindowShm {
    /// Most buckets a time window can be split into.
    pub const MAX_BUCKETS: i64 = window::MAX_BUCKETS as i64;
    /// Buckets a time window is split into when no bucket duration is given.
    pub const DEFAULT_BUCKETS: i64 = window::DEFAULT_BUCKETS as i64;
    /// Seconds a saved status is kept.
    pub const STATUS_TTL: i64 = window::STATUS_TTL as i64;

    /// `$bucketDuration`: seconds per bucket; null for ceil(timeWindow / 60).
    pub fn __construct(bucketDuration: Option<i64>) -> PhpResult<Self> {
        let bucket_duration = window::check_bucket_duration(bucketDuration).map_err(window_error)?;
        Ok(Self { bucket_duration, configured: None })
    }

    pub fn support_count_strategy(&self) -> bool {
        false
    }

    pub fn support_rate_strategy(&self) -> bool {
        true
    }

    /// Reads the time window and the storage keys from Ganesha's `Context`, and checks that
    /// the bucket duration fits the time window.
    pub fn set_context(&mut self, context: &mut ZendObject) -> PhpResult<()> {
        let configuration = call(context, "configuration")?;
        let configuration = configuration.object().ok_or_else(|| not_a_context("configuration() did not return an object"))?;
        let time_window = call(configuration, "timeWindow")?
            .long()
            .ok_or_else(|| not_a_context("timeWindow() did not return an int"))?;
        let window = Window::new(time_window, self.bucket_duration).map_err(window_error)?;
        let keys = call(configuration, "storageKeys")?;
        let keys = keys.object().ok_or_else(|| not_a_context("storageKeys() did not return an object"))?;
        let suffix = |name: &str| string(keys, name);
        let storage_keys = StorageKeys {
            prefix: suffix("prefix")?,
            suffixes: [suffix("success")?, suffix("failure")?, suffix("rejection")?, suffix("lastFailureTime")?, suffix("status")?],
        };
        self.configured = Some(Configured { window, storage_keys });
        Ok(())
    }

    /// Deprecated by Ganesha in favour of `setContext()`: nothing to do.
    #[allow(unused_variables)]
    pub fn set_configuration(&self, configuration: &mut ZendObject) {}

    pub fn load(&self, service: BinarySlice<u8>) -> PhpResult<i64> {
        let window = self.window()?;
        let count = module::store()?.load(&service, window, now()).map_err(storage_error)?;
        Ok(count.min(i64::MAX as u64) as i64)
    }

    /// Not supported: the Count strategy needs a plain counter.
    #[allow(unused_variables)]
    pub fn save(&self, service: BinarySlice<u8>, count: i64) -> PhpResult<()> {
        Err(count_strategy_unsupported())
    }

    pub fn increment(&self, service: BinarySlice<u8>) -> PhpResult<()> {
        let window = self.window()?;
        module::store()?.increment(&service, window, now()).map_err(storage_error)
    }

    /// Not supported: the Count strategy needs a plain counter.
    #[allow(unused_variables)]
    pub fn decrement(&self, service: BinarySlice<u8>) -> PhpResult<()> {
        Err(count_strategy_unsupported())
    }

    pub fn save_last_failure_time(&self, service: BinarySlice<u8>, lastFailureTime: i64) -> PhpResult<()> {
        let window = self.window()?;
        check_range("lastFailureTime", lastFailureTime, timed::MIN_VALUE, timed::MAX_VALUE)?;
        module::store()?.save_last_failure_time(&service, lastFailureTime, window, now()).map_err(storage_error)
    }

    pub fn load_last_failure_time(&self, service: BinarySlice<u8>) -> PhpResult<Option<i64>> {
        self.window()?;
        module::store()?.load_last_failure_time(&service, now()).map_err(storage_error)
    }

    pub fn save_status(&self, service: BinarySlice<u8>, status: i64) -> PhpResult<()> {
        self.window()?;
        check_range("status", status, i32::MIN as i64, i32::MAX as i64)?;
        module::store()?.save_status(&service, status, now()).map_err(storage_error)
    }

    /// The stored status, or `Ganesha::STATUS_CALMED_DOWN` (not stored) when there is none.
    pub fn load_status(&self, service: BinarySlice<u8>) -> PhpResult<i64> {
        self.window()?;
        let status = module::store()?.load_status(&service, now()).map_err(storage_error)?;
        Ok(status.unwrap_or(STATUS_CALMED_DOWN))
    }

    /// Deletes the counts, last failure times and statuses under this configuration's storage
    /// keys, and nothing else.
    pub fn reset(&self) -> PhpResult<()> {
        let keys = &self.configuration()?.storage_keys;
        module::store()?.remove_matching(|key| keys.covers(key));
        Ok(())
    }
}

impl AbstractSlidingTimeWindowShm {
    fn configuration(&self) -> PhpResult<&Configured> {
        self.configured.as_ref().ok_or_else(|| {
            exception(
                "LogicException",
                "The adapter has no time window yet: pass it to Ganesha's Builder, whose build() calls setContext().".into(),
            )
        })
    }

    fn window(&self) -> PhpResult<&Window> {
        Ok(&self.configuration()?.window)
    }
}

/// The time Ganesha reads with `time()`.
fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// An exception of a class that PHP always has.
fn exception(class: &str, message: String) -> PhpException {
    let class = ClassEntry::try_find(class).expect("SPL exception classes are always registered");
    PhpException::new(message, 0, class)
}

/// Ganesha's `StorageException`, so that Ganesha fails open and emits `storage_error`; a
/// `RuntimeException` (its parent) when Ganesha is not loaded.
pub fn storage_exception(message: String) -> PhpException {
    match ClassEntry::try_find("Ackintosh\\Ganesha\\Exception\\StorageException") {
        Some(class) => PhpException::new(message, 0, class),
        None => exception("RuntimeException", message),
    }
}

fn storage_error(StoreError { table, error }: StoreError) -> PhpException {
    let message = match error {
        TableError::KeyTooLong { length, max } => format!(
            "ganesha_shm: a key of {length} bytes is longer than {INI_MAX_KEY_LENGTH} ({max} bytes); \
             raise {INI_MAX_KEY_LENGTH} in php.ini (a key is Ganesha's prefix, the service name and a suffix)"
        ),
        TableError::Full { slots } => {
            let what = match table {
                TableKind::Counters => "counter slots (3 per service)",
                TableKind::Statuses => "status slots (1 per service)",
            };
            format!(
                "ganesha_shm: the store is full: all {slots} {what} hold unexpired data; \
                 raise {INI_MAX_SERVICES} in php.ini (now {})",
                module::max_services()
            )
        }
        TableError::Contended => "ganesha_shm: too many processes raced to create the same key at once; try again".into(),
    };
    storage_exception(message)
}

fn window_error(error: WindowError) -> PhpException {
    exception("InvalidArgumentException", error.to_string())
}

fn count_strategy_unsupported() -> PhpException {
    exception(
        "LogicException",
        "Zeusi\\GaneshaShmAdapter\\SlidingTimeWindowShm does not support the Count strategy.".into(),
    )
}

fn check_range(name: &str, value: i64, min: i64, max: i64) -> PhpResult<()> {
    if (min..=max).contains(&value) {
        return Ok(());
    }
    Err(exception("InvalidArgumentException", format!("${name} must be between {min} and {max}, {value} given.")))
}

fn not_a_context(why: &str) -> PhpException {
    exception("InvalidArgumentException", format!("setContext() expects Ganesha's Context: {why}."))
}

fn call(object: &ZendObject, method: &str) -> PhpResult<Zval> {
    object.try_call_method(method, vec![]).map_err(|_| not_a_context(&format!("it has no method {method}()")))
}

fn string(object: &ZendObject, method: &str) -> PhpResult<Vec<u8>> {
    let value = call(object, method)?;
    value
        .zend_str()
        .map(|s| s.as_bytes().to_vec())
        .ok_or_else(|| not_a_context(&format!("{method}() did not return a string")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn default_keys() -> StorageKeys {
        StorageKeys {
            prefix: b"ganesha_".to_vec(),
            suffixes: ["_success", "_failure", "_rejection", "_last_failure_time", "_status"].map(|s| s.as_bytes().to_vec()),
        }
    }

    #[test]
    fn reset_covers_prefix_service_suffix_with_a_non_empty_service() {
        let keys = default_keys();
        assert!(keys.covers(b"ganesha_svc_failure"));
        assert!(keys.covers(b"ganesha_x_status"));
        assert!(keys.covers(b"ganesha_\0\n_rejection"));
        assert!(!keys.covers(b"ganesha__failure"), "no service between prefix and suffix");
        assert!(!keys.covers(b"ganesha_svc_other"));
        assert!(!keys.covers(b"other_svc_failure"));
        assert!(!keys.covers(b"ganesha_failure"), "prefix and suffix may not overlap");
    }

    #[test]
    fn reset_takes_metacharacters_literally() {
        let keys = StorageKeys { prefix: b".*(".to_vec(), suffixes: ["$", "|", "[", "\\", "\0"].map(|s| s.as_bytes().to_vec()) };
        assert!(keys.covers(b".*(a$"));
        assert!(keys.covers(b".*(a\0"));
        assert!(!keys.covers(b"x*(a$"));
        assert!(!keys.covers(b".*(a"));
    }
}
