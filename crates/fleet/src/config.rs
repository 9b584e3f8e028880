//! The sidecar's settings: flags, and a config file of `name = value` lines (`#` starts a
//! comment) with the same names as the flags. A flag overrides the file. Every bad value is an
//! error naming the setting and what it must be.

use std::path::PathBuf;
use std::time::Duration;

use ganesha_shm_core::fleet::valid_name;

/// One setting: its name in the config file (the flag is `--` and the name, with `-` for `_`),
/// the value it takes ("" for a switch), its default, and what it is. `--help` and the man page
/// (`--man`) are both written from this table, so that they cannot disagree.
pub struct Setting {
    pub name: &'static str,
    pub value: &'static str,
    pub default: &'static str,
    pub help: &'static str,
}

pub const SETTINGS: &[Setting] = &[
    Setting {
        name: "config",
        value: "FILE",
        default: "",
        help: "Read settings from FILE: `name = value` lines with the names of the flags, without \
               their dashes and with _ for -; # starts a comment. A flag overrides the file. A \
               flag only: a file names no other file.",
    },
    Setting {
        name: "segment",
        value: "PATH",
        default: "required",
        help: "The segment file, as ganesha_shm.path gives it (an absolute path).",
    },
    Setting {
        name: "redis",
        value: "URL",
        default: "required",
        help: "The Redis every host of the fleet shares: redis://[[USER]:PASSWORD@]HOST[:PORT][/DB], \
               rediss://... for TLS, or unix:///PATH/TO/SOCKET[?db=DB&pass=PASSWORD]. With \
               --cluster, the cluster's nodes, comma-separated; with --sentinel, the Sentinels \
               (redis:// or rediss://, each with its own user and password). \
               Redis 7.0 or later, or Valkey.",
    },
    Setting {
        name: "fleet",
        value: "NAME",
        default: "required",
        help: "The fleet's name, prefixing every key it writes, so that fleets can share a Redis: \
               1 to 64 of A-Z a-z 0-9 . _ -",
    },
    Setting {
        name: "host",
        value: "NAME",
        default: "the hostname",
        help: "This host's name in logs and metrics; the fleet tells hosts apart by their \
               segment's id, not by it.",
    },
    Setting { name: "interval_ms", value: "N", default: "1000", help: "The sync interval, 100 to 60000 milliseconds." },
    Setting {
        name: "connect_timeout_ms",
        value: "N",
        default: "500",
        help: "The connect timeout (TLS handshake included), 10 to 60000 milliseconds.",
    },
    Setting {
        name: "command_timeout_ms",
        value: "N",
        default: "500",
        help: "The timeout of each round trip to Redis, 10 to 60000 milliseconds.",
    },
    Setting { name: "cluster", value: "", default: "no", help: "Redis is a Redis Cluster." },
    Setting {
        name: "sentinel",
        value: "NAME",
        default: "",
        help: "Redis is the master Sentinel monitors under NAME: --redis lists the Sentinels, \
               which are asked for the master at each connection, so that a failover is followed.",
    },
    Setting {
        name: "master_user",
        value: "USER",
        default: "",
        help: "With --sentinel, the ACL user on the master (default: none, the default user).",
    },
    Setting {
        name: "master_password",
        value: "PASSWORD",
        default: "",
        help: "With --sentinel, the master's password (default: none). Prefer the config file: \
               a flag shows in ps.",
    },
    Setting {
        name: "tls_ca_file",
        value: "FILE",
        default: "the system's CAs",
        help: "With rediss:// URLs, the PEM certificates of the CAs that the server's certificate \
               must chain to, instead of the system's (/etc/ssl/certs).",
    },
    Setting {
        name: "tls_cert_file",
        value: "FILE",
        default: "",
        help: "With rediss:// URLs, the PEM certificate (and its chain) this host presents to \
               servers that require one (mutual TLS); with --tls-key-file.",
    },
    Setting {
        name: "tls_key_file",
        value: "FILE",
        default: "",
        help: "The private key of --tls-cert-file, PEM (PKCS#8, PKCS#1 or SEC1), unencrypted.",
    },
    Setting {
        name: "suffixes",
        value: "LIST",
        default: "_success,_failure,_rejection,_last_failure_time,_status",
        help: "The suffixes of Ganesha's storage keys, comma-separated: the three counters' (a service is \
               a key without its suffix), then the last failure time's and the status's (a reset the \
               fleet shares clears them), which may be left out for their defaults.",
    },
    Setting {
        name: "syncs",
        value: "N",
        default: "",
        help: "Run N syncs, print what each did on stdout, and exit (benchmarks).",
    },
];

