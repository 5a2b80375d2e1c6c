//! Artifacts: every regular file left in /workspace comes back with its exact size and
//! SHA-256, sorted by path; everything else is listed as skipped with the reason, and is
//! never followed, opened or read. The caps (1000 files, 64 MiB hashed) cut the list
//! honestly: `artifacts_truncated` and `limits_hit: artifacts` say so.

use std::time::{Duration, Instant};

use runbox_contract::{Artifact, SkippedArtifact};
use runbox_tests::*;
use serde_json::json;

/// The runner's caps (RunnerConfig::new).
const MAX_ARTIFACTS: usize = 1000;
const MAX_HASHED_BYTES: u64 = 64 << 20;

/// Generous bound for runs that must not hang on what the program left behind.
const PROMPT: Duration = Duration::from_secs(20);

fn artifact<'a>(result: &'a RunResult, path: &str) -> Option<&'a Artifact> {
    result.artifacts.iter().find(|a| a.path == path)
}

fn skipped<'a>(result: &'a RunResult, path: &str) -> Option<&'a SkippedArtifact> {
    result.artifacts_skipped.iter().find(|s| s.path == path)
}

fn expected(path: &str, bytes: &[u8]) -> Artifact {
    Artifact { path: path.to_string(), size_bytes: bytes.len() as u64, sha256: sha256_hex(bytes) }
}

fn assert_sorted(result: &RunResult) {
    let paths: Vec<&str> = result.artifacts.iter().map(|a| a.path.as_str()).collect();
    let mut sorted = paths.clone();
    sorted.sort_unstable();
    assert_eq!(paths, sorted, "artifacts are not sorted by path");
}

fn random_hex() -> String {
    let mut bytes = [0u8; 16];
    std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom").expect("urandom"), &mut bytes)
        .expect("read urandom");
    hex::encode(bytes)
}

#[test]
fn written_files_come_back_with_their_exact_sha256_sorted_by_path() {
    // Bytes the test knows; the program rebuilds the same ones and writes them.
    let text = "hello, artifacts\nline two\n".as_bytes().to_vec();
    let binary: Vec<u8> = (0..=255u8).chain((0..=255u8).rev()).chain([0, 0, 0xff, b'\n', b'\r']).collect();
    let nested = b"deep".to_vec();
    let input = "an input file, returned as it was sent\n";
    let code = r#"
import os
os.makedirs("out/a", exist_ok=True)
with open("text.txt", "wb") as f: f.write("hello, artifacts\nline two\n".encode())
with open("binary.dat", "wb") as f: f.write(bytes(range(256)) + bytes(reversed(range(256))) + bytes([0, 0, 0xff, 10, 13]))
with open("out/a/b.txt", "wb") as f: f.write(b"deep")
open("empty", "wb").close()
# Upper case sorts before lower case in byte order.
with open("Zfirst", "wb") as f: f.write(b"Z")
"#;
    let request = json!({
        "runtime": "python",
        "files": [
            {"path": "main.py", "content": code},
            {"path": "inputs/data.txt", "content": input},
        ],
    });
    let ran = Runbox::new().run(&request);
    let result = assert_verdict(&ran, Verdict::Ok);

    let mut want = vec![
        expected("Zfirst", b"Z"),
        expected("binary.dat", &binary),
        expected("empty", b""),
        expected("inputs/data.txt", input.as_bytes()),
        expected("main.py", code.as_bytes()),
        expected("out/a/b.txt", &nested),
        expected("text.txt", &text),
    ];
    want.sort_by(|a, b| a.path.cmp(&b.path));
    assert_eq!(result.artifacts, want);
    assert_sorted(&result);
    assert!(result.artifacts_skipped.is_empty(), "{:?}", result.artifacts_skipped);
    assert!(!result.artifacts_truncated);
    assert!(!result.limits_hit.contains(&LimitKind::Artifacts), "{:?}", result.limits_hit);
}

