//! Assembling the public RunResult from a finished step.

use std::time::{Duration, Instant};

use runbox_contract::{CleanupReport, ErrorInfo, LimitKind, RunResult, RuntimeInfo, Timings, Usage, Verdict};
use runbox_linux::StepOutcome;
use runbox_plan::ExecPlan;
use runbox_runtimes::Runtime;
use runbox_workspace::ArtifactReport;

use crate::{Finished, judge, output};

pub fn assemble(
    plan: &ExecPlan,
    runtime: &Runtime,
    finished: &Finished,
    report: ArtifactReport,
    timings: Timings,
    cleanup_errors: Vec<String>,
) -> RunResult {
    let outcome = &finished.outcome;
    let limits = finished.limits;
    let judged = judge(outcome, limits, finished.disk_full);
    let mut limits_hit = judged.limits_hit;
    if report.truncated {
        limits_hit.push(LimitKind::Artifacts);
    }
    RunResult {
        run_id: plan.run_id.clone(),
        verdict: judged.verdict,
        exit_code: judged.exit_code,
        signal: judged.signal,
        trap: None,
        stdout: output::stream(&outcome.stdout, &plan.secrets, limits.output_bytes),
        stderr: output::stream(&outcome.stderr, &plan.secrets, limits.output_bytes),
        artifacts: report.artifacts,
        artifacts_truncated: report.truncated,
        artifacts_skipped: report.skipped,
        usage: usage(outcome),
        limits,
        limits_hit,
        isolation: isolation(outcome, limits.disk_bytes),
        runtime: runtime_info(runtime),
        timings,
        cleanup: cleanup_report(cleanup_errors),
        error: outcome
            .failure
            .as_ref()
            .map(|f| ErrorInfo { code: f.code.to_string(), message: output::redact_text(&f.message, &plan.secrets) }),
        checks: Vec::new(),
        checks_passed: None,
        step: finished.step.to_string(),
    }
}

/// A result for a run that failed inside runbox before its program could start.
pub fn failed_before_start(
    plan: &ExecPlan,
    runtime: &Runtime,
    begun: Instant,
    code: &str,
    message: String,
) -> RunResult {
    RunResult {
        run_id: plan.run_id.clone(),
        verdict: Verdict::SandboxError,
        exit_code: None,
        signal: None,
        trap: None,
        stdout: Default::default(),
        stderr: Default::default(),
        artifacts: Vec::new(),
        artifacts_truncated: false,
        artifacts_skipped: Vec::new(),
        usage: Usage::default(),
        limits: plan.program.limits,
        limits_hit: Vec::new(),
        isolation: Vec::new(),
        runtime: runtime_info(runtime),
        timings: Timings { setup_ms: millis(begun.elapsed()), run_ms: 0, cleanup_ms: 0 },
        cleanup: cleanup_report(Vec::new()),
        error: Some(ErrorInfo { code: code.to_string(), message }),
        checks: Vec::new(),
        checks_passed: None,
        step: "run".to_string(),
    }
}

/// The sandbox's layers, plus the run's own size-capped filesystem; none when the program
/// never ran.
fn isolation(outcome: &StepOutcome, disk_bytes: u64) -> Vec<String> {
    let mut layers = outcome.isolation.clone();
    if !layers.is_empty() {
        layers.push(format!("tmpfs_workspace:{disk_bytes}_bytes"));
    }
    layers
}

fn usage(outcome: &StepOutcome) -> Usage {
    Usage {
        wall_time_ms: millis(outcome.run_time),
        cpu_time_ms: outcome.cpu_time_ns / 1_000_000,
        peak_memory_bytes: outcome.peak_memory_bytes,
    }
}

fn runtime_info(runtime: &Runtime) -> RuntimeInfo {
    RuntimeInfo {
        id: runtime.id.clone(),
        kind: runtime.kind.as_str().into(),
        definition_sha256: runtime.definition_sha256.clone(),
    }
}

pub fn cleanup_report(errors: Vec<String>) -> CleanupReport {
    CleanupReport { ok: errors.is_empty(), error: (!errors.is_empty()).then(|| errors.join("; ")) }
}

pub fn millis(d: Duration) -> u64 {
    d.as_millis() as u64
}
