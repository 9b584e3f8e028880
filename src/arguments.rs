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
//! the frame without coming here (see `hot`).
//!
//! The engine converts the argument in place, in the call's frame, as it does for its own
//! functions: the string made lives there until the call ends, and the frame releases it.

use ext_php_rs::convert::FromZvalMut;
use ext_php_rs::flags::DataType;
use ext_php_rs::types::Zval;

use crate::engine::{convert_long, convert_string};

/// Argument `number` (from 1), declared `string`. `None` when PHP refuses it: an exception is
/// pending then, PHP's `TypeError` or what `__toString()` or an error handler threw.
pub fn string(arg: &mut Zval, number: u32) -> Option<&[u8]> {
    let arg = arg.dereference_mut();
    if arg.is_string() {
        return arg.zend_str().map(|string| string.as_bytes());
    }
    convert_string(arg, number)
}

/// Argument `number` (from 1), declared `int`. `None` when PHP refuses it, an exception pending
/// (see [`string`]).
pub fn long(arg: &mut Zval, number: u32) -> Option<i64> {
    let arg = arg.dereference_mut();
    match arg.long() {
        Some(value) => Some(value),
        None => convert_long(arg, number, false),
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
        None => convert_long(arg, number, true).map(Some),
    }
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
