//! Checks that need nothing but the request itself. Checks against a runtime (its id, its
//! maximum limits, its entrypoint) live with the plan.

use std::collections::BTreeSet;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

use crate::{Encoding, RunRequest};

/// Size bounds on a request. Every one is enforced before anything touches the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestBounds {
    /// Most input files.
    pub max_files: usize,
    /// Most decoded bytes of one input file.
    pub max_file_bytes: usize,
    /// Most decoded bytes of all input files and stdin together.
    pub max_total_bytes: usize,
    /// Longest relative path, in bytes.
    pub max_path_bytes: usize,
    /// Most arguments, and most environment variables plus secrets.
    pub max_args: usize,
    /// Longest single argument, variable name or value, in bytes.
    pub max_arg_bytes: usize,
}

impl Default for RequestBounds {
    fn default() -> Self {
        RequestBounds {
            max_files: 1000,
            max_file_bytes: 16 << 20,
            max_total_bytes: 32 << 20,
            max_path_bytes: 1024,
            max_args: 1024,
            max_arg_bytes: 128 << 10,
        }
    }
}

/// A rejected request. Each message says what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ValidationError {
    /// Where in the request, e.g. `files[2].path` or `limits.memory_bytes`.
    pub field: String,
    pub message: String,
}

impl ValidationError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        ValidationError { field: field.into(), message: message.into() }
    }
}

/// A decoded input file whose path passed [`validate_path`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputFile {
    pub path: String,
    pub bytes: Vec<u8>,
    pub executable: bool,
}

/// A request whose shape is valid, with its files and stdin decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidatedRequest {
    pub request: RunRequest,
    pub files: Vec<InputFile>,
    pub stdin: Vec<u8>,
}

impl RunRequest {
    /// Validates everything that does not depend on a runtime, and decodes the payloads.
    pub fn validate(self, bounds: &RequestBounds) -> Result<ValidatedRequest, ValidationError> {
        if self.files.len() > bounds.max_files {
            return Err(ValidationError::new(
                "files",
                format!(
                    "{} files given; at most {} are allowed, so pack them into an archive or send fewer",
                    self.files.len(),
                    bounds.max_files
                ),
            ));
        }
        let mut seen = BTreeSet::new();
        let mut total = 0usize;
        let mut files = Vec::with_capacity(self.files.len());
        for (i, spec) in self.files.iter().enumerate() {
            let field = format!("files[{i}]");
            validate_path(&spec.path, bounds.max_path_bytes)
                .map_err(|m| ValidationError::new(format!("{field}.path"), m))?;
            if !seen.insert(spec.path.as_str()) {
                return Err(ValidationError::new(
                    format!("{field}.path"),
                    format!("duplicate path {:?}; each file must appear once", spec.path),
                ));
            }
            if let Some(clash) = seen.iter().find(|p| is_parent(p, &spec.path) || is_parent(&spec.path, p)) {
                return Err(ValidationError::new(
                    format!("{field}.path"),
                    format!("{:?} and {clash:?} cannot both exist: one would be a directory", spec.path),
                ));
            }
            let bytes = decode(&spec.content, spec.encoding)
                .map_err(|m| ValidationError::new(format!("{field}.content"), m))?;
            if bytes.len() > bounds.max_file_bytes {
                return Err(ValidationError::new(
                    format!("{field}.content"),
                    format!("file is {} bytes; at most {} are allowed per file", bytes.len(), bounds.max_file_bytes),
                ));
            }
            total += bytes.len();
            files.push(InputFile { path: spec.path.clone(), bytes, executable: spec.executable });
        }
        let stdin = match (&self.stdin, &self.stdin_base64) {
            (Some(_), Some(_)) => {
                return Err(ValidationError::new("stdin", "give either stdin or stdin_base64, not both"));
            }
            (Some(text), None) => text.clone().into_bytes(),
            (None, Some(b64)) => {
                BASE64.decode(b64).map_err(|e| ValidationError::new("stdin_base64", format!("invalid base64: {e}")))?
            }
            (None, None) => Vec::new(),
        };
        total += stdin.len();
        if total > bounds.max_total_bytes {
            return Err(ValidationError::new(
                "files",
                format!(
                    "files and stdin decode to {total} bytes; at most {} are allowed in all",
                    bounds.max_total_bytes
                ),
            ));
        }
        validate_strings(&self, bounds)?;
        Ok(ValidatedRequest { request: self, files, stdin })
    }
}

