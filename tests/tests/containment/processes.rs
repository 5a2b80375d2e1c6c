use super::*;

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
