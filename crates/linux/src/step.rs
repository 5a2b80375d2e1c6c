//! One program in one fresh sandbox, from cgroup creation to cleanup.

use std::ffi::CString;
use std::os::fd::BorrowedFd;
use std::time::{Duration, Instant};

use runbox_contract::{OnOutputLimit, ResolvedLimits};

use crate::capture::Captured;
use crate::cgroup::{CgroupLimits, RunCgroup};
use crate::child::{ChildPlan, ExecArgs};
use crate::protocol::{SetupFailure, Step};
use crate::rootfs::{MountOp, PreparedRoot};
use crate::seccomp::SeccompFilter;
use crate::supervise::{KillReason, Watch, watch};
use crate::sys::process;
use crate::{SandboxFailure, failure, spawn};

/// What to run and under which limits. The root must already be prepared.
pub struct StepSpec<'a> {
    /// Names the step's cgroup; unique among live runs.
    pub name: &'a str,
    pub argv: &'a [String],
    pub env: &'a [(String, String)],
    pub cwd: &'a str,
    pub hostname: &'a str,
    pub limits: ResolvedLimits,
    pub cpu_cores: Option<f64>,
    pub root: &'a PreparedRoot,
    pub stdin: &'a [u8],
    pub on_output_limit: OnOutputLimit,
    /// The unprivileged host ids the sandbox's uid and gid map to.
    pub host_uid: u32,
    pub host_gid: u32,
    pub seccomp: &'a SeccompFilter,
    /// Readable means: cancel the run.
    pub cancel: Option<BorrowedFd<'a>>,
}

/// How the program ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
    /// The program never ran, or its end could not be observed.
    Unknown,
}

#[derive(Debug, Clone)]
pub struct StepOutcome {
    pub exit: Exit,
    pub killed_for: Option<KillReason>,
    pub stdout: Captured,
    pub stderr: Captured,
    pub cpu_time_ns: u64,
    pub peak_memory_bytes: u64,
    pub oom_kills: u64,
    pub pids_max_hits: u64,
    /// Clone to execve.
    pub setup_time: Duration,
    /// execve to the end of the last process.
    pub run_time: Duration,
    /// The layers in force while the program ran (empty when it never ran).
    pub isolation: Vec<String>,
    pub failure: Option<SandboxFailure>,
    pub cleanup_errors: Vec<String>,
}

/// Runs one program in a fresh sandbox and tears the sandbox down again.
pub fn run_step(spec: &StepSpec) -> StepOutcome {
    let begun = Instant::now();
    let mut outcome = StepOutcome::never_ran(failure("setup", "not started"));
    match process::thread_count() {
        Ok(1) => {}
        Ok(n) => return StepOutcome::never_ran(failure("supervisor", format!("the supervisor has {n} threads; clone needs a single-threaded process"))),
        Err(e) => return StepOutcome::never_ran(failure("supervisor", format!("count threads: {e}"))),
    }
    let exec = match ExecArgs::new(spec.argv, spec.env) {
        Ok(exec) => exec,
        Err(e) => return StepOutcome::never_ran(failure("plan", format!("argv or env holds a NUL byte: {e}"))),
    };
    let limits = CgroupLimits { memory_bytes: spec.limits.memory_bytes, processes: spec.limits.processes, cpu_cores: spec.cpu_cores };
    let cgroup = match RunCgroup::create(spec.name, &limits) {
        Ok(cgroup) => cgroup,
        Err(e) => return StepOutcome::never_ran(failure("cgroup", format!("{e}; run `runbox doctor`"))),
    };
    let plan = ChildPlan {
        root: spec.root,
        hostname: spec.hostname,
        cwd: CString::new(spec.cwd).unwrap_or_default(),
        uid: runbox_plan::SANDBOX_UID,
        gid: runbox_plan::SANDBOX_GID,
        exec: &exec,
        rlimits: rlimits(&spec.limits),
        seccomp: spec.seccomp,
    };
    match spawn::start(&plan, &cgroup, spec.host_uid, spec.host_gid) {
        Err(e) => outcome.failure = Some(e),
        Ok(started) => {
            let init = started.init;
            let watched = watch(started, &cgroup, &Watch {
                wall_time: Duration::from_millis(spec.limits.wall_time_ms),
                cpu_time_ns: spec.limits.cpu_time_ms.saturating_mul(1_000_000),
                output_bytes: spec.limits.output_bytes as usize,
                kill_on_output_limit: spec.on_output_limit == OnOutputLimit::Kill,
                stdin: spec.stdin,
                cancel: spec.cancel,
            });
            let _ = nix::sys::wait::waitpid(init, None);
            outcome.exit = exit_of(watched.wait_status, watched.killed_for);
            outcome.killed_for = watched.killed_for;
            outcome.stdout = watched.stdout.finish();
            outcome.stderr = watched.stderr.finish();
            outcome.failure = match (watched.setup_failure, watched.exec_at) {
                (Some(f), _) => Some(setup_failure_message(f, spec.root)),
                (None, None) if watched.killed_for == Some(KillReason::Setup) => Some(failure("setup", "sandbox setup did not finish in time")),
                (None, None) if watched.killed_for == Some(KillReason::Cancelled) => None,
                (None, None) => Some(failure("setup", "the sandbox ended before the program started")),
                (None, Some(_)) => None,
            };
            if let Some(exec_at) = watched.exec_at {
                outcome.setup_time = exec_at - begun;
                outcome.run_time = watched.ended_at.saturating_duration_since(exec_at);
                outcome.isolation = layers(&cgroup);
            } else {
                outcome.setup_time = watched.ended_at - begun;
            }
        }
    }
    finish_cgroup(cgroup, &mut outcome);
    outcome
}

