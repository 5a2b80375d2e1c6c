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
        "host_files.py" => include_str!("../probes/host_files.py"),
        "filesystem.py" => include_str!("../probes/filesystem.py"),
        "processes.py" => include_str!("../probes/processes.py"),
        "network.py" => include_str!("../probes/network.py"),
        "credentials.py" => include_str!("../probes/credentials.py"),
        "fds.py" => include_str!("../probes/fds.py"),
        "environment.py" => include_str!("../probes/environment.py"),
        "syscalls.c" => include_str!("../probes/syscalls.c"),
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

// ---------------------------------------------------------------------------------------------
// Files

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

#[test]
fn host_files_are_out_of_reach() {
    let _sysctls = sysctls_unchanged();
    let id = nonce();
    let dir = tempfile::Builder::new().prefix("runbox-canary-").tempdir_in("/tmp").expect("tempdir");
    let marker = format!("runbox-canary-{id}");
    let in_tmp = Canary::new(dir.path().join("canary.txt"), format!("{marker} in /tmp\n"));
    let in_root = Canary::new(PathBuf::from(format!("/root/runbox-canary-{id}.txt")), format!("{marker} in /root\n"));
    let canaries = [&in_tmp, &in_root];
    let tmp_before = listing(dir.path());
    let control = format!("runbox-control-{id}");

    let paths: Vec<String> = canaries.iter().map(|c| c.path.display().to_string()).collect();
    let mut args = vec![marker.as_str(), control.as_str()];
    args.extend(paths.iter().map(String::as_str));
    let mut request = python_probe("host_files.py", &args);
    request["files"].as_array_mut().expect("files").push(json!({"path": "control.txt", "content": control}));
    let rb = Runbox::new();
    let ran = rb.run(&request);
    let report = probe_report(&ran);

    for path in &paths {
        let tries = &report["paths"][path];
        for how in ["read", "read_proc_self_root", "read_dotdot", "list_parent", "append", "create_beside"] {
            assert_eq!(errno_of(&tries[how]), "ENOENT", "{how} {path}: {tries}");
        }
        // pid 1 is not dumpable, so even its root link is closed to the program.
        assert_eq!(errno_of(&tries["read_proc1_root"]), "EACCES", "{path}: {tries}");
        // Under /tmp the program may make the directory in its own /tmp and write there;
        // /root cannot be made in the read-only root. Either way the host must not see it.
        let made = errno_of(&tries["mkdir_parent"]);
        assert!(["ok", "EROFS", "EACCES"].contains(&made), "{path}: {tries}");
    }
    assert_eq!(errno_of(&report["proc1_root"]), "EACCES", "{report}");
    assert_eq!(
        report["control_found_in"],
        json!(["/workspace/control.txt"]),
        "the marker search found no control: {report}"
    );
    assert_eq!(report["marker_found_in"], json!([]), "host canary content visible inside: {report}");

    // Host side: the canaries are intact, nothing appeared beside them.
    for canary in canaries {
        assert_eq!(fs::read_to_string(&canary.path).expect("canary still there"), canary.content);
    }
    assert_eq!(listing(dir.path()), tmp_before);
    assert!(!Path::new("/root/sandbox-was-here").exists());
    // runbox's artifact walk on the host must not have followed the planted symlinks.
    let result = ran.result();
    let canary_hashes: Vec<String> = canaries.iter().map(|c| sha256_hex(c.content.as_bytes())).collect();
    for artifact in &result.artifacts {
        assert!(
            !canary_hashes.contains(&artifact.sha256) && !artifact.path.starts_with("link-"),
            "artifact reached a host file: {artifact:?}"
        );
    }
    let skipped: BTreeMap<&str, &str> =
        result.artifacts_skipped.iter().map(|s| (s.path.as_str(), s.reason.as_str())).collect();
    for i in 0..canaries.len() {
        for link in [format!("link-abs-{i}"), format!("link-rel-{i}"), format!("link-dir-{i}")] {
            assert_eq!(skipped.get(link.as_str()), Some(&"symlink"), "{:?}", result.artifacts_skipped);
        }
    }
}

