//! The engine's internals that only `unsafe` code reaches, behind a small safe API: the one
//! module of this crate with `unsafe` (the store's is in the core crate, in its segment and
//! its table). What it wraps, and what makes each wrapper sound:
//! * [`convert_string`], [`convert_long`]: an argument converted as PHP converts an internal
//!   function's;
//! * [`HashedName`], [`find`], [`class_name`], [`declared_property`]: an object's class and
//!   properties, read where the engine keeps them;
//! * [`warn`] and [`unix_time`]: PHP's log and PHP's clock.
//!
//! A `&Zval`, `&ZendObject` or `&HashTable` is taken, as ext-php-rs's own safe API takes it, to
//! be a live value the engine made, alive for the borrow.
//!
//! It uses ext-php-rs and libc, and nothing else of this crate.

use std::ffi::{c_uint, CStr};

use ext_php_rs::boxed::ZBox;
use ext_php_rs::ffi::{zend_hash_find, zend_long, zend_property_info, zend_string, zval, HashTable, ZEND_ACC_STATIC};
use ext_php_rs::flags::DataType;
use ext_php_rs::types::{ZendHashTable, ZendObject, ZendStr, Zval};
use ext_php_rs::zend::ExecutorGlobals;

// ---------------------------------------------------------------------------------------------
// Arguments converted as PHP converts an internal function's

// The engine's own functions behind `Z_PARAM_STR` and `Z_PARAM_LONG`, which ext-php-rs's
// bindings leave out (`ZEND_FASTCALL` is the C calling convention on every 64-bit target).
unsafe extern "C" {
    fn zend_parse_arg_str_slow(arg: *mut zval, dest: *mut *mut zend_string, arg_num: u32) -> bool;
    fn zend_parse_arg_long_slow(arg: *mut zval, dest: *mut zend_long, arg_num: u32) -> bool;
    fn zend_wrong_parameter_type_error(num: u32, expected_type: c_uint, arg: *mut zval);
}

/// PHP's `zend_expected_type`, the type a refusal names: the first entries of
/// `Z_EXPECTED_TYPES`, in the same order since PHP 8.0.
const Z_EXPECTED_LONG: c_uint = 0;
const Z_EXPECTED_LONG_OR_NULL: c_uint = 1;
const Z_EXPECTED_STRING: c_uint = 4;

/// Whether the engine is running a call of a function that declares a parameter `number`
/// (from 1): what the conversions below read, for the caller's typing mode, the function's name
/// and the parameter's type and name. Only a handler's argument, converted during its call,
/// passes; no conversion runs otherwise.
fn running_call_declares(number: u32) -> bool {
    // The guard is dropped before the conversion, which may run PHP code.
    let globals = ExecutorGlobals::get();
    // SAFETY: the current frame is null or the one the engine runs, with its function, which
    // lives as long as the frame; `common` is the part every kind of function shares.
    unsafe {
        globals
            .current_execute_data
            .as_ref()
            .and_then(|ex| ex.func.as_ref())
            .is_some_and(|func| number >= 1 && number <= func.common.num_args)
    }
}

/// Argument `number` (from 1) of the running call, declared `string` and not a string,
/// converted in place by the engine as `Z_PARAM_STR` converts it (see `arguments`): the string
/// it made, which lives in `arg`. `None` when PHP refuses it, an exception pending then (PHP's
/// `TypeError`, or what `__toString()` or an error handler threw); `None` too, with nothing
/// thrown, outside a call declaring that parameter.
#[cold]
#[inline(never)]
pub fn convert_string(arg: &mut Zval, number: u32) -> Option<&[u8]> {
    if !running_call_declares(number) {
        return None;
    }
    let mut string: *mut zend_string = std::ptr::null_mut();
    // SAFETY: a call declaring parameter `number` is running (checked above), whose frame the
    // engine reads for the caller's typing mode and the parameter; on success it leaves a
    // string in `arg` and points `string` at it.
    if unsafe { zend_parse_arg_str_slow(arg, &raw mut string, number) } {
        // SAFETY: the string is held by `arg`, which outlives the borrow returned.
        return unsafe { string.as_ref() }.map(|string| string.as_bytes());
    }
    refuse(arg, number, Z_EXPECTED_STRING);
    None
}

/// Argument `number` (from 1) of the running call, declared `int` (`?int` when `nullable`) and
/// not an int, converted by the engine as `Z_PARAM_LONG` converts it. `None` when PHP refuses
/// it (see [`convert_string`]).
#[cold]
#[inline(never)]
pub fn convert_long(arg: &mut Zval, number: u32, nullable: bool) -> Option<i64> {
    if !running_call_declares(number) {
        return None;
    }
    let mut value: zend_long = 0;
    // SAFETY: as in `convert_string`; on success the engine writes the int into `value`.
    if unsafe { zend_parse_arg_long_slow(arg, &raw mut value, number) } {
        return Some(value);
    }
    refuse(arg, number, if nullable { Z_EXPECTED_LONG_OR_NULL } else { Z_EXPECTED_LONG });
    None
}

