//! One sync of this host's segment with the fleet's Redis, in two round trips (three when
//! Redis lost what this host published):
//!
//! 1. publish this host's counters that changed since the last sync (one hash field each, in
//!    one hash per service), keep each hash and the fleet's index of services alive as long as
//!    the data they hold, drop the expired services from the index, and read the index;
//! 2. read every service's hash;
//! 3. only when a field this host published is missing (Redis restarted empty, flushed, or a
//!    key evicted): publish it again, and delete the fields whose data has expired.
//!
//! Then it writes the other hosts' counts into the segment's fleet rings.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use ganesha_shm_core::fleet::{self, Published};
use ganesha_shm_core::store::Store;
use redis::{Cmd, Value};

use crate::config::Config;

/// A connection to a Redis server or to a Redis Cluster.
pub enum Link {
    Server(redis::Connection),
    Cluster(redis::cluster::ClusterConnection),
}

impl Link {
    pub fn connect(config: &Config) -> redis::RedisResult<Self> {
        let link = if config.cluster {
            let nodes: Vec<&str> = config.redis.split(',').collect();
            let client = redis::cluster::ClusterClient::builder(nodes)
                .connection_timeout(config.connect_timeout)
                .response_timeout(config.command_timeout)
                .retries(0)
                .build()?;
            let connection = client.get_connection()?;
            connection.set_read_timeout(Some(config.command_timeout))?;
            connection.set_write_timeout(Some(config.command_timeout))?;
            Self::Cluster(connection)
        } else {
            let connection =
                redis::Client::open(config.redis.as_str())?.get_connection_with_timeout(config.connect_timeout)?;
            connection.set_read_timeout(Some(config.command_timeout))?;
            connection.set_write_timeout(Some(config.command_timeout))?;
            Self::Server(connection)
        };
        Ok(link)
    }

    /// Runs `commands` in one pipeline (one round trip per node for a cluster); their replies in
    /// order.
    fn run(&mut self, commands: Vec<Cmd>) -> redis::RedisResult<Vec<Value>> {
        if commands.is_empty() {
            return Ok(Vec::new());
        }
        match self {
            Self::Server(connection) => {
                let mut pipe = redis::pipe();
                for command in commands {
                    pipe.add_command(command);
                }
                pipe.query(connection)
            }
            Self::Cluster(connection) => {
                let mut pipe = redis::cluster::cluster_pipe();
                for command in commands {
                    pipe.add_command(command);
                }
                pipe.query(connection)
            }
        }
    }
}

/// What one sync did, for the log and the benchmark.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    pub round_trips: u32,
    pub published: usize,
    pub republished: usize,
    pub services: usize,
    /// Hosts with data in the fleet, this one included.
    pub hosts: usize,
    /// Counters whose fleet ring was written.
    pub written: usize,
    /// Fields that could not be parsed, each with why (logged once each by the caller).
    pub unparsed: Vec<(Vec<u8>, String)>,
    /// Counters whose fleet counts the segment refused (full), each with why.
    pub refused: Vec<(Vec<u8>, String)>,
}

/// What the sidecar keeps between syncs.
pub struct Syncer {
    config: Config,
    /// What this host last published of each counter key, and until when it is kept.
    published: HashMap<Vec<u8>, (String, u64)>,
    index: Vec<u8>,
}

impl Syncer {
    pub fn new(config: Config) -> Self {
        let index = fleet::index_key(&config.fleet);
        Self { config, published: HashMap::new(), index }
    }

    /// Forgets what was published, so that the next sync publishes every counter again (after
    /// a reconnection: Redis may have restarted).
    pub fn forget_published(&mut self) {
        self.published.clear();
    }

    /// Seconds Redis keeps data beyond its own lifetime: two intervals and a second, so that a
    /// host's last counts outlive the sync that would refresh them.
    fn margin(&self) -> u64 {
        (self.config.interval * 2).as_secs() + 1
    }

