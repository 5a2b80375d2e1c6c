//! WASI runs. Same request, plan, workspace, verdict and result as a Linux run; the program is
//! a WebAssembly module under wasmtime (`runbox_wasi`) instead of a process in namespaces.
//!
//! Plan, then act: the module is loaded (or compiled, for the `wasm` runtime) and linked
//! before the workspace exists, so a module that cannot run is refused with nothing to undo.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use runbox_contract::{InputFile, RunResult, Timings, ValidationError};
use runbox_linux::OutputStream;
use runbox_linux::{Exit, KillReason, SandboxFailure, StepOutcome, Teardown};
use runbox_plan::ExecPlan;
use runbox_runtimes::{CpuMetering, PreopenSource, Runtime, Usability, WasiModule, WasiSpec};
use runbox_wasi::{
    EngineSettings, Entry, Executor, Outcome, Preopen, Program, RunSpec, StopReason, Stub, WasiError, Watchers,
};
use runbox_workspace::Workspace;

use crate::live::LiveOutput;
use crate::result::{self, millis};
use crate::{Finished, RunOptions, Runner};

/// The WASI side of a runner: its executor and the programs linked so far, by runtime id
/// (modules that come with a request are linked per run).
pub(crate) struct WasiBackend {
    executor: Executor,
    programs: Mutex<HashMap<String, Arc<Program>>>,
}

impl WasiBackend {
    pub(crate) fn new(cache_dir: &Path) -> WasiBackend {
        WasiBackend { executor: Executor::new(cache_dir, false), programs: Mutex::new(HashMap::new()) }
    }
}

/// A module ready to run, and what the run needs besides.
pub(crate) struct Loaded<'a> {
    spec: &'a WasiSpec,
    program: Arc<Program>,
    package_dir: Option<PathBuf>,
    deterministic: bool,
}

/// Whether `runtime` can run here: for a wasi runtime, whether its package and compiled
/// module are prepared in `cache_dir`.
pub fn usability(runtime: &Runtime, cache_dir: &Path) -> Usability {
    let Some(wasi) = &runtime.wasi else {
        return runtime.usability();
    };
    let Some(package) = &wasi.package else {
        return Usability::Usable;
    };
    if let Err(e) = runbox_wasi::check_package(cache_dir, package) {
        return Usability::Unusable(e.to_string());
    }
    if let WasiModule::Package { sha256, .. } = &wasi.module {
        let executor = Executor::new(cache_dir, false);
        match executor.cached_path(settings(wasi), sha256) {
            Ok(path) if path.is_file() => {}
            Ok(path) => {
                return Usability::Unusable(WasiError::NotPrepared { what: "compiled module", path }.to_string());
            }
            Err(e) => return Usability::Unusable(e.to_string()),
        }
    }
    Usability::Usable
}

/// The engine a wasi runtime needs.
pub fn settings(wasi: &WasiSpec) -> EngineSettings {
    EngineSettings {
        fuel: matches!(wasi.cpu, CpuMetering::Fuel { .. }),
        wasm_stack_bytes: usize::try_from(wasi.wasm_stack_bytes).unwrap_or(usize::MAX),
    }
}

