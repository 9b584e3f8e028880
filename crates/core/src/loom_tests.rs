//! Model checking of the table's and the store's protocols with loom (`tests/model-check.sh`).
//!
//! Each scenario runs two or three threads, each a process with its own clock, over a small
//! store (3 counter slots with a ring of 4 buckets, 1 status slot, 1-word keys), and loom runs
//! it under every interleaving of their atomic steps up to `LOOM_MAX_PREEMPTIONS` preemptions,
//! with every value a relaxed load may read. In the "stopped" scenarios one thread stops for
//! ever after its write `n` (as a SIGKILL or a SIGSTOP that never ends would stop it), for
//! every `n` until it completes: which stands for a stop at any step, since a thread stopped
//! after some loads leaves the others nothing a stop right after the write before them does not
//! (see `sync`). After each run the checks are:
//! * the others finished their operations (nothing waits for anything), with the results the
//!   scenario allows;
//! * no key is held by two LIVE slots;
//! * every count reads exactly what was counted into that key, so nothing was lost and
//!   nothing was counted into another key.

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

use crate::circuit::{STATUS_CALMED_DOWN, STATUS_TRIPPED};
use crate::fleet_only::{FleetOnly, FleetOnlyEntry, FleetOnlyShape};
use crate::store::{counter_payload_words, init_counter, init_status, Store, TableKind, STATUS_PAYLOAD_WORDS};
use crate::sync::model::run_stopping_after;
use crate::sync::AtomicU64;
use crate::table::{Shape, Stats, Table, TableError};
use crate::window::{Ring, Window, MAX_BUCKETS};

/// Interleavings explored by all scenarios, printed by `report`.
static EXPLORED: AtomicUsize = AtomicUsize::new(0);

const COUNTER_SLOTS: usize = 3;

/// The counters' ring: for windows of up to [`MAX_BUCKETS`] (2 under the model checker).
const RING: Ring = Ring::for_windows_of(MAX_BUCKETS);

struct Fixture {
    counters: Vec<AtomicU64>,
    statuses: Vec<AtomicU64>,
    stats: Vec<AtomicU64>,
}

fn counter_shape() -> Shape {
    Shape {
        slots: COUNTER_SLOTS,
        capacity: COUNTER_SLOTS,
        payload_words: counter_payload_words(RING, false),
        max_key_length: 6,
    }
}

fn status_shape() -> Shape {
    Shape { slots: 1, capacity: 1, payload_words: STATUS_PAYLOAD_WORDS, max_key_length: 6 }
}

impl Fixture {
    fn new() -> Arc<Self> {
        let words = |n: usize| (0..n).map(|_| AtomicU64::new(0)).collect();
        Arc::new(Self {
            counters: words(counter_shape().words()),
            statuses: words(status_shape().words()),
            stats: words(3),
        })
    }

    /// The store as one process sees it.
    fn store(&self) -> Store<'_> {
        let stats = Stats::new(&self.stats);
        Store::from_tables(
            self.counters(),
            Table::new(&self.statuses, status_shape(), 7, false, stats, init_status),
            RING,
        )
    }

    /// The counter table as one process sees it, for the scenarios of the table's own steps.
    fn counters(&self) -> Table<'_> {
        Table::new(&self.counters, counter_shape(), 7, false, Stats::new(&self.stats), init_counter)
    }
}

/// Two buckets of 2 s: a load at `t` sums the events of `t - 2 - t % 2` to `t`.
fn window() -> Window {
    Window::new(4, Some(2), MAX_BUCKETS).unwrap()
}

/// Runs `scenario` under loom, counting the interleavings: its own count, so that scenarios
/// run on several test threads at once are counted apart.
fn model(name: &str, scenario: impl Fn() + Sync + Send + 'static) {
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&runs);
    loom::model(move || {
        counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        scenario();
    });
    let explored = runs.load(std::sync::atomic::Ordering::Relaxed);
    EXPLORED.fetch_add(explored, std::sync::atomic::Ordering::Relaxed);
    println!("model-check: {name}: {explored} interleavings");
}

