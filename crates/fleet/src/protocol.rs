//! The protocol of a shard call: what the sidecar sends sync.lua and what it answers, by name.
//!
//! Both are MessagePack maps keyed by the names of the fields below, spelled the same in the
//! script (`request.trials`, `reply.sums`): the sidecar packs the request into the call's one
//! argument ([`Request::encode`]), which the script unpacks; the script packs its reply
//! (`cmsgpack.pack`: Redis would drop the string keys of a table it turned into a reply), which
//! [`Reply::decode`] reads. A record of a list (a trial, a reset) is a map too: nothing between
//! the two is known by its place. The counts of a bucket stay packed lists of rows inside them,
//! as Redis keeps them (see `packed::pack_rows`). What the script does with each field, and what
//! it guarantees, the head of `sync.lua` says.

use ganesha_shm_core::fleet::{self, Bucket};

use crate::packed::{self, Rows, Value, Writer};

/// What a call of a shard sends the script: what this host changed in the shard, and what it
/// holds of it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Request {
    /// This host's id (`fleet::host_id_text`).
    pub host: String,
    /// Above every earlier call of this host (its segment keeps it): a shard refuses as stale a
    /// call whose sequence is not above the last it applied of the host.
    pub sequence: u64,
    /// The shard's birth this host holds: "" when it holds that there is no hash.
    pub born: String,
    /// The shard's version this host holds: -1 for none.
    pub version: i64,
    /// Whether `updates` are every bucket this host publishes in the shard, and every sum of its
    /// durations is to come back: its first call, or a shard Redis lost.
    pub full: bool,
    /// How long after its start this host reads a bucket of each duration it reads.
    pub readers: Vec<Reader>,
    /// Seconds the readers' figures stand for unless renewed.
    pub live: u64,
    /// The buckets whose counts this host changed, each with its counts of every service of the
    /// shard it counted there.
    pub updates: Vec<Update>,
    /// The services whose counters this host reset: their counts in the buckets sent are set as
    /// sent, even lower.
    pub resets: Vec<Reset>,
    /// The clock bound, in seconds: a bucket stamped further past Redis's time is no host's.
    pub bound: u64,
    /// Whether the script checks the ACL rights first: at the first call of a connection.
    pub check: bool,
    /// The other bucket durations Redis told this host of already.
    pub durations: Vec<u64>,
    /// The buckets whose sums this host read and found not to be counts, or below its own: to be
    /// recounted from every writer's counts.
    pub recount: Vec<Bucket>,
    /// The last sequence Redis said it applied of this host in the shard (0: none, or every bucket
    /// of this host there gone since): Redis holding less tells that it went back to an older copy.
    pub applied: u64,
    /// This host's newest bucket in the shard, by how long it is read.
    pub newest: Option<Bucket>,
    /// With `full`: the hash takes a new birth, as when a host found that Redis went back to an
    /// older copy of it.
    pub renew: bool,
    /// The resets this host shares with the fleet: those it made, dated on Redis's clock; with
    /// `full`, every one it knows of.
    pub reset_times: Vec<ResetTime>,
    /// The version of the shard's resets this host holds: -1 for none.
    pub resets_known: i64,
    /// The half-open trials this host asks of the fleet: one for each service whose circuit is
    /// open here.
    pub trials: Vec<Trial>,
    /// How far this host's clock is ahead of Redis's, in milliseconds (negative: behind), as it
    /// stamps its buckets by: what tells when each of its buckets began on Redis's clock.
    pub clock: i64,
    /// The latest reset this host took from its segment of each service of `updates` that has
    /// one: what it counted since is its own.
    pub taken: Vec<ResetTime>,
}

/// How long after its start this host reads a bucket of a duration.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reader {
    /// The bucket duration, in seconds.
    pub duration: u64,
    /// Seconds after a bucket's start.
    pub seconds: u64,
}

/// This host's counts of a bucket, as it publishes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Update {
    pub bucket: Bucket,
    /// One row per service, sent packed as Redis keeps them.
    pub counts: Rows,
}

/// The counters of a service this host reset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reset {
    pub service: Vec<u8>,
    /// Bit 0 successes, 1 failures, 2 rejections.
    pub mask: u8,
}

