//! What `setContext()` reads of Ganesha's `Context`: the strategy, and of its configuration the
//! time window, the interval to half-open, the thresholds and the storage keys.
//!
//! PHP shares nothing between requests, so every request builds its Ganesha and `setContext()`
//! runs once a request. Through Ganesha's getters that is 13 PHP method calls, which cost more
//! than the request's own calls to the adapter. Ganesha's `Context` and `Configuration` getters
//! only return their private properties, and its `StorageKeys` getters only return its
//! constants: for objects of exactly those classes the properties are read where the object
//! keeps them, and the storage keys once per process. Any other object (a subclass, another
//! `StorageKeysInterface`, a test double) is read through its methods, as before.

use std::cell::OnceCell;
use std::rc::Rc;

use ext_php_rs::exception::PhpException;
use ext_php_rs::ffi::{zend_hash_str_find, zend_property_info, ZEND_ACC_STATIC};
use ext_php_rs::flags::DataType;
use ext_php_rs::prelude::PhpResult;
use ext_php_rs::types::{ZendObject, Zval};

use crate::errors::exception;

const CONTEXT: &str = "Ackintosh\\Ganesha\\Context";
const CONFIGURATION: &str = "Ackintosh\\Ganesha\\Configuration";
const STORAGE_KEYS: &str = "Ackintosh\\Ganesha\\Storage\\StorageKeys";

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

    /// The keys of one service: its counts, its last failure time and its status.
    pub fn of_service(&self, service: &[u8]) -> [Vec<u8>; 5] {
        self.suffixes.each_ref().map(|suffix| [&self.prefix[..], service, suffix].concat())
    }
}


/// Ganesha's `Context::STRATEGY_COUNT`; every other strategy is a Rate one.
const COUNT_STRATEGY: &[u8] = b"count";

/// What a `Context` gives, as read.
#[derive(Debug, PartialEq, Eq)]
pub struct Read {
    pub strategy: Strategy,
    pub interval_to_half_open: i64,
    pub keys: Rc<StorageKeys>,
}

/// The strategy, with what the configuration gives for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// `Builder::withRateStrategy()`; the thresholds are `None` when the configuration has none.
    Rate { time_window: i64, failure_rate_threshold: Option<i64>, minimum_requests: Option<i64> },
    /// `Builder::withCountStrategy()`.
    Count { failure_count_threshold: Option<i64> },
}

/// Reads `context`, asking its configuration only for what its strategy uses (a Rate
/// configuration has no `failureCountThreshold`, and Ganesha's getter would throw).
pub fn read(context: &ZendObject) -> PhpResult<Read> {
    let own = |name| own_property(context, CONTEXT, name).map(Zval::shallow_clone);
    let (strategy, configuration) = match (own("strategy"), own("configuration")) {
        (Some(strategy), Some(configuration)) if strategy.is_string() && configuration.is_object() => {
            (strategy, configuration)
        }
        _ => (call(context, "strategy")?, call(context, "configuration")?),
    };
    let strategy = strategy.zend_str().ok_or_else(|| not_a_context("strategy() did not return a string"))?;
    let configuration =
        configuration.object().ok_or_else(|| not_a_context("configuration() did not return an object"))?;
    // Ganesha's `Configuration` getters return `$this->params[<their name>]`.
    let params = own_property(configuration, CONFIGURATION, "params").and_then(Zval::array);
    let setting = |method: &str| -> PhpResult<Zval> {
        match params {
            Some(params) => params
                .get(method)
                .map(Zval::shallow_clone)
                .ok_or_else(|| not_a_context(&format!("its configuration has no {method}"))),
            None => call(configuration, method),
        }
    };
    let long = |method: &str| {
        setting(method)?.long().ok_or_else(|| not_a_context(&format!("{method}() did not return an int")))
    };
    let optional_long = |method: &str| setting(method).ok().and_then(|value| value.long());
    let strategy = if strategy.as_bytes() == COUNT_STRATEGY {
        Strategy::Count { failure_count_threshold: optional_long("failureCountThreshold") }
    } else {
        Strategy::Rate {
            time_window: long("timeWindow")?,
            failure_rate_threshold: optional_long("failureRateThreshold"),
            minimum_requests: optional_long("minimumRequests"),
        }
    };
    let interval_to_half_open = long("intervalToHalfOpen")?;
    let keys = setting("storageKeys")?;
    let keys = keys.object().ok_or_else(|| not_a_context("storageKeys() did not return an object"))?;
    Ok(Read { strategy, interval_to_half_open, keys: storage_keys(keys)? })
}

/// The keys of a `StorageKeysInterface`: for Ganesha's own class, read once per process (its
/// getters return its constants).
fn storage_keys(keys: &ZendObject) -> PhpResult<Rc<StorageKeys>> {
    thread_local! {
        static GANESHA_KEYS: OnceCell<Rc<StorageKeys>> = const { OnceCell::new() };
    }
    if class_name(keys) != Some(STORAGE_KEYS) {
        return keys_by_methods(keys).map(Rc::new);
    }
    if let Some(cached) = GANESHA_KEYS.with(|cached| cached.get().cloned()) {
        return Ok(cached);
    }
    let read = Rc::new(keys_by_methods(keys)?);
    GANESHA_KEYS.with(|cached| cached.get_or_init(|| Rc::clone(&read)).clone());
    Ok(read)
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

fn class_name(object: &ZendObject) -> Option<&str> {
    // SAFETY: a live object's class entry outlives it.
    unsafe { object.ce.as_ref() }?.name()
}

/// The property `name` of `object` as the object keeps it, when `object` is of exactly the class
/// `class` and declares that property (not static): `None` otherwise, or when it is unset.
fn own_property<'a>(object: &'a ZendObject, class: &str, name: &str) -> Option<&'a Zval> {
    if class_name(object) != Some(class) {
        return None;
    }
    // SAFETY: the class entry outlives the object (see `class_name`), and its table of property
    // declarations maps names to `zend_property_info` pointers that live as long as the class.
    let info = unsafe {
        let found = zend_hash_str_find(&(*object.ce).properties_info, name.as_ptr().cast(), name.len());
        (found.as_ref()?.value.ptr as *const zend_property_info).as_ref()?
    };
    if info.flags & ZEND_ACC_STATIC != 0 {
        return None;
    }
    // SAFETY: for a declared, non-static property of the object's own class, `offset` is the
    // byte offset, from the start of the object, of the property's slot in its properties table,
    // which the object holds for as long as it lives (PHP's `OBJ_PROP`).
    let slot = unsafe { &*(std::ptr::from_ref(object).cast::<u8>().add(info.offset as usize).cast::<Zval>()) };
    (slot.get_type() != DataType::Undef).then_some(slot)
}

pub fn not_a_context(why: &str) -> PhpException {
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
