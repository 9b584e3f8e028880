//! The methods Ganesha calls on every request (`load`, `increment`, `loadStatus`,
//! `loadLastFailureTime`, `saveLastFailureTime`, `saveStatus`), and those every request makes
//! its adapter with (`__construct`, `setContext`), with handlers of their own instead of
//! ext-php-rs's generated ones, which run every call inside a `zend_try` (a
//! `setjmp`, and a closure behind two calls) so that a PHP bailout cannot unwind through Rust
//! frames.
//!
//! A bailout (a fatal error's longjmp) comes only out of the engine: out of PHP code, or out of
//! an engine function that allocates and finds the memory limit reached. The common case of
//! these methods calls neither: no clock callable is set, the arguments are a string and an
//! int read from the call frame, the store answers, and the result is an int or null written
//! into the return value. That case runs here unguarded. Everything else (a clock to call,
//! arguments to convert or to reject, an exception to throw) runs under ext-php-rs's
//! `run_handler`, which guards it as the generated handlers do.

use std::cell::RefCell;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

use ext_php_rs::args::Arg;
use ext_php_rs::builders::ClassBuilder;
use ext_php_rs::exception::PhpException;
use ext_php_rs::flags::{DataType, MethodFlags};
use ext_php_rs::types::{ZendObject, Zval};
use ext_php_rs::zend::{ce, run_handler};

use super::{configured, AbstractSlidingTimeWindowShm, Configured, Refusal};
use crate::arguments;
use crate::context;
use crate::engine::{self, Alone, Frame, Handler};
use crate::process;

/// What a hot method takes after the service: nothing, or an int.
trait Rest: Sized {
    /// Its PHP name, for the declaration.
    const NAME: Option<&'static str>;
    /// Read from the frame as it is: `None` when it is not of the declared type.
    fn read(argument: Option<&Zval>) -> Option<Self>;
    /// Read as PHP reads an internal function's argument (see `arguments`), converted if
    /// PHP converts it: `None` when PHP refuses it, with its exception pending. Guarded only.
    fn convert(argument: Option<&mut Zval>) -> Option<Self>;
}

impl Rest for () {
    const NAME: Option<&'static str> = None;
    fn read(_: Option<&Zval>) -> Option<Self> {
        Some(())
    }
    fn convert(_: Option<&mut Zval>) -> Option<Self> {
        Some(())
    }
}

/// An int argument of a given name.
struct Int<const LAST_FAILURE_TIME: bool>(i64);

impl<const LAST_FAILURE_TIME: bool> Rest for Int<LAST_FAILURE_TIME> {
    const NAME: Option<&'static str> = Some(if LAST_FAILURE_TIME { "lastFailureTime" } else { "status" });
    fn read(argument: Option<&Zval>) -> Option<Self> {
        argument?.dereference().long().map(Self)
    }
    fn convert(argument: Option<&mut Zval>) -> Option<Self> {
        // The second argument, after the service.
        arguments::long(argument?, 2).map(Self)
    }
}

/// A hot method: what it does with the service, the rest of its arguments, the
/// configuration and the time.
/// (A type parameter, not a function pointer, so that each handler's method inlines into
/// `call`.)
trait Method<R, T>: Fn(&AbstractSlidingTimeWindowShm, &[u8], R, &Configured, u64) -> Result<T, Refusal> + Copy {}

impl<R, T, M> Method<R, T> for M where
    M: Fn(&AbstractSlidingTimeWindowShm, &[u8], R, &Configured, u64) -> Result<T, Refusal> + Copy
{
}

/// Adds the hot methods to the class, declared as `#[php_impl]` would declare them.
pub fn register(class: ClassBuilder) -> ClassBuilder {
    let method = |builder: ext_php_rs::builders::FunctionBuilder<'static>,
                  rest: Option<&str>,
                  returns: DataType,
                  nullable: bool| {
        let mut builder = builder.arg(Arg::new("service", DataType::String));
        if let Some(rest) = rest {
            builder = builder.arg(Arg::new(rest, DataType::Long));
        }
        (builder.returns(returns, false, nullable), MethodFlags::Public)
    };
    [
        method(engine::method::<Load>("load"), None, DataType::Long, false),
        method(engine::method::<Increment>("increment"), None, DataType::Void, false),
        method(engine::method::<LoadStatus>("loadStatus"), None, DataType::Long, false),
        method(engine::method::<LoadLastFailureTime>("loadLastFailureTime"), None, DataType::Long, true),
        method(
            engine::method::<SaveLastFailureTime>("saveLastFailureTime"),
            Some("lastFailureTime"),
            DataType::Void,
            false,
        ),
        method(engine::method::<SaveStatus>("saveStatus"), Some("status"), DataType::Void, false),
    ]
    .into_iter()
    .chain([(
        engine::method::<SetContext>("setContext").arg(Arg::new("context", DataType::ANY_OBJECT)).returns(
            DataType::Void,
            false,
            false,
        ),
        MethodFlags::Public,
    )])
    .fold(class, |class, (builder, flags)| class.method(builder, flags))
}