/// A reset of a service, with its time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResetTime {
    pub service: Vec<u8>,
    /// Unix milliseconds, Redis's clock.
    pub time: u64,
}

/// The half-open trial of a service whose circuit is open on this host.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trial {
    pub service: Vec<u8>,
    /// This host's last failure of the service: unix milliseconds, Redis's clock; 0 for none.
    pub failure: u64,
    /// Whether this host wants the trial: its circuit rejects requests.
    pub wants: bool,
    /// How long this host holds the trial when it gets it, in milliseconds.
    pub lease: u64,
}

impl Request {
    /// The request as the script unpacks it: a map of every field, by name.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Writer::default();
        out.map(21);
        out.bytes(b"host").bytes(self.host.as_bytes());
        out.bytes(b"sequence").uint(self.sequence);
        out.bytes(b"born").bytes(self.born.as_bytes());
        out.bytes(b"version").int(self.version);
        out.bytes(b"full").bool(self.full);
        out.bytes(b"readers").array(self.readers.len());
        for reader in &self.readers {
            out.map(2).bytes(b"duration").uint(reader.duration).bytes(b"seconds").uint(reader.seconds);
        }
        out.bytes(b"live").uint(self.live);
        out.bytes(b"updates").array(self.updates.len());
        for update in &self.updates {
            out.map(2).bytes(b"bucket").bytes(fleet::bucket_field(update.bucket).as_bytes());
            out.bytes(b"counts").bytes(&packed::pack_rows(&update.counts));
        }
        out.bytes(b"resets").array(self.resets.len());
        for reset in &self.resets {
            out.map(2).bytes(b"service").bytes(&reset.service).bytes(b"mask").uint(u64::from(reset.mask));
        }
        out.bytes(b"bound").uint(self.bound);
        out.bytes(b"check").bool(self.check);
        out.bytes(b"durations").array(self.durations.len());
        for &duration in &self.durations {
            out.uint(duration);
        }
        out.bytes(b"recount").array(self.recount.len());
        for &bucket in &self.recount {
            out.bytes(fleet::bucket_field(bucket).as_bytes());
        }
        out.bytes(b"applied").uint(self.applied);
        out.bytes(b"newest").bytes(self.newest.map(fleet::bucket_field).unwrap_or_default().as_bytes());
        out.bytes(b"renew").bool(self.renew);
        out.bytes(b"reset_times");
        reset_times(&mut out, &self.reset_times);
        out.bytes(b"resets_known").int(self.resets_known);
        out.bytes(b"trials").array(self.trials.len());
        for trial in &self.trials {
            out.map(4).bytes(b"service").bytes(&trial.service);
            out.bytes(b"failure")
                .uint(trial.failure)
                .bytes(b"wants")
                .bool(trial.wants)
                .bytes(b"lease")
                .uint(trial.lease);
        }
        out.bytes(b"clock").int(self.clock);
        out.bytes(b"taken");
        reset_times(&mut out, &self.taken);
        out.bytes
    }
}

fn reset_times(out: &mut Writer, resets: &[ResetTime]) {
    out.array(resets.len());
    for reset in resets {
        out.map(2).bytes(b"service").bytes(&reset.service).bytes(b"time").uint(reset.time);
    }
}

/// What the script answers a call of a shard.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub status: Status,
    /// Redis's time: unix milliseconds.
    pub time: i64,
    /// The shard's birth, after the call ("" for none).
    pub born: String,
    /// The shard's version, after the call.
    pub version: i64,
    /// The last sequence of this host the shard applied, after the call (0: none).
    pub sequence: u64,
    /// The fleet's sums of each bucket of this host's durations that changed since the version it
    /// holds (every one, with `full`): the bucket, and its rows packed.
    pub sums: Vec<(Bucket, Vec<u8>)>,
    /// This host's counts as Redis holds them, where they are not what it sent (and, with `full`,
    /// of the buckets it did not send): the bucket, and its rows packed.
    pub own: Vec<(Bucket, Vec<u8>)>,
    pub figures: Figures,
    /// The newest sums of each bucket duration this host did not read nor was told of.
    pub others: Vec<Other>,
    /// The fleet's resets, when the shard holds another version of them than this host (or with
    /// `full`).
    pub resets: Option<Resets>,
    /// The fleet's trial of each service this host asked one of.
    pub trials: Vec<Grant>,
}

