//! The connection to the fleet's Redis: one server, a Redis Cluster, or the master that
//! Sentinel names; over TCP, TLS or a Unix socket. Every step has a timeout, the Sentinels'
//! too, so that a hung server stalls one sync and never the sidecar.

use redis::{Cmd, ConnectionAddr, ConnectionInfo, ErrorKind, IntoConnectionInfo, RedisError, RedisResult, Value};

use crate::config::{Config, Topology};

/// What a sync needs of the fleet's Redis: its time, and commands run in order, with the sync's
/// script loaded. The sidecar's is [`RedisLink`]; the fleet's simulation puts a link of faults
/// (calls dropped, replies lost, calls held and delivered late, or twice) in its place.
pub trait Link {
    /// The SHA1 of the sync's script, as Redis gave it when it was loaded.
    fn script(&self) -> &str;
    /// Redis's time (`TIME`'s reply).
    fn time(&mut self) -> RedisResult<Value>;
    /// Runs `commands` in one round trip; their replies in order.
    fn run(&mut self, commands: Vec<Cmd>) -> RedisResult<Vec<Value>>;
}

/// A connection to the fleet's Redis, with a script loaded (into every primary of a cluster),
/// so that each call sends its hash alone.
pub struct RedisLink {
    connection: Connection,
    /// The script's SHA1, as Redis gave it when it was loaded.
    pub script: String,
    /// Where it is connected, for the log: the master a Sentinel named, else nothing more than
    /// the configuration says.
    pub master: Option<String>,
    /// What Redis says of its memory (`INFO memory`, which managed services allow), when it says.
    pub memory: Option<Memory>,
}

/// Redis's memory limit and what it does when it reaches it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Memory {
    /// Bytes; 0 for no limit.
    pub maxmemory: u64,
    /// `noeviction`, `allkeys-lru`, `volatile-ttl`, ….
    pub policy: String,
}

impl Memory {
    /// From the text of `INFO memory` (a cluster's nodes each give theirs; the first is taken).
    fn parse(info: &str) -> Option<Self> {
        let field = |name: &str| {
            info.lines().find_map(|line| line.strip_prefix(name).and_then(|rest| rest.strip_prefix(':'))).map(str::trim)
        };
        Some(Self { maxmemory: field("maxmemory")?.parse().ok()?, policy: field("maxmemory_policy")?.to_string() })
    }
}

enum Connection {
    Server(redis::Connection),
    Cluster(redis::cluster::ClusterConnection),
}

impl RedisLink {
    /// Connects and loads `script`. `sentinel_first` is the Sentinel to ask first (the one that
    /// answered last), updated to the one that named the master.
    pub fn connect(config: &Config, script: &str, sentinel_first: &mut usize) -> RedisResult<Self> {
        let load = redis::cmd("SCRIPT").arg("LOAD").arg(script).to_owned();
        let certificates = certificates(config)?;
        match &config.topology {
            Topology::Cluster => {
                let mut builder = redis::cluster::ClusterClient::builder(config.urls())
                    .connection_timeout(config.connect_timeout)
                    .response_timeout(config.command_timeout)
                    .retries(0);
                if let Some(certificates) = certificates {
                    builder = builder.certs(certificates);
                }
                let mut connection = builder.build()?.get_connection()?;
                connection.set_read_timeout(Some(config.command_timeout))?;
                connection.set_write_timeout(Some(config.command_timeout))?;
                let script = load.query(&mut connection)?;
                let memory = info_memory(&mut connection);
                Ok(Self { connection: Connection::Cluster(connection), script, master: None, memory })
            }
            Topology::Server => {
                let info = config.redis.as_str().into_connection_info()?;
                let mut connection = open(config, info, certificates.as_ref())?;
                let script = load.query(&mut connection)?;
                let memory = info_memory(&mut connection);
                Ok(Self { connection: Connection::Server(connection), script, master: None, memory })
            }
            Topology::Sentinel { master, user, password } => {
                let (mut connection, address) = sentinel_master(
                    config,
                    master,
                    user.as_deref(),
                    password.as_deref(),
                    certificates.as_ref(),
                    sentinel_first,
                )?;
                let script = load.query(&mut connection)?;
                let memory = info_memory(&mut connection);
                Ok(Self { connection: Connection::Server(connection), script, master: Some(address), memory })
            }
        }
    }

}

impl Link for RedisLink {
    fn script(&self) -> &str {
        &self.script
    }

    /// Redis's time (`TIME`), of any node of a cluster: a command of no key, which a cluster's
    /// pipeline cannot route.
    fn time(&mut self) -> RedisResult<Value> {
        match &mut self.connection {
            Connection::Server(connection) => redis::cmd("TIME").query(connection),
            Connection::Cluster(connection) => redis::cmd("TIME").query(connection),
        }
    }

    /// Runs `commands` in one pipeline (one round trip per node for a cluster); their replies in
    /// order.
    fn run(&mut self, commands: Vec<Cmd>) -> RedisResult<Vec<Value>> {
        if commands.is_empty() {
            return Ok(Vec::new());
        }
        match &mut self.connection {
            Connection::Server(connection) => {
                let mut pipe = redis::pipe();
                for command in commands {
                    pipe.add_command(command);
                }
                pipe.query(connection)
            }
            Connection::Cluster(connection) => {
                let mut pipe = redis::cluster::cluster_pipe();
                for command in commands {
                    pipe.add_command(command);
                }
                pipe.query(connection)
            }
        }
    }
}

