//! The INI settings: their names, defaults and ranges, and how a value PHP read is checked.
//! Every setting shapes the segment, so they can only be set where PHP starts (php.ini, `-d`).

use std::collections::HashMap;

use ext_php_rs::flags::IniEntryPermission;
use ext_php_rs::zend::{ExecutorGlobals, IniEntryDef, IniEntryDefs};

use crate::errors::warn;
use crate::segment::Settings;

pub const INI_MAX_SERVICES: &str = "ganesha_shm.max_services";
pub const INI_MAX_KEY_LENGTH: &str = "ganesha_shm.max_key_length";
pub const INI_MAX_BUCKETS: &str = "ganesha_shm.max_buckets";
pub const INI_PATH: &str = "ganesha_shm.path";
pub const INI_MODE: &str = "ganesha_shm.mode";
pub const INI_FLEET: &str = "ganesha_shm.fleet";

/// Every setting, in the order phpinfo() lists them.
pub const ALL: [&str; 6] = [INI_MAX_SERVICES, INI_MAX_KEY_LENGTH, INI_MAX_BUCKETS, INI_PATH, INI_MODE, INI_FLEET];

const DEFAULT_MAX_SERVICES: u64 = 1024;
const DEFAULT_MAX_KEY_LENGTH: u64 = 160;
const DEFAULT_MAX_BUCKETS: u64 = 120;
const DEFAULT_MODE: u32 = 0o600;

/// The settings as PHP registers them (the defaults are the constants above, as text).
pub static INI_ENTRIES: IniEntryDefs<7> = IniEntryDefs::new([
    IniEntryDef::new(c"ganesha_shm.max_services", c"1024", IniEntryPermission::System),
    IniEntryDef::new(c"ganesha_shm.max_key_length", c"160", IniEntryPermission::System),
    IniEntryDef::new(c"ganesha_shm.max_buckets", c"120", IniEntryPermission::System),
    IniEntryDef::new(c"ganesha_shm.path", c"", IniEntryPermission::System),
    IniEntryDef::new(c"ganesha_shm.mode", c"0600", IniEntryPermission::System),
    IniEntryDef::new(c"ganesha_shm.fleet", c"0", IniEntryPermission::System),
    IniEntryDef::end(),
]);

/// What the settings ask for, each checked.
pub struct Startup {
    pub settings: Settings,
    /// `ganesha_shm.path`, when set.
    pub path: Option<String>,
    /// `ganesha_shm.mode`, read only when a path is set.
    pub mode: u32,
}

/// Registers the settings with PHP (at MINIT) and reads them. A value out of its range is a
/// startup warning and the default, as PHP does for its own settings.
pub fn register_and_read(module_number: i32) -> Startup {
    IniEntryDef::register(INI_ENTRIES.as_slice(), module_number);
    let ini = ExecutorGlobals::get().ini_values();
    let settings = Settings {
        max_services: whole_number(&ini, INI_MAX_SERVICES, DEFAULT_MAX_SERVICES, Settings::MAX_SERVICES_RANGE),
        max_key_length: whole_number(&ini, INI_MAX_KEY_LENGTH, DEFAULT_MAX_KEY_LENGTH, Settings::MAX_KEY_LENGTH_RANGE),
        max_buckets: whole_number(&ini, INI_MAX_BUCKETS, DEFAULT_MAX_BUCKETS, Settings::MAX_BUCKETS_RANGE),
        fleet: false,
    };
    let path = ini.get(INI_PATH).cloned().flatten().filter(|path| !path.is_empty());
    let settings = Settings { fleet: fleet(&ini, path.is_some()), ..settings };
    let mode = if path.is_some() { mode(&ini) } else { DEFAULT_MODE };
    Startup { settings, path, mode }
}

/// The values of every setting as PHP holds them, for phpinfo().
pub fn values() -> Vec<(&'static str, String)> {
    let ini = ExecutorGlobals::get().ini_values();
    ALL.iter().map(|&name| (name, ini.get(name).cloned().flatten().unwrap_or_default())).collect()
}

/// An integer setting within `range`.
fn whole_number(ini: &HashMap<String, Option<String>>, name: &str, default: u64, (min, max): (u64, u64)) -> u64 {
    let Some(Some(raw)) = ini.get(name) else {
        return default;
    };
    match raw.trim().parse::<u64>() {
        Ok(value) if (min..=max).contains(&value) => value,
        _ => {
            warn(&format!("{name}={raw:?} is not a whole number from {min} to {max}; using {default}"));
            default
        }
    }
}

/// `ganesha_shm.fleet`: 0 or 1 (PHP's boolean words too). Fleet mode needs a segment file,
/// which the sidecar attaches to; without `ganesha_shm.path` it is a startup warning and off.
fn fleet(ini: &HashMap<String, Option<String>>, has_path: bool) -> bool {
    let raw = ini.get(INI_FLEET).cloned().flatten().unwrap_or_default();
    let on = match raw.trim().to_ascii_lowercase().as_str() {
        "" | "0" | "off" | "false" | "no" => false,
        "1" | "on" | "true" | "yes" => true,
        _ => {
            warn(&format!("{INI_FLEET}={raw:?} is not 0 or 1; fleet mode is off"));
            false
        }
    };
    if on && !has_path {
        warn(&format!("{INI_FLEET}=1 needs {INI_PATH} (the fleet sidecar attaches to that file); fleet mode is off"));
    }
    on && has_path
}

/// `ganesha_shm.mode`: octal permissions for a new segment file and the most an existing one
/// may grant; it must let the owner read and write, and must not let every user write (whoever
/// may write the file may corrupt the circuits: see docs/security.md). Otherwise a startup
/// warning and 0600.
fn mode(ini: &HashMap<String, Option<String>>) -> u32 {
    let raw = ini.get(INI_MODE).cloned().flatten().unwrap_or_default();
    match u32::from_str_radix(raw.trim().trim_start_matches("0o"), 8) {
        Ok(mode) if mode <= 0o777 && mode & 0o600 == 0o600 && mode & 0o002 == 0 => mode,
        _ => {
            warn(&format!(
                "{INI_MODE}={raw:?} is not octal permissions from 0600 to 0775 that let the owner read and write \
                 and not every user write; using 0600"
            ));
            DEFAULT_MODE
        }
    }
}