/// How a call went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Applied.
    Ok,
    /// The host's last sequence is not below this one: another segment runs under its id. `own`
    /// holds every bucket's counts of the host.
    Stale,
    /// The hash is not the one the host holds (another birth, or none): the host publishes all it
    /// holds, with `full`.
    Reborn,
    /// The hash is older than the host read it, or lacks what it applied of the host: the host
    /// publishes all it holds, with `full` and `renew`.
    Regressed,
    /// The key is not a hash: not ganesha-shm's.
    Foreign,
    /// Redis refused the write (out of memory, evicting nothing), with what it said.
    Unwritten(String),
}

/// What the call counted of what it left out, or set right.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Figures {
    /// Buckets, resets and trials stamped past Redis's time and the bound: not applied.
    pub rejected: u64,
    /// Buckets sent that no window reads any more: not applied.
    pub gone: u64,
    /// Sums found wrong (not counts, lost, or below a host's count), recounted from every host's
    /// counts.
    pub recounted: u64,
    /// Rows or fields that are not counts (or not the script's), left out.
    pub skipped: u64,
}

/// The newest sums of a bucket duration this host does not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Other {
    /// Seconds.
    pub duration: u64,
    /// The bucket's rows, packed.
    pub sums: Vec<u8>,
}

/// The fleet's resets of a shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resets {
    /// Their version (`None`: Redis holds none that is a number).
    pub version: Option<i64>,
    /// A packed flat list `service, time`, as Redis keeps it (`packed::unpack_resets`).
    pub list: Vec<u8>,
}

/// The fleet's trial of a service, as it stands for this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub service: Vec<u8>,
    /// The fleet's latest failure of the service: unix milliseconds, Redis's clock.
    pub failure: i64,
    /// Until when this host holds the trial (unix milliseconds, Redis's clock); 0: it does not.
    pub lease: i64,
}

impl Reply {
    /// The reply the script packed. A field missing, or of another type where the script alone
    /// decides it, makes it malformed (said in the error). Where it passes on what it read from
    /// Redis, which anyone may write, what is not as it writes is left out, as the sync has
    /// always left it out: a bucket whose name does not parse, a record whose numbers are not
    /// integers (cmsgpack packs a number past 2^63, or not whole, as a float); a version or a
    /// sequence that is not one reads as 0.
    pub fn decode(bytes: &[u8]) -> Result<Reply, String> {
        let value = packed::read(bytes).ok_or("not MessagePack")?;
        let reply = Fields::of(&value).ok_or("not a map")?;
        let status = match reply.bytes("status")? {
            b"ok" => Status::Ok,
            b"stale" => Status::Stale,
            b"reborn" => Status::Reborn,
            b"regressed" => Status::Regressed,
            b"foreign" => Status::Foreign,
            other => match other.strip_prefix(b"unwritten: ") {
                Some(why) => Status::Unwritten(String::from_utf8_lossy(why).into_owned()),
                None => return Err(format!("the status {:?} is none of the script's", String::from_utf8_lossy(other))),
            },
        };
        let figures = Fields::of(reply.get("figures")?).ok_or("the figures are not a map")?;
        let resets = Fields::of(reply.get("resets")?).ok_or("the resets are not a map")?;
        let resets = match resets.0 {
            [] => None,
            _ => Some(Resets { version: int(resets.get("version")?), list: resets.bytes("list")?.to_vec() }),
        };
        Ok(Reply {
            status,
            time: int(reply.get("time")?).ok_or("the time is not an integer")?,
            born: String::from_utf8_lossy(reply.bytes("born")?).into_owned(),
            version: int(reply.get("version")?).unwrap_or(0),
            sequence: int(reply.get("sequence")?).unwrap_or(0).max(0) as u64,
            sums: by_bucket(reply.get("sums")?).ok_or("the sums are not a map")?,
            own: by_bucket(reply.get("own")?).ok_or("own is not a map")?,
            figures: Figures {
                rejected: figures.count("rejected")?,
                gone: figures.count("gone")?,
                recounted: figures.count("recounted")?,
                skipped: figures.count("skipped")?,
            },
            others: records(reply.get("others")?, |other| {
                Some(Other {
                    duration: u64::try_from(int(other.get("duration").ok()?)?).ok()?,
                    sums: other.bytes("sums").ok()?.to_vec(),
                })
            })
            .ok_or("the others are not a list")?,
            resets,
            trials: records(reply.get("trials")?, |trial| {
                Some(Grant {
                    service: trial.bytes("service").ok()?.to_vec(),
                    failure: int(trial.get("failure").ok()?)?,
                    lease: int(trial.get("lease").ok()?)?,
                })
            })
            .ok_or("the trials are not a list")?,
        })
    }
}

