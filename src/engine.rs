//! The engine's internals that only `unsafe` code reaches, behind a small safe API: the one
//! module of this crate with `unsafe` (the store's is in the core crate, in its segment and
//! its table). What it wraps, and what makes each wrapper sound:
//! * [`HashedName`], [`find`], [`class_name`], [`declared_property`]: an object's class and
//!   properties, read where the engine keeps them;
//!
//! A `&Zval`, `&ZendObject` or `&HashTable` is taken, as ext-php-rs's own safe API takes it, to
//! be a live value the engine made, alive for the borrow.
//!
//! It uses ext-php-rs and libc, and nothing else of this crate.

use ext_php_rs::boxed::ZBox;
use ext_php_rs::ffi::{zend_hash_find, zend_property_info, zend_string, HashTable, ZEND_ACC_STATIC};
use ext_php_rs::flags::DataType;
use ext_php_rs::types::{ZendHashTable, ZendObject, ZendStr, Zval};

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