/// What `--help` prints: the synopsis, what it does, and every setting of `SETTINGS`.
pub fn usage() -> String {
    let mut text = String::from(
        "usage: ganesha-shm-fleet [--config FILE] --segment PATH --redis URL --fleet NAME [FLAGS]\n\
         \x20      ganesha-shm-fleet --help | --version | --man\n\n",
    );
    text.push_str(&wrap(DESCRIPTION, 0, 96));
    text.push('\n');
    for setting in SETTINGS {
        let flag = flag_of(setting);
        let mut help = setting.help.to_string();
        if !setting.default.is_empty() && setting.default != "required" {
            help.push_str(&format!(" (default: {})", setting.default));
        } else if setting.default == "required" {
            help.push_str(" (required)");
        }
        let wrapped = wrap(&help, 27, 96);
        if flag.len() + 2 < 27 {
            text.push_str(&format!("  {flag:<24} {}", &wrapped[27..]));
        } else {
            text.push_str(&format!("  {flag}\n{wrapped}"));
        }
    }
    text.push_str(
        "\nSIGTERM or SIGINT stops it (exit status 0); a bad setting is exit status 2, a segment made\n\
                   without fleet mode exit status 1. `man ganesha-shm-fleet` says more.\n",
    );
    text
}

/// What the sidecar does, for `--help` and the man page.
pub const DESCRIPTION: &str =
    "Shares the circuit counts of this host's ganesha_shm segment with the other hosts of its \
    fleet through Redis: every interval it sends what this host counted since the last sync and \
    writes the fleet's sums, less this host's own, into the segment. PHP must run with \
    ganesha_shm.fleet=1 and ganesha_shm.path.";

/// `--name VALUE`, or `--name` for a switch.
pub fn flag_of(setting: &Setting) -> String {
    let flag = format!("--{}", setting.name.replace('_', "-"));
    if setting.value.is_empty() {
        flag
    } else {
        format!("{flag} {}", setting.value)
    }
}

/// `text` in lines of at most `width` columns, each indented by `indent` spaces.
fn wrap(text: &str, indent: usize, width: usize) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && indent + line.len() + 1 + word.len() > width {
            out.push_str(&format!("{:indent$}{line}\n", ""));
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        out.push_str(&format!("{:indent$}{line}\n", ""));
    }
    out
}

/// The TLS files, as given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsFiles {
    pub ca: Option<PathBuf>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

/// Where Redis is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Topology {
    /// One server (`redis`: its URL).
    Server,
    /// A Redis Cluster (`redis`: its nodes, comma-separated).
    Cluster,
    /// The master that Sentinel monitors under this name (`redis`: the Sentinels), with the
    /// master's user and password.
    Sentinel { master: String, user: Option<String>, password: Option<String> },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub segment: PathBuf,
    pub redis: String,
    pub topology: Topology,
    pub tls: TlsFiles,
    pub fleet: String,
    pub host: String,
    pub interval: Duration,
    pub connect_timeout: Duration,
    pub command_timeout: Duration,
    /// The counters' suffixes: successes, failures, rejections.
    pub suffixes: Vec<Vec<u8>>,
    /// The suffixes of a service's last failure time and status.
    pub state_suffixes: [Vec<u8>; 2],
    /// `--syncs N`: stop after N syncs, reporting each.
    pub syncs: Option<u64>,
}

impl Config {
    /// The URLs of `redis`: one, or a cluster's nodes, or the Sentinels.
    pub fn urls(&self) -> Vec<&str> {
        urls(&self.redis, &self.topology)
    }

    /// Where the log says it syncs: the URLs without their passwords, and the topology.
    pub fn redis_for_log(&self) -> String {
        let urls = self.urls().into_iter().map(redacted).collect::<Vec<_>>().join(",");
        match &self.topology {
            Topology::Server => urls,
            Topology::Cluster => format!("{urls} (cluster)"),
            Topology::Sentinel { master, .. } => format!("master {master:?} of the Sentinels {urls}"),
        }
    }
}

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Command {
    Run(Config),
    Help,
    Version,
    /// `--man`: the man page, in roff.
    Man,
}

/// Settings as given, before their checks: (name, value, where it was given).
type Given = Vec<(String, String, String)>;

fn is_setting(name: &str) -> bool {
    name != "config" && SETTINGS.iter().any(|setting| setting.name == name)
}