#[test]
fn root_is_read_only_and_dev_holds_only_the_listed_nodes() {
    let name = format!("runbox-escape-{}", nonce());
    let passwd_before = fs::read("/etc/passwd").expect("host passwd");
    let rb = Runbox::new();
    let report = probe_report(&rb.run(&python_probe("filesystem.py", &[&name])));

    for (path, got) in report["create"].as_object().expect("create") {
        let writable = ["/workspace/", "/tmp/", "/dev/shm/"].iter().any(|d| path.starts_with(d));
        match (writable, errno_of(got)) {
            (true, got) => assert_eq!(got, "ok", "the run's own {path} must be writable"),
            (false, "EROFS" | "EACCES") => {}
            (false, "ENOENT") if path.starts_with("/proc/") => {}
            (false, got) => panic!("create {path}: {got}"),
        }
    }
    for (what, results) in [
        ("mkdir", &report["mkdir"]),
        ("write", &report["write"]),
        ("chmod", &report["chmod"]),
        ("rename", &report["rename"]),
        ("unlink", &report["unlink"]),
        ("open", &report["open"]),
    ] {
        for (path, got) in results.as_object().expect(what) {
            assert!(["EROFS", "EACCES", "EPERM", "ENOENT"].contains(&errno_of(got)), "{what} {path}: {got}");
        }
    }
    assert!(["EROFS", "EACCES"].contains(&errno_of(&report["write"]["/etc/passwd"])), "{report}");
    for (path, got) in report["stat"].as_object().expect("stat") {
        assert_eq!(errno_of(got), "ENOENT", "{path} exists in the sandbox: {got}");
    }
    let read_only = json!({"read_only": true, "nosuid": true, "nodev": true});
    let writable = json!({"read_only": false, "nosuid": true, "nodev": true});
    for (path, want) in [
        ("/", &read_only),
        ("/usr", &read_only),
        ("/etc/passwd", &read_only),
        ("/workspace", &writable),
        ("/tmp", &writable),
        ("/dev/shm", &writable),
        ("/proc", &writable),
    ] {
        assert_eq!(&report["flags"][path], want, "mount flags of {path}");
    }
    assert_eq!(
        report["dev"],
        json!({
            "fd": "link:/proc/self/fd", "full": "char:1:7", "null": "char:1:3", "random": "char:1:8",
            "shm": "dir", "stderr": "link:/proc/self/fd/2", "stdin": "link:/proc/self/fd/0",
            "stdout": "link:/proc/self/fd/1", "urandom": "char:1:9", "zero": "char:1:5"
        }),
        "/dev"
    );
    let passwd = report["passwd"].as_str().expect("passwd");
    assert!(passwd.starts_with("runbox:x:1000:1000:") && !passwd.contains("root:"), "{passwd}");

    for path in [
        format!("/usr/{name}"),
        format!("/{name}"),
        format!("/etc/{name}"),
        format!("/usr/lib/{name}"),
        format!("/{name}-dir"),
    ] {
        assert!(!Path::new(&path).exists(), "{path} appeared on the host");
    }
    assert_eq!(fs::read("/etc/passwd").expect("host passwd"), passwd_before);
}

// ---------------------------------------------------------------------------------------------
// Processes

#[test]
fn host_processes_are_invisible() {
    let me = std::process::id();
    let rb = Runbox::new();
    let report = probe_report(&rb.run(&python_probe("processes.py", &[&me.to_string()])));

    assert_eq!(report["pids"], json!([1, 2]), "the sandbox sees other processes: {report}");
    assert_eq!(report["self"], 2, "the program is pid 2: {report}");
    assert_eq!(report["parent"], 1, "{report}");
    let init = &report["processes"]["1"];
    assert_eq!(init["name"], "runbox", "pid 1 is runbox's init, not the program: {report}");
    assert_eq!(report["processes"]["2"]["name"], "python3", "{report}");
    let ps_pids: Vec<u64> = report["ps"]
        .as_array()
        .expect("ps")
        .iter()
        .map(|row| row[0].as_str().expect("pid").parse().expect("number"))
        .collect();
    assert!(!ps_pids.is_empty() && ps_pids.iter().all(|&pid| pid <= 3), "ps sees more than the sandbox: {report}");
    assert_eq!(report["host_pid_exists"], false, "host pid {me} visible: {report}");
    assert_eq!(report["kill_host_pid"], "ESRCH", "{report}");
}

