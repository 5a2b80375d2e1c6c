use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::ResolvedLimits;

/// What happened to a run. Exactly one per run; the first failure mode that applies wins,
/// in the order the variants are listed after `ok`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The program exited with status 0.
    Ok,
    /// The program exited with a non-zero status (`exit_code`).
    NonzeroExit,
    /// The program was killed by a signal it did not get from runbox (`signal`).
    Signaled,
    /// The program ran past `limits.wall_time_ms` and was killed.
    WallTimeout,
    /// The program used more than `limits.cpu_time_ms` of CPU and was killed.
    CpuTimeout,
    /// The kernel's OOM killer ended a process of the run at `limits.memory_bytes`.
    MemoryLimit,
    /// A stream passed `limits.output_bytes` with `on_output_limit: kill`.
    OutputLimit,
    /// The run's filesystem filled up (`limits.disk_bytes`) and the program failed.
    DiskLimit,
    /// The run was cancelled by its caller.
    Cancelled,
    /// runbox itself failed; the program is not to blame. See `error`.
    SandboxError,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::NonzeroExit => "nonzero_exit",
            Verdict::Signaled => "signaled",
            Verdict::WallTimeout => "wall_timeout",
            Verdict::CpuTimeout => "cpu_timeout",
            Verdict::MemoryLimit => "memory_limit",
            Verdict::OutputLimit => "output_limit",
            Verdict::DiskLimit => "disk_limit",
            Verdict::Cancelled => "cancelled",
            Verdict::SandboxError => "sandbox_error",
        }
    }
}

/// A limit that triggered during a run. A run can hit a limit and still end `ok`
/// (a truncated stream, a fork held back by the pids limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LimitKind {
    WallTime,
    CpuTime,
    Memory,
    Processes,
    Disk,
    Output,
    Artifacts,
}

/// The outcome of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunResult {
    pub run_id: String,
    pub verdict: Verdict,
    /// Exit status of the program, when it exited.
    pub exit_code: Option<i32>,
    /// Number of the signal that ended the program, when one did.
    pub signal: Option<i32>,
    /// WASI runs: the kind of WebAssembly trap that ended the program (verdict `signaled`),
    /// e.g. `unreachable_code_reached`, `memory_out_of_bounds`, `stack_overflow`, or
    /// `host_error: <message>` when a WASI call refused what the program asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trap: Option<String>,
    pub stdout: StreamOutput,
    pub stderr: StreamOutput,
    /// Every regular file left in /workspace, with its SHA-256, sorted by path.
    pub artifacts: Vec<Artifact>,
    /// True when files were left out because of the artifact count or size caps.
    pub artifacts_truncated: bool,
    /// Entries of /workspace that are not listed as artifacts, and why.
    pub artifacts_skipped: Vec<SkippedArtifact>,
    pub usage: Usage,
    /// The limits in effect for this run.
    pub limits: ResolvedLimits,
    /// Every limit that triggered, whatever the verdict.
    pub limits_hit: Vec<LimitKind>,
    /// The isolation layers that were applied, in the order they were applied.
    pub isolation: Vec<String>,
    pub runtime: RuntimeInfo,
    pub timings: Timings,
    pub cleanup: CleanupReport,
    /// Set when the verdict is `sandbox_error`.
    pub error: Option<ErrorInfo>,
    /// The request's checks, evaluated on the host after the run, in request order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<crate::CheckResult>,
    /// Whether every check passed; absent when the request had none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checks_passed: Option<bool>,
    /// Which step the verdict, exit and output describe: `run`, or `build` when the runtime's
    /// build step (e.g. the C compiler) failed and the program never ran.
    pub step: String,
}

/// Captured bytes of one output stream. When the stream passed the cap, its head and tail are
/// kept and joined by a marker line, and `truncated` is set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct StreamOutput {
    /// The kept bytes, when they are valid UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The kept bytes in base64, when they are not valid UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base64: Option<String>,
    /// Bytes the program wrote to the stream in all.
    pub bytes_total: u64,
    pub truncated: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Artifact {
    /// Path relative to /workspace.
    pub path: String,
    pub size_bytes: u64,
    /// Lowercase hex SHA-256 of the file's bytes.
    pub sha256: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SkippedArtifact {
    pub path: String,
    /// Why it is not listed: `symlink`, `fifo`, `socket`, `device`, `too_large`, `over_count`,
    /// `over_total_bytes`, `unreadable`.
    pub reason: String,
    /// Apparent size, for regular files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Usage {
    pub wall_time_ms: u64,
    pub cpu_time_ms: u64,
    pub peak_memory_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RuntimeInfo {
    pub id: String,
    /// `linux` or `wasi`.
    pub kind: String,
    /// SHA-256 of the runtime definition file the run used.
    pub definition_sha256: String,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Timings {
    /// From accepting the request to the program's exec.
    pub setup_ms: u64,
    /// From exec to the end of the last process.
    pub run_ms: u64,
    /// Artifact hashing and teardown of the workspace, cgroup and mounts.
    pub cleanup_ms: u64,
}

/// Teardown is reported on its own: a run can succeed and still leave a mess, or the reverse.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CleanupReport {
    pub ok: bool,
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ErrorInfo {
    /// Stable machine code, e.g. `namespace_setup`, `cgroup_unavailable`.
    pub code: String,
    pub message: String,
}
