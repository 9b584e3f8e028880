//! ganesha-shm-fleet: the fleet sidecar. Attaches to this host's segment file (the
//! `ganesha_shm.path` of PHP running with `ganesha_shm.fleet=1`) and, every interval, syncs it
//! with the fleet's Redis (see `sync`). Requests never wait on it: PHP reads what the last sync
//! wrote, and decides alone once that is two intervals old.
//!
//! One line on stderr per event. Exit status: 0 after SIGTERM or SIGINT, 2 on a configuration
//! error (the message says which), 1 when the segment cannot be used in fleet mode.


use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ganesha_shm_core::fleet::host_id_text;
use ganesha_shm_core::fleet::{monotonic_ms, SyncState};
use ganesha_shm_core::segment::{guard, Refusal, Segment};
use ganesha_shm_core::store::{Layout, Store};

use ganesha_shm_fleet::config::{self, Command, Config};
use ganesha_shm_fleet::link::RedisLink;
use ganesha_shm_fleet::man;
use ganesha_shm_fleet::sync::{self, Syncer};

/// Set by SIGTERM and SIGINT.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop(_: libc::c_int) {
    // Relaxed: the main loop only needs to see it eventually; a store is async-signal-safe.
    STOP.store(true, Ordering::Relaxed);
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let config = match config::parse(&args, |path| std::fs::read_to_string(path).map_err(|e| e.to_string()), hostname) {
        Ok(Command::Run(config)) => config,
        Ok(Command::Man) => {
            print!("{}", man::page());
            return ExitCode::SUCCESS;
        }
        Ok(Command::Help) => {
            print!("{}", config::usage());
            return ExitCode::SUCCESS;
        }
        Ok(Command::Version) => {
            println!("ganesha-shm-fleet {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        Err(error) => {
            log(&format!("configuration error: {error}"));
            return ExitCode::from(2);
        }
    };
    for signal in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: `on_stop` only stores to an atomic, which is async-signal-safe.
        unsafe { libc::signal(signal, on_stop as *const () as libc::sighandler_t) };
    }
    log(&format!(
        "started: fleet {}, host {}, segment {}, redis {}, every {} ms",
        config.fleet,
        config.host,
        config.segment.display(),
        config.redis_for_log(),
        config.interval.as_millis()
    ));
    run(config)
}

/// The segment file as attached, with what identifies the file (to notice it replaced), and the
/// file held open under this sidecar's lock.
struct Attached {
    segment: Segment,
    file: (u64, u64),
    _locked: std::fs::File,
}

/// The segment file at `path`, opened and locked (`flock`, exclusive) for this sidecar alone:
/// `None` while another sidecar holds it. Two sidecars on one segment would take each other's
/// calls for a copy's (see `Syncer::renew`); a copy of the file is another file, with a lock of
/// its own.
fn lock(path: &std::path::Path) -> std::io::Result<Option<std::fs::File>> {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::open(path)?;
    // SAFETY: the descriptor is open, and owned by `file` for the call.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(Some(file));
    }
    let error = std::io::Error::last_os_error();
    if error.kind() == std::io::ErrorKind::WouldBlock { Ok(None) } else { Err(error) }
}

