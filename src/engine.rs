//! The engine's internals that only `unsafe` code reaches, behind a small safe API: the one
//! module of this crate with `unsafe` (the store's is in the core crate, in its segment and
//! its table). What it wraps, and what makes each wrapper sound:
//! * [`Frame`]: a call of one of our handlers: its arguments, its `$this`, PHP's argument
//!   errors; only the engine's call of a handler makes one (see [`method`]);
//! * [`intercept_constructor`]: a class's constructor handler, replaced;
//! * [`convert_string`], [`convert_long`]: an argument converted as PHP converts an internal
//!   function's;
//! * [`HashedName`], [`find`], [`class_name`], [`declared_property`]: an object's class and
//!   properties, read where the engine keeps them;
//! * [`lifecycle`] and [`Alone`]: the module's startup, requests and shutdown, and what only
//!   the one thread running PHP may do (the hook after startup, the segments an earlier image
//!   of this library left);
//! * [`warn`] and [`unix_time`]: PHP's log and PHP's clock.
//!
//! A `&Zval`, `&ZendObject` or `&HashTable` is taken, as ext-php-rs's own safe API takes it, to
//! be a live value the engine made, alive for the borrow.
//!
//! It uses ext-php-rs, libc and the core crate's segment, and nothing else of this crate.

use std::ffi::{c_uint, CStr};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::OnceLock;

use ext_php_rs::boxed::ZBox;
use ext_php_rs::builders::{FunctionBuilder, ModuleBuilder};
use ext_php_rs::class::RegisteredClass;
use ext_php_rs::ffi::{zend_hash_find, zend_long, zend_property_info, zend_string, zval, HashTable, ZEND_ACC_STATIC};
use ext_php_rs::flags::DataType;
use ext_php_rs::types::{ZendClassObject, ZendHashTable, ZendObject, ZendStr, Zval};
use ext_php_rs::zend::{ExecuteData, ExecutorGlobals};
use ganesha_shm_core::segment::{LayoutOf, Regions, Segment};

// ---------------------------------------------------------------------------------------------
// Frames

/// A call of one of our method handlers, as the engine passes it: the frame it made for the
/// call, with the arguments in its first call slots and the object in `This`, alive for the
/// call. Only the engine's call of a handler registered through [`method`] (or the constructor
/// of [`intercept_constructor`]) makes one, so every method here reads a frame of that shape.
pub struct Frame<'a> {
    ex: &'a mut ExecuteData,
}

/// `ZEND_CALL_FRAME_SLOT`: where a frame's first argument is, in zvals from its start.
const FRAME_SLOT: usize = aligned(size_of::<ExecuteData>()).div_ceil(aligned(size_of::<Zval>()));

/// `ZEND_MM_ALIGNED_SIZE`.
const fn aligned(size: usize) -> usize {
    let alignment = ext_php_rs::ffi::ZEND_MM_ALIGNMENT as usize;
    (size + alignment - 1) & !(alignment - 1)
}

