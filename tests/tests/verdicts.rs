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

// ---------------------------------------------------------------------------------------------
// Output

#[test]
fn output_over_the_cap_is_truncated_head_and_tail() {
    let rb = Runbox::new();
    let req = with_limit(sh("echo err-line >&2\nyes | head -c 5000000\n"), "output_bytes", 1000);
    let ran = rb.run(&req);
    let result = assert_verdict(&ran, Verdict::Ok);
    assert_eq!(ran.exit_code, 0);
    assert_ended(&result, Some(0), None);
    assert_eq!(result.limits_hit, vec![LimitKind::Output]);
    assert!(result.stdout.truncated);
    assert_eq!(result.stdout.bytes_total, 5_000_000);
    let text = stdout_text(&result);
    // 1000 bytes kept: 500 from the start and 500 from the end, joined by the note.
    let half = "y\n".repeat(250);
    assert!(text.starts_with(&format!("{half}\n[runbox: 4999000 of 5000000 bytes omitted here;")), "{text:?}");
    assert!(text.ends_with(&format!("]\n{half}")), "{text:?}");
    assert_eq!(text.matches("[runbox:").count(), 1, "{text:?}");
    // The other stream is untouched.
    assert_eq!(stderr_text(&result), "err-line\n");
    assert!(!result.stderr.truncated);
    assert_eq!(result.stderr.bytes_total, 9);
    assert_clean(&rb);
}

#[test]
fn output_over_the_cap_with_kill_is_output_limit() {
    let rb = Runbox::new();
    let mut req = with_limit(with_limit(sh("echo before\nyes\n"), "output_bytes", 10_000), "wall_time_ms", 10_000);
    req["on_output_limit"] = json!("kill");
    let ran = rb.run(&req);
    let result = assert_verdict(&ran, Verdict::OutputLimit);
    assert_eq!(ran.exit_code, 15);
    assert_ended(&result, None, Some(libc::SIGKILL));
    assert_hit(&result, LimitKind::Output);
    assert_not_hit(&result, LimitKind::WallTime);
    assert!(result.stdout.bytes_total > 10_000, "bytes_total {}", result.stdout.bytes_total);
    assert!(result.stdout.truncated);
    let text = stdout_text(&result);
    assert!(text.starts_with("before\ny\ny\n"), "{:?}", &text[..text.len().min(100)]);
    assert!(text.len() < 11_000, "kept {} bytes", text.len());
    assert_clean(&rb);
}

/// The cap is inclusive: exactly `output_bytes` is fine, one byte more is over.
#[test]
fn output_kill_triggers_one_byte_past_the_cap_not_at_it() {
    let rb = Runbox::new();
    for (bytes, verdict) in [(1000u64, Verdict::Ok), (1001, Verdict::OutputLimit)] {
        let mut req = with_limit(sh(&format!("head -c {bytes} /dev/zero | tr '\\0' y\n")), "output_bytes", 1000);
        req["on_output_limit"] = json!("kill");
        let ran = rb.run(&req);
        let result = assert_verdict(&ran, verdict);
        assert_eq!(ran.exit_code, exit_code_for(verdict));
        assert_eq!(result.stdout.bytes_total, bytes);
        assert_eq!(result.stdout.truncated, bytes > 1000);
        assert_eq!(result.limits_hit.contains(&LimitKind::Output), bytes > 1000, "{:?}", result.limits_hit);
        assert!(stdout_text(&result).starts_with(&"y".repeat(500)), "{:?}", stdout_text(&result));
    }
    assert_clean(&rb);
}

// ---------------------------------------------------------------------------------------------
// Disk