impl StepOutcome {
    fn never_ran(failure: SandboxFailure) -> StepOutcome {
        StepOutcome {
            exit: Exit::Unknown,
            killed_for: None,
            stdout: Captured::default(),
            stderr: Captured::default(),
            cpu_time_ns: 0,
            peak_memory_bytes: 0,
            oom_kills: 0,
            pids_max_hits: 0,
            setup_time: Duration::ZERO,
            run_time: Duration::ZERO,
            isolation: Vec::new(),
            failure: Some(failure),
            cleanup_errors: Vec::new(),
        }
    }
}

fn finish_cgroup(cgroup: RunCgroup, outcome: &mut StepOutcome) {
    match cgroup.stats() {
        Ok(stats) => {
            outcome.cpu_time_ns = stats.cpu_time_ns;
            outcome.peak_memory_bytes = stats.peak_memory_bytes.unwrap_or(0);
            outcome.oom_kills = stats.oom_kills;
            outcome.pids_max_hits = stats.pids_max_hits;
        }
        Err(e) => outcome.cleanup_errors.push(format!("read cgroup counters: {e}")),
    }
    if let Err(e) = cgroup.remove() {
        outcome.cleanup_errors.push(format!("remove cgroup: {e}"));
    }
}

fn exit_of(wait_status: Option<i32>, killed_for: Option<KillReason>) -> Exit {
    match wait_status {
        Some(status) if libc::WIFEXITED(status) => Exit::Code(libc::WEXITSTATUS(status)),
        Some(status) if libc::WIFSIGNALED(status) => Exit::Signal(libc::WTERMSIG(status)),
        // init was killed with the whole namespace before it could report.
        None if killed_for.is_some() => Exit::Signal(libc::SIGKILL),
        _ => Exit::Unknown,
    }
}

/// rlimits back up the cgroup limits per process, and stop core dumps.
fn rlimits(limits: &ResolvedLimits) -> Vec<(libc::__rlimit_resource_t, u64)> {
    // The cgroup's CPU watch acts first; RLIMIT_CPU, a second later, is the backstop.
    let cpu_seconds = limits.cpu_time_ms.div_ceil(1000) + 1;
    vec![
        (libc::RLIMIT_CORE, 0),
        (libc::RLIMIT_NOFILE, limits.open_files),
        (libc::RLIMIT_FSIZE, limits.disk_bytes),
        (libc::RLIMIT_CPU, cpu_seconds),
        (libc::RLIMIT_STACK, STACK_BYTES.min(limits.memory_bytes)),
    ]
}

const STACK_BYTES: u64 = 16 << 20;

fn setup_failure_message(f: SetupFailure, root: &PreparedRoot) -> SandboxFailure {
    let what = match f.step {
        Step::MountEntry => root.mounts.get(f.detail as usize).map(describe_mount).unwrap_or_default(),
        _ => String::new(),
    };
    failure("setup", format!("sandbox setup step '{}'{what} failed: {}", f.step.name(), f.errno))
}

fn describe_mount(op: &MountOp) -> String {
    let target = match op {
        MountOp::BindReadOnly { target, .. } | MountOp::Bind { target, .. } | MountOp::Proc { target } => target,
    };
    format!(" ({})", target.to_string_lossy())
}

/// The layers that every successful exec had in force, in the order they were applied.
fn layers(cgroup: &RunCgroup) -> Vec<String> {
    let mut layers: Vec<String> = [
        "user_namespace", "pid_namespace", "mount_namespace", "ipc_namespace", "uts_namespace",
        "net_namespace:loopback_only",
    ]
    .map(String::from)
    .to_vec();
    layers.extend(cgroup.layers());
    layers.extend(
        ["cgroup_namespace", "pivot_root:read_only_root", "capabilities:none", "no_new_privs", "new_session", "rlimits", "seccomp"]
            .map(String::from),
    );
    layers
}
