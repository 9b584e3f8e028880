//! The PHP class: Ganesha's storage adapter contract, implemented over the shared store.
//!
//! `Zeusi\GaneshaShmAdapter\AbstractSlidingTimeWindowShm` carries every method of Ganesha's
//! `AdapterInterface`; the PHP class `SlidingTimeWindowShm` (php/) extends it and declares
//! Ganesha's interfaces, so that this extension loads and runs without Ganesha's code.

// PHP parameter names follow Ganesha's interface (`$lastFailureTime`), for named arguments.
#![allow(non_snake_case)]

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::sync::Arc;

use parking_lot::Mutex;

use ext_php_rs::binary::Binary;
use ext_php_rs::boxed::ZBox;
use ext_php_rs::convert::FromZval;
use ext_php_rs::convert::IntoZval;
use ext_php_rs::exception::PhpException;
use ext_php_rs::flags::ClassFlags;
use ext_php_rs::flags::DataType;
use ext_php_rs::prelude::*;
use ext_php_rs::types::{ZendCallable, ZendHashTable, ZendObject, ZendStr, Zval};

use crate::arguments::{Long, OptionalLong, Str};
use crate::circuit::{self, Figures, Thresholds, STATUS_CALMED_DOWN};
use crate::context::{self, StorageKeys};
use crate::errors::{exception, php_error, storage_exception};
use crate::fleet;
use crate::metrics::{self, BucketView, Fleet, ServiceTotals, ServiceView};
use crate::process;
use crate::settings::{INI_MAX_KEY_LENGTH, INI_MAX_SERVICES};
use crate::store::{FleetWindow, Renewed, Store, StoreError, TableKind};
use crate::table::TableError;
use crate::window::{self, timed, CountWord, Window, WindowError};

pub(crate) mod hot;

/// How the counters are kept, from the strategy in Ganesha's `Context`.
enum Strategy {
    /// `Builder::withRateStrategy()`: counts in the buckets of a sliding time window.
    Rate(Window),
    /// The same in fleet mode (`ganesha_shm.fleet`), with the thresholds that choose between
    /// this host's counts and the fleet's (see `load_in_fleet`). A variant of its own, so that a
    /// load without fleet mode costs nothing more than before it existed.
    FleetRate(Window, Thresholds),
    /// `Builder::withCountStrategy()`: plain counters.
    Count,
}

impl Strategy {
    /// The time window of the Rate strategy, in fleet mode or not.
    fn window(&self) -> Option<&Window> {
        match self {
            Self::Rate(window) | Self::FleetRate(window, _) => Some(window),
            Self::Count => None,
        }
    }
}

/// What `setContext()` gives the adapter.
pub(crate) struct Configured {
    strategy: Strategy,
    /// `None` when the context gives none: `loadLastFailureTime()` then reads the time as
    /// Ganesha's own adapters do, and claims no half-open trial (Ganesha's strategies always
    /// give one; a context built by hand for the adapter alone may not).
    interval_to_half_open: Option<u64>,
    storage_keys: Arc<StorageKeys>,
    /// For `snapshot()` and `metrics()`; `None` when the context does not give them.
    thresholds: Option<Thresholds>,
}

impl Configured {
    /// After a write renewed the slot of `key` in `table` (see [`Renewed`]), keeps the slots
    /// of the same service's other keys as long, so that a service's slots, and the totals
    /// they hold, live as long as any of its data: a busy service never resets its totals.
    /// Nothing for a key of no service of this configuration.
    #[inline(always)]
    fn keep_service(&self, store: &Store<'_>, table: TableKind, key: &[u8], now: u64, renewed: Renewed) {
        if let Some(until) = renewed {
            self.keep_service_until(store, table, key, now, until);
        }
    }

    /// `keep_service` once a write renewed its slot: out of line, as it is once per 1/16 of the
    /// slot's lifetime.
    #[inline(never)]
    fn keep_service_until(&self, store: &Store<'_>, table: TableKind, key: &[u8], now: u64, until: u64) {
        if let (Strategy::FleetRate(window, _), TableKind::Counters) = (&self.strategy, table) {
            // Fleet mode: the sidecar names the buckets by their start and duration, so the
            // window is noted whenever a write made or renewed a counter's slot (a count, or
            // the failure time Ganesha saves before it): once per 1/16 of the slot's lifetime,
            // so a window a deploy changed is noted that soon. A slot recycled meanwhile is
            // another key's business.
            let _ = store.note_fleet_window(key, window);
        }
        let Some(service) = self.storage_keys.service_of(key) else {
            return;
        };
        // Of the service's keys (`StorageKeys::of_service`), the last is its status.
        let keys = self.storage_keys.of_service(service);
        let (counters, statuses) = keys.split_at(4);
        fn others<'k>(keys: &'k [Vec<u8>], of: TableKind, renewed: (TableKind, &[u8])) -> Vec<&'k [u8]> {
            keys.iter().map(Vec::as_slice).filter(|key| (of, *key) != renewed).collect()
        }
        let renewed_key = (table, key);
        store.keep(
            &others(counters, TableKind::Counters, renewed_key),
            &others(statuses, TableKind::Statuses, renewed_key),
            now,
            until,
        );
    }

    /// Seconds a last failure time is kept: as long as the buckets, or as a Count counter.
    fn last_failure_ttl(&self) -> u64 {
        match &self.strategy {
            Strategy::Rate(window) | Strategy::FleetRate(window, _) => window.ttl(),
            Strategy::Count => window::COUNT_TTL,
        }
    }
}

