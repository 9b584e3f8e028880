//! The class's `string` and `int` arguments, read as PHP reads an internal function's
//! (`Z_PARAM_STR`, `Z_PARAM_LONG`): a string or an int is taken as it is; anything else goes
//! to the engine's own conversion, which follows the caller's typing mode. In coercive mode it
//! makes a string of an int, a float, a bool or a `Stringable` object, and an int of a numeric
//! string, a float in the int range or a bool (with PHP's deprecation for a fractional part),
//! and takes null as `""` or 0 after PHP's deprecation; in strict mode it converts nothing. What
//! it refuses is refused with PHP's own `TypeError`, whose message names the argument as PHP
//! names a built-in function's.
//!
//! The conversion may run PHP code (`__toString()`, an error handler for a deprecation), so it
//! runs only in a guarded handler: the hot handlers' common case reads a string and an int from
//! the frame without coming here (see `adapter::hot`).
//!
//! The engine converts the argument in place, in the call's frame, as it does for its own
//! functions: the string made lives there until the call ends, and the frame releases it.

use std::ffi::c_uint;

use ext_php_rs::convert::FromZvalMut;
use ext_php_rs::ffi::{zend_long, zend_string, zval};
use ext_php_rs::flags::DataType;
use ext_php_rs::types::Zval;

/// PHP's `zend_expected_type`, the type a refusal names: the first entries of
/// `Z_EXPECTED_TYPES`, in the same order since PHP 8.0.
const Z_EXPECTED_LONG: c_uint = 0;
const Z_EXPECTED_LONG_OR_NULL: c_uint = 1;
const Z_EXPECTED_STRING: c_uint = 4;

// The engine's own functions behind `Z_PARAM_STR` and `Z_PARAM_LONG`, which ext-php-rs's
// bindings leave out (`ZEND_FASTCALL` is the C calling convention on every 64-bit target).
unsafe extern "C" {
    fn zend_parse_arg_str_slow(arg: *mut zval, dest: *mut *mut zend_string, arg_num: u32) -> bool;
    fn zend_parse_arg_long_slow(arg: *mut zval, dest: *mut zend_long, arg_num: u32) -> bool;
    fn zend_wrong_parameter_type_error(num: u32, expected_type: c_uint, arg: *mut zval);
}

/// Argument `number` (from 1), declared `string`. `None` when PHP refuses it: an exception is
/// pending then, PHP's `TypeError` or what `__toString()` or an error handler threw.
pub fn string(arg: &mut Zval, number: u32) -> Option<&[u8]> {
    let arg = arg.dereference_mut();
    if arg.is_string() {
        return arg.zend_str().map(|string| string.as_bytes());
    }
    convert_string(arg, number)
}

#[cold]
#[inline(never)]
fn convert_string(arg: &mut Zval, number: u32) -> Option<&[u8]> {
    let mut string: *mut zend_string = std::ptr::null_mut();
    // SAFETY: `arg` is an argument of the call being run, dereferenced, as zpp passes it; the
    // engine reads the caller's typing mode from the current frame, which is that call's, and on
    // success leaves a string in `arg` and points `string` at it.
    if unsafe { zend_parse_arg_str_slow(arg, &raw mut string, number) } {
        // SAFETY: the string is held by `arg`, which outlives the borrow returned.
        return unsafe { string.as_ref() }.map(|string| string.as_bytes());
    }
    refuse(arg, number, Z_EXPECTED_STRING);
    None
}

/// Argument `number` (from 1), declared `int`. `None` when PHP refuses it, an exception pending
/// (see [`string`]).
pub fn long(arg: &mut Zval, number: u32) -> Option<i64> {
    let arg = arg.dereference_mut();
    match arg.long() {
        Some(value) => Some(value),
        None => convert_long(arg, number, Z_EXPECTED_LONG),
    }
}

/// Argument `number` (from 1), declared `?int`: `Some(None)` for null.
pub fn optional_long(arg: &mut Zval, number: u32) -> Option<Option<i64>> {
    let arg = arg.dereference_mut();
    if arg.is_null() {
        return Some(None);
    }
    match arg.long() {
        Some(value) => Some(Some(value)),
        None => convert_long(arg, number, Z_EXPECTED_LONG_OR_NULL).map(Some),
    }
}

#[cold]
#[inline(never)]
fn convert_long(arg: &mut Zval, number: u32, expected: c_uint) -> Option<i64> {
    let mut value: zend_long = 0;
    // SAFETY: as in `convert_string`; on success the engine writes the int into `value`.
    if unsafe { zend_parse_arg_long_slow(arg, &raw mut value, number) } {
        return Some(value);
    }
    refuse(arg, number, expected);
    None
}

/// PHP's own `TypeError` for argument `number`, as zpp throws it for a wrong argument: nothing
/// when the conversion left an exception already (an error handler's, `__toString()`'s).
fn refuse(arg: &mut Zval, number: u32, expected: c_uint) {
    // SAFETY: the function reads the current frame for the function's and argument's names,
    // and `arg` for the type given; it throws only when no exception is pending.
    unsafe { zend_wrong_parameter_type_error(number, expected, arg) };
}

/// A `string` parameter of a method whose handler ext-php-rs generates, argument number `N`:
/// read by [`string`]. On a refusal the generated handler's own `TypeError` is not thrown, since
/// ext-php-rs throws nothing over a pending exception: PHP's stands.
pub struct Str<'a, const N: u32>(pub &'a [u8]);

impl<'a, const N: u32> FromZvalMut<'a> for Str<'a, N> {
    const TYPE: DataType = DataType::String;

    fn from_zval_mut(zval: &'a mut Zval) -> Option<Self> {
        string(zval, N).map(Self)
    }
}

impl<const N: u32> std::ops::Deref for Str<'_, N> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.0
    }
}

/// An `int` parameter of a generated method, argument number `N`: read by [`long`] (see [`Str`]).
pub struct Long<const N: u32>(pub i64);

impl<const N: u32> FromZvalMut<'_> for Long<N> {
    const TYPE: DataType = DataType::Long;

    fn from_zval_mut(zval: &mut Zval) -> Option<Self> {
        long(zval, N).map(Self)
    }
}

/// A `?int` parameter of a generated method, argument number `N`, null when omitted: read by
/// [`optional_long`] (see [`Str`]).
pub struct OptionalLong<const N: u32>(pub Option<i64>);

impl<const N: u32> FromZvalMut<'_> for OptionalLong<N> {
    const TYPE: DataType = DataType::Long;
    const NULLABLE: bool = true;

    fn from_zval_mut(zval: &mut Zval) -> Option<Self> {
        optional_long(zval, N).map(Self)
    }

    fn from_missing() -> Option<Self> {
        Some(Self(None))
    }
}
