//! The sync script (`sync.lua`) called directly, as the sidecar calls it, against a real
//! redis-server this test starts on the loopback and stops by pid: what a reply grants against
//! what Redis holds after the call.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ganesha_shm_core::fleet::{self, Bucket};
use ganesha_shm_fleet::packed;
use ganesha_shm_fleet::protocol::{Reply, Request, Trial, Update};
use ganesha_shm_fleet::sync::SCRIPT;

/// A redis-server of this test's own, stopped by pid when dropped.
struct Server {
    child: Child,
    connection: redis::Connection,
}

impl Server {
    fn start() -> Server {
        let port = free_port();
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &port.to_string(), "--save", "", "--appendonly", "no"])
            .args(["--maxmemory-policy", "noeviction"])
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server (apt-get install redis-server) starts");
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).expect("a client");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match client.get_connection() {
                Ok(connection) => return Server { child, connection },
                Err(error) if Instant::now() > deadline => {
                    panic!("redis-server on port {port} answers no ping: {error}")
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }

    /// Redis's time, in unix milliseconds.
    fn now_ms(&mut self) -> u64 {
        let (seconds, micros): (u64, u64) = redis::cmd("TIME").query(&mut self.connection).expect("TIME");
        seconds * 1000 + micros / 1000
    }

    fn call(&mut self, key: &[u8], request: &Request) -> Reply {
        let reply: Vec<u8> = redis::cmd("EVAL")
            .arg(SCRIPT)
            .arg(1)
            .arg(key)
            .arg(request.encode())
            .query(&mut self.connection)
            .expect("the script runs");
        Reply::decode(&reply).expect("the script's reply")
    }

    /// The holder and the lease of `service`'s trial as the shard holds them.
    fn trial_held(&mut self, key: &[u8], service: &[u8]) -> Option<(Vec<u8>, i64)> {
        let blob: Option<Vec<u8>> = redis::cmd("HGET").arg(key).arg("t").query(&mut self.connection).expect("HGET");
        let Some(packed::Value::Array(flat)) = packed::read(&blob?) else { return None };
        flat.chunks(4).find_map(|entry| match entry {
            [packed::Value::Bytes(name), _, packed::Value::Bytes(holder), packed::Value::Int(lease)]
                if name == service =>
            {
                Some((holder.clone(), *lease))
            }
            _ => None,
        })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // SAFETY: `kill` on the pid of the child this test started and has not reaped.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

/// A loopback port nothing listens on now.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port of the loopback");
    listener.local_addr().expect("its address").port()
}

/// A call of `host` that sends nothing but the trial of `service`, with the shard's birth and
/// version it holds.
fn trial_call(host: u64, sequence: u64, born: &str, version: i64, service: &[u8], failure: u64, lease: u64) -> Request {
    Request {
        host: fleet::host_id_text(host),
        sequence,
        born: born.into(),
        version,
        live: 4,
        bound: fleet::CLOCK_BOUND_S,
        resets_known: -1,
        trials: vec![Trial { service: service.to_vec(), failure, wants: true, lease }],
        ..Request::default()
    }
}

/// Redis out of memory refuses the write of a lease: the reply then grants none, for another
/// host that asks would take the same lease. Once Redis has memory again, the lease is granted
/// and held.
#[test]
fn a_lease_redis_refused_to_keep_is_granted_to_nobody() {
    let mut server = Server::start();
    let key = fleet::shard_key("script-test", 0);
    let service = b"ganesha_svc".as_slice();
    // Both hosts' first calls publish a failure each: the hash and their records.
    let now_s = server.now_ms() / 1000;
    let bucket = Bucket { duration: 10, start: now_s / 10 * 10 };
    let first = |server: &mut Server, host, born: &str| {
        let updates = vec![Update { bucket, counts: vec![(service.to_vec(), [0, 1, 0])] }];
        let request = Request {
            full: true,
            updates,
            newest: Some(bucket),
            trials: Vec::new(),
            ..trial_call(host, 1, born, -1, service, 0, 0)
        };
        server.call(&key, &request)
    };
    let made = first(&mut server, 1, "");
    let made = first(&mut server, 2, &made.born.clone());
    let (born, version) = (made.born.clone(), made.version);
    assert!(!born.is_empty(), "the hash is made: {made:?}");
    let failure = server.now_ms() - 10_000;

    // Host 1 takes the trial, on a lease of a millisecond.
    let taken = server.call(&key, &trial_call(1, 2, &born, version, service, failure, 1));
    let lease = taken.trials.first().map_or(0, |grant| grant.lease);
    assert!(lease > 0, "host 1 is granted the trial: {:?}", taken.trials);
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.now_ms() <= lease as u64 {
        assert!(Instant::now() < deadline, "Redis's clock passes the lease");
    }

    // Out of memory: host 2's call takes the lease that ended, and Redis refuses to keep it.
    let _: () =
        redis::cmd("CONFIG").arg("SET").arg("maxmemory").arg("1").query(&mut server.connection).expect("CONFIG SET");
    let refused = server.call(&key, &trial_call(2, 2, &born, version, service, failure, 3_000));
    let held = server.trial_held(&key, service);
    assert_eq!(
        held.as_ref().map(|(holder, _)| holder.as_slice()),
        Some(fleet::host_id_text(1).as_bytes()),
        "Redis kept host 1's record"
    );
    assert_eq!(
        refused.trials.first().map(|grant| grant.lease),
        Some(0),
        "no lease granted that Redis does not hold: {:?}, Redis holds {held:?}",
        refused.trials
    );

    // Memory again: the lease is granted, and it is the one Redis holds.
    let _: () =
        redis::cmd("CONFIG").arg("SET").arg("maxmemory").arg("0").query(&mut server.connection).expect("CONFIG SET");
    let granted = server.call(&key, &trial_call(2, 3, &born, version, service, failure, 3_000));
    let lease = granted.trials.first().map_or(0, |grant| grant.lease);
    assert!(lease > 0, "host 2 is granted the trial: {:?}", granted.trials);
    assert_eq!(server.trial_held(&key, service), Some((fleet::host_id_text(2).into_bytes(), lease)));
}
