//! One run, end to end: validate → choose the runtime → plan → workspace → sandbox →
//! verdict → artifacts → cleanup. [`Runner::run`] returns a [`RunResult`] for anything that
//! ran (or should have run and failed inside runbox), and a [`ValidationError`] for a request
//! that was refused before anything was created.

mod live;
mod output;
mod result;
mod verdict;
mod wasi;

use result::millis;

use std::os::fd::{AsFd, BorrowedFd};
use std::path::PathBuf;
use std::time::Instant;

use runbox_contract::{RequestBounds, ResolvedLimits, RunRequest, RunResult, Timings, ValidationError, Verdict};
use runbox_linux::seccomp::SeccompFilter;
use runbox_linux::{OutputStream, OutputTap, RunDirs, StepOutcome, StepSpec, prepare_root, run_step};
use runbox_plan::{ExecPlan, StepPlan};
use runbox_runtimes::{Allowlist, Runtime, RuntimeKind, Usability};
use runbox_workspace::{ArtifactCaps, ArtifactStore, Workspace, WorkspaceSpec};

pub use live::LiveChunk;
use live::LiveOutput;
pub use verdict::{StepVerdict, judge};
pub use wasi::{settings as wasi_settings, usability};

/// How one run is driven. Every field is optional; the default runs with a fresh id, no
/// cancellation, no live output and no artifact store.
#[derive(Default, Clone, Copy)]
pub struct RunOptions<'a> {
    /// The run's id, chosen by the caller (a service records it before the run starts).
    pub run_id: Option<&'a str>,
    /// Readable means: cancel the run.
    pub cancel: Option<BorrowedFd<'a>>,
    /// Receives the program's output as it is written: secrets redacted, at most
    /// `limits.output_bytes` per stream, then a [`LiveChunk::Truncated`].
    pub on_output: Option<&'a dyn Fn(LiveChunk)>,
    /// Every listed artifact is also kept here, by digest.
    pub artifact_store: Option<&'a ArtifactStore>,
}

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
    /// WASI runtimes' prepared packages and compiled modules (`runbox prepare` fills it); only
    /// root may write it. Default `/var/cache/runbox`.
    pub cache_dir: PathBuf,
}

impl RunnerConfig {
    pub fn new(state_dir: PathBuf) -> RunnerConfig {
        RunnerConfig {
            state_dir,
            keep_workspace: false,
            bounds: RequestBounds::default(),
            artifact_caps: ArtifactCaps { max_count: 1000, max_total_bytes: 64 << 20 },
            host_id_base: 1_000_000_000,
            cache_dir: PathBuf::from("/var/cache/runbox"),
        }
    }
}

pub struct Runner {
    allowlist: Allowlist,
    config: RunnerConfig,
    seccomp: &'static SeccompFilter,
    /// Made on the first WASI run: its engines reserve address space for their pools.
    wasi: std::sync::OnceLock<wasi::WasiBackend>,
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
/// Inodes the read-only root skeleton takes on the run's filesystem (a few dirs, links and the
/// synthesized /etc files), added on top so the program keeps its own share. Its bytes (a few
/// KiB) come out of `disk_bytes`, the size of the whole filesystem, so that RLIMIT_FSIZE at
/// `disk_bytes` can never fire before the filesystem is full.
const SKELETON_INODES: u64 = 64;

impl Runner {
    pub fn new(allowlist: Allowlist, config: RunnerConfig) -> Result<Runner, RunnerError> {
        let seccomp = SeccompFilter::default_policy().map_err(|e| RunnerError::Seccomp(e.to_string()))?;
        Ok(Runner { allowlist, config, seccomp, wasi: std::sync::OnceLock::new() })
    }

    pub fn allowlist(&self) -> &Allowlist {
        &self.allowlist
    }

    /// Runs a request. `cancel` becoming readable cancels the run.
    /// Must be called from a single-threaded process (see runbox_linux).
    pub fn run(&self, request: RunRequest, cancel: Option<BorrowedFd>) -> Result<RunResult, ValidationError> {
        self.run_with(request, &RunOptions { cancel, ..RunOptions::default() })
    }

    /// Runs a request with the given options (see [`RunOptions`]).
    pub fn run_with(&self, request: RunRequest, options: &RunOptions) -> Result<RunResult, ValidationError> {
        runbox_checks::validate(&request.checks)?;
        let checks = request.checks.clone();
        let mut result = self.run_checked(request, options)?;
        if !checks.is_empty() {
            let (outcomes, all_passed) = runbox_checks::evaluate(&checks, &result);
            result.checks = outcomes;
            result.checks_passed = Some(all_passed);
        }
        Ok(result)
    }

