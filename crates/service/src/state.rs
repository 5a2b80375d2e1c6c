//! What every request handler and run task shares.

use std::path::PathBuf;
use std::sync::Arc;

use runbox_contract::RequestBounds;
use runbox_runtimes::Allowlist;

use crate::admission::Admission;
use crate::config::ServiceConfig;
use crate::executor::Executor;
use crate::ledger::Ledger;
use crate::live::LiveRuns;
use crate::metrics::Metrics;
use crate::usable::UsabilityCache;

pub struct App {
    pub config: ServiceConfig,
    pub allowlist: Allowlist,
    pub usability: UsabilityCache,
    pub bounds: RequestBounds,
    pub ledger: Ledger,
    pub live: LiveRuns,
    pub admission: Arc<Admission>,
    pub metrics: Metrics,
    pub executor: Executor,
    /// `<serve dir>/artifacts`: blobs by SHA-256.
    pub blobs_dir: PathBuf,
    /// The OpenAPI document, built once.
    pub openapi: serde_json::Value,
}

pub type SharedApp = Arc<App>;