/// Preemptions explored around each stop point: `LOOM_STOP_PREEMPTIONS`, 1 unless set (the
/// stopped thread's steps before its stop already multiply the runs by the steps it has).
fn stop_preemptions() -> usize {
    std::env::var("LOOM_STOP_PREEMPTIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(1)
}

/// Runs `scenario(n)` for every stop point `n` of its stopped thread, until a run in which that
/// thread completes: `scenario` returns whether it did, in every interleaving.
fn model_stopping(name: &str, scenario: impl Fn(u32) -> bool + Sync + Send + Copy + 'static) {
    model_stopping_part(name, (0, 1), scenario);
}

/// `model_stopping` for the stop points `n` with `n % parts == part` only, `(part, parts)`:
/// so that the stop points of a long scenario are checked by several tests, one per CPU. Each
/// part goes on until the stopped thread completes at one of its own stop points, so together
/// they check every stop point before the first at which it completes.
fn model_stopping_part(
    name: &str,
    (part, parts): (u32, u32),
    scenario: impl Fn(u32) -> bool + Sync + Send + Copy + 'static,
) {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut stops = 0;
    for n in (part..).step_by(parts as usize) {
        let completed = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let seen = Arc::clone(&completed);
        let counted = Arc::clone(&runs);
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(stop_preemptions());
        builder.check(move || {
            counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if !scenario(n) {
                seen.store(false, std::sync::atomic::Ordering::Relaxed);
            }
        });
        stops += 1;
        if completed.load(std::sync::atomic::Ordering::Relaxed) {
            break;
        }
        assert!(n < 2_000, "{name}: the stopped thread never completes");
    }
    let explored = runs.load(std::sync::atomic::Ordering::Relaxed);
    EXPLORED.fetch_add(explored, std::sync::atomic::Ordering::Relaxed);
    println!(
        "model-check: {name}: {explored} interleavings over {stops} stop points (preemption bound {})",
        stop_preemptions()
    );
}

/// How many slots of the fixture's counter table a load through `store` finds for `key`: the
/// check that one key never has two LIVE slots, made by looking each slot up alone.
fn holders(fixture: &Fixture, key: &[u8]) -> usize {
    let store = fixture.store();
    store.counter_holders(key)
}

/// Two processes whose clocks are 3 s apart create the same key at once, each counting one event.
#[test]
fn two_creators_of_one_key_never_split_it() {
    model("two creators, clocks 3 s apart", || {
        let fixture = Fixture::new();
        let spawn = |now: u64| {
            let fixture = Arc::clone(&fixture);
            loom::thread::spawn(move || fixture.store().increment(b"k", &window(), now).is_ok())
        };
        let (a, b) = (spawn(100), spawn(103));
        let counted = a.join().unwrap() as u64 + b.join().unwrap() as u64;
        assert!(holders(&fixture, b"k") <= 1, "two LIVE slots for one key");
        assert_eq!(fixture.store().load(b"k", &window(), 103).unwrap(), counted);
    });
}

/// A process creating a key stops for ever at any step; another, whose clock is past every
/// timeout, counts the same key. It never waits, never fails, and its count is exact: nothing
/// the stopped one wrote reaches the slot (this found that a claimer's check of its tag must be
/// a read-modify-write, see `Table::write_word`).
#[test]
fn a_creator_stopped_at_any_step_blocks_nobody() {
    model_stopping("creator stopped at any step, another process 700 s ahead", |n| {
        let fixture = Fixture::new();
        let stopped = {
            let fixture = Arc::clone(&fixture);
            loom::thread::spawn(move || {
                run_stopping_after(Some(n), || fixture.store().increment(b"k", &window(), 100).map(|_| ()))
            })
        };
        let other = {
            let fixture = Arc::clone(&fixture);
            loom::thread::spawn(move || fixture.store().increment(b"k", &window(), 800).map(|_| ()))
        };
        let a = stopped.join().unwrap();
        let k = other.join().unwrap();
        assert_eq!(k, Ok(()), "the other process is never blocked (stopped after {n} writes)");
        assert!(holders(&fixture, b"k") <= 1);
        let store = fixture.store();
        // A's event, at 100, is out of the window at 800: the key holds B's alone.
        assert_eq!(store.load(b"k", &window(), 800).unwrap(), 1);
        a.is_some()
    });
}

/// A table of 3 slots of which 2 may be in use, over words followed by its 3 statistics words.
fn capacity_shape() -> Shape {
    Shape { slots: 3, capacity: 2, payload_words: 1, max_key_length: 6 }
}

fn capacity_table(words: &[AtomicU64]) -> Table<'_> {
    let (table, stats) = words.split_at(capacity_shape().words());
    Table::new(table, capacity_shape(), 7, false, Stats::new(stats), |_, generation| generation as u64)
}