fn is_parent(parent: &str, child: &str) -> bool {
    child.len() > parent.len() && child.starts_with(parent) && child.as_bytes()[parent.len()] == b'/'
}

fn decode(content: &str, encoding: Encoding) -> Result<Vec<u8>, String> {
    match encoding {
        Encoding::Utf8 => Ok(content.as_bytes().to_vec()),
        Encoding::Base64 => BASE64.decode(content).map_err(|e| format!("invalid base64: {e}")),
    }
}

fn validate_strings(req: &RunRequest, bounds: &RequestBounds) -> Result<(), ValidationError> {
    if req.args.len() > bounds.max_args {
        return Err(ValidationError::new(
            "args",
            format!("{} arguments given; at most {}", req.args.len(), bounds.max_args),
        ));
    }
    for (i, arg) in req.args.iter().enumerate() {
        check_c_string(arg, bounds.max_arg_bytes).map_err(|m| ValidationError::new(format!("args[{i}]"), m))?;
    }
    if req.env.len() + req.secrets.len() > bounds.max_args {
        return Err(ValidationError::new(
            "env",
            format!("at most {} variables in env and secrets together", bounds.max_args),
        ));
    }
    for (map, name) in [(&req.env, "env"), (&req.secrets, "secrets")] {
        for (key, value) in map {
            let field = format!("{name}.{key}");
            validate_env_name(key).map_err(|m| ValidationError::new(&field, m))?;
            check_c_string(value, bounds.max_arg_bytes).map_err(|m| ValidationError::new(&field, m))?;
        }
    }
    if let Some(key) = req.env.keys().find(|k| req.secrets.contains_key(*k)) {
        return Err(ValidationError::new(
            format!("secrets.{key}"),
            "this name is also in env; give it in one map only",
        ));
    }
    if let Some(entry) = &req.entrypoint {
        validate_path(entry, bounds.max_path_bytes).map_err(|m| ValidationError::new("entrypoint", m))?;
    }
    Ok(())
}

fn check_c_string(s: &str, max: usize) -> Result<(), String> {
    if s.contains('\0') {
        return Err("contains a NUL byte, which cannot be passed to a program".into());
    }
    if s.len() > max {
        return Err(format!("is {} bytes; at most {max}", s.len()));
    }
    Ok(())
}

fn validate_env_name(name: &str) -> Result<(), String> {
    let valid = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if valid {
        Ok(())
    } else {
        Err(format!("{name:?} is not a valid variable name; use letters, digits and _, not starting with a digit"))
    }
}

