//! What the service says about a run: its [`RunRecord`], as kept in the ledger and returned by
//! `POST /v1/runs`, `GET /v1/runs/{id}` and the `result` event.

use runbox_contract::RunResult;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::ErrorBody;

/// Where a run is in its life. `finished`, `rejected`, `cancelled` and `interrupted` are final.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Accepted and recorded; waiting for a slot.
    Queued,
    /// Handed to a sandbox.
    Running,
    /// The sandbox ran and returned a result (`result.verdict` says how the program did).
    Finished,
    /// The sandbox refused the request before running it (see `error`).
    Rejected,
    /// Cancelled before the sandbox started; nothing ran.
    Cancelled,
    /// The service stopped (crashed or was killed) while the run was accepted or running.
    /// Its outcome is unknown, so it is never reported as a success; it is not retried.
    Interrupted,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Queued => "queued",
            RunStatus::Running => "running",
            RunStatus::Finished => "finished",
            RunStatus::Rejected => "rejected",
            RunStatus::Cancelled => "cancelled",
            RunStatus::Interrupted => "interrupted",
        }
    }

    pub fn parse(text: &str) -> Option<RunStatus> {
        [
            RunStatus::Queued,
            RunStatus::Running,
            RunStatus::Finished,
            RunStatus::Rejected,
            RunStatus::Cancelled,
            RunStatus::Interrupted,
        ]
        .into_iter()
        .find(|s| s.as_str() == text)
    }

    pub fn is_final(self) -> bool {
        !matches!(self, RunStatus::Queued | RunStatus::Running)
    }
}

/// One run as the service knows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunRecord {
    pub run_id: String,
    pub status: RunStatus,
    /// The runtime the request asked for.
    pub runtime: String,
    /// The `Idempotency-Key` the run was created with, if any.
    pub idempotency_key: Option<String>,
    /// When the run was accepted, in milliseconds since the Unix epoch.
    pub created_at_ms: i64,
    /// When it was handed to a sandbox.
    pub started_at_ms: Option<i64>,
    /// When it reached a final status.
    pub finished_at_ms: Option<i64>,
    /// The sandbox's result, when `status` is `finished`.
    pub result: Option<RunResult>,
    /// Why there is no result, when `status` is `rejected`, `cancelled` or `interrupted`.
    pub error: Option<ErrorBody>,
}

/// The answer to `POST /v1/runs?wait=false`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Accepted {
    pub run_id: String,
    pub status: RunStatus,
    /// Where the run's record is: `/v1/runs/{run_id}`.
    pub location: String,
    /// Its live output and result, as server-sent events.
    pub events: String,
}

impl Accepted {
    pub fn of(run_id: &str, status: RunStatus) -> Accepted {
        Accepted {
            run_id: run_id.to_string(),
            status,
            location: format!("/v1/runs/{run_id}"),
            events: format!("/v1/runs/{run_id}/events"),
        }
    }
}

pub fn now_ms() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
}
