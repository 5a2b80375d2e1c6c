//! Runs one request in a child `runbox run` process (this same binary).
//!
//! The service is multi-threaded, and a sandbox must be cloned from a single-threaded process
//! (see runbox_linux), so each run gets its own process, started with exec:
//!
//! ```text
//! runbox --state-dir <serve dir> run --json --request - --run-id <id> --events /proc/self/fd/2
//!        --artifact-store <serve dir>/incoming/<id> --die-with-parent
//! ```
//!
//! stdin carries the request; stdout the RunResult (or the refusal); stderr the live output
//! events as JSON lines, with any message of runbox's own on lines that are not events.
//! SIGTERM cancels the run, and `--die-with-parent` makes the service's death (even SIGKILL)
//! cancel it too.

mod outcome;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStderr, Command};

pub use outcome::ChildOutcome;

use crate::live::{LiveEvent, LiveRun};
use crate::redact::Redactor;

/// Largest result read from a child: two streams of at most 16 MiB (base64 when not UTF-8),
/// 1000 artifacts and the rest, with room to spare. More means something is wrong.
const MAX_RESULT_BYTES: u64 = 128 << 20;
/// Longest stderr line kept: an event carries at most one pipe read of output, in base64.
const MAX_LINE_BYTES: usize = 1 << 20;
/// runbox's own messages kept per run, for the log.
const MAX_DIAGNOSTIC_BYTES: usize = 8 << 10;

/// A request on its way to a sandbox, with its share of the request-bytes budget: both are
/// released once the sandbox has read it.
pub struct Payload {
    pub json: Vec<u8>,
    pub budget: Option<tokio::sync::OwnedSemaphorePermit>,
}

pub struct Executor {
    /// The runbox binary.
    pub exe: PathBuf,
    /// Global flags every child gets (`--runtimes-dir`, `--images-dir`).
    pub global_args: Vec<OsString>,
    /// The children's state directory (their `runs/` workspaces live there).
    pub state_dir: PathBuf,
    /// Parent of the per-run incoming artifact directories.
    pub incoming_dir: PathBuf,
}

impl Executor {
    pub fn incoming_of(&self, run_id: &str) -> PathBuf {
        self.incoming_dir.join(run_id)
    }

    /// Runs the request (JSON) as `run_id`, streaming its output into `live`, and returns once
    /// the child has exited. A cancel requested on `live` is passed on as SIGTERM.
    ///
    /// Must be called from a task on a runtime worker thread, never from `spawn_blocking`:
    /// `--die-with-parent` is PR_SET_PDEATHSIG, which fires when the *thread* that forked the
    /// child ends, and blocking-pool threads end when idle. Worker threads live as long as the
    /// runtime.
    pub async fn run(&self, run_id: &str, request: Payload, live: &LiveRun, redactor: &Redactor) -> ChildOutcome {
        let mut command = Command::new(&self.exe);
        command
            .args(&self.global_args)
            .arg("--state-dir")
            .arg(&self.state_dir)
            .args(["run", "--json", "--request", "-", "--run-id", run_id, "--events", "/proc/self/fd/2"])
            .arg("--artifact-store")
            .arg(self.incoming_of(run_id))
            .arg("--die-with-parent")
            // Only what configures runbox itself (RUNBOX_*) and PATH: the sandbox builds the
            // program's environment from the runtime and the request alone anyway.
            .env_clear()
            .envs(std::env::vars_os().filter(|(name, _)| {
                let name = name.as_encoded_bytes();
                name.starts_with(b"RUNBOX_") || name == b"PATH"
            }))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = match command.spawn() {
            Ok(child) => child,
            Err(e) => return ChildOutcome::failed("spawn", format!("start {}: {e}", self.exe.display())),
        };
        let pid = child.id();
        live.push(LiveEvent::Started);
        let mut stdin = child.stdin.take().expect("piped");
        let mut stdout = child.stdout.take().expect("piped");
        let stderr = child.stderr.take().expect("piped");
        let feed = async move {
            // A child that exits early (a refusal) closes its stdin: not our error.
            let _ = stdin.write_all(&request.json).await;
            drop(request);
        };
        let read_result = async move {
            let mut out = Vec::new();
            let read = (&mut stdout).take(MAX_RESULT_BYTES + 1).read_to_end(&mut out).await;
            read.map(|_| out)
        };
        let read_events = forward_events(stderr, live);
        let wait = async {
            let mut cancel_sent = false;
            loop {
                tokio::select! {
                    status = child.wait() => break (status, cancel_sent),
                    () = live.cancelled(), if !cancel_sent => {
                        cancel_sent = true;
                        if let Some(pid) = pid {
                            terminate(pid);
                        }
                    }
                }
            }
        };
        let ((), result, diagnostics, (status, cancel_sent)) = tokio::join!(feed, read_result, read_events, wait);
        let diagnostics = redactor.redact(&diagnostics);
        if !diagnostics.is_empty() {
            tracing::warn!(run_id, diagnostics = %diagnostics.trim_end(), "the sandbox process said");
        }
        match (status, result) {
            (Err(e), _) => ChildOutcome::failed("wait", format!("wait for the sandbox process: {e}")),
            (_, Err(e)) => ChildOutcome::failed("read_result", format!("read the sandbox's result: {e}")),
            (Ok(status), Ok(stdout)) => outcome::interpret(status, &stdout, cancel_sent, &diagnostics, redactor),
        }
    }
}

/// SIGTERM to the child. It is not reaped until `wait` returns, so the pid is still ours.
fn terminate(pid: u32) {
    let Ok(pid) = i32::try_from(pid) else { return };
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGTERM);
}

/// Reads the child's stderr: event lines go to `live`, anything else is kept as runbox's own
/// diagnostics (bounded) and returned.
async fn forward_events(stderr: ChildStderr, live: &LiveRun) -> String {
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    let mut diagnostics = String::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) if line.len() > MAX_LINE_BYTES => continue,
            Ok(_) => {}
        }
        match outcome::parse_event(&line) {
            Some(event) => live.push(event),
            None if diagnostics.len() < MAX_DIAGNOSTIC_BYTES => diagnostics.push_str(&String::from_utf8_lossy(&line)),
            None => {}
        }
    }
    diagnostics
}

/// Removes what a run left in the incoming directory when it produced no result to adopt.
pub fn discard_incoming(dir: &Path) {
    crate::ledger::remove_incoming(dir);
}