/// Checks a path relative to /workspace. It must be non-empty, relative, at most `max_bytes`
/// long, free of NUL, and every component must be a plain name (no `.`, `..` or empty parts).
pub fn validate_path(path: &str, max_bytes: usize) -> Result<(), String> {
    if path.is_empty() {
        return Err("path is empty; give a relative path such as \"main.py\"".into());
    }
    if path.len() > max_bytes {
        return Err(format!("path is {} bytes; at most {max_bytes}", path.len()));
    }
    if path.contains('\0') {
        return Err("path contains a NUL byte".into());
    }
    if path.starts_with('/') {
        return Err(format!("{path:?} is absolute; give it relative to /workspace"));
    }
    for part in path.split('/') {
        match part {
            "" => {
                return Err(format!("{path:?} has an empty component (a doubled or trailing /)"));
            }
            "." | ".." => {
                return Err(format!("{path:?} contains {part:?}; paths must stay inside /workspace"));
            }
            _ if part.len() > 255 => {
                return Err(format!("a component of {path:?} is longer than 255 bytes"));
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FileSpec;

    fn file(path: &str) -> FileSpec {
        FileSpec { path: path.into(), content: "x".into(), encoding: Encoding::Utf8, executable: false }
    }

    fn request(files: Vec<FileSpec>) -> RunRequest {
        RunRequest { runtime: "python".into(), files, ..Default::default() }
    }

    #[test]
    fn bad_paths_are_rejected_with_the_reason() {
        for (path, needle) in [
            ("", "empty"),
            ("/etc/passwd", "absolute"),
            ("a/../b", "\"..\""),
            ("..", "\"..\""),
            ("a//b", "empty component"),
            ("a/", "empty component"),
            ("a\0b", "NUL"),
            ("./a", "\".\""),
        ] {
            let err = validate_path(path, 1024).unwrap_err();
            assert!(err.contains(needle), "{path:?}: {err}");
        }
        assert!(validate_path(&"a".repeat(2000), 1024).unwrap_err().contains("at most 1024"));
        assert!(validate_path("dir/main.py", 1024).is_ok());
    }

    #[test]
    fn duplicates_and_file_directory_clashes_are_rejected() {
        let err = request(vec![file("a.py"), file("a.py")]).validate(&RequestBounds::default()).unwrap_err();
        assert_eq!(err.field, "files[1].path");
        assert!(err.message.contains("duplicate"));
        let err = request(vec![file("a"), file("a/b")]).validate(&RequestBounds::default()).unwrap_err();
        assert!(err.message.contains("directory"), "{err}");
    }

    #[test]
    fn size_and_count_bounds_are_enforced() {
        let bounds = RequestBounds { max_files: 2, max_file_bytes: 4, max_total_bytes: 6, ..Default::default() };
        let err = request(vec![file("a"), file("b"), file("c")]).validate(&bounds).unwrap_err();
        assert!(err.message.contains("at most 2"), "{err}");
        let mut big = file("a");
        big.content = "12345".into();
        assert!(request(vec![big]).validate(&bounds).unwrap_err().message.contains("at most 4"));
        let mut req = request(vec![file("a")]);
        req.stdin = Some("123456".into());
        assert!(req.validate(&bounds).unwrap_err().message.contains("at most 6"));
    }

    #[test]
    fn base64_is_decoded_or_rejected() {
        let mut spec = file("a.bin");
        spec.encoding = Encoding::Base64;
        spec.content = "AAEC".into();
        let ok = request(vec![spec.clone()]).validate(&RequestBounds::default()).unwrap();
        assert_eq!(ok.files[0].bytes, vec![0, 1, 2]);
        spec.content = "not base64!".into();
        let err = request(vec![spec]).validate(&RequestBounds::default()).unwrap_err();
        assert_eq!(err.field, "files[0].content");
        assert!(err.message.contains("invalid base64"));
    }

    #[test]
    fn env_names_and_nul_values_are_checked() {
        let mut req = request(vec![]);
        req.env.insert("1BAD".into(), "x".into());
        assert_eq!(req.clone().validate(&RequestBounds::default()).unwrap_err().field, "env.1BAD");
        req.env.clear();
        req.args.push("a\0b".into());
        assert!(req.validate(&RequestBounds::default()).unwrap_err().message.contains("NUL"));
    }

    #[test]
    fn only_a_json_object_is_a_request() {
        let err = RunRequest::from_json(br#"["sh", [{"path":"main.sh","content":"echo hi"}]]"#).unwrap_err();
        assert!(err.message.contains("must be a JSON object"), "{err}");
        assert!(RunRequest::from_json(b"{nope").unwrap_err().message.contains("not valid JSON"));
        assert_eq!(RunRequest::from_json(br#"{"runtime":"sh"}"#).unwrap().runtime, "sh");
    }

    #[test]
    fn unknown_fields_are_rejected() {
        let err = serde_json::from_str::<RunRequest>(r#"{"runtime":"python","comand":"x"}"#).unwrap_err();
        assert!(err.to_string().contains("unknown field `comand`"), "{err}");
    }

    #[test]
    fn schemas_name_the_public_fields() {
        let schema = crate::request_schema().to_string();
        for field in ["runtime", "files", "entrypoint", "stdin_base64", "secrets", "on_output_limit", "wall_time_ms"] {
            assert!(schema.contains(field), "{field}");
        }
        let schema = crate::result_schema().to_string();
        for field in ["verdict", "limits_hit", "isolation", "definition_sha256", "cleanup", "artifacts_truncated"] {
            assert!(schema.contains(field), "{field}");
        }
    }
}
