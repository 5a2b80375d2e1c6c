//! Escape and containment tests. Probe programs (tests/probes/) run inside the sandbox and
//! report, as JSON or one line per attempt, what they could and could not do; each test checks
//! that report and, where the promise is about the host, the host's own state.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::ErrorKind;
use std::net::{TcpListener, UdpSocket};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{SocketAddr, UnixListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{RwLock, RwLockReadGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use runbox_tests::*;
use serde_json::{Value, json};

mod files;
mod network;
mod privileges;
mod processes;
mod syscalls;

/// Sandboxed code runs as host uid `HOST_ID_BASE + pid of runbox` (RunnerConfig's default).
const HOST_ID_BASE: u32 = 1_000_000_000;

/// Held for writing by the one test that loosens fs.suid_dumpable, and for reading by the
/// tests that expect /proc/1 to be closed to the program, so `--include-ignored` cannot mix them.
static HOST_SYSCTLS: RwLock<()> = RwLock::new(());

fn sysctls_unchanged() -> RwLockReadGuard<'static, ()> {
    HOST_SYSCTLS.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A string of digits no other test run uses (it also serves as a `sleep` fraction).
fn nonce() -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").subsec_nanos();
    format!("{}{nanos:09}{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed))
}

fn probe_source(name: &str) -> &'static str {
    match name {
        "host_files.py" => include_str!("../../probes/host_files.py"),
        "filesystem.py" => include_str!("../../probes/filesystem.py"),
        "processes.py" => include_str!("../../probes/processes.py"),
        "network.py" => include_str!("../../probes/network.py"),
        "credentials.py" => include_str!("../../probes/credentials.py"),
        "fds.py" => include_str!("../../probes/fds.py"),
        "environment.py" => include_str!("../../probes/environment.py"),
        "syscalls.c" => include_str!("../../probes/syscalls.c"),
        other => panic!("no probe {other}"),
    }
}

/// A python request running probe `name` with `args`.
fn python_probe(name: &str, args: &[&str]) -> Value {
    let mut request = python(probe_source(name));
    request["args"] = json!(args);
    request
}

/// The JSON a probe printed, from a run that must have ended `ok`.
#[track_caller]
fn probe_report(ran: &Ran) -> Value {
    let result = assert_verdict(ran, Verdict::Ok);
    let text = stdout_text(&result);
    serde_json::from_str(text)
        .unwrap_or_else(|e| panic!("probe printed no JSON ({e}): {text}\nstderr: {}", stderr_text(&result)))
}

/// Waits until the program has created /workspace/started; returns the run id.
fn wait_started(rb: &Runbox) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(id) = rb.leftover_runs().into_iter().find(|id| workspace_on_host(rb, id).join("started").exists()) {
            return id;
        }
        assert!(
            Instant::now() < deadline,
            "the program never created /workspace/started; runs: {:?}",
            rb.leftover_runs()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The run's /workspace as the host sees it (root may write there).
fn workspace_on_host(rb: &Runbox, run_id: &str) -> PathBuf {
    rb.state_dir().join("runs").join(run_id).join("fs/workspace")
}

/// Lets a held program go on (it waits for /workspace/stop).
fn release(rb: &Runbox, run_id: &str) {
    fs::write(workspace_on_host(rb, run_id).join("stop"), "").expect("create stop file");
}

/// Shell that creates /workspace/started, then waits (20 s at most) for /workspace/stop.
const HOLD_SH: &str = "touch /workspace/started\ni=0\nwhile [ ! -e /workspace/stop ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done\n";

#[derive(Debug, Clone)]
struct HostProcess {
    pid: u32,
    ppid: u32,
    uid: u32,
    name: String,
    cmdline: String,
}

/// Every process on the host, from /proc (processes that end while it reads are skipped).
fn host_processes() -> Vec<HostProcess> {
    let mut all = Vec::new();
    for entry in fs::read_dir("/proc").expect("read /proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(status) = fs::read_to_string(entry.path().join("status")) else {
            continue;
        };
        let field = |key: &str| {
            status.lines().find_map(|l| l.strip_prefix(key)).map(|v| v.trim().to_string()).unwrap_or_default()
        };
        let first = |v: String| v.split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or(u32::MAX);
        let cmdline = fs::read(entry.path().join("cmdline"))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
            .unwrap_or_default();
        all.push(HostProcess {
            pid,
            ppid: first(field("PPid:")),
            uid: first(field("Uid:")),
            name: field("Name:"),
            cmdline,
        });
    }
    all
}

/// Where a run group may live: cgroup v1 hierarchies, then v2.
const CGROUP_PARENTS: [&str; 5] = [
    "/sys/fs/cgroup/memory/runbox",
    "/sys/fs/cgroup/pids/runbox",
    "/sys/fs/cgroup/cpuacct/runbox",
    "/sys/fs/cgroup/cpu/runbox",
    "/sys/fs/cgroup/runbox",
];

/// The directories of run group `name` that exist now, in any hierarchy.
fn cgroup_dirs(name: &str) -> Vec<PathBuf> {
    CGROUP_PARENTS.iter().map(|p| Path::new(p).join(name)).filter(|d| d.is_dir()).collect()
}

/// Waits (2 s at most) until `count` processes named `name` whose command line holds `marker`
/// run as `uid` on the host; returns them.
fn wait_for_processes(marker: &str, name: &str, uid: u32, count: usize) -> Vec<HostProcess> {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let found: Vec<HostProcess> = host_processes()
            .into_iter()
            .filter(|p| p.cmdline.contains(marker) && p.name == name && p.uid == uid)
            .collect();
        if found.len() >= count || Instant::now() > deadline {
            return found;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The processes of a run and of its cgroups must be gone once runbox has returned.
#[track_caller]
fn assert_run_left_nothing(rb: &Runbox, run_id: &str, host_uid: u32, marker: &str) {
    let left: Vec<HostProcess> =
        host_processes().into_iter().filter(|p| p.uid == host_uid || p.cmdline.contains(marker)).collect();
    assert!(left.is_empty(), "processes of run {run_id} outlived it: {left:?}");
    for group in [run_id.to_string(), format!("{run_id}-build")] {
        assert!(cgroup_dirs(&group).is_empty(), "cgroup {group} outlived the run: {:?}", cgroup_dirs(&group));
    }
    assert!(rb.leftover_runs().is_empty(), "{:?}", rb.leftover_runs());
}

fn errno_of(report: &Value) -> &str {
    report.as_str().unwrap_or_else(|| panic!("not an outcome: {report}"))
}

/// A host file with unique content, removed again when dropped.
struct Canary {
    path: PathBuf,
    content: String,
}

impl Canary {
    fn new(path: PathBuf, content: String) -> Canary {
        fs::write(&path, &content).expect("write canary");
        Canary { path, content }
    }
}

impl Drop for Canary {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

fn listing(dir: &Path) -> BTreeSet<String> {
    fs::read_dir(dir).expect("list dir").map(|e| e.expect("entry").file_name().to_string_lossy().into_owned()).collect()
}