fn attach(config: &Config, last_refusal: &mut Option<String>) -> Result<Option<Attached>, ExitCode> {
    // The most the file may grant: what ganesha_shm.mode may, since the sidecar has no mode
    // of its own (`Segment::attach_file` checks the owner, the group and the path).
    match Segment::attach_file(&config.segment, Layout::regions, 0o775) {
        Ok(segment) if !segment.layout().settings.fleet => {
            log(&format!(
                "{} was made without fleet mode: start PHP with ganesha_shm.fleet=1 (and remove the file)",
                config.segment.display()
            ));
            Err(ExitCode::from(1))
        }
        Ok(segment) => {
            let locked = match lock(&config.segment) {
                Ok(Some(locked)) => locked,
                result => {
                    let why = result.err().map_or("another sidecar syncs it".to_string(), |error| error.to_string());
                    let line = format!("cannot attach to {}: {why} (one sidecar a segment)", config.segment.display());
                    if last_refusal.as_ref() != Some(&line) {
                        log(&line);
                        *last_refusal = Some(line);
                    }
                    return Ok(None);
                }
            };
            let file = locked.metadata().map(|m| (m.dev(), m.ino())).unwrap_or_default();
            guard::install(&segment);
            log(&format!(
                "attached to {} ({}); this host's id in the fleet: {}",
                config.segment.display(),
                segment.layout().settings,
                host_id_text(segment.fleet_host_id())
            ));
            *last_refusal = None;
            Ok(Some(Attached { segment, file, _locked: locked }))
        }
        Err(refusal) => {
            let line = match refusal {
                Refusal::Missing => format!("waiting for {}: {refusal}", config.segment.display()),
                refusal => format!("cannot attach to {}: {refusal}", config.segment.display()),
            };
            if last_refusal.as_ref() != Some(&line) {
                log(&line);
                *last_refusal = Some(line);
            }
            Ok(None)
        }
    }
}

fn run(config: Config) -> ExitCode {
    let interval = config.interval;
    let mut syncer = Syncer::new(config.clone());
    let mut attached: Option<Attached> = None;
    let mut last_refusal = None;
    let mut link: Option<RedisLink> = None;
    // The Sentinel to ask first: the one that last named the master.
    let mut sentinel_first = 0;
    let mut retry = Retry::new(interval);
    let mut events = Events::default();
    let mut eviction = Eviction::default();
    let mut synced: u64 = 0;
    // The segment's id in the fleet after the last sync, while it stays attached.
    let mut known_id: Option<u64> = None;
    let mut next = Instant::now();
    while !STOP.load(Ordering::Relaxed) {
        sleep_until(next);
        if STOP.load(Ordering::Relaxed) {
            break;
        }
        let started = Instant::now();
        next = started + interval;
        // A file replaced at the path (PHP restarted after it was removed) is attached again, and
        // so is one truncated under the mapping, which the guard replaced by zeroed memory.
        if let Some(current) = &attached {
            let file = std::fs::metadata(&config.segment).map(|m| (m.dev(), m.ino())).ok();
            let truncated = guard::take_loss();
            if truncated || file != Some(current.file) {
                let what = if truncated { "was truncated under its mapping" } else { "was replaced or removed" };
                log(&format!("{} {what}: attaching again", config.segment.display()));
                SyncState::clear(current.segment.fleet_words());
                // The guard goes with the mapping; the next one is guarded afresh.
                guard::uninstall();
                attached = None;
                known_id = None;
                syncer.forget();
            }
        }
        if attached.is_none() {
            match attach(&config, &mut last_refusal) {
                Ok(Some(segment)) => attached = Some(segment),
                Ok(None) => continue,
                Err(status) => return status,
            }
        }
        let Some(Attached { segment, file, .. }) = &attached else { continue };
        let id = segment.fleet_host_id();
        if let Some(known) = known_id.filter(|&known| known != id) {
            // A PHP process took the segment as a copy of another (`fleet::take_copy`).
            log(&format!(
                "this host's id in the fleet is {} from now on (was {}): a process took the segment as a copy of another segment file",
                host_id_text(id),
                host_id_text(known)
            ));
        }
        syncer.attached(id);
        syncer.attached_file(*file);
        let store = Store::new(segment);
        let words = segment.fleet_words();
        let state = SyncState::read(words);
        if link.is_none() {
            match RedisLink::connect(&config, sync::SCRIPT, &mut sentinel_first) {
                Ok(connected) => {
                    // Once, not at each retry of a run of failed syncs: "resumed" ends the run.
                    // A master a Sentinel named is said each time: a failover moves it.
                    match &connected.master {
                        Some(master) => log(&format!("connected to {master}, {}", config.redis_for_log())),
                        None if retry.failures == 0 => log(&format!("connected to {}", config.redis_for_log())),
                        None => {}
                    }
                    if let Some(line) = eviction.noticed(&connected.memory) {
                        log(&line);
                    }
                    link = Some(connected);
                    // Redis may have restarted empty, or failed over, meanwhile: each shard's
                    // birth tells at its next call.
                    syncer.reconnected();
                }
                Err(error) => {
                    let line = format!("cannot connect to {}: {}", config.redis_for_log(), explained(&error));
                    next = started + retry.failed(&line, words, state);
                    continue;
                }
            }
        }
        let cpu = cpu_time();
        let result = syncer.sync(link.as_mut().expect("connected above"), segment, &store, unix_time_ms(), monotonic_ms());
        known_id = Some(segment.fleet_host_id());
        match result {
            Ok(report) if report.renewed.is_some() => {
                // A copy found, and an id of its own taken: the next sync, at once, under it.
                events.report(&config, &report);
                next = started;
            }
            Ok(report) if !report.complete => {
                // Some shards did not sync (Redis out of memory, or refusing this host's calls as
                // late): their services' counts are not refreshed, so none decides.
                events.report(&config, &report);
                let line = format!("could not sync with {}: {}", config.redis_for_log(), incomplete(&report));
                next = started + retry.failed(&line, words, state);
            }
            Ok(report) => {
                if let Some(limit) = config.syncs {
                    synced += 1;
                    println!(
                        "sync {synced}: {} round trips, {} buckets published ({} past every window), {} shards published again, {} recounted, {} services, {} hosts, {} written, {:.1} ms, {:.1} ms of CPU",
                        report.round_trips,
                        report.published,
                        report.gone,
                        report.lost_shards,
                        report.recounted,
                        report.services,
                        report.hosts,
                        report.written,
                        started.elapsed().as_secs_f64() * 1e3,
                        (cpu_time() - cpu).as_secs_f64() * 1e3
                    );
                    if synced >= limit {
                        STOP.store(true, Ordering::Relaxed);
                    }
                }
                SyncState {
                    synced_at_ms: monotonic_ms(),
                    interval_ms: interval.as_millis() as u64,
                    hosts: report.hosts as u64,
                    errors: state.errors,
                }
                .write(words);
                let failures = retry.succeeded();
                if failures > 0 {
                    log(&format!(
                        "resumed after {failures} failed syncs: {} hosts, {} services",
                        report.hosts, report.services
                    ));
                }
                events.report(&config, &report);
                // What the sync freed (the buckets that left every window, with every name in
                // them) goes back to the system: names that churn leave no high-water mark.
                // SAFETY: malloc_trim only walks this process's own heap, under malloc's lock.
                unsafe { libc::malloc_trim(0) };
            }
            Err(error) => {
                let what = if refused(&error) { "refused by" } else { "lost" };
                // The state of a connection whose reply timed out is not known: a new one.
                let line = format!("{what} {}: {}", config.redis_for_log(), explained(&error));
                next = started + retry.failed(&line, words, state);
                link = None;
            }
        }
    }
    if let Some(Attached { segment, .. }) = &attached {
        // PHP decides alone from now on, rather than on counts no one refreshes.
        SyncState::clear(segment.fleet_words());
    }
    log("stopping: the fleet's counts no longer decide on this host");
    ExitCode::SUCCESS
}