/// A process creating a key stops for ever at any step, then another key brings the table to
/// its capacity (2 of its 3 slots), and a second process creates the first key. While the
/// stopped one holds a claim (it may be of that key, and would create it once resumed), or once
/// it has created the key, the second is never told the table is full. Found by a review: a
/// creator stopped between reserving its slot and recording its reach made every creator of
/// the same key "full".
#[test]
fn a_creator_stopped_at_any_step_never_makes_the_same_key_full() {
    model_stopping("creator stopped at any step while the table reaches its capacity", |n| {
        let words: Arc<Vec<AtomicU64>> =
            Arc::new((0..capacity_shape().words() + 3).map(|_| AtomicU64::new(0)).collect());
        let table = capacity_table;
        let home = table(&words).home_of(b"a");
        let [x, k] = same_home_keys(&table(&words), home);
        // The filler's home is the slot before k's, so that it never probes the stopped claim:
        // a filler that took that claim over would make B's refusal right.
        let y = (0u8..).map(|i| vec![b'y', i]).find(|key| table(&words).home_of(key) == (home + 2) % 3).unwrap();
        table(&words).find_or_insert(&x, 100, 200).unwrap();
        let stopped = {
            let (words, k) = (Arc::clone(&words), k.clone());
            loom::thread::spawn(move || {
                run_stopping_after(Some(n), || table(&words).find_or_insert(&k, 100, 200).is_ok())
            })
        };
        let a = stopped.join().unwrap();
        let claim_in_progress = table(&words).usage(100).claiming > 0;
        let filler = {
            let (words, y) = (Arc::clone(&words), y.clone());
            loom::thread::spawn(move || table(&words).find_or_insert(&y, 100, 200).map(|_| ()))
        };
        let b = table(&words).find_or_insert(&k, 100, 200).map(|_| ());
        let _ = filler.join().unwrap();
        if claim_in_progress || a == Some(true) {
            assert_eq!(b, Ok(()), "the same key was refused while it was being created (stopped after {n} writes)");
        }
        assert!(table(&words).holders(&k) <= 1, "two LIVE slots for one key");
        a.is_some()
    });
}

/// A process counting into a key whose data expires stops at any step while another, later,
/// recycles the only free slots for new keys. Nothing of the first is ever counted in them.
#[test]
fn a_writer_stopped_at_any_step_never_counts_into_a_recycled_slot() {
    writer_stopped_while_its_slot_is_recycled(0);
}

/// The same, the other half of its stop points (the longest scenario: two tests share it).
#[test]
fn a_writer_stopped_at_any_step_never_counts_into_a_recycled_slot_part_2() {
    writer_stopped_while_its_slot_is_recycled(1);
}

