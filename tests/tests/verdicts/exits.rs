use super::*;

// ---------------------------------------------------------------------------------------------
// ok, nonzero_exit, signaled

#[test]
fn ok_keeps_both_streams() {
    let rb = Runbox::new();
    let ran = rb.run(&sh("echo out\necho err >&2\n"));
    let result = assert_verdict(&ran, Verdict::Ok);
    assert_eq!(ran.exit_code, 0);
    assert_ended(&result, Some(0), None);
    assert_eq!(result.limits_hit, Vec::<LimitKind>::new());
    assert_eq!(stdout_text(&result), "out\n");
    assert_eq!(stderr_text(&result), "err\n");
    assert_eq!(result.step, "run");
    assert!(result.error.is_none(), "{:?}", result.error);
    assert_clean(&rb);
}

#[test]
fn nonzero_exit_reports_the_programs_code() {
    let rb = Runbox::new();
    let ran = rb.run(&sh("echo before\necho oops >&2\nexit 3\n"));
    let result = assert_verdict(&ran, Verdict::NonzeroExit);
    assert_eq!(ran.exit_code, 10);
    assert_ended(&result, Some(3), None);
    assert_eq!(result.limits_hit, Vec::<LimitKind>::new());
    assert_eq!(stdout_text(&result), "before\n");
    assert_eq!(stderr_text(&result), "oops\n");
    assert_clean(&rb);
}

#[test]
fn segfault_is_signaled_11() {
    let rb = Runbox::new();
    // A real invalid memory access by the interpreter, not a signal sent on purpose.
    let ran = rb.run(&python("import ctypes\nprint('before', flush=True)\nctypes.string_at(0)\nprint('after')\n"));
    let result = assert_verdict(&ran, Verdict::Signaled);
    assert_eq!(ran.exit_code, 11);
    assert_ended(&result, None, Some(libc::SIGSEGV));
    assert_eq!(result.limits_hit, Vec::<LimitKind>::new());
    assert_eq!(stdout_text(&result), "before\n");
    assert_clean(&rb);
}

#[test]
fn shell_killing_itself_is_signaled() {
    let rb = Runbox::new();
    let ran = rb.run(&sh("echo before\nkill -SEGV $$\necho after\n"));
    let result = assert_verdict(&ran, Verdict::Signaled);
    assert_eq!(ran.exit_code, 11);
    assert_ended(&result, None, Some(libc::SIGSEGV));
    assert_eq!(stdout_text(&result), "before\n");
    assert_clean(&rb);
}

#[test]
fn c_null_store_is_signaled_11() {
    let rb = Runbox::new();
    // The pointer is read through a volatile so gcc cannot see it is NULL and emit a trap
    // (SIGILL) instead of the store.
    let code = r#"
#include <stdio.h>
static int *volatile target = 0;
int main(void) {
    puts("before");
    fflush(stdout);
    *target = 42;
    puts("after");
    return 0;
}
"#;
    let ran = rb.run(&c(code));
    let result = assert_verdict(&ran, Verdict::Signaled);
    assert_eq!(ran.exit_code, 11);
    assert_ended(&result, None, Some(libc::SIGSEGV));
    assert_eq!(result.step, "run");
    assert_eq!(stdout_text(&result), "before\n");
    assert_clean(&rb);
}

/// abort(3) raises SIGABRT. In pid 1 of a pid namespace a signal with no handler is dropped
/// (pid_namespaces(7)), so glibc would fall back to a crash by another signal: seeing 6 shows
/// the program is not the namespace's init.
#[test]
fn c_abort_is_signaled_6() {
    let rb = Runbox::new();
    let code =
        "#include <stdio.h>\n#include <stdlib.h>\nint main(void) { puts(\"before\"); fflush(stdout); abort(); }\n";
    let ran = rb.run(&c(code));
    let result = assert_verdict(&ran, Verdict::Signaled);
    assert_eq!(ran.exit_code, 11);
    assert_ended(&result, None, Some(libc::SIGABRT));
    assert_eq!(stdout_text(&result), "before\n");
    assert_clean(&rb);
}

// ---------------------------------------------------------------------------------------------
// Whose fault

/// 126 and 127 are what shells use for "cannot execute" and "not found"; when the program
/// returns them itself, that is its own failure, not runbox's.
#[test]
fn exit_126_and_127_from_the_program_are_nonzero_exit() {
    let rb = Runbox::new();
    for (code, status) in [
        ("echo before\nexit 127\n", 127),
        ("echo before\nexit 126\n", 126),
        ("echo before\nno-such-command-here\n", 127),
    ] {
        let ran = rb.run(&sh(code));
        let result = assert_verdict(&ran, Verdict::NonzeroExit);
        assert_eq!(ran.exit_code, 10);
        assert_ended(&result, Some(status), None);
        assert!(result.error.is_none(), "{:?}", result.error);
        assert_eq!(stdout_text(&result), "before\n");
    }
    assert_clean(&rb);
}

/// SIGXCPU and SIGXFSZ count as limits only when the run really used its CPU time or its disk:
/// a program that sends one to itself far below both limits is `signaled`, with no limit hit.
#[test]
fn self_sent_sigxcpu_and_sigxfsz_are_not_limits() {
    let rb = Runbox::new();
    for signal in [libc::SIGXCPU, libc::SIGXFSZ] {
        let ran = rb.run(&sh(&format!("echo before\nkill -{signal} $$\n")));
        let result = ran.result();
        assert_ended(&result, None, Some(signal));
        assert_eq!(stdout_text(&result), "before\n");
        // What fails today: cpu_timeout [cpu_time] for 24, disk_limit [disk] for 25, although
        // the run used about 1 ms of its 10 s CPU and nothing of its disk.
        assert!(result.usage.cpu_time_ms < 1000, "{:?}", result.usage);
        assert_eq!(result.limits_hit, Vec::<LimitKind>::new(), "BUG: signal {signal} taken for a limit");
        assert_verdict(&ran, Verdict::Signaled);
        assert_eq!(ran.exit_code, 11);
    }
    assert_clean(&rb);
}

// ---------------------------------------------------------------------------------------------
// The C runtime's build step

#[test]
fn c_hello_world_builds_and_runs() {
    let rb = Runbox::new();
    let ran = rb.run(&c("#include <stdio.h>\nint main(void) { printf(\"hello from c\\n\"); return 0; }\n"));
    let result = assert_verdict(&ran, Verdict::Ok);
    assert_eq!(ran.exit_code, 0);
    assert_ended(&result, Some(0), None);
    assert_eq!(result.step, "run");
    assert_eq!(stdout_text(&result), "hello from c\n");
    // The binary is built in /tmp, so only the source is an artifact.
    let paths: Vec<&str> = result.artifacts.iter().map(|a| a.path.as_str()).collect();
    assert_eq!(paths, vec!["main.c"]);
    assert_clean(&rb);
}

#[test]
fn c_compile_error_is_nonzero_exit_of_the_build_step() {
    let rb = Runbox::new();
    let ran = rb.run(&c("int main(void) { return undeclared_thing; }\n"));
    let result = assert_verdict(&ran, Verdict::NonzeroExit);
    assert_eq!(ran.exit_code, 10);
    assert_eq!(result.step, "build");
    assert_ended(&result, Some(1), None);
    assert_eq!(result.limits_hit, Vec::<LimitKind>::new());
    let stderr = stderr_text(&result);
    assert!(stderr.contains("error") && stderr.contains("undeclared_thing"), "{stderr:?}");
    assert_eq!(stdout_text(&result), "");
    assert!(result.error.is_none(), "{:?}", result.error);
    assert_clean(&rb);
}