impl Frame<'_> {
    /// The number of arguments the call was given.
    #[inline(always)]
    pub fn argument_count(&self) -> u32 {
        // SAFETY: `This.u2.num_args` is the argument count PHP wrote into the frame of this
        // call before calling its handler (every member of `u2` is a `u32` anyway).
        unsafe { self.ex.This.u2.num_args }
    }

    /// The arguments the call was given, as the caller passed them (a reference is not
    /// dereferenced).
    #[inline(always)]
    pub fn arguments(&self) -> &[Zval] {
        // SAFETY: an internal function's frame holds its `num_args` arguments one after the
        // other from its first call slot (`ZEND_CALL_ARG`), initialised, for as long as the call
        // lasts; the borrow of the frame keeps them from being written meanwhile.
        unsafe { std::slice::from_raw_parts(self.first_argument(), self.argument_count() as usize) }
    }

    /// The arguments, to be converted in place as PHP converts an internal function's (see
    /// [`convert_string`]), and the call's `$this`, to be read after the conversion: which may
    /// run PHP code, that may construct the object again.
    #[inline(always)]
    pub fn arguments_mut_and_this(&mut self) -> (&mut [Zval], This<'_>) {
        let count = self.argument_count() as usize;
        let first = std::ptr::from_mut::<ExecuteData>(self.ex).cast::<Zval>().wrapping_add(FRAME_SLOT);
        // SAFETY: as in `arguments`; the slots are past the frame's fixed part, so they and
        // `This`, a field of it, are borrowed apart.
        (unsafe { std::slice::from_raw_parts_mut(first, count) }, This(&self.ex.This))
    }

    /// `ZEND_CALL_ARG(ex, 1)`.
    #[inline(always)]
    fn first_argument(&self) -> *const Zval {
        std::ptr::from_ref::<ExecuteData>(self.ex).cast::<Zval>().wrapping_add(FRAME_SLOT)
    }

    /// The object of the call, when it is one of class `T` (a subclass's included) and
    /// constructed.
    #[inline(always)]
    pub fn this<T: RegisteredClass>(&self) -> Option<&T> {
        This(&self.ex.This).object()
    }

    /// The object of the call as ext-php-rs allocates one of class `T` (a subclass's included),
    /// constructed or not: for a constructor, which gives it its Rust value.
    #[inline(always)]
    pub fn this_class_object<T: RegisteredClass>(&mut self) -> Option<&mut ZendClassObject<T>> {
        let object = self.ex.This.object_mut()?;
        if !is_class_object::<T>(object) {
            return None;
        }
        let class_object = std::ptr::from_mut(object).wrapping_byte_sub(std_offset::<T>()).cast::<ZendClassObject<T>>();
        // SAFETY: the object is the `std` field of a `ZendClassObject<T>` (see
        // `is_class_object`), which lives at least as long as the call that has it as `$this`,
        // and which the call reaches only through its frame, borrowed here as long as the result.
        Some(unsafe { &mut *class_object })
    }

    /// PHP's own `ArgumentCountError` for a call that takes exactly `expected` arguments, as
    /// zpp throws it, naming the function and the count given.
    pub fn throw_argument_count_error(&self, expected: u32) {
        // SAFETY: the function reads the current frame, which is this call's while its handler
        // runs, for the function's name and the argument count; it only throws.
        unsafe { ext_php_rs::ffi::zend_wrong_parameters_count_error(expected, expected) };
    }
}

/// The `$this` of a call (see [`Frame::arguments_mut_and_this`]).
pub struct This<'a>(&'a Zval);

impl<'a> This<'a> {
    /// The object, when it is one of class `T` (a subclass's included) and constructed.
    #[inline(always)]
    pub fn object<T: RegisteredClass>(&self) -> Option<&'a T> {
        let object = self.0.object()?;
        if !is_class_object::<T>(object) {
            return None;
        }
        let class_object = std::ptr::from_ref(object).wrapping_byte_sub(std_offset::<T>()).cast::<ZendClassObject<T>>();
        // SAFETY: as in `Frame::this_class_object`, read only.
        unsafe { &*class_object }.obj.as_ref()
    }
}

/// Whether `object` is the `std` field of a `ZendClassObject<T>`, one of class `T` (a
/// subclass's included) as ext-php-rs allocates it. Its handlers tell: only `T`'s
/// `create_object` gives an object these handlers, and it allocates it as a
/// `ZendClassObject<T>`, for a subclass too. (ext-php-rs's `from_zend_obj` also checks the
/// class, which the handlers already tell, at a call of `instanceof_function_slow` for a
/// subclass.)
#[inline(always)]
fn is_class_object<T: RegisteredClass>(object: &ZendObject) -> bool {
    std::ptr::eq(object.handlers, T::get_metadata().handlers())
}

/// Where a `ZendClassObject<T>` holds its `ZendObject`.
const fn std_offset<T>() -> usize {
    std::mem::offset_of!(ZendClassObject<T>, std)
}

// ---------------------------------------------------------------------------------------------
// Handlers

/// A method whose handler is ours rather than ext-php-rs's generated one, which runs every call
/// inside a `zend_try`: what it does with a call.
pub trait Handler {
    fn handle(frame: Frame<'_>, retval: &mut Zval);
}

/// The declaration of method `name`, handled by `H` (its arguments and return type are the
/// caller's to add).
pub fn method<H: Handler>(name: &str) -> FunctionBuilder<'static> {
    FunctionBuilder::new(name, handler::<H>)
}

/// What the engine calls for a method of [`method`]. Never called but by the engine, with the
/// frame of a call of that method and its return value, which is what makes `Frame` sound.
extern "C" fn handler<H: Handler>(ex: &mut ExecuteData, retval: &mut Zval) {
    H::handle(Frame { ex }, retval);
}