/// Loads and links the runtime's module. `Err` refuses the request; `Ok(Err)` is runbox's own
/// failure, reported as `sandbox_error`.
pub(crate) fn load<'a>(
    runner: &Runner,
    runtime: &Runtime,
    wasi: &'a WasiSpec,
    request: (&str, &[InputFile], bool),
) -> Result<Result<Loaded<'a>, WasiError>, ValidationError> {
    let (entrypoint, files, deterministic) = request;
    let backend = runner.wasi.get_or_init(|| WasiBackend::new(&runner.config.cache_dir));
    let cache_dir = &runner.config.cache_dir;
    let settings = settings(wasi);
    let entry = Entry { initialize: wasi.initialize, export: wasi.export.clone() };
    let stubs: Vec<Stub> = wasi
        .stubs
        .iter()
        .map(|s| Stub { module: s.module.clone(), name: s.name.clone(), returns: s.returns })
        .collect();
    let unusable = |e: WasiError| {
        ValidationError::new(
            "runtime",
            format!(
                "runtime {:?} is not usable on this host: {e}; `runbox runtimes` lists the usable ones",
                runtime.id
            ),
        )
    };
    let package_dir = match &wasi.package {
        Some(package) => Some(runbox_wasi::check_package(cache_dir, package).map_err(unusable)?),
        None => None,
    };
    let program = match &wasi.module {
        WasiModule::Entrypoint => {
            let bytes = files.iter().find(|f| f.path == entrypoint).map(|f| f.bytes.as_slice()).unwrap_or_default();
            let linked = backend
                .executor
                .compile(settings, bytes)
                .and_then(|module| backend.executor.link(settings, &module, entry, &stubs));
            match linked {
                Ok(program) => Arc::new(program),
                Err(WasiError::BadModule(message)) => return Err(ValidationError::new("entrypoint", message)),
                Err(e) => return Ok(Err(e)),
            }
        }
        WasiModule::Package { sha256, .. } => {
            let mut programs = backend.programs.lock().unwrap_or_else(|e| e.into_inner());
            match programs.get(&runtime.id) {
                Some(program) => program.clone(),
                None => {
                    let module = match backend.executor.load_prepared(settings, sha256) {
                        Ok(module) => module,
                        Err(e @ WasiError::NotPrepared { .. }) => return Err(unusable(e)),
                        Err(e) => return Ok(Err(e)),
                    };
                    let program = match backend.executor.link(settings, &module, entry, &stubs) {
                        Ok(program) => Arc::new(program),
                        Err(e) => return Ok(Err(e)),
                    };
                    programs.insert(runtime.id.clone(), program.clone());
                    program
                }
            }
        }
    };
    Ok(Ok(Loaded { spec: wasi, program, package_dir, deterministic }))
}

/// Runs a loaded program in `workspace` and assembles the result as a Linux run would.
pub(crate) fn run_in(
    runner: &Runner,
    plan: &ExecPlan,
    runtime: &Runtime,
    loaded: &Loaded,
    workspace: Workspace,
    options: &RunOptions,
    begun: Instant,
) -> RunResult {
    let (wasi, deterministic) = (loaded.spec, loaded.deterministic);
    let preopens: Vec<Preopen> = wasi
        .preopens
        .iter()
        .map(|p| Preopen {
            host: match &p.source {
                PreopenSource::Workspace => workspace.workspace_dir().to_path_buf(),
                PreopenSource::Tmp => workspace.tmp_dir().to_path_buf(),
                PreopenSource::Package(dir) => {
                    loaded.package_dir.as_deref().unwrap_or(Path::new("/nonexistent")).join(dir)
                }
            },
            guest: p.guest.clone(),
            writable: p.source.writable(),
        })
        .collect();
    let limits = plan.program.limits;
    let live = options.on_output.map(|listener| LiveOutput::new(listener, &plan.secrets, limits.output_bytes));
    let tap = |stream: OutputStream, data: &[u8]| live.as_ref().map_or((), |live| live.push(stream, data));
    let watchers = Watchers {
        cancel: options.cancel,
        disk: Some(std::os::fd::AsFd::as_fd(workspace.workspace_fd())),
        tap: live.as_ref().map(|_| &tap as _),
    };
    let outcome = runbox_wasi::run(
        &loaded.program,
        &RunSpec {
            argv: &plan.program.argv,
            env: &plan.env,
            stdin: &plan.stdin,
            preopens: &preopens,
            limits,
            kill_on_output_limit: plan.on_output_limit == runbox_contract::OnOutputLimit::Kill,
            fuel_per_ms: match wasi.cpu {
                CpuMetering::Fuel { fuel_per_ms } => Some(fuel_per_ms),
                CpuMetering::ThreadTime => None,
            },
            deterministic,
        },
        watchers,
    );
    if let Some(live) = &live {
        live.finish();
    }
    let trap = match &outcome.exit {
        runbox_wasi::Exit::Trap(kind) => Some(kind.clone()),
        _ => None,
    };
    let step_outcome = step_outcome(outcome, isolation(wasi, &preopens, deterministic));
    let disk_full = workspace.disk_usage().map(|u| u.full).unwrap_or(false);
    let setup_time = begun.elapsed().saturating_sub(step_outcome.run_time);
    let cleanup_begun = Instant::now();
    let report = workspace.collect_artifacts_into(&runner.config.artifact_caps, options.artifact_store);
    let mut cleanup_errors = Vec::new();
    if runner.config.keep_workspace {
        workspace.keep();
    } else if let Err(e) = workspace.remove() {
        cleanup_errors.push(format!("remove workspace: {e}"));
    }
    let timings = Timings {
        setup_ms: millis(setup_time),
        run_ms: millis(step_outcome.run_time),
        cleanup_ms: millis(cleanup_begun.elapsed()),
    };
    let finished = Finished { outcome: step_outcome, disk_full, step: "run", limits };
    let mut result = result::assemble(plan, runtime, &finished, report, timings, cleanup_errors);
    if let Some(kind) = trap {
        // A trap reaches the shared verdict logic as a signal (so it is judged `signaled`, in
        // the same order as a Linux program's own signal); it is reported as what it was.
        result.signal = None;
        result.trap = Some(kind);
    }
    result
}