#[test]
fn the_program_cannot_kill_its_init() {
    let mut script = String::new();
    for signal in ["SEGV", "BUS", "ABRT", "TERM", "INT", "HUP", "USR1", "PIPE", "KILL", "STOP"] {
        script.push_str(&format!("kill -{signal} 1\n"));
    }
    script.push_str("sleep 0.2\ngrep State /proc/1/status\necho alive\n");
    let rb = Runbox::new();
    let ran = rb.run(&sh(&script));
    let result = assert_verdict(&ran, Verdict::Ok);
    let out = stdout_text(&result);
    assert!(out.ends_with("alive\n") && !out.contains("(stopped)") && !out.contains("zombie"), "{out}");
    assert!(result.error.is_none(), "{:?}", result.error);
}

// ---------------------------------------------------------------------------------------------
// Network

/// The host's own non-loopback IPv4 address (a UDP connect sends nothing), if it has one.
fn host_ip() -> Option<String> {
    let socket = UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("10.255.255.1:9").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then(|| ip.to_string())
}

#[test]
fn network_reaches_nothing_outside_the_sandbox() {
    let id = nonce();
    let tcp = TcpListener::bind("0.0.0.0:0").expect("bind tcp");
    let port = tcp.local_addr().expect("addr").port();
    let ip = host_ip().unwrap_or_else(|| "192.0.2.1".to_string());
    // Control: from the host the listener is reachable at that address.
    if ip != "192.0.2.1" {
        drop(std::net::TcpStream::connect((ip.as_str(), port)).expect("host reaches its own listener"));
        drop(tcp.accept().expect("accept the control connection"));
    }
    tcp.set_nonblocking(true).expect("nonblocking");
    let abstract_name = format!("runbox-containment-{id}");
    let abstract_listener =
        UnixListener::bind_addr(&SocketAddr::from_abstract_name(abstract_name.as_bytes()).expect("abstract"))
            .expect("bind abstract");
    abstract_listener.set_nonblocking(true).expect("nonblocking");
    let dir = tempfile::Builder::new().prefix("runbox-net-").tempdir_in("/tmp").expect("tempdir");
    let unix_path = dir.path().join("sock");
    let unix_listener = UnixListener::bind(&unix_path).expect("bind unix");
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).expect("chmod");
    fs::set_permissions(&unix_path, fs::Permissions::from_mode(0o777)).expect("chmod");
    unix_listener.set_nonblocking(true).expect("nonblocking");

    let rb = Runbox::new();
    let port_arg = port.to_string();
    let report = probe_report(
        &rb.run(&python_probe("network.py", &[&port_arg, &ip, &abstract_name, &unix_path.display().to_string()])),
    );

    let result = |name: &str| report[name]["result"].as_str().unwrap_or_else(|| panic!("{name}: {report}")).to_string();
    // Its own loopback answers: nobody listens on that port there.
    assert_eq!(result("tcp_loopback"), "ECONNREFUSED", "{report}");
    assert_eq!(result("tcp_loopback6"), "ECONNREFUSED", "{report}");
    // No interface but lo, so no route anywhere else; it fails at once, nothing is sent.
    for name in ["tcp_host_ip", "tcp_unrouted", "udp_public"] {
        assert_eq!(result(name), "ENETUNREACH", "{name}: {report}");
        assert!(report[name]["ms"].as_u64().expect("ms") < 500, "{name} took long: {report}");
    }
    // Abstract unix sockets belong to the network namespace; the path is not in the root.
    assert_eq!(result("unix_abstract"), "ECONNREFUSED", "{report}");
    assert_eq!(result("unix_path"), "ENOENT", "{report}");
    // The sandbox could bind the port the host holds and talk to itself over it.
    assert_eq!(report["own_loopback"], "ping", "{report}");
    assert_eq!(report["interfaces"], json!(["lo"]), "{report}");
    assert_eq!(report["proc_net_dev"], json!(["lo"]), "{report}");
    assert_eq!(report["ipv4_routes"], 0, "{report}");

    // Host side: no listener got anything.
    assert_eq!(tcp.accept().map(|(_, peer)| peer.to_string()).map_err(|e| e.kind()), Err(ErrorKind::WouldBlock));
    assert_eq!(abstract_listener.accept().map(|_| ()).map_err(|e| e.kind()), Err(ErrorKind::WouldBlock));
    assert_eq!(unix_listener.accept().map(|_| ()).map_err(|e| e.kind()), Err(ErrorKind::WouldBlock));
}