/// The configuration made of what a `Context` gave, with this adapter's bucket duration:
/// made once per process for each that is given (up to [`CONFIGURATIONS`] of them), since
/// every request of an application gives the same few.
pub(crate) fn configured(read: context::Read, bucket_duration: Option<u64>) -> Result<Arc<Configured>, WindowError> {
    /// A configuration made, with what it was made of.
    struct Made {
        read: context::Read,
        bucket_duration: Option<u64>,
        configured: Arc<Configured>,
    }
    /// The configurations made, the latest first. A static, not a `thread_local!` (see
    /// `context`); its lock is only ever held for a lookup or an insertion.
    static MADE: Mutex<Vec<Made>> = Mutex::new(Vec::new());
    let made = MADE
        .lock()
        .iter()
        .find(|made| made.bucket_duration == bucket_duration && made.read == read)
        .map(|made| Arc::clone(&made.configured));
    if let Some(configured) = made {
        return Ok(configured);
    }
    let (strategy, thresholds) = match read.strategy {
        context::Strategy::Rate { time_window, failure_rate_threshold, minimum_requests } => (
            Strategy::Rate(Window::new(time_window, bucket_duration, process::max_buckets())?),
            failure_rate_threshold.zip(minimum_requests).map(|(failure_rate_threshold, minimum_requests)| {
                Thresholds::Rate { failure_rate_threshold, minimum_requests }
            }),
        ),
        context::Strategy::Count { failure_count_threshold } => (
            Strategy::Count,
            failure_count_threshold.map(|failure_count_threshold| Thresholds::Count { failure_count_threshold }),
        ),
    };
    // Fleet mode needs the thresholds, which Ganesha's own Context always gives.
    let fleet = process::store().is_ok_and(|store| store.has_fleet());
    let strategy = match (strategy, thresholds) {
        (Strategy::Rate(window), Some(thresholds)) if fleet => Strategy::FleetRate(window, thresholds),
        (strategy, _) => strategy,
    };
    if let (Strategy::FleetRate(window, _), Ok(segment)) = (&strategy, process::segment()) {
        // The window the sidecar reads the fleet-only services in: so that this host sees the services
        // it has not counted yet, from its first request.
        fleet::note_window(segment.fleet_window_noted(), FleetWindow::of(window));
    }
    let configured = Arc::new(Configured {
        strategy,
        interval_to_half_open: read.interval_to_half_open.map(|interval| interval.max(0) as u64),
        storage_keys: Arc::clone(&read.keys),
        thresholds,
    });
    let mut made = MADE.lock();
    made.truncate(CONFIGURATIONS - 1);
    made.insert(0, Made { read, bucket_duration, configured: Arc::clone(&configured) });
    Ok(configured)
}

/// Configurations a process keeps made (see `configured`).
const CONFIGURATIONS: usize = 8;

/// A PHP callable returning the current time, for tests; held with its own reference.
pub struct Clock(Zval);

impl<'a> FromZval<'a> for Clock {
    const TYPE: DataType = DataType::Callable;

    fn from_zval(zval: &'a Zval) -> Option<Self> {
        zval.is_callable().then(|| Self(zval.shallow_clone()))
    }
}

#[php_class]
#[php(name = "Zeusi\\GaneshaShmAdapter\\AbstractSlidingTimeWindowShm")]
#[php(flags = ClassFlags::Abstract)]
#[php(modifier = "register_hot_methods")]
pub struct AbstractSlidingTimeWindowShm {
    pub(crate) bucket_duration: Option<u64>,
    pub(crate) clock: Option<Clock>,
    /// What `setContext()` read. Every method takes `&self` and none holds a borrow of this
    /// cell, or a reference into what it holds, while PHP code runs (the clock, Ganesha's
    /// Context): that code may call this object again, `setContext()` included. A method keeps
    /// the configuration it started with by its `Arc`.
    pub(crate) configured: RefCell<Option<Arc<Configured>>>,
}

