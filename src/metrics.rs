//! The Prometheus text exposition format (version 0.0.4) of the circuits and of the store.
//! Pure: it formats figures it is given.

use std::fmt::Write;

use crate::circuit::{failure_rate, Figures, State, STATUS_TRIPPED};

/// One service as the snapshot sees it.
pub struct ServiceView {
    pub service: Vec<u8>,
    pub figures: Figures,
    pub state: State,
    /// The window's buckets, oldest first, when asked for (not in the exposition).
    pub buckets: Option<Vec<BucketView>>,
    pub totals: ServiceTotals,
    pub fleet: Fleet,
}

/// Fleet mode's view of a service, beside this host's own figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fleet {
    /// Not in fleet mode.
    Off,
    /// In fleet mode, with the sidecar's last sync too old: this host decides alone.
    Stale,
    /// The fleet's counts, this host's included, whether they are what decides the circuit now
    /// (see `circuit::fleet_view`), and whether this host sees the service only through the
    /// fleet (it has not counted it: see `fleet_only`).
    Fresh { figures: Figures, decides: bool, only: bool },
}

/// What a service's slots have counted since they were claimed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServiceTotals {
    pub successes: u64,
    pub failures: u64,
    pub rejections: u64,
    /// Saves of the tripped status over another.
    pub trips: u64,
    /// Saves of the calmed-down status over the tripped one.
    pub calm_downs: u64,
    /// Half-open trials admitted.
    pub trials: u64,
}

/// One bucket of a service's window.
pub struct BucketView {
    /// Unix time the bucket starts at.
    pub start: u64,
    pub failures: u64,
    pub successes: u64,
    pub rejections: u64,
}

/// A service name as text, for people and for label values: its UTF-8 as it is, but for each
/// backslash, written `\\`, and each byte that is not part of valid UTF-8, written `\xHH`.
/// Two names never give the same text, so two services never share a row or a series.
pub fn display_name(service: &[u8]) -> String {
    let mut out = String::with_capacity(service.len());
    for chunk in service.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                c => out.push(c),
            }
        }
        for byte in chunk.invalid() {
            let _ = write!(out, "\\x{byte:02X}");
        }
    }
    out
}