/// Why a sync did not sync every shard, in words.
fn incomplete(report: &sync::Report) -> String {
    let mut why = Vec::new();
    if !report.unwritten.is_empty() {
        why.push(format!(
            "Redis could not write {} (out of memory, evicting nothing: raise maxmemory, or see docs/fleet.md, \"Redis's memory\")",
            report.unwritten.join(", ")
        ));
    }
    if report.lost_shards > 0 {
        why.push("Redis lost shards again while they were published".to_string());
    }
    if report.copy_being_taken {
        why.push("a process is taking the segment as a copy of another segment file".to_string());
    }
    if why.is_empty() {
        why.push("some shards did not sync".to_string());
    }
    why.join("; ")
}

/// What was said of Redis's memory policy, so that it is said once, and again only when it
/// changes (a failover to a server set otherwise).
#[derive(Default)]
struct Eviction {
    said: Option<ganesha_shm_fleet::link::Memory>,
}

impl Eviction {
    /// The line to log for `memory`, once: where Redis may evict the fleet's keys when full.
    fn noticed(&mut self, memory: &Option<ganesha_shm_fleet::link::Memory>) -> Option<String> {
        let memory = memory.as_ref()?;
        if self.said.as_ref() == Some(memory) {
            return None;
        }
        self.said = Some(memory.clone());
        if memory.maxmemory == 0 || memory.policy == "noeviction" {
            return None;
        }
        let how = if memory.policy.starts_with("volatile") {
            "it evicts keys with a lifetime, and every key of the fleet has one: the fleet's shards go before keys kept for ever"
        } else {
            "it evicts the keys it picks, the fleet's shards among them"
        };
        Some(format!(
            "Redis evicts keys when it reaches maxmemory ({} bytes, maxmemory-policy {}): {how}; a shard evicted is published again by every host at its next sync, and counts are short meanwhile (docs/fleet.md, \"Redis's memory\")",
            memory.maxmemory, memory.policy
        ))
    }
}

