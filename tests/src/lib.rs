//! Harness for the end-to-end tests: runs the real `runbox` binary (built by `cargo test`
//! as a workspace member) with a private state dir, and parses its JSON result.
//!
//! The tests go through the binary, not the library, because the sandbox must be started
//! from a single-threaded process and the test harness runs tests on threads.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub use runbox_contract::{LimitKind, RunResult, Verdict};
use serde_json::{Value, json};

/// The runbox binary: `RUNBOX_BIN`, else `runbox` next to the test executable's directory.
pub fn runbox_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("RUNBOX_BIN") {
        return bin.into();
    }
    let exe = std::env::current_exe().expect("test executable path");
    let profile_dir = exe.parent().and_then(Path::parent).expect("target/<profile>/deps/..");
    let bin = profile_dir.join("runbox");
    assert!(bin.exists(), "{} not built; run `cargo test --workspace`", bin.display());
    bin
}

/// One runbox with its own state dir, so tests can check that nothing is left behind.
pub struct Runbox {
    state: tempfile::TempDir,
}

/// What `runbox run --json` printed and how it exited.
#[derive(Debug)]
pub struct Ran {
    pub exit_code: i32,
    pub json: Value,
    pub stderr: String,
}

impl Ran {
    /// The RunResult; panics with the raw output when the run was rejected.
    pub fn result(&self) -> RunResult {
        serde_json::from_value(self.json.clone())
            .unwrap_or_else(|e| panic!("not a RunResult ({e}): {}\nstderr: {}", self.json, self.stderr))
    }

    /// The rejection's (field, message); panics when the request ran.
    pub fn rejection(&self) -> (String, String) {
        assert_eq!(self.exit_code, 2, "expected a rejection, got {}", self.json);
        let error = &self.json["error"];
        (error["field"].as_str().unwrap_or("").to_string(), error["message"].as_str().unwrap_or("").to_string())
    }
}

impl Default for Runbox {
    fn default() -> Self {
        Self::new()
    }
}

impl Runbox {
    pub fn new() -> Runbox {
        Runbox { state: tempfile::Builder::new().prefix("runbox-test-").tempdir().expect("state dir") }
    }

    pub fn state_dir(&self) -> &Path {
        self.state.path()
    }

    pub fn command(&self) -> Command {
        let mut cmd = Command::new(runbox_bin());
        cmd.arg("--state-dir").arg(self.state.path());
        cmd
    }

    /// `runbox run --json --request -` with `request` on stdin.
    pub fn run(&self, request: &Value) -> Ran {
        self.run_raw(&serde_json::to_vec(request).expect("json"))
    }

    /// `rb.run`, with extra `runbox run` flags.
    pub fn run_with_args(&self, request: &Value, args: &[&str]) -> Ran {
        self.spawn_run(request, |cmd| {
            cmd.args(args);
        })
        .wait()
    }