/// Puts [`Construct`] in front of the constructor handler ext-php-rs generated, once per
/// process image: once every module has started (the class is registered after the module's own
/// startup function has run), else at the first request of a module loaded by `dl()` (see
/// `module::after_startup`).
pub fn install_constructor(alone: &Alone) {
    engine::intercept_constructor::<AbstractSlidingTimeWindowShm, Construct>(alone);
}

/// `__construct()`. Without arguments, on an object not constructed yet, the object gets
/// what the constructor gives it then (no bucket duration, no clock): the common case, which
/// calls nothing of the engine. Everything else goes to the generated handler, which runs
/// it guarded.
struct Construct;

impl engine::Constructor for Construct {
    #[inline(always)]
    fn construct(mut frame: Frame<'_>) -> bool {
        if frame.argument_count() != 0 {
            return false;
        }
        let Some(object) =
            frame.this_class_object::<AbstractSlidingTimeWindowShm>().filter(|object| object.obj.is_none())
        else {
            return false;
        };
        object.initialize(AbstractSlidingTimeWindowShm {
            bucket_duration: None,
            clock: None,
            configured: RefCell::new(None),
        });
        true
    }
}

/// `setContext()`. Ganesha's own `Context` is read without calling PHP code (see
/// `context::read_own`), so that common case runs unguarded, as the other hot methods'
/// does; any other context, and every error, runs guarded.
struct SetContext;

impl Handler for SetContext {
    #[inline(always)]
    fn handle(frame: Frame<'_>, retval: &mut Zval) {
        match catch_unwind(AssertUnwindSafe(|| set_context_unguarded(&frame))) {
            Ok(true) => retval.set_null(),
            Ok(false) => run_handler(AssertUnwindSafe(|| set_context_guarded(&frame, retval))),
            Err(panic) => run_handler(AssertUnwindSafe(|| resume_unwind(panic))),
        }
    }
}

/// The common case of `setContext()`, which calls nothing of the engine: false when the
/// call is not one (nothing is changed then).
fn set_context_unguarded(frame: &Frame<'_>) -> bool {
    let [context] = frame.arguments() else {
        return false;
    };
    let Some(context) = context.dereference().object() else {
        return false;
    };
    let Some(read) = context::read_own(context) else {
        return false;
    };
    let Some(this) = frame.this::<AbstractSlidingTimeWindowShm>() else {
        return false;
    };
    // An error is thrown by the guarded path, which makes it again.
    let Ok(configured) = configured(read, this.bucket_duration) else {
        return false;
    };
    // No PHP code runs here, so no borrow is held; the configuration replaced is Rust's alone.
    let Ok(mut slot) = this.configured.try_borrow_mut() else {
        return false;
    };
    *slot = Some(configured);
    true
}

/// The object `setContext()` was given, in a call whose argument count was checked to be 1.
fn context_argument<'a>(frame: &'a Frame<'_>) -> Option<&'a ZendObject> {
    frame.arguments().first()?.dereference().object()
}

/// Every other case of `setContext()`, as ext-php-rs's generated handler would run it.
fn set_context_guarded(frame: &Frame<'_>, retval: &mut Zval) {
    if frame.argument_count() != 1 {
        // PHP's own error for a wrong argument count; it throws ArgumentCountError.
        frame.throw_argument_count_error(1);
        return;
    }
    let Some(context) = context_argument(frame) else {
        PhpException::new("Invalid value given for argument `context`.".into(), 0, ce::type_error()).throw();
        return;
    };
    let Some(this) = frame.this::<AbstractSlidingTimeWindowShm>() else {
        PhpException::from_message("Failed to retrieve reference to `$this`".into()).throw();
        return;
    };
    match this.set_context(context) {
        Ok(()) => retval.set_null(),
        Err(exception) => exception.throw(),
    }
}

fn set_long(retval: &mut Zval, value: i64) {
    retval.set_long(value);
}

fn set_null(retval: &mut Zval, (): ()) {
    retval.set_null();
}

fn set_optional_long(retval: &mut Zval, value: Option<i64>) {
    match value {
        Some(value) => retval.set_long(value),
        None => retval.set_null(),
    }
}

struct Load;

impl Handler for Load {
    #[inline(always)]
    fn handle(frame: Frame<'_>, retval: &mut Zval) {
        call(frame, retval, |this, service, (), configured, now| this.load_at(service, configured, now), set_long);
    }
}

struct Increment;

impl Handler for Increment {
    #[inline(always)]
    fn handle(frame: Frame<'_>, retval: &mut Zval) {
        call(frame, retval, |this, service, (), configured, now| this.increment_at(service, configured, now), set_null);
    }
}

struct LoadStatus;

