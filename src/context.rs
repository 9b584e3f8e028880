//! What `setContext()` reads of Ganesha's `Context`: the strategy, and of its configuration the
//! time window, the interval to half-open, the thresholds and the storage keys. The time window
//! (of a Rate strategy) and the storage keys are what Ganesha's own adapters read, and all that a
//! context must give: a `Configuration` built by hand with only `timeWindow`, as Ganesha's own
//! adapter tests build one, is taken.
//!
//! PHP shares nothing between requests, so every request builds its Ganesha and `setContext()`
//! runs once a request. Through Ganesha's getters that is 13 PHP method calls, which cost more
//! than the request's own calls to the adapter. Ganesha's `Context` and `Configuration` getters
//! only return their private properties, and its `StorageKeys` getters only return its
//! constants: for objects of exactly those classes the properties are read where the object
//! keeps them, and the storage keys once per process. Any other object (a subclass, another
//! `StorageKeysInterface`, a test double) is read through its methods, as before.
//!
//! What this keeps across requests lives in statics, never in `thread_local!`s with a
//! destructor: a destructor registered for a thread keeps this library loaded when PHP unloads
//! it (Apache's graceful restart), with the statics of the PHP it was loaded for.

use std::sync::Arc;

use ext_php_rs::exception::PhpException;
use ext_php_rs::ffi::HashTable;
use ext_php_rs::prelude::PhpResult;
use ext_php_rs::types::{ZendObject, Zval};
use ext_php_rs::zend::{ClassEntry, ExecutorGlobals};
use once_cell::sync::OnceCell;

use crate::engine::{class_name, declared_property, find, HashedName};
use crate::errors::exception;

const CONTEXT: &[u8] = b"Ackintosh\\Ganesha\\Context";
const CONFIGURATION: &[u8] = b"Ackintosh\\Ganesha\\Configuration";
const STORAGE_KEYS: &[u8] = b"Ackintosh\\Ganesha\\Storage\\StorageKeys";

/// The storage keys of a configuration, what `reset()` may delete: Ganesha's prefix and its
/// five suffixes, in the order of `StorageKeysInterface`: success, failure, rejection, last
/// failure time, status.
#[derive(Debug, PartialEq, Eq)]
pub struct StorageKeys {
    pub prefix: Vec<u8>,
    pub suffixes: [Vec<u8>; 5],
}

impl StorageKeys {
    /// Whether `key` is `prefix . service . suffix` with a non-empty service, for one of the
    /// configuration's suffixes (as Ganesha's own adapters match `/^prefix.+(suffixes)$/`).
    pub fn covers(&self, key: &[u8]) -> bool {
        self.service_of(key).is_some_and(|service| !service.is_empty())
    }

    /// The service name in `key`, the empty one included, when `key` is one of this
    /// configuration's keys.
    pub fn service_of<'k>(&self, key: &'k [u8]) -> Option<&'k [u8]> {
        let rest = key.strip_prefix(&self.prefix[..])?;
        self.suffixes.iter().find_map(|suffix| rest.strip_suffix(&suffix[..]))
    }

    /// The service in `key` and which of its counters `key` is (0 success, 1 failure, 2
    /// rejection, the order of `suffixes`), when `key` is a counter key of this configuration.
    pub fn counter_of<'k>(&self, key: &'k [u8]) -> Option<(&'k [u8], usize)> {
        let rest = key.strip_prefix(&self.prefix[..])?;
        self.suffixes[..3]
            .iter()
            .enumerate()
            .find_map(|(counter, suffix)| Some((rest.strip_suffix(&suffix[..])?, counter)))
    }

    /// The key of `service` with suffix `suffix` (an index of `suffixes`).
    pub fn key(&self, service: &[u8], suffix: usize) -> Vec<u8> {
        [&self.prefix[..], service, &self.suffixes[suffix][..]].concat()
    }

    /// The keys of one service: its counts, its last failure time and its status.
    pub fn of_service(&self, service: &[u8]) -> [Vec<u8>; 5] {
        std::array::from_fn(|suffix| self.key(service, suffix))
    }
}

/// Ganesha's `Context::STRATEGY_COUNT`; every other strategy is a Rate one.
const COUNT_STRATEGY: &[u8] = b"count";

/// What a `Context` gives, as read.
#[derive(Debug, PartialEq, Eq)]
pub struct Read {
    pub strategy: Strategy,
    /// `None` when the configuration has none (see `Configured`).
    pub interval_to_half_open: Option<i64>,
    pub keys: Arc<StorageKeys>,
}

/// The strategy, with what the configuration gives for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// `Builder::withRateStrategy()`; the thresholds are `None` when the configuration has none.
    Rate { time_window: i64, failure_rate_threshold: Option<i64>, minimum_requests: Option<i64> },
    /// `Builder::withCountStrategy()`.
    Count { failure_count_threshold: Option<i64> },
}

/// The names looked up in Ganesha's objects, hashed once (see `HashedName`).
struct Names {
    strategy: HashedName,
    configuration: HashedName,
    params: HashedName,
    time_window: HashedName,
    failure_rate_threshold: HashedName,
    minimum_requests: HashedName,
    failure_count_threshold: HashedName,
    interval_to_half_open: HashedName,
    storage_keys: HashedName,
}

