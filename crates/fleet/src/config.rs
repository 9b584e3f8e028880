//! The sidecar's settings: flags, and a config file of `name = value` lines (`#` starts a
//! comment) with the same names as the flags. A flag overrides the file. Every bad value is an
//! error naming the setting and what it must be.

use std::path::PathBuf;
use std::time::Duration;

use ganesha_shm_core::fleet::valid_name;

pub const USAGE: &str = "\
usage: ganesha-shm-fleet [--config FILE] [--segment PATH] [--redis URL] [--fleet NAME] [--host NAME]
                         [--interval-ms N] [--connect-timeout-ms N] [--command-timeout-ms N]
                         [--cluster] [--suffixes LIST] [--syncs N]
       ganesha-shm-fleet --help | --version

Shares the circuit counts of this host's ganesha_shm segment with the other hosts of its fleet
through Redis: every interval it sends what this host counted since the last sync and writes
the fleet's sums, less this host's own, into the segment. PHP must run with ganesha_shm.fleet=1
and ganesha_shm.path.

  --config FILE            read settings from FILE (name = value lines, the names below
                           without their dashes, with _ for -); flags override it
  --segment PATH           the segment file, as ganesha_shm.path gives it (required)
  --redis URL              redis://[[USER]:PASSWORD@]HOST[:PORT][/DB] or
                           unix:///PATH/TO/SOCKET[?db=DB&pass=PASSWORD] (required); with
                           --cluster, a comma-separated list of the cluster's nodes
  --fleet NAME             the fleet's name, prefixing every key it writes (required):
                           1 to 64 of A-Z a-z 0-9 . _ -
  --host NAME              this host's name in logs and metrics (default: the hostname); the
                           fleet tells hosts apart by their segment's id, not by it
  --interval-ms N          sync interval, 100 to 60000 (default 1000)
  --connect-timeout-ms N   connect timeout, 10 to 60000 (default 500)
  --command-timeout-ms N   timeout of each round trip to Redis, 10 to 60000 (default 500)
  --cluster                Redis is a Redis Cluster
  --suffixes LIST          the counter suffixes of Ganesha's storage keys, comma-separated
                           (default _success,_failure,_rejection); a service is a key without
                           its suffix
  --syncs N                run N syncs, print what each did on stdout, and exit (benchmarks)
";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub segment: PathBuf,
    pub redis: String,
    pub fleet: String,
    pub host: String,
    pub interval: Duration,
    pub connect_timeout: Duration,
    pub command_timeout: Duration,
    pub cluster: bool,
    pub suffixes: Vec<Vec<u8>>,
    /// `--syncs N`: stop after N syncs, reporting each.
    pub syncs: Option<u64>,
}

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Command {
    Run(Config),
    Help,
    Version,
}

/// Settings as given, before their checks: (name, value, where it was given).
type Given = Vec<(String, String, String)>;

const NAMES: [&str; 10] = [
    "segment",
    "redis",
    "fleet",
    "host",
    "interval_ms",
    "connect_timeout_ms",
    "command_timeout_ms",
    "cluster",
    "suffixes",
    "syncs",
];

/// Parses the command line (without the program's name). `read_file` reads a config file
/// (a parameter so that tests need no files); `hostname` gives the default host name.
pub fn parse(
    args: &[String],
    read_file: impl Fn(&str) -> Result<String, String>,
    hostname: impl Fn() -> Option<String>,
) -> Result<Command, String> {
    let mut flags: Given = Vec::new();
    let mut config_file = None;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => (flag, Some(value.to_string())),
            _ => (arg.as_str(), None),
        };
        match flag {
            "--help" | "-h" => return Ok(Command::Help),
            "--version" => return Ok(Command::Version),
            "--cluster" => {
                flags.push(("cluster".into(), inline.unwrap_or_else(|| "yes".into()), format!("flag {flag}")))
            }
            _ => {
                let name = flag.strip_prefix("--").map(|name| name.replace('-', "_"));
                let known = name.as_deref().filter(|name| *name == "config" || NAMES.contains(name));
                let Some(name) = known else {
                    return Err(format!("unknown argument {arg:?} (--help lists the flags)"));
                };
                let value = match inline {
                    Some(value) => value,
                    None => args.next().cloned().ok_or_else(|| format!("{flag} needs a value"))?,
                };
                if name == "config" {
                    config_file = Some(value);
                } else {
                    flags.push((name.to_string(), value, format!("flag {flag}")));
                }
            }
        }
    }
    let mut given = match &config_file {
        Some(path) => parse_file(path, &read_file(path).map_err(|error| format!("cannot read {path}: {error}"))?)?,
        None => Vec::new(),
    };
    given.extend(flags);
    check(&given, hostname).map(Command::Run)
}

