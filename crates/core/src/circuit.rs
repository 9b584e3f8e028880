//! What Ganesha would decide for a service, computed from its figures without asking Ganesha:
//! the read-only view behind `snapshot()` and `metrics()`. Pure, unit-tested without PHP.
//!
//! The rules are those of Ganesha 4's `Strategy\Rate::isAvailable()` and
//! `Strategy\Count::isAvailable()`: a request is admitted when the circuit is closed, or when
//! `intervalToHalfOpen` seconds have passed since the last failure (the half-open trial).

/// Ganesha's `Ganesha::STATUS_CALMED_DOWN`: what a status reads as when none is stored.
pub const STATUS_CALMED_DOWN: i64 = 1;
/// Ganesha's `Ganesha::STATUS_TRIPPED`.
pub const STATUS_TRIPPED: i64 = 2;

/// The thresholds of one Ganesha configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Thresholds {
    Rate { failure_rate_threshold: i64, minimum_requests: i64 },
    Count { failure_count_threshold: i64 },
}

/// What the store holds for one service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Figures {
    /// Failures in the time window (Rate) or the failure counter (Count).
    pub failures: u64,
    /// Successes in the time window (Rate only).
    pub successes: u64,
    /// Rejections in the time window (Rate only).
    pub rejections: u64,
    pub last_failure_time: Option<i64>,
    pub status: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Requests are admitted.
    Closed,
    /// Requests are rejected.
    Open,
    /// The circuit is open but the next request would be admitted as the half-open trial.
    HalfOpen,
}

impl State {
    pub fn name(self) -> &'static str {
        match self {
            Self::Closed => "closed",
            Self::Open => "open",
            Self::HalfOpen => "half_open",
        }
    }

    pub fn admits(self) -> bool {
        self != Self::Open
    }
}

/// Failures as a percentage of failures and successes; `None` without either.
pub fn failure_rate(figures: &Figures) -> Option<f64> {
    let requests = figures.failures + figures.successes;
    (requests > 0).then(|| figures.failures as f64 * 100.0 / requests as f64)
}

fn closed(thresholds: Thresholds, figures: &Figures) -> bool {
    let failures = figures.failures as f64;
    match thresholds {
        Thresholds::Rate { failure_rate_threshold, minimum_requests } => {
            let threshold = failure_rate_threshold as f64;
            figures.failures == 0
                || failures / minimum_requests as f64 * 100.0 < threshold
                || figures.failures + figures.successes + figures.rejections < minimum_requests.max(0) as u64
                || failure_rate(figures).is_some_and(|rate| rate < threshold)
        }
        Thresholds::Count { failure_count_threshold } => (figures.failures as i128) < failure_count_threshold as i128,
    }
}

/// What Ganesha would do with a request for this service at `now`.
pub fn state(thresholds: Thresholds, figures: &Figures, interval_to_half_open: i64, now: i64) -> State {
    if closed(thresholds, figures) {
        State::Closed
    } else if figures.last_failure_time.is_some_and(|last| now.saturating_sub(last) > interval_to_half_open) {
        State::HalfOpen
    } else {
        State::Open
    }
}

/// Fleet mode: the counts a service's failure, success and rejection counters answer with,
/// given this host's own (`own`) and the fleet's, this host's included (`fleet`). The view that
/// shows the circuit in more trouble decides: this host's own counts when they trip the circuit
/// (a host whose route to the dependency is broken trips as it does alone) or when the fleet's
/// do not either (a host with no fleet evidence behaves as alone), else the fleet's. Both views
/// are answered whole, so that Ganesha's three loads of one decision read one view.
pub fn fleet_view(thresholds: Thresholds, own: Figures, fleet: Figures) -> Figures {
    if fleet_decides(thresholds, &own, &fleet) {
        fleet
    } else {
        own
    }
}

/// Whether `failures` alone keep a Rate circuit closed, whatever the other counts: none, or
/// fewer than `failure_rate_threshold` % of `minimum_requests` (Ganesha's first test). Failures
/// only grow from a host's view to the fleet's, so when the fleet's failures keep it closed,
/// neither view trips and [`fleet_view`] answers this host's own counts: a load needs no more.
pub fn failures_keep_closed(thresholds: Thresholds, failures: u64) -> bool {
    match thresholds {
        Thresholds::Rate { failure_rate_threshold, minimum_requests } => {
            failures == 0 || failures as f64 / minimum_requests as f64 * 100.0 < failure_rate_threshold as f64
        }
        Thresholds::Count { .. } => false,
    }
}

