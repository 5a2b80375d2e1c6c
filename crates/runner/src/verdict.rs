//! From what the sandbox observed to one verdict. The order of the checks is the contract:
//! a runbox failure first, then what runbox did to the program (cancel, deadlines), then what
//! the kernel did (OOM), then output and disk, and only then the program's own exit.

use runbox_contract::{LimitKind, ResolvedLimits, Verdict};
use runbox_linux::{Exit, KillReason, StepOutcome};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepVerdict {
    pub verdict: Verdict,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub limits_hit: Vec<LimitKind>,
}

/// Judges one step. `disk_full` is the state of the run's filesystem after the step; a fill
/// that the program undid is caught by the samples taken while it ran.
pub fn judge(outcome: &StepOutcome, limits: ResolvedLimits, disk_full: bool) -> StepVerdict {
    let (exit_code, signal) = match outcome.exit {
        Exit::Code(code) => (Some(code), None),
        Exit::Signal(sig) => (None, Some(sig)),
        Exit::Unknown => (None, None),
    };
    let cpu_exhausted = outcome.cpu_time_ns >= limits.cpu_time_ms.saturating_mul(1_000_000);
    // RLIMIT_CPU's SIGXCPU (or its SIGKILL) counts only when the run really used its CPU
    // time: a program can send itself SIGXCPU, and that is its own signal.
    let hit_cpu = outcome.killed_for == Some(KillReason::CpuTime)
        || (cpu_exhausted && outcome.killed_for.is_none() && matches!(signal, Some(libc::SIGXCPU | libc::SIGKILL)));
    // Likewise RLIMIT_FSIZE's SIGXFSZ counts only when the disk was really used up.
    let disk_used_up = outcome.disk_peak_used_bytes >= limits.disk_bytes;
    let hit_disk = disk_full || outcome.disk_full_seen || (signal == Some(libc::SIGXFSZ) && disk_used_up);
    let truncated = outcome.stdout.truncated() || outcome.stderr.truncated();
    let mut limits_hit = Vec::new();
    let mut note = |hit: bool, kind: LimitKind| {
        if hit {
            limits_hit.push(kind);
        }
    };
    note(outcome.killed_for == Some(KillReason::WallTime), LimitKind::WallTime);
    note(hit_cpu, LimitKind::CpuTime);
    note(outcome.oom_kills > 0, LimitKind::Memory);
    note(outcome.pids_max_hits > 0, LimitKind::Processes);
    note(hit_disk, LimitKind::Disk);
    note(truncated || outcome.killed_for == Some(KillReason::Output), LimitKind::Output);
    let failed = exit_code != Some(0);
    let verdict = if outcome.failure.is_some() {
        Verdict::SandboxError
    } else if outcome.killed_for == Some(KillReason::Cancelled) {
        Verdict::Cancelled
    } else if outcome.killed_for == Some(KillReason::WallTime) {
        Verdict::WallTimeout
    } else if hit_cpu {
        Verdict::CpuTimeout
    } else if outcome.oom_kills > 0 && failed {
        Verdict::MemoryLimit
    } else if outcome.killed_for == Some(KillReason::Output) {
        Verdict::OutputLimit
    } else if hit_disk && failed {
        Verdict::DiskLimit
    } else {
        match outcome.exit {
            Exit::Code(0) => Verdict::Ok,
            Exit::Code(_) => Verdict::NonzeroExit,
            Exit::Signal(_) => Verdict::Signaled,
            // The program ran but its end was not observed: never report that as success.
            Exit::Unknown => Verdict::SandboxError,
        }
    };
    StepVerdict { verdict, exit_code, signal, limits_hit }
}