#[php_impl]
impl AbstractSlidingTimeWindowShm {
    /// Most buckets a time window can be split into, with `ganesha_shm.max_buckets` at its
    /// largest (the setting may lower it).
    pub const MAX_BUCKETS: i64 = window::MAX_BUCKETS as i64;
    /// Buckets a time window is split into when no bucket duration is given.
    pub const DEFAULT_BUCKETS: i64 = window::DEFAULT_BUCKETS as i64;
    /// Seconds a saved status is kept.
    pub const STATUS_TTL: i64 = window::STATUS_TTL as i64;
    /// Seconds a Count-strategy counter and its last failure time are kept after a write.
    pub const COUNT_TTL: i64 = window::COUNT_TTL as i64;

    /// `$bucketDuration`: seconds per bucket; null for ceil(timeWindow / 60).
    /// `$clock`: returns the current Unix time in seconds, for tests; null for the system
    /// clock (Ganesha's own `time()`).
    pub fn __construct(bucketDuration: OptionalLong<1>, clock: Option<Clock>) -> PhpResult<Self> {
        let bucket_duration = window::check_bucket_duration(bucketDuration.0).map_err(window_error)?;
        Ok(Self { bucket_duration, clock, configured: RefCell::new(None) })
    }

    pub fn support_count_strategy(&self) -> bool {
        true
    }

    pub fn support_rate_strategy(&self) -> bool {
        true
    }

    /// Deprecated by Ganesha in favour of `setContext()`: nothing to do.
    #[allow(unused_variables)]
    pub fn set_configuration(&self, configuration: &mut ZendObject) {}

    /// Count strategy only: sets the counter.
    pub fn save(&self, service: Str<'_, 1>, count: Long<2>) -> PhpResult<()> {
        let Long(count) = count;
        let (configured, now) = self.count_strategy("save")?;
        check_range("count", count, 0, CountWord::MAX as i64)?;
        let store = process::store()?;
        let renewed = store.change_count(&service, now, true, |_| count as u64).map_err(storage_error)?;
        configured.keep_service(store, TableKind::Counters, &service, now, renewed);
        Ok(())
    }

    /// Count strategy only: one less, never below 0, in one atomic step.
    pub fn decrement(&self, service: Str<'_, 1>) -> PhpResult<()> {
        let (configured, now) = self.count_strategy("decrement")?;
        let store = process::store()?;
        let renewed =
            store.change_count(&service, now, false, |count| count.saturating_sub(1)).map_err(storage_error)?;
        configured.keep_service(store, TableKind::Counters, &service, now, renewed);
        Ok(())
    }

    /// Deletes the counts, last failure times and statuses under this configuration's storage
    /// keys, and nothing else.
    pub fn reset(&self) -> PhpResult<()> {
        let configured = self.configuration()?;
        let store = process::store()?;
        if store.has_fleet() {
            // Every service of the configuration, those this host sees only through the fleet
            // included. The slots stay, so that the sidecar finds the counters reset.
            note_fleet_reset(store, &configured.storage_keys.prefix, true)?;
            store.clear_matching(|key| configured.storage_keys.covers(key));
        } else {
            store.remove_matching(|key| configured.storage_keys.covers(key));
        }
        Ok(())
    }

    /// Deletes the counts, the last failure time and the status of one service under this
    /// configuration's storage keys, and nothing else: what an operator runs once the
    /// service is mended, so that its circuit admits requests at once.
    pub fn reset_service(&self, service: Str<'_, 1>) -> PhpResult<()> {
        let store = process::store()?;
        let configured = self.configuration()?;
        if store.has_fleet() {
            let stem = [&configured.storage_keys.prefix[..], &service[..]].concat();
            note_fleet_reset(store, &stem, false)?;
        }
        for key in configured.storage_keys.of_service(&service) {
            for kind in [TableKind::Counters, TableKind::Statuses] {
                store.clear(kind, &key).map_err(storage_error)?;
            }
        }
        Ok(())
    }

    /// Every service with data under this configuration's storage keys, keyed by its name's
    /// bytes as they are: its figures in the current window, its status, its last failure time
    /// and what Ganesha would do with a request now (`state`: closed, open or half_open;
    /// `admits`), with `display_name`, the name as UTF-8 text. With `$buckets` (Rate
    /// strategy), `buckets` lists the window's buckets, oldest first: each one's start time and
    /// its failures, successes and rejections. Read-only: unlike `loadLastFailureTime()`, it
    /// never claims the half-open trial.
    #[php(defaults(buckets = false))]
    pub fn snapshot(&self, buckets: bool) -> PhpResult<ZBox<ZendHashTable>> {
        let counts_requests = self.configuration()?.strategy.window().is_some();
        let mut services = ZendHashTable::new();
        for view in self.views(buckets)? {
            let row = snapshot_row(&view, counts_requests)?;
            match integer_key(&view.service) {
                Some(index) => services.insert(index, row),
                None => services.insert(&ZendStr::new(&view.service, false), row),
            }
            .map_err(php_error)?;
        }
        Ok(services)
    }