/// PHP's own `TypeError` for argument `number`, as zpp throws it for a wrong argument: nothing
/// when the conversion left an exception already (an error handler's, `__toString()`'s).
fn refuse(arg: &mut Zval, number: u32, expected: c_uint) {
    // SAFETY: as in `convert_string` (checked by its caller); the function reads the current
    // frame for the function's and argument's names, and `arg` for the type given; it throws
    // only when no exception is pending.
    unsafe { zend_wrong_parameter_type_error(number, expected, arg) };
}

// ---------------------------------------------------------------------------------------------
// Objects and their properties

/// A name to look up in the engine's tables, made once: a persistent string whose hash PHP
/// computed when it was made, so that each lookup is one probe of the table, without hashing
/// the name again, and only reads the string.
pub struct HashedName(ZBox<ZendStr>);

// SAFETY: the string is made, and its hash computed, when the name is made; after that it is
// only read (a lookup writes a string's hash only while it is 0), and freed with the name.
unsafe impl Send for HashedName {}
unsafe impl Sync for HashedName {}

impl HashedName {
    pub fn new(name: &str) -> Self {
        let mut name = ZendStr::new(name, true);
        // SAFETY: an empty table is a valid one to look a string up in; the lookup only
        // computes and stores the string's hash, which is what we want of it.
        unsafe {
            let empty = ZendHashTable::new();
            zend_hash_find(&raw const *empty, &raw mut *name);
        }
        Self(name)
    }
}

impl std::ops::Deref for HashedName {
    type Target = ZendStr;

    fn deref(&self) -> &ZendStr {
        &self.0
    }
}

/// The value under `name` in `table`, if any.
#[inline(always)]
pub fn find<'a>(table: &'a HashTable, name: &HashedName) -> Option<&'a Zval> {
    // SAFETY: `name`'s hash is computed (see `HashedName`), so the lookup only reads it; the
    // value found lives as long as the table.
    unsafe { zend_hash_find(table, std::ptr::from_ref::<ZendStr>(name).cast_mut()).as_ref() }
}

/// The name of the object's class, as bytes.
#[inline(always)]
pub fn class_name(object: &ZendObject) -> Option<&[u8]> {
    // SAFETY: a live object's class entry, and the class's name, outlive the object.
    let name: &zend_string = unsafe { object.ce.as_ref()?.name.as_ref()? };
    // SAFETY: a zend_string holds `len` bytes from `val`.
    Some(unsafe { std::slice::from_raw_parts(name.val.as_ptr().cast::<u8>(), name.len) })
}

/// PHP's `ZEND_VIRTUAL_PROPERTY_OFFSET` (8.4): the offset of a property without storage.
const VIRTUAL_PROPERTY_OFFSET: u32 = u32::MAX;

/// The property `name` that the object's class declares (not static), as the object keeps it:
/// `None` when the class declares no such property, or when it is unset. What a getter
/// returning it would return, read without calling anything of the engine.
#[inline(always)]
pub fn declared_property<'a>(object: &'a ZendObject, name: &HashedName) -> Option<&'a Zval> {
    // SAFETY: the class entry outlives the object (see `class_name`), and its table of property
    // declarations maps names to `zend_property_info` pointers that live as long as the class.
    let class = unsafe { object.ce.as_ref()? };
    let info = unsafe { (find(&class.properties_info, name)?.value.ptr as *const zend_property_info).as_ref()? };
    // A static property has no slot in the object, nor has a virtual one (PHP 8.4's property
    // hooks), whose offset is `ZEND_VIRTUAL_PROPERTY_OFFSET`.
    if info.flags & ZEND_ACC_STATIC != 0 || info.offset == VIRTUAL_PROPERTY_OFFSET {
        return None;
    }
    // SAFETY: for any other property the class declares, `offset` is the byte offset, from the
    // start of an object of the class, of the property's slot in its properties table, which
    // the object holds for as long as it lives (PHP's `OBJ_PROP`).
    let slot = unsafe { &*(std::ptr::from_ref(object).cast::<u8>().add(info.offset as usize).cast::<Zval>()) };
    (slot.get_type() != DataType::Undef).then_some(slot)
}

// ---------------------------------------------------------------------------------------------
// PHP's log and clock

/// Logs `message` as a warning where PHP logs its own (error_log, or stderr).
pub fn warn(message: &CStr) {
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

/// The Unix time in seconds, read as PHP's `time()`, which Ganesha calls, reads it: with
/// `gettimeofday()` (PHP's `php_time()`). Not `time(NULL)`: glibc reads that from the kernel's
/// coarse clock, which enters a second up to a tick (a few milliseconds) after the precise one,
/// so that right after each second began it read one second behind Ganesha's `time()`.
pub fn unix_time() -> u64 {
    let mut now = libc::timeval { tv_sec: 0, tv_usec: 0 };
    // SAFETY: `now` is a valid timeval to fill; a null timezone is what POSIX asks for.
    if unsafe { libc::gettimeofday(&mut now, std::ptr::null_mut()) } != 0 {
        // As PHP falls back, which cannot reasonably happen.
        // SAFETY: time(NULL) only reads the clock; the null pointer tells it not to store it.
        return unsafe { libc::time(std::ptr::null_mut()) }.max(0) as u64;
    }
    now.tv_sec.max(0) as u64
}
