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

/// MCP over streamable HTTP, to nest in an axum router (e.g. at `/mcp`). Stateless: every
/// request stands alone, so any replica can answer it. Only requests whose `Host` is in
/// `allowed_hosts` are served (DNS-rebinding protection; loopback names by default).
pub fn http_service(
    server: RunboxMcp,
    allowed_hosts: Vec<String>,
) -> rmcp::transport::streamable_http_server::StreamableHttpService<
    RunboxMcp,
    rmcp::transport::streamable_http_server::session::local::LocalSessionManager,
> {
    use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
    let mut config = StreamableHttpServerConfig::default();
    config.legacy_session_mode = false;
    config.json_response = true;
    config.sse_keep_alive = None;
    config.allowed_hosts = allowed_hosts;
    StreamableHttpService::new(move || Ok(server.clone()), Default::default(), config)
}

/// Serves MCP over stdin and stdout until the client disconnects. Logs go to stderr only:
/// stdout belongs to the protocol.
pub async fn serve_stdio(allowlist: Arc<Allowlist>, runs: Runs) -> Result<(), String> {
    let server = RunboxMcp::new(allowlist, runs).serve(rmcp::transport::stdio()).await.map_err(|e| e.to_string())?;
    server.waiting().await.map_err(|e| e.to_string())?;
    Ok(())
}
