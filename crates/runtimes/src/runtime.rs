use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use runbox_contract::{ResolvedLimits, validate_path};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::wasi::{WasiRuntimeFile, WasiSpec};
use crate::{Image, RuntimeError};

/// Replaced by the entrypoint's path inside the sandbox (`/workspace/<entrypoint>`).
pub const ENTRYPOINT_PLACEHOLDER: &str = "{entrypoint}";
/// A whole argv element replaced by the request's `args`, in order.
pub const ARGS_PLACEHOLDER: &str = "{args}";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuntimeKind {
    /// A Linux process in namespaces, cgroups and seccomp.
    Linux,
    /// A WebAssembly module under wasmtime.
    Wasi,
}

impl RuntimeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RuntimeKind::Linux => "linux",
            RuntimeKind::Wasi => "wasi",
        }
    }
}

/// One allowlisted runtime, validated.
#[derive(Debug, Clone)]
pub struct Runtime {
    pub id: String,
    pub kind: RuntimeKind,
    pub description: String,
    pub image: Image,
    /// The entrypoint used when a request gives none.
    pub entrypoint: String,
    /// argv template; `argv[0]` is an absolute path fixed by this file.
    pub argv: Vec<String>,
    /// Host paths that must exist for the runtime to be usable.
    pub requires: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub default_limits: ResolvedLimits,
    pub max_limits: ResolvedLimits,
    /// CPU bandwidth in cores (CFS quota); `None` leaves the run unthrottled.
    pub cpu_cores: Option<f64>,
    pub build: Option<BuildStep>,
    /// SHA-256 of the definition file, reported in every result.
    pub definition_sha256: String,
    /// The `[wasi]` table: set exactly when `kind` is `wasi`. Such a runtime has the empty
    /// image, no `requires`, no CPU quota and no build step; its `argv` is what the guest sees.
    pub wasi: Option<WasiSpec>,
}

/// A step run before the program, in the same workspace, with its own limits (e.g. a compiler).
#[derive(Debug, Clone)]
pub struct BuildStep {
    pub argv: Vec<String>,
    pub limits: ResolvedLimits,
}

/// Whether a runtime can run on this host, and if not, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Usability {
    Usable,
    Unusable(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuntimeFile {
    id: String,
    kind: RuntimeKind,
    description: String,
    image: String,
    entrypoint: String,
    argv: Vec<String>,
    #[serde(default)]
    requires: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default = "one_core")]
    cpu_cores: Option<f64>,
    limits: LimitsFile,
    build: Option<BuildFile>,
}