fn writer_stopped_while_its_slot_is_recycled(part: u32) {
    let name = format!("writer stopped at any step while its slot is recycled (stop points {part} mod 2)");
    model_stopping_part(&name, (part, 2), |n| {
        let fixture = Fixture::new();
        {
            let store = fixture.store();
            for key in [b"old", b"o2_", b"o3_"] {
                store.increment(key, &window(), 100).unwrap();
            }
        }
        let stopped = {
            let fixture = Arc::clone(&fixture);
            loom::thread::spawn(move || {
                run_stopping_after(Some(n), || fixture.store().increment(b"old", &window(), 100).map(|_| ()))
            })
        };
        let other = {
            let fixture = Arc::clone(&fixture);
            loom::thread::spawn(move || {
                let store = fixture.store();
                // at 200 every slot has expired: "new" takes one of them
                (store.increment(b"new", &window(), 200).map(|_| ()), store.load(b"new", &window(), 200))
            })
        };
        let a = stopped.join().unwrap();
        let (new, loaded) = other.join().unwrap();
        assert_eq!(new, Ok(()));
        assert_eq!(loaded, Ok(1));
        assert_eq!(fixture.store().load(b"new", &window(), 200).unwrap(), 1, "nothing counted into another key");
        assert!(holders(&fixture, b"new") == 1 && holders(&fixture, b"old") <= 1);
        a.is_some()
    });
}

/// Reset races a process counting into the key, and a third reads it.
#[test]
fn reset_racing_writers_and_readers() {
    model("reset racing a writer and a reader", || {
        let fixture = Fixture::new();
        fixture.store().increment(b"k", &window(), 100).unwrap();
        let writer = {
            let fixture = Arc::clone(&fixture);
            loom::thread::spawn(move || fixture.store().increment(b"k", &window(), 101).map(|_| ()))
        };
        let reset = {
            let fixture = Arc::clone(&fixture);
            loom::thread::spawn(move || fixture.store().remove_matching(|key| key == b"k"))
        };
        let read = fixture.store().load(b"k", &window(), 101).unwrap();
        let written = writer.join().unwrap();
        let removed = reset.join().unwrap();
        assert_eq!(written, Ok(()));
        assert!(read <= 2);
        assert!(holders(&fixture, b"k") <= 1);
        let after = fixture.store().load(b"k", &window(), 101).unwrap();
        // The write came before the reset: nothing is left. After it: the write made the key
        // anew, with 1; and if it did so in a slot the reset had not reached yet, that went too.
        assert!((1..=2).contains(&removed));
        assert!(after <= 1, "a reset leaves at most the write that followed it, read {after}");
        if removed == 2 {
            assert_eq!(after, 0);
        }
    });
}

/// A process counts into a key twice, the second time through its memo of where it found it
/// (one store, one memo), while another resets the key and creates another of the same home,
/// which may take the freed slot: under every interleaving, nothing is counted into the other
/// key, and the key keeps no more than was counted into it.
#[test]
fn a_remembered_slot_recycled_meanwhile_is_never_counted_into() {
    model("memo of a slot recycled meanwhile", || {
        let fixture = Fixture::new();
        let [key, other] = same_home_keys(&fixture.counters(), 0);
        let writer = {
            let (fixture, key) = (Arc::clone(&fixture), key.clone());
            loom::thread::spawn(move || {
                let store = fixture.store();
                store.increment(&key, &window(), 100).unwrap();
                store.increment(&key, &window(), 100).unwrap();
            })
        };
        let recycler = {
            let (fixture, key, other) = (Arc::clone(&fixture), key.clone(), other.clone());
            loom::thread::spawn(move || {
                let store = fixture.store();
                store.remove_matching(|k| k == key);
                store.increment(&other, &window(), 100).unwrap();
            })
        };
        writer.join().unwrap();
        recycler.join().unwrap();
        let store = fixture.store();
        assert_eq!(store.load(&other, &window(), 100).unwrap(), 1, "counted into the other key");
        assert!(store.load(&key, &window(), 100).unwrap() <= 2);
        assert!(holders(&fixture, &key) <= 1 && holders(&fixture, &other) == 1);
    });
}

