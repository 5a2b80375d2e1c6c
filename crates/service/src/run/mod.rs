//! Accepting a run: idempotency, admission, the ledger, and handing it to its task.

mod policy;
mod prepare;
mod task;

use std::sync::Arc;
use std::time::Instant;

pub use policy::effective_limits;
pub use prepare::{PreparedRun, prepare};

use crate::api::ApiError;
use crate::config::TenantPolicy;
use crate::ledger::{Accept, NewRun, Stored};
use crate::live::LiveRun;
use crate::record::now_ms;
use crate::state::SharedApp;

pub enum Submission {
    /// A new run, accepted and recorded.
    New(Arc<LiveRun>),
    /// The tenant's idempotency key is already bound to this run; nothing new was started.
    Existing(Box<Stored>),
}

/// Records `job` as accepted and starts its task, unless the idempotency key is already
/// bound, in which case the bound run is returned instead (the caller compares fingerprints).
pub async fn submit(
    app: &SharedApp,
    tenant: &TenantPolicy,
    idempotency_key: Option<String>,
    job: PreparedRun,
    fingerprint: String,
) -> Result<Submission, ApiError> {
    // A retry of a known key must not need a place in the queue: look before enqueueing. The
    // ledger's accept below decides races between retries that both miss here.
    if let Some(key) = &idempotency_key
        && let Some(existing) = app.ledger.find_by_key(&tenant.name, key).await.map_err(|e| ApiError::ledger(&e))?
    {
        return Ok(Submission::Existing(Box::new(existing)));
    }
    let ticket = app.admission.enqueue(&tenant.name).inspect_err(|e| app.metrics.refused(&e.body.code))?;
    let run_id = new_run_id()?;
    let live = app.live.register(&run_id, &tenant.name);
    // Checked after registering: a drain that starts now waits for this run (see shutdown.rs).
    if app.admission.is_draining() {
        app.live.remove(&run_id);
        return Err(ApiError::draining());
    }
    let created_ms = now_ms();
    let accepted_at = Instant::now();
    let new = NewRun {
        run_id: run_id.clone(),
        tenant: tenant.name.clone(),
        idempotency_key: idempotency_key.clone(),
        request_sha256: fingerprint,
        runtime: job.runtime.id.clone(),
        created_ms,
    };
    match app.ledger.accept(new).await {
        Ok(Accept::Accepted) => {
            tracing::info!(run_id = %run_id, tenant = %tenant.name, runtime = %job.runtime.id, "run accepted");
            let accepted = task::Accepted { idempotency_key, created_ms, accepted_at };
            task::spawn(app.clone(), live.clone(), ticket, job, accepted);
            Ok(Submission::New(live))
        }
        Ok(Accept::Existing(stored)) => {
            app.live.remove(&run_id);
            Ok(Submission::Existing(stored))
        }
        Err(e) => {
            app.live.remove(&run_id);
            Err(ApiError::ledger(&e))
        }
    }
}

/// 128 random bits in hex: unique, and unguessable by another tenant.
fn new_run_id() -> Result<String, ApiError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| ApiError::internal(format!("no randomness for a run id: {e}")))?;
    Ok(hex::encode(bytes))
}

/// The record of a run in flight or done: from the live registry when it is in flight (waiting
/// for its end when `wait`), else from the ledger.
pub async fn current_record(app: &SharedApp, stored: Stored, wait: bool) -> Result<crate::record::RunRecord, ApiError> {
    if stored.record.status.is_final() || !wait {
        return Ok(stored.record);
    }
    if let Some(live) = app.live.get(&stored.record.run_id) {
        return Ok((*live.finished().await).clone());
    }
    // Not in flight any more: it finished between the two lookups (see live.rs).
    let again = app.ledger.get(&stored.record.run_id).await.map_err(|e| ApiError::ledger(&e))?;
    Ok(again.map_or(stored.record, |s| s.record))
}
