//! Runs for the stdio server: each one a `runbox run` child process, which is single-threaded
//! and does the sandboxing, so this async process never forks and runs code itself.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;

use runbox_contract::{RunRequest, RunResult, ValidationError};
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use crate::server::{RunError, Runs};

/// [`Runs`] that execute with `runbox` (this binary) and the given state directory.
pub fn subprocess_runs(runbox: PathBuf, state_dir: PathBuf) -> Runs {
    Arc::new(move |request, _extensions| Box::pin(run(runbox.clone(), state_dir.clone(), request)))
}

async fn run(runbox: PathBuf, state_dir: PathBuf, request: RunRequest) -> Result<RunResult, RunError> {
    let body = serde_json::to_vec(&request).map_err(|e| RunError::Failed(e.to_string()))?;
    let mut child = Command::new(&runbox)
        .arg("--state-dir")
        .arg(&state_dir)
        .args(["run", "--json", "--request", "-", "--die-with-parent"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| RunError::Failed(format!("start {}: {e}", runbox.display())))?;
    let mut stdin = child.stdin.take().ok_or_else(|| RunError::Failed("no stdin".into()))?;
    stdin.write_all(&body).await.map_err(|e| RunError::Failed(format!("send the request: {e}")))?;
    drop(stdin);
    let output = child.wait_with_output().await.map_err(|e| RunError::Failed(e.to_string()))?;
    if output.status.code() == Some(2) {
        let error: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap_or_default();
        let field = error["error"]["field"].as_str().unwrap_or("request");
        let message = error["error"]["message"].as_str().unwrap_or("refused");
        return Err(RunError::Rejected(ValidationError::new(field, message)));
    }
    serde_json::from_slice(&output.stdout).map_err(|e| {
        RunError::Failed(format!("runbox run printed no result ({e}): {}", String::from_utf8_lossy(&output.stderr)))
    })
}