/// A process loads a key while another creates it, then, once the creation has finished,
/// loads it again through its memo (one store): whatever it noted the first time, the second
/// load counts the event.
#[test]
fn a_key_remembered_absent_while_another_process_creates_it_is_found_once_created() {
    model("memo of an absence while the key is created", || {
        let fixture = Fixture::new();
        let created = Arc::new(loom::sync::atomic::AtomicBool::new(false));
        let creator = {
            let (fixture, created) = (Arc::clone(&fixture), Arc::clone(&created));
            loom::thread::spawn(move || {
                fixture.store().increment(b"k", &window(), 100).unwrap();
                created.store(true, std::sync::atomic::Ordering::Release);
            })
        };
        let reader = {
            let (fixture, created) = (Arc::clone(&fixture), Arc::clone(&created));
            loom::thread::spawn(move || {
                let store = fixture.store();
                let first = store.load(b"k", &window(), 100).unwrap();
                while !created.load(std::sync::atomic::Ordering::Acquire) {
                    loom::thread::yield_now();
                }
                (first, store.load(b"k", &window(), 100).unwrap())
            })
        };
        creator.join().unwrap();
        let (first, second) = reader.join().unwrap();
        assert!(first <= 1);
        assert_eq!(second, 1, "an absence outlived the key's creation");
    });
}

/// Two processes 1 s apart ask for the half-open trial at once: exactly one gets it, also when
/// one of them stops at any step.
#[test]
fn exactly_one_trial_per_interval() {
    model_stopping("trial claim, one claimer stopped at any step", |n| {
        let fixture = Fixture::new();
        fixture.store().save_last_failure_time(b"f", 100, 60, 100).unwrap();
        let claim = |fixture: &Arc<Fixture>, now: u64, stop: Option<u32>| {
            let fixture = Arc::clone(fixture);
            loom::thread::spawn(move || {
                run_stopping_after(stop, || fixture.store().claim_trial(b"f", now, 5, 60).unwrap() == Some(100))
            })
        };
        let (a, b) = (claim(&fixture, 110, Some(n)), claim(&fixture, 111, None));
        let (a, b) = (a.join().unwrap(), b.join().unwrap());
        let winners = a.unwrap_or(false) as u32 + b.unwrap() as u32;
        assert!(winners <= 1, "two trials in one interval");
        if a.is_some() {
            assert_eq!(winners, 1, "a due trial is given to one of them");
        }
        a.is_some()
    });
}

/// A reset clears a service's status and last failure time while one process reads the status
/// and another asks for the half-open trial, the clearer stopped at any step: a read gives the
/// status saved or none, never the emptied word (which held the claim's generation); the trial
/// is claimed on the saved time or not at all; and a clear that completes leaves both absent.
#[test]
fn a_clear_racing_a_reader_and_a_trial_claimer_shows_only_values_that_were_written() {
    model_stopping("clear racing a status read and a trial claim, the clearer stopped at any step", |n| {
        let fixture = Fixture::new();
        fixture.store().save_status(b"s", STATUS_TRIPPED, 100).unwrap();
        fixture.store().save_last_failure_time(b"f", 90, 60, 100).unwrap();
        let clearer = {
            let fixture = Arc::clone(&fixture);
            loom::thread::spawn(move || {
                run_stopping_after(Some(n), || {
                    let store = fixture.store();
                    store.clear(TableKind::Statuses, b"s").unwrap();
                    store.clear(TableKind::Counters, b"f").unwrap();
                })
            })
        };
        let reader = {
            let fixture = Arc::clone(&fixture);
            loom::thread::spawn(move || fixture.store().load_status(b"s", 101).unwrap())
        };
        let trial = fixture.store().claim_trial(b"f", 101, 5, 60).unwrap();
        let status = reader.join().unwrap();
        let cleared = clearer.join().unwrap().is_some();
        assert!(matches!(status, None | Some(STATUS_TRIPPED)), "read a status never saved: {status:?}");
        assert!(matches!(trial, None | Some(90)), "a trial on a time never saved: {trial:?}");
        if cleared {
            let store = fixture.store();
            assert_eq!(store.load_status(b"s", 101).unwrap(), None, "the status outlived its clear");
            assert_eq!(store.peek_last_failure_time(b"f", 101).unwrap(), None, "the time outlived its clear");
        }
        cleared
    });
}

