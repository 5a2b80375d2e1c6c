//! Every error the API answers: `{"error": {"code", "message", "field"?}}` with the status that
//! says whose move it is (fix the request, authenticate, wait, or nothing: ours).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The body of every error answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ErrorResponse {
    pub error: ErrorBody,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ErrorBody {
    /// Stable machine code, e.g. `invalid_request`, `forbidden`, `queue_full`.
    pub code: String,
    /// What happened and what to do about it.
    pub message: String,
    /// The part of the request at fault, e.g. `limits.memory_bytes` or `files[2].path`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub body: ErrorBody,
    /// Seconds, sent as `Retry-After` (429 and 503).
    pub retry_after_s: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            body: ErrorBody { code: code.into(), message: message.into(), field: None },
            retry_after_s: None,
        }
    }

    pub fn with_field(mut self, field: impl Into<String>) -> ApiError {
        self.body.field = Some(field.into());
        self
    }

    pub fn retry_after(mut self, seconds: u64) -> ApiError {
        self.retry_after_s = Some(seconds.max(1));
        self
    }

    /// 400: the body is not a request at all (not JSON, not an object, unknown fields).
    pub fn malformed(field: impl Into<String>, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_request", message).with_field(field)
    }

    /// 422: a well-formed request that cannot run as asked.
    pub fn unprocessable(field: impl Into<String>, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_request", message).with_field(field)
    }

    pub fn forbidden(field: impl Into<String>, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::FORBIDDEN, "forbidden", message).with_field(field)
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    pub fn conflict(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::CONFLICT, "conflict", message)
    }

    pub fn draining() -> ApiError {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "draining",
            "the service is shutting down and accepts no new runs; retry against another instance or after restart",
        )
        .retry_after(5)
    }

    /// 500: our fault. The message is logged by the caller; the client gets no internals.
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }

    /// A ledger failure, as answered to a client.
    pub fn ledger(e: &crate::ServiceError) -> ApiError {
        tracing::error!(error = %e, "ledger operation failed");
        ApiError::internal("the run ledger failed; the operation was not recorded, retry later")
    }
}

impl From<runbox_contract::ValidationError> for ApiError {
    /// A request the contract refuses: 400 when the body itself is unusable, else 422.
    fn from(e: runbox_contract::ValidationError) -> ApiError {
        if e.field == "body" {
            ApiError::malformed(e.field, e.message)
        } else {
            ApiError::unprocessable(e.field, e.message)
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let retry_after = self.retry_after_s;
        let mut response = (self.status, axum::Json(ErrorResponse { error: self.body })).into_response();
        if let Some(seconds) = retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}
