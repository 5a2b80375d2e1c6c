//! One run, end to end: validate → choose the runtime → plan → workspace → sandbox →
//! verdict → artifacts → cleanup. [`Runner::run`] returns a [`RunResult`] for anything that
//! ran (or should have run and failed inside runbox), and a [`ValidationError`] for a request
//! that was refused before anything was created.

mod output;
mod verdict;

use std::os::fd::BorrowedFd;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use runbox_contract::{
    CleanupReport, ErrorInfo, LimitKind, RequestBounds, RunRequest, RunResult, RuntimeInfo, Timings, Usage, ValidationError, Verdict,
};
use runbox_linux::seccomp::SeccompFilter;
use runbox_linux::{RunDirs, StepOutcome, StepSpec, prepare_root, run_step};
use runbox_plan::{ExecPlan, StepPlan};
use runbox_runtimes::{Allowlist, Runtime, RuntimeKind, Usability};
use runbox_workspace::{ArtifactCaps, Workspace, WorkspaceSpec};

pub use verdict::{StepVerdict, judge};

/// Settings of a runner. Every field has a documented default in [`RunnerConfig::new`].
#[derive(Debug, Clone)]
pub struct RunnerConfig {
    /// Holds `runs/<run_id>` workspaces. Default `/var/lib/runbox`.
    pub state_dir: PathBuf,
    /// Leave each run's workspace in place after the run, for debugging. Default off.
    pub keep_workspace: bool,
    /// Request size bounds. Default [`RequestBounds::default`].
    pub bounds: RequestBounds,
    /// Artifact caps. Default 1000 files and 64 MiB hashed per run.
    pub artifact_caps: ArtifactCaps,
    /// Sandboxed code runs as host uid/gid `host_id_base + supervisor pid`, an id no account
    /// uses. Default 1_000_000_000.
    pub host_id_base: u32,
}

impl RunnerConfig {
    pub fn new(state_dir: PathBuf) -> RunnerConfig {
        RunnerConfig {
            state_dir,
            keep_workspace: false,
            bounds: RequestBounds::default(),
            artifact_caps: ArtifactCaps { max_count: 1000, max_total_bytes: 64 << 20 },
            host_id_base: 1_000_000_000,
        }
    }
}

pub struct Runner {
    allowlist: Allowlist,
    config: RunnerConfig,
    seccomp: &'static SeccompFilter,
}

#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    #[error("compile the seccomp policy: {0}")]
    Seccomp(String),
}

/// Inodes of the run's filesystem per byte of `disk_bytes`, with a floor for tiny disks:
/// enough for ordinary use, few enough that a file-count bomb ends in ENOSPC.
const BYTES_PER_INODE: u64 = 4096;
const MIN_INODES: u64 = 256;
/// Room the read-only root skeleton takes on the run's filesystem (a few dirs, links and the
/// synthesized /etc files), added on top so `disk_bytes` stays the program's own room.
const SKELETON_INODES: u64 = 64;
const SKELETON_BYTES: u64 = 64 << 10;

impl Runner {
    pub fn new(allowlist: Allowlist, config: RunnerConfig) -> Result<Runner, RunnerError> {
        let seccomp = SeccompFilter::default_policy().map_err(|e| RunnerError::Seccomp(e.to_string()))?;
        Ok(Runner { allowlist, config, seccomp })
    }

    pub fn allowlist(&self) -> &Allowlist {
        &self.allowlist
    }

    /// Runs a request. `cancel` becoming readable cancels the run.
    /// Must be called from a single-threaded process (see runbox_linux).
    pub fn run(&self, request: RunRequest, cancel: Option<BorrowedFd>) -> Result<RunResult, ValidationError> {
        let begun = Instant::now();
        let validated = request.validate(&self.config.bounds)?;
        let runtime = runbox_plan::find_runtime(&self.allowlist, &validated.request.runtime)?;
        if runtime.kind != RuntimeKind::Linux {
            return Err(ValidationError::new("runtime", format!("runtime {:?} is of kind {}, which this build cannot run", runtime.id, runtime.kind.as_str())));
        }
        if let Usability::Unusable(why) = runtime.usability() {
            return Err(ValidationError::new("runtime", format!("runtime {:?} is not usable on this host: {why}; `runbox runtimes` lists the usable ones", runtime.id)));
        }
        let run_id = new_run_id();
        let files = validated.files.clone();
        let plan = runbox_plan::plan(&run_id, validated, runtime)?;
        let host_id = self.config.host_id_base + std::process::id();
        let disk_bytes = plan.program.limits.disk_bytes;
        let workspace = Workspace::create(&WorkspaceSpec {
            state_dir: self.config.state_dir.clone(),
            run_id: run_id.clone(),
            disk_bytes: disk_bytes + SKELETON_BYTES,
            inodes: (disk_bytes / BYTES_PER_INODE).max(MIN_INODES) + SKELETON_INODES,
            owner_uid: host_id,
            owner_gid: host_id,
        });
        let workspace = match workspace {
            Ok(ws) => ws,
            Err(e) => return Ok(self.failed_before_start(&plan, runtime, begun, "workspace", e.to_string())),
        };
        if let Err(e) = workspace.write_inputs(&files) {
            let cleanup = workspace.remove();
            if e.is_disk_full() && cleanup.is_ok() {
                return Err(ValidationError::new("files", format!("the files do not fit in limits.disk_bytes ({disk_bytes} bytes); send smaller files or raise the limit")));
            }
            let mut result = self.failed_before_start(&plan, runtime, begun, "workspace", e.to_string());
            result.cleanup = cleanup_report(cleanup.err().map(|e| e.to_string()).into_iter().collect());
            return Ok(result);
        }
        Ok(self.run_in(&plan, runtime, workspace, host_id, cancel, begun))
    }

