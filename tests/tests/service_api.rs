//! `runbox serve` over real HTTP on loopback: every endpoint, every error status, auth and
//! tenant policy, redaction and logs. The runs are real sandboxes.

mod service_support;

use std::time::Duration;

use base64::Engine as _;
use runbox_tests::{sh, sha256_hex, with_limit};
use serde_json::{Value, json};
use service_support::*;

#[test]
fn the_first_start_generates_a_key_prints_it_once_and_stores_only_its_hash() {
    let state = tempfile::tempdir().unwrap();
    let mut server = Server::start_in(state.path(), None);
    let key = server
        .banner
        .split_whitespace()
        .find(|w| w.starts_with("rbx_"))
        .unwrap_or_else(|| panic!("no key printed: {}", server.banner))
        .to_string();
    let config = std::fs::read_to_string(state.path().join("serve/config.toml")).unwrap();
    assert!(!config.contains(&key), "the key itself is not stored");
    assert!(config.contains(&sha256_hex(key.as_bytes())), "its hash is");
    assert_eq!(server.get("/v1/runtimes", &key).status, 200);
    assert_eq!(server.get("/v1/runtimes", "rbx_wrong").error(401)["code"], "unauthorized");
    server.sigterm();
    assert!(server.wait_exit(Duration::from_secs(20)).success());
    let again = Server::start_in(state.path(), None);
    assert!(!again.banner.contains("rbx_"), "printed only once: {}", again.banner);
    assert_eq!(again.get("/v1/runtimes", &key).status, 200, "the stored hash still admits the key");
}

#[test]
fn health_readiness_openapi_and_metrics() {
    let server = Server::start(Some(&config("")));
    assert_eq!(server.request("GET", "/healthz", &[], b"").ok()["status"], "ok");
    assert_eq!(server.request("GET", "/readyz", &[], b"").ok()["status"], "ready");
    let spec = server.request("GET", "/openapi.json", &[], b"").ok();
    assert_eq!(spec["openapi"], "3.1.0");
    assert!(spec["paths"]["/v1/runs"]["post"]["requestBody"].is_object());
    assert!(spec["components"]["schemas"]["RunRequest"]["properties"]["runtime"].is_object());
    server.request("GET", "/metrics", &[], b"").error(401);
    server.post_run(&sh("echo hi"), "", KEY, &[]).ok();
    let metrics = server.get("/metrics", KEY);
    assert_eq!(metrics.status, 200);
    assert!(metrics.header("content-type").unwrap().starts_with("text/plain; version=0.0.4"));
    let text = String::from_utf8(metrics.body).unwrap();
    assert_eq!(metric(&text, "runbox_runs_total{runtime=\"sh\",outcome=\"ok\"}"), 1.0, "{text}");
    assert_eq!(metric(&text, "runbox_run_duration_seconds_count{runtime=\"sh\"}"), 1.0, "{text}");
    assert_eq!(metric(&text, "runbox_queue_wait_seconds_count"), 1.0, "{text}");
    assert!(text.contains("runbox_queue_depth 0") && text.contains("runbox_active_runs 0"), "{text}");
}

#[test]
fn a_run_waits_by_default_and_its_record_and_artifacts_can_be_fetched() {
    let server = Server::start(Some(&config("")));
    let response =
        server.post_run(&sh("echo hello; printf 'a,b\\n' > out.csv; mkdir d; echo x > d/y.txt"), "", KEY, &[]);
    let record = response.ok();
    assert_eq!(record["status"], "finished");
    assert_eq!(record["result"]["verdict"], "ok");
    assert_eq!(record["result"]["stdout"]["text"], "hello\n");
    let run_id = record["run_id"].as_str().unwrap();
    assert_eq!(response.header("location"), Some(format!("/v1/runs/{run_id}").as_str()));
    assert_eq!(server.get(&format!("/v1/runs/{run_id}"), KEY).ok(), record);

    let csv = server.get(&format!("/v1/runs/{run_id}/artifacts/out.csv"), KEY);
    assert_eq!((csv.status, csv.body.as_slice()), (200, &b"a,b\n"[..]));
    let etag = format!("\"{}\"", sha256_hex(b"a,b\n"));
    assert_eq!(csv.header("etag"), Some(etag.as_str()));
    let nested = server.get(&format!("/v1/runs/{run_id}/artifacts/d/y.txt"), KEY);
    assert_eq!(nested.body, b"x\n");
    let auth = format!("Bearer {KEY}");
    let cached = server.request(
        "GET",
        &format!("/v1/runs/{run_id}/artifacts/out.csv"),
        &[("Authorization", &auth), ("If-None-Match", &etag)],
        b"",
    );
    assert_eq!(cached.status, 304);
    server.get(&format!("/v1/runs/{run_id}/artifacts/missing.txt"), KEY).error(404);
    // Another tenant sees neither the run nor its artifacts.
    server.get(&format!("/v1/runs/{run_id}"), LIMITED_KEY).error(404);
    server.get(&format!("/v1/runs/{run_id}/artifacts/out.csv"), LIMITED_KEY).error(404);
}

