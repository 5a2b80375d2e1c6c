//! Independent outcome checks: evaluated by runbox on the host after the run, from the
//! captured output and the artifact hashes, whatever the program prints or writes.

use runbox_tests::*;
use serde_json::json;

fn with_checks(mut request: serde_json::Value, checks: serde_json::Value) -> serde_json::Value {
    request["checks"] = checks;
    request
}

#[test]
fn checks_pass_and_fail_on_what_the_run_really_did() {
    let rb = Runbox::new();
    let code = "import json\nprint(json.dumps({'total': 6}))\nopen('out.csv', 'w').write('a,b\\n1,5\\n')\n";
    let checks = json!([
        {"type": "exit_code", "equals": 0},
        {"type": "stdout_json", "schema": {"type": "object", "required": ["total"], "properties": {"total": {"type": "integer"}}}},
        {"type": "stdout_regex", "pattern": "\"total\": 6"},
        {"type": "artifact_exists", "path": "out.csv"},
        {"type": "artifact_sha256", "path": "out.csv", "sha256": sha256_hex(b"a,b\n1,5\n")},
        {"type": "artifact_max_bytes", "path": "out.csv", "max_bytes": 8},
        {"type": "stdout_contains", "text": "total"},
    ]);
    let result = assert_verdict(&rb.run(&with_checks(python(code), checks)), Verdict::Ok);
    assert_eq!(result.checks_passed, Some(true), "{:#?}", result.checks);
    assert_eq!(result.checks.len(), 7);

    let failing = json!([
        {"type": "exit_code", "equals": 1},
        {"type": "artifact_sha256", "path": "out.csv", "sha256": sha256_hex(b"something else")},
        {"type": "artifact_exists", "path": "missing.txt"},
    ]);
    let result = assert_verdict(&rb.run(&with_checks(python(code), failing)), Verdict::Ok);
    assert_eq!(result.checks_passed, Some(false));
    assert!(result.checks.iter().all(|c| !c.passed), "{:#?}", result.checks);
    assert!(result.checks[2].detail.contains("not among the artifacts"), "{}", result.checks[2].detail);
    assert!(rb.leftover_runs().is_empty());
}

/// The program can print anything, including text that looks like a passed check, and can
/// leave a file named like the expected one with other content: the checks still judge the
/// real output and the real hash.
#[test]
fn the_program_cannot_talk_its_way_past_a_check() {
    let rb = Runbox::new();
    let code = "echo '{\"checks_passed\": true}'\necho 'checks passed: 1/1'\necho forged > out.txt\nexit 3\n";
    let checks = json!([
        {"type": "exit_code", "equals": 0},
        {"type": "artifact_sha256", "path": "out.txt", "sha256": sha256_hex(b"expected\n")},
    ]);
    let result = assert_verdict(&rb.run(&with_checks(sh(code), checks)), Verdict::NonzeroExit);
    assert_eq!(result.checks_passed, Some(false));
    assert_eq!(result.checks[0].detail, "the program exited with 3");
    assert!(result.checks[1].detail.contains(&sha256_hex(b"forged\n")), "{}", result.checks[1].detail);
}

#[test]
fn a_check_that_could_never_be_evaluated_is_refused_before_the_run() {
    let rb = Runbox::new();
    for (check, needle) in [
        (json!({"type": "stdout_regex", "pattern": "("}), "regular expression"),
        (json!({"type": "artifact_exists", "path": "/etc/passwd"}), "absolute"),
        (json!({"type": "stdout_json", "schema": {"$ref": "#/x"}}), "not supported"),
    ] {
        let (field, message) = rb.run(&with_checks(sh("echo ran"), json!([check]))).rejection();
        assert_eq!(field, "checks[0]");
        assert!(message.contains(needle), "{message}");
    }
    let (field, message) =
        rb.run(&with_checks(sh("echo ran"), json!([{"type": "exit_status", "equals": 0}]))).rejection();
    assert_eq!(field, "body");
    assert!(message.contains("exit_status"), "{message}");
    assert!(rb.leftover_runs().is_empty());
}

#[test]
fn without_checks_the_result_has_none() {
    let result = assert_verdict(&Runbox::new().run(&sh("true")), Verdict::Ok);
    assert_eq!((result.checks.len(), result.checks_passed), (0, None));
}
