//! `runbox serve` under load, over real HTTP on loopback: many concurrent runs, a full queue,
//! and concurrent retries with one idempotency key.

mod service_support;

use std::collections::HashSet;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use runbox_tests::sh;
use serde_json::Value;
use service_support::*;

#[test]
fn two_hundred_concurrent_runs_are_all_answered_each_with_its_own_result() {
    let server = Arc::new(Server::start(Some(&config("[admission]\nqueue_depth = 256"))));
    const RUNS: usize = 200;
    let barrier = Arc::new(Barrier::new(RUNS));
    let clients: Vec<_> = (0..RUNS)
        .map(|i| {
            let (server, barrier) = (server.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                let record = server.post_run(&sh(&format!("echo request-{i}")), "", KEY, &[]).ok();
                (i, record)
            })
        })
        .collect();
    let mut run_ids = HashSet::new();
    for client in clients {
        let (i, record) = client.join().expect("client thread");
        assert_eq!(record["status"], "finished", "{record}");
        assert_eq!(record["result"]["verdict"], "ok", "{record}");
        assert_eq!(record["result"]["stdout"]["text"], format!("request-{i}\n"), "answered with another's result");
        assert_eq!(record["result"]["run_id"], record["run_id"]);
        assert!(run_ids.insert(record["run_id"].as_str().unwrap().to_string()), "a run id answered twice");
    }
    assert_eq!(run_ids.len(), RUNS);
    // Every one is in the ledger as it was answered.
    for run_id in run_ids.iter().take(20) {
        assert_eq!(server.get(&format!("/v1/runs/{run_id}"), KEY).ok()["status"], "finished");
    }
    let metrics = String::from_utf8(server.get("/metrics", KEY).body).unwrap();
    assert_eq!(metric(&metrics, "runbox_runs_total{runtime=\"sh\",outcome=\"ok\"}"), RUNS as f64, "{metrics}");
    assert_eq!(metric(&metrics, "runbox_queue_depth"), 0.0);
    assert_eq!(metric(&metrics, "runbox_active_runs"), 0.0);
    let leftovers = std::fs::read_dir(server.state_dir().join("serve/sandboxes/runs")).map(|d| d.count()).unwrap_or(0);
    assert_eq!(leftovers, 0, "workspaces left behind");
}

#[test]
fn a_full_queue_answers_429_with_retry_after_and_recovers() {
    let server = Server::start(Some(&config("[admission]\nmax_concurrent_runs = 1\nqueue_depth = 2")));
    let long = sh("sleep 30");
    let mut accepted = Vec::new();
    // One runs, two wait: the queue is full.
    for _ in 0..3 {
        let response = server.post_run(&long, "?wait=false", KEY, &[]);
        assert_eq!(response.status, 202, "{}", response.json());
        accepted.push(response.json()["run_id"].as_str().unwrap().to_string());
    }
    wait_for(&server, &accepted[0], Duration::from_secs(20), |r| r["status"] == "running");
    let full = server.post_run(&sh("true"), "", KEY, &[]);
    assert_eq!(full.error(429)["code"], "queue_full");
    let retry_after: u64 = full.header("retry-after").expect("Retry-After").parse().unwrap();
    assert!((1..=30).contains(&retry_after), "{retry_after}");
    // Cancelling frees the queue; a queued run that is cancelled never ran.
    let auth = format!("Bearer {KEY}");
    for run_id in accepted.iter().rev() {
        let record =
            server.request("POST", &format!("/v1/runs/{run_id}/cancel"), &[("Authorization", &auth)], b"").ok();
        let outcome = record["result"]["verdict"].as_str().unwrap_or(record["status"].as_str().unwrap()).to_string();
        assert!(outcome == "cancelled", "{record}");
    }
    let queued = server.get(&format!("/v1/runs/{}", accepted[2]), KEY).ok();
    assert_eq!((queued["status"].as_str(), queued["result"].is_null()), (Some("cancelled"), true), "{queued}");
    let metrics = String::from_utf8(server.get("/metrics", KEY).body).unwrap();
    assert!(metric(&metrics, "runbox_admission_refused_total{reason=\"queue_full\"}") >= 1.0, "{metrics}");
}