    /// The snapshot's figures and the store's, in the Prometheus text exposition format, for an
    /// application's /metrics route.
    pub fn metrics(&self) -> PhpResult<String> {
        Ok(metrics::exposition(&self.views(false)?, &process::metric_figures()?))
    }
}

/// One service of `snapshot()`. `counts_requests`: false under the Count strategy, which keeps
/// no successes, rejections nor failure rate.
fn snapshot_row(view: &ServiceView, counts_requests: bool) -> PhpResult<ZBox<ZendHashTable>> {
    fn zval(value: impl IntoZval) -> PhpResult<Zval> {
        value.into_zval(false).map_err(php_error)
    }
    let figures = &view.figures;
    let requests = |count: u64| counts_requests.then_some(count as i64);
    let fields = [
        ("service", zval(Binary::new(view.service.clone()))?),
        ("display_name", zval(metrics::display_name(&view.service))?),
        ("state", zval(view.state.name())?),
        ("admits", zval(view.state.admits())?),
        ("status", zval(figures.status)?),
        ("tripped", zval(figures.status == circuit::STATUS_TRIPPED)?),
        ("failures", zval(figures.failures as i64)?),
        ("successes", zval(requests(figures.successes))?),
        ("rejections", zval(requests(figures.rejections))?),
        ("failure_rate", zval(circuit::failure_rate(figures).filter(|_| counts_requests))?),
        ("last_failure_time", zval(figures.last_failure_time)?),
    ];
    let totals = &view.totals;
    let mut row = ZendHashTable::new();
    for (name, value) in fields {
        row.insert(name, value).map_err(php_error)?;
    }
    let mut since = ZendHashTable::new();
    for (name, value) in [
        ("successes", totals.successes),
        ("failures", totals.failures),
        ("rejections", totals.rejections),
        ("trips", totals.trips),
        ("calm_downs", totals.calm_downs),
        ("half_open_trials", totals.trials),
    ] {
        since.insert(name, value.min(i64::MAX as u64) as i64).map_err(php_error)?;
    }
    row.insert("totals", since).map_err(php_error)?;
    // Fleet mode: the fleet's counts (this host's included) beside this host's, and whether
    // they decide; null while the sidecar's last sync is too old to use.
    match view.fleet {
        Fleet::Off => {}
        Fleet::Stale => row.insert("fleet", ()).map_err(php_error)?,
        Fleet::Fresh { figures, decides, only } => {
            let mut fleet = ZendHashTable::new();
            for (name, value) in [
                ("failures", zval(figures.failures as i64)?),
                ("successes", zval(figures.successes as i64)?),
                ("rejections", zval(figures.rejections as i64)?),
                ("failure_rate", zval(circuit::failure_rate(&figures))?),
                ("decides", zval(decides)?),
                ("only", zval(only)?),
            ] {
                fleet.insert(name, value).map_err(php_error)?;
            }
            row.insert("fleet", fleet).map_err(php_error)?;
        }
    }
    if let Some(buckets) = &view.buckets {
        let mut list = ZendHashTable::new();
        for bucket in buckets {
            let mut entry = ZendHashTable::new();
            for (name, value) in [
                ("start", bucket.start),
                ("failures", bucket.failures),
                ("successes", bucket.successes),
                ("rejections", bucket.rejections),
            ] {
                entry.insert(name, value.min(i64::MAX as u64) as i64).map_err(php_error)?;
            }
            list.push(entry).map_err(php_error)?;
        }
        row.insert("buckets", list).map_err(php_error)?;
    }
    Ok(row)
}

/// Fleet mode: notes the reset in the segment's reset log before the counters are cleared (the
/// service's key stem, or with `every` the prefix of every service of the configuration), so
/// that the sidecar shares it with the fleet, dated by it, whether or not this host counts the
/// service and whether or not the sidecar runs now (see `ResetLog`).
fn note_fleet_reset(store: &Store<'_>, key: &[u8], every: bool) -> PhpResult<()> {
    let now_ms =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |since| since.as_millis() as u64);
    if !fleet::note_reset(store, key, every, now_ms, fleet::monotonic_ms()) {
        return Err(storage_exception(format!(
            "ganesha_shm: cannot share the reset of \"{}\" with the fleet: the key is longer than ganesha_shm.max_key_length",
            String::from_utf8_lossy(key)
        )));
    }
    Ok(())
}

/// The integer PHP makes of an array key of these bytes, as `$array["12"]` is `$array[12]`:
/// a decimal integer in `i64`'s range, without a leading zero or `+`, and not `-0`.
fn integer_key(bytes: &[u8]) -> Option<i64> {
    let digits = bytes.strip_prefix(b"-").unwrap_or(bytes);
    let canonical = match digits {
        [b'0'] => bytes.len() == 1,
        [b'1'..=b'9', rest @ ..] => rest.iter().all(u8::is_ascii_digit),
        _ => false,
    };
    if !canonical {
        return None;
    }
    std::str::from_utf8(bytes).ok()?.parse().ok()
}