// ---------------------------------------------------------------------------------------------
// Syscalls

/// Each probe line of syscalls.c, with the syscall the policy must deny (None: must work).
const SYSCALL_ATTEMPTS: &[(&str, Option<&str>)] = &[
    ("fork", None),
    ("pthread_create", None),
    ("workspace_file", None),
    ("ptrace_traceme", Some("ptrace")),
    ("ptrace_attach", Some("ptrace")),
    ("process_vm_readv", Some("process_vm_readv")),
    ("process_vm_writev", Some("process_vm_writev")),
    ("kcmp", Some("kcmp")),
    ("pidfd_getfd", Some("pidfd_getfd")),
    ("mount", Some("mount")),
    ("umount2", Some("umount2")),
    ("pivot_root", Some("pivot_root")),
    ("chroot", Some("chroot")),
    ("fsopen", Some("fsopen")),
    ("open_tree", Some("open_tree")),
    ("open_tree_attr", Some("open_tree_attr")),
    ("unshare_newuser", Some("unshare")),
    ("unshare_newns", Some("unshare")),
    ("setns", Some("setns")),
    ("clone_newuser", Some("clone")),
    ("clone_newnet", Some("clone")),
    ("clone3", Some("clone3")),
    ("keyctl", Some("keyctl")),
    ("add_key", Some("add_key")),
    ("request_key", Some("request_key")),
    ("bpf", Some("bpf")),
    ("perf_event_open", Some("perf_event_open")),
    ("userfaultfd", Some("userfaultfd")),
    ("io_uring_setup", Some("io_uring_setup")),
    ("io_uring_enter", Some("io_uring_enter")),
    ("name_to_handle_at", Some("name_to_handle_at")),
    ("open_by_handle_at", Some("open_by_handle_at")),
    ("personality", Some("personality")),
    ("reboot", Some("reboot")),
    ("swapon", Some("swapon")),
    ("settimeofday", Some("settimeofday")),
    ("clock_settime", Some("clock_settime")),
    ("kexec_load", Some("kexec_load")),
    ("init_module", Some("init_module")),
    ("sethostname", Some("sethostname")),
    ("ioctl_tiocsti", Some("ioctl")),
    ("ioctl_tiocsti_high_bits", Some("ioctl")),
    ("ioctl_tioclinux", Some("ioctl")),
];

/// What the policy (crates/linux/policy/seccomp.json) says a denied syscall fails with,
/// by the errno of the section that lists it.
fn policy_outcomes() -> BTreeMap<String, String> {
    let policy: Value =
        serde_json::from_str(include_str!("../../crates/linux/policy/seccomp.json")).expect("policy json");
    let mut outcomes = BTreeMap::new();
    for (section, body) in policy.as_object().expect("sections") {
        if section.split_once('@').is_some_and(|(_, arch)| arch != std::env::consts::ARCH) {
            continue;
        }
        let errno = match body["match_action"]["errno"].as_i64() {
            Some(1) => "EPERM",
            Some(38) => "ENOSYS",
            other => panic!("section {section}: unexpected action {other:?}"),
        };
        for rule in body["filter"].as_array().expect("filter") {
            outcomes.insert(rule["syscall"].as_str().expect("syscall").to_string(), errno.to_string());
        }
    }
    outcomes
}