    fn run_in(&self, plan: &ExecPlan, runtime: &Runtime, workspace: Workspace, host_id: u32, cancel: Option<BorrowedFd>, begun: Instant) -> RunResult {
        let dirs = RunDirs { workspace: workspace.workspace_dir().into(), tmp: workspace.tmp_dir().into(), shm: workspace.shm_dir().into() };
        let root = match prepare_root(workspace.root_dir(), &plan.root, &dirs) {
            Ok(root) => root,
            Err(e) => {
                let mut result = self.failed_before_start(plan, runtime, begun, "root", e.to_string());
                result.cleanup = cleanup_report(workspace.remove().err().map(|e| e.to_string()).into_iter().collect());
                return result;
            }
        };
        let step = |name: &str, step: &StepPlan, stdin: &[u8]| {
            run_step(&StepSpec {
                name,
                argv: &step.argv,
                env: &plan.env,
                cwd: &plan.cwd,
                hostname: runbox_plan::HOSTNAME,
                limits: step.limits,
                cpu_cores: plan.cpu_cores,
                root: &root,
                stdin,
                on_output_limit: plan.on_output_limit,
                host_uid: host_id,
                host_gid: host_id,
                seccomp: self.seccomp,
                cancel,
            })
        };
        let mut cleanup_errors = Vec::new();
        let mut build_failed = None;
        if let Some(build) = &plan.build {
            let outcome = step(&format!("{}-build", plan.run_id), build, &[]);
            cleanup_errors.extend(outcome.cleanup_errors.iter().cloned());
            let disk_full = workspace.disk_usage().map(|u| u.full).unwrap_or(false);
            if judge(&outcome, build.limits, disk_full).verdict != Verdict::Ok {
                build_failed = Some((outcome, disk_full));
            }
        }
        let (outcome, disk_full, step_name, limits) = match build_failed {
            Some((outcome, disk_full)) => (outcome, disk_full, "build", plan.build.as_ref().expect("build ran").limits),
            None => {
                let outcome = step(&plan.run_id, &plan.program, &plan.stdin);
                let disk_full = workspace.disk_usage().map(|u| u.full).unwrap_or(false);
                (outcome, disk_full, "run", plan.program.limits)
            }
        };
        let setup_done = begun.elapsed().saturating_sub(outcome.run_time);
        let cleanup_begun = Instant::now();
        let report = workspace.collect_artifacts(&self.config.artifact_caps);
        cleanup_errors.extend(outcome.cleanup_errors.iter().cloned());
        if self.config.keep_workspace {
            workspace.keep();
        } else if let Err(e) = workspace.remove() {
            cleanup_errors.push(format!("remove workspace: {e}"));
        }
        let judged = judge(&outcome, limits, disk_full);
        let mut limits_hit = judged.limits_hit;
        if report.truncated {
            limits_hit.push(LimitKind::Artifacts);
        }
        RunResult {
            run_id: plan.run_id.clone(),
            verdict: judged.verdict,
            exit_code: judged.exit_code,
            signal: judged.signal,
            stdout: output::stream(&outcome.stdout, &plan.secrets, limits.output_bytes),
            stderr: output::stream(&outcome.stderr, &plan.secrets, limits.output_bytes),
            artifacts: report.artifacts,
            artifacts_truncated: report.truncated,
            artifacts_skipped: report.skipped,
            usage: usage(&outcome),
            limits,
            limits_hit,
            isolation: isolation(&outcome, disk_bytes_layer(limits.disk_bytes)),
            runtime: runtime_info(runtime),
            timings: Timings { setup_ms: millis(setup_done), run_ms: millis(outcome.run_time), cleanup_ms: millis(cleanup_begun.elapsed()) },
            cleanup: cleanup_report(cleanup_errors),
            error: outcome.failure.as_ref().map(|f| ErrorInfo { code: f.code.to_string(), message: output::redact_text(&f.message, &plan.secrets) }),
            step: step_name.to_string(),
        }
    }

    fn failed_before_start(&self, plan: &ExecPlan, runtime: &Runtime, begun: Instant, code: &str, message: String) -> RunResult {
        RunResult {
            run_id: plan.run_id.clone(),
            verdict: Verdict::SandboxError,
            exit_code: None,
            signal: None,
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
            step: "run".to_string(),
        }
    }
}

fn isolation(outcome: &StepOutcome, disk_layer: String) -> Vec<String> {
    let mut layers = outcome.isolation.clone();
    if !layers.is_empty() {
        layers.push(disk_layer);
    }
    layers
}

fn disk_bytes_layer(disk_bytes: u64) -> String {
    format!("tmpfs_workspace:{disk_bytes}_bytes")
}

fn usage(outcome: &StepOutcome) -> Usage {
    Usage { wall_time_ms: millis(outcome.run_time), cpu_time_ms: outcome.cpu_time_ns / 1_000_000, peak_memory_bytes: outcome.peak_memory_bytes }
}

fn runtime_info(runtime: &Runtime) -> RuntimeInfo {
    RuntimeInfo { id: runtime.id.clone(), kind: runtime.kind.as_str().into(), definition_sha256: runtime.definition_sha256.clone() }
}

fn cleanup_report(errors: Vec<String>) -> CleanupReport {
    CleanupReport { ok: errors.is_empty(), error: (!errors.is_empty()).then(|| errors.join("; ")) }
}

fn millis(d: Duration) -> u64 {
    d.as_millis() as u64
}

/// 128 random bits in hex: unique, and unguessable by another tenant.
fn new_run_id() -> String {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    let filled = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if filled.is_err() {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
        bytes = (nanos ^ (u128::from(std::process::id()) << 64)).to_le_bytes();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