/// The entries of a map read, by name. cmsgpack packs an empty Lua table as an empty array,
/// whatever it was for: that is an empty map too.
struct Fields<'v>(&'v [(Value, Value)]);

impl<'v> Fields<'v> {
    fn of(value: &'v Value) -> Option<Self> {
        match value {
            Value::Map(entries) => Some(Self(entries)),
            Value::Array(items) if items.is_empty() => Some(Self(&[])),
            _ => None,
        }
    }

    fn get(&self, name: &str) -> Result<&'v Value, String> {
        self.0
            .iter()
            .find(|(key, _)| matches!(key, Value::Bytes(key) if key == name.as_bytes()))
            .map(|(_, value)| value)
            .ok_or_else(|| format!("no field \"{name}\""))
    }

    fn bytes(&self, name: &str) -> Result<&'v [u8], String> {
        match self.get(name)? {
            Value::Bytes(bytes) => Ok(bytes),
            _ => Err(format!("the field \"{name}\" is not a string")),
        }
    }

    fn count(&self, name: &str) -> Result<u64, String> {
        int(self.get(name)?)
            .and_then(|n| u64::try_from(n).ok())
            .ok_or_else(|| format!("the figure \"{name}\" is not a count"))
    }
}

fn int(value: &Value) -> Option<i64> {
    match value {
        Value::Int(n) => Some(*n),
        _ => None,
    }
}

