//! Independent outcome checks. The caller states what a correct outcome looks like; runbox
//! judges the result against it on the host, after the run, from the captured output and the
//! artifact hashes. Nothing the code under test does can change how a check is evaluated.

mod schema;

use base64::Engine as _;
use regex::RegexBuilder;
use runbox_contract::{Check, CheckResult, RunResult, ValidationError, validate_path};

/// Most checks in one request.
pub const MAX_CHECKS: usize = 32;
/// Largest compiled regular expression, so a pattern cannot make a check expensive.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// Refuses checks that could never be evaluated: a bad pattern, path, digest or schema.
pub fn validate(checks: &[Check]) -> Result<(), ValidationError> {
    if checks.len() > MAX_CHECKS {
        return Err(ValidationError::new("checks", format!("{} checks given; at most {MAX_CHECKS}", checks.len())));
    }
    for (i, check) in checks.iter().enumerate() {
        let field = format!("checks[{i}]");
        let bad = |m: String| ValidationError::new(field.clone(), m);
        match check {
            Check::StdoutRegex { pattern } => {
                compile(pattern).map_err(|e| bad(format!("invalid regular expression: {e}")))?;
            }
            Check::ArtifactExists { path } | Check::ArtifactMaxBytes { path, .. } => {
                validate_path(path, 1024).map_err(bad)?;
            }
            Check::ArtifactSha256 { path, sha256 } => {
                validate_path(path, 1024).map_err(bad)?;
                if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()) {
                    return Err(bad("sha256 must be 64 lowercase hex digits".into()));
                }
            }
            Check::StdoutJson { schema: Some(schema) } => schema::check_supported(schema).map_err(bad)?,
            Check::ExitCode { .. } | Check::StdoutContains { .. } | Check::StdoutJson { schema: None } => {}
        }
    }
    Ok(())
}

/// Evaluates every check against `result`; the second value says whether all passed.
pub fn evaluate(checks: &[Check], result: &RunResult) -> (Vec<CheckResult>, bool) {
    let stdout = Stdout::of(result);
    let results: Vec<CheckResult> = checks
        .iter()
        .map(|check| {
            let (passed, detail) = evaluate_one(check, result, &stdout);
            CheckResult { check: check.clone(), passed, detail }
        })
        .collect();
    let all = results.iter().all(|r| r.passed);
    (results, all)
}

/// The captured stdout, as the checks see it.
struct Stdout {
    bytes: Vec<u8>,
    truncated: bool,
}

impl Stdout {
    fn of(result: &RunResult) -> Stdout {
        let bytes = match (&result.stdout.text, &result.stdout.base64) {
            (Some(text), _) => text.clone().into_bytes(),
            (None, Some(b64)) => base64::engine::general_purpose::STANDARD.decode(b64).unwrap_or_default(),
            (None, None) => Vec::new(),
        };
        Stdout { bytes, truncated: result.stdout.truncated }
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }

    /// A note for failed stdout checks: a truncated stream was judged on its kept part only.
    fn caveat(&self) -> &'static str {
        if self.truncated { " (stdout was truncated: only its kept head and tail were checked)" } else { "" }
    }
}

fn evaluate_one(check: &Check, result: &RunResult, stdout: &Stdout) -> (bool, String) {
    let artifact = |path: &str| result.artifacts.iter().find(|a| a.path == path);
    match check {
        Check::ExitCode { equals } => match result.exit_code {
            Some(code) => (code == *equals, format!("the program exited with {code}")),
            None => (false, format!("the program did not exit normally (verdict {})", result.verdict.as_str())),
        },
        Check::StdoutContains { text } => {
            let found = stdout.text().contains(text.as_str());
            (found, if found { "found in stdout".into() } else { format!("not found in stdout{}", stdout.caveat()) })
        }
        Check::StdoutRegex { pattern } => match compile(pattern) {
            Ok(re) => match re.find(&stdout.text()) {
                Some(m) => (true, format!("matched {:?}", truncate(m.as_str(), 80))),
                None => (false, format!("no match in stdout{}", stdout.caveat())),
            },
            Err(e) => (false, format!("invalid regular expression: {e}")),
        },
        Check::ArtifactExists { path } => match artifact(path) {
            Some(a) => (true, format!("{path} exists ({} bytes)", a.size_bytes)),
            None => (false, missing(result, path)),
        },
        Check::ArtifactSha256 { path, sha256 } => match artifact(path) {
            Some(a) => (a.sha256 == *sha256, format!("{path} has sha256 {}", a.sha256)),
            None => (false, missing(result, path)),
        },
        Check::ArtifactMaxBytes { path, max_bytes } => match artifact(path) {
            Some(a) => (a.size_bytes <= *max_bytes, format!("{path} is {} bytes", a.size_bytes)),
            None => (false, missing(result, path)),
        },
        Check::StdoutJson { schema } => match serde_json::from_slice::<serde_json::Value>(&stdout.bytes) {
            Err(e) => (false, format!("stdout is not JSON: {e}{}", stdout.caveat())),
            Ok(value) => match schema.as_ref().map(|s| schema::matches(s, &value, "$")) {
                None | Some(Ok(())) => (true, "stdout is JSON and matches".into()),
                Some(Err(why)) => (false, why),
            },
        },
    }
}

fn missing(result: &RunResult, path: &str) -> String {
    match result.artifacts_skipped.iter().find(|s| s.path == path) {
        Some(skipped) => format!("{path} is not a listed artifact ({})", skipped.reason),
        None => format!("{path} is not among the artifacts"),
    }
}

fn compile(pattern: &str) -> Result<regex::Regex, regex::Error> {
    RegexBuilder::new(pattern).size_limit(REGEX_SIZE_LIMIT).build()
}

fn truncate(s: &str, max_chars: usize) -> String {
    s.chars().take(max_chars).collect()
}

#[cfg(test)]
mod tests;
