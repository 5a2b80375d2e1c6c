//! One program in one fresh sandbox, from cgroup creation to cleanup.

use std::ffi::CString;
use std::os::fd::BorrowedFd;
use std::time::{Duration, Instant};

use nix::unistd::Pid;

use runbox_contract::{OnOutputLimit, ResolvedLimits};

use crate::capture::Captured;
use crate::cgroup::{CgroupLimits, RunCgroup};
use crate::child::{ChildPlan, ExecArgs};
use crate::protocol::{SetupFailure, Step};
use crate::rootfs::PreparedRoot;
use crate::seccomp::SeccompFilter;
use crate::supervise::{KillReason, OutputTap, Watch, Watched, watch};
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
    /// A descriptor on the run's filesystem, to notice a full disk while the program runs.
    pub disk: Option<BorrowedFd<'a>>,
    /// Sees every chunk of output as it is read (for live streaming).
    pub tap: Option<&'a OutputTap<'a>>,
}

/// How the program ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
    /// The program never ran, or its end could not be observed.
    Unknown,
}

#[derive(Debug)]
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
    /// Teardown steps that failed so far (the rest come from [`Teardown::finish`]).
    pub cleanup_errors: Vec<String>,
    /// The run's filesystem was seen full (no free block or inode) while the program ran.
    pub disk_full_seen: bool,
    pub disk_peak_used_bytes: u64,
    /// What is left to tear down; see [`Teardown::finish`].
    pub teardown: Teardown,
}

/// The part of a step's teardown that may overlap with the caller's work: waiting for init
/// to finish dismantling the namespaces, then removing the cgroup. Every process of the run
/// has been sent SIGKILL by the time a [`StepOutcome`] exists.
#[derive(Debug)]
pub struct Teardown {
    init: Option<Pid>,
    cgroup: Option<RunCgroup>,
}

impl Teardown {
    /// Nothing to tear down.
    pub fn none() -> Teardown {
        Teardown { init: None, cgroup: None }
    }

    /// Reaps init and removes the cgroup. Returns what went wrong, if anything.
    pub fn finish(mut self) -> Vec<String> {
        self.finish_now()
    }

    fn finish_now(&mut self) -> Vec<String> {
        if let Some(init) = self.init.take() {
            let _ = nix::sys::wait::waitpid(init, None);
        }
        let mut errors = Vec::new();
        if let Some(Err(e)) = self.cgroup.take().map(RunCgroup::remove) {
            errors.push(format!("remove cgroup: {e}"));
        }
        errors
    }
}

impl Drop for Teardown {
    /// A dropped teardown still happens; only its errors are lost.
    fn drop(&mut self) {
        self.finish_now();
    }
}

/// Runs one program in a fresh sandbox. When it returns, every process of the run has been
/// sent SIGKILL; finish the rest with [`StepOutcome::teardown`].
pub fn run_step(spec: &StepSpec) -> StepOutcome {
    let begun = Instant::now();
    let exec = match prepare(spec) {
        Ok(exec) => exec,
        Err(failure) => return StepOutcome::never_ran(failure),
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
        command_line_areas: process::command_line_areas(),
    };
    // init is in the cgroup too; `processes` counts the program's own.
    let limits = CgroupLimits {
        memory_bytes: spec.limits.memory_bytes,
        processes: spec.limits.processes + 1,
        cpu_cores: spec.cpu_cores,
    };
    let (started, cgroup) = match spawn::start(&plan, spec.name, &limits, spec.host_uid, spec.host_gid) {
        Ok(started) => started,
        Err(failure) => return StepOutcome::never_ran(failure),
    };
    let init = started.init;
    let mut outcome = StepOutcome::never_ran(failure("setup", "not started"));
    let watched = watch(started, &cgroup, &watch_limits(spec));
    record(&mut outcome, watched, spec.root, begun, &cgroup);
    read_counters(&cgroup, &mut outcome);
    // The program is over: end whatever it left (daemons, init) before anyone reads the
    // workspace. The kernel finishes the job while the caller collects artifacts.
    let _ = nix::sys::signal::kill(init, nix::sys::signal::Signal::SIGKILL);
    if let Err(e) = cgroup.signal_all() {
        outcome.cleanup_errors.push(format!("kill the run's processes: {e}"));
    }
    outcome.teardown = Teardown { init: Some(init), cgroup: Some(cgroup) };
    outcome
}

