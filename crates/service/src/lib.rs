//! `runbox serve`: the HTTP API in front of the sandbox.
//!
//! One request, end to end: auth (API key → tenant) → admission (draining? rate? body within
//! its caps?) → validation and tenant policy, in-process → idempotency check → a place in the
//! bounded queue → recorded `queued` in the ledger → a slot (tenant's, then global) → recorded
//! `running` → a child `runbox run` process does the sandboxing (see [`executor`]) → its
//! result and artifacts recorded → answered, and streamed to event listeners.
//!
//! Runs never execute in this process: it is multi-threaded, and sandboxes are cloned from a
//! single-threaded one.

mod admission;
pub mod api;
pub mod config;
mod error;
mod executor;
mod layout;
mod ledger;
mod live;
mod metrics;
mod record;
mod recover;
mod redact;
mod run;
mod shutdown;
mod state;
mod usable;

use std::ffi::OsString;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use runbox_contract::RequestBounds;
use runbox_runtimes::Allowlist;

pub use error::ServiceError;
pub use record::{Accepted, RunRecord, RunStatus};

use config::ServiceConfig;
use state::{App, SharedApp};

/// How often expired runs and unreferenced artifacts are deleted (also once at start-up).
const PURGE_INTERVAL: Duration = Duration::from_secs(3600);
/// After the drain, how long open connections (event streams, slow readers) get to finish.
const CONNECTION_GRACE: Duration = Duration::from_secs(5);

/// How `runbox serve` was started.
pub struct ServeOptions {
    /// The runbox state directory; the service keeps its files in `<state_dir>/serve`.
    pub state_dir: PathBuf,
    /// The configuration file. Default `<state_dir>/serve/config.toml`, created on first start.
    pub config_path: Option<PathBuf>,
    /// Overrides the configuration's `listen`.
    pub listen: Option<SocketAddr>,
    pub allowlist: Allowlist,
    /// The runs' cache directory (`--cache-dir`: WASI runtimes' packages and compiled modules).
    pub cache_dir: PathBuf,
    /// The runbox binary that runs each request (`runbox run`).
    pub runbox_exe: PathBuf,
    /// Global flags for it (`--cache-dir`, `--runtimes-dir`, `--images-dir`), so runs see the same
    /// allowlist and cache.
    pub global_args: Vec<OsString>,
}

/// Starts a multi-threaded async runtime and runs [`serve`] on it.
pub fn serve_blocking(options: ServeOptions) -> Result<(), ServiceError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("runbox-serve")
        .build()
        .map_err(|e| ServiceError::io("start the async runtime for", &options.state_dir, e))?;
    runtime.block_on(serve(options))
}

/// Runs the service until SIGTERM or SIGINT, then drains. Prints the bound address (and, on
/// the first start, the generated API key) on stdout; logs JSON lines on stderr.
pub async fn serve(options: ServeOptions) -> Result<(), ServiceError> {
    init_logging();
    let layout = layout::Layout::create(&options.state_dir)?;
    let _lock = layout.lock()?;
    let config_path = options.config_path.clone().unwrap_or_else(|| layout.default_config.clone());
    let (file, new_key) = config::keys::load_or_init(&config_path)?;
    let config = ServiceConfig::resolve(file, &config_path, options.listen, &options.allowlist)?;
    let ledger = ledger::Ledger::open(&layout.ledger, config.synchronous)?;
    let recovered = recover::recover(&ledger, &layout.sandboxes, &layout.incoming).await?;
    let cutoff = record::now_ms() - retention_ms(&config);
    let purged = ledger.purge(cutoff, layout.artifacts.clone()).await?;
    tracing::info!(
        interrupted = recovered.interrupted,
        sweep_problems = recovered.problems,
        runs_expired = purged.runs_deleted,
        blobs_deleted = purged.blobs_deleted,
        "recovered"
    );
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|source| ServiceError::Listen { addr: config.listen, source })?;
    let bound = listener.local_addr().map_err(|source| ServiceError::Listen { addr: config.listen, source })?;
    let admission = Arc::new(admission::Admission::new(config.admission, config.tenants.values().map(|t| t.as_ref())));
    let app: SharedApp = Arc::new(App {
        executor: executor::Executor {
            exe: options.runbox_exe,
            global_args: options.global_args,
            state_dir: layout.sandboxes.clone(),
            incoming_dir: layout.incoming.clone(),
        },
        allowlist: options.allowlist,
        usability: usable::UsabilityCache::new(options.cache_dir),
        bounds: RequestBounds::default(),
        ledger,
        live: Default::default(),
        admission,
        metrics: Default::default(),
        blobs_dir: layout.artifacts.clone(),
        openapi: api::openapi::document(),
        config,
    });
    announce(&config_path, new_key.as_ref(), bound, app.config.auth);
    tracing::info!(listen = %bound, auth = app.config.auth, tenants = app.config.tenants.len(), "serving");
    tokio::spawn(purge_periodically(app.clone()));
    let (drained_tx, drained_rx) = tokio::sync::oneshot::channel::<()>();
    let drain_app = app.clone();
    tokio::spawn(async move {
        shutdown::drain_on_signal(drain_app).await;
        let _ = drained_tx.send(());
    });
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let server = axum::serve(listener, api::router(app.clone())).with_graceful_shutdown(async move {
        let _ = drained_rx.await;
        let _ = stop_tx.send(true);
    });
    let grace = async move {
        let mut stop_rx = stop_rx;
        let _ = stop_rx.wait_for(|stopped| *stopped).await;
        tokio::time::sleep(CONNECTION_GRACE).await;
    };
    tokio::select! {
        served = server.into_future() => served.map_err(|source| ServiceError::Listen { addr: bound, source })?,
        () = grace => tracing::warn!("connections still open after the drain; closing them"),
    }
    tracing::info!("stopped");
    Ok(())
}

/// What a person starting the service needs: the address, and a new key (shown only now).
fn announce(config_path: &std::path::Path, new_key: Option<&config::keys::NewKey>, bound: SocketAddr, auth: bool) {
    let mut out = std::io::stdout().lock();
    if let Some(new) = new_key {
        let _ = writeln!(
            out,
            "runbox serve: generated an API key for tenant {:?}; it is stored only as a hash in {} and shown \
             only this once:\n  {}",
            new.tenant,
            config_path.display(),
            new.key
        );
    }
    if !auth {
        let _ = writeln!(out, "runbox serve: auth is off (loopback only): every request is tenant \"default\"");
    }
    let _ = writeln!(out, "runbox serve: listening on http://{bound}");
    let _ = out.flush();
}

fn retention_ms(config: &ServiceConfig) -> i64 {
    i64::try_from(config.retention.as_millis()).unwrap_or(i64::MAX)
}

async fn purge_periodically(app: SharedApp) {
    let mut ticks = tokio::time::interval(PURGE_INTERVAL);
    ticks.tick().await; // the first tick is immediate, and start-up has just purged
    loop {
        ticks.tick().await;
        let cutoff = record::now_ms() - retention_ms(&app.config);
        match app.ledger.purge(cutoff, app.blobs_dir.clone()).await {
            Ok(report) => tracing::info!(runs = report.runs_deleted, blobs = report.blobs_deleted, "retention purge"),
            Err(e) => tracing::error!(error = %e, "retention purge failed"),
        }
    }
}

/// JSON lines on stderr; `RUNBOX_LOG` filters (default `info`).
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("RUNBOX_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_current_span(true)
        .with_span_list(false)
        .with_target(false)
        .with_writer(std::io::stderr)
        .try_init();
}
