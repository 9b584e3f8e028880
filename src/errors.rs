//! The PHP errors of the extension, in one place for the class and the module: the exceptions
//! it throws, and the warnings it logs at startup.

use ext_php_rs::exception::PhpException;
use ext_php_rs::zend::ClassEntry;

/// An exception of a class that PHP always has (SPL's and the engine's).
pub fn exception(class: &str, message: String) -> PhpException {
    let class = ClassEntry::try_find(class).expect("SPL exception classes are always registered");
    PhpException::new(message, 0, class)
}

/// Ganesha's `StorageException`, so that Ganesha fails open and emits `storage_error`; a
/// `RuntimeException` (its parent) when Ganesha is not loaded.
pub fn storage_exception(message: String) -> PhpException {
    match ClassEntry::try_find("Ackintosh\\Ganesha\\Exception\\StorageException") {
        Some(class) => PhpException::new(message, 0, class),
        None => exception("RuntimeException", message),
    }
}

/// A failure of ext-php-rs to build a PHP value (an array, a string): PHP ran out of what it
/// needed, never the caller's fault.
pub fn php_error(error: ext_php_rs::error::Error) -> PhpException {
    exception("RuntimeException", format!("ganesha_shm: {error}"))
}

/// Logs a startup warning where PHP logs its own (error_log, or stderr).
pub fn warn(message: &str) {
    let message = std::ffi::CString::new(format!("ganesha_shm: {message}")).unwrap_or_default();
    crate::engine::warn(&message);
}