/// The WASI outcome in the Linux step's terms, so `judge` and `assemble` apply unchanged: a
/// refused memory growth counts as the OOM killer acting, a trap as a signal of its own.
fn step_outcome(outcome: Outcome, isolation: Vec<String>) -> StepOutcome {
    StepOutcome {
        exit: match outcome.exit {
            runbox_wasi::Exit::Code(code) => Exit::Code(code),
            runbox_wasi::Exit::Trap(_) => Exit::Signal(0),
            runbox_wasi::Exit::Unknown => Exit::Unknown,
        },
        killed_for: outcome.stopped_for.map(|reason| match reason {
            StopReason::WallTime => KillReason::WallTime,
            StopReason::CpuTime => KillReason::CpuTime,
            StopReason::Output => KillReason::Output,
            StopReason::Cancelled => KillReason::Cancelled,
        }),
        stdout: outcome.stdout,
        stderr: outcome.stderr,
        cpu_time_ns: outcome.cpu_time_ns,
        peak_memory_bytes: outcome.peak_memory_bytes,
        oom_kills: u64::from(outcome.memory_denied),
        pids_max_hits: 0,
        setup_time: Default::default(),
        run_time: outcome.run_time,
        isolation: if outcome.failure.is_some() { Vec::new() } else { isolation },
        failure: outcome.failure.map(|message| SandboxFailure { code: "wasi", message }),
        cleanup_errors: Vec::new(),
        disk_full_seen: outcome.disk_full_seen,
        disk_peak_used_bytes: outcome.disk_peak_used_bytes,
        teardown: Teardown::none(),
    }
}

/// The layers of a WASI run, in the order they are set up.
fn isolation(wasi: &WasiSpec, preopens: &[Preopen], deterministic: bool) -> Vec<String> {
    let mut layers: Vec<String> = vec!["wasmtime".into(), "wasi_preview1".into(), "pooling_allocator".into()];
    for p in preopens {
        layers.push(format!("preopen:{}:{}", p.guest, if p.writable { "rw" } else { "ro" }));
    }
    layers.extend(["no_sockets", "memory_limit", "epoch_deadline"].map(String::from));
    layers.push(match wasi.cpu {
        CpuMetering::Fuel { .. } => "cpu_fuel".into(),
        CpuMetering::ThreadTime => "cpu_thread_time".into(),
    });
    layers.push("output_capped".into());
    if deterministic {
        layers.push("deterministic".into());
    }
    layers
}
