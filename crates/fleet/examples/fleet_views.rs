//! fleet_views: whether each host's view of the fleet is exact, read from the hosts' segment
//! files. For benches/fleet.sh's storm: every host counted the same services, so each host's
//! fleet ring must hold, for each counter, what the other hosts counted (`--expect-fleet`), and
//! its last sync must be fresh enough for PHP to use it. That is what a host "sees": PHP adds
//! the fleet ring to its own counts only while the sync state is fresh
//! (`SyncState::is_fresh`), so a view is exact when the state is fresh and every counter's
//! fleet count is the expected one.
//!
//! ```text
//! cargo run --release --example fleet_views -- --services 1000 --expect-fleet 990 \
//!     [--expect-own 10] [--service-format 'ganesha_service{i}'] [--suffixes _failure,_success] \
//!     [--time-window 60] [--until-exact [--timeout-s 60] [--since UNIX_SECONDS [--resynced]]] SEGMENT...
//! ```
//!
//! Once (the default): a line per host, a summary; exit status 0 when every view is exact, 1
//! when not. With `--until-exact`: polls every 100 ms until every view is exact at once, and
//! prints the seconds that took (from `--since`, the moment the bench broke the views, or from
//! its own start), status 0; on timeout, how many hosts and services were not exact and one
//! example, status 1. With `--resynced`, a view counts only once its host synced after
//! `--since`: right after Redis lost everything, every host still shows what it read before,
//! fresh for two intervals, which proves nothing of the fleet's recovery. Status 3: a host's own
//! counts are not `--expect-own` (the data the views are checked against left the window: no
//! wait can make them exact). Status 2: a bad argument, or a segment it cannot attach to.
//!
//! It only reads the segments (the sidecars write them), attached once. A lookup of a 60-bucket
//! window reads 60 words of each of the counter's two rings, 15 cache lines, so reading every
//! counter of 100 hosts of 1,000 services (200,000 lookups, 190 MB of ring words) is bound by
//! memory: some 130 ms of CPU on a small virtual machine, whatever the order the keys are read
//! in. So a poll reads the sync states first (a word each), then stops at the first counter
//! off, starting with the host that was off at the last poll: a poll that fails costs well under
//! a millisecond, and only the poll that finds every view exact reads every counter (and the
//! report of a timeout). The files must not be truncated while it runs (it installs no SIGBUS
//! guard: the guard covers one segment per process, and a bench's files are its own).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ganesha_shm_core::fleet::{host_id_text, monotonic_ms, SyncState};
use ganesha_shm_core::segment::Segment;
use ganesha_shm_core::store::{Layout, Store};
use ganesha_shm_core::window::Window;

/// How often `--until-exact` looks again.
const POLL: Duration = Duration::from_millis(100);

/// The most a segment file may grant: what the sidecar allows (`attach` in `src/main.rs`),
/// which is what `ganesha_shm.mode` may.
const MODE: u32 = 0o775;

const USAGE: &str = "usage: fleet_views --services N --expect-fleet N [--expect-own N] \
[--service-format 'ganesha_service{i}'] [--suffixes _failure,_success] [--time-window 60] \
[--until-exact [--timeout-s 60] [--since UNIX_SECONDS [--resynced]]] SEGMENT...";