/// Why a hot method refused a call, as plain data. Building the exception may run PHP code
/// (Ganesha's `StorageException` may have to be autoloaded), which must run neither in the
/// unguarded path of `hot` nor while the configuration is borrowed: `hot::call` turns it into
/// the exception once the method has returned, under ext-php-rs's guard.
pub(crate) enum Refusal {
    Store(StoreError),
    Unavailable(process::Unavailable),
    OutOfRange { name: &'static str, value: i64, min: i64, max: i64 },
}

impl From<StoreError> for Refusal {
    fn from(error: StoreError) -> Self {
        Self::Store(error)
    }
}

impl From<process::Unavailable> for Refusal {
    fn from(unavailable: process::Unavailable) -> Self {
        Self::Unavailable(unavailable)
    }
}

impl From<Refusal> for PhpException {
    fn from(refusal: Refusal) -> Self {
        match refusal {
            Refusal::Store(error) => storage_error(error),
            Refusal::Unavailable(unavailable) => unavailable.into(),
            Refusal::OutOfRange { name, value, min, max } => exception(
                "InvalidArgumentException",
                format!("${name} must be between {min} and {max}, {value} given."),
            ),
        }
    }
}

/// Fleet mode's `load()` of a Rate counter: the count of the view `circuit::fleet_view`
/// chooses from this host's counts and the fleet's, while the sidecar's last sync is fresh;
/// this host's own count otherwise, and for a key of no service of this configuration. Kept out
/// of line, so that the handlers' code without fleet mode stays as it was.
#[inline(never)]
fn load_in_fleet(
    store: &Store<'_>,
    key: &[u8],
    window: &Window,
    thresholds: Thresholds,
    configured: &Configured,
    now: u64,
) -> Result<u64, StoreError> {
    let Some((service, counter)) = configured.storage_keys.counter_of(key).filter(|_| process::fleet_is_fresh()) else {
        return store.load(key, window, now);
    };
    let counts = |of: usize| -> Result<(u64, u64), StoreError> {
        let (own, others) = if of == counter {
            store.load_with_fleet(key, window, now)?
        } else {
            store.load_with_fleet(&configured.storage_keys.key(service, of), window, now)?
        };
        Ok((own, own.saturating_add(others)))
    };
    // The failures first: when the fleet's keep the circuit closed, so do this host's, and the
    // view is this host's own (`circuit::failures_keep_closed`) — the common case, at the cost
    // of one lookup, or two for a success or rejection count.
    let failures = counts(FAILURE)?;
    if circuit::failures_keep_closed(thresholds, failures.1) {
        return if counter == FAILURE { Ok(failures.0) } else { store.load(key, window, now) };
    }
    let (successes, rejections) = (counts(SUCCESS)?, counts(REJECTION)?);
    let figures = |pick: fn((u64, u64)) -> u64| Figures {
        failures: pick(failures),
        successes: pick(successes),
        rejections: pick(rejections),
        ..Figures::default()
    };
    let view = circuit::fleet_view(thresholds, figures(|(own, _)| own), figures(|(_, fleet)| fleet));
    Ok([view.successes, view.failures, view.rejections][counter])
}

/// A service's keys, as indices of `StorageKeys::suffixes`: its three counters (as
/// `StorageKeys::counter_of` numbers them), then its status. (Suffix 3, the last failure
/// time's, goes unused: Ganesha keeps a sliding-window adapter's under the failure key.)
const SUCCESS: usize = 0;
const FAILURE: usize = 1;
const REJECTION: usize = 2;
const STATUS: usize = 4;

/// A service's counts in the window at `now` as the fleet has them, this host's included.
fn fleet_figures(
    store: &Store<'_>,
    keys: &StorageKeys,
    service: &[u8],
    window: &Window,
    now: u64,
) -> Result<Figures, StoreError> {
    let count = |counter: usize| {
        let (own, others) = store.load_with_fleet(&keys.key(service, counter), window, now)?;
        Ok::<_, StoreError>(own.saturating_add(others))
    };
    Ok(Figures {
        failures: count(FAILURE)?,
        successes: count(SUCCESS)?,
        rejections: count(REJECTION)?,
        ..Figures::default()
    })
}

/// The methods Ganesha calls on every request, registered by `hot::register`. Each takes the
/// configuration and the time its caller read, and runs no PHP code: it refuses a call with a
/// [`Refusal`], never an exception.
impl AbstractSlidingTimeWindowShm {
    /// `load()`. Rate: the events in the buckets spanning the time window. Count: the counter.
    pub(crate) fn load_at(&self, service: &[u8], configured: &Configured, now: u64) -> Result<i64, Refusal> {
        let store = process::store()?;
        let count = match &configured.strategy {
            Strategy::Rate(window) => store.load(service, window, now),
            Strategy::FleetRate(window, thresholds) => {
                load_in_fleet(store, service, window, *thresholds, configured, now)
            }
            Strategy::Count => store.load_count(service, now),
        };
        Ok(count?.min(i64::MAX as u64) as i64)
    }

