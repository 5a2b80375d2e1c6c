use super::*;

// ---------------------------------------------------------------------------------------------
// Memory and processes

#[test]
fn memory_limit_ends_a_growing_list() {
    let rb = Runbox::new();
    let code = "print('start', flush=True)\nchunks = []\nwhile True:\n    chunks.append(bytearray(b'x') * (1 << 20))\n";
    let req = with_limit(with_limit(python(code), "memory_bytes", 64 * MIB), "wall_time_ms", 20_000);
    let ran = rb.run(&req);
    let result = assert_verdict(&ran, Verdict::MemoryLimit);
    assert_eq!(ran.exit_code, 14);
    // The kernel's OOM killer ends the process with SIGKILL.
    assert_ended(&result, None, Some(libc::SIGKILL));
    assert_hit(&result, LimitKind::Memory);
    assert_not_hit(&result, LimitKind::WallTime);
    let peak = result.usage.peak_memory_bytes;
    assert!(peak > 32 * MIB && peak <= 64 * MIB, "peak_memory_bytes {peak} not in (32 MiB, 64 MiB]");
    assert_eq!(stdout_text(&result), "start\n");
    assert_clean(&rb);
}

/// A limit can trigger without deciding the verdict: a child is OOM-killed, the parent goes
/// on and exits 0. The run is `ok`, and `limits_hit` still says memory.
#[test]
fn memory_limit_hit_by_a_child_the_parent_survives_is_ok_with_memory_hit() {
    let rb = Runbox::new();
    let code = "python3 -c 'x = bytearray(b\"x\") * (200 << 20)'\necho child=$?\n";
    let ran = rb.run(&with_limit(sh(code), "memory_bytes", 64 * MIB));
    let result = assert_verdict(&ran, Verdict::Ok);
    assert_eq!(ran.exit_code, 0);
    assert_ended(&result, Some(0), None);
    assert_eq!(result.limits_hit, vec![LimitKind::Memory]);
    // 128 + SIGKILL: the shell saw its child killed.
    assert_eq!(stdout_text(&result), "child=137\n");
    assert_clean(&rb);
}

#[test]
fn processes_limit_refuses_forks_and_the_run_still_ends() {
    let rb = Runbox::new();
    let code = "echo started\nfor i in $(seq 100); do sleep 5 & done\necho forked\nwait\n";
    let req = with_limit(with_limit(sh(code), "processes", 10), "wall_time_ms", 3000);
    let begun = Instant::now();
    let ran = rb.run(&req);
    let result = ran.result();
    assert_ne!(result.verdict, Verdict::SandboxError, "{:#?}", result);
    assert_eq!(ran.exit_code, exit_code_for(result.verdict));
    assert_hit(&result, LimitKind::Processes);
    assert!(begun.elapsed() < Duration::from_secs(15), "took {:?}", begun.elapsed());
    assert!(stdout_text(&result).starts_with("started\n"), "{:?}", stdout_text(&result));
    match result.verdict {
        // dash gives up when fork fails, with a message on stderr.
        Verdict::NonzeroExit => {
            assert!(result.exit_code.is_some_and(|c| c != 0), "{:?}", result.exit_code);
            assert!(stderr_text(&result).to_lowercase().contains("fork"), "{:?}", stderr_text(&result));
        }
        Verdict::WallTimeout => assert_ended(&result, None, Some(libc::SIGKILL)),
        Verdict::Ok => assert_ended(&result, Some(0), None),
        other => panic!("unexpected verdict {other:?}: {result:#?}"),
    }
    assert_clean(&rb);
}

#[test]
fn fork_bomb_is_contained_and_the_host_is_fine() {
    let rb = Runbox::new();
    // The classic bomb; the sleep keeps the script (and so the run) alive while it detonates.
    let code = "echo bombing\n:(){ :|:& };:\nsleep 10\necho survived\n";
    let req = with_limit(with_limit(bash(code), "processes", 20), "wall_time_ms", 2000);
    let begun = Instant::now();
    let child = rb.spawn_run(&req, |_| {});
    let uid = sandbox_uid(child.pid());
    // While it runs the bomb's processes are visible under the sandbox uid, so seeing none
    // afterwards means something.
    wait_for("the bomb's processes", Duration::from_secs(10), || (!processes_of_uid(uid).is_empty()).then_some(()));
    let ran = child.wait();
    let result = ran.result();
    assert!(
        matches!(result.verdict, Verdict::WallTimeout | Verdict::NonzeroExit),
        "verdict {:?}: {result:#?}",
        result.verdict
    );
    assert_eq!(ran.exit_code, exit_code_for(result.verdict));
    match result.verdict {
        Verdict::WallTimeout => assert_ended(&result, None, Some(libc::SIGKILL)),
        _ => assert!(result.exit_code.is_some_and(|c| c != 0), "{:?}", result.exit_code),
    }
    assert_hit(&result, LimitKind::Processes);
    assert!(begun.elapsed() < Duration::from_secs(15), "took {:?}", begun.elapsed());
    assert!(stdout_text(&result).starts_with("bombing\n"), "{:?}", stdout_text(&result));
    assert!(!stdout_text(&result).contains("survived"), "{:?}", stdout_text(&result));
    // No process of the run survives it, and the host can still fork and run sandboxes.
    assert_eq!(processes_of_uid(uid), Vec::<String>::new(), "processes of the sandbox uid {uid} outlived the run");
    assert!(std::process::Command::new("true").status().expect("host can fork").success());
    let after = rb.run(&sh("echo alive\n"));
    assert_eq!(stdout_text(&assert_verdict(&after, Verdict::Ok)), "alive\n");
    assert_clean(&rb);
}