#[test]
fn denied_syscalls_fail_as_the_policy_says() {
    let rb = Runbox::new();
    let ran = rb.run(&request("c", "main.c", probe_source("syscalls.c")));
    let result = assert_verdict(&ran, Verdict::Ok);
    assert_eq!(result.step, "run");
    let out = stdout_text(&result);
    let lines: BTreeMap<&str, &str> = out.lines().filter_map(|l| l.split_once(' ')).collect();
    assert_eq!(lines.get("pid"), Some(&"2"), "{out}");
    assert!(out.ends_with("done\n"), "the probe did not finish: {out}\nstderr: {}", stderr_text(&result));

    let policy = policy_outcomes();
    let mut wrong = Vec::new();
    for &(attempt, syscall) in SYSCALL_ATTEMPTS {
        let want = match syscall {
            None => "ok",
            Some(name) => policy.get(name).unwrap_or_else(|| panic!("the policy has no rule for {name}")).as_str(),
        };
        let got = lines.get(attempt).copied().unwrap_or("<missing>");
        if got != want {
            wrong.push(format!("{attempt}: got {got}, policy says {want}"));
        }
    }
    // seccomp.rs `abi_prefix`: a foreign ABI kills the whole process (SECCOMP_RET_KILL_PROCESS).
    for attempt in ["x32_getpid", "i386_getpid"] {
        if lines.get(attempt) != Some(&"killed:SIGSYS") {
            wrong.push(format!("{attempt}: got {:?}, want killed:SIGSYS", lines.get(attempt)));
        }
    }
    assert!(wrong.is_empty(), "{}\nprobe output:\n{out}", wrong.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// Credentials

#[test]
fn the_program_has_no_privileges_and_setuid_binaries_grant_none() {
    for binary in ["/usr/bin/su", "/usr/bin/passwd", "/usr/bin/mount"] {
        let meta = fs::metadata(binary).unwrap_or_else(|e| panic!("{binary}: {e}"));
        assert!(meta.uid() == 0 && meta.mode() & 0o4000 != 0, "{binary} is not setuid root on this host");
    }
    let rb = Runbox::new();
    let running = rb.spawn_run(&python_probe("credentials.py", &[]), |_| {});
    let host_id = (HOST_ID_BASE + running.pid()).to_string();
    let report = probe_report(&running.wait());

    let status = &report["status"];
    for cap in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert_eq!(status[cap], "0000000000000000", "{cap}: {report}");
    }
    assert_eq!(status["NoNewPrivs"], "1", "{report}");
    assert_eq!(status["Seccomp"], "2", "{report}");
    assert_eq!(status["Uid"], "1000\t1000\t1000\t1000", "{report}");
    assert_eq!(status["Gid"], "1000\t1000\t1000\t1000", "{report}");
    assert_eq!(status["Groups"].as_str().map(str::trim), Some(""), "{report}");
    assert_eq!(report["groups"], json!([]), "{report}");
    assert_eq!(report["id"], "uid=1000(runbox) gid=1000(runbox) groups=1000(runbox)", "{report}");
    // One id mapped, to an unprivileged host id; uid 0 of the namespace maps to nothing.
    assert_eq!(report["uid_map"], json!(["1000", host_id, "1"]), "{report}");
    assert_eq!(report["gid_map"], json!(["1000", host_id, "1"]), "{report}");
    for call in ["setuid0", "setgid0", "seteuid0", "setresuid0", "setgroups0", "setuid65534"] {
        assert!(["EINVAL", "EPERM"].contains(&errno_of(&report[call])), "{call}: {report}");
    }
    for binary in ["su", "passwd", "mount"] {
        let ran = &report[binary];
        assert_eq!(ran["setuid_bit"], true, "{binary} should look setuid inside too: {report}");
        assert_eq!(ran["name"], binary, "{report}");
        assert_eq!(ran["uid"], json!(["1000", "1000", "1000", "1000"]), "{binary} ran with other ids: {report}");
        assert_eq!(ran["gid"], json!(["1000", "1000", "1000", "1000"]), "{binary} ran with other ids: {report}");
        assert_ne!(ran["exit"], 0, "{report}");
        assert!(!ran["output"].as_str().unwrap_or("").contains("uid=0"), "{report}");
    }
}

// ---------------------------------------------------------------------------------------------
// Descriptors and environment

/// Starts runbox with `file` open as fd 7 and the host's `/` open as fd 8, neither
/// close-on-exec: descriptors a careless caller might leak into runbox.
fn inherit_host_fds(cmd: &mut std::process::Command, file: &Path) {
    let file = fs::File::open(file).expect("open file");
    let root = fs::File::open("/").expect("open /");
    let (file_fd, root_fd) = (std::os::fd::AsRawFd::as_raw_fd(&file), std::os::fd::AsRawFd::as_raw_fd(&root));
    // SAFETY: the closure runs in the forked child before exec and only calls dup2, which is
    // async-signal-safe; `file` and `root` move into it, so both descriptors stay open until
    // the fork, and dup2 gives the child copies without close-on-exec.
    unsafe {
        cmd.pre_exec(move || {
            let _keep = (&file, &root);
            for (from, to) in [(file_fd, 7), (root_fd, 8)] {
                if libc::dup2(from, to) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
}

#[test]
fn inherited_host_descriptors_do_not_reach_the_program() {
    let _sysctls = sysctls_unchanged();
    let dir = tempfile::Builder::new().prefix("runbox-fd-").tempdir_in("/tmp").expect("tempdir");
    let canary = Canary::new(dir.path().join("inherited.txt"), format!("runbox-inherited-{}\n", nonce()));
    let rb = Runbox::new();
    let running =
        rb.spawn_run(&python_probe("fds.py", &["--hold", "7", "8"]), |cmd| inherit_host_fds(cmd, &canary.path));
    let run_id = wait_started(&rb);
    // Control: runbox really got both descriptors.
    let fd_target = |fd: u32| fs::read_link(format!("/proc/{}/fd/{fd}", running.pid())).ok();
    assert_eq!(fd_target(7).as_deref(), Some(canary.path.as_path()));
    assert_eq!(fd_target(8).as_deref(), Some(Path::new("/")));
    release(&rb, &run_id);
    let ran = running.wait();
    let report = probe_report(&ran);

    assert_eq!(report["listed"], json!([0, 1, 2, 3]), "fd 3 is the listing's own: {report}");
    for (fd, target) in report["fds"].as_object().expect("fds") {
        assert!(target.as_str().is_some_and(|t| t.starts_with("pipe:")), "fd {fd} is {target}: {report}");
    }
    for fd in ["7", "8"] {
        let tries = &report["tries"][fd];
        assert_eq!(tries["fstat"], "EBADF", "fd {fd}: {report}");
        assert_eq!(tries["read"], "EBADF", "fd {fd}: {report}");
        assert_eq!(tries["proc_self"], "ENOENT", "fd {fd}: {report}");
        assert_eq!(tries["proc_init"], "EACCES", "fd {fd} through pid 1: {report}");
    }
    assert_eq!(report["proc_init_fds"], "EACCES", "{report}");
    assert!(!ran.json.to_string().contains(&canary.content.trim().to_string()), "the inherited file's content leaked");
}

#[test]
fn environment_holds_only_documented_variables() {
    let _sysctls = sysctls_unchanged();
    let secret = format!("host-secret-{}", nonce());
    let mut request = python_probe("environment.py", &[]);
    request["env"] = json!({"RUNBOX_REQUEST_VAR": "from-the-request"});
    request["secrets"] = json!({"RUNBOX_REQUEST_SECRET": format!("request-secret-{}", nonce())});
    let rb = Runbox::new();
    let ran = rb
        .spawn_run(&request, |cmd| {
            cmd.env("RUNBOX_TEST_HOST_SECRET", &secret)
                .env("PYTHONPATH", "/root/evil")
                .env("LD_PRELOAD", "/root/evil.so");
        })
        .wait();
    let report = probe_report(&ran);

    let environ = report["environ"].as_object().expect("environ");
    let keys: Vec<&str> = environ.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "HOME",
            "LANG",
            "LOGNAME",
            "PATH",
            "PYTHONIOENCODING",
            "PYTHONUNBUFFERED",
            "RUNBOX_REQUEST_SECRET",
            "RUNBOX_REQUEST_VAR",
            "TMPDIR",
            "USER"
        ],
        "{report}"
    );
    assert_eq!(report["count"], keys.len(), "duplicate variables: {report}");
    for (key, value) in [
        ("HOME", "/workspace"),
        ("LANG", "C.UTF-8"),
        ("LOGNAME", "runbox"),
        ("PATH", "/usr/local/bin:/usr/bin:/bin"),
        ("PYTHONIOENCODING", "utf-8"),
        ("PYTHONUNBUFFERED", "1"),
        ("RUNBOX_REQUEST_VAR", "from-the-request"),
        ("TMPDIR", "/tmp"),
        ("USER", "runbox"),
    ] {
        assert_eq!(environ[key], value, "{key}: {report}");
    }
    // The supervisor (pid 1 inside) holds runbox's host environment; it must stay closed.
    assert_eq!(report["init_environ"], "EACCES", "{report}");
    assert!(!ran.json.to_string().contains(&secret), "the host's variable reached the run: {}", ran.json);
}

// ---------------------------------------------------------------------------------------------
// Leftovers

#[test]
fn daemonized_processes_do_not_survive_the_run() {
    let marker = format!("300.{}", nonce());
    let script =
        format!("(setsid sleep {marker} &)\n(trap '' HUP TERM; exec sleep {marker}) &\n{HOLD_SH}echo started\n");
    let rb = Runbox::new();
    let running = rb.spawn_run(&sh(&script), |_| {});
    let host_uid = HOST_ID_BASE + running.pid();
    let run_id = wait_started(&rb);

    // Control: while the run lives, its sleeps are visible from the host, as its uid, in its
    // cgroup; so their absence afterwards means something.
    let sleeps = wait_for_processes(&marker, "sleep", host_uid, 2);
    assert_eq!(sleeps.len(), 2, "{sleeps:?}");
    for p in &sleeps {
        let cgroups = fs::read_to_string(format!("/proc/{}/cgroup", p.pid)).unwrap_or_default();
        assert!(cgroups.contains(&format!("/runbox/{run_id}")), "{p:?} is not in the run's cgroup: {cgroups}");
    }
    assert!(!cgroup_dirs(&run_id).is_empty(), "no cgroup named {run_id}");

    release(&rb, &run_id);
    let ran = running.wait();
    let result = assert_verdict(&ran, Verdict::Ok);
    assert_eq!(stdout_text(&result), "started\n");
    assert_eq!(result.run_id, run_id);
    assert_run_left_nothing(&rb, &run_id, host_uid, &marker);
}

#[test]
fn wall_timeout_kills_the_whole_process_tree() {
    let marker = format!("300.{}", nonce());
    // Four generations deep, in several sessions, ignoring the polite signals.
    let script = format!(
        "trap '' HUP TERM INT\n(setsid sh -c 'sleep {marker} & sh -c \"sleep {marker} & wait\" & wait' &)\n\
         sleep {marker} &\n(trap '' HUP TERM; exec sleep {marker}) &\ntouch /workspace/started\nwait\n"
    );
    let rb = Runbox::new();
    let running = rb.spawn_run(&with_limit(sh(&script), "wall_time_ms", 3000), |_| {});
    let host_uid = HOST_ID_BASE + running.pid();
    let run_id = wait_started(&rb);
    let sleeps = wait_for_processes(&marker, "sleep", host_uid, 4);
    assert_eq!(sleeps.len(), 4, "control: the tree's sleeps are visible from the host: {sleeps:?}");

    let ran = running.wait();
    let result = assert_verdict(&ran, Verdict::WallTimeout);
    assert_eq!(result.run_id, run_id);
    assert_run_left_nothing(&rb, &run_id, host_uid, &marker);
}

// ---------------------------------------------------------------------------------------------
// Hostname

#[test]
fn hostname_is_runbox_and_the_hosts_is_untouched() {
    let host_before = fs::read_to_string("/proc/sys/kernel/hostname").expect("host hostname");
    assert_ne!(host_before.trim(), "runbox", "the host is itself called runbox; this test cannot tell");
    let script = "hostname\ncat /proc/sys/kernel/hostname\nuname -n\ncat /etc/hostname\n\
                  hostname escaped 2>/dev/null; echo \"rc=$?\"\nhostname\n";
    let rb = Runbox::new();
    let result = assert_verdict(&rb.run(&sh(script)), Verdict::Ok);
    let lines: Vec<&str> = stdout_text(&result).lines().collect();
    assert_eq!(lines[..4], ["runbox"; 4], "{lines:?}");
    assert_ne!(lines[4], "rc=0", "sethostname succeeded: {lines:?}");
    assert_eq!(lines[5], "runbox", "{lines:?}");
    assert_eq!(fs::read_to_string("/proc/sys/kernel/hostname").expect("host hostname"), host_before);
}

// ---------------------------------------------------------------------------------------------
// init is a copy of the supervisor: it must hold nothing of the host.

/// pid 1 of the sandbox is a fork of the runbox supervisor that never execs, so it would keep
/// every descriptor the supervisor had (its stdio, anything its caller leaked into it, the
/// workspace directory, cgroup files) unless it closes them: it keeps only its channels.
#[test]
fn sandbox_init_keeps_no_host_descriptors() {
    let dir = tempfile::Builder::new().prefix("runbox-fd-").tempdir_in("/tmp").expect("tempdir");
    let canary = Canary::new(dir.path().join("inherited.txt"), format!("runbox-inherited-{}\n", nonce()));
    let rb = Runbox::new();
    let running = rb.spawn_run(&sh(HOLD_SH), |cmd| inherit_host_fds(cmd, &canary.path));
    let run_id = wait_started(&rb);
    let host_uid = HOST_ID_BASE + running.pid();
    let init = host_processes()
        .into_iter()
        .find(|p| p.ppid == running.pid() && p.uid == host_uid)
        .expect("the sandbox's init");
    let mut held = Vec::new();
    for entry in fs::read_dir(format!("/proc/{}/fd", init.pid)).expect("init fds").flatten() {
        let target = fs::read_link(entry.path()).unwrap_or_default();
        if target == canary.path || target == Path::new("/") {
            held.push(format!("fd {} -> {}", entry.file_name().to_string_lossy(), target.display()));
        }
    }
    release(&rb, &run_id);
    assert_verdict(&running.wait(), Verdict::Ok);
    assert!(held.is_empty(), "the sandbox's init (host pid {}) holds host descriptors: {held:?}", init.pid);
}

/// Restores a sysctl when dropped.
struct Sysctl {
    path: &'static str,
    old: String,
}

impl Drop for Sysctl {
    fn drop(&mut self) {
        let _ = fs::write(self.path, &self.old);
    }
}

/// With fs.suid_dumpable=1 (a documented admin/debug setting) the uid switch alone would leave
/// the sandbox's init dumpable, and the program, with the same uid, could read its environment
/// (runbox's host environment) and open its descriptors. init makes itself undumpable.
/// Changes a host-wide sysctl for the length of one run, under a lock that keeps the tests
/// that assume /proc/1 is closed from running meanwhile.
#[test]
fn init_stays_closed_when_the_host_allows_suid_dumps() {
    let dir = tempfile::Builder::new().prefix("runbox-fd-").tempdir_in("/tmp").expect("tempdir");
    let canary = Canary::new(dir.path().join("inherited.txt"), format!("runbox-inherited-{}\n", nonce()));
    let secret = format!("host-secret-{}", nonce());
    let _exclusive = HOST_SYSCTLS.write().unwrap_or_else(|poisoned| poisoned.into_inner());
    let path = "/proc/sys/fs/suid_dumpable";
    let restore = Sysctl { path, old: fs::read_to_string(path).expect("read sysctl") };
    fs::write(path, "1").expect("set fs.suid_dumpable=1");
    let script = "for f in /proc/1/environ /proc/1/fd/7 /proc/1/fd/8/etc/hostname; do \
                  if head -c 4096 $f >/dev/null 2>&1; then echo \"$f readable\"; fi; done\n\
                  (tr '\\0' '\\n' </proc/1/environ | grep RUNBOX_TEST_HOST_SECRET) 2>/dev/null\ncat /proc/1/fd/7 2>/dev/null\nexit 0\n";
    let rb = Runbox::new();
    let ran = rb.spawn_run(&sh(script), |cmd| {
        cmd.env("RUNBOX_TEST_HOST_SECRET", &secret);
        inherit_host_fds(cmd, &canary.path);
    });
    let ran = ran.wait();
    drop(restore);
    let result = assert_verdict(&ran, Verdict::Ok);
    assert_eq!(stdout_text(&result), "", "the program reached its init's host state");
}

/// pid 1 inside is runbox itself, forked without exec, and /proc/<pid>/cmdline is readable by
/// anyone: init scrubs its copy of runbox's command line (state dir, --env and --secret values,
/// a service's flags) and environment, and shows `runbox-init`.
#[test]
fn supervisor_command_line_is_not_visible_inside() {
    let rb = Runbox::new();
    let result = assert_verdict(&rb.run(&sh("tr '\\0' ' ' </proc/1/cmdline")), Verdict::Ok);
    let seen = stdout_text(&result);
    let state_dir = rb.state_dir().display().to_string();
    assert!(!seen.contains(&state_dir), "the program read runbox's host command line: {seen:?}");
}
