//! The HTTP API (axum). Every answer that is not a success is an [`ApiError`] in JSON, the
//! router's own 404 and 405 included.

mod artifacts;
mod auth;
mod body;
mod error;
mod events;
mod mcp;
pub mod openapi;
mod runs;
mod system;

use std::time::Instant;

use axum::Router;
use axum::extract::{FromRequestParts, Path, Request, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};
use tracing::Instrument;

pub use auth::Caller;
pub use error::{ApiError, ErrorBody, ErrorResponse};
pub use system::{Health, RuntimeEntry};

use crate::state::SharedApp;

pub fn router(app: SharedApp) -> Router {
    Router::new()
        .route("/v1/runs", post(runs::create))
        .route("/v1/runs/{id}", get(runs::get))
        .route("/v1/runs/{id}/cancel", post(runs::cancel))
        .route("/v1/runs/{id}/events", get(events::stream))
        .route("/v1/runs/{id}/artifacts/{*path}", get(artifacts::get))
        .route("/v1/runtimes", get(system::runtimes))
        .route("/healthz", get(system::healthz))
        .route("/readyz", get(system::readyz))
        .route("/metrics", get(system::metrics))
        .route("/openapi.json", get(system::openapi))
        .route("/v1/tool-schema", get(system::tool_schema))
        .merge(mcp::router(app.clone()))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(app.clone(), access_log))
        .with_state(app)
}

/// The `{id}` of a run route. A path that does not parse is a run that does not exist.
pub struct RunId(pub String);

impl<S: Send + Sync> FromRequestParts<S> for RunId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<RunId, ApiError> {
        match Path::<String>::from_request_parts(parts, state).await {
            Ok(Path(id)) => Ok(RunId(id)),
            Err(e) => Err(ApiError::not_found(format!("no such run: {e}"))),
        }
    }
}

async fn not_found() -> ApiError {
    ApiError::not_found("no such endpoint; GET /openapi.json lists them")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "this endpoint does not take that method")
}

/// One span per request (its key, once authenticated, is recorded into it), one debug line
/// per answer, and the status counted in the metrics. Bodies are never logged.
async fn access_log(State(app): State<SharedApp>, request: Request, next: Next) -> Response {
    let began = Instant::now();
    let span = tracing::info_span!(
        "http",
        method = %request.method(),
        path = %request.uri().path(),
        key_id = tracing::field::Empty
    );
    let response = next.run(request).instrument(span.clone()).await;
    let status = response.status().as_u16();
    app.metrics.responded(status);
    span.in_scope(|| tracing::debug!(status, ms = began.elapsed().as_millis() as u64, "answered"));
    response
}
