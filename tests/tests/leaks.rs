//! No leaks: after a few hundred runs of every kind (clean exits, wall-time kills of process
//! trees, OOM kills, output kills, daemons, fork bombs, builds), nothing of theirs is left:
//! no run directory, no mount, no cgroup, no process.
//!
//! Other tests may run at the same time, in this binary or from other engineers on the same
//! host, and they create their own runs, cgroups and sandbox processes. So every check looks
//! only for what belongs to the runs of this test: its state dir, its run ids, and the host
//! uids of its runs (1_000_000_000 + the pid of the `runbox` process that ran them).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use std::time::{Duration, Instant};

use runbox_tests::*;
use serde_json::{Value, json};

/// RunnerConfig::host_id_base: a run's processes have host uid base + the supervisor's pid.
const HOST_ID_BASE: u32 = 1_000_000_000;

/// 200 runs, as many as the brief asks for: measured at 10 to 14 s on the 2 shared cores of the
/// dev host (debug build, two threads, load average about 2 from other work), so the ~90 s
/// budget still holds on a host five times slower. Twelve kinds per cycle: each kind runs 16
/// or 17 times, on both threads.
const RUNS: usize = 200;
const THREADS: usize = 2;

/// One kind of run and the verdict it must end with.
struct Kind {
    name: &'static str,
    request: fn() -> Value,
    verdict: Verdict,
}

fn kinds() -> Vec<Kind> {
    vec![
        Kind { name: "ok sh", request: || sh("echo ok; echo data > out.txt"), verdict: Verdict::Ok },
        Kind {
            name: "ok python",
            request: || python("import os\nos.makedirs('d', exist_ok=True)\nprint(1)"),
            verdict: Verdict::Ok,
        },
        Kind {
            name: "wall timeout of a process tree",
            request: || with_limit(sh("sleep 30 & sleep 30 & sleep 30"), "wall_time_ms", 200),
            verdict: Verdict::WallTimeout,
        },
        Kind {
            name: "wall timeout of a tree that ignores SIGTERM",
            request: || {
                with_limit(sh("trap '' TERM HUP INT; (trap '' TERM; sleep 30) & sleep 30 & wait"), "wall_time_ms", 200)
            },
            verdict: Verdict::WallTimeout,
        },
        Kind {
            name: "memory limit",
            request: || with_limit(python("x = bytearray(200 << 20)\nprint(len(x))"), "memory_bytes", 32 << 20),
            verdict: Verdict::MemoryLimit,
        },
        Kind {
            name: "output kill",
            request: || {
                let mut r = with_limit(sh("yes"), "output_bytes", 4096);
                r["on_output_limit"] = json!("kill");
                r
            },
            verdict: Verdict::OutputLimit,
        },
        Kind {
            name: "daemonizing child",
            request: || {
                sh(
                    "(setsid sh -c 'exec sleep 30' </dev/null >/dev/null 2>&1 &); sh -c 'sleep 30 &' </dev/null >/dev/null 2>&1; echo started",
                )
            },
            verdict: Verdict::Ok,
        },
        Kind {
            name: "fork bomb under a process limit",
            request: || {
                with_limit(
                    with_limit(request("bash", "main.bash", ":(){ :|:& };:; sleep 30"), "processes", 16),
                    "wall_time_ms",
                    300,
                )
            },
            verdict: Verdict::WallTimeout,
        },
        Kind {
            name: "cpu timeout",
            request: || with_limit(sh("while :; do :; done"), "cpu_time_ms", 100),
            verdict: Verdict::CpuTimeout,
        },
        Kind {
            name: "files, fifo and symlinks left behind",
            request: || sh("mkdir -p a/b; echo x > a/b/c; mkfifo p; ln -s /etc l; sleep 30 &"),
            verdict: Verdict::Ok,
        },
        Kind {
            name: "c build and run (a -build cgroup)",
            request: || request("c", "main.c", "#include <stdio.h>\nint main(void) { puts(\"hi\"); return 0; }\n"),
            verdict: Verdict::Ok,
        },
        Kind {
            name: "c build failure",
            request: || request("c", "main.c", "this is not C"),
            verdict: Verdict::NonzeroExit,
        },
    ]
}

/// What one run left to look for: its id (run dir, cgroups) and its host uid (processes).
#[derive(Debug, Clone)]
struct RunTrace {
    run_id: String,
    host_uid: u32,
}