/// dd fills the run's 8 MiB filesystem and fails with ENOSPC. While the run waits (for a file
/// the test creates), the test looks at both filesystems: the one under the run directory is
/// an 8 MiB filesystem of its own and is full (the decisive check), and the host's (the state
/// dir's) barely changed (a sanity check, loose because other work shares the host disk).
#[test]
fn disk_limit_stops_a_big_write_on_the_runs_own_filesystem() {
    let rb = Runbox::new();
    let (_, host_free_before) = space(rb.state_dir());
    let code = "echo writing\ndd if=/dev/zero of=big bs=1M count=100\nstatus=$?\n: > filled\nwhile [ ! -e go ]; do sleep 0.05; done\nexit $status\n";
    let req = with_limit(with_limit(sh(code), "disk_bytes", 8 * MIB), "wall_time_ms", 20_000);
    let child = rb.spawn_run(&req, |_| {});
    let measured = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let fs = wait_for("the run to fill its disk", Duration::from_secs(15), || {
            let fs = run_dir(&rb)?.join("fs");
            fs.join("workspace/filled").exists().then_some(fs)
        });
        let (run_total, run_free) = space(&fs);
        let (_, host_free_during) = space(rb.state_dir());
        std::fs::write(fs.join("workspace/go"), b"").expect("let the run finish");
        (run_total, run_free, host_free_during)
    }));
    let ran = child.wait();
    let (run_total, run_free, host_free_during) = measured.unwrap_or_else(|e| panic!("{e:?}; runbox: {}", ran.json));
    assert!((8 * MIB..=9 * MIB).contains(&run_total), "the run's filesystem is {run_total} bytes");
    assert!(run_free < MIB, "the run's filesystem has {run_free} bytes free after dd");
    let host_lost = host_free_before.saturating_sub(host_free_during);
    assert!(host_lost < 64 * MIB, "the host filesystem lost {host_lost} bytes during the run");

    let result = assert_verdict(&ran, Verdict::DiskLimit);
    assert_eq!(ran.exit_code, 16);
    assert_ended(&result, Some(1), None);
    assert_hit(&result, LimitKind::Disk);
    assert_eq!(stdout_text(&result), "writing\n");
    assert!(stderr_text(&result).contains("No space left on device"), "{:?}", stderr_text(&result));
    let big = result.artifacts.iter().find(|a| a.path == "big").expect("big is an artifact");
    assert!(big.size_bytes > 4 * MIB && big.size_bytes < 8 * MIB, "big is {} bytes", big.size_bytes);
    assert_clean(&rb);
}

/// A full disk that the program copes with is not a failure: `ok`, with disk in `limits_hit`.
#[test]
fn a_full_disk_the_program_survives_is_ok_with_disk_hit() {
    let rb = Runbox::new();
    let code = "dd if=/dev/zero of=big bs=1M count=100 2>/dev/null\necho dd=$?\n";
    let ran = rb.run(&with_limit(sh(code), "disk_bytes", 8 * MIB));
    let result = assert_verdict(&ran, Verdict::Ok);
    assert_eq!(ran.exit_code, 0);
    assert_ended(&result, Some(0), None);
    assert_eq!(stdout_text(&result), "dd=1\n");
    assert_eq!(result.limits_hit, vec![LimitKind::Disk]);
    assert_clean(&rb);
}

/// A program that fills the disk, fails with ENOSPC and removes its files on the way out (here
/// Python's `TemporaryDirectory`, which cleans up as the exception passes) is still
/// `disk_limit`: the supervisor samples the run's filesystem every few milliseconds while the
/// program runs, so a full disk is seen even when the end state shows none. The program holds
/// the full disk for 50 ms, ten sampling intervals; a fill undone faster than one interval can
/// be missed, as the README says.
#[test]
fn disk_filled_then_cleaned_up_on_exit_is_still_disk_limit() {
    let rb = Runbox::new();
    let code = "\
import os, tempfile, time
print('writing', flush=True)
with tempfile.TemporaryDirectory() as d:
    with open(os.path.join(d, 'big'), 'wb') as f:
        try:
            for _ in range(100):
                f.write(bytes(1 << 20))
                f.flush()
        finally:
            time.sleep(0.05)
";
    let ran = rb.run(&with_limit(python(code), "disk_bytes", 8 * MIB));
    let result = ran.result();
    assert_ended(&result, Some(1), None);
    assert!(stderr_text(&result).contains("No space left on device"), "{:?}", stderr_text(&result));
    assert_eq!(stdout_text(&result), "writing\n");
    assert_clean(&rb);
    assert!(result.limits_hit.contains(&LimitKind::Disk), "disk not in limits_hit {:?}", result.limits_hit);
    let result = assert_verdict(&ran, Verdict::DiskLimit);
    assert_eq!(ran.exit_code, 16, "{:?}", result.verdict);
}