fn names() -> String {
    SETTINGS.iter().map(|setting| setting.name).filter(|name| *name != "config").collect::<Vec<_>>().join(", ")
}

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
            "--man" => return Ok(Command::Man),
            "--cluster" => {
                flags.push(("cluster".into(), inline.unwrap_or_else(|| "yes".into()), format!("flag {flag}")))
            }
            _ => {
                let name = flag.strip_prefix("--").map(|name| name.replace('-', "_"));
                let known = name.as_deref().filter(|name| *name == "config" || is_setting(name));
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
        if !is_setting(&name) {
            return Err(format!("{at}: unknown setting {name:?} (known: {})", names()));
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
    let (redis, redis_at) = required("redis")?;
    let switch = |name: &str| match value(name) {
        None => Ok(false),
        Some((raw, at)) => match raw.to_ascii_lowercase().as_str() {
            "1" | "yes" | "on" | "true" => Ok(true),
            "0" | "no" | "off" | "false" => Ok(false),
            _ => Err(format!("{at}: {name} = {raw:?} is not yes or no")),
        },
    };
    let optional = |name: &str| value(name).map(|(raw, _)| raw.to_string()).filter(|raw| !raw.is_empty());
    let topology = match (switch("cluster")?, value("sentinel")) {
        (true, Some((_, at))) => return Err(format!("{at}: sentinel and cluster exclude each other")),
        (true, None) => Topology::Cluster,
        (false, Some((raw, at))) => Topology::Sentinel {
            master: name_setting("sentinel", raw, at)?,
            user: optional("master_user"),
            password: optional("master_password"),
        },
        (false, None) => Topology::Server,
    };
    if !matches!(topology, Topology::Sentinel { .. }) {
        if let Some((_, at)) = value("master_user").or(value("master_password")) {
            return Err(format!("{at}: the master's user and password are for --sentinel (else give them in the URL)"));
        }
    }
    let urls = urls(redis, &topology);
    for url in &urls {
        check_url(url).map_err(|why| format!("{redis_at}: redis = {url:?} {why}"))?;
    }
    let tls = urls.iter().filter(|url| url.starts_with("rediss://")).count();
    if tls != 0 && tls != urls.len() {
        return Err(format!("{redis_at}: redis = {redis:?} mixes rediss:// (TLS) and plain URLs"));
    }
    let file = |name: &str| -> Result<Option<PathBuf>, String> {
        let Some((raw, at)) = value(name) else { return Ok(None) };
        if tls == 0 {
            return Err(format!("{at}: {name} is for TLS: give rediss:// URLs"));
        }
        std::fs::metadata(raw).map_err(|error| format!("{at}: {name} = {raw:?}: {error}"))?;
        Ok(Some(PathBuf::from(raw)))
    };
    let tls = TlsFiles { ca: file("tls_ca_file")?, cert: file("tls_cert_file")?, key: file("tls_key_file")? };
    if tls.cert.is_some() != tls.key.is_some() {
        return Err("tls_cert_file and tls_key_file go together (a client certificate and its key)".into());
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
    let mut suffixes: Vec<Vec<u8>> =
        ["_success", "_failure", "_rejection", "_last_failure_time", "_status"].map(|s| s.as_bytes().to_vec()).into();
    if let Some((raw, at)) = value("suffixes") {
        let given: Vec<Vec<u8>> = raw.split(',').map(|suffix| suffix.trim().as_bytes().to_vec()).collect();
        if given.iter().any(Vec::is_empty) {
            return Err(format!("{at}: suffixes = {raw:?} holds an empty suffix"));
        }
        if given.len() != 3 && given.len() != 5 {
            return Err(format!(
                "{at}: suffixes = {raw:?} holds {} suffixes: give the three counters' (successes, failures, \
                 rejections), or those and the last failure time's and the status's",
                given.len()
            ));
        }
        suffixes.splice(..given.len(), given);
    }
    let state_suffixes = [suffixes[3].clone(), suffixes[4].clone()];
    suffixes.truncate(3);
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
        topology,
        tls,
        fleet,
        host,
        interval: millis("interval_ms", 1000, (100, 60_000))?,
        connect_timeout: millis("connect_timeout_ms", 500, (10, 60_000))?,
        command_timeout: millis("command_timeout_ms", 500, (10, 60_000))?,
        suffixes,
        state_suffixes,
        syncs,
    })
}

/// The URLs of the `redis` setting: the one URL of a server, or the comma-separated nodes of a
/// cluster or Sentinels.
fn urls<'a>(redis: &'a str, topology: &Topology) -> Vec<&'a str> {
    match topology {
        Topology::Server => vec![redis],
        Topology::Cluster | Topology::Sentinel { .. } => redis.split(',').map(str::trim).collect(),
    }
}

