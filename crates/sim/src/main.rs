//! fleet-sim: the fleet's deterministic simulation. Plays histories of a fleet of 2 to 20 hosts,
//! each an in-memory segment with the real store, a clock of its own (skewed within the bound,
//! and stepped) and the real sync (`Syncer`) over a link of faults, against one real
//! redis-server (Redis's own semantics for the script: atomic, never rolled back), under every
//! fault of Redis, of the link and of the hosts; after every step it checks the fleet's
//! invariants against what it knows was counted (`truth`). A seed is a history: replayed, it plays
//! the same steps to the same verdict. `tests/fleet-sim.sh` starts the redis-servers and runs it.
//!
//! Usage: fleet-sim --redis PORT[,PORT…] (--seeds N [--first S] | --seed S[,S…]) [--hosts H]
//!        [--steps N] [--steady-clocks] [--mutate NAME[+NAME…]] [--mutations] [--verbose] [--keep-going]
//!
//! --keep-going plays every seed, and lists those that broke an invariant, one line each.
//! --known-broken S[,S…]: seeds of open defects, expected to break (each said in one line); one
//! that holds fails the run, so that the list only ever shrinks. With --mutate, the seeds that
//! must break with the defense off (`tests/fleet-sim.sh --teeth`).

mod link;
mod mutation;
mod truth;
mod world;

use std::process::ExitCode;
use std::rc::Rc;
use std::time::Instant;

use crate::link::Server;
use crate::world::{Outcome, Plan};

struct Args {
    ports: Vec<u16>,
    first: u64,
    count: u64,
    /// The seeds given one by one (`--seed`), else `count` from `first`.
    listed: Vec<u64>,
    steady_clocks: bool,
    hosts: Option<usize>,
    steps: usize,
    mutate: Option<String>,
    verbose: bool,
    keep_going: bool,
    known_broken: Vec<u64>,
}

