use super::*;

// ---------------------------------------------------------------------------------------------
// Output

#[test]
fn output_over_the_cap_is_truncated_head_and_tail() {
    let rb = Runbox::new();
    let req = with_limit(sh("echo err-line >&2\nyes | head -c 5000000\n"), "output_bytes", 1000);
    let ran = rb.run(&req);
    let result = assert_verdict(&ran, Verdict::Ok);
    assert_eq!(ran.exit_code, 0);
    assert_ended(&result, Some(0), None);
    assert_eq!(result.limits_hit, vec![LimitKind::Output]);
    assert!(result.stdout.truncated);
    assert_eq!(result.stdout.bytes_total, 5_000_000);
    let text = stdout_text(&result);
    // 1000 bytes kept: 500 from the start and 500 from the end, joined by the note.
    let half = "y\n".repeat(250);
    assert!(text.starts_with(&format!("{half}\n[runbox: 4999000 of 5000000 bytes omitted here;")), "{text:?}");
    assert!(text.ends_with(&format!("]\n{half}")), "{text:?}");
    assert_eq!(text.matches("[runbox:").count(), 1, "{text:?}");
    // The other stream is untouched.
    assert_eq!(stderr_text(&result), "err-line\n");
    assert!(!result.stderr.truncated);
    assert_eq!(result.stderr.bytes_total, 9);
    assert_clean(&rb);
}

#[test]
fn output_over_the_cap_with_kill_is_output_limit() {
    let rb = Runbox::new();
    let mut req = with_limit(with_limit(sh("echo before\nyes\n"), "output_bytes", 10_000), "wall_time_ms", 10_000);
    req["on_output_limit"] = json!("kill");
    let ran = rb.run(&req);
    let result = assert_verdict(&ran, Verdict::OutputLimit);
    assert_eq!(ran.exit_code, 15);
    assert_ended(&result, None, Some(libc::SIGKILL));
    assert_hit(&result, LimitKind::Output);
    assert_not_hit(&result, LimitKind::WallTime);
    assert!(result.stdout.bytes_total > 10_000, "bytes_total {}", result.stdout.bytes_total);
    assert!(result.stdout.truncated);
    let text = stdout_text(&result);
    assert!(text.starts_with("before\ny\ny\n"), "{:?}", &text[..text.len().min(100)]);
    assert!(text.len() < 11_000, "kept {} bytes", text.len());
    assert_clean(&rb);
}

/// The cap is inclusive: exactly `output_bytes` is fine, one byte more is over.
#[test]
fn output_kill_triggers_one_byte_past_the_cap_not_at_it() {
    let rb = Runbox::new();
    for (bytes, verdict) in [(1000u64, Verdict::Ok), (1001, Verdict::OutputLimit)] {
        let mut req = with_limit(sh(&format!("head -c {bytes} /dev/zero | tr '\\0' y\n")), "output_bytes", 1000);
        req["on_output_limit"] = json!("kill");
        let ran = rb.run(&req);
        let result = assert_verdict(&ran, verdict);
        assert_eq!(ran.exit_code, exit_code_for(verdict));
        assert_eq!(result.stdout.bytes_total, bytes);
        assert_eq!(result.stdout.truncated, bytes > 1000);
        assert_eq!(result.limits_hit.contains(&LimitKind::Output), bytes > 1000, "{:?}", result.limits_hit);
        assert!(stdout_text(&result).starts_with(&"y".repeat(500)), "{:?}", stdout_text(&result));
    }
    assert_clean(&rb);
}

// ---------------------------------------------------------------------------------------------
// stdin

#[test]
fn stdin_text_is_delivered() {
    let rb = Runbox::new();
    let mut req = sh("cat\n");
    req["stdin"] = json!("abc\n");
    let ran = rb.run(&req);
    let result = assert_verdict(&ran, Verdict::Ok);
    assert_eq!(ran.exit_code, 0);
    assert_ended(&result, Some(0), None);
    assert_eq!(stdout_text(&result), "abc\n");
    assert_clean(&rb);
}

#[test]
fn stdin_base64_is_delivered_as_bytes() {
    let rb = Runbox::new();
    let mut req = sh("od -An -tx1\n");
    req["stdin_base64"] = json!("AAEC/w=="); // 00 01 02 ff
    let ran = rb.run(&req);
    let result = assert_verdict(&ran, Verdict::Ok);
    assert_eq!(ran.exit_code, 0);
    assert_ended(&result, Some(0), None);
    assert_eq!(stdout_text(&result).trim(), "00 01 02 ff");
    assert_clean(&rb);
}

#[test]
fn large_stdin_the_program_never_reads_does_not_hang() {
    let rb = Runbox::new();
    let mut req = with_limit(sh("echo done\n"), "wall_time_ms", 5000);
    req["stdin"] = json!("x".repeat(1 << 20));
    let ran = rb.run(&req);
    let result = assert_verdict(&ran, Verdict::Ok);
    assert_eq!(ran.exit_code, 0);
    assert_ended(&result, Some(0), None);
    assert_eq!(result.limits_hit, Vec::<LimitKind>::new());
    assert_eq!(stdout_text(&result), "done\n");
    assert_clean(&rb);
}

#[test]
fn large_stdin_is_delivered_whole_when_read() {
    let rb = Runbox::new();
    let mut req = sh("wc -c\n");
    req["stdin"] = json!("x".repeat(1 << 20));
    let ran = rb.run(&req);
    let result = assert_verdict(&ran, Verdict::Ok);
    assert_ended(&result, Some(0), None);
    assert_eq!(stdout_text(&result).trim(), "1048576");
    assert_clean(&rb);
}

// ---------------------------------------------------------------------------------------------
// Secrets

#[test]
fn secrets_are_redacted_from_both_streams_and_the_whole_result() {
    let rb = Runbox::new();
    let mut req = sh("echo \"$TOKEN\"\necho \"token=$TOKEN\" >&2\nprintf %s \"$TOKEN\" > leaked.txt\n");
    req["secrets"] = json!({"TOKEN": "s3cr3t-value"});
    let ran = rb.run(&req);
    let result = assert_verdict(&ran, Verdict::Ok);
    assert_eq!(ran.exit_code, 0);
    assert_ended(&result, Some(0), None);
    assert_eq!(stdout_text(&result), "[REDACTED:TOKEN]\n");
    assert_eq!(stderr_text(&result), "token=[REDACTED:TOKEN]\n");
    // The program did see the real value: the file it wrote holds it (by its hash only).
    let leaked = result.artifacts.iter().find(|a| a.path == "leaked.txt").expect("leaked.txt is an artifact");
    assert_eq!(leaked.sha256, sha256_hex(b"s3cr3t-value"));
    let raw = serde_json::to_string(&ran.json).expect("json");
    assert!(!raw.contains("s3cr3t-value"), "the secret appears in the result: {raw}");
    assert!(!ran.stderr.contains("s3cr3t-value"), "the secret appears on runbox's stderr: {}", ran.stderr);
    assert_clean(&rb);
}