/// Whether the fleet's figures decide (see [`fleet_view`]): they trip the circuit and this
/// host's own do not.
pub fn fleet_decides(thresholds: Thresholds, own: &Figures, fleet: &Figures) -> bool {
    closed(thresholds, own) && !closed(thresholds, fleet)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RATE: Thresholds = Thresholds::Rate { failure_rate_threshold: 50, minimum_requests: 10 };

    fn figures(failures: u64, successes: u64, rejections: u64) -> Figures {
        Figures { failures, successes, rejections, last_failure_time: Some(1_000), status: 1 }
    }

    #[test]
    fn rate_circuits_close_below_the_minimum_requests_or_the_threshold() {
        assert_eq!(state(RATE, &figures(0, 0, 0), 5, 1_001), State::Closed);
        assert_eq!(state(RATE, &figures(4, 0, 0), 5, 1_001), State::Closed, "4 / 10 minimum requests < 50 %");
        assert_eq!(state(RATE, &figures(5, 0, 4), 5, 1_001), State::Closed, "9 requests < 10 minimum");
        assert_eq!(state(RATE, &figures(6, 7, 0), 5, 1_001), State::Closed, "46 % < 50 %");
        assert_eq!(state(RATE, &figures(6, 6, 0), 5, 1_001), State::Open, "50 % is not below 50 %");
        assert_eq!(state(RATE, &figures(5, 0, 5), 5, 1_001), State::Open);
    }

    #[test]
    fn open_circuits_admit_a_trial_once_the_interval_has_passed() {
        let open = figures(10, 0, 0);
        assert_eq!(state(RATE, &open, 5, 1_005), State::Open, "5 s is not more than 5 s");
        assert_eq!(state(RATE, &open, 5, 1_006), State::HalfOpen);
        assert!(State::HalfOpen.admits() && !State::Open.admits());
        let never_failed = Figures { last_failure_time: None, ..open };
        assert_eq!(state(RATE, &never_failed, 5, 9_999), State::Open);
    }

    #[test]
    fn count_circuits_open_at_the_threshold() {
        let count = Thresholds::Count { failure_count_threshold: 3 };
        assert_eq!(state(count, &figures(2, 0, 0), 5, 1_001), State::Closed);
        assert_eq!(state(count, &figures(3, 0, 0), 5, 1_001), State::Open);
        assert_eq!(state(count, &figures(3, 0, 0), 5, 1_010), State::HalfOpen);
    }

    #[test]
    fn the_fleet_view_decides_only_when_it_alone_trips() {
        let (own_trips, own_healthy) = (figures(10, 0, 0), figures(1, 2, 0));
        let (fleet_trips, fleet_healthy) = (figures(30, 10, 0), figures(11, 1_000, 0));
        assert_eq!(fleet_view(RATE, own_trips, fleet_healthy), own_trips, "a host's own evidence is never hidden");
        assert_eq!(fleet_view(RATE, own_healthy, fleet_trips), fleet_trips, "the fleet's evidence trips the host");
        assert_eq!(fleet_view(RATE, own_healthy, fleet_healthy), own_healthy);
        assert_eq!(fleet_view(RATE, own_trips, fleet_trips), own_trips);
        let under_minimum = figures(4, 0, 0);
        assert_eq!(state(RATE, &under_minimum, 5, 1_001), State::Closed, "alone, 4 failures are too few");
        assert_eq!(state(RATE, &fleet_view(RATE, under_minimum, figures(12, 0, 0)), 5, 1_001), State::Open);
    }

    #[test]
    fn failures_that_keep_the_fleet_closed_keep_both_views_closed() {
        for fleet_failures in 0..30 {
            for own_failures in 0..=fleet_failures {
                for (successes, rejections) in [(0, 0), (3, 0), (0, 9), (40, 2)] {
                    let own = figures(own_failures, successes, rejections);
                    let fleet = figures(fleet_failures, successes * 2, rejections);
                    if failures_keep_closed(RATE, fleet_failures) {
                        assert_eq!(fleet_view(RATE, own, fleet), own, "{own_failures} of {fleet_failures}");
                        assert_eq!(state(RATE, &fleet, 5, 1_001), State::Closed);
                    }
                }
            }
        }
        assert!(failures_keep_closed(RATE, 4) && !failures_keep_closed(RATE, 5), "5 / 10 minimum requests = 50 %");
    }

    #[test]
    fn failure_rates_are_percentages_of_failures_and_successes() {
        assert_eq!(failure_rate(&figures(0, 0, 7)), None);
        assert_eq!(failure_rate(&figures(1, 3, 100)), Some(25.0));
    }
}