    /// `increment()`. Rate: one event in the current bucket. Count: one more.
    pub(crate) fn increment_at(&self, service: &[u8], configured: &Configured, now: u64) -> Result<(), Refusal> {
        let store = process::store()?;
        let renewed = match &configured.strategy {
            Strategy::Rate(window) | Strategy::FleetRate(window, _) => store.increment(service, window, now),
            Strategy::Count => store.increment_count(service, now),
        }?;
        configured.keep_service(store, TableKind::Counters, service, now, renewed);
        Ok(())
    }

    /// `loadStatus()`: the stored status, or `Ganesha::STATUS_CALMED_DOWN` (not stored) when
    /// there is none.
    pub(crate) fn load_status_at(&self, service: &[u8], _configured: &Configured, now: u64) -> Result<i64, Refusal> {
        let status = process::store()?.load_status(service, now)?;
        Ok(status.unwrap_or(STATUS_CALMED_DOWN))
    }

    /// `loadLastFailureTime()`: the last failure time, as Ganesha's half-open check must see
    /// it: NOT a read-only call. When intervalToHalfOpen has passed since the stored time, the
    /// first caller swaps the current time in and gets the old one, so that Ganesha admits
    /// exactly that caller as the half-open trial; every other caller gets the new time and is
    /// rejected. In fleet mode the fleet has one trial: see `Store::claim_fleet_trial`.
    pub(crate) fn load_last_failure_time_at(
        &self,
        service: &[u8],
        configured: &Configured,
        now: u64,
    ) -> Result<Option<i64>, Refusal> {
        let store = process::store()?;
        let Some(interval) = configured.interval_to_half_open else {
            return Ok(store.peek_last_failure_time(service, now)?);
        };
        let ttl = configured.last_failure_ttl();
        // In fleet mode with the fleet's view fresh, one trial for the whole fleet; else one
        // for this host, as without fleet mode.
        if matches!(configured.strategy, Strategy::FleetRate(..)) && process::fleet_is_fresh() {
            return Ok(store.claim_fleet_trial(service, now, interval, ttl)?);
        }
        Ok(store.claim_trial(service, now, interval, ttl)?)
    }

    /// `saveLastFailureTime()`.
    pub(crate) fn save_last_failure_time_at(
        &self,
        service: &[u8],
        time: i64,
        configured: &Configured,
        now: u64,
    ) -> Result<(), Refusal> {
        check_range("lastFailureTime", time, timed::MIN_VALUE, timed::MAX_VALUE)?;
        let store = process::store()?;
        let renewed = store.save_last_failure_time(service, time, configured.last_failure_ttl(), now)?;
        configured.keep_service(store, TableKind::Counters, service, now, renewed);
        Ok(())
    }

    /// `saveStatus()`.
    pub(crate) fn save_status_at(
        &self,
        service: &[u8],
        status: i64,
        configured: &Configured,
        now: u64,
    ) -> Result<(), Refusal> {
        check_range("status", status, i32::MIN as i64, i32::MAX as i64)?;
        let store = process::store()?;
        let renewed = store.save_status(service, status, now)?;
        configured.keep_service(store, TableKind::Statuses, service, now, renewed);
        Ok(())
    }
}

impl AbstractSlidingTimeWindowShm {
    /// `setContext()` (registered by `hot::register`): reads the strategy, the time window, the
    /// interval to half-open and the storage keys from Ganesha's `Context`, and checks that the
    /// bucket duration fits the time window. What follows from them is made once per process
    /// and configuration (see `configured`).
    pub(crate) fn set_context(&self, context: &ZendObject) -> PhpResult<()> {
        let read = context::read(context)?;
        let configured = configured(read, self.bucket_duration).map_err(window_error)?;
        *self.configured.borrow_mut() = Some(configured);
        Ok(())
    }

    /// The configuration `setContext()` gave, kept by this call even if PHP code run later in
    /// it sets another.
    fn configuration(&self) -> PhpResult<Arc<Configured>> {
        process::report_segment_loss();
        self.configured.borrow().clone().ok_or_else(|| {
            exception(
                "LogicException",
                "The adapter has no configuration yet: pass it to Ganesha's Builder, whose build() calls setContext()."
                    .into(),
            )
        })
    }

    /// The configuration and the current time, from the clock given to the constructor or
    /// the system's.
    pub(crate) fn configured_now(&self) -> PhpResult<(Arc<Configured>, u64)> {
        let configured = self.configuration()?;
        let now = match &self.clock {
            None => process::unix_time(),
            Some(Clock(callable)) => {
                // Its own reference to the callable, which the call may outlive the object's.
                let callable = callable.shallow_clone();
                let time = ZendCallable::new(&callable).and_then(|c| c.try_call(vec![])).ok().and_then(|t| t.long());
                let time = time
                    .ok_or_else(|| exception("UnexpectedValueException", "The clock did not return an int.".into()))?;
                time.max(0) as u64
            }
        };
        Ok((configured, now))
    }