/// A label value of the exposition format: the display name, with `\`, `"` and newlines
/// escaped as the format requires.
fn label(service: &[u8]) -> String {
    display_name(service).replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// The exposition of `services` and of the store's figures (name, value, help; names ending
/// in `_total` are counters, the others gauges).
pub fn exposition(services: &[ServiceView], store: &[(String, u64, &str)]) -> String {
    let mut out = String::new();
    let per_service = |out: &mut String, name: &str, help: &str, value: &dyn Fn(&ServiceView) -> Option<String>| {
        family(out, name, "gauge", help);
        for view in services {
            if let Some(value) = value(view) {
                let _ = writeln!(out, "{name}{{service=\"{}\"}} {value}", label(&view.service));
            }
        }
    };
    // Requests by outcome: in the current window, and since the counters were created.
    let by_outcome =
        |out: &mut String, name: &str, kind: &str, help: &str, counts: &dyn Fn(&ServiceView) -> [u64; 3]| {
            family(out, name, kind, help);
            for view in services {
                let service = label(&view.service);
                for (outcome, count) in ["failure", "success", "rejection"].into_iter().zip(counts(view)) {
                    let _ = writeln!(out, "{name}{{service=\"{service}\",outcome=\"{outcome}\"}} {count}");
                }
            }
        };
    by_outcome(
        &mut out,
        "ganesha_shm_requests",
        "gauge",
        "Requests of a service in its current time window, by outcome (Count strategy: the failure counter).",
        &|v| [v.figures.failures, v.figures.successes, v.figures.rejections],
    );
    by_outcome(
        &mut out,
        "ganesha_shm_requests_total",
        "counter",
        "Requests of a service since its counters were created, by outcome (Count strategy: failures).",
        &|v| [v.totals.failures, v.totals.successes, v.totals.rejections],
    );
    if services.iter().any(|view| view.fleet != Fleet::Off) {
        fleet_families(&mut out, services);
    }
    for (name, help, total) in [
        (
            "ganesha_shm_trips_total",
            "Times the circuit of a service opened (a tripped status saved over another).",
            (|t: &ServiceTotals| t.trips) as fn(&ServiceTotals) -> u64,
        ),
        (
            "ganesha_shm_calm_downs_total",
            "Times the circuit of a service closed again (a calmed-down status saved over the tripped one).",
            |t| t.calm_downs,
        ),
        ("ganesha_shm_half_open_trials_total", "Half-open trials admitted for a service.", |t| t.trials),
    ] {
        family(&mut out, name, "counter", help);
        for view in services {
            let _ = writeln!(out, "{name}{{service=\"{}\"}} {}", label(&view.service), total(&view.totals));
        }
    }
    per_service(
        &mut out,
        "ganesha_shm_failure_rate_percent",
        "Failures in percent of failures and successes in the current time window.",
        &|v| failure_rate(&v.figures).map(|rate| format!("{rate}")),
    );
    per_service(
        &mut out,
        "ganesha_shm_circuit_open",
        "1 when the circuit rejects requests now (0 when closed or a half-open trial is due).",
        &|v| Some(u8::from(!v.state.admits()).to_string()),
    );
    per_service(
        &mut out,
        "ganesha_shm_circuit_half_open",
        "1 when the next request would be the half-open trial.",
        &|v| Some(u8::from(v.state == State::HalfOpen).to_string()),
    );
    per_service(
        &mut out,
        "ganesha_shm_tripped",
        "1 when Ganesha's status is tripped (set when the circuit opened, cleared when it calmed down).",
        &|v| Some(u8::from(v.figures.status == STATUS_TRIPPED).to_string()),
    );
    per_service(
        &mut out,
        "ganesha_shm_last_failure_timestamp_seconds",
        "Time of the last failure, while it is kept.",
        &|v| v.figures.last_failure_time.map(|t| t.to_string()),
    );
    // The store's figures, those kept per table (`counter_slots`, `status_slots_used`, …) as one
    // family with a `table` label: a metric name must not hold a type's name ("counter").
    let mut families: Vec<StoreFamily<'_>> = Vec::new();
    for (name, value, help) in store {
        let (name, table, help) = match per_table(name) {
            Some((name, table, help)) => (name, Some(table), help),
            None => (name.as_str(), None, *help),
        };
        match families.iter_mut().find(|(family, ..)| family == name) {
            Some((.., samples)) => samples.push((table, *value)),
            None => families.push((name.to_string(), help, vec![(table, *value)])),
        }
    }
    for (name, help, samples) in families {
        let kind = if name.ends_with("_total") { "counter" } else { "gauge" };
        family(&mut out, &format!("ganesha_shm_{name}"), kind, help);
        for (table, value) in samples {
            match table {
                Some(table) => writeln!(out, "ganesha_shm_{name}{{table=\"{table}\"}} {value}"),
                None => writeln!(out, "ganesha_shm_{name} {value}"),
            }
            .unwrap_or_default();
        }
    }
    out
}

/// Fleet mode's families: the fleet's counts of each service, and whether they decide.
fn fleet_families(out: &mut String, services: &[ServiceView]) {
    let name = "ganesha_shm_fleet_requests";
    family(
        out,
        name,
        "gauge",
        "Fleet mode: requests of a service in its current time window on every host of the fleet, by outcome, \
         as the last sync saw them.",
    );
    for view in services {
        if let Fleet::Fresh { figures, .. } = view.fleet {
            let service = label(&view.service);
            let counts =
                [("failure", figures.failures), ("success", figures.successes), ("rejection", figures.rejections)];
            for (outcome, count) in counts {
                let _ = writeln!(out, "{name}{{service=\"{service}\",outcome=\"{outcome}\"}} {count}");
            }
        }
    }
    let name = "ganesha_shm_fleet_decides";
    family(
        out,
        name,
        "gauge",
        "Fleet mode: 1 when the fleet's counts decide the circuit of a service, 0 when this host's own do.",
    );
    for view in services {
        let decides = matches!(view.fleet, Fleet::Fresh { decides: true, .. });
        let _ = writeln!(out, "{name}{{service=\"{}\"}} {}", label(&view.service), u8::from(decides));
    }
    let name = "ganesha_shm_fleet_only";
    family(
        out,
        name,
        "gauge",
        "Fleet mode: 1 for a service this host sees only through the fleet (other hosts count it, this one has not), \
         0 for one it counts.",
    );
    for view in services {
        if let Fleet::Fresh { only, .. } = view.fleet {
            let _ = writeln!(out, "{name}{{service=\"{}\"}} {}", label(&view.service), u8::from(only));
        }
    }
}

/// One family of the store's figures: its name, its help, and its samples, each with the table
/// it is about (none for the store-wide figures).
type StoreFamily<'a> = (String, &'a str, Vec<(Option<&'a str>, u64)>);

/// A figure of one table of the store, as its family, table and the family's help.
fn per_table(name: &str) -> Option<(&str, &'static str, &'static str)> {
    const FAMILIES: [(&str, &str); 4] = [
        ("slots", "Slots of a table new keys may take: counters (3 per service) or statuses (1 per service)."),
        ("headroom_slots", "Slots of a table beyond its capacity, that keep its probes short."),
        ("slot_bytes", "Bytes of one slot of a table."),
        ("slots_used", "Slots of a table holding unexpired data."),
    ];
    let (table, rest) = [("counters", "counter_"), ("statuses", "status_")]
        .into_iter()
        .find_map(|(table, prefix)| Some((table, name.strip_prefix(prefix)?)))?;
    FAMILIES.iter().find(|(family, _)| *family == rest).map(|(family, help)| (*family, table, *help))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn services_become_labelled_samples() {
        let view = ServiceView {
            service: b"pay\"ments\\\n\xff".to_vec(),
            figures: Figures {
                failures: 3,
                successes: 1,
                rejections: 7,
                last_failure_time: Some(1_800_000_000),
                status: 2,
            },
            state: State::Open,
            buckets: None,
            totals: ServiceTotals { successes: 11, failures: 12, rejections: 13, trips: 2, calm_downs: 1, trials: 4 },
            fleet: Fleet::Off,
        };
        let text =
            exposition(&[view], &[("claims_total".into(), 4, "Claims."), ("segment_bytes".into(), 128, "Size.")]);
        let name = r#"service="pay\"ments\\\\\n\\xFF""#;
        assert!(text.contains("# TYPE ganesha_shm_requests_total counter\n"), "{text}");
        assert!(text.contains(&format!("ganesha_shm_requests_total{{{name},outcome=\"success\"}} 11\n")), "{text}");
        assert!(text.contains(&format!("ganesha_shm_requests_total{{{name},outcome=\"rejection\"}} 13\n")));
        assert!(
            text.contains(&format!("# TYPE ganesha_shm_trips_total counter\nganesha_shm_trips_total{{{name}}} 2\n"))
        );
        assert!(text.contains(&format!("ganesha_shm_calm_downs_total{{{name}}} 1\n")));
        assert!(text.contains(&format!("ganesha_shm_half_open_trials_total{{{name}}} 4\n")));
        // the name's backslash is \\ in its display name, each escaped again in the label
        let service = r#"service="pay\"ments\\\\\n\\xFF""#;
        assert!(text.contains(&format!("ganesha_shm_requests{{{service},outcome=\"failure\"}} 3\n")), "{text}");
        assert!(text.contains(&format!("ganesha_shm_requests{{{service},outcome=\"rejection\"}} 7\n")));
        assert!(text.contains(&format!("ganesha_shm_failure_rate_percent{{{service}}} 75\n")));
        assert!(text.contains(&format!("ganesha_shm_circuit_open{{{service}}} 1\n")));
        assert!(text.contains(&format!("ganesha_shm_tripped{{{service}}} 1\n")));
        assert!(text.contains(&format!("ganesha_shm_last_failure_timestamp_seconds{{{service}}} 1800000000\n")));
        assert!(text.contains("# HELP ganesha_shm_claims_total Claims.\n# TYPE ganesha_shm_claims_total counter\nganesha_shm_claims_total 4\n"));
        assert!(text.contains("# TYPE ganesha_shm_segment_bytes gauge\n"));
    }

    #[test]
    fn figures_of_each_table_are_one_family_with_a_table_label() {
        let store: Vec<(String, u64, &str)> =
            [("counter_slots", 12), ("status_slots", 4), ("counter_slots_used", 3), ("status_slots_used", 1)]
                .into_iter()
                .map(|(name, value)| (name.to_string(), value, "Help."))
                .collect();
        let text = exposition(&[], &store);
        assert!(!text.contains("counter_"), "{text}");
        assert_eq!(text.matches("# TYPE ganesha_shm_slots gauge\n").count(), 1, "{text}");
        assert!(
            text.contains("ganesha_shm_slots{table=\"counters\"} 12\nganesha_shm_slots{table=\"statuses\"} 4\n"),
            "{text}"
        );
        assert!(text.contains("# HELP ganesha_shm_slots_used Slots of a table holding unexpired data.\n"), "{text}");
        assert!(text.contains("ganesha_shm_slots_used{table=\"statuses\"} 1\n"), "{text}");
    }

    #[test]
    fn display_names_keep_every_service_apart() {
        let names: [&[u8]; 8] = [b"\xff", b"\xfe", b"\\xFF", b"\\xff", b"\\", b"\\\\", b"", b"\xc3"];
        let shown: std::collections::BTreeSet<String> = names.iter().map(|name| display_name(name)).collect();
        assert_eq!(shown.len(), names.len(), "{shown:?}");
        assert_eq!(display_name(b"caf\xc3\xa9 \xff\n"), "caf\u{e9} \\xFF\n");
        assert_eq!(display_name(b"a\\b"), "a\\\\b");
    }

    #[test]
    fn services_whose_names_differ_get_series_that_differ() {
        let view = |service: &[u8]| ServiceView {
            service: service.to_vec(),
            figures: Figures { status: 1, ..Figures::default() },
            state: State::Closed,
            buckets: None,
            totals: ServiceTotals::default(),
            fleet: Fleet::Off,
        };
        let text = exposition(&[view(b"\xff"), view(b"\xfe"), view(b"\\xFF")], &[]);
        assert_eq!(text.matches("ganesha_shm_trips_total{").count(), 3, "{text}");
        let series: Vec<&str> = text.lines().filter(|line| line.starts_with("ganesha_shm_circuit_open{")).collect();
        assert_eq!(
            series,
            [
                r#"ganesha_shm_circuit_open{service="\\xFF"} 0"#,
                r#"ganesha_shm_circuit_open{service="\\xFE"} 0"#,
                r#"ganesha_shm_circuit_open{service="\\\\xFF"} 0"#,
            ]
        );
    }

    #[test]
    fn a_service_without_requests_has_no_failure_rate_sample() {
        let view = ServiceView {
            service: b"idle".to_vec(),
            figures: Figures { status: 1, ..Figures::default() },
            state: State::Closed,
            buckets: None,
            totals: ServiceTotals::default(),
            fleet: Fleet::Off,
        };
        let text = exposition(&[view], &[]);
        assert!(!text.contains("ganesha_shm_failure_rate_percent{"));
        assert!(text.contains("ganesha_shm_circuit_open{service=\"idle\"} 0\n"));
        assert!(!text.contains("fleet"), "no fleet families without fleet mode: {text}");
    }

    #[test]
    fn fleet_mode_shows_the_fleet_beside_this_host() {
        let own = Figures { failures: 2, successes: 1, rejections: 0, last_failure_time: None, status: 1 };
        let fleet = Figures { failures: 30, successes: 4, rejections: 5, ..own };
        let view = |service: &[u8], fleet| ServiceView {
            service: service.to_vec(),
            figures: own,
            state: State::Open,
            buckets: None,
            totals: ServiceTotals::default(),
            fleet,
        };
        let views = [
            view(b"a", Fleet::Fresh { figures: fleet, decides: true, only: false }),
            view(b"b", Fleet::Stale),
            view(b"c", Fleet::Fresh { figures: fleet, decides: true, only: true }),
        ];
        let text = exposition(&views, &[]);
        assert!(text.contains("ganesha_shm_requests{service=\"a\",outcome=\"failure\"} 2\n"), "{text}");
        assert!(text.contains("ganesha_shm_fleet_requests{service=\"a\",outcome=\"failure\"} 30\n"), "{text}");
        assert!(text.contains("ganesha_shm_fleet_requests{service=\"a\",outcome=\"rejection\"} 5\n"), "{text}");
        assert!(!text.contains("ganesha_shm_fleet_requests{service=\"b\""), "stale counts are not shown: {text}");
        assert!(
            text.contains("ganesha_shm_fleet_decides{service=\"a\"} 1\nganesha_shm_fleet_decides{service=\"b\"} 0\n")
        );
        assert!(
            text.contains("ganesha_shm_fleet_only{service=\"a\"} 0\nganesha_shm_fleet_only{service=\"c\"} 1\n"),
            "{text}"
        );
    }
}
