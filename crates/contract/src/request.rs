use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::Limits;

/// A request to run untrusted code. It carries code as data (files), never as a path to run:
/// the executable always comes from the runtime chosen from the allowlist.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunRequest {
    /// Id of a runtime from the allowlist (`runbox runtimes`).
    pub runtime: String,
    /// Files written into /workspace before the run.
    #[serde(default)]
    pub files: Vec<FileSpec>,
    /// Path of the file to run, relative to /workspace. Defaults to the runtime's entrypoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entrypoint: Option<String>,
    /// Arguments passed to the program after the entrypoint.
    #[serde(default)]
    pub args: Vec<String>,
    /// Standard input, as UTF-8 text. Exclusive with `stdin_base64`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdin: Option<String>,
    /// Standard input, as base64 bytes. Exclusive with `stdin`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdin_base64: Option<String>,
    /// Environment variables added to the runtime's defaults.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Environment variables whose values are redacted from everything runbox returns or logs.
    #[serde(default)]
    pub secrets: BTreeMap<String, String>,
    /// Resource limits; omitted fields take the runtime's defaults.
    #[serde(default)]
    pub limits: Limits,
    /// Network access. Only `none` exists: a private network namespace with loopback alone.
    #[serde(default)]
    pub network: Network,
    /// What to do when a stream passes `limits.output_bytes`.
    #[serde(default)]
    pub on_output_limit: OnOutputLimit,
    /// WASI runtimes only: a clock that starts at 2000-01-01T00:00:00Z and advances 1 ms per
    /// read, and random bytes from a fixed seed, so the same request gives byte-identical
    /// output. Refused for Linux runtimes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deterministic: bool,
    /// Checks runbox evaluates after the run, on the host (see [`crate::Check`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<crate::Check>,
}

/// One input file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileSpec {
    /// Relative path inside /workspace; no `..`, no leading `/`.
    pub path: String,
    /// The file's content, encoded as `encoding` says.
    pub content: String,
    #[serde(default)]
    pub encoding: Encoding,
    /// Sets the executable bits (0755 instead of 0644).
    #[serde(default)]
    pub executable: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Encoding {
    #[default]
    Utf8,
    Base64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Network {
    /// A private network namespace holding only a loopback interface.
    #[default]
    None,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OnOutputLimit {
    /// Keep the head and the tail of the stream, flag it truncated, and let the program go on.
    #[default]
    Truncate,
    /// Stop the run with the verdict `output_limit`.
    Kill,
}

impl RunRequest {
    /// Parses a request from JSON. Only an object is a request: serde's derive would also
    /// accept an array and take the fields by position, which no caller means.
    pub fn from_json(bytes: &[u8]) -> Result<RunRequest, crate::ValidationError> {
        let value: serde_json::Value = serde_json::from_slice(bytes)
            .map_err(|e| crate::ValidationError::new("body", format!("the request is not valid JSON: {e}")))?;
        if !value.is_object() {
            return Err(crate::ValidationError::new(
                "body",
                "the request must be a JSON object such as {\"runtime\": \"python\", \"files\": [...]}",
            ));
        }
        serde_json::from_value(value)
            .map_err(|e| crate::ValidationError::new("body", format!("the request is not a valid RunRequest: {e}")))
    }
}
