use runbox_contract::{Artifact, Check, ResolvedLimits, RunResult, RuntimeInfo, StreamOutput, Verdict};
use serde_json::json;

use super::*;

fn result(stdout: &str, exit_code: Option<i32>) -> RunResult {
    let limits = ResolvedLimits {
        wall_time_ms: 1,
        cpu_time_ms: 1,
        memory_bytes: 1,
        processes: 1,
        disk_bytes: 1,
        output_bytes: 1,
        open_files: 1,
    };
    RunResult {
        run_id: "r".into(),
        verdict: if exit_code == Some(0) { Verdict::Ok } else { Verdict::NonzeroExit },
        exit_code,
        signal: None,
        trap: None,
        stdout: StreamOutput {
            text: Some(stdout.into()),
            base64: None,
            bytes_total: stdout.len() as u64,
            truncated: false,
        },
        stderr: StreamOutput::default(),
        artifacts: vec![Artifact { path: "out.csv".into(), size_bytes: 6, sha256: "ab".repeat(32) }],
        artifacts_truncated: false,
        artifacts_skipped: vec![],
        usage: Default::default(),
        limits,
        limits_hit: vec![],
        isolation: vec![],
        runtime: RuntimeInfo { id: "sh".into(), kind: "linux".into(), definition_sha256: String::new() },
        timings: Default::default(),
        cleanup: Default::default(),
        error: None,
        checks: vec![],
        checks_passed: None,
        step: "run".into(),
    }
}

fn passed(check: Check, r: &RunResult) -> bool {
    evaluate(&[check], r).1
}

#[test]
fn each_kind_of_check_passes_and_fails_for_the_right_reason() {
    let r = result("{\"answer\": 42}\n", Some(0));
    assert!(passed(Check::ExitCode { equals: 0 }, &r));
    assert!(!passed(Check::ExitCode { equals: 1 }, &r));
    assert!(passed(Check::StdoutContains { text: "answer".into() }, &r));
    assert!(!passed(Check::StdoutContains { text: "question".into() }, &r));
    assert!(passed(Check::StdoutRegex { pattern: r#""answer": \d+"#.into() }, &r));
    assert!(!passed(Check::StdoutRegex { pattern: "^nope$".into() }, &r));
    assert!(passed(Check::ArtifactExists { path: "out.csv".into() }, &r));
    assert!(!passed(Check::ArtifactExists { path: "missing.csv".into() }, &r));
    assert!(passed(Check::ArtifactSha256 { path: "out.csv".into(), sha256: "ab".repeat(32) }, &r));
    assert!(!passed(Check::ArtifactSha256 { path: "out.csv".into(), sha256: "cd".repeat(32) }, &r));
    assert!(passed(Check::ArtifactMaxBytes { path: "out.csv".into(), max_bytes: 6 }, &r));
    assert!(!passed(Check::ArtifactMaxBytes { path: "out.csv".into(), max_bytes: 5 }, &r));
    assert!(passed(Check::StdoutJson { schema: None }, &r));
    assert!(!passed(Check::StdoutJson { schema: None }, &result("not json", Some(0))));
}

#[test]
fn a_json_schema_is_matched_with_the_place_of_a_mismatch() {
    let r = result(r#"{"name": "x", "items": [1, 2, "three"]}"#, Some(0));
    let schema = json!({"type": "object", "required": ["name", "items"], "properties": {"items": {"type": "array", "items": {"type": "integer"}}}});
    let (results, all) = evaluate(&[Check::StdoutJson { schema: Some(schema) }], &r);
    assert!(!all);
    assert!(results[0].detail.contains("$.items[2]") && results[0].detail.contains("integer"), "{}", results[0].detail);
    let ok = json!({"type": "object", "properties": {"name": {"type": "string", "enum": ["x", "y"]}}, "additionalProperties": true});
    assert!(passed(Check::StdoutJson { schema: Some(ok) }, &r));
    let closed = json!({"type": "object", "properties": {"name": {}}, "additionalProperties": false});
    assert!(!passed(Check::StdoutJson { schema: Some(closed) }, &r));
}

#[test]
fn checks_that_could_never_be_evaluated_are_refused() {
    let bad = [
        (Check::StdoutRegex { pattern: "(".into() }, "regular expression"),
        (Check::ArtifactExists { path: "../x".into() }, "inside /workspace"),
        (Check::ArtifactSha256 { path: "a".into(), sha256: "XYZ".into() }, "64 lowercase hex"),
        (Check::StdoutJson { schema: Some(json!({"pattern": "a+"})) }, "not supported"),
    ];
    for (check, needle) in bad {
        let err = validate(&[check]).unwrap_err();
        assert!(err.message.contains(needle), "{err}");
        assert_eq!(err.field, "checks[0]");
    }
    let many = vec![Check::ExitCode { equals: 0 }; MAX_CHECKS + 1];
    assert!(validate(&many).unwrap_err().message.contains("at most"));
}

#[test]
fn a_failed_stdout_check_on_truncated_output_says_so() {
    let mut r = result("head...tail", Some(0));
    r.stdout.truncated = true;
    let (results, _) = evaluate(&[Check::StdoutContains { text: "middle".into() }], &r);
    assert!(results[0].detail.contains("truncated"), "{}", results[0].detail);
}
