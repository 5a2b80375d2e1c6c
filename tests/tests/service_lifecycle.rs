//! `runbox serve` across a run's life and the service's: live events, cancel, a crash (kill -9)
//! and restart, and a graceful drain.

mod service_support;

use std::path::Path;
use std::time::{Duration, Instant};

use base64::Engine as _;
use runbox_tests::sh;
use service_support::*;

#[test]
fn events_deliver_output_before_the_run_ends_then_the_result() {
    let server = Server::start(Some(&config("")));
    let accepted = server.post_run(&sh("echo first; sleep 2; echo second"), "?wait=false", KEY, &[]).json();
    let run_id = accepted["run_id"].as_str().unwrap();
    let mut events = server.events(&format!("/v1/runs/{run_id}/events"), KEY);
    let started = Instant::now();
    let first = loop {
        let event = events.next().expect("the stream ended before any output");
        assert_ne!(event.name, "result", "the result came before any output: {:?}", event.data);
        if event.name == "output" {
            break event;
        }
    };
    let data = base64::engine::general_purpose::STANDARD.decode(first.data["data_base64"].as_str().unwrap()).unwrap();
    assert_eq!((first.data["stream"].as_str(), data.as_slice()), (Some("stdout"), &b"first\n"[..]));
    assert!(started.elapsed() < Duration::from_millis(1500), "output came late: {:?}", started.elapsed());
    // While we hold the first line, the run is still going.
    assert_eq!(server.get(&format!("/v1/runs/{run_id}"), KEY).ok()["status"], "running");
    let mut names = Vec::new();
    let result = loop {
        let event = events.next().expect("the stream ended without a result");
        names.push(event.name.clone());
        if event.name == "result" {
            break event;
        }
    };
    assert_eq!(result.data["result"]["stdout"]["text"], "first\nsecond\n");
    assert!(names.contains(&"output".to_string()), "{names:?}");
    assert!(events.next().is_none(), "the stream ends after the result");
    // A run that has ended streams its result alone.
    let mut again = server.events(&format!("/v1/runs/{run_id}/events"), KEY);
    assert_eq!(again.next().expect("a result").name, "result");
    assert!(again.next().is_none());
}

#[test]
fn cancel_mid_run_kills_the_whole_tree_and_reports_cancelled() {
    let server = Server::start(Some(&config("")));
    let accepted = server.post_run(&sh("sleep 60 & sleep 60 & echo ready; wait"), "?wait=false", KEY, &[]).json();
    let run_id = accepted["run_id"].as_str().unwrap();
    let mut events = server.events(&format!("/v1/runs/{run_id}/events"), KEY);
    while events.next().expect("output").name != "output" {}
    let begun = Instant::now();
    let auth = format!("Bearer {KEY}");
    let record = server.request("POST", &format!("/v1/runs/{run_id}/cancel"), &[("Authorization", &auth)], b"").ok();
    assert!(begun.elapsed() < Duration::from_secs(10), "cancel took {:?}", begun.elapsed());
    assert_eq!(record["status"], "finished");
    assert_eq!(record["result"]["verdict"], "cancelled");
    assert_eq!(record["result"]["cleanup"]["ok"], true, "{record}");
    assert_eq!(record["result"]["stdout"]["text"], "ready\n", "output written before the cancel is kept");
    assert!(sandbox_processes(server.state_dir()).is_empty());
    assert_eq!(events.next().expect("the result event").name, "result");
}