#[test]
fn wait_false_answers_202_and_the_run_can_be_followed() {
    let server = Server::start(Some(&config("")));
    let response = server.post_run(&sh("sleep 0.3; echo later"), "?wait=false", KEY, &[]);
    assert_eq!(response.status, 202, "{}", response.json());
    let accepted = response.json();
    let run_id = accepted["run_id"].as_str().unwrap().to_string();
    assert_eq!(accepted["location"], format!("/v1/runs/{run_id}"));
    let record = wait_for(&server, &run_id, Duration::from_secs(30), |r| r["status"] == "finished");
    assert_eq!(record["result"]["stdout"]["text"], "later\n");
    assert!(record["started_at_ms"].as_i64() >= record["created_at_ms"].as_i64());
}

#[test]
fn errors_say_what_to_fix_with_the_right_status() {
    let server = Server::start(Some(&config("[admission]\nmax_request_bytes = 65536\nqueue_bytes = 1048576")));
    let post = |body: &[u8], key: &str, query: &str| {
        let auth = format!("Bearer {key}");
        server.request("POST", &format!("/v1/runs{query}"), &[("Authorization", &auth)], body)
    };
    // 400: not a request at all.
    let e = post(b"{nope", KEY, "").error(400);
    assert!(e["message"].as_str().unwrap().contains("not valid JSON"), "{e}");
    let e = post(br#"{"runtime":"sh","comand":"x"}"#, KEY, "").error(400);
    assert!(e["message"].as_str().unwrap().contains("unknown field"), "{e}");
    assert_eq!(post(br#"{"runtime":"sh"}"#, KEY, "?wait=maybe").error(400)["field"], "wait");
    let e = server.post_run(&sh("true"), "", KEY, &[("Idempotency-Key", "has space")]).error(400);
    assert_eq!(e["field"], "Idempotency-Key");
    // 422: well-formed, but cannot run as asked.
    let e = server.post_run(&json!({"runtime": "cobol"}), "", KEY, &[]).error(422);
    assert!(e["message"].as_str().unwrap().contains("python"), "lists the runtimes: {e}");
    let e =
        server.post_run(&json!({"runtime": "sh", "files": [{"path": "../x", "content": ""}]}), "", KEY, &[]).error(422);
    assert_eq!(e["field"], "files[0].path");
    let e = server.post_run(&with_limit(sh("true"), "memory_bytes", 1 << 40), "", KEY, &[]).error(422);
    assert!(e["message"].as_str().unwrap().contains("ask for at most"), "{e}");
    let e = server.post_run(&json!({"runtime": "sh", "files": []}), "", KEY, &[]).error(422);
    assert_eq!(e["field"], "entrypoint");
    // 401.
    assert_eq!(server.request("POST", "/v1/runs", &[], b"{}").error(401)["code"], "unauthorized");
    post(b"{}", "rbx_not_a_key", "").error(401);
    // 403: outside the tenant's policy, saying what is allowed.
    let e = server.post_run(&runbox_tests::python("print(1)"), "", LIMITED_KEY, &[]).error(403);
    assert!(e["message"].as_str().unwrap().contains("it may use: sh"), "{e}");
    let e = server.post_run(&with_limit(sh("true"), "wall_time_ms", 6000), "", LIMITED_KEY, &[]).error(403);
    assert_eq!(e["field"], "limits.wall_time_ms");
    assert!(e["message"].as_str().unwrap().contains("at most 5000"), "{e}");
    // 404.
    server.get("/v1/runs/0123456789abcdef", KEY).error(404);
    server.get("/v1/runs/..%2F..%2Fetc", KEY).error(404);
    server.get("/v2/nothing", KEY).error(404);
    // 405.
    server.request("DELETE", "/v1/runtimes", &[], b"").error(405);
    // 409: cancelling a run that has ended.
    let done = server.post_run(&sh("true"), "", KEY, &[]).ok();
    let path = format!("/v1/runs/{}/cancel", done["run_id"].as_str().unwrap());
    let e = server.request("POST", &path, &[("Authorization", &format!("Bearer {KEY}"))], b"").error(409);
    assert!(e["message"].as_str().unwrap().contains("already ended"), "{e}");
    // 409: artifacts of a run that has not ended.
    let running = server.post_run(&sh("sleep 2"), "?wait=false", KEY, &[]).json();
    let id = running["run_id"].as_str().unwrap();
    server.get(&format!("/v1/runs/{id}/artifacts/main.sh"), KEY).error(409);
    // 413.
    let big = json!({"runtime": "sh", "files": [{"path": "main.sh", "content": "#".repeat(70_000)}]});
    let e = server.post_run(&big, "", KEY, &[]).error(413);
    assert!(e["message"].as_str().unwrap().contains("65536"), "{e}");
}

#[test]
fn a_rate_limited_tenant_gets_429_with_retry_after() {
    let limited = config("").replace("[tenants.limited]\n", "[tenants.limited]\nrate_per_second = 0.2\nburst = 1.0\n");
    let server = Server::start(Some(&limited));
    server.post_run(&sh("true"), "", LIMITED_KEY, &[]).ok();
    let response = server.post_run(&sh("true"), "", LIMITED_KEY, &[]);
    assert_eq!(response.error(429)["code"], "rate_limited");
    assert_eq!(response.header("retry-after"), Some("5"));
    // Other tenants are not affected.
    server.post_run(&sh("true"), "", KEY, &[]).ok();
}

#[test]
fn runtimes_are_those_of_the_tenant_with_its_limits() {
    let server = Server::start(Some(&config("")));
    let all = server.get("/v1/runtimes", KEY).ok();
    let ids: Vec<&str> = all.as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert!(ids.contains(&"python") && ids.contains(&"sh"), "{ids:?}");
    let limited = server.get("/v1/runtimes", LIMITED_KEY).ok();
    let list = limited.as_array().unwrap();
    assert_eq!(list.len(), 1, "{limited}");
    assert_eq!(list[0]["id"], "sh");
    assert_eq!(list[0]["max_limits"]["wall_time_ms"], 5000);
    assert_eq!(list[0]["default_limits"]["wall_time_ms"], 5000);
    assert_eq!(list[0]["usable"], true);
}

#[test]
fn the_sandbox_refusing_a_request_is_a_422_and_recorded_as_rejected() {
    let server = Server::start(Some(&config("")));
    // Fits the request bounds, not the run's 64 KiB filesystem: only the sandbox can tell.
    let request = json!({"runtime": "sh", "limits": {"disk_bytes": 65536},
                         "files": [{"path": "main.sh", "content": "true"}, {"path": "big", "content": "x".repeat(200_000)}]});
    let response = server.post_run(&request, "", KEY, &[]);
    let e = response.error(422);
    assert!(e["message"].as_str().unwrap().contains("do not fit"), "{e}");
    let location = response.header("location").unwrap().to_string();
    let record = server.get(&location, KEY).ok();
    assert_eq!(record["status"], "rejected");
    assert_eq!(record["error"]["field"], "files");
}

#[test]
fn secrets_are_redacted_in_results_events_and_logs_and_logs_carry_the_run_id() {
    let server = Server::start(Some(&config("")));
    let mut request = sh("echo \"token=$TOKEN\"; echo \"$TOKEN\" >&2");
    request["secrets"] = json!({"TOKEN": "s3cr3t-v4lue-42"});
    let accepted = server.post_run(&request, "?wait=false", KEY, &[]).json();
    let run_id = accepted["run_id"].as_str().unwrap();
    let mut events = server.events(&format!("/v1/runs/{run_id}/events"), KEY);
    let mut seen = Vec::new();
    while let Some(event) = events.next() {
        if event.name == "output" {
            let data = event.data["data_base64"].as_str().unwrap();
            seen.extend(base64::engine::general_purpose::STANDARD.decode(data).unwrap());
        }
        if event.name == "result" {
            assert_eq!(event.data["result"]["stdout"]["text"], "token=[REDACTED:TOKEN]\n");
            assert_eq!(event.data["result"]["stderr"]["text"], "[REDACTED:TOKEN]\n");
            break;
        }
    }
    let seen = String::from_utf8_lossy(&seen);
    assert!(seen.contains("[REDACTED:TOKEN]") && !seen.contains("s3cr3t"), "{seen}");
    let record = server.get(&format!("/v1/runs/{run_id}"), KEY).ok();
    assert!(!record.to_string().contains("s3cr3t"), "{record}");
    let log = server.log();
    assert!(!log.contains("s3cr3t"), "{log}");
    let lines: Vec<Value> = log.lines().map(|l| serde_json::from_str(l).expect("every log line is JSON")).collect();
    assert!(
        lines.iter().any(|l| l["span"]["run_id"] == run_id && l["fields"]["message"] == "run ended"),
        "no log line carries the run id: {log}"
    );
}

#[test]
fn auth_can_be_off_only_on_loopback() {
    let state = tempfile::tempdir().unwrap();
    // 192.0.2.1 (TEST-NET-1) is not loopback, and not an address of this machine either: the
    // refusal must come before any attempt to listen.
    let err = Server::try_start_listening(state.path(), Some("auth = false\n"), "192.0.2.1:0").err().expect("refused");
    assert!(err.contains("only allowed on a loopback address"), "{err}");
    let server = Server::start(Some("auth = false\n"));
    let record = server.request("POST", "/v1/runs", &[], &serde_json::to_vec(&sh("echo open")).unwrap()).ok();
    assert_eq!(record["result"]["stdout"]["text"], "open\n");
    assert!(server.banner.contains("auth is off"), "{}", server.banner);
}

#[test]
fn a_second_server_on_the_same_state_dir_is_refused() {
    let server = Server::start(Some(&config("")));
    let err = Server::try_start_in(server.state_dir(), None).err().expect("refused");
    assert!(err.contains("another `runbox serve` uses the state directory"), "{err}");
    assert_eq!(server.request("GET", "/healthz", &[], b"").status, 200, "the first one is unharmed");
}
