//! Metrics in the Prometheus text exposition format (version 0.0.4). A handful of series,
//! rendered by hand: counters of runs by runtime and outcome, histograms of run duration and
//! queue wait, and gauges read from admission when scraped.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::Duration;

/// Upper bounds of the histogram buckets, in seconds: from a trivial run (a few ms) to the
/// longest wall time a shipped runtime allows.
const BUCKETS_S: [f64; 14] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0];

pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

#[derive(Default)]
pub struct Metrics {
    /// (runtime, outcome) → count. The outcome is the verdict, or the final status when
    /// there is no result (`rejected`, `cancelled`, `interrupted`).
    runs: Mutex<BTreeMap<(String, String), u64>>,
    /// runtime → histogram of the time from slot to final record.
    run_duration: Mutex<BTreeMap<String, Histogram>>,
    queue_wait: Mutex<Histogram>,
    /// reason → requests refused by admission (`queue_full`, `rate_limited`, `draining`, ...).
    refused: Mutex<BTreeMap<String, u64>>,
    /// HTTP status → responses.
    responses: Mutex<BTreeMap<u16, u64>>,
}

#[derive(Default, Clone)]
struct Histogram {
    counts: [u64; BUCKETS_S.len()],
    count: u64,
    sum_s: f64,
}

impl Histogram {
    fn observe(&mut self, value: Duration) {
        let seconds = value.as_secs_f64();
        for (bound, count) in BUCKETS_S.iter().zip(self.counts.iter_mut()) {
            if seconds <= *bound {
                *count += 1;
            }
        }
        self.count += 1;
        self.sum_s += seconds;
    }

    fn render(&self, out: &mut String, name: &str, labels: &str) {
        let sep = if labels.is_empty() { "" } else { "," };
        for (bound, count) in BUCKETS_S.iter().zip(self.counts) {
            let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{bound}\"}} {count}");
        }
        let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {}", self.count);
        let braces = if labels.is_empty() { String::new() } else { format!("{{{labels}}}") };
        let _ = writeln!(out, "{name}_sum{braces} {}", self.sum_s);
        let _ = writeln!(out, "{name}_count{braces} {}", self.count);
    }
}

/// Gauges that belong to other parts, read at scrape time.
pub struct Gauges {
    pub queue_depth: usize,
    pub active_runs: usize,
    pub draining: bool,
}

impl Metrics {
    pub fn run_finished(&self, runtime: &str, outcome: &str, duration: Option<Duration>) {
        *self.runs.lock().expect("metrics").entry((runtime.to_string(), outcome.to_string())).or_default() += 1;
        if let Some(duration) = duration {
            self.run_duration.lock().expect("metrics").entry(runtime.to_string()).or_default().observe(duration);
        }
    }

    pub fn queue_waited(&self, wait: Duration) {
        self.queue_wait.lock().expect("metrics").observe(wait);
    }

    pub fn refused(&self, reason: &str) {
        *self.refused.lock().expect("metrics").entry(reason.to_string()).or_default() += 1;
    }

    pub fn responded(&self, status: u16) {
        *self.responses.lock().expect("metrics").entry(status).or_default() += 1;
    }

    pub fn render(&self, gauges: &Gauges) -> String {
        let mut out = String::new();
        header(&mut out, "runbox_runs_total", "counter", "Runs that reached a final status, by runtime and outcome.");
        for ((runtime, outcome), count) in self.runs.lock().expect("metrics").iter() {
            let _ = writeln!(
                out,
                "runbox_runs_total{{runtime=\"{}\",outcome=\"{}\"}} {count}",
                escape(runtime),
                escape(outcome)
            );
        }
        header(&mut out, "runbox_run_duration_seconds", "histogram", "From a run's slot to its final record.");
        for (runtime, histogram) in self.run_duration.lock().expect("metrics").iter() {
            histogram.render(&mut out, "runbox_run_duration_seconds", &format!("runtime=\"{}\"", escape(runtime)));
        }
        header(&mut out, "runbox_queue_wait_seconds", "histogram", "From a run's acceptance to its slot.");
        self.queue_wait.lock().expect("metrics").render(&mut out, "runbox_queue_wait_seconds", "");
        header(&mut out, "runbox_queue_depth", "gauge", "Accepted runs waiting for a slot.");
        let _ = writeln!(out, "runbox_queue_depth {}", gauges.queue_depth);
        header(
            &mut out,
            "runbox_active_runs",
            "gauge",
            "Runs holding a slot (sandbox starting, running or cleaning up).",
        );
        let _ = writeln!(out, "runbox_active_runs {}", gauges.active_runs);
        header(&mut out, "runbox_draining", "gauge", "1 while the service drains before shutting down.");
        let _ = writeln!(out, "runbox_draining {}", u8::from(gauges.draining));
        header(&mut out, "runbox_admission_refused_total", "counter", "Requests refused by admission, by reason.");
        for (reason, count) in self.refused.lock().expect("metrics").iter() {
            let _ = writeln!(out, "runbox_admission_refused_total{{reason=\"{}\"}} {count}", escape(reason));
        }
        header(&mut out, "runbox_http_responses_total", "counter", "HTTP responses, by status code.");
        for (status, count) in self.responses.lock().expect("metrics").iter() {
            let _ = writeln!(out, "runbox_http_responses_total{{code=\"{status}\"}} {count}");
        }
        out
    }
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// Label values escape backslash, double quote and newline (the exposition format's rule).
fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_histograms_and_gauges() {
        let metrics = Metrics::default();
        metrics.run_finished("sh", "ok", Some(Duration::from_millis(7)));
        metrics.run_finished("sh", "ok", Some(Duration::from_millis(30)));
        metrics.run_finished("py\"x", "interrupted", None);
        metrics.queue_waited(Duration::from_millis(2));
        let text = metrics.render(&Gauges { queue_depth: 3, active_runs: 2, draining: false });
        assert!(text.contains("runbox_runs_total{runtime=\"sh\",outcome=\"ok\"} 2\n"), "{text}");
        assert!(text.contains("runbox_runs_total{runtime=\"py\\\"x\",outcome=\"interrupted\"} 1\n"), "{text}");
        assert!(text.contains("runbox_run_duration_seconds_bucket{runtime=\"sh\",le=\"0.01\"} 1\n"), "{text}");
        assert!(text.contains("runbox_run_duration_seconds_bucket{runtime=\"sh\",le=\"+Inf\"} 2\n"), "{text}");
        assert!(text.contains("runbox_queue_wait_seconds_bucket{le=\"0.005\"} 1\n"), "{text}");
        assert!(text.contains("runbox_queue_wait_seconds_count 1\n"), "{text}");
        assert!(text.contains("runbox_queue_depth 3\n") && text.contains("runbox_active_runs 2\n"), "{text}");
        assert!(text.contains("# TYPE runbox_run_duration_seconds histogram\n"), "{text}");
    }
}
