//! Bad requests: each is refused with exit code 2 and `{"error": {"code": "invalid_request",
//! "field", "message"}}`, the field says where, the message says what to fix, and nothing is
//! left behind in the state dir.

use runbox_tests::*;
use serde_json::{Value, json};

/// The maxima of the `sh` runtime (runtimes/sh.toml), by limit name.
const SH_MAX: [(&str, u64); 7] = [
    ("wall_time_ms", 300_000),
    ("cpu_time_ms", 300_000),
    ("memory_bytes", 4_294_967_296),
    ("processes", 1024),
    ("disk_bytes", 1_073_741_824),
    ("output_bytes", 16_777_216),
    ("open_files", 4096),
];

/// Asserts a clean refusal: exit 2, the error object, `field` (`None`: the body did not
/// parse, so there is no field), every fragment in the message, and no run directory.
#[track_caller]
fn assert_rejected(rb: &Runbox, ran: &Ran, field: Option<&str>, fragments: &[&str]) {
    assert_eq!(ran.exit_code, 2, "expected a rejection, got {}\nstderr: {}", ran.json, ran.stderr);
    assert_eq!(ran.json["error"]["code"], "invalid_request", "{}", ran.json);
    assert!(ran.json.get("run_id").is_none(), "a rejected request must not run: {}", ran.json);
    let (got_field, message) = ran.rejection();
    match field {
        Some(field) => assert_eq!(got_field, field, "message: {message}"),
        None => assert_eq!(ran.json["error"]["field"], Value::Null, "message: {message}"),
    }
    for fragment in fragments {
        assert!(message.contains(fragment), "message {message:?} lacks {fragment:?}");
    }
    assert!(rb.leftover_runs().is_empty(), "left behind: {:?}", rb.leftover_runs());
}

/// Rejects `request` and checks it as [`assert_rejected`] does, on a fresh state dir.
#[track_caller]
fn rejects(request: &Value, field: Option<&str>, fragments: &[&str]) {
    let rb = Runbox::new();
    let ran = rb.run(request);
    assert_rejected(&rb, &ran, field, fragments);
}

#[track_caller]
fn rejects_raw(body: &[u8], fragments: &[&str]) {
    let rb = Runbox::new();
    let ran = rb.run_raw(body);
    assert_rejected(&rb, &ran, Some("body"), fragments);
}

/// A valid sh request with `extra` files after main.sh (so a bad file is `files[1]`).
fn sh_with_files(extra: Value) -> Value {
    let mut files = vec![json!({"path": "main.sh", "content": "echo ran"})];
    files.extend(extra.as_array().expect("array").iter().cloned());
    json!({"runtime": "sh", "files": files})
}

fn mounts_under(dir: &std::path::Path) -> Vec<String> {
    let dir = dir.canonicalize().expect("canonical state dir");
    let needle = dir.to_str().expect("utf-8 path");
    std::fs::read_to_string("/proc/self/mountinfo")
        .expect("mountinfo")
        .lines()
        .filter(|l| l.contains(needle))
        .map(str::to_owned)
        .collect()
}

// ---- the body ----