/// What to check, from the command line.
struct Args {
    segments: Vec<PathBuf>,
    services: u64,
    /// A service's name, `{i}` standing for its number (0 to services - 1).
    service_format: String,
    suffixes: Vec<String>,
    time_window: i64,
    expect_fleet: u64,
    expect_own: Option<u64>,
    until_exact: bool,
    timeout: Duration,
    /// Unix seconds the wait is counted from.
    since: Option<f64>,
    /// Whether a view counts only from a sync that ended after `since`.
    resynced: bool,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut parsed = Args {
        segments: Vec::new(),
        services: 0,
        service_format: "ganesha_service{i}".into(),
        suffixes: vec!["_failure".into(), "_success".into()],
        time_window: 60,
        expect_fleet: 0,
        expect_own: None,
        until_exact: false,
        timeout: Duration::from_secs(60),
        since: None,
        resynced: false,
    };
    let (mut services, mut expect_fleet) = (None, None);
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = |what: &str| args.next().cloned().ok_or_else(|| format!("{arg} needs {what}"));
        let number = |text: String| text.parse::<u64>().map_err(|_| format!("{arg}: {text:?} is not a whole number"));
        match arg.as_str() {
            "--services" => services = Some(number(value("a number")?)?),
            "--expect-fleet" => expect_fleet = Some(number(value("a number")?)?),
            "--expect-own" => parsed.expect_own = Some(number(value("a number")?)?),
            "--service-format" => parsed.service_format = value("a format")?,
            "--suffixes" => parsed.suffixes = value("a list")?.split(',').map(str::to_string).collect(),
            "--time-window" => {
                let text = value("seconds")?;
                parsed.time_window = text.parse().map_err(|_| format!("{arg}: {text:?} is not a whole number"))?;
            }
            "--until-exact" => parsed.until_exact = true,
            "--timeout-s" => {
                let text = value("seconds")?;
                let seconds = text
                    .parse::<f64>()
                    .ok()
                    .filter(|s| s.is_finite() && *s >= 0.0)
                    .ok_or_else(|| format!("{arg}: {text:?} is not a number of seconds"))?;
                parsed.timeout = Duration::from_secs_f64(seconds);
            }
            "--since" => {
                let text = value("unix seconds")?;
                let since = text
                    .parse::<f64>()
                    .ok()
                    .filter(|s| s.is_finite() && *s > 0.0)
                    .ok_or_else(|| format!("{arg}: {text:?} is not a time in unix seconds"))?;
                parsed.since = Some(since);
            }
            "--resynced" => parsed.resynced = true,
            "--help" | "-h" => return Err(String::new()),
            flag if flag.starts_with("--") => return Err(format!("unknown argument {flag:?}")),
            path => parsed.segments.push(PathBuf::from(path)),
        }
    }
    parsed.services = services.ok_or("--services is required")?;
    parsed.expect_fleet = expect_fleet.ok_or("--expect-fleet is required")?;
    if parsed.segments.is_empty() {
        return Err("no segment file given".into());
    }
    if !parsed.service_format.contains("{i}") {
        return Err(format!("--service-format {:?} has no {{i}} for the service's number", parsed.service_format));
    }
    if parsed.resynced && parsed.since.is_none() {
        return Err("--resynced needs --since: the moment the syncs must have ended after".into());
    }
    if parsed.suffixes.iter().any(String::is_empty) {
        return Err("--suffixes has an empty suffix".into());
    }
    Ok(parsed)
}

/// A host: its segment, attached once, and the window its counters are read in.
struct Host {
    path: PathBuf,
    segment: Segment,
    window: Window,
}

/// The counters every host is checked for.
struct Keys {
    /// Every service's counters, as bytes, a service's together.
    names: Vec<Vec<u8>>,
    /// The service of each.
    service_of: Vec<usize>,
    services: usize,
}

impl Keys {
    fn new(args: &Args) -> Self {
        let (mut names, mut service_of) = (Vec::new(), Vec::new());
        for i in 0..args.services as usize {
            let service = args.service_format.replace("{i}", &i.to_string());
            for suffix in &args.suffixes {
                names.push(format!("{service}{suffix}").into_bytes());
                service_of.push(i);
            }
        }
        Self { names, service_of, services: args.services as usize }
    }
}

fn attach(path: &Path, time_window: i64) -> Result<Host, String> {
    let segment = Segment::attach_file(path, Layout::regions, MODE)
        .map_err(|refusal| format!("cannot attach to {}: {refusal}", path.display()))?;
    let settings = segment.layout().settings;
    if !settings.fleet {
        return Err(format!("{} was made without fleet mode: it has no fleet ring", path.display()));
    }
    // The window PHP reads in: Ganesha's timeWindow, split as the adapter splits it for this
    // segment (its own max_buckets).
    let window = Window::new(time_window, None, settings.max_buckets)
        .map_err(|error| format!("{}: no window of {time_window} s: {error}", path.display()))?;
    Ok(Host { path: path.to_path_buf(), segment, window })
}

/// A counter whose fleet count is not the expected one.
struct Miss {
    key: String,
    own: u64,
    fleet: u64,
}

/// What one host shows at one moment.
struct View {
    /// Whether its last sync is fresh (and, with `--resynced`, ended after `--since`).
    fresh: bool,
    /// Services with a counter whose fleet count is not the expected one.
    services_off: u64,
    first_miss: Option<Miss>,
    /// A counter whose own count is not `--expect-own`.
    own_off: Option<Miss>,
    /// A lookup that failed (a damaged table): the key and why.
    error: Option<String>,
}

impl View {
    fn exact(&self) -> bool {
        self.fresh && self.services_off == 0 && self.error.is_none()
    }
}

/// How much of a view to read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// Every counter: to count what is off.
    Full,
    /// Until the first thing off: whether the view is exact (see the top of the file for why a
    /// poll that is going to fail stops at once).
    UntilOff,
}