// ---- what the host holds ----

/// Lines of /proc/self/mountinfo that mention `dir` (canonical or as given).
fn mounts_mentioning(dir: &Path) -> BTreeSet<String> {
    let canonical = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let needles: Vec<String> =
        [dir, canonical.as_path()].iter().filter_map(|p| p.to_str().map(str::to_owned)).collect();
    std::fs::read_to_string("/proc/self/mountinfo")
        .expect("read mountinfo")
        .lines()
        .filter(|line| needles.iter().any(|n| line.contains(n.as_str())))
        .map(str::to_owned)
        .collect()
}

/// Every `runbox` parent group: one per v1 hierarchy (`/sys/fs/cgroup/<controller>/runbox`,
/// co-mounted ones through their symlinks too), and the v2 one.
fn runbox_parent_groups() -> Vec<PathBuf> {
    let mut parents = vec![PathBuf::from("/sys/fs/cgroup/runbox")];
    if let Ok(dir) = std::fs::read_dir("/sys/fs/cgroup") {
        parents.extend(dir.filter_map(Result::ok).map(|e| e.path().join("runbox")));
    }
    parents.into_iter().filter(|p| p.is_dir()).collect()
}

/// Cgroups under any `runbox` parent named after one of `run_ids` (`<id>`, `<id>-build`, ...).
fn cgroups_of(run_ids: &BTreeSet<String>) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for parent in runbox_parent_groups() {
        let Ok(entries) = std::fs::read_dir(&parent) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let name = entry.file_name().to_string_lossy().into_owned();
            let id = name.split('-').next().unwrap_or("");
            if entry.path().is_dir() && run_ids.contains(id) {
                found.push(entry.path());
            }
        }
    }
    found
}

/// Processes whose real, effective, saved or filesystem uid is at least `HOST_ID_BASE`:
/// pid → (name, uid).
fn sandbox_processes() -> BTreeMap<u32, (String, u32)> {
    let mut found = BTreeMap::new();
    let Ok(proc_dir) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in proc_dir.filter_map(Result::ok) {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        // A process may exit between the listing and the read.
        let Ok(status) = std::fs::read_to_string(entry.path().join("status")) else {
            continue;
        };
        let field = |key: &str| status.lines().find_map(|l| l.strip_prefix(key)).map(str::trim).unwrap_or("");
        let uid = field("Uid:").split_whitespace().filter_map(|u| u.parse::<u32>().ok()).max().unwrap_or(0);
        if uid >= HOST_ID_BASE {
            found.insert(pid, (field("Name:").to_string(), uid));
        }
    }
    found
}

/// Processes of `traces`: their uid is one of ours. A uid is only ours while its pid has not
/// been reused: when a `runbox` that this test did not start now has that pid, the uid is
/// another run's and skipped.
fn processes_of(traces: &[RunTrace], before: &BTreeMap<u32, (String, u32)>) -> Vec<String> {
    let ours: BTreeSet<u32> = traces.iter().map(|t| t.host_uid).collect();
    sandbox_processes()
        .into_iter()
        .filter(|(pid, (_, uid))| ours.contains(uid) && !before.contains_key(pid))
        .filter(|(_, (_, uid))| !is_foreign_runbox(uid - HOST_ID_BASE))
        .map(|(pid, (name, uid))| format!("pid {pid} {name} uid {uid}"))
        .collect()
}

/// A live `runbox` process whose parent is not this test.
fn is_foreign_runbox(pid: u32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    let field = |key: &str| status.lines().find_map(|l| l.strip_prefix(key)).map(str::trim).unwrap_or("").to_string();
    field("Name:") == "runbox" && field("PPid:") != std::process::id().to_string()
}

/// Everything the host holds for `traces` of runs in `rb`, as readable lines; empty when clean.
fn leftovers(
    rb: &Runbox,
    traces: &[RunTrace],
    mounts_before: &BTreeSet<String>,
    procs_before: &BTreeMap<u32, (String, u32)>,
) -> Vec<String> {
    let run_ids: BTreeSet<String> = traces.iter().map(|t| t.run_id.clone()).collect();
    let mut found = Vec::new();
    found.extend(rb.leftover_runs().into_iter().map(|r| format!("run dir {r}")));
    found.extend(mounts_mentioning(rb.state_dir()).difference(mounts_before).map(|m| format!("mount {m}")));
    found.extend(cgroups_of(&run_ids).into_iter().map(|c| format!("cgroup {}", c.display())));
    found.extend(processes_of(traces, procs_before).into_iter().map(|p| format!("process {p}")));
    found
}