#[test]
fn malformed_json_is_rejected_with_the_parse_error() {
    rejects_raw(br#"{"runtime": "sh", "files": ["#, &["not valid JSON", "EOF while parsing"]);
    rejects_raw(b"", &["not valid JSON", "EOF while parsing"]);
    rejects_raw(b"{\"runtime\": \"\xff\xfe\"}", &["not valid JSON"]);
}

#[test]
fn an_empty_json_array_is_rejected() {
    rejects_raw(b"[]", &["must be a JSON object"]);
}

/// serde's derive would read a JSON array as a RunRequest with its fields by position, so
/// `["sh", [{"path": "main.sh", ...}]]` would run. The contract is an object with named
/// fields; an array never runs.
#[test]
fn a_json_array_is_never_run_as_a_request() {
    let body = br#"["sh", [{"path": "main.sh", "content": "echo POSITIONAL"}]]"#;
    let rb = Runbox::new();
    let ran = rb.run_raw(body);
    assert!(!ran.json.to_string().contains("POSITIONAL\\n"), "the array was run as a request: {}", ran.json);
    assert_rejected(&rb, &ran, Some("body"), &["object"]);
}

/// The refusal of an array says a JSON object is needed, not "expected struct RunRequest
/// with 11 elements", which would invite an 11-element array.
#[test]
fn a_json_array_is_refused_with_a_message_asking_for_an_object() {
    for body in [&b"[]"[..], br#"["sh"]"#] {
        let rb = Runbox::new();
        let ran = rb.run_raw(body);
        assert_rejected(&rb, &ran, Some("body"), &["object"]);
    }
}

#[test]
fn an_unknown_top_level_field_is_named_with_the_known_ones() {
    let request = json!({"runtime": "sh", "comand": "echo hi", "files": [{"path": "main.sh", "content": "echo hi"}]});
    rejects(&request, Some("body"), &["unknown field `comand`", "expected one of", "`runtime`", "`files`"]);
}

#[test]
fn a_missing_runtime_is_named() {
    rejects(&json!({"files": [{"path": "main.sh", "content": "echo hi"}]}), Some("body"), &["missing field `runtime`"]);
}

#[test]
fn an_unknown_runtime_lists_the_allowed_ones() {
    let rb = Runbox::new();
    let ran = rb.run(&request("cobol", "main.cob", "DISPLAY 'HI'."));
    assert_rejected(&rb, &ran, Some("runtime"), &["unknown runtime \"cobol\"", "choose one of: "]);
    let (_, message) = ran.rejection();
    let listed: Vec<&str> = message.split("choose one of: ").nth(1).unwrap_or("").split(", ").collect();
    for id in ["python", "sh", "bash", "node", "c"] {
        assert!(listed.contains(&id), "{id} not listed in {message:?}");
    }
    rejects(&request("Python", "main.py", "print(1)"), Some("runtime"), &["unknown runtime \"Python\"", "python"]);
}

#[test]
fn a_request_body_over_64_mib_is_refused_without_reading_it_all() {
    // A well-formed request whose one file is 65 MiB: refused by size, not parsed.
    let mut body = br#"{"runtime": "sh", "files": [{"path": "main.sh", "content": ""#.to_vec();
    body.resize(body.len() + (65 << 20), b'a');
    body.extend_from_slice(br#""}]}"#);
    let rb = Runbox::new();
    let began = std::time::Instant::now();
    let ran = rb.run_raw(&body);
    assert_rejected(&rb, &ran, Some("body"), &["larger than 67108864 bytes"]);
    assert!(began.elapsed().as_secs() < 20, "took {:?}", began.elapsed());
}

// ---- paths ----

#[test]
fn bad_paths_are_refused_with_the_reason() {
    let long_path = "abcdefghi/".repeat(110) + "x"; // 1101 bytes, every component short
    let long_component = "c".repeat(256);
    let cases: [(&str, &[&str]); 10] = [
        ("/etc/x", &["absolute", "relative to /workspace"]),
        ("../x", &["\"..\"", "inside /workspace"]),
        ("a/../b", &["\"..\"", "inside /workspace"]),
        ("./a", &["\".\""]),
        ("a//b", &["empty component"]),
        ("a/", &["empty component"]),
        ("", &["empty", "relative path"]),
        ("a\0b", &["NUL"]),
        (&long_path, &["1101 bytes", "at most 1024"]),
        (&long_component, &["longer than 255 bytes"]),
    ];
    for (path, fragments) in cases {
        rejects(&sh_with_files(json!([{"path": path, "content": "x"}])), Some("files[1].path"), fragments);
    }
    // Exactly at the bounds: accepted.
    let at_bound = ["d".repeat(255), "e".repeat(255), "f".repeat(255), "g".repeat(254), "h".into()].join("/");
    assert_eq!(at_bound.len(), 1024);
    let ran = Runbox::new().run(&sh_with_files(json!([{"path": at_bound, "content": "x"}])));
    assert_verdict(&ran, Verdict::Ok);
}

#[test]
fn duplicate_paths_are_refused() {
    rejects(
        &sh_with_files(json!([{"path": "x", "content": "1"}, {"path": "x", "content": "2"}])),
        Some("files[2].path"),
        &["duplicate path \"x\"", "once"],
    );
    rejects(
        &sh_with_files(json!([{"path": "main.sh", "content": "again"}])),
        Some("files[1].path"),
        &["duplicate path \"main.sh\""],
    );
}

#[test]
fn a_file_and_a_directory_of_the_same_name_are_refused_in_either_order() {
    for (first, second) in [("a", "a/b"), ("a/b", "a")] {
        let request = sh_with_files(json!([{"path": first, "content": "1"}, {"path": second, "content": "2"}]));
        rejects(&request, Some("files[2].path"), &["cannot both exist", "directory"]);
    }
}

// ---- sizes and encodings ----

#[test]
fn more_than_1000_files_are_refused() {
    let files: Vec<Value> = (0..1000).map(|i| json!({"path": format!("f{i}"), "content": ""})).collect();
    rejects(&sh_with_files(Value::Array(files)), Some("files"), &["1001 files given", "at most 1000"]);
}

#[test]
fn a_file_over_16_mib_decoded_is_refused() {
    let over = vec![7u8; (16 << 20) + 1];
    let request = sh_with_files(json!([{"path": "big.bin", "content": base64(&over), "encoding": "base64"}]));
    rejects(&request, Some("files[1].content"), &["16777217 bytes", "at most 16777216"]);
}

#[test]
fn a_file_of_exactly_16_mib_decoded_is_accepted_though_its_base64_is_longer() {
    let exact = vec![7u8; 16 << 20];
    let request = sh_with_files(json!([{"path": "big.bin", "content": base64(&exact), "encoding": "base64"}]));
    let ran = Runbox::new().run(&request);
    let result = assert_verdict(&ran, Verdict::Ok);
    let big = result.artifacts.iter().find(|a| a.path == "big.bin").expect("big.bin listed");
    assert_eq!((big.size_bytes, big.sha256.clone()), (16 << 20, sha256_hex(&exact)));
}

#[test]
fn files_and_stdin_over_32_mib_in_all_are_refused() {
    let eleven_mib = "a".repeat(11 << 20);
    let files: Vec<Value> = (0..3).map(|i| json!({"path": format!("part{i}"), "content": eleven_mib})).collect();
    rejects(&sh_with_files(Value::Array(files)), Some("files"), &["at most 33554432", "in all"]);

    // Stdin counts too: 32 MiB of files less 8 bytes, and 9 bytes of stdin.
    let sixteen_mib = "b".repeat(16 << 20);
    let mut request = sh_with_files(
        json!([{"path": "p1", "content": sixteen_mib}, {"path": "p2", "content": sixteen_mib[..(16 << 20) - 8 - "echo ran".len()]}]),
    );
    request["stdin"] = json!("123456789");
    rejects(&request, Some("files"), &["33554433 bytes", "at most 33554432"]);
}

#[test]
fn invalid_base64_is_refused_where_it_is() {
    let request = sh_with_files(json!([{"path": "data.bin", "content": "not base64!", "encoding": "base64"}]));
    rejects(&request, Some("files[1].content"), &["invalid base64"]);
    let mut request = sh("cat");
    request["stdin_base64"] = json!("@@@@");
    rejects(&request, Some("stdin_base64"), &["invalid base64"]);
    let mut request = sh("cat");
    request["encoding"] = json!("base64");
    rejects(&request, Some("body"), &["unknown field `encoding`"]);
}

#[test]
fn stdin_and_stdin_base64_together_are_refused() {
    let mut request = sh("cat");
    request["stdin"] = json!("text");
    request["stdin_base64"] = json!("dGV4dA==");
    rejects(&request, Some("stdin"), &["either stdin or stdin_base64, not both"]);
}

// ---- limits ----

#[test]
fn each_limit_above_the_runtime_maximum_is_refused_with_the_maximum() {
    for (name, max) in SH_MAX {
        rejects(
            &with_limit(sh("true"), name, max + 1),
            Some(&format!("limits.{name}")),
            &["above the maximum of runtime \"sh\"", &format!("ask for at most {max}")],
        );
    }
    rejects(
        &with_limit(sh("true"), "memory_bytes", 1 << 40),
        Some("limits.memory_bytes"),
        &["1099511627776", "at most 4294967296"],
    );
}

#[test]
fn each_limit_at_zero_is_refused() {
    for (name, _) in SH_MAX {
        rejects(&with_limit(sh("true"), name, 0), Some(&format!("limits.{name}")), &["0 is below the minimum of"]);
    }
}

#[test]
fn an_unknown_limit_is_named_with_the_known_ones() {
    rejects(&with_limit(sh("true"), "memory", 1 << 20), Some("body"), &["unknown field `memory`", "`memory_bytes`"]);
    let mut request = sh("true");
    request["limits"]["memory_bytes"] = json!(-1);
    rejects(&request, Some("body"), &["not a valid RunRequest", "-1"]);
}

/// A memory limit no program can start under is the caller's mistake: it is refused up front
/// with the minimum, never run into a `sandbox_error`.
#[test]
fn a_memory_limit_below_the_minimum_is_refused_with_the_minimum() {
    rejects(
        &with_limit(sh("echo ran"), "memory_bytes", 4096),
        Some("limits.memory_bytes"),
        &["below the minimum of 4194304"],
    );
}

/// `processes` counts the program's own processes (the sandbox's init is not charged to it):
/// with 1, a program runs but cannot fork.
#[test]
fn a_process_limit_of_one_runs_the_program_but_refuses_a_fork() {
    let rb = Runbox::new();
    let code = "import os\nprint('ran', flush=True)\ntry:\n    os.fork()\nexcept BlockingIOError:\n    print('fork-refused')\n";
    let ran = rb.run(&with_limit(python(code), "processes", 1));
    let result = ran.result();
    assert_eq!(result.verdict, Verdict::Ok, "{}", ran.json);
    assert_eq!(stdout_text(&result), "ran\nfork-refused\n", "{}", ran.json);
    assert!(result.limits_hit.contains(&LimitKind::Processes), "{:?}", result.limits_hit);
    assert!(rb.leftover_runs().is_empty());
}

// ---- entrypoint, env, args ----

#[test]
fn an_entrypoint_not_among_the_files_is_refused_with_the_files_given() {
    rejects(
        &request("sh", "run.sh", "echo hi"),
        Some("entrypoint"),
        &["\"main.sh\" is not among the files", "run.sh", "set entrypoint"],
    );
    let mut req = sh("echo hi");
    req["entrypoint"] = json!("other.sh");
    rejects(&req, Some("entrypoint"), &["\"other.sh\" is not among the files", "main.sh"]);
    rejects(&json!({"runtime": "sh"}), Some("entrypoint"), &["no files were given"]);
}

#[test]
fn an_entrypoint_outside_the_workspace_is_refused() {
    for (entry, fragment) in [("../x", "\"..\""), ("/workspace/main.sh", "absolute"), ("a/../main.sh", "\"..\"")] {
        let mut req = sh("echo hi");
        req["entrypoint"] = json!(entry);
        rejects(&req, Some("entrypoint"), &[fragment]);
    }
}

#[test]
fn invalid_environment_names_are_refused() {
    for name in ["1A", "A-B", "A B", "A=B", ""] {
        let mut req = sh("echo hi");
        req["env"] = json!({name: "x"});
        rejects(&req, Some(&format!("env.{name}")), &["not a valid variable name", "letters, digits and _"]);
        let mut req = sh("echo hi");
        req["secrets"] = json!({name: "x"});
        rejects(&req, Some(&format!("secrets.{name}")), &["not a valid variable name"]);
    }
    let mut req = sh("echo hi");
    req["env"] = json!({"A": "x\u{0}y"});
    rejects(&req, Some("env.A"), &["NUL"]);
}

#[test]
fn a_nul_in_an_argument_is_refused() {
    let mut req = sh("echo hi");
    req["args"] = json!(["fine", "a\u{0}b"]);
    rejects(&req, Some("args[1]"), &["NUL byte", "cannot be passed to a program"]);
}

// ---- what only the workspace can tell ----

#[test]
fn files_that_do_not_fit_in_disk_bytes_are_refused_and_cleaned_up() {
    let rb = Runbox::new();
    let two_mib = vec![1u8; 2 << 20];
    let request = with_limit(
        sh_with_files(json!([{"path": "big.bin", "content": base64(&two_mib), "encoding": "base64"}])),
        "disk_bytes",
        1 << 20,
    );
    let ran = rb.run(&request);
    assert_rejected(&rb, &ran, Some("files"), &["do not fit in limits.disk_bytes", "1048576", "raise the limit"]);
    assert!(mounts_under(rb.state_dir()).is_empty(), "{:?}", mounts_under(rb.state_dir()));

    // Too many small files run out of inodes, not bytes: the same answer.
    let files: Vec<Value> = (0..400).map(|i| json!({"path": format!("d/f{i}"), "content": "x"})).collect();
    let ran = rb.run(&with_limit(sh_with_files(Value::Array(files)), "disk_bytes", 1 << 20));
    assert_rejected(&rb, &ran, Some("files"), &["do not fit in limits.disk_bytes"]);
    assert!(mounts_under(rb.state_dir()).is_empty(), "{:?}", mounts_under(rb.state_dir()));
}

// ---- CLI flags ----

#[test]
fn a_size_flag_without_a_known_unit_is_refused_with_the_format() {
    let rb = Runbox::new();
    let out = rb.cli(&["run", "--runtime", "python", "--memory", "12X", "--code", "print(1)"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {stderr}");
    assert!(
        stderr.contains("--memory") && stderr.contains("\"12X\" is not a size") && stderr.contains("256M"),
        "{stderr}"
    );
    let out = rb.cli(&["run", "--runtime", "python", "--wall-time", "soon", "--code", "print(1)"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {stderr}");
    assert!(stderr.contains("not a duration") && stderr.contains("500ms"), "{stderr}");
    assert!(rb.leftover_runs().is_empty());
}

#[test]
fn an_env_flag_without_equals_is_refused() {
    let rb = Runbox::new();
    let out = rb.cli(&["run", "--runtime", "python", "--env", "NOEQUALS", "--code", "print(1)"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {stderr}");
    assert!(stderr.contains("NOEQUALS") && stderr.contains("NAME=VALUE"), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing ran: {}", String::from_utf8_lossy(&out.stdout));

    let out = rb.cli(&["run", "--json", "--runtime", "python", "--secret", "NOEQUALS", "--code", "print(1)"]);
    let json: Value = serde_json::from_slice(&out.stdout).expect("json error");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        json["error"]["message"].as_str().unwrap_or("").contains("--secret \"NOEQUALS\": use NAME=VALUE"),
        "{json}"
    );
    assert!(rb.leftover_runs().is_empty());
}