/// Everything that can fail before the clone, so that a failure here leaves nothing behind.
fn prepare(spec: &StepSpec) -> Result<ExecArgs, SandboxFailure> {
    match process::thread_count() {
        Ok(1) => {}
        Ok(n) => {
            return Err(failure(
                "supervisor",
                format!("the supervisor has {n} threads; clone needs a single-threaded process"),
            ));
        }
        Err(e) => return Err(failure("supervisor", format!("count threads: {e}"))),
    }
    ExecArgs::new(spec.argv, spec.env).map_err(|e| failure("plan", format!("argv or env holds a NUL byte: {e}")))
}

fn watch_limits<'a>(spec: &StepSpec<'a>) -> Watch<'a> {
    Watch {
        wall_time: Duration::from_millis(spec.limits.wall_time_ms),
        cpu_time_ns: spec.limits.cpu_time_ms.saturating_mul(1_000_000),
        output_bytes: spec.limits.output_bytes as usize,
        kill_on_output_limit: spec.on_output_limit == OnOutputLimit::Kill,
        stdin: spec.stdin,
        cancel: spec.cancel,
        disk: spec.disk,
        tap: spec.tap,
    }
}

fn record(outcome: &mut StepOutcome, watched: Watched, root: &PreparedRoot, begun: Instant, cgroup: &RunCgroup) {
    outcome.disk_full_seen = watched.disk_full_seen;
    outcome.disk_peak_used_bytes = watched.disk_peak_used_bytes;
    outcome.exit = exit_of(watched.wait_status, watched.killed_for);
    outcome.killed_for = watched.killed_for;
    outcome.stdout = watched.stdout.finish();
    outcome.stderr = watched.stderr.finish();
    outcome.failure = match (watched.setup_failure, watched.exec_at) {
        (Some(f), _) => Some(setup_failure_message(f, root)),
        (None, Some(_)) => None,
        (None, None) => match watched.killed_for {
            Some(KillReason::Cancelled) => None,
            Some(KillReason::Setup) => Some(failure("setup", "sandbox setup did not finish in time")),
            _ => Some(failure("setup", "the sandbox ended before the program started")),
        },
    };
    match watched.exec_at {
        Some(exec_at) => {
            outcome.setup_time = exec_at - begun;
            outcome.run_time = watched.ended_at.saturating_duration_since(exec_at);
            outcome.isolation = layers(cgroup);
        }
        None => outcome.setup_time = watched.ended_at - begun,
    }
}

impl StepOutcome {
    /// Takes the teardown out, to finish it while keeping the outcome.
    pub fn take_teardown(&mut self) -> Teardown {
        std::mem::replace(&mut self.teardown, Teardown::none())
    }

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
            disk_full_seen: false,
            disk_peak_used_bytes: 0,
            teardown: Teardown::none(),
        }
    }
}

/// The kernel's counters for the run. Read once the program has ended, before teardown, so
/// init's own exit does not count against the program.
fn read_counters(cgroup: &RunCgroup, outcome: &mut StepOutcome) {
    match cgroup.stats() {
        Ok(stats) => {
            outcome.cpu_time_ns = stats.cpu_time_ns;
            outcome.peak_memory_bytes = stats.peak_memory_bytes.unwrap_or(0);
            outcome.oom_kills = stats.oom_kills;
            outcome.pids_max_hits = stats.pids_max_hits;
        }
        Err(e) => outcome.cleanup_errors.push(format!("read cgroup counters: {e}")),
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
        Step::BuildRoot => root.describe(Some(f.detail as usize), None),
        Step::MountEntry => root.describe(None, Some(f.detail as usize)),
        _ => String::new(),
    };
    failure("setup", format!("sandbox setup step '{}'{what} failed: {}", f.step.name(), f.errno))
}

/// The layers that every successful exec had in force, in the order they were applied.
fn layers(cgroup: &RunCgroup) -> Vec<String> {
    let mut layers: Vec<String> = [
        "user_namespace",
        "pid_namespace",
        "mount_namespace",
        "ipc_namespace",
        "uts_namespace",
        "net_namespace:loopback_only",
    ]
    .map(String::from)
    .to_vec();
    layers.extend(cgroup.layers());
    layers.extend(
        [
            "cgroup_namespace",
            "pivot_root:read_only_root",
            "capabilities:none",
            "no_new_privs",
            "new_session",
            "rlimits",
            "seccomp",
        ]
        .map(String::from),
    );
    layers
}