#[test]
fn symlinks_are_listed_as_skipped_and_never_followed() {
    // A host file with content no other file has: if the walk followed the link, its hash
    // would show up.
    let canary_dir = tempfile::tempdir().expect("canary dir");
    let canary = canary_dir.path().join("canary");
    let canary_bytes = format!("runbox canary {}\n", random_hex());
    std::fs::write(&canary, &canary_bytes).expect("write canary");
    let passwd_sha = sha256_hex(&std::fs::read("/etc/passwd").expect("host /etc/passwd"));

    let code = r#"
set -e
ln -s /etc/passwd passwd
ln -s "$1" canary
ln -s /etc etc_dir
mkdir real
echo inside > real/file
ln -s real real_dir_link
ln -s real/file real_file_link
ln -s /nowhere/at/all dangling
"#;
    let mut request = sh(code);
    request["args"] = json!([canary.to_str().expect("utf-8 temp path")]);
    let ran = Runbox::new().run(&request);
    let result = assert_verdict(&ran, Verdict::Ok);

    for link in ["passwd", "canary", "etc_dir", "real_dir_link", "real_file_link", "dangling"] {
        let entry = skipped(&result, link)
            .unwrap_or_else(|| panic!("{link} not in artifacts_skipped: {:?}", result.artifacts_skipped));
        assert_eq!(entry.reason, "symlink", "{entry:?}");
        assert_eq!(entry.size_bytes, None, "a symlink has no size to report: {entry:?}");
    }
    let paths: Vec<&str> = result.artifacts.iter().map(|a| a.path.as_str()).collect();
    assert_eq!(paths, ["main.sh", "real/file"], "only the regular files are artifacts");
    for a in &result.artifacts {
        assert_ne!(a.sha256, passwd_sha, "{} has the hash of /etc/passwd", a.path);
        assert_ne!(a.sha256, sha256_hex(canary_bytes.as_bytes()), "{} has the hash of the host canary", a.path);
    }
    assert!(!result.artifacts_truncated, "a symlink is not a cap");
    assert_eq!(std::fs::read_to_string(&canary).expect("canary still there"), canary_bytes);
}

#[test]
fn fifos_sockets_and_odd_entries_are_skipped_without_blocking_the_run() {
    let code = r#"
import os, socket
os.mkfifo("pipe")
os.makedirs("sub")
os.mkfifo("sub/pipe")
s = socket.socket(socket.AF_UNIX)
s.bind("sock")
# A name that is not UTF-8.
open(b"bad-\xff-name", "wb").close()
# Directories nested past the walk's depth bound (64 below /workspace).
os.makedirs("/".join(["d"] * 70))
with open("/".join(["d"] * 10) + "/shallow.txt", "w") as f: f.write("ok")
"#;
    let began = Instant::now();
    let ran = Runbox::new().run(&python(code));
    let elapsed = began.elapsed();
    let result = assert_verdict(&ran, Verdict::Ok);
    assert!(elapsed < PROMPT, "the run took {elapsed:?}; a FIFO must never be opened");

    for (path, reason) in
        [("pipe", "fifo"), ("sub/pipe", "fifo"), ("sock", "socket"), ("bad-\u{fffd}-name", "non_utf8_name")]
    {
        let entry = skipped(&result, path)
            .unwrap_or_else(|| panic!("{path} not in artifacts_skipped: {:?}", result.artifacts_skipped));
        assert_eq!(entry.reason, reason, "{entry:?}");
    }
    let too_deep: Vec<&SkippedArtifact> = result.artifacts_skipped.iter().filter(|s| s.reason == "too_deep").collect();
    assert_eq!(too_deep.len(), 1, "{:?}", result.artifacts_skipped);
    assert_eq!(
        too_deep[0].path.split('/').count(),
        65,
        "the first directory not entered is at depth 65: {:?}",
        too_deep[0]
    );
    let shallow = format!("{}/shallow.txt", ["d"; 10].join("/"));
    assert_eq!(artifact(&result, &shallow), Some(&expected(&shallow, b"ok")));
    assert!(artifact(&result, "pipe").is_none() && artifact(&result, "sock").is_none());
}

#[test]
fn a_sparse_file_past_the_hash_budget_is_skipped_unread() {
    // 1 GiB apparent size, no block used. The file-size rlimit is disk_bytes, so the
    // largest sparse file a run can make is disk_bytes: ask for the runtime's maximum.
    const SIZE: u64 = 1 << 30;
    let request = with_limit(sh(&format!("truncate -s {SIZE} big")), "disk_bytes", SIZE);
    let began = Instant::now();
    let ran = Runbox::new().run(&request);
    let elapsed = began.elapsed();
    let result = assert_verdict(&ran, Verdict::Ok);

    let big = skipped(&result, "big")
        .unwrap_or_else(|| panic!("big not skipped: {:?} {:?}", result.artifacts, result.artifacts_skipped));
    assert_eq!(big.reason, "too_large");
    assert_eq!(big.size_bytes, Some(SIZE));
    assert!(artifact(&result, "big").is_none());
    assert!(result.artifacts_truncated);
    assert!(result.limits_hit.contains(&LimitKind::Artifacts), "{:?}", result.limits_hit);
    // Hashing 1 GiB would take many seconds; skipping it takes none.
    assert!(elapsed < PROMPT, "the run took {elapsed:?}");
    assert!(result.timings.cleanup_ms < 5_000, "cleanup took {} ms: was the file read?", result.timings.cleanup_ms);
}

