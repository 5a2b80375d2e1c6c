//! Runs in flight, in memory: their live output for event streams, their final record for
//! waiting callers, and their cancel switch.
//!
//! Ordering, which lookups rely on: a run is registered here before it is recorded in the
//! ledger, and removed only after its final status is recorded. So a caller that finds a
//! non-final run in the ledger and then misses it here knows it has just finished, and reads
//! the ledger again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use crate::record::RunRecord;

/// One event of a run, as streamed to `GET /v1/runs/{id}/events`.
#[derive(Debug, Clone)]
pub enum LiveEvent {
    /// The sandbox was spawned.
    Started,
    /// Output as written, secrets already redacted by the sandbox: (stream, base64 data).
    Output { stream: String, data_base64: String },
    /// The stream passed `limits.output_bytes`; no more of it is streamed.
    Truncated { stream: String },
    /// The final record. Always the last event.
    Finished(Arc<RunRecord>),
}

pub struct LiveRun {
    pub run_id: String,
    pub tenant: String,
    /// Every event so far. Bounded: the sandbox sends at most `limits.output_bytes` per stream.
    log: Mutex<Vec<LiveEvent>>,
    /// Bumped on each event, to wake readers.
    version: watch::Sender<usize>,
    cancel: watch::Sender<bool>,
}

impl LiveRun {
    pub fn push(&self, event: LiveEvent) {
        let len = {
            let mut log = self.log.lock().expect("live log");
            log.push(event);
            log.len()
        };
        self.version.send_replace(len);
    }

    /// The events from index `from` on, waiting until there is at least one.
    pub async fn events_from(&self, from: usize) -> Vec<LiveEvent> {
        let mut version = self.version.subscribe();
        loop {
            {
                let log = self.log.lock().expect("live log");
                if log.len() > from {
                    return log[from..].to_vec();
                }
            }
            if version.changed().await.is_err() {
                return Vec::new();
            }
        }
    }

    /// Waits for the final record.
    pub async fn finished(&self) -> Arc<RunRecord> {
        let mut next = 0;
        loop {
            for event in self.events_from(next).await {
                next += 1;
                if let LiveEvent::Finished(record) = event {
                    return record;
                }
            }
        }
    }

    pub fn request_cancel(&self) {
        self.cancel.send_replace(true);
    }

    pub fn cancel_requested(&self) -> bool {
        *self.cancel.borrow()
    }

    /// Resolves once a cancel is requested.
    pub async fn cancelled(&self) {
        let mut rx = self.cancel.subscribe();
        let _ = rx.wait_for(|c| *c).await;
    }
}

/// The registry of runs in flight.
#[derive(Default)]
pub struct LiveRuns {
    runs: Mutex<HashMap<String, Arc<LiveRun>>>,
    count: watch::Sender<usize>,
}

impl LiveRuns {
    pub fn register(&self, run_id: &str, tenant: &str) -> Arc<LiveRun> {
        let run = Arc::new(LiveRun {
            run_id: run_id.to_string(),
            tenant: tenant.to_string(),
            log: Mutex::new(Vec::new()),
            version: watch::Sender::new(0),
            cancel: watch::Sender::new(false),
        });
        let mut runs = self.runs.lock().expect("live runs");
        runs.insert(run_id.to_string(), run.clone());
        self.count.send_replace(runs.len());
        run
    }

    pub fn remove(&self, run_id: &str) {
        let mut runs = self.runs.lock().expect("live runs");
        runs.remove(run_id);
        self.count.send_replace(runs.len());
    }

    pub fn get(&self, run_id: &str) -> Option<Arc<LiveRun>> {
        self.runs.lock().expect("live runs").get(run_id).cloned()
    }

    pub fn all(&self) -> Vec<Arc<LiveRun>> {
        self.runs.lock().expect("live runs").values().cloned().collect()
    }

    pub fn len(&self) -> usize {
        *self.count.borrow()
    }

    /// Resolves when no run is in flight.
    pub async fn drained(&self) {
        let mut rx = self.count.subscribe();
        let _ = rx.wait_for(|n| *n == 0).await;
    }
}
