use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A check runbox evaluates on the host after the run, from the captured output and the
/// hashed artifacts. The code under test cannot reach it, so it cannot weaken it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Check {
    /// The program exited with this status.
    ExitCode { equals: i32 },
    /// stdout contains this text.
    StdoutContains { text: String },
    /// stdout matches this regular expression (Rust `regex` syntax, linear-time).
    StdoutRegex { pattern: String },
    /// The program left this file in /workspace.
    ArtifactExists { path: String },
    /// The program left this file with this SHA-256 (lowercase hex).
    ArtifactSha256 { path: String, sha256: String },
    /// The program left this file, at most this large.
    ArtifactMaxBytes { path: String, max_bytes: u64 },
    /// stdout parses as JSON and, when given, matches this small JSON Schema (keywords:
    /// type, enum, const, properties, required, additionalProperties, items, minimum,
    /// maximum, minLength, maxLength, minItems, maxItems).
    StdoutJson {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        schema: Option<serde_json::Value>,
    },
}

/// The outcome of one check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CheckResult {
    pub check: Check,
    pub passed: bool,
    /// What was found, in a sentence.
    pub detail: String,
}
