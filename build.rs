//! Link settings a PHP extension needs beyond what Cargo does by default.
//!
//! A PHP extension is a shared object whose PHP symbols (`zend_*`, `php_*`) are resolved
//! from the `php` binary that loads it. GNU ld allows undefined symbols in a shared object
//! by default; Apple's ld64 refuses them unless told to look them up at load time.

fn main() {
    // Without this, cargo runs the script again, and rebuilds the crate, whenever any file of the
    // package changes (phpize's output included); the crate's own sources are tracked anyway.
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("macos") {
        println!("cargo:rustc-cdylib-link-arg=-undefined");
        println!("cargo:rustc-cdylib-link-arg=dynamic_lookup");
    }
}
