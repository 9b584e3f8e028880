//! One history of a simulated fleet, played from its seed: the hosts, the steps the seed
//! chooses, the faults, and the checks after every step.

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::sync::atomic::Ordering;

use ganesha_shm_core::fleet::{self, SyncState, SHARDS};
use ganesha_shm_core::segment::{Segment, Settings};
use ganesha_shm_core::store::{FleetWindow, Layout, Store, TableKind};
use ganesha_shm_core::window::Window;
use ganesha_shm_fleet::config::{self, Command, Config};
use ganesha_shm_fleet::sync::Syncer;

use crate::link::{LinkFault, Server, SimLink};
use crate::truth::{Grant, Truth, COUNTERS};

/// The sidecars' sync interval.
const INTERVAL_MS: u64 = 1_000;
/// Every host's window: longer than any history, so that every event of one is in it.
const TIME_WINDOW_S: i64 = 600;
const BUCKET_S: u64 = 10;
const MAX_BUCKETS: u64 = 60;
/// Ganesha's intervalToHalfOpen.
const HALF_OPEN_S: u64 = 5;
const PREFIX: &str = "ganesha_";
/// The fleet's services at any time: slots whose names churn.
const SLOTS: u64 = 5;
/// The first services, whose circuits are open: their hosts ask for the half-open trial.
const TRIAL_SLOTS: u64 = 2;
/// Where every history starts on Redis's clock: the same on every machine.
const START_MS: u64 = 1_900_000_000_000;
/// How far a host's clock may be from Redis's: within the sidecar's bound of 60 s.
const MAX_SKEW_MS: i64 = 45_000;
/// The fleet's name in Redis.
const FLEET: &str = "sim";

/// What a history is made of.
pub struct Plan {
    pub seed: u64,
    pub hosts: usize,
    pub steps: usize,
    /// No clock steps (`--steady-clocks`): every other fault.
    pub steady_clocks: bool,
}

impl Plan {
    /// The plan of `seed`: 3 to 12 hosts unless `hosts` says.
    pub fn of(seed: u64, hosts: Option<usize>, steps: usize, steady_clocks: bool) -> Self {
        let mut rng = Rng::new(seed ^ 0x9e37_79b9_7f4a_7c15);
        Self { seed, hosts: hosts.unwrap_or_else(|| 3 + rng.below(10) as usize), steps, steady_clocks }
    }
}

pub enum Outcome {
    Held { steps: u64, checks: u64, history: Vec<String> },
    Broke { history: Vec<String>, invariant: String },
}

/// SplitMix64: the same numbers from a seed on every machine.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// From 0 to `n` - 1.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// True `per_mille` times in a thousand.
    pub fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }

    /// A whole number from `low` to `high`.
    pub fn between(&mut self, low: i64, high: i64) -> i64 {
        low + self.below((high - low + 1) as u64) as i64
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sidecar {
    Up,
    /// Down until then (Redis's clock); `stopped` cleared its sync state on the way out, a
    /// sidecar killed did not.
    Down { until_ms: u64 },
}

struct Host {
    name: String,
    segment: Segment,
    syncer: Syncer,
    link: SimLink,
    config: Config,
    /// How far its clock is ahead of Redis's.
    skew_ms: i64,
    /// When its machine booted (Redis's clock): its monotonic clock counts from then. A copy of a
    /// segment goes to another machine, booted at another time.
    booted_ms: u64,
    sidecar: Sidecar,
    next_sync_ms: u64,
    /// The file its segment is in (device, inode).
    file: (u64, u64),
    /// The events its segment holds.
    held: BTreeSet<usize>,
    /// A copy of its segment, to restore, and the events it held.
    snapshot: Option<(Vec<u64>, BTreeSet<usize>)>,
    /// By service: when it began rejecting requests (its circuit open), and when it last did.
    rejecting: BTreeMap<String, (u64, u64)>,
    /// When its sidecar last completed a sync (Redis's clock, ms).
    synced_ms: u64,
    /// The events its segment held when it was copied from another, or restored from an older
    /// copy, and when: the old id's to publish, which Redis may lose for good.
    inherited: BTreeSet<usize>,
    inherited_at_ms: u64,
    /// Whether its segment file was restored in place from an older copy and its sidecar has not
    /// found it yet (only Redis can tell: the file is the one it records), and the events it
    /// counted meanwhile: the old id's, which no segment publishes (the later self that would is
    /// gone), lost as docs/fleet.md says.
    restored_unfound: bool,
    unpublished: BTreeSet<usize>,
    /// Who its resets are, to the truth: its index, until its segment is restored from a copy
    /// older than some of them (they are no longer in it).
    resetter: usize,
}

impl Host {
    fn local_ms(&self, now_ms: u64) -> u64 {
        now_ms.saturating_add_signed(self.skew_ms)
    }

    fn monotonic_ms(&self, now_ms: u64) -> u64 {
        now_ms - self.booted_ms
    }

    fn restart_sidecar(&mut self) {
        self.syncer = Syncer::new(self.config.clone());
        self.sidecar = Sidecar::Up;
    }
}

fn settings() -> Settings {
    Settings { max_services: 64, max_key_length: 64, max_buckets: MAX_BUCKETS, fleet: true }
}

fn config_of(name: &str) -> Config {
    let args: Vec<String> =
        ["--segment", "/simulated", "--redis", "redis://127.0.0.1:1", "--fleet", FLEET, "--host", name, "--interval-ms", "1000"]
            .iter()
            .map(|arg| arg.to_string())
            .collect();
    match config::parse(&args, |_| Err("no file".into()), || None) {
        Ok(Command::Run(config)) => config,
        _ => panic!("the simulation's sidecar settings are refused"),
    }
}

struct World<'s> {
    server: &'s Rc<Server>,
    rng: Rng,
    hosts: Vec<Option<Host>>,
    truth: Truth,
    history: Vec<String>,
    window: Window,
    /// By slot, its name's generation: a churn gives the slot a new name.
    generations: [u64; SLOTS as usize],
    /// Copies of shards (key, DUMP, whether the key was of another type then), to restore.
    dumps: Vec<(Vec<u8>, Vec<u8>, bool)>,
    /// Shard keys of another type, set by the simulation.
    foreign: BTreeSet<Vec<u8>>,
    /// When Redis last lost data (FLUSHALL, a shard deleted or restored to an older copy).
    lost_ms: u64,
    next_inode: u64,
    checks: u64,
    steady_clocks: bool,
}