    fn run_checked(&self, request: RunRequest, options: &RunOptions) -> Result<RunResult, ValidationError> {
        let begun = Instant::now();
        let validated = request.validate(&self.config.bounds)?;
        let runtime = runbox_plan::find_runtime(&self.allowlist, &validated.request.runtime)?;
        if validated.request.deterministic && runtime.kind != RuntimeKind::Wasi {
            return Err(ValidationError::new(
                "deterministic",
                format!("runtime {:?} runs Linux processes; deterministic mode needs a wasi runtime", runtime.id),
            ));
        }
        // A wasi runtime's package and compiled module are checked when it is loaded, below.
        if let Usability::Unusable(why) = runtime.usability() {
            return Err(ValidationError::new(
                "runtime",
                format!(
                    "runtime {:?} is not usable on this host: {why}; `runbox runtimes` lists the usable ones",
                    runtime.id
                ),
            ));
        }
        let run_id = match options.run_id {
            Some(id) => validate_run_id(id)?,
            None => new_run_id(),
        };
        let files = validated.files.clone();
        let entrypoint = validated.request.entrypoint.clone().unwrap_or_else(|| runtime.entrypoint.clone());
        let deterministic = validated.request.deterministic;
        let plan = runbox_plan::plan(&run_id, validated, runtime)?;
        let wasi = match &runtime.wasi {
            None => None,
            Some(spec) => match wasi::load(self, runtime, spec, (&entrypoint, &files, deterministic))? {
                Ok(loaded) => Some(loaded),
                Err(e) => return Ok(result::failed_before_start(&plan, runtime, begun, "wasi", e.to_string())),
            },
        };
        let host_id = self.config.host_id_base + std::process::id();
        let disk_bytes = plan.program.limits.disk_bytes;
        let workspace = Workspace::create(&WorkspaceSpec {
            state_dir: self.config.state_dir.clone(),
            run_id: run_id.clone(),
            disk_bytes,
            inodes: (disk_bytes / BYTES_PER_INODE).max(MIN_INODES) + SKELETON_INODES,
            owner_uid: host_id,
            owner_gid: host_id,
        });
        let workspace = match workspace {
            Ok(ws) => ws,
            Err(e) => {
                return Ok(result::failed_before_start(&plan, runtime, begun, "workspace", e.to_string()));
            }
        };
        if let Err(e) = workspace.write_inputs(&files) {
            let cleanup = workspace.remove();
            if e.is_disk_full() && cleanup.is_ok() {
                return Err(ValidationError::new(
                    "files",
                    format!(
                        "the files do not fit in limits.disk_bytes ({disk_bytes} bytes); send smaller files or raise the limit"
                    ),
                ));
            }
            let mut result = result::failed_before_start(&plan, runtime, begun, "workspace", e.to_string());
            result.cleanup = result::cleanup_report(cleanup.err().map(|e| e.to_string()).into_iter().collect());
            return Ok(result);
        }
        if let Some(loaded) = &wasi {
            return Ok(wasi::run_in(self, &plan, runtime, loaded, workspace, options, begun));
        }
        Ok(self.run_in(&plan, runtime, workspace, host_id, options, begun))
    }

    fn run_in(
        &self,
        plan: &ExecPlan,
        runtime: &Runtime,
        workspace: Workspace,
        host_id: u32,
        options: &RunOptions,
        begun: Instant,
    ) -> RunResult {
        let dirs = RunDirs {
            workspace: workspace.workspace_dir().into(),
            tmp: workspace.tmp_dir().into(),
            shm: workspace.shm_dir().into(),
        };
        let root = match prepare_root(workspace.root_dir(), &plan.root, &dirs) {
            Ok(root) => root,
            Err(e) => {
                let mut result = result::failed_before_start(plan, runtime, begun, "root", e.to_string());
                result.cleanup =
                    result::cleanup_report(workspace.remove().err().map(|e| e.to_string()).into_iter().collect());
                return result;
            }
        };
        let live = options
            .on_output
            .map(|listener| LiveOutput::new(listener, &plan.secrets, plan.program.limits.output_bytes));
        let tap = |stream: OutputStream, data: &[u8]| live.as_ref().map_or((), |live| live.push(stream, data));
        let step = |name: &str, step: &StepPlan, stdin: &[u8], tap: Option<&OutputTap>| {
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
                cancel: options.cancel,
                disk: Some(workspace.workspace_fd().as_fd()),
                tap,
            })
        };
        let disk_full = || workspace.disk_usage().map(|u| u.full).unwrap_or(false);
        let mut cleanup_errors = Vec::new();
        let mut failed_build = None;
        if let Some(build) = &plan.build {
            let mut outcome = step(&format!("{}-build", plan.run_id), build, &[], None);
            cleanup_errors.extend(outcome.take_teardown().finish());
            let full = disk_full();
            if judge(&outcome, build.limits, full).verdict != Verdict::Ok {
                failed_build = Some(Finished { outcome, disk_full: full, step: "build", limits: build.limits });
            }
        }
        let mut finished = failed_build.unwrap_or_else(|| {
            let outcome = step(&plan.run_id, &plan.program, &plan.stdin, live.as_ref().map(|_| &tap as _));
            if let Some(live) = &live {
                live.finish();
            }
            Finished { outcome, disk_full: disk_full(), step: "run", limits: plan.program.limits }
        });
        let setup_time = begun.elapsed().saturating_sub(finished.outcome.run_time);
        let cleanup_begun = Instant::now();
        // Collected while the kernel dismantles the sandbox's namespaces.
        let report = workspace.collect_artifacts_into(&self.config.artifact_caps, options.artifact_store);
        cleanup_errors.append(&mut finished.outcome.cleanup_errors);
        if self.config.keep_workspace {
            workspace.keep();
        } else if let Err(e) = workspace.remove() {
            cleanup_errors.push(format!("remove workspace: {e}"));
        }
        cleanup_errors.extend(finished.outcome.take_teardown().finish());
        let timings = Timings {
            setup_ms: millis(setup_time),
            run_ms: millis(finished.outcome.run_time),
            cleanup_ms: millis(cleanup_begun.elapsed()),
        };
        result::assemble(plan, runtime, &finished, report, timings, cleanup_errors)
    }
}

/// The step whose outcome the result reports.
pub(crate) struct Finished {
    pub outcome: StepOutcome,
    pub disk_full: bool,
    pub step: &'static str,
    pub limits: ResolvedLimits,
}

/// A caller-chosen run id names a directory and a cgroup: keep it to a short, plain name.
fn validate_run_id(id: &str) -> Result<String, ValidationError> {
    let plain =
        !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if plain {
        Ok(id.to_string())
    } else {
        Err(ValidationError::new("run_id", "use 1 to 64 ASCII letters, digits, '-' or '_'"))
    }
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
