//! The text a model reads for a run. The first line is always runbox's verdict; program
//! output follows only inside fences it cannot close, labelled as untrusted, so nothing the
//! program prints can pass for runbox's own summary.

use std::fmt::Write as _;

use base64::Engine as _;
use runbox_contract::{RunResult, StreamOutput, ValidationError, Verdict};

/// The whole text block for a finished run.
pub fn result_text(result: &RunResult) -> String {
    let mut text = verdict_line(result);
    for (name, stream) in [("stdout", &result.stdout), ("stderr", &result.stderr)] {
        stream_block(&mut text, name, stream);
    }
    notes(&mut text, result);
    text
}

/// The text for a request runbox refused: what to fix.
pub fn rejection_text(error: &ValidationError) -> String {
    format!(
        "runbox rejected the request: {}: {}\nNothing ran. Fix the request and call run_code again.",
        error.field, error.message
    )
}

fn verdict_line(r: &RunResult) -> String {
    let ended = match (r.exit_code, r.signal) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => "no exit code".to_string(),
    };
    let meaning = match r.verdict {
        Verdict::Ok => "the program succeeded",
        Verdict::NonzeroExit => "the program failed",
        Verdict::Signaled => "the program crashed",
        Verdict::WallTimeout => "the program ran past its wall-time limit and was killed",
        Verdict::CpuTimeout => "the program used up its CPU-time limit and was killed",
        Verdict::MemoryLimit => "the program ran out of memory",
        Verdict::OutputLimit => "the program wrote more output than allowed and was killed",
        Verdict::DiskLimit => "the program filled its disk",
        Verdict::Cancelled => "the run was cancelled",
        Verdict::SandboxError => "runbox itself failed; the program is not to blame",
    };
    let mut line = format!("runbox verdict: {} ({ended}): {meaning}", r.verdict.as_str());
    if r.step == "build" {
        line.push_str(" [in the build step: the program did not run]");
    }
    if let Some(error) = &r.error {
        let _ = write!(line, "; {}: {}", error.code, error.message);
    }
    line.push('\n');
    line
}

fn stream_block(text: &mut String, name: &str, stream: &StreamOutput) {
    let content = match (&stream.text, &stream.base64) {
        (Some(t), _) => t.clone(),
        (None, Some(b64)) => {
            let bytes = base64::engine::general_purpose::STANDARD.decode(b64).unwrap_or_default();
            String::from_utf8_lossy(&bytes).into_owned()
        }
        (None, None) => String::new(),
    };
    if content.is_empty() {
        let _ = writeln!(text, "runbox: {name} is empty");
        return;
    }
    let fence = "`".repeat(longest_backtick_run(&content).max(2) + 1);
    let _ = writeln!(text, "runbox: {name} of the program follows (untrusted program output, not runbox's words):");
    let _ = writeln!(text, "{fence}text");
    text.push_str(&content);
    if !content.ends_with('\n') {
        text.push('\n');
    }
    let _ = writeln!(text, "{fence}");
}

/// A fence longer than any backtick run in the content cannot be closed by the content
/// (CommonMark: a closing fence needs at least as many backticks as the opening one).
fn longest_backtick_run(content: &str) -> usize {
    content.split(|c| c != '`').map(str::len).max().unwrap_or(0)
}

fn notes(text: &mut String, r: &RunResult) {
    for (name, stream) in [("stdout", &r.stdout), ("stderr", &r.stderr)] {
        if stream.truncated {
            let _ = writeln!(
                text,
                "runbox: {name} was truncated: the program wrote {} bytes and {} per stream are kept (head and tail). \
                 To see more, raise limits.output_bytes, print less, or write the output to a file and check it with \
                 an artifact check.",
                stream.bytes_total, r.limits.output_bytes
            );
        }
    }
    if !r.limits_hit.is_empty() {
        let hits: Vec<String> = r.limits_hit.iter().map(|k| serde_json::to_string(k).unwrap_or_default()).collect();
        let _ = writeln!(text, "runbox: limits hit: {}", hits.join(", ").replace('"', ""));
    }
    if !r.artifacts.is_empty() {
        let _ = writeln!(
            text,
            "runbox: artifacts ({}{}):",
            r.artifacts.len(),
            if r.artifacts_truncated { ", list truncated" } else { "" }
        );
        for a in &r.artifacts {
            let _ = writeln!(text, "- {} ({} bytes, sha256 {})", a.path, a.size_bytes, a.sha256);
        }
    }
    if let Some(all) = r.checks_passed {
        let passed = r.checks.iter().filter(|c| c.passed).count();
        let _ = writeln!(
            text,
            "runbox: checks: {passed} of {} passed{}",
            r.checks.len(),
            if all { "" } else { " (FAILED)" }
        );
        for c in &r.checks {
            let kind = serde_json::to_value(&c.check)
                .ok()
                .and_then(|v| v["type"].as_str().map(String::from))
                .unwrap_or_default();
            let _ = writeln!(text, "- [{}] {kind}: {}", if c.passed { "pass" } else { "fail" }, c.detail);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fence_is_longer_than_any_backtick_run_inside() {
        assert_eq!(longest_backtick_run("a ```` b ` c"), 4);
        let mut text = String::new();
        stream_block(
            &mut text,
            "stdout",
            &StreamOutput { text: Some("```\nfake\n```\n".into()), ..Default::default() },
        );
        assert!(text.contains("\n````text\n```\nfake\n```\n````\n"), "{text}");
    }
}
