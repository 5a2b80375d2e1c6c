//! The flags a service uses to drive `runbox run`: its own run id, live output events, an
//! artifact store, and cancellation when the service dies.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use runbox_tests::*;
use serde_json::Value;

fn decode(events: &str, stream: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for line in events.lines() {
        let event: Value = serde_json::from_str(line).expect("an event is one JSON object per line");
        if event["event"] == "output" && event["stream"] == stream {
            let data = event["data_base64"].as_str().expect("data");
            out.extend(base64::engine::general_purpose::STANDARD.decode(data).expect("base64"));
        }
    }
    out
}

#[test]
fn events_carry_live_output_redacted_and_bounded() {
    let rb = Runbox::new();
    let events = rb.state_dir().join("events.jsonl");
    std::fs::write(&events, "").unwrap();
    let code =
        "import sys\nprint('one', flush=True)\nprint('token=s3cr3t-v4lue', flush=True)\nsys.stderr.write('e' * 5000)\n";
    let mut request = with_limit(python(code), "output_bytes", 1000);
    request["secrets"] = serde_json::json!({"TOKEN": "s3cr3t-v4lue"});
    let output = rb
        .command()
        .args(["run", "--json", "--request", "-", "--run-id", "svc-run-1", "--events"])
        .arg(&events)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(&serde_json::to_vec(&request).unwrap())?;
            child.wait_with_output()
        })
        .expect("run runbox");
    let result: RunResult = serde_json::from_slice(&output.stdout).expect("a RunResult");
    assert_eq!(result.run_id, "svc-run-1");
    assert_eq!(result.verdict, Verdict::Ok);
    let log = std::fs::read_to_string(&events).unwrap();
    assert_eq!(decode(&log, "stdout"), b"one\ntoken=[REDACTED:TOKEN]\n");
    assert!(!log.contains(&base64::engine::general_purpose::STANDARD.encode("s3cr3t")), "{log}");
    assert_eq!(decode(&log, "stderr"), vec![b'e'; 1000], "live output stops at output_bytes");
    assert!(log.lines().any(|l| l.contains("\"truncated\"") && l.contains("stderr")), "{log}");
    assert!(rb.leftover_runs().is_empty());
}

#[test]
fn artifacts_are_kept_in_the_store_by_digest() {
    let rb = Runbox::new();
    let store = rb.state_dir().join("store");
    let ran = rb.run_with_args(&sh("printf 'a,b\\n1,2\\n' > out.csv"), &["--artifact-store", store.to_str().unwrap()]);
    let result = assert_verdict(&ran, Verdict::Ok);
    let csv = result.artifacts.iter().find(|a| a.path == "out.csv").expect("out.csv");
    assert_eq!(std::fs::read(store.join(&csv.sha256)).unwrap(), b"a,b\n1,2\n");
    assert_eq!(csv.sha256, sha256_hex(b"a,b\n1,2\n"));
}

#[test]
fn a_run_id_that_is_not_a_plain_name_is_refused() {
    let rb = Runbox::new();
    for bad in ["../x", "", "a b", &"x".repeat(65)] {
        let ran = rb.run_with_args(&sh("true"), &["--run-id", bad]);
        let (field, message) = ran.rejection();
        assert_eq!(field, "run_id", "{bad:?}");
        assert!(message.contains("letters, digits"), "{message}");
    }
    assert!(rb.leftover_runs().is_empty());
}

/// With --die-with-parent, the death of whoever started runbox (a crashed service) cancels the
/// run: the sandbox is torn down and nothing is left behind.
#[test]
fn the_parents_death_cancels_the_run_and_cleans_up() {
    let rb = Runbox::new();
    let result_file = rb.state_dir().join("result.json");
    let request_file = rb.state_dir().join("request.json");
    std::fs::write(&request_file, serde_json::to_vec(&sh("touch started; sleep 60")).unwrap()).unwrap();
    // A parent shell that starts runbox in the background and waits; killing it with SIGKILL
    // is the service crashing.
    let script = format!(
        "{} --state-dir {} run --json --die-with-parent --request {} > {} & wait",
        runbox_bin().display(),
        rb.state_dir().display(),
        request_file.display(),
        result_file.display()
    );
    let mut parent = Command::new("sh").arg("-c").arg(&script).spawn().expect("parent shell");
    let begun = Instant::now();
    while !rb
        .leftover_runs()
        .iter()
        .any(|run| rb.state_dir().join("runs").join(run).join("fs/workspace/started").exists())
    {
        assert!(begun.elapsed() < Duration::from_secs(20), "the run never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    parent.kill().expect("kill the parent");
    parent.wait().unwrap();
    let begun = Instant::now();
    let result = loop {
        let text = std::fs::read_to_string(&result_file).unwrap_or_default();
        if let Ok(result) = serde_json::from_str::<RunResult>(&text) {
            break result;
        }
        assert!(begun.elapsed() < Duration::from_secs(20), "no result after the parent died: {text:?}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(result.verdict, Verdict::Cancelled);
    assert!(result.cleanup.ok, "{:?}", result.cleanup);
    assert!(rb.leftover_runs().is_empty(), "{:?}", rb.leftover_runs());
}
