//! MCP over streamable HTTP at `/mcp`: the same tools as `runbox mcp`, behind the same API
//! keys, tenant policy and admission as `POST /v1/runs`.

use std::sync::Arc;

use axum::Router;
use axum::extract::{FromRequestParts, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use runbox_contract::{RunRequest, RunResult, ValidationError};
use runbox_mcp::{RunError, RunboxMcp, Runs};

use super::{ApiError, Caller};
use crate::config::TenantPolicy;
use crate::run::{self, Submission};
use crate::state::SharedApp;

/// The `/mcp` service, with authentication in front of it.
pub fn router(app: SharedApp) -> Router<SharedApp> {
    let runs = tenant_runs(app.clone());
    let server = RunboxMcp::new(Arc::new(app.allowlist.clone()), runs);
    let service = runbox_mcp::http_service(server, app.config.mcp_allowed_hosts.clone());
    Router::new().nest_service("/mcp", service).layer(middleware::from_fn_with_state(app, authenticate))
}

/// Puts the caller's tenant into the request, where the tool call finds it; refuses the
/// request as the HTTP API would when the key is missing or wrong.
async fn authenticate(State(app): State<SharedApp>, request: Request, next: Next) -> Response {
    let (mut parts, body) = request.into_parts();
    match Caller::from_request_parts(&mut parts, &app).await {
        Ok(caller) => {
            parts.extensions.insert(caller.tenant);
            next.run(Request::from_parts(parts, body)).await
        }
        Err(e) => e.into_response(),
    }
}

/// Runs for the MCP server: admitted, recorded and executed like `POST /v1/runs`, for the
/// tenant the request authenticated as.
fn tenant_runs(app: SharedApp) -> Runs {
    Arc::new(move |request, extensions| {
        let app = app.clone();
        let tenant = extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Arc<TenantPolicy>>())
            .cloned();
        Box::pin(async move {
            let tenant = tenant.ok_or_else(|| RunError::Failed("the request carried no tenant".into()))?;
            run_for(&app, &tenant, request).await
        })
    })
}

async fn run_for(app: &SharedApp, tenant: &Arc<TenantPolicy>, request: RunRequest) -> Result<RunResult, RunError> {
    app.admission.check_open().map_err(refused)?;
    app.admission.check_rate(&tenant.name).map_err(refused)?;
    let body = serde_json::to_vec(&request).map_err(|e| RunError::Failed(e.to_string()))?;
    let budget = app.admission.reserve_bytes((body.len() as u64).div_ceil(1024) * 1024).map_err(refused)?;
    let (mut job, canonical) =
        run::prepare(&body, tenant, &app.allowlist, &app.bounds, &app.usability).map_err(refused)?;
    drop(body);
    job.request.budget = Some(budget);
    let fingerprint = app.ledger.fingerprint(&canonical);
    match run::submit(app, tenant, None, job, fingerprint).await.map_err(refused)? {
        Submission::New(live) => {
            let record = live.finished().await;
            record.result.clone().ok_or_else(|| {
                let why = record.error.as_ref().map_or_else(String::new, |e| format!(": {}", e.message));
                RunError::Failed(format!("the run ended {} without a result{why}", record.status.as_str()))
            })
        }
        Submission::Existing(_) => Err(RunError::Failed("no idempotency key was given, yet a run was found".into())),
    }
}

/// A refusal the caller can fix is a rejected request; being busy or draining is not.
fn refused(e: ApiError) -> RunError {
    let fixable = matches!(
        e.status,
        StatusCode::BAD_REQUEST
            | StatusCode::FORBIDDEN
            | StatusCode::PAYLOAD_TOO_LARGE
            | StatusCode::UNPROCESSABLE_ENTITY
    );
    if fixable {
        let field = e.body.field.clone().unwrap_or_else(|| e.body.code.clone());
        RunError::Rejected(ValidationError::new(field, e.body.message))
    } else {
        let retry = e.retry_after_s.map_or_else(String::new, |s| format!("; retry in {s} s"));
        RunError::Failed(format!("{}: {}{retry}", e.body.code, e.body.message))
    }
}