    /// Every service with data under this configuration's storage keys, sorted by name; with
    /// `buckets`, each one's buckets too (Rate strategy).
    fn views(&self, buckets: bool) -> PhpResult<Vec<ServiceView>> {
        let (configured, now) = self.configured_now()?;
        let thresholds = configured.thresholds.ok_or_else(|| {
            exception(
                "LogicException",
                "The context gave no thresholds: build the adapter with Ganesha's Builder.".into(),
            )
        })?;
        let store = process::store()?;
        let keys = &configured.storage_keys;
        let own: BTreeSet<Vec<u8>> =
            store.live_keys(now).iter().filter_map(|key| keys.service_of(key)).map(<[u8]>::to_vec).collect();
        // Fleet mode: and those this host sees only through the fleet, while the sidecar's last
        // sync is fresh.
        let fleet_only: BTreeSet<Vec<u8>> = match (&configured.strategy, store.fleet_only()) {
            (Strategy::FleetRate(..), Some(region)) if process::fleet_is_fresh() => {
                region.keys().iter().filter_map(|key| keys.service_of(key)).map(<[u8]>::to_vec).collect()
            }
            _ => BTreeSet::new(),
        };
        let services: BTreeSet<Vec<u8>> = own.union(&fleet_only).cloned().collect();
        let (success, failure, rejection, status) = (SUCCESS, FAILURE, REJECTION, STATUS);
        let key = |service: &[u8], suffix: usize| keys.key(service, suffix);
        services
            .into_iter()
            .map(|service| {
                let load = |suffix: usize| match &configured.strategy {
                    Strategy::Rate(window) | Strategy::FleetRate(window, _) => {
                        store.load(&key(&service, suffix), window, now)
                    }
                    Strategy::Count => store.load_count(&key(&service, suffix), now),
                };
                let figures = Figures {
                    failures: load(failure).map_err(storage_error)?,
                    successes: load(success).map_err(storage_error)?,
                    rejections: load(rejection).map_err(storage_error)?,
                    // Ganesha keeps a sliding-window adapter's last failure time under the
                    // failure key (see its `Storage::lastFailureKey()`).
                    last_failure_time: store
                        .peek_last_failure_time(&key(&service, failure), now)
                        .map_err(storage_error)?,
                    status: store
                        .load_status(&key(&service, status), now)
                        .map_err(storage_error)?
                        .unwrap_or(STATUS_CALMED_DOWN),
                };
                let fleet = match &configured.strategy {
                    Strategy::FleetRate(window, _) => {
                        if process::fleet_is_fresh() {
                            let counts = fleet_figures(store, keys, &service, window, now).map_err(storage_error)?;
                            let fleet_figures = Figures {
                                last_failure_time: figures.last_failure_time,
                                status: figures.status,
                                ..counts
                            };
                            let decides = circuit::fleet_decides(thresholds, &figures, &fleet_figures);
                            Fleet::Fresh { figures: fleet_figures, decides, only: !own.contains(&service) }
                        } else {
                            Fleet::Stale
                        }
                    }
                    _ => Fleet::Off,
                };
                // What decides the circuit: this host's figures, or in fleet mode the fleet's.
                let deciding = match fleet {
                    Fleet::Fresh { figures: fleet_figures, decides: true, .. } => fleet_figures,
                    _ => figures,
                };
                // With no interval to half-open given, a tripped circuit shows open.
                let interval = configured.interval_to_half_open.map_or(i64::MAX, |interval| interval as i64);
                let state = circuit::state(thresholds, &deciding, interval, now as i64);
                let buckets = match &configured.strategy {
                    Strategy::Rate(window) | Strategy::FleetRate(window, _) if buckets => {
                        let counts = |suffix: usize| {
                            store.bucket_counts(&key(&service, suffix), window, now).map_err(storage_error)
                        };
                        let (failures, successes, rejections) =
                            (counts(failure)?, counts(success)?, counts(rejection)?);
                        let bucket_duration = window.bucket_duration();
                        Some(
                            failures
                                .iter()
                                .zip(&successes)
                                .zip(&rejections)
                                .map(|((&(bucket, failures), &(_, successes)), &(_, rejections))| BucketView {
                                    start: bucket * bucket_duration,
                                    failures,
                                    successes,
                                    rejections,
                                })
                                .collect(),
                        )
                    }
                    _ => None,
                };
                let counted = |suffix: usize, kind| {
                    store.totals(kind, &key(&service, suffix)).map(Option::unwrap_or_default).map_err(storage_error)
                };
                let failed = counted(failure, TableKind::Counters)?;
                let status_totals = counted(status, TableKind::Statuses)?;
                let totals = ServiceTotals {
                    successes: counted(success, TableKind::Counters)?.events,
                    failures: failed.events,
                    rejections: counted(rejection, TableKind::Counters)?.events,
                    trips: status_totals.events,
                    calm_downs: status_totals.others,
                    // Ganesha claims the trial on the failure key (its `lastFailureKey()`).
                    trials: failed.others,
                };
                Ok(ServiceView { service, figures, state, buckets, totals, fleet })
            })
            .collect()
    }

