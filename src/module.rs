//! The module: what PHP registers (the class, `ganesha_shm_info()`, the settings), startup and
//! `phpinfo()`.

use ext_php_rs::boxed::ZBox;
use ext_php_rs::prelude::*;
use ext_php_rs::types::ZendHashTable;
use ext_php_rs::zend::ModuleEntry;
use ext_php_rs::{info_table_end, info_table_header, info_table_row, info_table_start};

use crate::adapter::hot;
use crate::engine::{self, Alone, Lifecycle};
use crate::errors::php_error;
use crate::process;
use crate::segment::Backing;
use crate::settings;

#[php_module]
pub fn get_module(module: ModuleBuilder) -> ModuleBuilder {
    let lifecycle = Lifecycle { startup, after_startup, request_startup, shutdown };
    engine::lifecycle(module, lifecycle)
        .name("ganesha_shm")
        .class::<crate::adapter::AbstractSlidingTimeWindowShm>()
        .function(wrap_function!(ganesha_shm_info))
        .info_function(info)
}

/// MINIT: registers the settings and makes the segment. The class's constructor is replaced
/// once every module has started (`after_startup`).
fn startup(alone: &Alone, module_number: i32) {
    process::start(alone, &settings::register_and_read(module_number));
}

/// Once every module has started, before any request, for a module started with PHP: the class
/// ext-php-rs registers after this module's MINIT exists then, and its constructor is replaced
/// (`hot::install_constructor`) while no thread can be calling it. Replaced at a request's
/// start instead, a threaded server's other threads could be reading the handler as it is
/// written (helgrind saw that race).
fn after_startup(alone: &Alone) {
    hot::install_constructor(alone);
}

/// RINIT (see `process::on_request`). The constructor is replaced here only when the module was
/// loaded by `dl()`, not started with PHP.
fn request_startup(alone: Option<&Alone>) {
    process::on_request();
    if let Some(alone) = alone {
        hot::install_constructor(alone);
    }
}

/// MSHUTDOWN (see `process::shutdown`).
fn shutdown() {
    process::shutdown();
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
