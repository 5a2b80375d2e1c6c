use super::*;

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
