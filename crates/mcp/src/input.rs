//! The `run_code` tool's input: a friendlier shape of the RunRequest for models, turned into
//! a RunRequest here.

use std::collections::BTreeMap;

use runbox_contract::{Check, FileSpec, Limits, RunRequest, ValidationError};
use runbox_runtimes::Allowlist;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Arguments of `run_code`. Give either `code` (one file, named as the runtime expects) or
/// `files` with an `entrypoint`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunCodeInput {
    /// Runtime id, from list_runtimes (e.g. "python", "sh", "node", "c").
    pub runtime: String,
    /// Source code, written to the runtime's default entrypoint (main.py, main.sh, ...).
    #[serde(default)]
    pub code: Option<String>,
    /// Files written into /workspace, when one `code` file is not enough.
    #[serde(default)]
    pub files: Option<Vec<FileSpec>>,
    /// The file to run, relative to /workspace; defaults to the runtime's entrypoint.
    #[serde(default)]
    pub entrypoint: Option<String>,
    /// Standard input for the program.
    #[serde(default)]
    pub stdin: Option<String>,
    /// Arguments for the program.
    #[serde(default)]
    pub args: Option<Vec<String>>,
    /// Environment variables, as a map or as a list of {name, value}.
    #[serde(default)]
    pub env: Option<EnvInput>,
    /// Resource limits; omitted ones take the runtime's defaults (see list_runtimes).
    #[serde(default)]
    pub limits: Option<Limits>,
    /// Checks runbox evaluates after the run, which the code cannot influence.
    #[serde(default)]
    pub checks: Option<Vec<Check>>,
}

/// Environment variables: a map, or (for function-calling APIs whose strict mode has no maps)
/// a list of name/value pairs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum EnvInput {
    Map(BTreeMap<String, String>),
    Pairs(Vec<EnvVar>),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EnvVar {
    pub name: String,
    pub value: String,
}

impl RunCodeInput {
    /// The RunRequest this input means. Refuses `code` together with `files` that already
    /// hold the entrypoint, and an unknown runtime (listing the known ones).
    pub fn into_request(self, allowlist: &Allowlist) -> Result<RunRequest, ValidationError> {
        let mut files = self.files.unwrap_or_default();
        if let Some(code) = self.code {
            let runtime = allowlist.get(&self.runtime).ok_or_else(|| {
                let known: Vec<&str> = allowlist.ids().collect();
                ValidationError::new(
                    "runtime",
                    format!("unknown runtime {:?}; choose one of: {}", self.runtime, known.join(", ")),
                )
            })?;
            let path = self.entrypoint.clone().unwrap_or_else(|| runtime.entrypoint.clone());
            if files.iter().any(|f| f.path == path) {
                return Err(ValidationError::new(
                    "code",
                    format!("{path:?} is given both as code and in files; give it once"),
                ));
            }
            files.push(FileSpec { path, content: code, encoding: Default::default(), executable: false });
        }
        let env = match self.env {
            None => BTreeMap::new(),
            Some(EnvInput::Map(map)) => map,
            Some(EnvInput::Pairs(pairs)) => pairs.into_iter().map(|v| (v.name, v.value)).collect(),
        };
        Ok(RunRequest {
            runtime: self.runtime,
            files,
            entrypoint: self.entrypoint,
            args: self.args.unwrap_or_default(),
            stdin: self.stdin,
            env,
            limits: self.limits.unwrap_or_default(),
            checks: self.checks.unwrap_or_default(),
            ..RunRequest::default()
        })
    }
}