/// The `name = value` lines of a config file.
fn parse_file(path: &str, text: &str) -> Result<Given, String> {
    let mut given = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let at = format!("{path}:{}", number + 1);
        let (name, value) = line.split_once('=').ok_or_else(|| format!("{at}: not a `name = value` line"))?;
        let name = name.trim().replace('-', "_");
        if !NAMES.contains(&name.as_str()) {
            return Err(format!("{at}: unknown setting {name:?} (known: {})", NAMES.join(", ")));
        }
        given.push((name, value.trim().to_string(), at));
    }
    Ok(given)
}

fn check(given: &Given, hostname: impl Fn() -> Option<String>) -> Result<Config, String> {
    // The last value given wins: the file's first, then the flags'.
    let value = |name: &str| {
        given.iter().rev().find(|(given, ..)| given == name).map(|(_, value, at)| (value.as_str(), at.as_str()))
    };
    let required =
        |name: &str| value(name).ok_or_else(|| format!("{} is required (--{})", name, name.replace('_', "-")));
    let millis = |name: &str, default: u64, (min, max): (u64, u64)| -> Result<Duration, String> {
        let Some((raw, at)) = value(name) else {
            return Ok(Duration::from_millis(default));
        };
        match raw.parse::<u64>() {
            Ok(ms) if (min..=max).contains(&ms) => Ok(Duration::from_millis(ms)),
            _ => Err(format!("{at}: {name} = {raw:?} is not a whole number of milliseconds from {min} to {max}")),
        }
    };
    let name_setting = |name: &str, raw: &str, at: &str| {
        if valid_name(raw) {
            Ok(raw.to_string())
        } else {
            Err(format!("{at}: {name} = {raw:?} is not 1 to 64 of A-Z a-z 0-9 . _ -"))
        }
    };

    let (segment, at) = required("segment")?;
    let segment = PathBuf::from(segment);
    if !segment.is_absolute() {
        return Err(format!("{at}: segment = {:?} is not an absolute path (give ganesha_shm.path)", segment));
    }
    let (redis, at) = required("redis")?;
    let cluster = match value("cluster") {
        None => false,
        Some((raw, at)) => match raw.to_ascii_lowercase().as_str() {
            "1" | "yes" | "on" | "true" => true,
            "0" | "no" | "off" | "false" => false,
            _ => return Err(format!("{at}: cluster = {raw:?} is not yes or no")),
        },
    };
    for url in redis.split(',').filter(|_| cluster).chain(Some(redis).filter(|_| !cluster)) {
        check_url(url).map_err(|why| format!("{at}: redis = {url:?} {why}"))?;
    }
    let (fleet, at) = required("fleet")?;
    let fleet = name_setting("fleet", fleet, at)?;
    let host = match value("host") {
        Some((raw, at)) => name_setting("host", raw, at)?,
        None => {
            let host = hostname().ok_or("the hostname is unknown: give --host")?;
            name_setting("host", &host, "the hostname (give --host)")?
        }
    };
    let suffixes = match value("suffixes") {
        None => vec![b"_success".to_vec(), b"_failure".to_vec(), b"_rejection".to_vec()],
        Some((raw, at)) => {
            let suffixes: Vec<Vec<u8>> = raw.split(',').map(|suffix| suffix.trim().as_bytes().to_vec()).collect();
            if suffixes.iter().any(Vec::is_empty) {
                return Err(format!("{at}: suffixes = {raw:?} holds an empty suffix"));
            }
            suffixes
        }
    };
    let syncs = match value("syncs") {
        None => None,
        Some((raw, at)) => match raw.parse::<u64>() {
            Ok(syncs) if syncs >= 1 => Some(syncs),
            _ => return Err(format!("{at}: syncs = {raw:?} is not a whole number from 1")),
        },
    };
    Ok(Config {
        segment,
        redis: redis.to_string(),
        fleet,
        host,
        interval: millis("interval_ms", 1000, (100, 60_000))?,
        connect_timeout: millis("connect_timeout_ms", 500, (10, 60_000))?,
        command_timeout: millis("command_timeout_ms", 500, (10, 60_000))?,
        cluster,
        suffixes,
        syncs,
    })
}

/// Whether the Redis client takes `url`, with a reason when it does not.
fn check_url(url: &str) -> Result<(), String> {
    use redis::IntoConnectionInfo;
    if !(url.starts_with("redis://") || url.starts_with("unix://") || url.starts_with("redis+unix://")) {
        return Err("is not a redis:// or unix:// URL".into());
    }
    url.into_connection_info().map(|_| ()).map_err(|error| format!("is not a Redis URL the client takes: {error}"))
}

