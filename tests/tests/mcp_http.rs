//! MCP over streamable HTTP at `runbox serve`'s /mcp, driven by the official Python MCP SDK,
//! behind the same API keys as the HTTP API; and the tool definitions served over HTTP.

mod service_support;

use std::path::Path;
use std::process::Command;

use runbox_tests::python_venv;
use service_support::*;

#[test]
fn the_python_sdk_over_streamable_http_gets_the_same_results_as_over_stdio() {
    let server = Server::start(Some(&config("")));
    let python = python_venv("mcp", &["mcp==2.3.0"]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/http_client.py");
    let url = format!("http://{}/mcp", server.addr);
    let output = Command::new(python).arg(&script).args([url.as_str(), KEY]).output().expect("run the client");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains(" passed, 0 failed"),
        "{stdout}\n{}\nserver log: {}",
        String::from_utf8_lossy(&output.stderr),
        server.log()
    );
}

#[test]
fn mcp_over_http_needs_an_api_key() {
    let server = Server::start(Some(&config("")));
    let body = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#;
    let headers = [("content-type", "application/json"), ("accept", "application/json, text/event-stream")];
    let answer = server.request("POST", "/mcp", &headers, body);
    assert_eq!(answer.error(401)["code"], "unauthorized");
    let wrong = [headers[0], headers[1], ("authorization", "Bearer rbx_wrong")];
    assert_eq!(server.request("POST", "/mcp", &wrong, body).error(401)["code"], "unauthorized");
}

#[test]
fn the_http_api_serves_the_tool_definitions() {
    let server = Server::start(Some(&config("")));
    let openai = server.get("/v1/tool-schema?format=openai", KEY).ok();
    assert_eq!(openai["function"]["name"], "run_code");
    assert_eq!(openai["function"]["strict"], true);
    let anthropic = server.get("/v1/tool-schema?format=anthropic", KEY).ok();
    assert!(anthropic["input_schema"]["properties"]["runtime"].is_object(), "{anthropic}");
    assert_eq!(server.get("/v1/tool-schema?format=yaml", KEY).error(400)["field"], "format");
}

#[test]
fn the_tool_definitions_need_an_api_key_like_the_rest_of_v1() {
    let server = Server::start(Some(&config("")));
    assert_eq!(server.get("/v1/tool-schema?format=mcp", "rbx_wrong").error(401)["code"], "unauthorized");
}
