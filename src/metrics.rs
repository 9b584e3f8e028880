//! The Prometheus text exposition format (version 0.0.4) of the circuits and of the store.
//! Pure: it formats figures it is given.

use std::fmt::Write;

use crate::circuit::{failure_rate, Figures, State, STATUS_TRIPPED};

/// One service as the snapshot sees it.
pub struct ServiceView {
    pub service: Vec<u8>,
    pub figures: Figures,
    pub state: State,
}

/// A label value: bytes that are not UTF-8 are replaced, `\`, `"` and newlines escaped.
fn label(value: &[u8]) -> String {
    String::from_utf8_lossy(value).replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
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
    family(
        &mut out,
        "ganesha_shm_requests",
        "gauge",
        "Requests of a service in its current time window, by outcome (Count strategy: the failure counter).",
    );
    for view in services {
        let service = label(&view.service);
        for (outcome, count) in [
            ("failure", view.figures.failures),
            ("success", view.figures.successes),
            ("rejection", view.figures.rejections),
        ] {
            let _ = writeln!(out, "ganesha_shm_requests{{service=\"{service}\",outcome=\"{outcome}\"}} {count}");
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
    for (name, value, help) in store {
        let kind = if name.ends_with("_total") { "counter" } else { "gauge" };
        family(&mut out, &format!("ganesha_shm_{name}"), kind, help);
        let _ = writeln!(out, "ganesha_shm_{name} {value}");
    }
    out
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
        };
        let text =
            exposition(&[view], &[("claims_total".into(), 4, "Claims."), ("segment_bytes".into(), 128, "Size.")]);
        let service = r#"service="pay\"ments\\\n�""#;
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
    fn a_service_without_requests_has_no_failure_rate_sample() {
        let view = ServiceView {
            service: b"idle".to_vec(),
            figures: Figures { status: 1, ..Figures::default() },
            state: State::Closed,
        };
        let text = exposition(&[view], &[]);
        assert!(!text.contains("ganesha_shm_failure_rate_percent{"));
        assert!(text.contains("ganesha_shm_circuit_open{service=\"idle\"} 0\n"));
    }
}