#[test]
fn a_terabyte_sparse_file_cannot_be_made_within_a_small_disk() {
    // RLIMIT_FSIZE is set to disk_bytes, so even a sparse file stops at the disk size: the
    // 1 TiB truncate fails and nothing larger than disk_bytes can reach the artifact walk.
    const DISK: u64 = 1 << 20;
    let request = with_limit(sh("truncate -s 1T big; echo status=$?"), "disk_bytes", DISK);
    let began = Instant::now();
    let ran = Runbox::new().run(&request);
    let elapsed = began.elapsed();
    let result = ran.result();
    assert!(elapsed < PROMPT, "the run took {elapsed:?}");
    assert!(!stdout_text(&result).contains("status=0"), "truncate -s 1T succeeded: {}", stdout_text(&result));
    for a in &result.artifacts {
        assert!(a.size_bytes <= DISK, "{a:?} is larger than disk_bytes");
    }
    for s in &result.artifacts_skipped {
        assert!(s.size_bytes.unwrap_or(0) <= DISK, "{s:?} is larger than disk_bytes");
    }
}

/// RLIMIT_FSIZE (set to `disk_bytes`) refuses a file whose size passes the disk, even a sparse
/// one that would take no space. A program that handles EFBIG itself keeps its own verdict:
/// runbox reports the disk limit only when it can observe it (a full filesystem, or the
/// program killed by SIGXFSZ with the disk used up), never by guessing from an exit status.
#[test]
fn the_file_size_cap_refuses_a_file_larger_than_the_disk() {
    // Python ignores SIGXFSZ, so the cap shows as EFBIG and the program exits 1.
    let code = "import os\ntry:\n    with open('big', 'wb') as f:\n        f.truncate(1 << 40)\nexcept OSError as e:\n    print(e.errno)\nprint(os.path.getsize('big'))\n";
    let ran = Runbox::new().run(&with_limit(python(code), "disk_bytes", 1 << 20));
    let result = assert_verdict(&ran, Verdict::Ok);
    assert_eq!(stdout_text(&result), format!("{}\n0\n", libc::EFBIG), "{}", ran.json);
    assert_eq!(artifact(&result, "big").map(|a| a.size_bytes), Some(0));
}

#[test]
fn the_hash_budget_lists_what_fits_and_skips_the_rest() {
    // Two sparse 40 MiB files: together past the 64 MiB budget, each within it alone.
    const SIZE: usize = 40 << 20;
    let code = format!("truncate -s {SIZE} a; truncate -s {SIZE} b; echo small > small");
    let ran = Runbox::new().run(&sh(&code));
    let result = assert_verdict(&ran, Verdict::Ok);

    let zeros = sha256_hex(&vec![0u8; SIZE]);
    let hashed: Vec<&Artifact> = result.artifacts.iter().filter(|a| a.path == "a" || a.path == "b").collect();
    assert_eq!(hashed.len(), 1, "exactly one 40 MiB file fits the budget: {:?}", result.artifacts);
    assert_eq!((hashed[0].size_bytes, hashed[0].sha256.as_str()), (SIZE as u64, zeros.as_str()));
    let other = if hashed[0].path == "a" { "b" } else { "a" };
    let entry =
        skipped(&result, other).unwrap_or_else(|| panic!("{other} not skipped: {:?}", result.artifacts_skipped));
    assert_eq!((entry.reason.as_str(), entry.size_bytes), ("over_total_bytes", Some(SIZE as u64)));
    // The budget left still takes a small file, wherever the walk met it.
    assert_eq!(artifact(&result, "small"), Some(&expected("small", b"small\n")));
    assert!(result.artifacts.iter().map(|a| a.size_bytes).sum::<u64>() <= MAX_HASHED_BYTES);
    assert!(result.artifacts_truncated);
    assert!(result.limits_hit.contains(&LimitKind::Artifacts), "{:?}", result.limits_hit);
}