/// Whether `host`'s last sync is fresh at this moment, and ended after `synced_after`
/// (monotonic ms).
fn fresh(host: &Host, synced_after: u64) -> bool {
    let state = SyncState::read(host.segment.fleet_words());
    state.is_fresh(monotonic_ms()) && state.synced_at_ms > synced_after
}

/// The view of `host` at `now` (unix seconds); `synced_after` (monotonic ms): the time its
/// last sync must have ended after to count.
fn view(host: &Host, keys: &Keys, args: &Args, now: u64, synced_after: u64, pass: Pass) -> View {
    let store = Store::new(&host.segment);
    let fresh = fresh(host, synced_after);
    let mut view = View { fresh, services_off: 0, first_miss: None, own_off: None, error: None };
    if pass == Pass::UntilOff && !fresh {
        return view;
    }
    // The services found off, by number (a full pass counts them).
    let mut services_off = vec![false; if pass == Pass::Full { keys.services } else { 0 }];
    for (k, key) in keys.names.iter().enumerate() {
        let mut off = false;
        match store.load_with_fleet(key, &host.window, now) {
            Ok((own, fleet)) => {
                let miss = || Miss { key: String::from_utf8_lossy(key).into_owned(), own, fleet };
                if args.expect_own.is_some_and(|expected| own != expected) && view.own_off.is_none() {
                    view.own_off = Some(miss());
                }
                if fleet != args.expect_fleet {
                    off = true;
                    if view.first_miss.is_none() {
                        view.first_miss = Some(miss());
                    }
                }
            }
            Err(error) => {
                view.error.get_or_insert_with(|| format!("{}: {error:?}", String::from_utf8_lossy(key)));
                off = true;
            }
        }
        match pass {
            Pass::Full => services_off[keys.service_of[k]] |= off,
            Pass::UntilOff if off || view.own_off.is_some() => {
                view.services_off = u64::from(off);
                return view;
            }
            Pass::UntilOff => {}
        }
    }
    view.services_off = services_off.iter().filter(|&&off| off).count() as u64;
    view
}

fn unix_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

fn describe(host: &Host) -> String {
    format!("{} (host {})", host.path.display(), host_id_text(host.segment.fleet_host_id()))
}

fn describe_miss(miss: &Miss, expect_fleet: u64) -> String {
    format!("{}: own {}, fleet {} (expected {expect_fleet})", miss.key, miss.own, miss.fleet)
}

/// The first host whose own counts are not the expected ones, in words: what was checked
/// against is gone (the fill's buckets left the window), or was never there.
fn own_counts_off(hosts: &[Host], views: &[View], expected: Option<u64>) -> Option<String> {
    let (host, miss) =
        hosts.iter().zip(views).find_map(|(host, view)| view.own_off.as_ref().map(|miss| (host, miss)))?;
    Some(format!(
        "{}: {} counted {} of its own, not {}: the data checked against is not in the window (any more)",
        describe(host),
        miss.key,
        miss.own,
        expected.unwrap_or_default()
    ))
}

/// The summary of views that are not all exact: how many hosts and services, and one example.
fn not_exact(hosts: &[Host], views: &[View], args: &Args) -> String {
    let expect_fleet = args.expect_fleet;
    let off: Vec<_> = hosts.iter().zip(views).filter(|(_, view)| !view.exact()).collect();
    let stale = off.iter().filter(|(_, view)| !view.fresh).count();
    let services: u64 = views.iter().map(|view| view.services_off).sum();
    let mut line = format!(
        "{} of {} hosts not exact ({stale} without a fresh sync), {services} host services with a fleet count off",
        off.len(),
        hosts.len()
    );
    let example = off
        .iter()
        .find_map(|(host, view)| view.first_miss.as_ref().map(|miss| (host, miss)))
        .map(|(host, miss)| format!("; e.g. {}: {}", describe(host), describe_miss(miss, expect_fleet)))
        .or_else(|| {
            off.first().map(|(host, _)| {
                format!("; e.g. {}: no fresh sync{}", describe(host), if args.resynced { " since --since" } else { "" })
            })
        });
    line.push_str(&example.unwrap_or_default());
    if let Some(error) = views.iter().find_map(|view| view.error.as_ref()) {
        line.push_str(&format!("; a lookup failed: {error}"));
    }
    line
}