impl Handler for LoadStatus {
    #[inline(always)]
    fn handle(frame: Frame<'_>, retval: &mut Zval) {
        call(
            frame,
            retval,
            |this, service, (), configured, now| this.load_status_at(service, configured, now),
            set_long,
        );
    }
}

struct LoadLastFailureTime;

impl Handler for LoadLastFailureTime {
    #[inline(always)]
    fn handle(frame: Frame<'_>, retval: &mut Zval) {
        call(
            frame,
            retval,
            |this, service, (), configured, now| this.load_last_failure_time_at(service, configured, now),
            set_optional_long,
        );
    }
}

struct SaveLastFailureTime;

impl Handler for SaveLastFailureTime {
    #[inline(always)]
    fn handle(frame: Frame<'_>, retval: &mut Zval) {
        call(
            frame,
            retval,
            |this, service, Int::<true>(time), configured, now| {
                this.save_last_failure_time_at(service, time, configured, now)
            },
            set_null,
        );
    }
}

struct SaveStatus;

impl Handler for SaveStatus {
    #[inline(always)]
    fn handle(frame: Frame<'_>, retval: &mut Zval) {
        call(
            frame,
            retval,
            |this, service, Int::<false>(status), configured, now| {
                this.save_status_at(service, status, configured, now)
            },
            set_null,
        );
    }
}

/// Arguments a hot method with `R` takes.
fn arguments<R: Rest>() -> u32 {
    1 + u32::from(R::NAME.is_some())
}

/// Runs `method` for the call in `frame`, and `set` with its result.
#[inline(always)]
fn call<R: Rest, T>(frame: Frame<'_>, retval: &mut Zval, method: impl Method<R, T>, set: impl Fn(&mut Zval, T)) {
    // A panic must not unwind out of an `extern "C"` function: it is thrown as
    // ext-php-rs's handlers throw one.
    // The loss of the segment file is logged through PHP: guarded, outside `unguarded`.
    if process::segment_loss_unreported() {
        run_handler(process::report_segment_loss);
    }
    match catch_unwind(AssertUnwindSafe(|| unguarded(&frame, method))) {
        Ok(Some(Ok(value))) => set(retval, value),
        // The configuration's borrow ended with `unguarded`: the exception is built here,
        // guarded, where an autoloader it runs may call this object again or bail out.
        Ok(Some(Err(refusal))) => run_handler(AssertUnwindSafe(|| PhpException::from(refusal).throw())),
        Ok(None) => run_handler(AssertUnwindSafe(|| guarded(frame, retval, method, set))),
        Err(panic) => run_handler(AssertUnwindSafe(|| resume_unwind(panic))),
    }
}

/// The common case, which calls nothing of the engine: `None` when the call is not one. A
/// refusal is returned as it is, for `call` to throw once the borrow below has ended.
#[inline(always)]
fn unguarded<R: Rest, T>(frame: &Frame<'_>, method: impl Method<R, T>) -> Option<Result<T, Refusal>> {
    let given = frame.arguments();
    if given.len() != arguments::<R>() as usize {
        return None;
    }
    let service = given[0].dereference().zend_str()?.as_bytes();
    let rest = R::read(given.get(1))?;
    let this = frame.this::<AbstractSlidingTimeWindowShm>()?;
    if this.clock.is_some() {
        return None;
    }
    // No PHP code runs until this returns, so the borrow cannot meet a setContext().
    let configured = this.configured.borrow();
    let configured = configured.as_ref()?;
    Some(method(this, service, rest, configured, process::unix_time()))
}

/// Every other case, as ext-php-rs's generated handler would run it, with the arguments read
/// as PHP reads an internal function's (see `arguments`).
fn guarded<R: Rest, T>(mut frame: Frame<'_>, retval: &mut Zval, method: impl Method<R, T>, set: impl Fn(&mut Zval, T)) {
    let expected = arguments::<R>();
    if frame.argument_count() != expected {
        // PHP's own error for a wrong argument count; it throws ArgumentCountError.
        frame.throw_argument_count_error(expected);
        return;
    }
    // Converting may run PHP code (`__toString()`, an error handler), which may construct
    // this object again or give it another context: `$this` and the configuration are
    // read after it, as a generated handler reads them after its arguments.
    let (given, this) = frame.arguments_mut_and_this();
    let (service, rest) = given.split_at_mut(1);
    let Some(service) = arguments::string(&mut service[0], 1) else {
        return;
    };
    let Some(rest) = R::convert(rest.first_mut()) else {
        return;
    };
    let Some(this) = this.object::<AbstractSlidingTimeWindowShm>() else {
        PhpException::from_message("Failed to retrieve reference to `$this`".into()).throw();
        return;
    };
    let result = this
        .configured_now()
        .and_then(|(configured, now)| method(this, service, rest, &configured, now).map_err(PhpException::from));
    match result {
        Ok(value) => set(retval, value),
        Err(exception) => exception.throw(),
    }
}