    /// One sync at unix time `now` (seconds).
    pub fn sync(&mut self, link: &mut Link, store: &Store<'_>, ring_len: u64, now: u64) -> redis::RedisResult<Report> {
        let mut report = Report::default();

        // What this host counted.
        let own: Vec<(Vec<u8>, String, u64)> = store
            .own_buckets(now)
            .into_iter()
            .map(|own| {
                let value = Published { ring_len, kept_until: own.kept_until, buckets: own.buckets }.encode();
                (own.key, value, own.kept_until)
            })
            .collect();
        let changed: Vec<&(Vec<u8>, String, u64)> = own
            .iter()
            .filter(|(key, value, _)| self.published.get(key).is_none_or(|(last, _)| last != value))
            .collect();

        // 1. Publish, keep alive, read the index.
        let mut commands = self.publish_commands(changed.iter().copied(), now);
        commands
            .push(redis::cmd("ZREMRANGEBYSCORE").arg(&self.index).arg("-inf").arg(now.saturating_sub(1)).to_owned());
        commands.push(redis::cmd("ZRANGEBYSCORE").arg(&self.index).arg(now).arg("+inf").to_owned());
        let replies = link.run(commands)?;
        report.round_trips += 1;
        for (key, value, kept_until) in &changed {
            self.published.insert(key.clone(), (value.clone(), *kept_until));
        }
        report.published = changed.len();
        self.published.retain(|_, (_, kept_until)| *kept_until >= now);
        let services: Vec<Vec<u8>> = match replies.last() {
            Some(reply) => redis::from_redis_value_ref(reply)?,
            None => Vec::new(),
        };
        report.services = services.len();

        // 2. Read every service's hash.
        let hashes: Vec<Vec<u8>> =
            services.iter().map(|service| fleet::redis_key(&self.config.fleet, service)).collect();
        let replies = link.run(hashes.iter().map(|key| redis::cmd("HGETALL").arg(key).to_owned()).collect())?;
        report.round_trips += u32::from(!hashes.is_empty());

        // Every other host's counters, by counter key; this host's fields, to find what Redis lost.
        let mut others: BTreeMap<Vec<u8>, Vec<Published>> = BTreeMap::new();
        let mut seen_own: BTreeSet<Vec<u8>> = BTreeSet::new();
        let mut hosts: BTreeSet<Vec<u8>> = BTreeSet::from([self.config.host.as_bytes().to_vec()]);
        let mut expired: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        for (hash, reply) in hashes.iter().zip(&replies) {
            let fields: HashMap<Vec<u8>, Vec<u8>> = redis::from_redis_value_ref(reply)?;
            for (field, value) in fields {
                let Some((host, key)) = fleet::parse_field(&field) else {
                    report.unparsed.push((field.clone(), "no space between host and key".into()));
                    continue;
                };
                if host == self.config.host.as_bytes() {
                    seen_own.insert(key.to_vec());
                    continue;
                }
                match Published::decode(&value) {
                    // Expired on its host: it no longer counts, and once the margin has passed
                    // too (its host would have published it again by then) it is deleted.
                    Ok(published) if published.kept_until < now => {
                        if published.kept_until.saturating_add(self.margin()) < now {
                            expired.push((hash.clone(), field.clone()));
                        }
                    }
                    Ok(published) if published.ring_len != ring_len => report.unparsed.push((
                        field.clone(),
                        format!(
                            "a ring of {} buckets, this host's has {ring_len} (ganesha_shm.max_buckets differs)",
                            published.ring_len
                        ),
                    )),
                    Ok(published) => {
                        hosts.insert(host.to_vec());
                        others.entry(key.to_vec()).or_default().push(published);
                    }
                    Err(why) => report.unparsed.push((field.clone(), why)),
                }
            }
        }
        report.hosts = hosts.len();

        // 3. What Redis lost of this host's, published again; expired fields deleted.
        // Every counter of this host was published, in this sync or an earlier one: one that
        // Redis does not show was lost there.
        let lost: Vec<&(Vec<u8>, String, u64)> = own.iter().filter(|(key, ..)| !seen_own.contains(key)).collect();
        let mut commands = self.publish_commands(lost.iter().copied(), now);
        for (hash, field) in &expired {
            commands.push(redis::cmd("HDEL").arg(hash).arg(field).to_owned());
        }
        if !commands.is_empty() {
            link.run(commands)?;
            report.round_trips += 1;
        }
        report.republished = lost.len();

        // The other hosts' counts into the fleet rings.
        let longest = now.saturating_add(ganesha_shm_core::window::STATUS_TTL);
        for (key, published) in &others {
            let ring = fleet::merge(ring_len as usize, published);
            if ring.iter().all(Option::is_none) {
                continue;
            }
            // Kept as long as the longest-lived host keeps it, never longer (or the hosts would
            // keep each other's slots alive for ever), and at most a day: a value in Redis cannot
            // keep a slot for ever either. Only unexpired values are here, so it is after `now`.
            let keep_until = published.iter().map(|p| p.kept_until).max().unwrap_or(now).min(longest);
            match store.write_fleet_buckets(key, now, keep_until, &ring) {
                Ok(()) => report.written += 1,
                Err(error) => report.refused.push((key.clone(), format!("{:?}", error.error))),
            }
        }
        Ok(report)
    }

    /// The commands that publish `counters`: one HSET each, then for each service touched its
    /// hash's lifetime and its place in the index, and the index's own lifetime.
    fn publish_commands<'c>(&self, counters: impl Iterator<Item = &'c (Vec<u8>, String, u64)>, now: u64) -> Vec<Cmd> {
        let mut commands = Vec::new();
        let mut services: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
        for (key, value, kept_until) in counters {
            let service = fleet::service_of(key, &self.config.suffixes);
            let hash = fleet::redis_key(&self.config.fleet, service);
            commands
                .push(redis::cmd("HSET").arg(&hash).arg(fleet::field(&self.config.host, key)).arg(value).to_owned());
            let until = services.entry(service.to_vec()).or_insert(0);
            *until = (*until).max(*kept_until);
        }
        let margin = self.margin();
        let mut longest = 0;
        for (service, until) in &services {
            let hash = fleet::redis_key(&self.config.fleet, service);
            let ttl = until.saturating_sub(now) + margin;
            // NX then GT: a new hash gets a lifetime, an existing one only a longer one, so that
            // one host's shorter window never cuts another's data short.
            commands.push(redis::cmd("EXPIRE").arg(&hash).arg(ttl).arg("NX").to_owned());
            commands.push(redis::cmd("EXPIRE").arg(&hash).arg(ttl).arg("GT").to_owned());
            commands.push(redis::cmd("ZADD").arg(&self.index).arg("GT").arg(until + margin).arg(service).to_owned());
            longest = longest.max(ttl);
        }
        if longest > 0 {
            commands.push(redis::cmd("EXPIRE").arg(&self.index).arg(longest).arg("NX").to_owned());
            commands.push(redis::cmd("EXPIRE").arg(&self.index).arg(longest).arg("GT").to_owned());
        }
        commands
    }
}
