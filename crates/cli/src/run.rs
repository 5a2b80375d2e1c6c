//! `runbox run`.

use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::ExitCode;

use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use runbox_contract::{RunResult, StreamOutput, Verdict};
use runbox_runner::{LiveChunk, RunOptions, Runner, RunnerConfig};
use runbox_runtimes::Allowlist;
use runbox_workspace::ArtifactStore;

use crate::exit_codes;
use crate::units::{parse_bytes, parse_millis};

#[derive(clap::Args)]
pub struct RunArgs {
    /// A RunRequest as JSON from this file; `-` reads standard input.
    #[arg(long, conflicts_with_all = ["runtime", "code", "files"])]
    pub request: Option<String>,
    /// Runtime id (see `runbox runtimes`).
    #[arg(long, short = 'r')]
    pub runtime: Option<String>,
    /// Source code, written to the entrypoint (default: the runtime's, e.g. main.py).
    #[arg(long, short = 'c')]
    pub code: Option<String>,
    /// A local file to send: LOCAL or LOCAL:NAME, NAME relative to /workspace. Repeatable.
    #[arg(long = "file")]
    pub files: Vec<String>,
    /// File to run, relative to /workspace.
    #[arg(long)]
    pub entrypoint: Option<String>,
    /// Standard input for the program.
    #[arg(long)]
    pub stdin: Option<String>,
    /// An argument for the program. Repeatable.
    #[arg(long = "arg", allow_hyphen_values = true)]
    pub args: Vec<String>,
    /// NAME=VALUE environment variable. Repeatable.
    #[arg(long = "env")]
    pub env: Vec<String>,
    /// NAME=VALUE secret: in the environment, redacted from all output. Repeatable.
    #[arg(long = "secret")]
    pub secrets: Vec<String>,
    /// Wall-clock limit, e.g. 5s, 500ms.
    #[arg(long, value_parser = parse_millis)]
    pub wall_time: Option<u64>,
    /// CPU-time limit of all processes together, e.g. 2s.
    #[arg(long, value_parser = parse_millis)]
    pub cpu_time: Option<u64>,
    /// Memory limit, e.g. 256M.
    #[arg(long, value_parser = parse_bytes)]
    pub memory: Option<u64>,
    /// Most processes and threads at once.
    #[arg(long)]
    pub processes: Option<u64>,
    /// Size of the run's filesystem (/workspace, /tmp), e.g. 64M.
    #[arg(long, value_parser = parse_bytes)]
    pub disk: Option<u64>,
    /// Bytes kept per output stream, e.g. 1M.
    #[arg(long, value_parser = parse_bytes)]
    pub output: Option<u64>,
    /// Most open files per process.
    #[arg(long)]
    pub open_files: Option<u64>,
    /// A check evaluated after the run, as JSON, e.g. '{"type":"stdout_contains","text":"ok"}'.
    /// Repeatable.
    #[arg(long = "check")]
    pub checks: Vec<String>,
    /// Kill the run when output passes --output, instead of truncating it.
    #[arg(long)]
    pub kill_on_output_limit: bool,
    /// WASI runtimes: fixed clock and seeded randomness, for byte-identical output.
    #[arg(long)]
    pub deterministic: bool,
    /// Print the RunResult as JSON (the machine interface).
    #[arg(long)]
    pub json: bool,
    /// Keep the workspace under the state dir after the run, for debugging.
    #[arg(long)]
    pub keep_workspace: bool,
    /// Use this run id (1 to 64 letters, digits, '-', '_') instead of a random one.
    #[arg(long)]
    pub run_id: Option<String>,
    /// Write the program's output here as it is written, as JSON lines (see the README).
    #[arg(long)]
    pub events: Option<PathBuf>,
    /// Keep every artifact in this directory, named by its SHA-256.
    #[arg(long)]
    pub artifact_store: Option<PathBuf>,
    /// Cancel the run (and clean up) when the process that started runbox dies.
    #[arg(long)]
    pub die_with_parent: bool,
}