fn main() -> ExitCode {
    let raw: Vec<String> = std::env::args().skip(1).collect();
    let args = match parse(&raw) {
        Ok(args) => args,
        Err(error) => {
            if !error.is_empty() {
                eprintln!("fleet_views: {error}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(if error.is_empty() { 0 } else { 2 });
        }
    };
    let started = Instant::now();
    let since = args.since.unwrap_or_else(unix_now);
    let keys = Keys::new(&args);
    let mut hosts = Vec::with_capacity(args.segments.len());
    for path in &args.segments {
        match attach(path, args.time_window) {
            Ok(host) => hosts.push(host),
            Err(error) => {
                eprintln!("fleet_views: {error}");
                return ExitCode::from(2);
            }
        }
    }
    let deadline = started + args.timeout;
    if !args.until_exact {
        let now = unix_now() as u64;
        let views: Vec<View> = hosts.iter().map(|host| view(host, &keys, &args, now, 0, Pass::Full)).collect();
        if let Some(line) = own_counts_off(&hosts, &views, args.expect_own) {
            eprintln!("fleet_views: {line}");
            return ExitCode::from(3);
        }
        for (host, view) in hosts.iter().zip(&views) {
            let miss =
                view.first_miss.as_ref().map(|miss| format!(", e.g. {}", describe_miss(miss, args.expect_fleet)));
            println!(
                "{}: {}, {} of {} services with a fleet count off{}",
                describe(host),
                if view.fresh { "fresh" } else { "NO fresh sync" },
                view.services_off,
                args.services,
                miss.unwrap_or_default()
            );
        }
        if views.iter().all(View::exact) {
            println!("every view exact: {} hosts, {} services", hosts.len(), args.services);
            return ExitCode::SUCCESS;
        }
        println!("not exact: {}", not_exact(&hosts, &views, &args));
        return ExitCode::from(1);
    }
    // `since` on the monotonic clock the sync state is kept in: the same moment, as far back
    // from now on that clock as on the wall clock.
    let synced_after = if args.resynced {
        let back_ms = ((unix_now() - since) * 1e3).max(0.0) as u64;
        monotonic_ms().saturating_sub(back_ms)
    } else {
        0
    };
    // Each poll starts with the host that was off at the last: most likely off still, so that a
    // poll that fails costs a lookup or two. Every view is exact when a poll reads every host's
    // every counter and finds nothing off (that poll, and only it, reads all of them).
    let mut first = 0;
    let (mut polls, mut most) = (0u32, Duration::ZERO);
    loop {
        let started = Instant::now();
        let polled_at = unix_now();
        let now = polled_at as u64;
        let mut off = None;
        let mut own_off = None;
        // The sync states first: a fraction of a microsecond each.
        if let Some(stale) =
            (0..hosts.len()).map(|i| (first + i) % hosts.len()).find(|&i| !fresh(&hosts[i], synced_after))
        {
            off = Some(stale);
        } else {
            for i in (0..hosts.len()).map(|i| (first + i) % hosts.len()) {
                let view = view(&hosts[i], &keys, &args, now, synced_after, Pass::UntilOff);
                if view.own_off.is_some() {
                    own_off = Some((i, view));
                    break;
                }
                if !view.exact() {
                    off = Some(i);
                    break;
                }
            }
        }
        (polls, most) = (polls + 1, most.max(started.elapsed()));
        let cost = || format!("{polls} polls, the longest {:.1} ms", most.as_secs_f64() * 1e3);
        if let Some((i, view)) = own_off {
            let line = own_counts_off(&hosts[i..=i], std::slice::from_ref(&view), args.expect_own);
            eprintln!("fleet_views: {}", line.unwrap_or_default());
            return ExitCode::from(3);
        }
        let Some(off) = off else {
            // Every view was exact when it was read, the last at the end of this poll: a poll that
            // reads every counter takes a while, longer still when the sidecars leave it little
            // of the CPU.
            let done = unix_now();
            println!(
                "exact after {:.2} s ({} hosts, {} services; the last poll read every counter in {:.2} s; {})",
                done - since,
                hosts.len(),
                args.services,
                done - polled_at,
                cost()
            );
            return ExitCode::SUCCESS;
        };
        first = off;
        if Instant::now() >= deadline {
            // What is off, in full: read once, at the end.
            let waited = unix_now() - since;
            let now = unix_now() as u64;
            let views: Vec<View> =
                hosts.iter().map(|host| view(host, &keys, &args, now, synced_after, Pass::Full)).collect();
            println!("not exact after {waited:.2} s: {} ({})", not_exact(&hosts, &views, &args), cost());
            if let Some(line) = own_counts_off(&hosts, &views, args.expect_own) {
                eprintln!("fleet_views: {line}");
                return ExitCode::from(3);
            }
            return ExitCode::from(1);
        }
        std::thread::sleep(POLL);
    }
}
