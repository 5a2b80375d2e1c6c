//! Real run groups on this host (run as root): attach, limits, counters, kill, removal.
//! Every test cleans up through `Fixture`'s Drop, even when an assertion fails.

use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use runbox_linux::cgroup::{CgroupLayout, CgroupLimits, CgroupVersion, RunCgroup, list_run_groups, sweep_stale_in};

const MIB: u64 = 1 << 20;

fn name(tag: &str) -> String {
    format!("test-{tag}-{}", std::process::id())
}

fn limits(memory_bytes: u64, processes: u64, cpu_cores: Option<f64>) -> CgroupLimits {
    CgroupLimits { memory_bytes, processes, cpu_cores }
}

/// A shell held at `read` until released, so it can be attached before it does anything.
fn held(script: &str) -> Child {
    Command::new("/bin/sh")
        .args(["-c", &format!("read x; {script}")])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn /bin/sh")
}

fn release(child: &mut Child) {
    let stdin = child.stdin.as_mut().expect("stdin is piped");
    stdin.write_all(b"go\n").expect("release the child");
}

fn wait_for(child: &mut Child, limit: Duration) -> ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(start.elapsed() < limit, "child still running after {limit:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn poll_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    done()
}

/// Dead means gone or a zombie waiting for its parent.
fn is_dead(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'),
    }
}

/// Owns the group and the children of a test; removes and reaps them on drop.
struct Fixture {
    cg: Option<RunCgroup>,
    children: Vec<Child>,
}

impl Fixture {
    fn new(tag: &str, limits: &CgroupLimits) -> Fixture {
        let cg = RunCgroup::create(&name(tag), limits).expect("create run group");
        Fixture { cg: Some(cg), children: Vec::new() }
    }

    fn cg(&self) -> &RunCgroup {
        self.cg.as_ref().unwrap()
    }

    /// Spawns a held shell, attaches it, and releases it.
    fn start(&mut self, script: &str) -> usize {
        let mut child = held(script);
        self.cg().add_process(child.id() as i32).expect("add_process");
        release(&mut child);
        self.children.push(child);
        self.children.len() - 1
    }