type Broken = String;

pub fn play(server: &Rc<Server>, plan: &Plan) -> Outcome {
    let mut world = World {
        server,
        rng: Rng::new(plan.seed),
        hosts: Vec::new(),
        truth: Truth::default(),
        history: Vec::new(),
        window: Window::new(TIME_WINDOW_S, Some(BUCKET_S), MAX_BUCKETS).expect("a window"),
        generations: [0; SLOTS as usize],
        dumps: Vec::new(),
        foreign: BTreeSet::new(),
        lost_ms: 0,
        next_inode: 1,
        checks: 0,
        steady_clocks: plan.steady_clocks,
    };
    server.time_ms.set(START_MS);
    let ready = [redis::cmd("FLUSHALL"), redis::cmd("CONFIG").arg("SET").arg("maxmemory").arg("0").to_owned()];
    for command in &ready {
        if let Err(error) = server.command(command) {
            return Outcome::Broke { history: Vec::new(), invariant: format!("the server refused {command:?}: {error}") };
        }
    }
    let _ = server.load_script();
    world.note(format!("seed {}: {} hosts, {} steps", plan.seed, plan.hosts, plan.steps));
    for _ in 0..plan.hosts {
        world.join();
    }
    let faulty = plan.steps * 17 / 20;
    for step in 0..plan.steps {
        let result = world.step(step < faulty).and_then(|()| world.check_views(false));
        if let Err(invariant) = result {
            return Outcome::Broke { history: world.history, invariant };
        }
    }
    match world.settle() {
        Ok(()) => Outcome::Held { steps: plan.steps as u64, checks: world.checks, history: world.history },
        Err(invariant) => Outcome::Broke { history: world.history, invariant },
    }
}