fn one_core() -> Option<f64> {
    Some(1.0)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LimitsFile {
    pub default: ResolvedLimits,
    pub max: ResolvedLimits,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BuildFile {
    argv: Vec<String>,
    limits: ResolvedLimits,
}

impl Runtime {
    pub fn parse(file: &str, text: &str, images: &BTreeMap<String, Image>) -> Result<Runtime, RuntimeError> {
        // The kind decides the file's shape; each shape refuses the other's fields.
        let kind = toml::from_str::<toml::Table>(text).ok().and_then(|t| t.get("kind")?.as_str().map(str::to_owned));
        if kind.as_deref() == Some("wasi") {
            let parsed: WasiRuntimeFile =
                toml::from_str(text).map_err(|e| RuntimeError::Parse { file: file.into(), message: e.to_string() })?;
            return parsed.validate(file, text);
        }
        let parsed: RuntimeFile =
            toml::from_str(text).map_err(|e| RuntimeError::Parse { file: file.into(), message: e.to_string() })?;
        let invalid = |message: String| RuntimeError::Invalid { file: file.into(), message };
        check_file_name(file, &parsed.id).map_err(invalid)?;
        let image = images.get(&parsed.image).cloned().ok_or_else(|| {
            invalid(format!(
                "image {:?} does not exist; known images: {}",
                parsed.image,
                images.keys().cloned().collect::<Vec<_>>().join(", ")
            ))
        })?;
        validate_path(&parsed.entrypoint, 1024).map_err(|m| invalid(format!("entrypoint: {m}")))?;
        let uses_entrypoint_in_build =
            parsed.build.as_ref().is_some_and(|b| b.argv.iter().any(|a| a.contains(ENTRYPOINT_PLACEHOLDER)));
        check_argv(&parsed.argv, !uses_entrypoint_in_build).map_err(|m| invalid(format!("argv: {m}")))?;
        check_limits(&parsed.limits.default, &parsed.limits.max).map_err(invalid)?;
        if let Some(build) = &parsed.build {
            check_argv(&build.argv, true).map_err(|m| invalid(format!("build.argv: {m}")))?;
        }
        if parsed.cpu_cores.is_some_and(|c| !(c > 0.0 && c <= 1024.0)) {
            return Err(invalid("cpu_cores must be above 0".into()));
        }
        Ok(Runtime {
            id: parsed.id,
            kind: parsed.kind,
            description: parsed.description,
            image,
            entrypoint: parsed.entrypoint,
            argv: parsed.argv,
            requires: parsed.requires,
            env: parsed.env,
            default_limits: parsed.limits.default,
            max_limits: parsed.limits.max,
            cpu_cores: parsed.cpu_cores,
            build: parsed.build.map(|b| BuildStep { argv: b.argv, limits: b.limits }),
            definition_sha256: definition_sha256(text),
            wasi: None,
        })
    }

    /// Checks the host for what this runtime needs. Cheap: a few stat calls. A wasi runtime
    /// needs nothing of the host's filesystem; whether its package is prepared depends on the
    /// cache directory, which `runbox_runner::usability` checks.
    pub fn usability(&self) -> Usability {
        for path in &self.requires {
            match std::fs::metadata(path) {
                Ok(meta) if meta.permissions().mode() & 0o111 != 0 => {}
                Ok(_) => return Usability::Unusable(format!("{path} is not executable")),
                Err(_) => return Usability::Unusable(format!("{path} is not installed")),
            }
        }
        for mirror in self.image.mirrors.iter().filter(|m| !m.optional) {
            if std::fs::symlink_metadata(Path::new(&mirror.path)).is_err() {
                return Usability::Unusable(format!(
                    "image {}: {} is missing on this host",
                    self.image.name, mirror.path
                ));
            }
        }
        Usability::Usable
    }
}

pub(crate) fn check_file_name(file: &str, id: &str) -> Result<(), String> {
    let expected_file = format!("{id}.toml");
    if file != expected_file {
        return Err(format!("id {id:?} must match the file name; rename the file to {expected_file}"));
    }
    Ok(())
}

pub(crate) fn definition_sha256(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

fn check_argv(argv: &[String], needs_entrypoint: bool) -> Result<(), String> {
    let first = argv.first().ok_or("must not be empty")?;
    if !first.starts_with('/') {
        return Err(format!("argv[0] {first:?} must be an absolute path fixed by the runtime"));
    }
    if first.contains('{') {
        return Err("argv[0] cannot be a placeholder: requests never choose the executable".into());
    }
    if needs_entrypoint && !argv.iter().any(|a| a.contains(ENTRYPOINT_PLACEHOLDER)) {
        return Err(format!("must contain {ENTRYPOINT_PLACEHOLDER}"));
    }
    if argv.iter().any(|a| a.contains(ARGS_PLACEHOLDER) && a != ARGS_PLACEHOLDER) {
        return Err(format!("{ARGS_PLACEHOLDER} must be a whole element"));
    }
    Ok(())
}

pub(crate) fn check_limits(default: &ResolvedLimits, max: &ResolvedLimits) -> Result<(), String> {
    for ((name, d), (_, m)) in default.fields().into_iter().zip(max.fields()) {
        if d == 0 {
            return Err(format!("limits.default.{name} must be above 0"));
        }
        if d > m {
            return Err(format!("limits.default.{name} ({d}) is above limits.max.{name} ({m})"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Allowlist;

    #[test]
    fn embedded_runtimes_load() {
        let list = Allowlist::embedded().unwrap();
        for id in ["python", "sh", "bash", "node", "c"] {
            let rt = list.get(id).unwrap_or_else(|| panic!("{id} missing"));
            assert_eq!(rt.kind, RuntimeKind::Linux);
            assert_eq!(rt.definition_sha256.len(), 64);
        }
        assert!(list.get("c").unwrap().build.is_some());
    }

    fn parse(text: &str) -> Result<Runtime, RuntimeError> {
        let images = Allowlist::embedded_images();
        Runtime::parse("x.toml", text, &images)
    }

    const GOOD: &str = r#"
id = "x"
kind = "linux"
description = "test"
image = "base"
entrypoint = "main.sh"
argv = ["/bin/sh", "{entrypoint}", "{args}"]
[limits.default]
wall_time_ms = 1
cpu_time_ms = 1
memory_bytes = 1
processes = 1
disk_bytes = 1
output_bytes = 1
open_files = 1
[limits.max]
wall_time_ms = 2
cpu_time_ms = 2
memory_bytes = 2
processes = 2
disk_bytes = 2
output_bytes = 2
open_files = 2
"#;

    #[test]
    fn bad_definitions_are_refused_with_a_reason() {
        assert!(parse(GOOD).is_ok());
        let cases = [
            (GOOD.replace("\"/bin/sh\", ", ""), "argv[0]"),
            (GOOD.replace("\"{entrypoint}\", ", ""), "{entrypoint}"),
            (GOOD.replace("image = \"base\"", "image = \"nope\""), "known images"),
            (GOOD.replace("wall_time_ms = 1\n", "wall_time_ms = 5\n"), "above limits.max.wall_time_ms"),
            (GOOD.replace("id = \"x\"", "id = \"y\""), "file name"),
            (GOOD.replace("kind = \"linux\"", "kind = \"docker\""), "unknown variant"),
            (format!("{GOOD}\nsurprise = 1"), "unknown field"),
        ];
        for (text, needle) in cases {
            let err = parse(&text).unwrap_err().to_string();
            assert!(err.contains(needle), "expected {needle:?} in {err}");
        }
    }

    #[test]
    fn images_refuse_host_state_paths() {
        let err =
            Image::parse("bad.toml", "description = \"x\"\n[[mirror]]\npath = \"/proc\"\nwhy = \"no\"\n").unwrap_err();
        assert!(err.to_string().contains("expose host state"), "{err}");
        let err = Image::parse("bad.toml", "description = \"x\"\n[[mirror]]\npath = \"/usr/../etc\"\nwhy = \"no\"\n")
            .unwrap_err();
        assert!(err.to_string().contains("normalized"), "{err}");
    }

    #[test]
    fn a_missing_requirement_makes_a_runtime_unusable() {
        let mut rt = parse(GOOD).unwrap();
        assert_eq!(rt.usability(), Usability::Usable);
        rt.requires = vec!["/nonexistent/interpreter".into()];
        assert!(matches!(rt.usability(), Usability::Unusable(m) if m.contains("not installed")));
    }
}