impl Names {
    fn get() -> &'static Self {
        static NAMES: OnceCell<Names> = OnceCell::new();
        NAMES.get_or_init(|| Names {
            strategy: HashedName::new("strategy"),
            configuration: HashedName::new("configuration"),
            params: HashedName::new("params"),
            time_window: HashedName::new("timeWindow"),
            failure_rate_threshold: HashedName::new("failureRateThreshold"),
            minimum_requests: HashedName::new("minimumRequests"),
            failure_count_threshold: HashedName::new("failureCountThreshold"),
            interval_to_half_open: HashedName::new("intervalToHalfOpen"),
            storage_keys: HashedName::new("storageKeys"),
        })
    }
}

/// Reads `context`, asking its configuration only for what its strategy uses (a Rate
/// configuration has no `failureCountThreshold`, and Ganesha's getter would throw). Each setting
/// is what the configuration's getter returns: a getter that throws, or returns no int for a
/// setting the strategy needs, refuses the context.
pub fn read(context: &ZendObject) -> PhpResult<Read> {
    let names = Names::get();
    let own = |name| own_property(context, CONTEXT, name).map(Zval::shallow_clone);
    let (strategy, configuration) = match (own(&names.strategy), own(&names.configuration)) {
        (Some(strategy), Some(configuration)) if strategy.is_string() && configuration.is_object() => {
            (strategy, configuration)
        }
        _ => (call(context, "strategy")?, call(context, "configuration")?),
    };
    let strategy = strategy.zend_str().ok_or_else(|| not_a_context("strategy() did not return a string"))?;
    let configuration =
        configuration.object().ok_or_else(|| not_a_context("configuration() did not return an object"))?;
    // Ganesha's `Configuration` getters return `$this->params[<their name>]`.
    let params = own_property(configuration, CONFIGURATION, &names.params).and_then(Zval::array);
    let long = |name: &HashedName| {
        int_setting(configuration, params, name, true)?.ok_or_else(|| not_an_int(name.as_str().unwrap_or_default()))
    };
    let optional_long = |name: &HashedName| int_setting(configuration, params, name, false);
    let strategy = strategy_of(strategy.as_bytes(), long, optional_long)?;
    let interval_to_half_open = optional_long(&names.interval_to_half_open)?;
    let keys = match params {
        Some(params) => find(params, &names.storage_keys)
            .map(Zval::shallow_clone)
            .ok_or_else(|| not_a_context("its configuration has no storageKeys"))?,
        None => call(configuration, "storageKeys")?,
    };
    let keys = keys.object().ok_or_else(|| not_a_context("storageKeys() did not return an object"))?;
    Ok(Read { strategy, interval_to_half_open, keys: storage_keys(keys)? })
}

/// The int setting `name` of `configuration`, as its getter of that name returns it; `None`
/// when a setting that is not `required` is not given (no getter, or, in Ganesha's
/// `Configuration`, not set: absent or null, as Ganesha's own `isset()` checks tell).
///
/// `params`: Ganesha's `Configuration`'s own, whose getters return what it stores under their
/// name with the getters' `: int` return type: an int stored is what the getter returns, and
/// anything else stored (a numeric string, a float, a bool) the getter converts under Ganesha's
/// typing mode, or refuses, so the getter itself is asked for it.
fn int_setting(
    configuration: &ZendObject,
    params: Option<&HashTable>,
    name: &HashedName,
    required: bool,
) -> PhpResult<Option<i64>> {
    let method = name.as_str().unwrap_or_default();
    if let Some(params) = params {
        let Some(stored) = find(params, name) else {
            return if required { Err(not_a_context(&format!("its configuration has no {method}"))) } else { Ok(None) };
        };
        if let Some(value) = stored.long() {
            return Ok(Some(value));
        }
        if !required && stored.dereference().is_null() {
            return Ok(None);
        }
    }
    let value = match configuration.try_call_method(method, vec![]) {
        // No such getter: the setting is not given.
        Err(_) if !required => return Ok(None),
        called => checked(called, method)?,
    };
    match value.long() {
        Some(value) => Ok(Some(value)),
        None if !required && value.is_null() => Ok(None),
        None => Err(not_an_int(method)),
    }
}

/// The strategy named `strategy`, with what its configuration gives: through `long` the
/// settings it needs, through `optional_long` those it may lack (`None` when it does).
fn strategy_of<E>(
    strategy: &[u8],
    long: impl Fn(&HashedName) -> Result<i64, E>,
    optional_long: impl Fn(&HashedName) -> Result<Option<i64>, E>,
) -> Result<Strategy, E> {
    let names = Names::get();
    Ok(if strategy == COUNT_STRATEGY {
        Strategy::Count { failure_count_threshold: optional_long(&names.failure_count_threshold)? }
    } else {
        Strategy::Rate {
            time_window: long(&names.time_window)?,
            failure_rate_threshold: optional_long(&names.failure_rate_threshold)?,
            minimum_requests: optional_long(&names.minimum_requests)?,
        }
    })
}