    /// Same, with raw bytes as the request body (for malformed-input tests). The body is
    /// written from a thread, and a broken pipe is fine: runbox stops reading a body that is
    /// too large, answers and exits.
    pub fn run_raw(&self, body: &[u8]) -> Ran {
        let mut child = self.json_run_command().spawn().expect("spawn runbox");
        let mut stdin = child.stdin.take().expect("stdin");
        let body = body.to_vec();
        let writer = std::thread::spawn(move || match stdin.write_all(&body) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
            Err(e) => panic!("write request: {e}"),
        });
        let ran = parse(child.wait_with_output().expect("wait runbox"));
        writer.join().expect("writer thread");
        ran
    }

    /// `runbox run --json --request -` with piped stdio, not started yet.
    fn json_run_command(&self) -> Command {
        let mut cmd = self.command();
        cmd.args(["run", "--json", "--request", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    /// `runbox <args>`, raw.
    pub fn cli(&self, args: &[&str]) -> Output {
        self.command().args(args).output().expect("run runbox")
    }

    /// Entries left under `<state>/runs` (there should be none after a run).
    pub fn leftover_runs(&self) -> Vec<String> {
        match std::fs::read_dir(self.state.path().join("runs")) {
            Ok(dir) => dir.map(|e| e.expect("entry").file_name().to_string_lossy().into_owned()).collect(),
            Err(_) => Vec::new(),
        }
    }
}

fn parse(output: Output) -> Ran {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let json = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!("runbox printed no JSON ({e}): {stdout}\nstderr: {}", String::from_utf8_lossy(&output.stderr))
    });
    Ran {
        exit_code: output.status.code().unwrap_or(-1),
        json,
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// A request running `code` with `runtime` as its default entrypoint.
pub fn request(runtime: &str, entrypoint: &str, code: &str) -> Value {
    json!({"runtime": runtime, "files": [{"path": entrypoint, "content": code}]})
}

pub fn sh(code: &str) -> Value {
    request("sh", "main.sh", code)
}

pub fn python(code: &str) -> Value {
    request("python", "main.py", code)
}

/// Sets `limits.<name>` on a request.
pub fn with_limit(mut request: Value, name: &str, value: u64) -> Value {
    request["limits"][name] = json!(value);
    request
}

pub fn stdout_text(result: &RunResult) -> &str {
    result.stdout.text.as_deref().unwrap_or("")
}

pub fn stderr_text(result: &RunResult) -> &str {
    result.stderr.text.as_deref().unwrap_or("")
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// Asserts a verdict and shows the whole result when it differs.
#[track_caller]
pub fn assert_verdict(ran: &Ran, verdict: Verdict) -> RunResult {
    let result = ran.result();
    assert_eq!(
        result.verdict,
        verdict,
        "result: {}\nstderr: {}",
        serde_json::to_string_pretty(&ran.json).unwrap_or_default(),
        ran.stderr
    );
    result
}

/// Standard base64 with padding, for `"encoding": "base64"` files and `stdin_base64`.
/// (The tests crate has no base64 dependency; this is all the tests need.)
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A `runbox run --json --request -` that is still running: for tests that look at the host
/// while the sandbox is alive, or that start runbox with a special environment or descriptors.
/// Dropping it without [`Running::wait`] kills runbox.
pub struct Running {
    child: Option<std::process::Child>,
}

impl Runbox {
    /// Starts `runbox run --json --request -` and writes `request` to its stdin, then closes it.
    /// `configure` may change the command first (environment, `pre_exec`).
    pub fn spawn_run(&self, request: &Value, configure: impl FnOnce(&mut Command)) -> Running {
        let mut cmd = self.json_run_command();
        configure(&mut cmd);
        let mut child = cmd.spawn().expect("spawn runbox");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(&serde_json::to_vec(request).expect("json"))
            .expect("write request");
        Running { child: Some(child) }
    }
}

impl Running {
    /// The runbox process's pid on the host.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Waits for runbox to end and parses what it printed.
    pub fn wait(mut self) -> Ran {
        parse(self.child.take().expect("running").wait_with_output().expect("wait runbox"))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A Python virtual environment with `requirements` (pinned) installed, made once and kept
/// outside the clone (under /var/cache/runbox) so later runs reuse it. Returns its python.
pub fn python_venv(name: &str, requirements: &[&str]) -> PathBuf {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let dir = PathBuf::from("/var/cache/runbox").join(format!("py-{name}"));
    let python = dir.join("bin/python");
    let marker = dir.join("runbox-requirements.txt");
    let wanted = requirements.join("\n");
    if std::fs::read_to_string(&marker).ok().as_deref() == Some(wanted.as_str()) && python.exists() {
        return python;
    }
    let status = Command::new("python3").args(["-m", "venv"]).arg(&dir).status().expect("run python3 -m venv");
    assert!(status.success(), "python3 -m venv {} failed", dir.display());
    let status = Command::new(&python)
        .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check"])
        .args(requirements)
        .status()
        .expect("run pip");
    assert!(status.success(), "pip install {requirements:?} failed");
    std::fs::write(&marker, wanted).expect("write the venv marker");
    python
}