/// Two processes trip a circuit with no status at once (a new circuit, or one cleared): the
/// trip is counted once. A save writes its value, then its expiry; one whose value was read by
/// the other between the two looked expired, and both counted it.
#[test]
fn two_processes_tripping_one_circuit_count_one_trip() {
    model("two processes tripping one circuit", || {
        let fixture = Fixture::new();
        let store = fixture.store();
        store.save_status(b"s", STATUS_CALMED_DOWN, 100).unwrap();
        store.clear(TableKind::Statuses, b"s").unwrap();
        let other = {
            let fixture = Arc::clone(&fixture);
            loom::thread::spawn(move || fixture.store().save_status(b"s", STATUS_TRIPPED, 101).unwrap())
        };
        fixture.store().save_status(b"s", STATUS_TRIPPED, 102).unwrap();
        other.join().unwrap();
        let totals = fixture.store().totals(TableKind::Statuses, b"s").unwrap().unwrap();
        assert_eq!(totals.events, 1, "one trip, counted {} times", totals.events);
    });
}

/// Count strategy: an increment and a decrement from processes with different clocks, one of
/// them stopped at any step; the counter never goes below 0 and reads what was applied.
#[test]
fn count_changes_are_exact() {
    model_stopping("Count +1/-1, the incrementer stopped at any step", |n| {
        let fixture = Fixture::new();
        fixture.store().change_count(b"c", 100, true, |_| 1).unwrap();
        let up = {
            let fixture = Arc::clone(&fixture);
            loom::thread::spawn(move || {
                run_stopping_after(Some(n), || fixture.store().change_count(b"c", 100, true, |c| c + 1).map(|_| ()))
            })
        };
        let down = {
            let fixture = Arc::clone(&fixture);
            loom::thread::spawn(move || {
                fixture.store().change_count(b"c", 101, false, |c| c.saturating_sub(1)).map(|_| ())
            })
        };
        let up = up.join().unwrap();
        assert_eq!(down.join().unwrap(), Ok(()));
        let count = fixture.store().load_count(b"c", 101).unwrap();
        match &up {
            Some(result) => {
                assert_eq!(*result, Ok(()));
                assert_eq!(count, 1);
            }
            None => assert!(count <= 1, "a stopped increment counts at most once"),
        }
        assert!(holders(&fixture, b"c") == 1);
        up.is_some()
    });
}

/// A full table: a new key is refused with Full, an existing one keeps working, whatever the
/// interleaving.
#[test]
fn a_full_table_refuses_new_keys_only() {
    model("full table, a new key and an existing one", || {
        let fixture = Fixture::new();
        {
            let store = fixture.store();
            for key in [b"a", b"b", b"c"] {
                store.increment(key, &window(), 100).unwrap();
            }
        }
        let new = {
            let fixture = Arc::clone(&fixture);
            loom::thread::spawn(move || fixture.store().increment(b"d", &window(), 101).map(|_| ()))
        };
        let old = fixture.store().increment(b"a", &window(), 101).map(|_| ());
        assert_eq!(old, Ok(()));
        let new = new.join().unwrap();
        assert!(matches!(new, Err(crate::store::StoreError { error: TableError::Full { .. }, .. })), "{new:?}");
        assert_eq!(fixture.store().load(b"a", &window(), 101).unwrap(), 2);
    });
}

/// A scan (the figures, the listing, reset) clears the bit of a slot it finds free while a
/// process claims that very slot: the claimed slot is never hidden from the scans after it.
#[test]
fn a_scan_racing_a_claim_never_hides_the_claimed_slot() {
    model("a scan clearing a freed slot's bit while a process claims it", || {
        let fixture = Fixture::new();
        {
            let store = fixture.store();
            store.increment(b"k", &window(), 100).unwrap();
            store.remove_matching(|_| true); // its slot is free, its bit still set
        }
        let claimer = {
            let fixture = Arc::clone(&fixture);
            loom::thread::spawn(move || fixture.store().increment(b"k", &window(), 101).map(|_| ()))
        };
        let scanned = fixture.store().usage(101)[0].live;
        assert_eq!(claimer.join().unwrap(), Ok(()));
        assert!(scanned <= 1);
        assert_eq!(fixture.store().usage(101)[0].live, 1, "the claimed slot is visible to the next scan");
        assert_eq!(fixture.store().live_keys(101), vec![b"k".to_vec()]);
    });
}

