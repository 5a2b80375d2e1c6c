//! `runbox mcp` (MCP over stdio) and `runbox tool-schema`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use runbox_mcp::export::{Format, run_code_definition};
use runbox_runtimes::Allowlist;

use crate::exit_codes;

/// Serves MCP on stdin/stdout. Each run is a `runbox run` child process: this process is
/// multi-threaded (tokio) and never forks to run code itself.
pub fn serve(allowlist: Allowlist, state_dir: PathBuf) -> ExitCode {
    let runbox = match std::env::current_exe() {
        Ok(path) => path,
        Err(e) => return fail(&format!("find the runbox binary: {e}")),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => return fail(&format!("start the async runtime: {e}")),
    };
    let runs = runbox_mcp::subprocess_runs(runbox, state_dir);
    match runtime.block_on(runbox_mcp::serve_stdio(Arc::new(allowlist), runs)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&format!("mcp: {e}")),
    }
}

/// Prints the `run_code` definition for a model API.
pub fn tool_schema(format: &str) -> ExitCode {
    match Format::parse(format) {
        Some(format) => {
            println!("{}", serde_json::to_string_pretty(&run_code_definition(format)).expect("serializes"));
            ExitCode::SUCCESS
        }
        None => fail(&format!("unknown format {format:?}; use openai, anthropic or mcp")),
    }
}

fn fail(message: &str) -> ExitCode {
    // stderr only: in `runbox mcp`, stdout is the protocol's.
    eprintln!("runbox: {message}");
    ExitCode::from(exit_codes::CONFIG)
}