#[test]
fn a_tenant_over_its_own_queue_gets_429_while_others_are_admitted() {
    let server = Server::start(Some(&config("[admission]\nmax_concurrent_runs = 2\nqueue_depth = 64")));
    // `limited` runs one at a time and may have two waiting.
    let first = server.post_run(&sh("sleep 4"), "?wait=false", LIMITED_KEY, &[]).json();
    wait_for_tenant(&server, first["run_id"].as_str().unwrap());
    for _ in 0..2 {
        assert_eq!(server.post_run(&sh("sleep 4"), "?wait=false", LIMITED_KEY, &[]).status, 202);
    }
    let refused = server.post_run(&sh("true"), "?wait=false", LIMITED_KEY, &[]);
    let e = refused.error(429);
    assert!(e["message"].as_str().unwrap().contains("tenant \"limited\""), "{e}");
    assert!(refused.header("retry-after").is_some());
    // The global queue has room: another tenant is admitted and runs beside it.
    assert_eq!(server.post_run(&sh("echo other"), "", KEY, &[]).ok()["result"]["stdout"]["text"], "other\n");
}

fn wait_for_tenant(server: &Server, run_id: &str) {
    let begun = std::time::Instant::now();
    while server.get(&format!("/v1/runs/{run_id}"), LIMITED_KEY).ok()["status"] != "running" {
        assert!(begun.elapsed() < Duration::from_secs(20), "never ran");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn concurrent_retries_with_one_idempotency_key_execute_once() {
    let server = Arc::new(Server::start(Some(&config(""))));
    const RETRIES: usize = 24;
    let barrier = Arc::new(Barrier::new(RETRIES));
    let request = sh("sleep 0.5; echo once");
    let clients: Vec<_> = (0..RETRIES)
        .map(|i| {
            let (server, barrier, request) = (server.clone(), barrier.clone(), request.clone());
            std::thread::spawn(move || {
                barrier.wait();
                // Half wait for the result, half do not: both must see the same run.
                let query = if i % 2 == 0 { "" } else { "?wait=false" };
                server.post_run(&request, query, KEY, &[("Idempotency-Key", "job-7")])
            })
        })
        .collect();
    let responses: Vec<_> = clients.into_iter().map(|c| c.join().expect("client")).collect();
    let run_ids: HashSet<String> =
        responses.iter().map(|r| r.json()["run_id"].as_str().expect("a run id").to_string()).collect();
    assert_eq!(run_ids.len(), 1, "more than one run for one key: {run_ids:?}");
    for response in &responses {
        let body = response.json();
        match response.status {
            200 => assert_eq!(body["result"]["stdout"]["text"], "once\n", "{body}"),
            202 => {}
            other => panic!("{other}: {body}"),
        }
    }
    let run_id = run_ids.into_iter().next().unwrap();
    wait_for(&server, &run_id, Duration::from_secs(30), |r| r["status"] == "finished");
    // A later retry gets the recorded result; the same key with another request gets 422.
    let again = server.post_run(&request, "", KEY, &[("Idempotency-Key", "job-7")]).ok();
    assert_eq!(again["run_id"], Value::String(run_id.clone()));
    let e = server.post_run(&sh("echo other"), "", KEY, &[("Idempotency-Key", "job-7")]).error(422);
    assert_eq!(e["field"], "Idempotency-Key");
    assert!(e["message"].as_str().unwrap().contains(&run_id), "{e}");
    // Keys are per tenant: another tenant's same key is another run.
    let other = server.post_run(&request, "", LIMITED_KEY, &[("Idempotency-Key", "job-7")]).ok();
    assert_ne!(other["run_id"], Value::String(run_id));
    let metrics = String::from_utf8(server.get("/metrics", KEY).body).unwrap();
    assert_eq!(
        metric(&metrics, "runbox_runs_total{runtime=\"sh\",outcome=\"ok\"}"),
        2.0,
        "executed once per tenant: {metrics}"
    );
}
