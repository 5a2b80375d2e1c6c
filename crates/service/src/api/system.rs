//! `GET /v1/runtimes`, `/healthz`, `/readyz`, `/metrics`, `/openapi.json`.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use runbox_contract::ResolvedLimits;
use runbox_runtimes::Usability;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ApiError, Caller};
use crate::metrics::{CONTENT_TYPE, Gauges};
use crate::state::SharedApp;

/// One runtime the caller's tenant may use.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct RuntimeEntry {
    pub id: String,
    /// `linux` or `wasi`.
    pub kind: String,
    pub description: String,
    /// The file run when a request names no entrypoint.
    pub entrypoint: String,
    /// Whether this host can run it (its host paths exist).
    pub usable: bool,
    pub unusable_reason: Option<String>,
    /// What an omitted limit becomes, for this tenant.
    pub default_limits: ResolvedLimits,
    /// The most a request may ask for, for this tenant.
    pub max_limits: ResolvedLimits,
    pub definition_sha256: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Health {
    /// `ok` or `ready`.
    pub status: String,
}

pub async fn runtimes(State(app): State<SharedApp>, caller: Caller) -> Json<Vec<RuntimeEntry>> {
    let list = app
        .allowlist
        .iter()
        .filter(|rt| caller.tenant.allows_runtime(&rt.id))
        .map(|rt| {
            let (usable, unusable_reason) = match app.usability.of(&app.allowlist, &rt.id) {
                Usability::Usable => (true, None),
                Usability::Unusable(why) => (false, Some(why)),
            };
            let (default_limits, max_limits) = crate::run::effective_limits(&caller.tenant, rt);
            RuntimeEntry {
                id: rt.id.clone(),
                kind: rt.kind.as_str().to_string(),
                description: rt.description.clone(),
                entrypoint: rt.entrypoint.clone(),
                usable,
                unusable_reason,
                default_limits,
                max_limits,
                definition_sha256: rt.definition_sha256.clone(),
            }
        })
        .collect();
    Json(list)
}

/// Alive: the process answers.
pub async fn healthz() -> Json<Health> {
    Json(Health { status: "ok".into() })
}

/// Ready for runs: not draining, and the ledger answers.
pub async fn readyz(State(app): State<SharedApp>) -> Result<Json<Health>, ApiError> {
    app.admission.check_open()?;
    match tokio::time::timeout(Duration::from_secs(2), app.ledger.get("readyz")).await {
        Ok(Ok(_)) => Ok(Json(Health { status: "ready".into() })),
        _ => Err(ApiError::new(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "ledger_unavailable",
            "the run ledger does not answer",
        )
        .retry_after(5)),
    }
}

/// Prometheus text. Needs a key when auth is on (any tenant's): the counts are global.
pub async fn metrics(State(app): State<SharedApp>, _caller: Caller) -> Response {
    let gauges = Gauges {
        queue_depth: app.admission.queue_depth(),
        active_runs: app.admission.active_runs(),
        draining: app.admission.is_draining(),
    };
    let mut response = app.metrics.render(&gauges).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
    response
}

pub async fn openapi(State(app): State<SharedApp>) -> Json<serde_json::Value> {
    Json(app.openapi.clone())
}

/// `GET /v1/tool-schema?format=openai|anthropic|mcp`: the `run_code` tool definition for a
/// model API, as `runbox tool-schema` prints it.
pub async fn tool_schema(
    _caller: Caller,
    axum::extract::RawQuery(query): axum::extract::RawQuery,
) -> Result<Json<serde_json::Value>, ApiError> {
    let format =
        query.as_deref().unwrap_or("").split('&').find_map(|pair| pair.strip_prefix("format=")).unwrap_or("mcp");
    let format = runbox_mcp::export::Format::parse(format).ok_or_else(|| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            format!("unknown format {format:?}; use openai, anthropic or mcp"),
        )
        .with_field("format")
    })?;
    Ok(Json(runbox_mcp::export::run_code_definition(format)))
}