#[test]
fn past_a_thousand_files_the_rest_are_listed_as_over_count() {
    // 1100 files plus main.sh: 1101 regular files for a cap of 1000.
    let code = "i=0; while [ $i -lt 1100 ]; do echo $i > f$i; i=$((i+1)); done";
    let ran = Runbox::new().run(&sh(code));
    let result = assert_verdict(&ran, Verdict::Ok);

    assert_eq!(result.artifacts.len(), MAX_ARTIFACTS);
    let over: Vec<&SkippedArtifact> = result.artifacts_skipped.iter().filter(|s| s.reason == "over_count").collect();
    assert_eq!(over.len(), 1101 - MAX_ARTIFACTS, "{:?}", result.artifacts_skipped);
    assert_eq!(result.artifacts_skipped.len(), over.len(), "only over_count entries expected");
    // Which files the walk meets first is the directory's order, so main.sh may be cut too.
    let content = |path: &str| match path.strip_prefix('f') {
        Some(n) if n.parse::<usize>().is_ok() => format!("{n}\n"),
        _ if path == "main.sh" => code.to_string(),
        _ => panic!("unexpected entry {path:?}"),
    };
    for s in &over {
        assert_eq!(s.size_bytes, Some(content(&s.path).len() as u64), "{s:?}");
    }
    // Each listed file is still hashed right.
    for a in &result.artifacts {
        assert_eq!(a, &expected(&a.path, content(&a.path).as_bytes()));
    }
    assert_sorted(&result);
    assert!(result.artifacts_truncated);
    assert!(result.limits_hit.contains(&LimitKind::Artifacts), "{:?}", result.limits_hit);
}

#[test]
fn files_in_tmp_and_dev_shm_are_not_artifacts() {
    let code = "echo scratch > /tmp/scratch.txt; mkdir /tmp/dir; echo x > /tmp/dir/y; echo shared > /dev/shm/seg; cat /tmp/scratch.txt /dev/shm/seg";
    let ran = Runbox::new().run(&sh(code));
    let result = assert_verdict(&ran, Verdict::Ok);
    // The writes happened...
    assert_eq!(stdout_text(&result), "scratch\nshared\n");
    // ...and only /workspace is listed.
    let paths: Vec<&str> = result.artifacts.iter().map(|a| a.path.as_str()).collect();
    assert_eq!(paths, ["main.sh"]);
    assert!(result.artifacts_skipped.is_empty(), "{:?}", result.artifacts_skipped);
}

#[test]
fn base64_inputs_arrive_byte_exact() {
    let all_bytes: Vec<u8> = (0..=255u8).collect();
    let request = json!({
        "runtime": "sh",
        "files": [
            {"path": "main.sh", "content": "sha256sum data/all.bin; wc -c < data/all.bin"},
            {"path": "data/all.bin", "content": base64(&all_bytes), "encoding": "base64"},
        ],
    });
    let ran = Runbox::new().run(&request);
    let result = assert_verdict(&ran, Verdict::Ok);
    let want = sha256_hex(&all_bytes);
    // Inside the sandbox...
    assert_eq!(stdout_text(&result), format!("{want}  data/all.bin\n256\n"));
    // ...and as an artifact.
    assert_eq!(artifact(&result, "data/all.bin"), Some(&expected("data/all.bin", &all_bytes)));
}

#[test]
fn executable_inputs_run_directly_and_others_do_not() {
    let request = json!({
        "runtime": "sh",
        "files": [
            {"path": "main.sh", "content": "./tool.sh one; echo tool=$?; ./plain.sh; echo plain=$?; stat -c '%a %n' tool.sh plain.sh"},
            {"path": "tool.sh", "content": "#!/bin/sh\necho \"tool ran with $1\"\n", "executable": true},
            {"path": "plain.sh", "content": "#!/bin/sh\necho plain ran\n"},
        ],
    });
    let ran = Runbox::new().run(&request);
    let result = assert_verdict(&ran, Verdict::Ok);
    assert_eq!(
        stdout_text(&result),
        "tool ran with one\ntool=0\nplain=126\n755 tool.sh\n644 plain.sh\n",
        "stderr: {}",
        stderr_text(&result)
    );
}

#[test]
fn files_the_program_made_unreadable_are_still_listed() {
    // The walk runs on the host side, not as the sandbox's uid: mode 000 hides nothing.
    let code = "mkdir d; echo secret > d/f; chmod 000 d/f d; echo g > g; chmod 000 g";
    let ran = Runbox::new().run(&sh(code));
    let result = assert_verdict(&ran, Verdict::Ok);
    assert_eq!(artifact(&result, "d/f"), Some(&expected("d/f", b"secret\n")));
    assert_eq!(artifact(&result, "g"), Some(&expected("g", b"g\n")));
    assert!(result.artifacts_skipped.is_empty(), "{:?}", result.artifacts_skipped);
    assert!(result.cleanup.ok, "{:?}", result.cleanup);
}