impl World<'_> {
    fn now(&self) -> u64 {
        self.server.time_ms.get()
    }

    fn note(&mut self, what: String) {
        let at = self.now().saturating_sub(START_MS) as f64 / 1000.0;
        self.history.push(format!("{:>4} {at:>7.3}s {what}", self.history.len()));
    }

    fn service(&self, slot: u64) -> String {
        format!("{PREFIX}s{slot}g{}", self.generations[slot as usize])
    }

    fn alive(&self) -> Vec<usize> {
        (0..self.hosts.len()).filter(|&i| self.hosts[i].is_some()).collect()
    }

    fn pick_host(&mut self) -> usize {
        let alive = self.alive();
        alive[self.rng.below(alive.len() as u64) as usize]
    }

    fn host(&mut self, i: usize) -> &mut Host {
        self.hosts[i].as_mut().expect("a live host")
    }

    fn new_host(&mut self, segment: Segment, held: BTreeSet<usize>) -> usize {
        let index = self.hosts.len();
        let name = format!("h{index}");
        let config = config_of(&name);
        let file = (1, self.next_inode);
        self.next_inode += 1;
        let skew_ms = self.rng.between(-MAX_SKEW_MS, MAX_SKEW_MS);
        let next_sync_ms = self.now() + self.rng.below(INTERVAL_MS);
        // Up for an hour or more, each machine for another time (no draw: the seeds' histories
        // stay as they were).
        let booted_ms = self.now() - 3_600_000 - index as u64 * 2_220_000;
        self.hosts.push(Some(Host {
            name,
            segment,
            syncer: Syncer::new(config.clone()),
            link: SimLink::new(self.server.clone()),
            config,
            skew_ms,
            booted_ms,
            sidecar: Sidecar::Up,
            next_sync_ms,
            file,
            held,
            snapshot: None,
            rejecting: BTreeMap::new(),
            synced_ms: 0,
            inherited: BTreeSet::new(),
            inherited_at_ms: 0,
            restored_unfound: false,
            unpublished: BTreeSet::new(),
            resetter: index,
        }));
        index
    }

    fn join(&mut self) {
        let segment = Segment::create_anonymous(Layout::regions(settings())).expect("an anonymous segment");
        let index = self.new_host(segment, BTreeSet::new());
        let host = self.host(index);
        // The extension records the file a segment is made in.
        host.segment.note_fleet_file(host.file);
        let (name, skew) = (host.name.clone(), host.skew_ms);
        self.note(format!("{name} joins, its clock {skew:+} ms from Redis's"));
    }

    /// One step: what the seed chooses, faults only while `faulty`.
    fn step(&mut self, faulty: bool) -> Result<(), Broken> {
        let roll = self.rng.below(if faulty { 100 } else { 80 });
        match roll {
            0..=29 => self.count(),
            30..=54 => {
                let ms = self.rng.below(1_500) + 20;
                self.advance(ms);
            }
            55..=57 => {
                let i = self.reset_service();
                // Now and then, while faults last, the round trip that shares the reset is held
                // and delivered late, after those of the counts the host makes since.
                if faulty && self.rng.chance(250) {
                    let host = self.host(i);
                    host.link.fault = Some(LinkFault::Hold);
                    let name = host.name.clone();
                    self.note(format!("link: {name}'s next round trip Hold"));
                }
            }
            58 => self.reset_all(),
            59..=79 => return self.ask_trial(),
            _ => self.fault(),
        }
        Ok(())
    }

    fn count(&mut self) {
        let i = self.pick_host();
        let counter = match self.rng.below(100) {
            0..=49 => 0,
            50..=84 => 1,
            _ => 2,
        };
        // The failures of the services whose circuits are open (`ask_trial`) are those that
        // opened them and those of their trials: more would keep every trial from coming due.
        let slot = if counter == 1 { TRIAL_SLOTS + self.rng.below(SLOTS - TRIAL_SLOTS) } else { self.rng.below(SLOTS) };
        let service = self.service(slot);
        self.count_event(i, &service, counter);
    }

    /// Host `i` counts one event of `service`'s `counter` (a failure saves its time too).
    fn count_event(&mut self, i: usize, service: &str, counter: usize) {
        let (now, window) = (self.now(), self.window);
        let host = self.hosts[i].as_mut().expect("a live host");
        let local_s = host.local_ms(now) / 1000;
        let key = format!("{service}_{}", COUNTERS[counter]);
        let store = Store::new(&host.segment);
        // The first PHP process to map a copy takes it, before it counts (as at MINIT).
        let taken = fleet::take_copy(&host.segment, &store, host.file, local_s) == fleet::Copy::Taken;
        fleet::note_window(host.segment.fleet_window_noted(), FleetWindow::of(&window));
        if taken {
            let name = host.name.clone();
            self.note(format!("{name}'s PHP takes its segment, a copy, as another host's"));
        }
        let host = self.hosts[i].as_mut().expect("a live host");
        let store = Store::new(&host.segment);
        if let Err(error) = store.increment(key.as_bytes(), &window, local_s) {
            let name = host.name.clone();
            self.note(format!("{name} cannot count {key}: {error:?}"));
            return;
        }
        if counter == 1 {
            let _ = store.save_last_failure_time(key.as_bytes(), local_s as i64, 3_600, local_s);
        }
        // As the adapter does after a write that made or renewed the slot.
        let _ = store.note_fleet_window(key.as_bytes(), &window);
        let (bucket_local_ms, skew_ms) = ((local_s / BUCKET_S * BUCKET_S * 1000) as i64, host.skew_ms);
        let name = host.name.clone();
        let id = self.truth.count(service, counter, now as i64, i, skew_ms, bucket_local_ms);
        let host = self.host(i);
        host.held.insert(id);
        if host.restored_unfound {
            host.unpublished.insert(id);
        }
        self.note(format!("{name} counts a {} of {service}", COUNTERS[counter]));
    }

    /// Redis's clock moves on by `ms`; every sidecar due syncs, in turn.
    fn advance(&mut self, ms: u64) {
        let target = self.now() + ms;
        loop {
            let due = self
                .alive()
                .into_iter()
                .filter_map(|i| {
                    let host = self.hosts[i].as_ref()?;
                    let at = match host.sidecar {
                        Sidecar::Up => host.next_sync_ms,
                        Sidecar::Down { until_ms } => until_ms,
                    };
                    (at <= target).then_some((at, i))
                })
                .min();
            let Some((at, i)) = due else { break };
            self.server.time_ms.set(at.max(self.now()));
            let host = self.host(i);
            if let Sidecar::Down { .. } = host.sidecar {
                host.restart_sidecar();
                let name = host.name.clone();
                self.note(format!("{name}'s sidecar starts again, with nothing in memory"));
            }
            self.sync(i);
        }
        self.server.time_ms.set(target);
    }

    fn sync(&mut self, i: usize) {
        let now = self.now();
        let server = self.server.clone();
        let host = self.hosts[i].as_mut().expect("a live host");
        host.next_sync_ms = now + INTERVAL_MS;
        host.syncer.attached(host.segment.fleet_host_id());
        host.syncer.attached_file(host.file);
        let store = Store::new(&host.segment);
        let mut said = Vec::new();
        let local_ms = host.local_ms(now);
        // A sidecar that renewed its id syncs again at once.
        for _ in 0..2 {
            let monotonic_ms = host.monotonic_ms(now);
            let result = host.syncer.sync(&mut host.link, &host.segment, &store, local_ms, monotonic_ms);
            if result.as_ref().is_ok_and(|report| report.copy_taken.is_some()) {
                said.push("takes its segment, a copy, as another host's".into());
            }
            match result {
                Ok(report) if report.renewed.is_some() => {
                    host.restored_unfound = false;
                    // Not the ids themselves: drawn at random, they would differ from run to run.
                    said.push("finds another segment under its id, and takes one of its own".into());
                    continue;
                }
                Ok(report) if report.complete => {
                    host.synced_ms = now;
                    self.truth.shared(host.resetter);
                    SyncState { synced_at_ms: now, interval_ms: INTERVAL_MS, hosts: report.hosts as u64, errors: 0 }
                        .write(host.segment.fleet_words());
                    let taken: Vec<String> =
                        report.resets_taken.iter().map(|service| String::from_utf8_lossy(service).into_owned()).collect();
                    said.push(format!(
                        "synced: {} published, {} recounted, {} lost shards, {} stale{}",
                        report.published,
                        report.recounted,
                        report.lost_shards,
                        report.stale,
                        if taken.is_empty() { String::new() } else { format!(", took the fleet's resets of {}", taken.join(" ")) }
                    ));
                    for (key, why) in &report.refused {
                        said.push(format!("could not write the fleet's counts of {}: {why}", String::from_utf8_lossy(key)));
                    }
                }
                Ok(report) => said.push(format!("synced in part ({} unwritten, {} stale)", report.unwritten.len(), report.stale)),
                Err(error) => {
                    said.push(format!("sync failed: {error}"));
                    // The sidecar connects again: the script loaded again (after SCRIPT FLUSH).
                    let _ = server.load_script();
                    host.syncer.reconnected();
                }
            }
            break;
        }
        // A round trip held arrives, now and then, after the calls this sync sent.
        let delivered = if !host.link.held.is_empty() && self.rng.chance(300) { host.link.deliver_held() } else { 0 };
        let name = host.name.clone();
        for line in said {
            self.note(format!("{name} {line}"));
        }
        if delivered > 0 {
            self.note(format!("link: {delivered} round trips of {name} held, delivered late"));
        }
    }

    /// A host resets a service; which host.
    fn reset_service(&mut self) -> usize {
        let i = self.pick_host();
        let slot = self.rng.below(SLOTS);
        let service = self.service(slot);
        let now = self.now();
        let host = self.host(i);
        let store = Store::new(&host.segment);
        let local_ms = host.local_ms(now);
        // As the adapter's resetService() does.
        fleet::note_reset(&store, service.as_bytes(), false, local_ms, host.monotonic_ms(now));
        for suffix in ["_success", "_failure", "_rejection", "_status"] {
            let key = format!("{service}{suffix}");
            for kind in [TableKind::Counters, TableKind::Statuses] {
                let _ = store.clear(kind, key.as_bytes());
            }
        }
        host.rejecting.remove(&service);
        let name = host.name.clone();
        let resetter = self.host(i).resetter;
        self.truth.reset(resetter, now as i64, Some(BTreeSet::from([service.clone()])), true);
        self.note(format!("{name} resets {service} (resetService)"));
        i
    }

    fn reset_all(&mut self) {
        let i = self.pick_host();
        let now = self.now();
        let host = self.hosts[i].as_mut().expect("a live host");
        let store = Store::new(&host.segment);
        // Surely taken: the services whose counts this host's segment holds (its sidecar may not
        // know of the others).
        let local_s = host.local_ms(now) / 1000;
        let services: BTreeSet<String> = store
            .own_buckets(local_s, fleet::CLOCK_BOUND_S)
            .into_iter()
            .filter(|own| own.buckets.iter().any(|&(_, count)| count > 0))
            .filter_map(|own| {
                let key = String::from_utf8_lossy(&own.key).into_owned();
                COUNTERS.iter().find_map(|counter| key.strip_suffix(&format!("_{counter}")).map(str::to_string))
            })
            .collect();
        // As the adapter's reset() does.
        fleet::note_reset(&store, PREFIX.as_bytes(), true, host.local_ms(now), host.monotonic_ms(now));
        store.clear_matching(|key| key.starts_with(PREFIX.as_bytes()));
        host.rejecting.clear();
        let name = host.name.clone();
        let resetter = host.resetter;
        self.truth.reset(resetter, now as i64, Some(services), true);
        // The others it knows of (it may have read their sums), now or when it shares the reset.
        self.truth.reset(resetter, now as i64, None, false);
        self.note(format!("{name} resets every service (reset)"));
    }

    /// A service whose circuit is open gets requests on many hosts: one host rejects a request,
    /// and so does every other host whose circuit of it is open.
    fn ask_trial(&mut self) -> Result<(), Broken> {
        let i = self.pick_host();
        let slot = self.rng.below(TRIAL_SLOTS);
        let service = self.service(slot);
        self.ask_trial_of(i, &service)?;
        let now = self.now();
        for j in self.alive() {
            let open = self.hosts[j].as_ref().and_then(|host| host.rejecting.get(&service)).is_some_and(|&(_, last)| now <= last + 2 * INTERVAL_MS);
            if j != i && open {
                self.ask_trial_of(j, &service)?;
            }
        }
        Ok(())
    }

    /// Host `i` rejects a request of `service` (a failure opened its circuit, unless it was open),
    /// and asks for the half-open trial once it has rejected for two intervals (as Ganesha does,
    /// once due).
    fn ask_trial_of(&mut self, i: usize, service: &str) -> Result<(), Broken> {
        let now = self.now();
        let host = self.host(i);
        let opened = !host.rejecting.contains_key(service);
        let rejecting = host.rejecting.entry(service.to_string()).or_insert((now, now));
        // Rejections two intervals apart or more: the sidecar no longer says the host wants the
        // trial, until it rejected for two intervals again.
        let began = if now > rejecting.1 + 2 * INTERVAL_MS { now } else { rejecting.0 };
        *rejecting = (began, now);
        if opened {
            self.count_event(i, service, 1);
        }
        self.count_event(i, service, 2);
        if now < began + 2 * INTERVAL_MS {
            return Ok(());
        }
        let host = self.hosts[i].as_mut().expect("a live host");
        let local_s = host.local_ms(now) / 1000;
        let store = Store::new(&host.segment);
        let key = format!("{service}_failure");
        let fresh = SyncState::read(host.segment.fleet_words()).is_fresh(now);
        let claimed = if fresh {
            store.claim_fleet_trial(key.as_bytes(), local_s, HALF_OPEN_S, 3_600)
        } else {
            store.claim_trial(key.as_bytes(), local_s, HALF_OPEN_S, 3_600)
        };
        let Ok(Some(since)) = claimed else { return Ok(()) };
        if local_s as i64 - since <= HALF_OPEN_S as i64 {
            return Ok(());
        }
        let name = host.name.clone();
        self.note(format!("{name} is granted the half-open trial of {service} (view {})", if fresh { "fresh" } else { "stale" }));
        // (iv): while views are fresh, one trial a service and interval in the fleet, unless
        // Redis lost the fleet's trials since, or its shard holds another's data (a host with no
        // word of the fleet's trial claims its own). A host that rejects renews its lease at each
        // sync, for three intervals, and its view is fresh for two after: two hosts' grants are
        // more than an interval apart. Once the earlier grant's failure reached Redis (its host
        // synced since), no other host is granted in the interval after it (less the clocks'
        // slack).
        let window_ms = HALF_OPEN_S * 1000 - 2_000;
        let shared = !self.foreign.contains(&fleet::shard_key(FLEET, fleet::shard_of(service.as_bytes())));
        if fresh && shared && self.lost_ms + 3 * INTERVAL_MS < now {
            let synced_ms = |h: usize| self.hosts[h].as_ref().map_or(0, |host| host.synced_ms);
            if let Some(other) = self.truth.grants.iter().rev().find(|grant| {
                grant.fresh
                    && grant.service == service
                    && grant.host != i
                    && (grant.at_ms + INTERVAL_MS > now || (grant.at_ms + window_ms > now && synced_ms(grant.host) > grant.at_ms))
            }) {
                return Err(format!(
                    "(iv) two half-open trials of {service} in one interval: h{} at {:.3}s and {name} at {:.3}s, both with fresh views",
                    other.host,
                    other.at_ms.saturating_sub(START_MS) as f64 / 1000.0,
                    now.saturating_sub(START_MS) as f64 / 1000.0
                ));
            }
        }
        self.truth.grants.push(Grant { at_ms: now, host: i, service: service.to_string(), fresh });
        // The trial fails: its failure restarts the interval.
        self.count_event(i, service, 1);
        Ok(())
    }

    fn fault(&mut self) {
        let now = self.now();
        match self.rng.below(20) {
            0 => {
                let _ = self.server.command(&redis::cmd("FLUSHALL"));
                self.lost_ms = now;
                self.note("Redis: FLUSHALL".into());
            }
            1 => {
                let key = fleet::shard_key(FLEET, self.rng.below(u64::from(SHARDS)) as u32);
                if self.rng.chance(500) {
                    let _ = self.server.command(redis::cmd("DEL").arg(&key));
                    self.foreign.remove(&key);
                    self.note(format!("Redis: a shard deleted ({})", String::from_utf8_lossy(&key)));
                } else {
                    // Only the sums: what the hosts wrote of their own counts is left.
                    let fields = match self.server.command(redis::cmd("HKEYS").arg(&key)) {
                        Ok(redis::Value::Array(fields)) => fields,
                        _ => Vec::new(),
                    };
                    let sums: Vec<Vec<u8>> = fields
                        .into_iter()
                        .filter_map(|field| match field {
                            redis::Value::BulkString(name) if name.starts_with(b"s:") => Some(name),
                            _ => None,
                        })
                        .collect();
                    if !sums.is_empty() {
                        let _ = self.server.command(redis::cmd("HDEL").arg(&key).arg(&sums));
                    }
                    self.note(format!("Redis: the sums of {} deleted ({} fields)", String::from_utf8_lossy(&key), sums.len()));
                }
                self.lost_ms = now;
            }
            2 | 3 => {
                let key = fleet::shard_key(FLEET, self.rng.below(u64::from(SHARDS)) as u32);
                if let Ok(redis::Value::BulkString(dump)) = self.server.command(redis::cmd("DUMP").arg(&key)) {
                    let foreign = self.foreign.contains(&key);
                    self.dumps.push((key.clone(), dump, foreign));
                    self.note(format!("a copy of {} kept (DUMP)", String::from_utf8_lossy(&key)));
                }
            }
            4 => {
                if !self.dumps.is_empty() {
                    let (key, dump, foreign) = self.dumps[self.rng.below(self.dumps.len() as u64) as usize].clone();
                    let _ = self.server.command(redis::cmd("RESTORE").arg(&key).arg(0).arg(dump).arg("REPLACE"));
                    // A copy of the key made a string is a string again: settling deletes it.
                    if foreign {
                        self.foreign.insert(key.clone());
                    } else {
                        self.foreign.remove(&key);
                    }
                    self.lost_ms = now;
                    self.note(format!(
                        "Redis: {} restored to an older copy (RESTORE){}",
                        String::from_utf8_lossy(&key),
                        if foreign { ", a string" } else { "" }
                    ));
                }
            }
            5 => {
                let _ = self.server.command(redis::cmd("SCRIPT").arg("FLUSH"));
                self.note("Redis: SCRIPT FLUSH".into());
            }
            6 => {
                let key = fleet::shard_key(FLEET, self.rng.below(u64::from(SHARDS)) as u32);
                let _ = self.server.command(redis::cmd("DEL").arg(&key));
                let _ = self.server.command(redis::cmd("SET").arg(&key).arg("not a hash"));
                self.foreign.insert(key.clone());
                self.lost_ms = now;
                self.note(format!("Redis: {} made a string", String::from_utf8_lossy(&key)));
            }
            7 => {
                let on = self.rng.chance(500);
                let limit = if on { "1" } else { "0" };
                let _ = self.server.command(redis::cmd("CONFIG").arg("SET").arg("maxmemory").arg(limit));
                self.note(format!("Redis: {}", if on { "out of memory (maxmemory 1, noeviction)" } else { "memory again" }));
            }
            8..=10 => {
                let i = self.pick_host();
                let fault = [LinkFault::Drop, LinkFault::LoseReply, LinkFault::Hold, LinkFault::Twice][self.rng.below(4) as usize];
                let host = self.host(i);
                host.link.fault = Some(fault);
                let name = host.name.clone();
                self.note(format!("link: {name}'s next round trip {fault:?}"));
            }
            11 => {
                let i = self.pick_host();
                let host = self.host(i);
                let delivered = host.link.deliver_held();
                let name = host.name.clone();
                if delivered > 0 {
                    self.note(format!("link: {delivered} round trips of {name} held, delivered late"));
                }
            }
            12 => {
                let i = self.pick_host();
                let host = self.host(i);
                host.restart_sidecar();
                let name = host.name.clone();
                self.note(format!("{name}'s sidecar restarted, with nothing in memory"));
            }
            13 => {
                let i = self.pick_host();
                let until_ms = now + 1_000 + self.rng.below(8_000);
                let stopped = self.rng.chance(500);
                let host = self.host(i);
                if stopped {
                    SyncState::clear(host.segment.fleet_words());
                }
                host.sidecar = Sidecar::Down { until_ms };
                let name = host.name.clone();
                self.note(format!("{name}'s sidecar {} for {} ms", if stopped { "stopped" } else { "killed" }, until_ms - now));
            }
            14 if self.steady_clocks => {}
            14 => {
                let i = self.pick_host();
                let step = self.rng.between(-20_000, 20_000);
                let host = self.host(i);
                host.skew_ms = (host.skew_ms + step).clamp(-MAX_SKEW_MS, MAX_SKEW_MS);
                let (name, skew) = (host.name.clone(), host.skew_ms);
                self.truth.clock(i, now as i64, skew);
                self.note(format!("{name}'s clock steps {step:+} ms, to {skew:+} ms from Redis's"));
            }
            15 => {
                if self.hosts.len() < 20 {
                    let i = self.pick_host();
                    let host = self.host(i);
                    let copy = Segment::create_anonymous(Layout::regions(settings())).expect("an anonymous segment");
                    for (to, from) in copy.words().iter().zip(host.segment.words()) {
                        // Relaxed: a copy of the file, word by word, as `cp` makes one.
                        to.store(from.load(Ordering::Relaxed), Ordering::Relaxed);
                    }
                    let (held, name, skew) = (host.held.clone(), host.name.clone(), host.skew_ms);
                    let j = self.new_host(copy, held.clone());
                    // A clone of the machine: its clock, as the original's, within a second.
                    let nudge = self.rng.between(-1_000, 1_000);
                    let copy = self.host(j);
                    copy.skew_ms = (skew + nudge).clamp(-MAX_SKEW_MS, MAX_SKEW_MS);
                    (copy.inherited, copy.inherited_at_ms) = (held, now);
                    let copy_name = copy.name.clone();
                    self.note(format!("{name}'s segment copied to a new host, {copy_name}"));
                }
            }
            16 => {
                let i = self.pick_host();
                let host = self.host(i);
                let words = host.segment.words().iter().map(|word| word.load(Ordering::Relaxed)).collect();
                host.snapshot = Some((words, host.held.clone()));
                let name = host.name.clone();
                self.note(format!("{name}'s segment file copied aside"));
            }
            17 => {
                let i = self.pick_host();
                let host = self.host(i);
                if let Some((words, held)) = host.snapshot.clone() {
                    for (word, value) in host.segment.words().iter().zip(words) {
                        // Relaxed: the file restored in place, with PHP and the sidecar stopped.
                        word.store(value, Ordering::Relaxed);
                    }
                    (host.inherited, host.inherited_at_ms) = (held.clone(), now);
                    host.held = held;
                    host.restored_unfound = true;
                    let resetter = host.resetter;
                    host.resetter += 1_000;
                    host.restart_sidecar();
                    let name = host.name.clone();
                    self.truth.lost(resetter);
                    self.note(format!("{name}'s segment file restored from its older copy"));
                }
            }
            18 => {
                if self.rng.chance(500) && self.alive().len() > 2 {
                    let i = self.pick_host();
                    let (name, resetter) = (self.host(i).name.clone(), self.host(i).resetter);
                    self.hosts[i] = None;
                    self.truth.lost(resetter);
                    self.note(format!("{name} leaves the fleet"));
                } else if self.hosts.len() < 20 {
                    self.join();
                }
            }
            _ => {
                let slot = self.rng.below(SLOTS);
                let old = self.service(slot);
                self.generations[slot as usize] += 1;
                let new = self.service(slot);
                self.note(format!("names churn: {old} is no longer counted, {new} is"));
            }
        }
    }

    /// What host `i` sees of `service`'s `counter` now: its own counts, and the fleet's while its
    /// view is fresh (as the adapter reads them).
    fn view(&self, i: usize, service: &str, counter: usize) -> (u64, bool) {
        let (own, others, fresh) = self.view_parts(i, service, counter);
        (own + if fresh { others } else { 0 }, fresh)
    }

    /// Host `i`'s own count of `service`'s `counter`, the other hosts' as its segment holds them,
    /// and whether its view of the fleet is fresh.
    fn view_parts(&self, i: usize, service: &str, counter: usize) -> (u64, u64, bool) {
        let host = self.hosts[i].as_ref().expect("a live host");
        let now = self.now();
        let store = Store::new(&host.segment);
        let key = format!("{service}_{}", COUNTERS[counter]);
        let fresh = SyncState::read(host.segment.fleet_words()).is_fresh(now);
        let (own, others) = store.load_with_fleet(key.as_bytes(), &self.window, host.local_ms(now) / 1000).unwrap_or((0, 0));
        (own, others, fresh)
    }

    /// (i): no view above the events counted but those its host's resets cut; once `settled`,
    /// (iii): none above the events that every reset may have kept.
    fn check_views(&mut self, settled: bool) -> Result<(), Broken> {
        let services: Vec<String> = self.truth.services().into_iter().map(str::to_string).collect();
        let settled_upper = if settled { self.truth.upper() } else { BTreeMap::new() };
        for i in self.alive() {
            let resetter = self.hosts[i].as_ref().expect("a live host").resetter;
            for service in &services {
                for counter in 0..3 {
                    let (own, others, fresh) = self.view_parts(i, service, counter);
                    let view = own + if fresh { others } else { 0 };
                    // (vi): the fleet's counts decide only while the last sync is at most two
                    // intervals old; then the host decides on its own (docs/fleet.md).
                    let age = SyncState::read(self.hosts[i].as_ref().expect("a live host").segment.fleet_words()).age_ms(self.now());
                    if fresh && others > 0 && age.is_none_or(|age| age > 2 * INTERVAL_MS) {
                        return Err(format!(
                            "(vi) h{i}'s view of {service}'s {}s holds the fleet's {others} {} after its last sync",
                            COUNTERS[counter],
                            age.map_or("any time".to_string(), |age| format!("{age} ms"))
                        ));
                    }
                    let upper = match settled {
                        true => settled_upper.get(&(service.clone(), counter)).copied().unwrap_or(0),
                        false => self.truth.upper_for(resetter, service, counter),
                    };
                    self.checks += 1;
                    if view > upper {
                        self.explain_view(i, service, counter);
                        self.explain(service, counter);
                        return Err(format!(
                            "{} h{i}'s view ({}) of {service}'s {}s is {view} (its own {own}, the others' {others}), above the {upper} the hosts counted and {}",
                            if settled { "(iii)" } else { "(i)" },
                            if fresh { "fresh" } else { "its own" },
                            COUNTERS[counter],
                            if settled { "no reset took" } else { "its own resets did not take" }
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// Notes what host `i` holds of `service`'s `counter`: its fleet-only region's count, and
    /// what its sidecar holds of it, for a failing seed's history.
    fn explain_view(&mut self, i: usize, service: &str, counter: usize) {
        let region = {
            let host = self.hosts[i].as_ref().expect("a live host");
            let store = Store::new(&host.segment);
            let key = format!("{service}_{}", COUNTERS[counter]);
            let now_s = host.local_ms(self.now()) / 1000;
            store.fleet_only().and_then(|region| region.load(key.as_bytes(), BUCKET_S, self.window.buckets_at(now_s)))
        };
        let (tickets, taken) = {
            let host = self.hosts[i].as_ref().expect("a live host");
            let store = Store::new(&host.segment);
            (store.reset_log().map(|log| log.tickets()), host.segment.fleet_resets_taken().load(Ordering::Relaxed))
        };
        self.note(format!("h{i}'s fleet-only region holds {region:?} of it; its reset log has {tickets:?} resets, the fleet's counts reflect {taken}"));
        let known: Vec<String> = self.hosts[i]
            .as_ref()
            .expect("a live host")
            .syncer
            .known_counts(service.as_bytes())
            .into_iter()
            .map(|(bucket, sums, own)| format!("{}: sum {} own {}", bucket.start, sums[counter], own[counter]))
            .collect();
        self.note(format!("h{i}'s sidecar holds of it: {}", known.join(", ")));
    }

    /// Notes every event of `service`'s `counter`: where its bucket began, how the resets judge
    /// it, and which segments hold it.
    fn explain(&mut self, service: &str, counter: usize) {
        let mut lines = vec![format!("the events of {service}'s {}s (shard {}):", COUNTERS[counter], fleet::shard_of(service.as_bytes()))];
        for (id, event) in self.truth.events.iter().enumerate() {
            if event.service != service || event.counter != counter {
                continue;
            }
            let holders: Vec<&str> =
                self.hosts.iter().flatten().filter(|host| host.held.contains(&id)).map(|host| host.name.as_str()).collect();
            lines.push(format!(
                "  event {id}: counted at {:.3}s, its bucket began at {:.3}s, {}, held by {holders:?}",
                (event.at_ms - START_MS as i64) as f64 / 1000.0,
                (event.bucket_began_ms - START_MS as i64) as f64 / 1000.0,
                self.truth.describe(id),
            ));
        }
        // What Redis holds of it: each bucket's sums and each writer's counts.
        let key = fleet::shard_key(FLEET, fleet::shard_of(service.as_bytes()));
        let ids: BTreeMap<String, String> = self
            .hosts
            .iter()
            .flatten()
            .map(|host| (fleet::host_id_text(host.segment.fleet_host_id()), host.name.clone()))
            .collect();
        if let Ok(redis::Value::Array(items)) = self.server.command(redis::cmd("HGETALL").arg(&key)) {
            let mut held = Vec::new();
            for pair in items.chunks_exact(2) {
                let [redis::Value::BulkString(field), redis::Value::BulkString(value)] = pair else { continue };
                let field = String::from_utf8_lossy(field).into_owned();
                if field == "z" {
                    if let Some((resets, _)) = ganesha_shm_fleet::packed::unpack_resets(value) {
                        for (_, at) in resets.iter().filter(|(name, _)| name == service.as_bytes()) {
                            held.push(format!("  Redis: its latest reset (z) at {:.3}s", (*at as i64 - START_MS as i64) as f64 / 1000.0));
                        }
                    }
                }
                if !(field.starts_with("s:") || field.starts_with("o:")) {
                    continue;
                }
                let Some((rows, _)) = ganesha_shm_fleet::packed::unpack_rows(value, fleet::MAX_COUNT) else { continue };
                for (_, counts) in rows.iter().filter(|(name, _)| name == service.as_bytes()) {
                    let named = ids.iter().fold(field.clone(), |field, (id, name)| field.replace(id, name));
                    held.push(format!("  Redis: {named} = {}", counts[counter]));
                }
            }
            held.sort();
            lines.extend(held);
        }
        for line in lines {
            self.note(line);
        }
    }

    /// The faults stop: every view exact within two intervals (ii), and Redis's keys bounded (v).
    fn settle(&mut self) -> Result<(), Broken> {
        let _ = self.server.command(redis::cmd("CONFIG").arg("SET").arg("maxmemory").arg("0"));
        for key in std::mem::take(&mut self.foreign) {
            let _ = self.server.command(redis::cmd("DEL").arg(&key));
            // What the shard held was lost when it was made a string, and nothing could be
            // published there since.
            self.lost_ms = self.now();
        }
        for i in self.alive() {
            let host = self.host(i);
            host.link.fault = None;
            host.link.held.clear();
            if host.sidecar != Sidecar::Up {
                host.restart_sidecar();
            }
        }
        self.note("faults stop".into());
        self.advance(2 * INTERVAL_MS);
        self.check_views(true)?;
        // The events a live segment holds; but for one copied or restored, those it held then,
        // once Redis lost data since: they are the old id's, which no segment may publish again;
        // and for one restored in place, those it counted before its sidecar found it.
        let held: Vec<BTreeSet<usize>> = self
            .hosts
            .iter()
            .flatten()
            .map(|host| {
                let held: BTreeSet<usize> = match self.lost_ms >= host.inherited_at_ms && !host.inherited.is_empty() {
                    true => host.held.difference(&host.inherited).copied().collect(),
                    false => host.held.clone(),
                };
                held.difference(&host.unpublished).copied().collect()
            })
            .collect();
        let settled_ms = self.now() as i64 - (BUCKET_S * 1500) as i64;
        let lower = self.truth.lower(held.iter(), settled_ms);
        let services: Vec<String> = self.truth.services().into_iter().map(str::to_string).collect();
        for i in self.alive() {
            for service in &services {
                for counter in 0..3 {
                    let (view, fresh) = self.view(i, service, counter);
                    let least = lower.get(&(service.clone(), counter)).copied().unwrap_or(0);
                    self.checks += 1;
                    if !fresh {
                        return Err(format!("(ii) h{i}'s view is not fresh two intervals after the faults stopped"));
                    }
                    if view < least {
                        self.explain_view(i, service, counter);
                        self.explain(service, counter);
                        return Err(format!(
                            "(ii) h{i}'s view of {service}'s {}s is {view} two intervals after the faults stopped, below the {least} the live hosts counted after every reset",
                            COUNTERS[counter]
                        ));
                    }
                }
            }
        }
        // (v): each shard holds, for each bucket, its sums, writers and each writer's counts, and
        // a few fields of its own and one record a host: nothing grows with the names that churned
        // but their buckets.
        let hosts = self.hosts.len() as u64;
        let span_s = (self.now() - START_MS) / 1000 + 2 * MAX_SKEW_MS as u64 / 1000;
        let buckets = span_s / BUCKET_S + 3;
        let most = 10 + hosts + buckets * (2 + hosts);
        for shard in 0..SHARDS {
            let key = fleet::shard_key(FLEET, shard);
            let fields = match self.server.command(redis::cmd("HLEN").arg(&key)) {
                Ok(redis::Value::Int(n)) => n as u64,
                _ => 0,
            };
            self.checks += 1;
            if fields > most {
                return Err(format!("(v) {} holds {fields} fields, more than the {most} its buckets and hosts need", String::from_utf8_lossy(&key)));
            }
        }
        Ok(())
    }
}
