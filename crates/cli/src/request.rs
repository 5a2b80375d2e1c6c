//! Building a RunRequest from `runbox run` flags, or reading one as JSON.

use std::io::Read;

use runbox_contract::{Encoding, FileSpec, Limits, OnOutputLimit, RunRequest};
use runbox_runtimes::Allowlist;

use crate::run::RunArgs;

/// Largest JSON request read from a file or stdin; larger ones are refused, not truncated.
pub const MAX_REQUEST_BYTES: u64 = 64 << 20;

pub fn read_json(source: &str) -> Result<RunRequest, runbox_contract::ValidationError> {
    let body = read_body(source).map_err(|m| runbox_contract::ValidationError::new("body", m))?;
    RunRequest::from_json(&body)
}

fn read_body(source: &str) -> Result<Vec<u8>, String> {
    let mut text = Vec::new();
    let reader: Box<dyn Read> = if source == "-" {
        Box::new(std::io::stdin())
    } else {
        Box::new(std::fs::File::open(source).map_err(|e| format!("open request file {source}: {e}"))?)
    };
    reader.take(MAX_REQUEST_BYTES + 1).read_to_end(&mut text).map_err(|e| format!("read request: {e}"))?;
    if text.len() as u64 > MAX_REQUEST_BYTES {
        return Err(format!("the request is larger than {MAX_REQUEST_BYTES} bytes; send fewer or smaller files"));
    }
    Ok(text)
}

pub fn from_flags(args: &RunArgs, allowlist: &Allowlist) -> Result<RunRequest, String> {
    let runtime = args.runtime.clone().ok_or("give --runtime (see `runbox runtimes`) or --request")?;
    let mut files = Vec::new();
    if let Some(code) = &args.code {
        let default_entry = allowlist.get(&runtime).map(|rt| rt.entrypoint.clone());
        let path = args
            .entrypoint
            .clone()
            .or(default_entry)
            .ok_or_else(|| format!("unknown runtime {runtime:?}; see `runbox runtimes`"))?;
        files.push(FileSpec { path, content: code.clone(), encoding: Encoding::Utf8, executable: false });
    }
    for spec in &args.files {
        files.push(local_file(spec)?);
    }
    Ok(RunRequest {
        runtime,
        files,
        entrypoint: args.entrypoint.clone(),
        args: args.args.clone(),
        stdin: args.stdin.clone(),
        stdin_base64: None,
        env: pairs(&args.env, "--env")?,
        secrets: pairs(&args.secrets, "--secret")?,
        limits: Limits {
            wall_time_ms: args.wall_time,
            cpu_time_ms: args.cpu_time,
            memory_bytes: args.memory,
            processes: args.processes,
            disk_bytes: args.disk,
            output_bytes: args.output,
            open_files: args.open_files,
        },
        network: Default::default(),
        on_output_limit: if args.kill_on_output_limit { OnOutputLimit::Kill } else { OnOutputLimit::Truncate },
        deterministic: args.deterministic,
        checks: args
            .checks
            .iter()
            .map(|c| serde_json::from_str(c).map_err(|e| format!("--check {c:?}: {e}")))
            .collect::<Result<_, _>>()?,
    })
}

/// `LOCAL` or `LOCAL:NAME`: a local file sent as /workspace/NAME (default: its file name).
fn local_file(spec: &str) -> Result<FileSpec, String> {
    let (local, name) = match spec.split_once(':') {
        Some((local, name)) => (local, name.to_string()),
        None => {
            (spec, std::path::Path::new(spec).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default())
        }
    };
    let bytes = std::fs::read(local).map_err(|e| format!("read --file {local}: {e}"))?;
    let executable = std::fs::metadata(local)
        .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0)
        .unwrap_or(false);
    let (content, encoding) = match String::from_utf8(bytes) {
        Ok(text) => (text, Encoding::Utf8),
        Err(e) => (base64_encode(e.as_bytes()), Encoding::Base64),
    };
    Ok(FileSpec { path: name, content, encoding, executable })
}

fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn pairs(items: &[String], flag: &str) -> Result<std::collections::BTreeMap<String, String>, String> {
    items
        .iter()
        .map(|item| {
            item.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .ok_or_else(|| format!("{flag} {item:?}: use NAME=VALUE"))
        })
        .collect()
}