/// A constructor that handles the common case itself and leaves every other to the handler
/// ext-php-rs generated (see [`intercept_constructor`]).
pub trait Constructor {
    /// Whether it handled the call: if not, the generated handler runs it, as if this had not
    /// been called.
    fn construct(frame: Frame<'_>) -> bool;
}

/// The constructor handler ext-php-rs generated, which the one of [`intercept_constructor`]
/// hands what it does not handle.
static GENERATED_CONSTRUCTOR: OnceLock<unsafe extern "C" fn(*mut ExecuteData, *mut Zval)> = OnceLock::new();

/// Puts `C` in front of the constructor handler ext-php-rs generated for class `T`, once per
/// process image (later calls do nothing, as does one before the class is registered). Sound to
/// call while `Alone`: the handler is one word of the class's constructor, which the engine
/// reads when it calls it, and no other thread runs PHP to read it meanwhile; it is stored
/// atomically all the same.
pub fn intercept_constructor<T: RegisteredClass, C: Constructor>(_: &Alone) {
    static INSTALLED: AtomicBool = AtomicBool::new(false);
    // Relaxed: the flag only keeps this to one call, once; `OnceLock` orders the handler.
    if INSTALLED.load(Ordering::Relaxed) || INSTALLED.swap(true, Ordering::Relaxed) {
        return;
    }
    let metadata = T::get_metadata();
    if !metadata.has_ce() {
        return;
    }
    let class = metadata.ce();
    // SAFETY: the class entry is registered and lives until the module shuts down; its
    // constructor is the internal function ext-php-rs registered for `__construct`, whose
    // handler only the engine reads, when it calls it. The handler is replaced with one
    // word's store (an atomic one, for threads that may be calling it).
    unsafe {
        let Some(constructor) = class.constructor.as_mut() else {
            return;
        };
        if constructor.type_ != ext_php_rs::ffi::ZEND_INTERNAL_FUNCTION as u8 {
            return;
        }
        let handler = &raw mut constructor.internal_function.handler;
        let Some(generated) = *handler else {
            return;
        };
        let _ = GENERATED_CONSTRUCTOR.set(generated);
        let ours: unsafe extern "C" fn(*mut ExecuteData, *mut Zval) = construct::<C>;
        // Release: a thread that calls ours finds the generated handler set before it.
        (*handler.cast::<AtomicUsize>()).store(ours as usize, Ordering::Release);
    }
}

/// The constructor handler of [`intercept_constructor`].
///
/// # Safety
/// Called only by the engine, as a constructor's handler, with the frame of the call and its
/// return value.
unsafe extern "C" fn construct<C: Constructor>(ex: *mut ExecuteData, retval: *mut Zval) {
    // SAFETY: the engine calls a handler with the frame of the call, alive for it.
    if C::construct(Frame { ex: unsafe { &mut *ex } }) {
        return;
    }
    if let Some(generated) = GENERATED_CONSTRUCTOR.get() {
        // SAFETY: the handler that was in place, called as the engine would have called it.
        unsafe { generated(ex, retval) };
    }
}

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
// The module's life

/// Proof that no other thread runs PHP: the engine gives one to the module's startup, to what
/// runs once every module has started, to its shutdown, and to the request start of a module
/// loaded by `dl()` (which a thread-safe PHP allows only in its CLI, CGI and embed SAPIs, one
/// thread each). Only this module makes one.
pub struct Alone {
    _private: PhantomData<*const ()>,
}

impl Alone {
    fn new() -> Self {
        Self { _private: PhantomData }
    }

    /// The anonymous segment an earlier image of this library left in this process, when it
    /// has the layout asked for; any other it left is unmapped (see
    /// `Segment::adopt_anonymous`). Only while this image has made no segment: nothing once
    /// [`Alone::unmap_leftover_segments`] was called.
    pub fn adopt_anonymous_segment(&self, layout: Regions, layout_of: LayoutOf) -> Option<Segment> {
        if SEGMENT_MADE.load(Ordering::Relaxed) {
            return None;
        }
        // SAFETY: no other thread runs PHP (`Alone`), and this image has made no segment yet:
        // `unmap_leftover_segments` marks the one it makes, and this library makes segments
        // only at its startup, for that call.
        unsafe { Segment::adopt_anonymous(layout, layout_of) }
    }

