//! The link between a simulated host's sync and the simulation's redis-server: the sync's calls
//! run at the simulation's time (the script's copy reads Redis's time from its arguments), and a
//! call may be dropped before it is sent, run with its reply lost, held and delivered after later
//! calls, or delivered twice.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use ganesha_shm_fleet::link::Link;
use redis::{Cmd, ErrorKind, RedisError, RedisResult, Value};

/// What the link does to the next round trip of its host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkFault {
    /// Never sent: the sync sees an error.
    Drop,
    /// Run, and its reply lost: the sync sees an error.
    LoseReply,
    /// Held, and run later, after calls sent since (`SimLink::deliver_held`): the sync sees an
    /// error.
    Hold,
    /// Run twice: the sync sees the first reply.
    Twice,
}

/// The redis-server every host of a history shares, and Redis's time (unix milliseconds), which
/// the simulation moves.
pub struct Server {
    pub connection: RefCell<redis::Connection>,
    pub time_ms: Cell<u64>,
    /// The SHA1 of the simulation's copy of the script.
    pub script: String,
    /// The copy itself, loaded again after a SCRIPT FLUSH.
    pub source: String,
}

impl Server {
    /// Connects to the redis-server on the loopback at `port`, and loads `source`.
    pub fn connect(port: u16, source: &str) -> Result<Self, String> {
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).map_err(|e| e.to_string())?;
        let mut connection = client.get_connection().map_err(|e| format!("cannot connect to 127.0.0.1:{port}: {e}"))?;
        let script: String = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(source)
            .query(&mut connection)
            .map_err(|e| format!("cannot load the script: {e}"))?;
        Ok(Self { connection: RefCell::new(connection), time_ms: Cell::new(0), script, source: source.to_string() })
    }

    /// Runs one command on the server, outside any host's link (the simulation's faults).
    pub fn command(&self, command: &Cmd) -> RedisResult<Value> {
        command.query(&mut *self.connection.borrow_mut())
    }

    /// Loads the script again (after SCRIPT FLUSH, a host's reconnection does).
    pub fn load_script(&self) -> RedisResult<()> {
        let sha: String = redis::cmd("SCRIPT").arg("LOAD").arg(&self.source).query(&mut *self.connection.borrow_mut())?;
        debug_assert_eq!(sha, self.script);
        Ok(())
    }

    /// `commands` with Redis's time of now added to each call of the script.
    fn timed(&self, commands: &[Cmd]) -> Vec<Cmd> {
        let time_ms = self.time_ms.get();
        commands
            .iter()
            .map(|command| {
                let mut command = command.clone();
                if matches!(command.args_iter().next(), Some(redis::Arg::Simple(b"EVALSHA"))) {
                    command.arg(time_ms / 1000).arg(time_ms % 1000 * 1000);
                }
                command
            })
            .collect()
    }

    fn pipeline(&self, commands: &[Cmd]) -> RedisResult<Vec<Value>> {
        let mut pipe = redis::pipe();
        for command in self.timed(commands) {
            pipe.add_command(command);
        }
        pipe.query(&mut *self.connection.borrow_mut())
    }
}

/// One host's link.
pub struct SimLink {
    pub server: Rc<Server>,
    /// The fault of the next round trip, if any.
    pub fault: Option<LinkFault>,
    /// Round trips held, to run later.
    pub held: Vec<Vec<Cmd>>,
}

impl SimLink {
    pub fn new(server: Rc<Server>) -> Self {
        Self { server, fault: None, held: Vec::new() }
    }

    /// Runs the round trips held, at Redis's time of now; their replies go nowhere.
    pub fn deliver_held(&mut self) -> usize {
        let held = std::mem::take(&mut self.held);
        for commands in &held {
            let _ = self.server.pipeline(commands);
        }
        held.len()
    }
}

fn failed(what: &'static str) -> RedisError {
    RedisError::from((ErrorKind::Io, what))
}

impl Link for SimLink {
    fn script(&self) -> &str {
        &self.server.script
    }

    fn time(&mut self) -> RedisResult<Value> {
        let time_ms = self.server.time_ms.get();
        Ok(Value::Array(vec![
            Value::BulkString((time_ms / 1000).to_string().into_bytes()),
            Value::BulkString((time_ms % 1000 * 1000).to_string().into_bytes()),
        ]))
    }

    fn run(&mut self, commands: Vec<Cmd>) -> RedisResult<Vec<Value>> {
        match self.fault.take() {
            None => self.server.pipeline(&commands),
            Some(LinkFault::Drop) => Err(failed("the call was dropped before it was sent")),
            Some(LinkFault::LoseReply) => {
                let _ = self.server.pipeline(&commands);
                Err(failed("the reply was lost"))
            }
            Some(LinkFault::Hold) => {
                self.held.push(commands);
                Err(failed("the call is held, to be delivered late"))
            }
            Some(LinkFault::Twice) => {
                let first = self.server.pipeline(&commands);
                let _ = self.server.pipeline(&commands);
                first
            }
        }
    }
}