/// What Redis or the connection said, with what to do where the error alone does not say it.
fn explained(error: &redis::RedisError) -> String {
    let text = error.to_string();
    if refused(error) {
        let first = first_refusal(&text);
        format!("{first} (the ACL user lacks a right fleet mode needs: docs/fleet.md, \"ACL users\", gives the rule)")
    } else if text.contains("invalid peer certificate") {
        // rustls's reasons, in words.
        let why = [
            ("UnknownIssuer", ": it is not signed by a CA this host trusts (the system's, or --tls-ca-file's)"),
            ("certificate expired", ": it has expired"),
            ("certificate not valid yet", ": it is not valid yet (or this host's clock is behind)"),
            ("NotValidForName", ": it does not name the host of the URL"),
            ("not valid for name", ": it does not name the host of the URL"),
        ]
        .iter()
        .find(|(reason, _)| text.contains(reason))
        .map_or("", |(_, why)| why);
        format!("TLS: the server's certificate does not verify{why} ({text})")
    } else if error.is_timeout() {
        "no reply within the command timeout (--command-timeout-ms): Redis is hung, overloaded, or unreachable"
            .to_string()
    } else if text.contains("close_notify") {
        // rustls's words for a TLS server gone (killed, or its connection cut), with a link.
        "the server closed the TLS connection".to_string()
    } else if text.contains("CertificateRequired") {
        format!("TLS: the server requires a client certificate (--tls-cert-file, --tls-key-file) ({text})")
    } else {
        text
    }
}

/// The first refusal of `text` alone: a pipeline reports one per script call, each naming the
/// right (the script's "fleet mode needs the right +zadd, on the keys of its fleet such as …"),
/// and Redis's own "no permissions to run the 'zadd' command" for a command beside the script.
fn first_refusal(text: &str) -> &str {
    let Some(refusal) = ["fleet mode needs the right", "no permissions"]
        .iter()
        .find_map(|start| text.find(start).map(|at| &text[at..]))
    else {
        return text;
    };
    let end = [" script: ", ")", "\n"].iter().filter_map(|end| refusal.find(end)).min().unwrap_or(refusal.len());
    &refusal[..end]
}

/// Whether Redis refused a command to the ACL user (the script says which right it lacks).
fn refused(error: &redis::RedisError) -> bool {
    error.code() == Some("NOPERM") || error.to_string().contains("NOPERM")
}

/// The events a sync reports, logged once each: what another host or anyone who can write
/// Redis causes is also rate-limited, and what is remembered to log it once is bounded.
#[derive(Default)]
struct Events {
    /// What was logged once already: namesakes, services of other durations, refused keys.
    logged: HashSet<Vec<u8>>,
    /// Whether the clock-ahead line was logged, since the last sync that shared every bucket.
    ahead_logged: bool,
    /// Whether the line on a fleet-only region too small was logged, since the last sync whose
    /// region held every service.
    fleet_only_full_logged: bool,
    limiter: Limiter,
}

/// What `Events` remembers at the most; past it, nothing new is logged.
const EVENTS_REMEMBERED: usize = 10_000;

impl Events {
    /// Whether `what` was not logged yet (and is now remembered).
    fn first(&mut self, what: Vec<u8>) -> bool {
        self.logged.len() < EVENTS_REMEMBERED && self.logged.insert(what)
    }

