//! The defenses of fleet mode the simulation can switch off (`--mutate NAME`), one at a time: with
//! any one off, it must break an invariant within 1,000 seeds. Those written in Rust are switched
//! off in this build alone (`ganesha_shm_core::defense`); those of the script, in the simulation's
//! own copy of it, by replacing the one passage that makes them.

use ganesha_shm_core::defense::{self, Defense};

pub enum Switch {
    Rust(Defense),
    /// In the script: `find` (found exactly once) replaced by `replace`.
    Script { find: &'static str, replace: &'static str },
}

pub struct Mutation {
    pub name: &'static str,
    /// The defense switched off.
    pub defense: &'static str,
    pub switch: Switch,
}

impl Mutation {
    pub fn switch_off(&self) {
        if let Switch::Rust(defense) = self.switch {
            defense::switch_off(defense);
        }
    }
}

pub const MUTATIONS: &[Mutation] = &[
    Mutation {
        name: "reset-clock",
        defense: "the reset's clock: a reset is dated on Redis's clock, not on its host's",
        switch: Switch::Rust(Defense::ResetClock),
    },
    Mutation {
        name: "reset-monotonic",
        defense: "the reset's monotonic time: a step of its host's clock before or after a reset does not move its date",
        switch: Switch::Rust(Defense::ResetMonotonic),
    },
    Mutation {
        name: "reset-log",
        defense: "the reset kept by the segment: a reset made while the sidecar was down is shared",
        switch: Switch::Rust(Defense::ResetLog),
    },
    Mutation {
        name: "sequence",
        defense: "the per-host sequence: a late, repeated or replayed call changes nothing",
        switch: Switch::Script { find: "if stored_sequence >= sequence then", replace: "if false then" },
    },
    Mutation {
        name: "birth",
        defense: "the shard's birth: a host that holds another birth (Redis lost the shard) publishes all it holds",
        switch: Switch::Script {
            find: "if not full and (born or '') ~= known_born then",
            replace: "if false and (born or '') ~= known_born then",
        },
    },
    Mutation {
        name: "counts-only-grow",
        defense: "the merge: a host's counts are set to the larger of what it sends and what Redis holds",
        switch: Switch::Script {
            find: "if before > rows[j + c] and not is_reset(mask, c) then",
            replace: "if false and not is_reset(mask, c) then",
        },
    },
    Mutation {
        name: "trial-lease",
        defense: "the trial's lease: a host takes the trial only when nobody holds it, or the holder's lease ended",
        switch: Switch::Script {
            find: "(entry[2] == '' or entry[2] == host or entry[3] < now_ms)",
            replace: "(entry[2] == '' or entry[2] == host or true)",
        },
    },
    Mutation {
        name: "lease-refused",
        defense: "a lease Redis refused to keep (out of memory) is granted to nobody",
        switch: Switch::Script {
            find: "  if type(written) == 'table' and written.err then\n    for _, out in ipairs(trials_out) do",
            replace: "  if false then\n    for _, out in ipairs(trials_out) do",
        },
    },
    Mutation {
        name: "lost-sums-reset",
        defense: "a reset takes the writers' counts of every bucket whose sums were lost, not only of those the sums name",
        switch: Switch::Script { find: "    if not rows then\n      hit[#hit + 1] = at[f]\n    end\n", replace: "" },
    },
    Mutation {
        name: "lost-sums-read",
        defense: "sums lost in a bucket a call reads are recounted by that call",
        switch: Switch::Script {
            find: "    if not value then\n      lost[#lost + 1] = string.sub(read[r], 3)",
            replace: "    if false then\n      lost[#lost + 1] = string.sub(read[r], 3)",
        },
    },
    Mutation {
        name: "reset-hides",
        defense: "a reset made on a host hides the fleet's counts of what it covers there until the sidecar shared it",
        switch: Switch::Rust(Defense::ResetHidesFleet),
    },
    Mutation {
        name: "staleness",
        defense: "the staleness rule: the fleet's counts decide only while the last sync is two intervals old at most",
        switch: Switch::Rust(Defense::Staleness),
    },
    Mutation {
        name: "copy-taken",
        defense: "the copy taken: the first process to map a copied segment makes it another host before anything counts in it",
        switch: Switch::Rust(Defense::CopyTaken),
    },
    Mutation {
        name: "copy-hands-all",
        defense: "the copy taken hands over the buckets its ring holds ahead of a clock stepped back past the export",
        switch: Switch::Rust(Defense::CopyHandsAll),
    },
    Mutation {
        name: "clock-figures",
        defense: "the figures kept: a sidecar that starts stamps each bucket by the figure it was first shared under",
        switch: Switch::Rust(Defense::ClockFigures),
    },
];

/// The line of the script that reads Redis's time, and what the simulation's copy reads instead:
/// the time the simulation gives each call, after the request.
const REDIS_TIME: &str = "  local time = redis.call('TIME')\n";
const SIMULATED_TIME: &str = "  local time = { ARGV[2], ARGV[3] }\n";

/// The simulation's copy of the script: Redis's time is the simulation's, and the defenses of
/// `mutations` are off.
pub fn script(mutations: &[&Mutation]) -> Result<String, String> {
    let mut script = replaced(ganesha_shm_fleet::sync::SCRIPT, REDIS_TIME, SIMULATED_TIME)?;
    for mutation in mutations {
        if let Switch::Script { find, replace } = mutation.switch {
            script = replaced(&script, find, replace)?;
        }
    }
    Ok(script)
}

fn replaced(script: &str, find: &str, replace: &str) -> Result<String, String> {
    match script.matches(find).count() {
        1 => Ok(script.replacen(find, replace, 1)),
        n => Err(format!("the script holds {n} times, not once, the passage the simulation replaces: {find:?}")),
    }
}