/// A sweep lowering a home's reach while a process places a key of that home past it: the key
/// is found afterwards, and held by one slot.
#[test]
fn a_sweep_shrinking_a_reach_never_hides_a_key_claimed_meanwhile() {
    model("a sweep lowering a reach while a key is placed past the home", || {
        let fixture = Fixture::new();
        let home = fixture.counters().home_of(b"a");
        let [near, far] = same_home_keys(&fixture.counters(), home);
        {
            // "a" holds the home; `near`, placed one farther, was removed: the reach is stale
            let table = fixture.counters();
            table.find_or_insert(b"a", 100, 200).unwrap();
            table.find_or_insert(&near, 100, 200).unwrap();
            table.remove_matching(|key| key == near.as_slice());
        }
        let claimer = {
            let (fixture, far) = (Arc::clone(&fixture), far.clone());
            loom::thread::spawn(move || fixture.counters().find_or_insert(&far, 101, 200).map(|_| ()))
        };
        fixture.counters().shrink_reach_of(home);
        assert_eq!(claimer.join().unwrap(), Ok(()));
        let table = fixture.counters();
        assert!(table.find(&far).unwrap().is_some(), "the key claimed during the sweep is found");
        assert_eq!(table.holders(&far), 1);
    });
}

/// Two keys other than "a" with the same home as "a" in the fixture's counter table.
fn same_home_keys(table: &Table<'_>, home: usize) -> [Vec<u8>; 2] {
    let mut keys = (0u8..).map(|i| vec![b'k', i]).filter(|key| table.home_of(key) == home);
    [keys.next().unwrap(), keys.next().unwrap()]
}

/// Prints the total of the scenarios run so far in this process (tests/model-check.sh, which
/// runs them in parallel, skips it and sums their lines itself).
/// The fleet-only region: the sidecar publishes it twice, so that its second write is into the half
/// a reader may still be reading, and is stopped at any step (killed); a reader meanwhile reads
/// a whole region the sidecar published (2, 20 or 200 events), or none, never half of one.
#[test]
fn a_fleet_only_reader_never_reads_a_region_half_written() {
    const SHAPE: FleetOnlyShape = FleetOnlyShape { capacity: 1, max_key_length: 6, span: 2 };
    let entry_of =
        |count: u64| FleetOnlyEntry { key: b"k".to_vec(), bucket_duration: 2, first_bucket: 0, counts: vec![count; 2] };
    model_stopping("fleet-only region read while the sidecar writes it, the sidecar stopped at any step", move |n| {
        let words: Arc<Vec<AtomicU64>> = Arc::new((0..SHAPE.words()).map(|_| AtomicU64::new(0)).collect());
        FleetOnly::new(&words, SHAPE, 7).publish(&[entry_of(1)]);
        let sidecar = {
            let words = Arc::clone(&words);
            loom::thread::spawn(move || {
                run_stopping_after(Some(n), || {
                    let region = FleetOnly::new(&words, SHAPE, 7);
                    region.publish(&[entry_of(10)]);
                    region.publish(&[entry_of(100)]);
                })
            })
        };
        let read = FleetOnly::new(&words, SHAPE, 7).load(b"k", 2, 0..=1);
        assert!(matches!(read, None | Some(2) | Some(20) | Some(200)), "read counts never published: {read:?}");
        sidecar.join().unwrap().is_some()
    });
}

#[test]
fn zz_report() {
    println!(
        "model-check: total so far in this process: {} interleavings",
        EXPLORED.load(std::sync::atomic::Ordering::Relaxed)
    );
}