fn parse() -> Result<Option<Args>, String> {
    let mut args = Args {
        ports: Vec::new(),
        first: 1,
        count: 1,
        listed: Vec::new(),
        steady_clocks: false,
        hosts: None,
        steps: 300,
        mutate: None,
        verbose: false,
        keep_going: false,
        known_broken: Vec::new(),
    };
    let mut given = std::env::args().skip(1);
    while let Some(flag) = given.next() {
        let mut value = |name: &str| given.next().ok_or_else(|| format!("{name} needs a value"));
        match flag.as_str() {
            "--redis" => {
                args.ports = value("--redis")?
                    .split(',')
                    .map(|port| port.parse().map_err(|_| format!("--redis: {port:?} is not a port")))
                    .collect::<Result<_, _>>()?;
            }
            "--seeds" => args.count = number(&value("--seeds")?, "--seeds")?,
            "--first" => args.first = number(&value("--first")?, "--first")?,
            "--seed" => {
                args.listed =
                    value("--seed")?.split(',').map(|seed| number(seed, "--seed")).collect::<Result<_, _>>()?;
            }
            "--steady-clocks" => args.steady_clocks = true,
            "--hosts" => {
                let hosts = number(&value("--hosts")?, "--hosts")? as usize;
                if !(2..=20).contains(&hosts) {
                    return Err("--hosts: from 2 to 20".into());
                }
                args.hosts = Some(hosts);
            }
            "--steps" => args.steps = number(&value("--steps")?, "--steps")? as usize,
            "--mutate" => args.mutate = Some(value("--mutate")?),
            "--verbose" => args.verbose = true,
            "--keep-going" => args.keep_going = true,
            "--known-broken" => {
                args.known_broken = value("--known-broken")?
                    .split(',')
                    .map(|seed| number(seed, "--known-broken"))
                    .collect::<Result<_, _>>()?;
            }
            "--mutations" => {
                for mutation in mutation::MUTATIONS {
                    println!("{:<18} {}", mutation.name, mutation.defense);
                }
                return Ok(None);
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if args.ports.is_empty() {
        return Err("--redis PORT is required (tests/fleet-sim.sh starts the servers)".into());
    }
    Ok(Some(args))
}

fn number(text: &str, name: &str) -> Result<u64, String> {
    text.parse().map_err(|_| format!("{name}: {text:?} is not a whole number"))
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(Some(args)) => args,
        Ok(None) => return ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("fleet-sim: {error}");
            return ExitCode::from(2);
        }
    };
    // One defense, or several joined by `+` (a defense another covers for).
    let mut mutations = Vec::new();
    for name in args.mutate.iter().flat_map(|names| names.split('+')) {
        match mutation::MUTATIONS.iter().find(|mutation| mutation.name == name) {
            Some(mutation) => mutations.push(mutation),
            None => {
                eprintln!("fleet-sim: no mutation {name:?} (--mutations lists them)");
                return ExitCode::from(2);
            }
        }
    }
    let script = match mutation::script(&mutations) {
        Ok(script) => script,
        Err(error) => {
            eprintln!("fleet-sim: {error}");
            return ExitCode::from(2);
        }
    };
    for mutation in &mutations {
        mutation.switch_off();
    }
    let off = args.mutate.as_ref().map(|names| format!(" with {names} off")).unwrap_or_default();
    let started = Instant::now();
    // One worker a server: each plays every n-th seed, in its own thread, on its own server.
    let seeds: Vec<u64> =
        if args.listed.is_empty() { (args.first..args.first.saturating_add(args.count)).collect() } else { args.listed.clone() };
    let workers: Vec<_> = args
        .ports
        .iter()
        .enumerate()
        .map(|(worker, &port)| {
            // Every n-th seed of the list, n the number of servers.
            let mine: Vec<u64> = seeds.iter().skip(worker).step_by(args.ports.len()).copied().collect();
            let (script, hosts, steps, verbose, steady) = (script.clone(), args.hosts, args.steps, args.verbose, args.steady_clocks);
            let (mutated, keep_going, known_broken) = (args.mutate.clone(), args.keep_going, args.known_broken.clone());
            std::thread::spawn(move || -> ((u64, u64, u64), Vec<String>) {
                let server = match Server::connect(port, &script) {
                    Ok(server) => Rc::new(server),
                    Err(error) => return ((0, 0, 0), vec![error]),
                };
                let mut broken = Vec::new();
                let (mut played, mut steps_played, mut checks) = (0, 0, 0);
                for seed in mine {
                    let plan = Plan::of(seed, hosts, steps, steady);
                    match world::play(&server, &plan) {
                        Outcome::Held { .. } if known_broken.contains(&seed) => broken.push(format!(
                            "seed {seed} held, but is listed as broken: take it off --known-broken"
                        )),
                        Outcome::Broke { invariant, .. } if known_broken.contains(&seed) => match &mutated {
                            Some(names) => println!("fleet-sim: seed {seed} broke with {names} off, as it must: {invariant}"),
                            None => println!("fleet-sim: seed {seed} broke, as known (an open defect): {invariant}"),
                        },
                        Outcome::Held { steps, checks: checked, history } => {
                            if verbose {
                                println!("{}", history.join("\n"));
                            }
                            played += 1;
                            steps_played += steps;
                            checks += checked;
                        }
                        Outcome::Broke { invariant, .. } if keep_going => broken.push(format!("seed {seed}: {invariant}")),
                        Outcome::Broke { history, invariant } => {
                            let broke = format!(
                                "seed {seed} broke an invariant: {invariant}\nhistory of seed {seed}:\n{}\nreplay: bash tests/fleet-sim.sh --seed {seed}{}{}{}",
                                history.join("\n"),
                                hosts.map(|h| format!(" --hosts {h}")).unwrap_or_default(),
                                if steady { " --steady-clocks" } else { "" },
                                mutated.as_ref().map(|m| format!(" --mutate {m}")).unwrap_or_default(),
                            );
                            broken.push(broke);
                            return ((played, steps_played, checks), broken);
                        }
                    }
                }
                ((played, steps_played, checks), broken)
            })
        })
        .collect();
    let (mut played, mut steps, mut checks, mut broke) = (0, 0, 0, Vec::new());
    for worker in workers {
        let ((p, s, c), error) = worker.join().unwrap_or_else(|_| ((0, 0, 0), vec!["a worker panicked".into()]));
        (played, steps, checks) = (played + p, steps + s, checks + c);
        broke.extend(error);
    }
    let elapsed = started.elapsed().as_secs_f64();
    if args.keep_going && !broke.is_empty() {
        broke.sort_by_key(|line| line.split(':').next().and_then(|s| s.trim_start_matches("seed ").parse::<u64>().ok()));
        println!("{}", broke.join("\n"));
        println!("fleet-sim: {} histories broke an invariant{off}, {played} held ({elapsed:.1} s)", broke.len());
        return ExitCode::FAILURE;
    }
    if let Some(first) = broke.first() {
        println!("{first}");
        println!("fleet-sim: an invariant broke{off} ({played} histories held before, {elapsed:.1} s)");
        return ExitCode::FAILURE;
    }
    if played == 0 && args.mutate.is_some() {
        // Only seeds that must break with the defenses off (`--teeth`): each said so above.
        println!("fleet-sim: {} seeds broke{off}, as they must, {elapsed:.1} s", args.known_broken.len());
        return ExitCode::SUCCESS;
    }
    println!(
        "fleet-sim: {played} histories, {steps} steps, {checks} invariant checks, every invariant held{off}{}, {elapsed:.1} s",
        if args.known_broken.is_empty() { String::new() } else { format!(" (and {} known broken)", args.known_broken.len()) }
    );
    ExitCode::SUCCESS
}