/// What `INFO memory` says, on any connection; nothing when it is refused (an ACL without
/// `+info`) or says nothing of it.
fn info_memory(connection: &mut impl redis::ConnectionLike) -> Option<Memory> {
    let info: String = redis::cmd("INFO").arg("memory").query(connection).ok()?;
    Memory::parse(&info)
}

/// The CA, certificate and key files, read at each connection so that renewed ones are used
/// without a restart; none without TLS files.
fn certificates(config: &Config) -> RedisResult<Option<redis::TlsCertificates>> {
    let read = |path: &std::path::Path, what: &'static str| {
        std::fs::read(path).map_err(|error| {
            RedisError::from((ErrorKind::InvalidClientConfig, what, format!("{}: {error}", path.display())))
        })
    };
    let files = &config.tls;
    if files.ca.is_none() && files.cert.is_none() {
        return Ok(None);
    }
    let root_cert = files.ca.as_deref().map(|path| read(path, "cannot read the TLS CA file")).transpose()?;
    let client_tls = match (&files.cert, &files.key) {
        (Some(cert), Some(key)) => Some(redis::ClientTlsConfig {
            client_cert: read(cert, "cannot read the TLS certificate file")?,
            client_key: read(key, "cannot read the TLS key file")?,
        }),
        _ => None,
    };
    Ok(Some(redis::TlsCertificates { client_tls, root_cert }))
}

/// A connection to one server, with the timeouts of `config`.
fn open(
    config: &Config,
    info: ConnectionInfo,
    certificates: Option<&redis::TlsCertificates>,
) -> RedisResult<redis::Connection> {
    let client = match certificates {
        Some(certificates) if matches!(info.addr(), ConnectionAddr::TcpTls { .. }) => {
            redis::Client::build_with_tls(info, certificates.clone())?
        }
        _ => redis::Client::open(info)?,
    };
    let connection = client.get_connection_with_timeout(config.connect_timeout)?;
    connection.set_read_timeout(Some(config.command_timeout))?;
    connection.set_write_timeout(Some(config.command_timeout))?;
    Ok(connection)
}

/// The master that the Sentinels name `master`, connected, with its address: each Sentinel is
/// asked in turn, from `first`, which becomes the one that answered.
fn sentinel_master(
    config: &Config,
    master: &str,
    user: Option<&str>,
    password: Option<&str>,
    certificates: Option<&redis::TlsCertificates>,
    first: &mut usize,
) -> RedisResult<(redis::Connection, String)> {
    let sentinels = config.urls();
    let mut failures = Vec::new();
    for turn in 0..sentinels.len() {
        let index = (*first + turn) % sentinels.len();
        match master_named_by(config, sentinels[index], master, (user, password), certificates) {
            Ok(found) => {
                *first = index;
                return Ok(found);
            }
            Err(error) => failures.push(format!("{}: {error}", crate::config::redacted(sentinels[index]))),
        }
    }
    Err(RedisError::from((
        ErrorKind::InvalidClientConfig,
        "no Sentinel named a master that answers",
        failures.join("; "),
    )))
}

/// The master that `sentinel` names `master`, connected, with its address. It is reached with
/// the Sentinel's scheme (TLS or not) and TLS files, and the master's own `(user, password)`,
/// and must say it is a master (`ROLE`), since a Sentinel's view may be stale during a failover.
fn master_named_by(
    config: &Config,
    sentinel: &str,
    master: &str,
    (user, password): (Option<&str>, Option<&str>),
    certificates: Option<&redis::TlsCertificates>,
) -> RedisResult<(redis::Connection, String)> {
    let info = sentinel.into_connection_info()?;
    let mut connection = open(config, info.clone(), certificates)?;
    let address: Option<(String, u16)> =
        redis::cmd("SENTINEL").arg("GET-MASTER-ADDR-BY-NAME").arg(master).query(&mut connection)?;
    let Some((host, port)) = address else {
        return Err(RedisError::from((ErrorKind::InvalidClientConfig, "it monitors no master of that name")));
    };
    let address = format!("{host}:{port}");
    let addr = match info.addr() {
        ConnectionAddr::TcpTls { .. } => ConnectionAddr::TcpTls { host, port, insecure: false, tls_params: None },
        _ => ConnectionAddr::Tcp(host, port),
    };
    // The master's credentials, not the Sentinel's.
    let mut settings = redis::RedisConnectionInfo::default();
    if let Some(user) = user {
        settings = settings.set_username(user);
    }
    if let Some(password) = password {
        settings = settings.set_password(password);
    }
    let mut connection =
        open(config, info.set_addr(addr).set_redis_settings(settings), certificates).map_err(|error| {
            RedisError::from((ErrorKind::Io, "cannot connect", format!("the master at {address}: {error}")))
        })?;
    let role: Vec<Value> = redis::cmd("ROLE").query(&mut connection)?;
    match role.first() {
        Some(Value::BulkString(role)) if role == b"master" => Ok((connection, address)),
        _ => Err(RedisError::from((
            ErrorKind::InvalidClientConfig,
            "the server it names is not a master (a failover under way)",
            address,
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::Memory;

    #[test]
    fn info_memory_gives_the_limit_and_the_policy() {
        let info = "# Memory\r\nused_memory:1000\r\nmaxmemory:104857600\r\nmaxmemory_human:100.00M\r\nmaxmemory_policy:allkeys-lru\r\n";
        assert_eq!(Memory::parse(info), Some(Memory { maxmemory: 104_857_600, policy: "allkeys-lru".into() }));
        assert_eq!(Memory::parse("# Memory\r\nused_memory:1000\r\n"), None);
    }
}
