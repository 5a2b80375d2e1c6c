use super::*;

// ---------------------------------------------------------------------------------------------
// Deadlines

#[test]
fn wall_timeout_kills_a_sleeper_and_keeps_its_output() {
    let rb = Runbox::new();
    let ran = rb.run(&with_limit(sh("echo before\necho err-before >&2\nsleep 30\necho after\n"), "wall_time_ms", 500));
    let result = assert_verdict(&ran, Verdict::WallTimeout);
    assert_eq!(ran.exit_code, 12);
    assert_ended(&result, None, Some(libc::SIGKILL));
    assert_eq!(result.limits_hit, vec![LimitKind::WallTime]);
    assert!((500..5000).contains(&result.usage.wall_time_ms), "wall_time_ms {}", result.usage.wall_time_ms);
    assert!(result.usage.cpu_time_ms < 500, "a sleeper used {} ms of CPU", result.usage.cpu_time_ms);
    assert_eq!(stdout_text(&result), "before\n");
    assert_eq!(stderr_text(&result), "err-before\n");
    assert_clean(&rb);
}

#[test]
fn cpu_timeout_kills_a_busy_loop() {
    let rb = Runbox::new();
    let req =
        with_limit(with_limit(sh("echo spinning\nwhile :; do :; done\n"), "cpu_time_ms", 300), "wall_time_ms", 10_000);
    let ran = rb.run(&req);
    let result = assert_verdict(&ran, Verdict::CpuTimeout);
    assert_eq!(ran.exit_code, 13);
    assert_ended(&result, None, Some(libc::SIGKILL));
    assert_hit(&result, LimitKind::CpuTime);
    assert_not_hit(&result, LimitKind::WallTime);
    assert!(result.usage.cpu_time_ms >= 300, "cpu_time_ms {}", result.usage.cpu_time_ms);
    // Well before the wall deadline, and before RLIMIT_CPU's backstop at 2 s would act.
    assert!(result.usage.wall_time_ms < 8000, "wall_time_ms {}", result.usage.wall_time_ms);
    assert_eq!(stdout_text(&result), "spinning\n");
    assert_clean(&rb);
}

/// The parent only waits; the CPU is burnt by two children. Only a limit on the whole run
/// (the cgroup) stops this: a per-process RLIMIT_CPU would let each child run its own budget
/// and the parent would then exit 0.
#[test]
fn cpu_time_is_counted_across_all_processes() {
    let rb = Runbox::new();
    let code = "echo spinning\nsh -c 'while :; do :; done' &\nsh -c 'while :; do :; done' &\nwait\necho after\n";
    let req = with_limit(with_limit(sh(code), "cpu_time_ms", 600), "wall_time_ms", 10_000);
    let ran = rb.run(&req);
    let result = assert_verdict(&ran, Verdict::CpuTimeout);
    assert_eq!(ran.exit_code, 13);
    assert_ended(&result, None, Some(libc::SIGKILL));
    assert_hit(&result, LimitKind::CpuTime);
    assert_not_hit(&result, LimitKind::WallTime);
    assert!(result.usage.cpu_time_ms >= 600, "cpu_time_ms {}", result.usage.cpu_time_ms);
    assert_eq!(stdout_text(&result), "spinning\n");
    assert_clean(&rb);
}

// ---------------------------------------------------------------------------------------------
// Cancellation

#[test]
fn sigterm_to_runbox_cancels_the_run() {
    cancel_with(libc::SIGTERM);
}

#[test]
fn sigint_to_runbox_cancels_the_run() {
    cancel_with(libc::SIGINT);
}

fn cancel_with(signal: libc::c_int) {
    let rb = Runbox::new();
    let req = with_limit(sh("echo before\nsleep 30\necho after\n"), "wall_time_ms", 60_000);
    let begun = Instant::now();
    let child = rb.spawn_run(&req, |_| {});
    let pid = child.pid();
    // The run directory appears after runbox has turned the signal into a cancel request; the
    // extra wait lets the program start and print.
    wait_for("the run to start", Duration::from_secs(10), || run_dir(&rb));
    std::thread::sleep(Duration::from_millis(500));
    let uid = sandbox_uid(pid);
    assert!(!processes_of_uid(uid).is_empty(), "no process runs as the sandbox uid {uid}");
    // SAFETY: kill(2) with a pid we spawned and have not reaped yet, so it is still ours.
    let rc = unsafe { libc::kill(pid as libc::pid_t, signal) };
    assert_eq!(rc, 0, "kill: {}", std::io::Error::last_os_error());
    let ran = child.wait();
    let result = assert_verdict(&ran, Verdict::Cancelled);
    assert_eq!(ran.exit_code, 17);
    assert_ended(&result, None, Some(libc::SIGKILL));
    assert!(!result.limits_hit.contains(&LimitKind::WallTime), "{:?}", result.limits_hit);
    assert!(begun.elapsed() < Duration::from_secs(20), "took {:?}", begun.elapsed());
    assert_eq!(stdout_text(&result), "before\n");
    assert_eq!(processes_of_uid(uid), Vec::<String>::new(), "processes of the sandbox uid {uid} outlived the run");
    assert_clean(&rb);
}
