//! `POST /v1/runs`, `GET /v1/runs/{id}`, `POST /v1/runs/{id}/cancel`.

use std::time::Duration;

use axum::Json;
use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::{ApiError, Caller, RunId};
use crate::ledger::Stored;
use crate::record::{Accepted, RunRecord, RunStatus};
use crate::run::{self, Submission};
use crate::state::SharedApp;

pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
/// How long `POST /v1/runs/{id}/cancel` waits for the run's final record before answering 202.
const CANCEL_WAIT: Duration = Duration::from_secs(10);

pub async fn create(
    State(app): State<SharedApp>,
    caller: Caller,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let wait = parse_wait(query.as_deref())?;
    app.admission.check_open().inspect_err(|e| app.metrics.refused(&e.body.code))?;
    app.admission.check_rate(&caller.tenant.name).inspect_err(|e| app.metrics.refused(&e.body.code))?;
    let key = idempotency_key(&headers)?;
    let (body, budget) = super::body::read(body, &headers, &app.admission).await?;
    let (mut job, canonical) = run::prepare(&body, &caller.tenant, &app.allowlist, &app.bounds, &app.usability)?;
    drop(body);
    job.request.budget = Some(budget);
    let fingerprint = app.ledger.fingerprint(&canonical);
    match run::submit(&app, &caller.tenant, key, job, fingerprint.clone()).await? {
        Submission::New(live) => {
            if !wait {
                return Ok(accepted(&live.run_id, RunStatus::Queued));
            }
            let record = live.finished().await;
            Ok(respond(&record))
        }
        Submission::Existing(stored) => {
            if stored.request_sha256 != fingerprint {
                return Err(ApiError::unprocessable(
                    "Idempotency-Key",
                    format!(
                        "this Idempotency-Key was already used for a different request (run {}); \
                         use a new key for a new request",
                        stored.record.run_id
                    ),
                ));
            }
            tracing::info!(run_id = %stored.record.run_id, "idempotent retry answered from the ledger");
            if !wait && !stored.record.status.is_final() {
                return Ok(accepted(&stored.record.run_id, stored.record.status));
            }
            let record = run::current_record(&app, *stored, wait).await?;
            Ok(respond(&record))
        }
    }
}

pub async fn get(State(app): State<SharedApp>, caller: Caller, RunId(id): RunId) -> Result<Json<RunRecord>, ApiError> {
    Ok(Json(lookup(&app, &caller, &id).await?.record))
}

pub async fn cancel(State(app): State<SharedApp>, caller: Caller, RunId(id): RunId) -> Result<Response, ApiError> {
    let stored = lookup(&app, &caller, &id).await?;
    let live = match app.live.get(&id) {
        Some(live) if !stored.record.status.is_final() => live,
        _ => {
            // Final, or it became final between the two lookups.
            let record =
                app.ledger.get(&id).await.map_err(|e| ApiError::ledger(&e))?.map_or(stored.record, |s| s.record);
            let how = record.result.as_ref().map_or(record.status.as_str(), |r| r.verdict.as_str());
            return Err(ApiError::conflict(format!("run {id} has already ended ({how}); there is nothing to cancel")));
        }
    };
    live.request_cancel();
    tracing::info!(run_id = %id, "cancel requested");
    match tokio::time::timeout(CANCEL_WAIT, live.finished()).await {
        Ok(record) => Ok(respond(&record)),
        Err(_) => Ok(accepted(&id, RunStatus::Running)),
    }
}

/// The run `id` of the caller's tenant. Another tenant's run is answered exactly like a run
/// that does not exist.
pub async fn lookup(app: &SharedApp, caller: &Caller, id: &str) -> Result<Stored, ApiError> {
    let not_found = || ApiError::not_found(format!("no run {id:?}; run ids are returned by POST /v1/runs"));
    let plain =
        !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !plain {
        return Err(not_found());
    }
    match app.ledger.get(id).await.map_err(|e| ApiError::ledger(&e))? {
        Some(stored) if stored.tenant == caller.tenant.name => Ok(stored),
        _ => Err(not_found()),
    }
}

/// A run's record as the answer to a request that waited: 200 with the record, except a run
/// the sandbox refused, which is answered like any refused request (422), with its reason.
fn respond(record: &RunRecord) -> Response {
    let mut response = match (&record.status, &record.error) {
        (RunStatus::Rejected, Some(error)) if error.code == "invalid_request" => {
            ApiError { status: StatusCode::UNPROCESSABLE_ENTITY, body: error.clone(), retry_after_s: None }
                .into_response()
        }
        _ => Json(record).into_response(),
    };
    set_location(&mut response, &record.run_id);
    response
}

fn accepted(run_id: &str, status: RunStatus) -> Response {
    let mut response = (StatusCode::ACCEPTED, Json(Accepted::of(run_id, status))).into_response();
    set_location(&mut response, run_id);
    response
}

fn set_location(response: &mut Response, run_id: &str) {
    if let Ok(value) = HeaderValue::from_str(&format!("/v1/runs/{run_id}")) {
        response.headers_mut().insert(header::LOCATION, value);
    }
}

fn parse_wait(query: Option<&str>) -> Result<bool, ApiError> {
    let mut wait = true;
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        match (name, value) {
            ("wait", "true" | "1") => wait = true,
            ("wait", "false" | "0") => wait = false,
            ("wait", other) => {
                return Err(ApiError::malformed("wait", format!("wait={other:?}: use wait=true or wait=false")));
            }
            (other, _) => {
                return Err(ApiError::malformed(
                    other,
                    format!("unknown query parameter {other:?}; the only one is wait"),
                ));
            }
        }
    }
    Ok(wait)
}

/// 1 to 255 visible ASCII characters (a UUID, a job id...).
fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(value) = headers.get(IDEMPOTENCY_KEY) else { return Ok(None) };
    let bad = || {
        ApiError::malformed("Idempotency-Key", "an Idempotency-Key is 1 to 255 visible ASCII characters, e.g. a UUID")
    };
    let key = value.to_str().map_err(|_| bad())?;
    let valid = !key.is_empty() && key.len() <= 255 && key.bytes().all(|b| (0x21..=0x7e).contains(&b));
    if valid { Ok(Some(key.to_string())) } else { Err(bad()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_defaults_to_true_and_refuses_nonsense() {
        assert!(parse_wait(None).unwrap());
        assert!(!parse_wait(Some("wait=false")).unwrap());
        assert!(parse_wait(Some("wait=1")).unwrap());
        assert_eq!(parse_wait(Some("wait=maybe")).unwrap_err().status, StatusCode::BAD_REQUEST);
        assert_eq!(parse_wait(Some("nowait")).unwrap_err().body.field.as_deref(), Some("nowait"));
    }

    #[test]
    fn idempotency_keys_are_visible_ascii() {
        let mut headers = HeaderMap::new();
        assert_eq!(idempotency_key(&headers).unwrap(), None);
        headers.insert(IDEMPOTENCY_KEY, HeaderValue::from_static("job-42"));
        assert_eq!(idempotency_key(&headers).unwrap().as_deref(), Some("job-42"));
        headers.insert(IDEMPOTENCY_KEY, HeaderValue::from_static("has space"));
        assert!(idempotency_key(&headers).is_err());
        headers.insert(IDEMPOTENCY_KEY, HeaderValue::from_str(&"k".repeat(256)).unwrap());
        assert!(idempotency_key(&headers).is_err());
    }
}