#[test]
fn disk_limit_stops_a_file_count_bomb_at_the_inode_cap() {
    let rb = Runbox::new();
    let code = "\
print('start', flush=True)
n = 0
try:
    while True:
        open(f'f{n}', 'w').close()
        n += 1
except OSError:
    print(f'created {n} files', flush=True)
    raise
";
    // 1 MiB of disk gives the floor of 256 inodes (plus a little for runbox's own layout):
    // empty files use no blocks, so only an inode cap ends this loop. Without one it would
    // go on until the wall deadline.
    let req = with_limit(python(code), "disk_bytes", MIB);
    let ran = rb.run(&req);
    let result = assert_verdict(&ran, Verdict::DiskLimit);
    assert_eq!(ran.exit_code, 16);
    assert_ended(&result, Some(1), None);
    assert_hit(&result, LimitKind::Disk);
    let out = stdout_text(&result);
    let created: usize = out
        .strip_prefix("start\ncreated ")
        .and_then(|rest| rest.strip_suffix(" files\n"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("unexpected stdout {out:?}"));
    assert!((100..400).contains(&created), "created {created} files");
    assert!(stderr_text(&result).contains("No space left on device"), "{:?}", stderr_text(&result));
    // Every file made is listed, plus main.py.
    assert_eq!(result.artifacts.len(), created + 1, "{:?}", result.artifacts.len());
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
// stdin

#[test]
fn stdin_text_is_delivered() {
    let rb = Runbox::new();
    let mut req = sh("cat\n");
    req["stdin"] = json!("abc\n");
    let ran = rb.run(&req);
    let result = assert_verdict(&ran, Verdict::Ok);
    assert_eq!(ran.exit_code, 0);
    assert_ended(&result, Some(0), None);
    assert_eq!(stdout_text(&result), "abc\n");
    assert_clean(&rb);
}

#[test]
fn stdin_base64_is_delivered_as_bytes() {
    let rb = Runbox::new();
    let mut req = sh("od -An -tx1\n");
    req["stdin_base64"] = json!("AAEC/w=="); // 00 01 02 ff
    let ran = rb.run(&req);
    let result = assert_verdict(&ran, Verdict::Ok);
    assert_eq!(ran.exit_code, 0);
    assert_ended(&result, Some(0), None);
    assert_eq!(stdout_text(&result).trim(), "00 01 02 ff");
    assert_clean(&rb);
}

#[test]
fn large_stdin_the_program_never_reads_does_not_hang() {
    let rb = Runbox::new();
    let mut req = with_limit(sh("echo done\n"), "wall_time_ms", 5000);
    req["stdin"] = json!("x".repeat(1 << 20));
    let ran = rb.run(&req);
    let result = assert_verdict(&ran, Verdict::Ok);
    assert_eq!(ran.exit_code, 0);
    assert_ended(&result, Some(0), None);
    assert_eq!(result.limits_hit, Vec::<LimitKind>::new());
    assert_eq!(stdout_text(&result), "done\n");
    assert_clean(&rb);
}

#[test]
fn large_stdin_is_delivered_whole_when_read() {
    let rb = Runbox::new();
    let mut req = sh("wc -c\n");
    req["stdin"] = json!("x".repeat(1 << 20));
    let ran = rb.run(&req);
    let result = assert_verdict(&ran, Verdict::Ok);
    assert_ended(&result, Some(0), None);
    assert_eq!(stdout_text(&result).trim(), "1048576");
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

// ---------------------------------------------------------------------------------------------
// Secrets

#[test]
fn secrets_are_redacted_from_both_streams_and_the_whole_result() {
    let rb = Runbox::new();
    let mut req = sh("echo \"$TOKEN\"\necho \"token=$TOKEN\" >&2\nprintf %s \"$TOKEN\" > leaked.txt\n");
    req["secrets"] = json!({"TOKEN": "s3cr3t-value"});
    let ran = rb.run(&req);
    let result = assert_verdict(&ran, Verdict::Ok);
    assert_eq!(ran.exit_code, 0);
    assert_ended(&result, Some(0), None);
    assert_eq!(stdout_text(&result), "[REDACTED:TOKEN]\n");
    assert_eq!(stderr_text(&result), "token=[REDACTED:TOKEN]\n");
    // The program did see the real value: the file it wrote holds it (by its hash only).
    let leaked = result.artifacts.iter().find(|a| a.path == "leaked.txt").expect("leaked.txt is an artifact");
    assert_eq!(leaked.sha256, sha256_hex(b"s3cr3t-value"));
    let raw = serde_json::to_string(&ran.json).expect("json");
    assert!(!raw.contains("s3cr3t-value"), "the secret appears in the result: {raw}");
    assert!(!ran.stderr.contains("s3cr3t-value"), "the secret appears on runbox's stderr: {}", ran.stderr);
    assert_clean(&rb);
}
