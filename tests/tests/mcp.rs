//! runbox as an MCP tool server, driven by the official Python MCP SDK (pinned), and its
//! exported tool definitions checked with a real JSON Schema validator.

use std::path::Path;
use std::process::Command;

use runbox_tests::*;

/// The MCP SDK version the agent-side tests pin.
const MCP_SDK: &str = "mcp==2.3.0";

fn run_script(script: &str, args: &[&Path]) {
    let python = python_venv("mcp", &[MCP_SDK]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp").join(script);
    let output = Command::new(python).arg(&script).args(args).output().expect("run the python client");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains(" passed, 0 failed"),
        "{}:\n{stdout}\n{}",
        script.display(),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn the_python_sdk_over_stdio_gets_honest_bounded_results() {
    let rb = Runbox::new();
    run_script("stdio_client.py", &[&runbox_bin(), rb.state_dir()]);
    assert!(rb.leftover_runs().is_empty(), "{:?}", rb.leftover_runs());
}

#[test]
fn sample_calls_validate_against_every_exported_tool_definition() {
    run_script("schemas.py", &[&runbox_bin()]);
}
