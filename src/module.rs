//! The module: what PHP registers (the class, `ganesha_shm_info()`, the settings), startup and
//! `phpinfo()`.

use ext_php_rs::boxed::ZBox;
use ext_php_rs::prelude::*;
use ext_php_rs::types::ZendHashTable;
use ext_php_rs::zend::ModuleEntry;
use ext_php_rs::{info_table_end, info_table_header, info_table_row, info_table_start};

use crate::errors::php_error;
use crate::process;
use crate::segment::Backing;
use crate::settings;

#[php_module]
#[php(startup = "startup")]
pub fn get_module(module: ModuleBuilder) -> ModuleBuilder {
    module
        .name("ganesha_shm")
        .shutdown_function(shutdown)
        .request_startup_function(request_startup)
        .class::<crate::adapter::AbstractSlidingTimeWindowShm>()
        .function(wrap_function!(ganesha_shm_info))
        .info_function(info)
}

/// MINIT: registers the settings and makes the segment, and has the class's constructor
/// replaced once every module has started (`post_startup`).
pub fn startup(ty: i32, module_number: i32) -> i32 {
    process::start(&settings::register_and_read(module_number));
    if ty == ext_php_rs::ffi::MODULE_PERSISTENT as i32 {
        post_startup::hook();
    }
    0
}

/// MSHUTDOWN (see `process::shutdown`).
pub extern "C" fn shutdown(_ty: i32, _module_number: i32) -> i32 {
    post_startup::unhook();
    process::shutdown();
    0
}

/// RINIT (see `process::on_request`). The constructor is replaced here only when the module was
/// not started with PHP (`dl()`): one relaxed load otherwise.
pub extern "C" fn request_startup(_ty: i32, _module_number: i32) -> i32 {
    process::on_request();
    crate::adapter::install_constructor();
    0
}

/// PHP's post-startup hook, run once every module has started, before any request: the class
/// ext-php-rs registers after this module's MINIT exists then, and the constructor is replaced
/// (`adapter::install_constructor`) while no thread can be calling it. Replaced at a request's
/// start instead, a threaded server's other threads could be reading the handler as it is
/// written (helgrind saw that race).
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
    pub fn hook() {
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
    pub fn unhook() {
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
        crate::adapter::install_constructor();
        0
    }
}

/// Figures of this process's shared-memory store: its size and layout, how many slots hold
/// live data, and how often slots were claimed, reclaimed after expiring, or refused.
#[php_function]
pub fn ganesha_shm_info() -> PhpResult<ZBox<ZendHashTable>> {
    let segment = process::segment()?;
    let mut info = ZendHashTable::new();
    info.insert("version", env!("CARGO_PKG_VERSION")).map_err(php_error)?;
    info.insert("segment", process::backing_name(segment).as_str()).map_err(php_error)?;
    if let Some(reason) = process::path_refusal() {
        info.insert("path_refused", reason).map_err(php_error)?;
    }
    process::report_segment_loss();
    if let Some(loss) = process::segment_loss() {
        info.insert("segment_lost", loss).map_err(php_error)?;
    }
    for (name, value, _) in process::figures(segment) {
        info.insert(name, value.min(i64::MAX as u64) as i64).map_err(php_error)?;
    }
    Ok(info)
}

/// MINFO: `phpinfo()` and `php --ri ganesha_shm`.
pub extern "C" fn info(_module: *mut ModuleEntry) {
    info_table_start!();
    info_table_header!("ganesha_shm support", "enabled");
    info_table_row!("Version", env!("CARGO_PKG_VERSION"));
    match process::segment_state() {
        Some(Ok(segment)) => {
            match segment.backing() {
                Backing::Anonymous => {
                    info_table_row!("Segment", "anonymous (shared with the processes forked after startup)")
                }
                Backing::File(_) => info_table_row!("Segment", process::backing_name(segment)),
            }
            if let Some(reason) = process::path_refusal() {
                info_table_row!("Path refused", reason);
            }
            if let Some(loss) = process::segment_loss() {
                info_table_row!("Segment lost", loss);
            }
            for (name, value, _) in process::figures(segment) {
                info_table_row!(name, value.to_string());
            }
        }
        Some(Err(reason)) => info_table_row!("Segment", reason),
        None => info_table_row!("Segment", "not created"),
    }
    info_table_end!();
    info_table_start!();
    info_table_header!("Directive", "Value");
    for (name, value) in settings::values() {
        info_table_row!(name, value);
    }
    info_table_end!();
}