    /// Unmaps the segments an earlier image of this library left in this process, but
    /// `segment`, the one this image made or adopted (see `Segment::unmap_leftovers`): once per
    /// image, later calls do nothing.
    pub fn unmap_leftover_segments(&self, segment: &Segment) {
        // Relaxed: `Alone` is one thread.
        if SEGMENT_MADE.swap(true, Ordering::Relaxed) {
            return;
        }
        // SAFETY: as in `adopt_anonymous_segment`: called by the image that just made or
        // adopted `segment`, while no other thread runs PHP.
        unsafe { segment.unmap_leftovers() };
    }
}

/// Whether this image made its segment (see `Alone::unmap_leftover_segments`).
static SEGMENT_MADE: AtomicBool = AtomicBool::new(false);

/// What the module does at each stage of its life (see [`lifecycle`]).
pub struct Lifecycle {
    /// MINIT, with the module's number.
    pub startup: fn(&Alone, i32),
    /// Once every module has started, before any request: for a module started with PHP.
    pub after_startup: fn(&Alone),
    /// RINIT, `Alone` for a module loaded by `dl()`.
    pub request_startup: fn(Option<&Alone>),
    /// MSHUTDOWN.
    pub shutdown: fn(),
}

static LIFECYCLE: OnceLock<Lifecycle> = OnceLock::new();

/// Registers the module's `lifecycle` with the engine: once, when PHP asks for the module.
pub fn lifecycle(module: ModuleBuilder, lifecycle: Lifecycle) -> ModuleBuilder {
    let _ = LIFECYCLE.set(lifecycle);
    module.startup_function(module_startup).request_startup_function(request_startup).shutdown_function(module_shutdown)
}

/// MINIT: the module's startup, then, for a module started with PHP, the hook that runs
/// `after_startup` once every module has started.
extern "C" fn module_startup(ty: i32, module_number: i32) -> i32 {
    if let Some(lifecycle) = LIFECYCLE.get() {
        (lifecycle.startup)(&Alone::new(), module_number);
        if ty == ext_php_rs::ffi::MODULE_PERSISTENT as i32 {
            post_startup::hook();
        }
    }
    0
}

extern "C" fn request_startup(ty: i32, _module_number: i32) -> i32 {
    if let Some(lifecycle) = LIFECYCLE.get() {
        let alone = (ty == ext_php_rs::ffi::MODULE_TEMPORARY as i32).then(Alone::new);
        (lifecycle.request_startup)(alone.as_ref());
    }
    0
}

/// MSHUTDOWN: the hook taken down first, then the module's shutdown.
extern "C" fn module_shutdown(_ty: i32, _module_number: i32) -> i32 {
    post_startup::unhook();
    if let Some(lifecycle) = LIFECYCLE.get() {
        (lifecycle.shutdown)();
    }
    0
}

/// PHP's post-startup hook, run once every module has started, before any request: the class
/// ext-php-rs registers after this module's MINIT exists then, and no thread can be calling
/// it yet. (Replaced at a request's start instead, a threaded server's other threads could be
/// reading a handler as it is written: helgrind saw that race.)
mod post_startup {
    use std::sync::atomic::{AtomicUsize, Ordering};

    type Hook = unsafe extern "C" fn() -> i32;

    extern "C" {
        /// Zend's `zend_post_startup_cb`, which `zend_post_startup()` clears before calling it;
        /// a hook set before ours (opcache's) is called by ours.
        static mut zend_post_startup_cb: Option<Hook>;
    }

    /// The hook ours replaced, 0 when none.
    static CHAINED: AtomicUsize = AtomicUsize::new(0);

    /// At MINIT of a module started with PHP.
    pub(super) fn hook() {
        // SAFETY: MINIT runs on the one thread starting PHP, before any request; only startup
        // reads and writes the hook.
        unsafe {
            let slot = &raw mut zend_post_startup_cb;
            // Relaxed: startup is one thread.
            CHAINED.store((*slot).map_or(0, |hook| hook as usize), Ordering::Relaxed);
            *slot = Some(post_startup);
        }
    }

    /// At MSHUTDOWN: a hook left pointing into this library (a startup that failed before
    /// calling it) goes back to the one it replaced, since the SAPI may unload the library next.
    pub(super) fn unhook() {
        // SAFETY: as in `hook`; MSHUTDOWN runs alone too.
        unsafe {
            let slot = &raw mut zend_post_startup_cb;
            if (*slot).is_some_and(|hook| hook as usize == post_startup as Hook as usize) {
                // Relaxed: as in `hook`.
                let chained = CHAINED.swap(0, Ordering::Relaxed);
                *slot = (chained != 0).then(|| std::mem::transmute::<usize, Hook>(chained));
            }
        }
    }

    unsafe extern "C" fn post_startup() -> i32 {
        // Relaxed: as in `hook`.
        let chained = CHAINED.swap(0, Ordering::Relaxed);
        if chained != 0 {
            // SAFETY: the hook PHP held before ours, called as PHP would have called it.
            let status = unsafe { std::mem::transmute::<usize, Hook>(chained)() };
            if status != 0 {
                return status;
            }
        }
        if let Some(lifecycle) = super::LIFECYCLE.get() {
            (lifecycle.after_startup)(&super::Alone::new());
        }
        0
    }
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