    fn report(&mut self, config: &Config, report: &sync::Report) {
        if report.lost_shards > 0 {
            // Anyone who can write Redis can flush it, and an eviction is not this host's doing:
            // rate-limited.
            self.limiter.log(&format!(
                "Redis lost what this host published in {} of its shards (evicted, flushed, or a failover): published again",
                report.lost_shards
            ));
        }
        if let Some((old, new)) = report.copy_taken {
            log(&format!(
                "{} is a copy of another segment file (of an image, a snapshot or a restore): this host is {} in the fleet from now on, and reads what the segment held as the fleet's, under the old id {}",
                config.segment.display(),
                host_id_text(new),
                host_id_text(old)
            ));
        }
        if let Some((old, new)) = report.renewed {
            // Once per copy found: each finds it once, and takes an id no other segment has.
            log(&format!(
                "another segment runs under this host's id {} (a copy of this segment in its own file: an older copy restored in place, or a disk cloned whole): this host is {} in the fleet from now on, and reads what the segment held as the fleet's, under the old id",
                host_id_text(old),
                host_id_text(new)
            ));
        }
        for id in &report.namesakes {
            if self.first([b"name ", id.as_bytes()].concat()) {
                log(&format!(
                    "another host runs under the name \"{}\" (id {id}): the two are counted apart; give each host a name of its own",
                    config.host
                ));
            }
        }
        for (service, theirs, ours) in &report.other_durations {
            if self.first([&b"duration "[..], service, format!(" {theirs}").as_bytes()].concat()) {
                let line = format!(
                    "service \"{}\": other hosts count it in buckets of {theirs} s, this host in buckets of {ours} s (another time window, as in a rolling deploy); each group shares its own counts",
                    String::from_utf8_lossy(service)
                );
                self.limiter.log(&line);
            }
        }
        if report.fleet_only_left_out > 0 && !self.fleet_only_full_logged {
            // Whoever can write Redis can name services: rate-limited, and once until the region
            // holds all again.
            self.fleet_only_full_logged = true;
            self.limiter.log(&format!(
                "the fleet counts {} services this host has not counted, more than its segment holds for them (the ganesha_shm.max_services of its segment): it sees the {} in the most trouble, and decides alone for the others",
                report.fleet_only + report.fleet_only_left_out,
                report.fleet_only
            ));
        } else if report.fleet_only_left_out == 0 {
            self.fleet_only_full_logged = false;
        }
        if report.rejected > 0 && !self.ahead_logged {
            self.ahead_logged = true;
            let (seconds, way) = match report.clock_ahead_s {
                ahead @ 0.. => (ahead, "ahead of"),
                behind => (-behind, "behind"),
            };
            log(&format!(
                "this host's clock is {seconds} s {way} Redis's, more than the bound of {} s: {} buckets were not shared",
                ganesha_shm_core::fleet::CLOCK_BOUND_S,
                report.rejected
            ));
        } else if report.rejected == 0 {
            self.ahead_logged = false;
        }
        // Data anyone who can write Redis may put there: rate-limited, each key once.
        for key in &report.foreign {
            if self.first([&b"foreign "[..], key].concat()) {
                self.limiter.log(&format!(
                    "skipped the shard \"{}\": the key is not a hash, so not ganesha-shm's (its services decide alone)",
                    String::from_utf8_lossy(key)
                ));
            }
        }
        if !report.resets_taken.is_empty() {
            // Another host's reset: an operator's act, which anyone who can write Redis can feign.
            let names: Vec<_> =
                report.resets_taken.iter().take(5).map(|s| format!("\"{}\"", String::from_utf8_lossy(s))).collect();
            let more = report.resets_taken.len().saturating_sub(names.len());
            self.limiter.log(&format!(
                "another host reset {}{}: what this host counted of each before the reset is taken back",
                names.join(", "),
                if more > 0 { format!(" and {more} more services") } else { String::new() }
            ));
        }
        if report.recounted > 0 {
            self.limiter.log(&format!(
                "recounted {} sums from every host's counts: they were lost, or not counts (written by someone else)",
                report.recounted
            ));
        }
        for (key, rows) in &report.bad_rows {
            if self.first([&b"rows "[..], key].concat()) {
                self.limiter.log(&format!(
                    "skipped {rows} rows or fields of \"{}\" that are not counts",
                    String::from_utf8_lossy(key)
                ));
            }
        }
        for (key, why) in &report.refused {
            if self.first([&b"refused "[..], key].concat()) {
                self.limiter.log(&format!(
                    "the segment refused the fleet's counts of {:?}: {why}",
                    String::from_utf8_lossy(key)
                ));
            }
        }
        self.limiter.tick();
    }
}