#[test]
fn kill_9_mid_run_then_restart_interrupts_the_run_and_leaves_nothing_behind() {
    let mut server = Server::start(Some(&config("")));
    let state = server.state_dir().to_path_buf();
    let request = sh("echo started; sleep 60");
    let accepted = server.post_run(&request, "?wait=false", KEY, &[("Idempotency-Key", "crash-1")]).json();
    let run_id = accepted["run_id"].as_str().unwrap().to_string();
    let mut events = server.events(&format!("/v1/runs/{run_id}/events"), KEY);
    while events.next().expect("output").name != "output" {}
    assert!(!sandbox_processes(&state).is_empty(), "the run's sandbox process is there before the crash");
    assert!(cgroup_exists(&run_id), "the run's cgroup is there before the crash");
    server.kill9();

    let server = Server::start_in(&state, None);
    let record = server.get(&format!("/v1/runs/{run_id}"), KEY).ok();
    assert_eq!(record["status"], "interrupted", "{record}");
    assert!(record["result"].is_null(), "an unknown outcome has no result, and no verdict: {record}");
    assert!(record["error"]["message"].as_str().unwrap().contains("outcome is unknown"), "{record}");
    // Nothing survives: processes, cgroups, mounts, workspaces, incoming artifacts.
    assert!(sandbox_processes(&state).is_empty(), "{:?}", sandbox_processes(&state));
    assert!(!cgroup_exists(&run_id), "cgroup of {run_id} left");
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mounts.contains(state.to_str().unwrap()), "mounts left under {}", state.display());
    let runs = std::fs::read_dir(state.join("serve/sandboxes/runs")).map(|d| d.count()).unwrap_or(0);
    assert_eq!(runs, 0, "workspaces left");
    let incoming = std::fs::read_dir(state.join("serve/incoming")).map(|d| d.count()).unwrap_or(0);
    assert_eq!(incoming, 0, "incoming artifacts left");
    // The idempotent retry returns the interrupted record: no second execution.
    let retry = server.post_run(&request, "", KEY, &[("Idempotency-Key", "crash-1")]).ok();
    assert_eq!(retry["run_id"], run_id.as_str());
    assert_eq!(retry["status"], "interrupted");
    let metrics = String::from_utf8(server.get("/metrics", KEY).body).unwrap();
    assert_eq!(metric(&metrics, "runbox_runs_total{runtime=\"sh\",outcome=\"ok\"}"), 0.0, "{metrics}");
}

#[test]
fn sigterm_drains_accepted_runs_and_refuses_new_ones() {
    let mut server = Server::start(Some(&config("")));
    let state = server.state_dir().to_path_buf();
    let accepted = server.post_run(&sh("sleep 1.5; echo finished"), "?wait=false", KEY, &[]).json();
    let run_id = accepted["run_id"].as_str().unwrap().to_string();
    wait_for(&server, &run_id, Duration::from_secs(20), |r| r["status"] == "running");
    server.sigterm();
    let refused = loop {
        let response = server.post_run(&sh("true"), "", KEY, &[]);
        if response.status == 503 {
            break response;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(refused.error(503)["code"], "draining");
    assert!(refused.header("retry-after").is_some());
    assert_eq!(server.request("GET", "/readyz", &[], b"").status, 503);
    assert!(server.wait_exit(Duration::from_secs(30)).success());
    // The accepted run finished normally before the service stopped.
    let server = Server::start_in(&state, None);
    let record = server.get(&format!("/v1/runs/{run_id}"), KEY).ok();
    assert_eq!(record["status"], "finished");
    assert_eq!(record["result"]["stdout"]["text"], "finished\n");
}

/// `runbox run` processes of this service (children started with its sandbox state dir).
fn sandbox_processes(state: &Path) -> Vec<u32> {
    let sandboxes = std::fs::canonicalize(state).unwrap().join("serve/sandboxes");
    let wanted = sandboxes.to_str().unwrap().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let zombie = stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
            !zombie && cmdline.split(|b| *b == 0).any(|arg| arg == wanted.as_bytes())
        })
        .collect()
}

/// Whether a cgroup of the run exists in any hierarchy (v1: memory, pids, cpu...; v2: one).
fn cgroup_exists(run_id: &str) -> bool {
    let Ok(hierarchies) = std::fs::read_dir("/sys/fs/cgroup") else { return false };
    let mut dirs: Vec<_> = hierarchies.filter_map(|e| Some(e.ok()?.path())).collect();
    dirs.push("/sys/fs/cgroup".into());
    dirs.iter().any(|h| h.join("runbox").join(run_id).exists())
}
