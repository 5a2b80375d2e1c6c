//! `runbox serve`: the HTTP API. The only command that starts an async runtime (inside
//! `serve_blocking`); every other command stays single-threaded.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use runbox_runtimes::Allowlist;

use crate::exit_codes;

#[derive(clap::Args)]
pub struct ServeArgs {
    /// HOST:PORT to listen on (default 127.0.0.1:8080, or the config's `listen`). Port 0 picks a
    /// free port; the bound address is printed.
    #[arg(long, env = "RUNBOX_LISTEN")]
    pub listen: Option<SocketAddr>,
    /// The service's configuration: tenants, hashed API keys, admission, retention.
    /// Default <state-dir>/serve/config.toml, created on first start.
    #[arg(long, env = "RUNBOX_SERVE_CONFIG")]
    pub config: Option<PathBuf>,
}

/// Where the runs' allowlist came from, passed on to each `runbox run` the service starts.
pub struct Globals {
    pub state_dir: PathBuf,
    pub cache_dir: PathBuf,
    pub runtimes_dir: Option<PathBuf>,
    pub images_dir: Option<PathBuf>,
}

pub fn main(args: ServeArgs, allowlist: Allowlist, globals: Globals) -> ExitCode {
    let runbox_exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return fail(&format!("find the runbox binary: {e}")),
    };
    let mut global_args: Vec<OsString> = Vec::new();
    let cache_dir = Some(globals.cache_dir.clone());
    let dirs =
        [("--cache-dir", &cache_dir), ("--runtimes-dir", &globals.runtimes_dir), ("--images-dir", &globals.images_dir)];
    for (flag, value) in dirs {
        if let Some(dir) = value {
            // Absolute: the children run with another working directory in mind.
            let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.clone());
            global_args.extend([OsString::from(flag), dir.into_os_string()]);
        }
    }
    let options = runbox_service::ServeOptions {
        state_dir: globals.state_dir,
        config_path: args.config,
        listen: args.listen,
        allowlist,
        cache_dir: globals.cache_dir,
        runbox_exe,
        global_args,
    };
    match runbox_service::serve_blocking(options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e.to_string()),
    }
}

fn fail(message: &str) -> ExitCode {
    eprintln!("runbox serve: {message}");
    ExitCode::from(exit_codes::CONFIG)
}