/// Whether the Redis client takes `url`, with a reason when it does not.
fn check_url(url: &str) -> Result<(), String> {
    use redis::IntoConnectionInfo;
    if !["redis://", "rediss://", "unix://", "redis+unix://"].iter().any(|scheme| url.starts_with(scheme)) {
        return Err("is not a redis://, rediss:// or unix:// URL".into());
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
        assert_eq!(config.state_suffixes, [b"_last_failure_time".to_vec(), b"_status".to_vec()]);
        assert_eq!(config.topology, Topology::Server);
    }

    #[test]
    fn three_suffixes_keep_the_defaults_of_the_last_two() {
        let Command::Run(config) = run(&format!("{BASE} --suffixes _s,_f,_r")).unwrap() else { panic!() };
        assert_eq!(config.suffixes, [b"_s".to_vec(), b"_f".to_vec(), b"_r".to_vec()]);
        assert_eq!(config.state_suffixes[1], b"_status");
        let Command::Run(config) = run(&format!("{BASE} --suffixes _s,_f,_r,_t,_st")).unwrap() else { panic!() };
        assert_eq!((config.suffixes.len(), config.state_suffixes.clone()), (3, [b"_t".to_vec(), b"_st".to_vec()]));
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
            ("--segment /x --redis http://h --fleet shop", "is not a redis://, rediss:// or unix:// URL"),
            ("--segment /x --redis redis://h:notaport --fleet shop", "is not a Redis URL the client takes"),
            (&format!("{BASE} --bogus 1"), "unknown argument \"--bogus\""),
            (&format!("{BASE} --fleet"), "--fleet needs a value"),
            (&format!("{BASE} --suffixes a,,b"), "holds an empty suffix"),
            (&format!("{BASE} --suffixes a,b,c,d"), "holds 4 suffixes: give the three counters'"),
            (&format!("{BASE} --cluster=maybe"), "cluster = \"maybe\" is not yes or no"),
            (&format!("{BASE} --cluster --sentinel m"), "sentinel and cluster exclude each other"),
            (&format!("{BASE} --master-password pw"), "the master's user and password are for --sentinel"),
            (&format!("{BASE} --sentinel my/master"), "sentinel = \"my/master\" is not 1 to 64"),
            (&format!("{BASE} --tls-ca-file /dev/null"), "tls_ca_file is for TLS: give rediss:// URLs"),
            (
                "--segment /x --redis rediss://a:1,redis://b:2 --fleet shop --cluster",
                "mixes rediss:// (TLS) and plain URLs",
            ),
            (
                "--segment /x --redis rediss://a:1 --fleet shop --tls-cert-file /dev/null",
                "tls_cert_file and tls_key_file go together",
            ),
            (
                "--segment /x --redis rediss://a:1 --fleet shop --tls-ca-file /nonexistent/ca.pem",
                "tls_ca_file = \"/nonexistent/ca.pem\": No such file or directory",
            ),
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
        assert_eq!(config.topology, Topology::Cluster);
        assert_eq!(config.urls(), ["redis://127.0.0.1:7000", "redis://127.0.0.1:7001"]);
    }

    #[test]
    fn a_sentinel_set_up_takes_the_sentinels_and_the_masters_credentials() {
        let line = "--segment /x --redis rediss://:spw@10.0.0.1:26379,rediss://10.0.0.2:26379 --fleet shop \
                    --sentinel mymaster --master-user app --master-password mpw --tls-ca-file /dev/null";
        let Command::Run(config) = run(line).unwrap() else { panic!() };
        let master =
            Topology::Sentinel { master: "mymaster".into(), user: Some("app".into()), password: Some("mpw".into()) };
        assert_eq!(config.topology, master);
        assert_eq!(config.urls().len(), 2);
        assert_eq!(config.tls.ca, Some(PathBuf::from("/dev/null")));
        assert_eq!(
            config.redis_for_log(),
            "master \"mymaster\" of the Sentinels rediss://:***@10.0.0.1:26379,rediss://10.0.0.2:26379"
        );
    }

    #[test]
    fn passwords_are_not_logged() {
        assert_eq!(redacted("redis://:s3cret@10.0.0.1:6379/2"), "redis://:***@10.0.0.1:6379/2");
        assert_eq!(redacted("redis://app:s3cret@h"), "redis://app:***@h");
        assert_eq!(redacted("unix:///run/r.sock?db=1&pass=s3cret"), "unix:///run/r.sock?db=1&pass=***");
        assert_eq!(redacted("redis://127.0.0.1"), "redis://127.0.0.1");
        assert_eq!(redacted("rediss://app:s3cret@h:6380"), "rediss://app:***@h:6380");
    }
}
