//! The public run contract of runbox.
//!
//! These types are what callers send and receive over the CLI, the HTTP API and MCP.
//! Field names are the public contract: renaming one is a breaking change.
//! This crate does no I/O, so every rule here can be tested without a kernel.

mod checks;
mod limits;
mod request;
mod result;
mod validate;

pub use checks::{Check, CheckResult};
pub use limits::{Limits, ResolvedLimits};
pub use request::{Encoding, FileSpec, Network, OnOutputLimit, RunRequest};
pub use result::{
    Artifact, CleanupReport, ErrorInfo, LimitKind, RunResult, RuntimeInfo, SkippedArtifact, StreamOutput, Timings,
    Usage, Verdict,
};
pub use validate::{InputFile, RequestBounds, ValidatedRequest, ValidationError, validate_path};

/// JSON Schema of [`RunRequest`], as served to clients.
pub fn request_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(RunRequest)).expect("schema serializes")
}

/// JSON Schema of [`RunResult`], as served to clients.
pub fn result_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(RunResult)).expect("schema serializes")
}