pub fn main(args: RunArgs, allowlist: Allowlist, state_dir: PathBuf, cache_dir: PathBuf) -> ExitCode {
    let request = match &args.request {
        Some(source) => crate::request::read_json(source).map_err(|e| (Some(e.field), e.message)),
        None => crate::request::from_flags(&args, &allowlist).map_err(|m| (None, m)),
    };
    let request = match request {
        Ok(request) => request,
        Err((field, message)) => return rejected(args.json, field.as_deref(), &message),
    };
    let mut config = RunnerConfig::new(state_dir);
    config.cache_dir = cache_dir;
    config.keep_workspace = args.keep_workspace;
    let runner = match Runner::new(allowlist, config) {
        Ok(runner) => runner,
        Err(e) => return config_error(&e.to_string()),
    };
    let cancel = cancel_on_signals();
    if args.die_with_parent && !cancel_when_parent_dies() {
        return rejected(args.json, None, "the parent process is already gone");
    }
    let store = match args.artifact_store.as_ref().map(ArtifactStore::open).transpose() {
        Ok(store) => store,
        Err(e) => return config_error(&e.to_string()),
    };
    let events = match args.events.as_ref().map(|p| std::fs::OpenOptions::new().append(true).open(p)).transpose() {
        Ok(events) => events.map(std::cell::RefCell::new),
        Err(e) => return config_error(&format!("open --events: {e}")),
    };
    let listener = |chunk: LiveChunk| {
        if let Some(events) = &events {
            crate::events::write(&mut *events.borrow_mut(), chunk);
        }
    };
    let options = RunOptions {
        run_id: args.run_id.as_deref(),
        cancel: cancel.as_ref().map(|fd| fd.as_fd()),
        on_output: events.as_ref().map(|_| &listener as &dyn Fn(LiveChunk)),
        artifact_store: store.as_ref(),
    };
    let result = runner.run_with(request, &options);
    match result {
        Err(e) => rejected(args.json, Some(&e.field), &e.message),
        Ok(result) => {
            if args.json {
                println!("{}", serde_json::to_string_pretty(&result).expect("result serializes"));
            } else {
                print_human(&result);
            }
            ExitCode::from(exit_codes::for_verdict(result.verdict))
        }
    }
}

/// The parent's death sends us SIGTERM, which cancels the run like any SIGTERM (so the sandbox
/// is still torn down). False when the parent is already gone.
fn cancel_when_parent_dies() -> bool {
    let parent = nix::unistd::getppid();
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM).is_ok() && nix::unistd::getppid() == parent
}

fn config_error(message: &str) -> ExitCode {
    eprintln!("runbox: {message}");
    ExitCode::from(exit_codes::CONFIG)
}

/// SIGINT, SIGTERM and SIGHUP cancel the run (the verdict says `cancelled`) instead of
/// killing runbox, so the sandbox is still torn down and the result still printed.
fn cancel_on_signals() -> Option<SignalFd> {
    let mut set = SigSet::empty();
    for signal in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        set.add(signal);
    }
    set.thread_block().ok()?;
    SignalFd::with_flags(&set, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK).ok()
}

fn rejected(json: bool, field: Option<&str>, message: &str) -> ExitCode {
    if json {
        let error = serde_json::json!({"error": {"code": "invalid_request", "field": field, "message": message}});
        println!("{}", serde_json::to_string_pretty(&error).expect("serializes"));
    } else {
        match field {
            Some(field) => eprintln!("runbox: request rejected: {field}: {message}"),
            None => eprintln!("runbox: request rejected: {message}"),
        }
    }
    ExitCode::from(exit_codes::REJECTED)
}

fn print_human(result: &RunResult) {
    use std::io::Write;
    let _ = std::io::stdout().write_all(&stream_bytes(&result.stdout));
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().write_all(&stream_bytes(&result.stderr));
    eprintln!("{}", summary(result));
}

fn stream_bytes(stream: &StreamOutput) -> Vec<u8> {
    use base64::Engine as _;
    match (&stream.text, &stream.base64) {
        (Some(text), _) => text.clone().into_bytes(),
        (None, Some(b64)) => base64::engine::general_purpose::STANDARD.decode(b64).unwrap_or_default(),
        (None, None) => Vec::new(),
    }
}

/// One line: verdict, how it ended, and what it used.
fn summary(r: &RunResult) -> String {
    let ended = match (r.exit_code, r.signal) {
        (Some(code), _) => format!("exit {code}"),
        (None, Some(sig)) => format!("signal {sig}"),
        _ => "no exit status".to_string(),
    };
    let mut line = format!(
        "runbox: {} ({ended}) in {} ms, cpu {} ms, peak memory {:.1} MiB, {} artifact(s)",
        r.verdict.as_str(),
        r.usage.wall_time_ms,
        r.usage.cpu_time_ms,
        r.usage.peak_memory_bytes as f64 / (1 << 20) as f64,
        r.artifacts.len()
    );
    if let Some(all_passed) = r.checks_passed {
        let passed = r.checks.iter().filter(|c| c.passed).count();
        line.push_str(&format!(
            "; checks {passed}/{} passed{}",
            r.checks.len(),
            if all_passed { "" } else { " (FAILED)" }
        ));
    }
    if r.step == "build" {
        line.push_str(" [the build step failed]");
    }
    if !r.limits_hit.is_empty() {
        let hits: Vec<String> = r.limits_hit.iter().map(|k| format!("{k:?}").to_lowercase()).collect();
        line.push_str(&format!("; limits hit: {}", hits.join(", ")));
    }
    if let (Verdict::SandboxError, Some(error)) = (r.verdict, &r.error) {
        line.push_str(&format!("; {}: {}", error.code, error.message));
    }
    if !r.cleanup.ok {
        line.push_str(&format!("; cleanup failed: {}", r.cleanup.error.as_deref().unwrap_or("")));
    }
    line
}