/// At most `Limiter::LINES` lines a minute of what strangers can cause; the rest counted, and
/// said in one line when the minute is over.
#[derive(Default)]
struct Limiter {
    minute: Option<Instant>,
    lines: u32,
    suppressed: u64,
}

impl Limiter {
    const LINES: u32 = 10;

    fn log(&mut self, line: &str) {
        self.tick();
        self.minute.get_or_insert_with(Instant::now);
        if self.lines < Self::LINES {
            self.lines += 1;
            log(line);
        } else {
            self.suppressed += 1;
        }
    }

    /// Starts a new minute once the last is over, saying what it suppressed.
    fn tick(&mut self) {
        if self.minute.is_some_and(|started| started.elapsed() >= Duration::from_secs(60)) {
            if self.suppressed > 0 {
                log(&format!("{} more lines like these suppressed in the last minute", self.suppressed));
            }
            *self = Self::default();
        }
    }
}

/// Failed syncs in a row, and the wait before the next attempt: from 100 ms, doubling up to one
/// interval, so that the view is back within two intervals of Redis answering again; each wait
/// drawn between half and all of that, so that a fleet whose Redis came back does not reconnect
/// and republish in step.
struct Retry {
    failures: u64,
    backoff: Duration,
    interval: Duration,
    /// xorshift64's state, seeded from the pid and the clock.
    random: u64,
}

impl Retry {
    fn new(interval: Duration) -> Self {
        let seed = u64::from(std::process::id()) << 32
            ^ SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().subsec_nanos() as u64;
        Self { failures: 0, backoff: Self::first(interval), interval, random: seed | 1 }
    }

    /// A number in [0, 1).
    fn draw(&mut self) -> f64 {
        self.random ^= self.random << 13;
        self.random ^= self.random >> 7;
        self.random ^= self.random << 17;
        (self.random >> 11) as f64 / (1u64 << 53) as f64
    }

    fn first(interval: Duration) -> Duration {
        Duration::from_millis(100).min(interval)
    }

    /// A failed sync: logged when it is the first of a run, counted in the header's error
    /// total (`state` as read before it) every time. The wait before the next attempt.
    fn failed(&mut self, line: &str, words: &[std::sync::atomic::AtomicU64], state: SyncState) -> Duration {
        if self.failures == 0 {
            log(&format!("{line}; hosts decide alone until it is back"));
        }
        self.failures += 1;
        SyncState { errors: state.errors + 1, ..state }.write(words);
        let wait = self.backoff.mul_f64(0.5 + self.draw() / 2.0);
        self.backoff = (self.backoff * 2).min(self.interval);
        wait
    }

    /// A sync that worked: how many had failed in a row before it.
    fn succeeded(&mut self) -> u64 {
        self.backoff = Self::first(self.interval);
        std::mem::take(&mut self.failures)
    }
}

fn sleep_until(deadline: Instant) {
    while !STOP.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        std::thread::sleep((deadline - now).min(Duration::from_millis(50)));
    }
}

/// The CPU time this process used, user and system.
fn cpu_time() -> Duration {
    // SAFETY: getrusage fills the zeroed struct it is given; RUSAGE_SELF always exists.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    time(usage.ru_utime) + time(usage.ru_stime)
}

fn unix_time_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_millis() as u64)
}