    /// The test's own end: removal must succeed and leave nothing.
    fn finish(mut self) {
        let cg = self.cg.take().unwrap();
        let name = cg.name().to_string();
        cg.remove().expect("remove");
        assert!(!list_run_groups().unwrap().contains(&name), "{name} left behind");
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if let Some(Err(e)) = self.cg.take().map(RunCgroup::remove) {
            eprintln!("cleanup: {e}");
        }
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[test]
fn process_is_attached_in_every_hierarchy_and_dirs_go_away() {
    let name = name("attach");
    let mut fx = Fixture::new("attach", &limits(64 * MIB, 8, Some(1.0)));
    let mut child = Command::new("sleep").arg("100").spawn().unwrap();
    let pid = child.id() as i32;
    fx.cg().add_process(pid).unwrap();
    assert_eq!(fx.cg().processes().unwrap(), vec![pid]);

    let membership = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let expected_path = format!("/runbox/{name}");
    let layout = CgroupLayout::detect().unwrap();
    match layout.version() {
        CgroupVersion::V1 => {
            for ctrl in ["memory", "pids", "cpu", "cpuacct"] {
                let line = membership
                    .lines()
                    .find(|l| l.split(':').nth(1).is_some_and(|c| c.split(',').any(|c| c == ctrl)))
                    .unwrap_or_else(|| panic!("no {ctrl} line in {membership}"));
                assert!(line.ends_with(&expected_path), "{ctrl}: {line}");
            }
            assert_eq!(fx.cg().layers(), ["cgroup_v1:memory", "cgroup_v1:pids", "cgroup_v1:cpu", "cgroup_v1:cpuacct"]);
        }
        CgroupVersion::V2 => {
            assert!(membership.contains(&format!("0::{expected_path}")), "{membership}");
        }
    }
    assert!(list_run_groups().unwrap().contains(&name));

    fx.cg.take().unwrap().remove().unwrap();
    assert_eq!(child.wait().unwrap().signal(), Some(9), "remove kills what is left");
    assert!(!list_run_groups().unwrap().contains(&name));
    if let CgroupLayout::V1 { memory, pids, cpuacct, cpu } = layout {
        for mount in [memory, pids, cpuacct, cpu.unwrap()] {
            assert!(!mount.join("runbox").join(&name).exists(), "{}", mount.display());
        }
    }
}

#[test]
fn memory_limit_ends_in_a_counted_oom_kill() {
    let mut fx = Fixture::new("oom", &limits(32 * MIB, 8, None));
    // tail keeps the whole "line" of an endless /dev/zero in memory.
    let idx = fx.start("exec tail /dev/zero");
    let status = wait_for(&mut fx.children[idx], Duration::from_secs(20));
    assert_eq!(status.signal(), Some(9), "{status:?}");
    let stats = fx.cg().stats().unwrap();
    eprintln!("after OOM: {stats:?}");
    assert!(stats.oom_kills >= 1, "{stats:?}");
    let peak = stats.peak_memory_bytes.expect("v1 and recent v2 track the peak");
    assert!((16 * MIB..=33 * MIB).contains(&peak), "peak {peak}");
    fx.finish();
}

#[test]
fn process_limit_hits_are_counted() {
    let mut fx = Fixture::new("pids", &limits(64 * MIB, 5, None));
    fx.start("i=0; while [ $i -lt 20 ]; do sleep 100 & i=$((i+1)); done; wait");
    let hit = poll_until(Duration::from_secs(10), || fx.cg().stats().unwrap().pids_max_hits >= 1);
    assert!(hit, "{:?}", fx.cg().stats());
    assert!(fx.cg().processes().unwrap().len() <= 5);
    assert_eq!(fx.cg().stats().unwrap().oom_kills, 0);
    fx.finish();
}

#[test]
fn cpu_usage_grows_while_busy() {
    let mut fx = Fixture::new("cpu", &limits(64 * MIB, 8, None));
    let before = fx.cg().cpu_usage_ns().unwrap();
    fx.start("while :; do :; done");
    let grew = poll_until(Duration::from_secs(10), || fx.cg().cpu_usage_ns().unwrap() >= before + 50_000_000);
    assert!(grew, "cpu usage {} ns", fx.cg().cpu_usage_ns().unwrap());
    let stats = fx.cg().stats().unwrap();
    let now = fx.cg().cpu_usage_ns().unwrap();
    assert!(stats.cpu_time_ns <= now && stats.cpu_time_ns >= 50_000_000, "{stats:?} vs {now}");
    fx.finish();
}

#[test]
fn cpu_quota_throttles_a_busy_loop() {
    let mut fx = Fixture::new("quota", &limits(64 * MIB, 8, Some(0.1)));
    fx.start("while :; do :; done");
    let start = Instant::now();
    std::thread::sleep(Duration::from_millis(1000));
    let used_ns = fx.cg().cpu_usage_ns().unwrap();
    let wall_ns = start.elapsed().as_nanos() as u64;
    // 0.1 cores: about 10% of the wall time, with room for one period of slack.
    assert!(used_ns <= wall_ns / 10 + 100_000_000, "used {used_ns} ns of {wall_ns} ns");
    assert!(used_ns > 0);
    fx.finish();
}

#[test]
fn kill_all_kills_a_tree_with_a_double_forked_orphan() {
    let mut fx = Fixture::new("tree", &limits(64 * MIB, 16, None));
    fx.start("(sleep 100 &) ; sleep 100");
    // The shell, its sleep, and the orphaned sleep whose parent subshell exited.
    let three = poll_until(Duration::from_secs(10), || fx.cg().processes().unwrap().len() == 3);
    let pids = fx.cg().processes().unwrap();
    assert!(three, "{pids:?}");
    fx.cg().kill_all().unwrap();
    assert_eq!(fx.cg().processes().unwrap(), Vec::<i32>::new());
    for pid in pids {
        assert!(is_dead(pid), "pid {pid} survived");
    }
    fx.finish();
}

/// A run whose runbox process died leaves a group with live processes in it.
#[test]
fn sweep_removes_a_crashed_runs_group() {
    let name = name("crashed");
    let cg = RunCgroup::create(&name, &limits(64 * MIB, 8, None)).unwrap();
    let mut child = Command::new("sleep").arg("100").spawn().unwrap();
    cg.add_process(child.id() as i32).unwrap();
    std::mem::forget(cg);

    let layout = CgroupLayout::detect().unwrap();
    let swept = sweep_stale_in(&layout, |n| n == name);
    let kill_status = child.wait().unwrap();
    assert_eq!(swept.len(), 1);
    assert_eq!(swept[0].as_ref().unwrap(), &name);
    assert_eq!(kill_status.signal(), Some(9));
    assert!(!list_run_groups().unwrap().contains(&name));
}

#[test]
fn concurrent_creates_share_the_parent() {
    let handles: Vec<_> = (0..8)
        .map(|i| std::thread::spawn(move || RunCgroup::create(&name(&format!("race{i}")), &limits(64 * MIB, 8, None))))
        .collect();
    let groups: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let mut failures = Vec::new();
    for group in groups {
        match group {
            Ok(cg) => cg.remove().unwrap_or_else(|e| failures.push(e.to_string())),
            Err(e) => failures.push(e.to_string()),
        }
    }
    assert!(failures.is_empty(), "{failures:?}");
}

#[test]
fn existing_name_is_refused_and_left_alone() {
    let fx = Fixture::new("dup", &limits(64 * MIB, 8, None));
    let err = RunCgroup::create(fx.cg().name(), &limits(64 * MIB, 8, None)).unwrap_err();
    assert!(err.to_string().contains("already exists"), "{err}");
    assert!(list_run_groups().unwrap().contains(&fx.cg().name().to_string()));
    fx.finish();
}

#[test]
fn quota_without_cpu_hierarchy_fails_and_leaves_nothing() {
    let CgroupLayout::V1 { memory, pids, cpuacct, .. } = CgroupLayout::detect().unwrap() else {
        eprintln!("not v1: nothing to check");
        return;
    };
    let layout = CgroupLayout::V1 { memory, pids, cpuacct, cpu: None };
    let name = name("nocpu");
    let err = RunCgroup::create_in(&layout, &name, &limits(64 * MIB, 8, Some(1.0))).unwrap_err();
    assert!(err.to_string().contains("controller cpu"), "{err}");
    assert!(!list_run_groups().unwrap().contains(&name));
}

/// Prints what one run pays for its cgroup; see with `--nocapture`. Medians, plus the
/// first attach on its own: a cgroup.procs write after an idle spell waits for an RCU
/// grace period (see `RunCgroup::add_process`), back-to-back ones do not.
#[test]
fn timing_of_create_add_remove() {
    const ROUNDS: usize = 30;
    let t = Instant::now();
    let layout = CgroupLayout::detect().unwrap();
    let detect = t.elapsed();
    let mut rounds: Vec<[Duration; 3]> = Vec::new();
    for round in 0..ROUNDS {
        let mut child = Command::new("sleep").arg("100").spawn().unwrap();
        let t = Instant::now();
        let cg =
            RunCgroup::create_in(&layout, &name(&format!("timing{round}")), &limits(64 * MIB, 8, Some(1.0))).unwrap();
        let create = t.elapsed();
        let t = Instant::now();
        let added = cg.add_process(child.id() as i32);
        let add = t.elapsed();
        let t = Instant::now();
        let removed = cg.remove();
        let remove = t.elapsed();
        let _ = child.kill();
        child.wait().unwrap();
        added.unwrap();
        removed.unwrap();
        rounds.push([create, add, remove]);
    }
    let median = |part: usize| {
        let mut v: Vec<Duration> = rounds.iter().map(|r| r[part]).collect();
        v.sort();
        v[ROUNDS / 2]
    };
    let mut totals: Vec<Duration> = rounds.iter().map(|r| r.iter().sum()).collect();
    totals.sort();

    let cg = RunCgroup::create(&name("timing-poll"), &limits(64 * MIB, 8, None)).unwrap();
    let t = Instant::now();
    for _ in 0..10_000 {
        cg.cpu_usage_ns().unwrap();
    }
    let poll = t.elapsed() / 10_000;
    cg.remove().unwrap();
    println!(
        "cgroup timing: detect once {detect:?}; per run (median of {ROUNDS}): create_in {:?}, add_process {:?}, remove \
         (kill 1 process + rmdir) {:?}; total median {:?}, max {:?}; first (cold) add_process {:?}; cpu_usage_ns {:?} per call",
        median(0),
        median(1),
        median(2),
        totals[ROUNDS / 2],
        totals[ROUNDS - 1],
        rounds[0][1],
        poll
    );
}

#[test]
fn names_cannot_escape_the_parent() {
    let err = RunCgroup::create("../escape", &limits(64 * MIB, 8, None)).unwrap_err();
    assert!(err.to_string().contains("invalid run group name"), "{err}");
    assert!(!Path::new("/sys/fs/cgroup/memory/escape").exists());
}