// ---- the tests ----

/// The checks are only worth something if they can see a leak: while a run is alive, each
/// of them must find it.
#[test]
fn the_leak_checks_see_a_live_run() {
    let rb = Runbox::new();
    let mounts_before = mounts_mentioning(rb.state_dir());
    let procs_before = sandbox_processes();
    let started = rb.spawn_run(&sh("touch ready; sleep 30"), |_| {});
    let host_uid = HOST_ID_BASE + started.pid();

    // The program is running once it has made /workspace/ready (the host sees the tmpfs).
    let deadline = Instant::now() + Duration::from_secs(20);
    let run_id = loop {
        let ready = rb
            .leftover_runs()
            .into_iter()
            .find(|id| rb.state_dir().join("runs").join(id).join("fs/workspace/ready").exists());
        if let Some(id) = ready {
            break id;
        }
        assert!(Instant::now() < deadline, "the run never started");
        std::thread::sleep(Duration::from_millis(20));
    };
    let live = vec![RunTrace { run_id: run_id.clone(), host_uid }];
    let seen = leftovers(&rb, &live, &mounts_before, &procs_before);
    let kill = |s: &Running| {
        // SIGTERM cancels the run; runbox then tears it down.
        // SAFETY: kill(2) on the pid of a child we spawned and have not waited for yet.
        unsafe { libc::kill(s.pid() as libc::pid_t, libc::SIGTERM) };
    };
    kill(&started);
    let ran = started.wait();
    assert!(seen.iter().any(|l| l.starts_with("run dir ")), "{seen:#?}");
    assert!(seen.iter().any(|l| l.starts_with("mount ")), "{seen:#?}");
    assert!(
        seen.iter().any(|l| l.starts_with("cgroup ") && l.contains("/memory") && l.ends_with(&run_id)),
        "{seen:#?}"
    );
    assert!(seen.iter().any(|l| l.starts_with("process ") && l.contains(" sleep ")), "{seen:#?}");

    // And once it has ended, they find nothing.
    assert_verdict(&ran, Verdict::Cancelled);
    let after = leftovers(&rb, &live, &mounts_before, &procs_before);
    assert!(after.is_empty(), "a cancelled run left: {after:#?}");
}

#[test]
fn hundreds_of_runs_of_every_kind_leave_nothing_behind() {
    let began = Instant::now();
    let rb = Runbox::new();
    let kinds = kinds();
    let mounts_before = mounts_mentioning(rb.state_dir());
    let procs_before = sandbox_processes();

    // Thread t takes runs t, t + THREADS, ...: every kind lands on both threads.
    let traces: Vec<RunTrace> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let (rb, kinds) = (&rb, &kinds);
                scope.spawn(move || {
                    let mut traces = Vec::new();
                    for i in (t..RUNS).step_by(THREADS) {
                        let kind = &kinds[i % kinds.len()];
                        let started = rb.spawn_run(&(kind.request)(), |_| {});
                        let host_uid = HOST_ID_BASE + started.pid();
                        let ran = started.wait();
                        let result = ran.result();
                        assert_eq!(
                            result.verdict, kind.verdict,
                            "run {i} ({}): {}\nstderr: {}",
                            kind.name, ran.json, ran.stderr
                        );
                        assert!(result.cleanup.ok, "run {i} ({}): cleanup failed: {:?}", kind.name, result.cleanup);
                        traces.push(RunTrace { run_id: result.run_id, host_uid });
                    }
                    traces
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().expect("worker")).collect()
    });
    let ran_for = began.elapsed();
    assert_eq!(traces.len(), RUNS);
    let unique: BTreeSet<&str> = traces.iter().map(|t| t.run_id.as_str()).collect();
    assert_eq!(unique.len(), RUNS, "run ids must be unique");

    let left = leftovers(&rb, &traces, &mounts_before, &procs_before);
    assert!(left.is_empty(), "after {RUNS} runs, left behind:\n{left:#?}");
    eprintln!("{RUNS} runs in {ran_for:?}");
}