    /// The configuration and the current time, for a call that only the Count strategy makes.
    fn count_strategy(&self, method: &str) -> PhpResult<(Arc<Configured>, u64)> {
        let (configured, now) = self.configured_now()?;
        match configured.strategy {
            Strategy::Count => Ok((configured, now)),
            Strategy::Rate(_) | Strategy::FleetRate(..) => Err(exception(
                "LogicException",
                format!(
                    "{method}() is a Count strategy call; with the Rate strategy the adapter counts in time buckets."
                ),
            )),
        }
    }
}

fn storage_error(StoreError { table, error }: StoreError) -> PhpException {
    let message = match error {
        TableError::KeyTooLong { length, max } => format!(
            "ganesha_shm: a key of {length} bytes is longer than {INI_MAX_KEY_LENGTH} ({max} bytes); \
             raise {INI_MAX_KEY_LENGTH} in php.ini (a key is Ganesha's prefix, the service name and a suffix)"
        ),
        TableError::Full { slots } => {
            // Built once per table: a store at its capacity may refuse every request, and the
            // message never changes in a process (the capacity is fixed at startup).
            static FULL: [once_cell::sync::OnceCell<String>; 2] =
                [once_cell::sync::OnceCell::new(), once_cell::sync::OnceCell::new()];
            let (index, what) = match table {
                TableKind::Counters => (0, "counter slots (3 per service)"),
                TableKind::Statuses => (1, "status slots (1 per service)"),
            };
            FULL[index]
                .get_or_init(|| {
                    format!(
                        "ganesha_shm: the store is full: {slots} {what} hold unexpired data; \
                         raise {INI_MAX_SERVICES} in php.ini (now {})",
                        process::max_services()
                    )
                })
                .clone()
        }
        TableError::Contended => {
            "ganesha_shm: too many processes raced to create the same key at once; try again".into()
        }
    };
    storage_exception(message)
}

fn window_error(error: WindowError) -> PhpException {
    exception("InvalidArgumentException", error.to_string())
}

fn check_range(name: &'static str, value: i64, min: i64, max: i64) -> Result<(), Refusal> {
    if (min..=max).contains(&value) {
        return Ok(());
    }
    Err(Refusal::OutOfRange { name, value, min, max })
}

/// The class's hot methods: see `hot`.
fn register_hot_methods(class: ext_php_rs::builders::ClassBuilder) -> ext_php_rs::builders::ClassBuilder {
    hot::register(class)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn default_keys() -> StorageKeys {
        StorageKeys {
            prefix: b"ganesha_".to_vec(),
            suffixes: ["_success", "_failure", "_rejection", "_last_failure_time", "_status"]
                .map(|s| s.as_bytes().to_vec()),
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
    fn array_keys_that_php_makes_integers() {
        assert_eq!(integer_key(b"0"), Some(0));
        assert_eq!(integer_key(b"12"), Some(12));
        assert_eq!(integer_key(b"-12"), Some(-12));
        assert_eq!(integer_key(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(integer_key(b"-9223372036854775808"), Some(i64::MIN));
        for string in
            [&b""[..], b"-0", b"012", b"+1", b"1 ", b" 1", b"1.0", b"9223372036854775808", b"-", b"1e3", b"\xff"]
        {
            assert_eq!(integer_key(string), None, "{:?}", String::from_utf8_lossy(string));
        }
    }

    #[test]
    fn the_keys_of_a_service_are_prefix_service_suffix() {
        let keys = default_keys();
        let own = keys.of_service(b"svc");
        assert_eq!(own[0], b"ganesha_svc_success");
        assert_eq!(own[4], b"ganesha_svc_status");
        assert!(own.iter().all(|key| keys.service_of(key) == Some(&b"svc"[..])));
        assert_eq!(keys.service_of(b"ganesha__failure"), Some(&b""[..]), "the empty service is listed");
        assert!(!keys.covers(b"ganesha__failure"), "and not covered by reset()");
    }

    #[test]
    fn reset_takes_metacharacters_literally() {
        let keys = StorageKeys {
            prefix: b".*(".to_vec(),
            suffixes: ["$", "|", "[", "\\", "\0"].map(|s| s.as_bytes().to_vec()),
        };
        assert!(keys.covers(b".*(a$"));
        assert!(keys.covers(b".*(a\0"));
        assert!(!keys.covers(b"x*(a$"));
        assert!(!keys.covers(b".*(a"));
    }
}
