//! Every verdict, reached by a real program in a real sandbox. Each test checks the verdict,
//! the CLI's exit code, how the program ended (exit code or signal), the limits that
//! triggered, that output written before the end is kept, and that nothing is left behind.
//!
//! Limits are small so the file stays fast; timings are only ever checked loosely, because
//! the machine is shared.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use runbox_tests::*;
use serde_json::{Value, json};

mod deadlines;
mod disk;
mod exits;
mod output;
mod resources;

const MIB: u64 = 1 << 20;

// ---------------------------------------------------------------------------------------------
// Helpers local to this file.

/// Asserts how the program ended: its exit code, or the signal that killed it.
#[track_caller]
fn assert_ended(result: &RunResult, exit_code: Option<i32>, signal: Option<i32>) {
    assert_eq!((result.exit_code, result.signal), (exit_code, signal), "exit_code/signal of {result:#?}");
}

#[track_caller]
fn assert_hit(result: &RunResult, kind: LimitKind) {
    assert!(result.limits_hit.contains(&kind), "{kind:?} not in limits_hit {:?}", result.limits_hit);
}

#[track_caller]
fn assert_not_hit(result: &RunResult, kind: LimitKind) {
    assert!(!result.limits_hit.contains(&kind), "{kind:?} unexpectedly in limits_hit {:?}", result.limits_hit);
}

#[track_caller]
fn assert_clean(rb: &Runbox) {
    assert!(rb.leftover_runs().is_empty(), "left behind under the state dir: {:?}", rb.leftover_runs());
}

fn c(code: &str) -> Value {
    request("c", "main.c", code)
}

fn bash(code: &str) -> Value {
    request("bash", "main.bash", code)
}

/// Waits until `found` returns something, or panics after `timeout`.
fn wait_for<T>(what: &str, timeout: Duration, mut found: impl FnMut() -> Option<T>) -> T {
    let begun = Instant::now();
    loop {
        if let Some(value) = found() {
            return value;
        }
        assert!(begun.elapsed() < timeout, "gave up waiting for {what} after {timeout:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The one run directory under `<state>/runs`, once it exists.
fn run_dir(rb: &Runbox) -> Option<PathBuf> {
    let entries = rb.leftover_runs();
    (entries.len() == 1).then(|| rb.state_dir().join("runs").join(&entries[0]))
}

/// Host processes running as `uid` (the sandbox's host uid is `1_000_000_000 + runbox pid`).
fn processes_of_uid(uid: u32) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("read /proc").flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(status) = std::fs::read_to_string(entry.path().join("status")) else {
            continue;
        };
        let real_uid = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|ids| ids.split_whitespace().next())
            .and_then(|id| id.parse::<u32>().ok());
        if real_uid == Some(uid) {
            found.push(format!("{name}: {}", status.lines().next().unwrap_or("")));
        }
    }
    found
}

/// The sandbox's host uid for a run started by the runbox process `pid` (RunnerConfig's
/// default `host_id_base` plus the supervisor's pid).
fn sandbox_uid(runbox_pid: u32) -> u32 {
    1_000_000_000 + runbox_pid
}

/// (total bytes, available bytes) of the filesystem holding `path`.
fn space(path: &Path) -> (u64, u64) {
    let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("no NUL in path");
    // SAFETY: statvfs is plain old data, for which all-zero bytes are a valid value.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: c_path is a NUL-terminated string and st a writable statvfs, both alive for the call.
    let rc = unsafe { libc::statvfs(c_path.as_ptr(), &mut st) };
    assert_eq!(rc, 0, "statvfs {}: {}", path.display(), std::io::Error::last_os_error());
    (st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize)
}

/// The CLI exit code of each verdict, as documented.
fn exit_code_for(verdict: Verdict) -> i32 {
    match verdict {
        Verdict::Ok => 0,
        Verdict::NonzeroExit => 10,
        Verdict::Signaled => 11,
        Verdict::WallTimeout => 12,
        Verdict::CpuTimeout => 13,
        Verdict::MemoryLimit => 14,
        Verdict::OutputLimit => 15,
        Verdict::DiskLimit => 16,
        Verdict::Cancelled => 17,
        Verdict::SandboxError => 20,
    }
}