/// The URL with its password hidden, for the log.
pub fn redacted(url: &str) -> String {
    let hide_query = |url: &str| match url.split_once("pass=") {
        Some((before, after)) => {
            let rest = after.split_once('&').map(|(_, rest)| format!("&{rest}")).unwrap_or_default();
            format!("{before}pass=***{rest}")
        }
        None => url.to_string(),
    };
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    match rest.rsplit_once('@') {
        Some((credentials, host)) => {
            let user = credentials.split(':').next().unwrap_or("");
            hide_query(&format!("{scheme}://{user}:***@{host}"))
        }
        None => hide_query(url),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(String::from).collect()
    }

    fn run(line: &str) -> Result<Command, String> {
        parse(&args(line), |_| Err("no such file".into()), || Some("web1".into()))
    }

    const BASE: &str = "--segment /dev/shm/x --redis redis://127.0.0.1:6379 --fleet shop";

    #[test]
    fn the_flags_of_the_readme_run_it() {
        let Command::Run(config) = run(&format!("{BASE} --host web2")).unwrap() else { panic!() };
        assert_eq!(config.segment, PathBuf::from("/dev/shm/x"));
        assert_eq!((config.fleet.as_str(), config.host.as_str()), ("shop", "web2"));
        assert_eq!(config.interval, Duration::from_secs(1));
        assert_eq!(config.suffixes.len(), 3);
        assert!(!config.cluster);
    }

    #[test]
    fn the_host_defaults_to_the_hostname() {
        let Command::Run(config) = run(BASE).unwrap() else { panic!() };
        assert_eq!(config.host, "web1");
        let unnamed = parse(&args(BASE), |_| Err(String::new()), || None);
        assert_eq!(unnamed, Err("the hostname is unknown: give --host".into()));
    }

    #[test]
    fn bad_values_are_errors_that_say_what_is_wrong() {
        for (line, expected) in [
            ("--segment /dev/shm/x --fleet shop", "redis is required (--redis)"),
            ("--segment x --redis redis://h --fleet shop", "flag --segment: segment = \"x\" is not an absolute path"),
            (
                &format!("{BASE} --interval-ms 50"),
                "flag --interval-ms: interval_ms = \"50\" is not a whole number of milliseconds from 100 to 60000",
            ),
            (&format!("{BASE} --interval-ms 1s"), "is not a whole number"),
            (&format!("{BASE} --host 'a b'"), "unknown argument"),
            (&format!("{BASE} --host a/b"), "host = \"a/b\" is not 1 to 64"),
            ("--segment /x --redis http://h --fleet shop", "is not a redis:// or unix:// URL"),
            ("--segment /x --redis redis://h:notaport --fleet shop", "is not a Redis URL the client takes"),
            (&format!("{BASE} --bogus 1"), "unknown argument \"--bogus\""),
            (&format!("{BASE} --fleet"), "--fleet needs a value"),
            (&format!("{BASE} --suffixes a,,b"), "holds an empty suffix"),
            (&format!("{BASE} --cluster=maybe"), "cluster = \"maybe\" is not yes or no"),
        ] {
            let error = run(line).unwrap_err();
            assert!(error.contains(expected), "{line}: {error}");
        }
    }

    #[test]
    fn a_config_file_gives_settings_and_flags_override_it() {
        let file = "# the shop\nsegment = /run/ganesha-shm/segment\nredis = unix:///run/redis.sock?db=2\n\
                    fleet = shop # inline\ninterval-ms = 250\n\nhost = web9\n";
        let read = |path: &str| if path == "/etc/f.conf" { Ok(file.to_string()) } else { Err("missing".into()) };
        let parsed = parse(&args("--config /etc/f.conf --host web3"), read, || None).unwrap();
        let Command::Run(config) = parsed else { panic!() };
        assert_eq!(config.segment, PathBuf::from("/run/ganesha-shm/segment"));
        assert_eq!((config.interval, config.host.as_str()), (Duration::from_millis(250), "web3"));
        let bad = parse(&args("--config /etc/f.conf"), |_| Ok("segment /x\n".into()), || None).unwrap_err();
        assert_eq!(bad, "/etc/f.conf:1: not a `name = value` line");
        let unknown = parse(&args("--config /c"), |_| Ok("colour = red".into()), || None).unwrap_err();
        assert!(unknown.starts_with("/c:1: unknown setting \"colour\""), "{unknown}");
        let missing = parse(&args("--config /nope"), |_| Err("No such file".into()), || None).unwrap_err();
        assert_eq!(missing, "cannot read /nope: No such file");
    }

    #[test]
    fn a_cluster_takes_a_list_of_nodes() {
        let line = "--segment /x --redis redis://127.0.0.1:7000,redis://127.0.0.1:7001 --fleet shop --cluster";
        let Command::Run(config) = run(line).unwrap() else { panic!() };
        assert!(config.cluster);
    }

    #[test]
    fn passwords_are_not_logged() {
        assert_eq!(redacted("redis://:s3cret@10.0.0.1:6379/2"), "redis://:***@10.0.0.1:6379/2");
        assert_eq!(redacted("redis://app:s3cret@h"), "redis://app:***@h");
        assert_eq!(redacted("unix:///run/r.sock?db=1&pass=s3cret"), "unix:///run/r.sock?db=1&pass=***");
        assert_eq!(redacted("redis://127.0.0.1"), "redis://127.0.0.1");
    }
}
