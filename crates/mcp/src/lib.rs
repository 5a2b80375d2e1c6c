//! runbox as an MCP tool server: `run_code` and `list_runtimes`, the text a model reads for
//! a result, and the tool's definitions for MCP, OpenAI and Anthropic.

pub mod export;
pub mod input;
pub mod render;
mod server;
mod subprocess;

use std::sync::Arc;

use rmcp::ServiceExt;
use runbox_runtimes::Allowlist;

pub use server::{RunError, RunFuture, RunboxMcp, Runs};
pub use subprocess::subprocess_runs;

/// Serves MCP over stdin and stdout until the client disconnects. Logs go to stderr only:
/// stdout belongs to the protocol.
pub async fn serve_stdio(allowlist: Arc<Allowlist>, runs: Runs) -> Result<(), String> {
    let server = RunboxMcp::new(allowlist, runs).serve(rmcp::transport::stdio()).await.map_err(|e| e.to_string())?;
    server.waiting().await.map_err(|e| e.to_string())?;
    Ok(())
}
