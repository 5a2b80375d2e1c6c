//! The life of one accepted run, as a task of its own (a caller that hangs up does not stop
//! it): wait for a slot, record `running`, run the sandbox, record the final status, tell
//! whoever waits.

use std::sync::Arc;
use std::time::{Duration, Instant};

use runbox_contract::{CleanupReport, ErrorInfo, ResolvedLimits, RunResult, RuntimeInfo, Timings, Usage, Verdict};
use tracing::Instrument;

use super::PreparedRun;
use crate::admission::Ticket;
use crate::api::ErrorBody;
use crate::executor::{ChildOutcome, discard_incoming};
use crate::ledger::{AdoptArtifacts, Final};
use crate::live::{LiveEvent, LiveRun};
use crate::record::{RunRecord, RunStatus, now_ms};
use crate::state::SharedApp;

/// What the task knows of its run's record from the start.
pub struct Accepted {
    pub idempotency_key: Option<String>,
    pub created_ms: i64,
    pub accepted_at: Instant,
}

pub fn spawn(app: SharedApp, live: Arc<LiveRun>, ticket: Ticket, job: PreparedRun, accepted: Accepted) {
    let span = tracing::info_span!("run", run_id = %live.run_id, tenant = %live.tenant, runtime = %job.runtime.id);
    tokio::spawn(drive(app, live, ticket, job, accepted).instrument(span));
}

async fn drive(app: SharedApp, live: Arc<LiveRun>, ticket: Ticket, job: PreparedRun, accepted: Accepted) {
    let run_id = live.run_id.clone();
    let slot = tokio::select! {
        slot = ticket.start() => Some(slot),
        () = live.cancelled() => None,
    };
    let base = RunRecord {
        run_id: run_id.clone(),
        status: RunStatus::Queued,
        runtime: job.runtime.id.clone(),
        idempotency_key: accepted.idempotency_key,
        created_at_ms: accepted.created_ms,
        started_at_ms: None,
        finished_at_ms: None,
        result: None,
        error: None,
    };
    let Some(_slot) = slot else {
        let error = error_body("cancelled", "cancelled while waiting for a slot; nothing ran");
        return finalize(&app, &live, base, RunStatus::Cancelled, None, Some(error), None, None).await;
    };
    let queue_wait = accepted.accepted_at.elapsed();
    app.metrics.queue_waited(queue_wait);
    let started_ms = now_ms();
    let base = RunRecord { started_at_ms: Some(started_ms), ..base };
    // Recorded before the sandbox exists: after a crash, the ledger never claims a run did not
    // start when it might have.
    if let Err(e) = app.ledger.mark_running(&run_id, started_ms).await {
        tracing::error!(error = %e, "could not record the run as running; it is not started");
        let error = error_body("ledger", "the run could not be recorded as started, so it was not started; retry");
        return finalize(&app, &live, base, RunStatus::Rejected, None, Some(error), None, None).await;
    }
    let begun = Instant::now();
    tracing::debug!(queue_wait_ms = queue_wait.as_millis() as u64, "run starting");
    let PreparedRun { request, runtime, limits, redactor } = job;
    let outcome = app.executor.run(&run_id, request, &live, &redactor).await;
    let incoming = app.executor.incoming_of(&run_id);
    let elapsed = Some(begun.elapsed());
    match outcome {
        ChildOutcome::Result(result) => {
            let adopt = AdoptArtifacts {
                incoming,
                blobs: app.blobs_dir.clone(),
                artifacts: result.artifacts.iter().map(|a| (a.path.clone(), a.sha256.clone(), a.size_bytes)).collect(),
            };
            finalize(&app, &live, base, RunStatus::Finished, Some(*result), None, Some(adopt), elapsed).await;
        }
        ChildOutcome::Rejected(error) => {
            discard_incoming(&incoming);
            finalize(&app, &live, base, RunStatus::Rejected, None, Some(error), None, elapsed).await;
        }
        ChildOutcome::CancelledBeforeStart => {
            discard_incoming(&incoming);
            let error = error_body("cancelled", "cancelled before the sandbox started; nothing ran");
            finalize(&app, &live, base, RunStatus::Cancelled, None, Some(error), None, elapsed).await;
        }
        ChildOutcome::Failed { code, message } => {
            // runbox itself failed and gave no result: that is a sandbox_error, never the
            // program's fault and never a success; teardown is unknown, so it is not claimed.
            tracing::error!(code, error = %message, "the sandbox process failed");
            discard_incoming(&incoming);
            let result = sandbox_error(&run_id, &runtime, limits, code, message);
            finalize(&app, &live, base, RunStatus::Finished, Some(result), None, None, elapsed).await;
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn finalize(
    app: &SharedApp,
    live: &LiveRun,
    base: RunRecord,
    status: RunStatus,
    result: Option<RunResult>,
    error: Option<ErrorBody>,
    artifacts: Option<AdoptArtifacts>,
    elapsed: Option<Duration>,
) {
    let finished_ms = now_ms();
    let result_json = result.as_ref().map(|r| serde_json::to_string(r).expect("a result serializes"));
    let done = Final { status, at_ms: finished_ms, result_json, error: error.clone(), artifacts };
    if let Err(e) = app.ledger.finish(&live.run_id, done).await {
        // The caller still gets the outcome; the ledger keeps `running`, which a restart turns
        // into `interrupted`: unknown, never a success.
        tracing::error!(error = %e, "could not record the run's outcome");
    }
    let outcome = result.as_ref().map_or(status.as_str(), |r| r.verdict.as_str()).to_string();
    app.metrics.run_finished(&base.runtime, &outcome, elapsed);
    tracing::info!(
        status = status.as_str(),
        outcome = %outcome,
        run_ms = elapsed.map(|d| d.as_millis() as u64),
        cleanup_ok = result.as_ref().map(|r| r.cleanup.ok),
        "run ended"
    );
    let record = RunRecord { status, finished_at_ms: Some(finished_ms), result, error, ..base };
    live.push(LiveEvent::Finished(Arc::new(record)));
    app.live.remove(&live.run_id);
}

fn error_body(code: &str, message: &str) -> ErrorBody {
    ErrorBody { code: code.into(), message: message.into(), field: None }
}

/// The result of a run whose sandbox process failed without one. Built through serde, so that a
/// field the contract adds later (with its default) needs no change here.
fn sandbox_error(
    run_id: &str,
    runtime: &RuntimeInfo,
    limits: ResolvedLimits,
    code: &str,
    message: String,
) -> RunResult {
    let empty = serde_json::json!({"bytes_total": 0, "truncated": false});
    let cleanup = CleanupReport {
        ok: false,
        error: Some("unknown: the sandbox process gave no report; leftovers are swept at the next start".into()),
    };
    let result = serde_json::json!({
        "run_id": run_id,
        "verdict": Verdict::SandboxError,
        "exit_code": null,
        "signal": null,
        "stdout": empty,
        "stderr": empty,
        "artifacts": [],
        "artifacts_truncated": false,
        "artifacts_skipped": [],
        "usage": Usage::default(),
        "limits": limits,
        "limits_hit": [],
        "isolation": [],
        "runtime": runtime,
        "timings": Timings::default(),
        "cleanup": cleanup,
        "error": ErrorInfo { code: code.to_string(), message },
        "step": "run",
    });
    serde_json::from_value(result).expect("a complete RunResult")
}