/// What `read` reads of a `Context`, a `Configuration` and a `StorageKeys` of exactly Ganesha's
/// classes, the storage keys read already in this process: read without calling any PHP code
/// nor anything of the engine that could, so that `setContext()` can run it unguarded (see
/// `hot`). `None` for anything else, which `read` reads, or refuses.
pub fn read_own(context: &ZendObject) -> Option<Read> {
    let names = Names::get();
    let strategy = own_property(context, CONTEXT, &names.strategy)?.zend_str()?;
    let configuration = own_property(context, CONTEXT, &names.configuration)?.object()?;
    let params = own_property(configuration, CONFIGURATION, &names.params)?.array()?;
    let long = |name: &HashedName| find(params, name)?.long();
    // Not set (absent or null), or an int: anything else is what the getter converts or
    // refuses, which `read` asks it.
    let optional_long = |name: &HashedName| match find(params, name) {
        None => Ok(None),
        Some(stored) if stored.is_null() => Ok(None),
        Some(stored) => stored.long().map(Some).ok_or(()),
    };
    let strategy = strategy_of(strategy.as_bytes(), |name| long(name).ok_or(()), optional_long).ok()?;
    let interval_to_half_open = optional_long(&names.interval_to_half_open).ok()?;
    let keys = find(params, &names.storage_keys)?.object()?;
    if class_name(keys) != Some(STORAGE_KEYS) {
        return None;
    }
    Some(Read { strategy, interval_to_half_open, keys: Arc::clone(GANESHA_KEYS.get()?) })
}

/// Ganesha's own storage keys, once read (see `storage_keys`).
static GANESHA_KEYS: OnceCell<Arc<StorageKeys>> = OnceCell::new();

/// The keys of a `StorageKeysInterface`: for Ganesha's own class, read once per process (its
/// getters return its constants).
fn storage_keys(keys: &ZendObject) -> PhpResult<Arc<StorageKeys>> {
    if class_name(keys) != Some(STORAGE_KEYS) {
        return keys_by_methods(keys).map(Arc::new);
    }
    if let Some(keys) = GANESHA_KEYS.get() {
        return Ok(Arc::clone(keys));
    }
    let read = Arc::new(keys_by_methods(keys)?);
    Ok(Arc::clone(GANESHA_KEYS.get_or_init(|| read)))
}

fn keys_by_methods(keys: &ZendObject) -> PhpResult<StorageKeys> {
    let suffix = |name: &str| string(keys, name);
    Ok(StorageKeys {
        prefix: suffix("prefix")?,
        suffixes: [
            suffix("success")?,
            suffix("failure")?,
            suffix("rejection")?,
            suffix("lastFailureTime")?,
            suffix("status")?,
        ],
    })
}

/// The property `name` of `object` as the object keeps it, when `object` is of exactly the class
/// `class` and declares that property (not static): `None` otherwise, or when it is unset.
#[inline(always)]
fn own_property<'a>(object: &'a ZendObject, class: &[u8], name: &HashedName) -> Option<&'a Zval> {
    if class_name(object) != Some(class) {
        return None;
    }
    declared_property(object, name)
}

pub fn not_a_context(why: &str) -> PhpException {
    exception("InvalidArgumentException", not_a_context_message(why))
}

fn not_a_context_message(why: &str) -> String {
    format!("setContext() expects Ganesha's Context: {why}.")
}

fn not_an_int(method: &str) -> PhpException {
    not_a_context(&format!("{method}() did not return an int"))
}

fn call(object: &ZendObject, method: &str) -> PhpResult<Zval> {
    checked(object.try_call_method(method, vec![]), method)
}

/// What calling `method` gave: a refusal when there is no such method, or when it threw.
fn checked(called: ext_php_rs::error::Result<Zval>, method: &str) -> PhpResult<Zval> {
    let value = called.map_err(|_| not_a_context(&format!("it has no method {method}()")))?;
    if ExecutorGlobals::has_exception() {
        return Err(threw(method));
    }
    Ok(value)
}

/// The refusal of a context whose getter `method` threw: an `InvalidArgumentException` saying so,
/// thrown here, over the getter's exception, which PHP makes its previous (as it does for any
/// exception thrown while another is pending). The `PhpException` returned throws nothing more:
/// ext-php-rs throws nothing over a pending exception.
fn threw(method: &str) -> PhpException {
    let class = ExecutorGlobals::pending_exception_class().unwrap_or_default();
    let message = not_a_context_message(&format!("{method}() threw {class} (the previous exception)"));
    if let Some(invalid_argument) = ClassEntry::try_find("InvalidArgumentException") {
        // Not `PhpException::throw`, which would leave the getter's exception alone.
        let _ = ext_php_rs::exception::throw_with_code(invalid_argument, 0, &message);
    }
    exception("InvalidArgumentException", message)
}

fn string(object: &ZendObject, method: &str) -> PhpResult<Vec<u8>> {
    let value = call(object, method)?;
    value
        .zend_str()
        .map(|s| s.as_bytes().to_vec())
        .ok_or_else(|| not_a_context(&format!("{method}() did not return a string")))
}
