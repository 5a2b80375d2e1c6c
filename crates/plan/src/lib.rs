//! The execution plan: everything the sandbox will do, decided before the kernel is touched.
//! A refusal here needs no undo, and every rule can be tested without root.

mod limits;
mod root;

use runbox_contract::{OnOutputLimit, ResolvedLimits, ValidatedRequest, ValidationError};
use runbox_runtimes::{ARGS_PLACEHOLDER, Allowlist, ENTRYPOINT_PLACEHOLDER, Runtime};

pub use limits::resolve_limits;
pub use root::{RootEntry, RunDir, root_entries};

/// Where the workspace appears inside the sandbox; also the working directory.
pub const WORKSPACE_PATH: &str = "/workspace";
/// The uid and gid the code runs as inside its user namespace. Never 0.
pub const SANDBOX_UID: u32 = 1000;
pub const SANDBOX_GID: u32 = 1000;
pub const SANDBOX_USER: &str = "runbox";
pub const HOSTNAME: &str = "runbox";

/// One process to run in a fresh sandbox.
#[derive(Debug, Clone, PartialEq)]
pub struct StepPlan {
    pub argv: Vec<String>,
    pub limits: ResolvedLimits,
}

/// A whole run: an optional build step, then the program.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecPlan {
    pub run_id: String,
    pub runtime_id: String,
    pub build: Option<StepPlan>,
    pub program: StepPlan,
    /// The complete environment, sorted by name; nothing comes from the host.
    pub env: Vec<(String, String)>,
    pub cwd: String,
    pub cpu_cores: Option<f64>,
    /// The sandbox's root filesystem, in the order it is built.
    pub root: Vec<RootEntry>,
    pub on_output_limit: OnOutputLimit,
    pub stdin: Vec<u8>,
    /// Secret values to redact from everything returned, longest first.
    pub secrets: Vec<(String, Vec<u8>)>,
}

/// The environment every Linux run starts from, before the runtime's and the request's.
const BASE_ENV: &[(&str, &str)] = &[
    ("PATH", "/usr/local/bin:/usr/bin:/bin"),
    ("HOME", WORKSPACE_PATH),
    ("TMPDIR", "/tmp"),
    ("LANG", "C.UTF-8"),
    ("USER", SANDBOX_USER),
    ("LOGNAME", SANDBOX_USER),
];

/// Looks the runtime up in the allowlist, or says which ones exist.
pub fn find_runtime<'a>(allowlist: &'a Allowlist, id: &str) -> Result<&'a Runtime, ValidationError> {
    allowlist.get(id).ok_or_else(|| {
        let known: Vec<&str> = allowlist.ids().collect();
        ValidationError::new("runtime", format!("unknown runtime {id:?}; choose one of: {}", known.join(", ")))
    })
}

/// Builds the plan for a validated request on `runtime`.
pub fn plan(run_id: &str, request: ValidatedRequest, runtime: &Runtime) -> Result<ExecPlan, ValidationError> {
    let limits = resolve_limits(&request.request.limits, runtime)?;
    let req = &request.request;
    let entrypoint = req.entrypoint.clone().unwrap_or_else(|| runtime.entrypoint.clone());
    if !request.files.iter().any(|f| f.path == entrypoint) {
        let given: Vec<&str> = request.files.iter().map(|f| f.path.as_str()).collect();
        let hint = if given.is_empty() {
            "no files were given".to_string()
        } else {
            format!("files given: {}", given.join(", "))
        };
        return Err(ValidationError::new(
            "entrypoint",
            format!("{entrypoint:?} is not among the files ({hint}); add it to files or set entrypoint"),
        ));
    }
    let entry_in_sandbox = format!("{WORKSPACE_PATH}/{entrypoint}");
    let build = runtime.build.as_ref().map(|b| StepPlan {
        argv: expand_argv(&b.argv, &entry_in_sandbox, &[]),
        // The build shares the run's filesystem, so its disk cap is the run's.
        limits: ResolvedLimits { disk_bytes: limits.disk_bytes, ..b.limits },
    });
    let program = StepPlan { argv: expand_argv(&runtime.argv, &entry_in_sandbox, &req.args), limits };
    let mut secrets: Vec<(String, Vec<u8>)> =
        req.secrets.iter().filter(|(_, v)| !v.is_empty()).map(|(k, v)| (k.clone(), v.clone().into_bytes())).collect();
    secrets.sort_by_key(|(_, v)| std::cmp::Reverse(v.len()));
    Ok(ExecPlan {
        run_id: run_id.to_string(),
        runtime_id: runtime.id.clone(),
        build,
        program,
        env: build_env(runtime, req),
        cwd: WORKSPACE_PATH.to_string(),
        cpu_cores: runtime.cpu_cores,
        root: root_entries(&runtime.image),
        on_output_limit: req.on_output_limit,
        stdin: request.stdin,
        secrets,
    })
}

fn expand_argv(template: &[String], entrypoint: &str, args: &[String]) -> Vec<String> {
    let mut argv = Vec::with_capacity(template.len() + args.len());
    for item in template {
        if item == ARGS_PLACEHOLDER {
            argv.extend(args.iter().cloned());
        } else {
            argv.push(item.replace(ENTRYPOINT_PLACEHOLDER, entrypoint));
        }
    }
    argv
}

fn build_env(runtime: &Runtime, req: &runbox_contract::RunRequest) -> Vec<(String, String)> {
    let mut env: std::collections::BTreeMap<String, String> =
        BASE_ENV.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    env.extend(runtime.env.clone());
    env.extend(req.env.clone());
    env.extend(req.secrets.clone());
    env.into_iter().collect()
}

#[cfg(test)]
mod tests;