/// The items of a list, each made something of by `record` from its fields: those it makes
/// nothing of are left out. `None` when it is not a list (an empty map is one: see `Fields`).
fn records<T>(value: &Value, record: impl Fn(&Fields<'_>) -> Option<T>) -> Option<Vec<T>> {
    let items: &[Value] = match value {
        Value::Array(items) => items,
        Value::Map(entries) if entries.is_empty() => &[],
        _ => return None,
    };
    Some(items.iter().filter_map(|item| record(&Fields::of(item)?)).collect())
}

/// The entries of a map of packed rows by bucket name, but those whose name is not a bucket's.
fn by_bucket(value: &Value) -> Option<Vec<(Bucket, Vec<u8>)>> {
    let fields = Fields::of(value)?;
    Some(
        fields
            .0
            .iter()
            .filter_map(|entry| match entry {
                (Value::Bytes(field), Value::Bytes(rows)) => Some((fleet::parse_bucket_field(field)?, rows.clone())),
                _ => None,
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::SCRIPT;

    fn bucket(duration: u64, start: u64) -> Bucket {
        Bucket { duration, start }
    }

    /// A request with something in every field.
    fn request() -> Request {
        Request {
            host: "00000000000000ab".into(),
            sequence: 42,
            born: "1700000000.5.00000000000000ab".into(),
            version: 7,
            full: true,
            readers: vec![Reader { duration: 1, seconds: 70 }],
            live: 4,
            updates: vec![Update { bucket: bucket(1, 1_700_000_000), counts: vec![(b"svc".to_vec(), [1, 2, 3])] }],
            resets: vec![Reset { service: b"svc".to_vec(), mask: 0b010 }],
            bound: 5,
            check: false,
            durations: vec![10, 60],
            recount: vec![bucket(1, 1_699_999_999)],
            applied: 41,
            newest: Some(bucket(1, 1_700_000_000)),
            renew: false,
            reset_times: vec![ResetTime { service: b"svc".to_vec(), time: 1_700_000_000_123 }],
            resets_known: -1,
            trials: vec![Trial { service: b"svc".to_vec(), failure: 1_699_999_990_000, wants: true, lease: 3000 }],
            clock: -250,
            taken: vec![ResetTime { service: b"svc".to_vec(), time: 1_699_000_000_000 }],
        }
    }

    fn key(name: &str) -> Value {
        Value::Bytes(name.as_bytes().to_vec())
    }

    fn map(entries: &[(&str, Value)]) -> Value {
        Value::Map(entries.iter().map(|(name, value)| (key(name), value.clone())).collect())
    }

    #[test]
    fn a_request_is_a_map_of_every_field_by_name() {
        let Some(Value::Map(entries)) = packed::read(&request().encode()) else { panic!("not a map") };
        let field = |name: &str| entries.iter().find(|(k, _)| *k == key(name)).map(|(_, v)| v.clone());
        assert_eq!(entries.len(), 21);
        assert_eq!(field("host"), Some(key("00000000000000ab")));
        assert_eq!(field("version"), Some(Value::Int(7)));
        assert_eq!(field("full"), Some(Value::Other), "a boolean");
        assert_eq!(field("newest"), Some(key("1:1700000000")));
        assert_eq!(field("clock"), Some(Value::Int(-250)));
        assert_eq!(field("durations"), Some(Value::Array(vec![Value::Int(10), Value::Int(60)])));
        assert_eq!(field("recount"), Some(Value::Array(vec![key("1:1699999999")])));
        assert_eq!(
            field("updates"),
            Some(Value::Array(vec![map(&[
                ("bucket", key("1:1700000000")),
                ("counts", Value::Bytes(packed::pack_rows(&vec![(b"svc".to_vec(), [1, 2, 3])]))),
            ])]))
        );
        assert_eq!(
            field("taken"),
            Some(Value::Array(vec![map(&[("service", key("svc")), ("time", Value::Int(1_699_000_000_000))])]))
        );
        let Some(Value::Array(trials)) = field("trials") else { panic!("no trials") };
        assert_eq!(trials.len(), 1);
        let empty = Request::default().encode();
        let Some(Value::Map(entries)) = packed::read(&empty) else { panic!("not a map") };
        assert_eq!(entries.len(), 21);
        assert!(entries.iter().any(|entry| *entry == (key("newest"), key(""))), "no newest bucket: \"\"");
    }

    /// The names the script reads of the request (`request_field('name', …)`,
    /// `request_list('name', …)`).
    fn names_read_by_the_script() -> Vec<String> {
        let mut names: Vec<String> = ["request_field('", "request_list('"]
            .iter()
            .flat_map(|call| SCRIPT.split(call).skip(1).map(|rest| rest.split('\'').next().unwrap_or("").to_string()))
            .collect();
        names.sort();
        names.dedup();
        names
    }

    #[test]
    fn the_script_reads_every_field_the_sidecar_sends_and_no_other() {
        let Some(Value::Map(entries)) = packed::read(&request().encode()) else { panic!("not a map") };
        let mut sent: Vec<String> = entries
            .iter()
            .map(|(name, _)| match name {
                Value::Bytes(name) => String::from_utf8(name.clone()).unwrap(),
                other => panic!("a key {other:?}"),
            })
            .collect();
        sent.sort();
        assert_eq!(names_read_by_the_script(), sent);
    }

    #[test]
    fn the_script_answers_every_field_the_sidecar_reads() {
        // The table the script packs as its reply, in its one function `reply`.
        let reply = SCRIPT.split("local function reply(").nth(1).and_then(|rest| rest.split("\nend").next()).unwrap();
        for name in
            ["status", "time", "born", "version", "sequence", "sums", "own", "figures", "others", "resets", "trials"]
        {
            assert!(reply.contains(&format!(" {name} = ")), "the script's reply has no {name}: {reply}");
        }
        for figure in ["rejected", "gone", "recounted", "skipped"] {
            assert!(
                SCRIPT.contains(&format!("figures.{figure} = figures.{figure} + 1")),
                "the script counts no {figure}"
            );
        }
    }

    /// A value packed by `write`.
    fn packed(write: impl FnOnce(&mut Writer) -> &mut Writer) -> Vec<u8> {
        let mut out = Writer::default();
        write(&mut out);
        out.bytes
    }

    /// A reply as cmsgpack packs it (`sums` and `own` as maps, an empty table as an empty array),
    /// but the field `without`.
    fn reply_bytes(status: &[u8], resets: Option<(i64, &[u8])>, without: &str) -> Vec<u8> {
        let fields = [
            ("status", packed(|out| out.bytes(status))),
            ("time", packed(|out| out.uint(1_700_000_000_456))),
            ("born", packed(|out| out.bytes(b"1700000000.5.ab"))),
            ("version", packed(|out| out.uint(8))),
            ("sequence", packed(|out| out.uint(42))),
            (
                "sums",
                packed(|out| out.map(2).bytes(b"1:1700000000").bytes(b"rows").bytes(b"not a bucket").bytes(b"rows")),
            ),
            ("own", packed(|out| out.array(0))),
            (
                "figures",
                packed(|out| {
                    out.map(4).bytes(b"skipped").uint(4).bytes(b"gone").uint(2);
                    out.bytes(b"rejected").uint(1).bytes(b"recounted").uint(3)
                }),
            ),
            (
                "others",
                packed(|out| {
                    out.array(2).map(2).bytes(b"duration").uint(60).bytes(b"sums").bytes(b"rows");
                    // A duration Redis held past 2^63, which cmsgpack packs as a float: left out.
                    out.map(2).bytes(b"duration");
                    out.bytes.extend_from_slice(&[0xcb, 0x43, 0xe0, 0, 0, 0, 0, 0, 0]);
                    out.bytes(b"sums").bytes(b"rows")
                }),
            ),
            (
                "resets",
                packed(|out| match resets {
                    Some((version, list)) => out.map(2).bytes(b"version").int(version).bytes(b"list").bytes(list),
                    None => out.array(0),
                }),
            ),
            (
                "trials",
                packed(|out| {
                    out.array(1).map(3).bytes(b"service").bytes(b"svc");
                    out.bytes(b"lease").uint(0).bytes(b"failure").uint(9000)
                }),
            ),
        ];
        let kept: Vec<_> = fields.into_iter().filter(|(name, _)| *name != without).collect();
        packed(|out| {
            out.map(kept.len());
            for (name, value) in kept {
                out.bytes(name.as_bytes()).bytes.extend_from_slice(&value);
            }
            out
        })
    }

    #[test]
    fn a_reply_reads_by_name() {
        let reply = Reply::decode(&reply_bytes(b"ok", None, "")).unwrap();
        assert_eq!(
            reply,
            Reply {
                status: Status::Ok,
                time: 1_700_000_000_456,
                born: "1700000000.5.ab".into(),
                version: 8,
                sequence: 42,
                sums: vec![(bucket(1, 1_700_000_000), b"rows".to_vec())],
                own: Vec::new(),
                figures: Figures { rejected: 1, gone: 2, recounted: 3, skipped: 4 },
                others: vec![Other { duration: 60, sums: b"rows".to_vec() }],
                resets: None,
                trials: vec![Grant { service: b"svc".to_vec(), failure: 9000, lease: 0 }],
            }
        );
        let reply = Reply::decode(&reply_bytes(b"unwritten: OOM command not allowed", Some((3, b"z")), "")).unwrap();
        assert_eq!(reply.status, Status::Unwritten("OOM command not allowed".into()));
        assert_eq!(reply.resets, Some(Resets { version: Some(3), list: b"z".to_vec() }));
        assert_eq!(Reply::decode(&reply_bytes(b"stale", None, "")).unwrap().status, Status::Stale);
    }

    #[test]
    fn a_reply_without_a_field_or_of_another_shape_is_malformed() {
        for name in
            ["status", "time", "born", "version", "sequence", "sums", "own", "figures", "others", "resets", "trials"]
        {
            let error = Reply::decode(&reply_bytes(b"ok", None, name)).unwrap_err();
            assert!(error.contains(name), "{name}: {error}");
        }
        assert!(Reply::decode(&reply_bytes(b"fine", None, "")).unwrap_err().contains("fine"));
        let mut list = Writer::default();
        list.array(2).bytes(b"ok").uint(1);
        assert_eq!(Reply::decode(&list.bytes).unwrap_err(), "not a map");
        assert_eq!(Reply::decode(b"\x91").unwrap_err(), "not MessagePack");
    }
}