fn hostname() -> Option<String> {
    let mut name = [0u8; 256];
    // SAFETY: the buffer is writable for its whole length, which is what gethostname is told.
    let status = unsafe { libc::gethostname(name.as_mut_ptr().cast(), name.len()) };
    if status != 0 {
        return None;
    }
    let length = name.iter().position(|&byte| byte == 0).unwrap_or(name.len());
    String::from_utf8(name[..length].to_vec()).ok().filter(|name| !name.is_empty())
}

/// One line on stderr: the UTC time, the program and its pid, the event.
fn log(line: &str) {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let (seconds, millis) = (now.as_secs(), now.subsec_millis());
    let (days, time) = (seconds / 86_400, seconds % 86_400);
    let (year, month, day) = civil_date(days as i64);
    eprintln!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z ganesha-shm-fleet[{}]: {line}",
        time / 3600,
        time / 60 % 60,
        time % 60,
        std::process::id()
    );
}

/// The (year, month, day) of a day counted from 1970-01-01 (Howard Hinnant's algorithm).
fn civil_date(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (year_of_era + era * 400 + i64::from(month <= 2), month, day)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_refusal_is_said_once_with_the_right_it_lacks() {
        let pipeline = "Pipeline failures: [(Index 0, error: NoPerm: fleet mode needs the right +hset, on the keys of \
                        its fleet such as ganesha-shm:4:{shop:1} script: 5ed9, on @user_script:102.), (Index 1, \
                        error: NoPerm: fleet mode needs the right +hset, on the keys of its fleet such as \
                        ganesha-shm:4:{shop:4} script: 5ed9)]";
        assert_eq!(
            super::first_refusal(pipeline),
            "fleet mode needs the right +hset, on the keys of its fleet such as ganesha-shm:4:{shop:1}"
        );
        let beside =
            "Pipeline failure: [(Index 5, error: NoPerm: this user has no permissions to run the 'zadd' command)]";
        assert_eq!(super::first_refusal(beside), "no permissions to run the 'zadd' command");
        assert_eq!(super::first_refusal("something else"), "something else");
    }

    #[test]
    fn an_eviction_policy_is_said_once_where_it_can_evict_the_fleets_keys() {
        use ganesha_shm_fleet::link::Memory;
        let memory = |maxmemory: u64, policy: &str| Some(Memory { maxmemory, policy: policy.to_string() });
        let mut eviction = super::Eviction::default();
        assert_eq!(eviction.noticed(&None), None, "INFO refused: nothing said");
        assert_eq!(eviction.noticed(&memory(0, "allkeys-lru")), None, "no limit: nothing evicted");
        assert_eq!(eviction.noticed(&memory(1 << 20, "noeviction")), None);
        let line = eviction.noticed(&memory(1 << 20, "allkeys-lru")).unwrap();
        assert!(line.contains("1048576 bytes, maxmemory-policy allkeys-lru"), "{line}");
        assert_eq!(eviction.noticed(&memory(1 << 20, "allkeys-lru")), None, "once");
        let line = eviction.noticed(&memory(1 << 20, "volatile-ttl")).unwrap();
        assert!(line.contains("the fleet's shards go before keys kept for ever"), "{line}");
    }

    #[test]
    fn retries_wait_between_half_and_all_of_the_backoff() {
        let words: Vec<std::sync::atomic::AtomicU64> = (0..3).map(|_| Default::default()).collect();
        let mut retry = super::Retry::new(std::time::Duration::from_secs(1));
        let mut waits = Vec::new();
        for _ in 0..200 {
            waits.push(retry.failed("lost", &words, Default::default()));
            retry.succeeded();
        }
        let (least, most) = (waits.iter().min().unwrap(), waits.iter().max().unwrap());
        assert!(least.as_millis() >= 50 && most.as_millis() <= 100, "{least:?} to {most:?}");
        assert!(most.as_millis() - least.as_millis() >= 25, "drawn, not in step: {least:?} to {most:?}");
    }

    #[test]
    fn dates_are_the_calendar_s() {
        assert_eq!(super::civil_date(0), (1970, 1, 1));
        assert_eq!(super::civil_date(20_423), (2025, 12, 1));
        assert_eq!(super::civil_date(11_016), (2000, 2, 29));
    }
}
