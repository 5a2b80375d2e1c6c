//! `runbox doctor`: which isolation layers this host can apply, what is missing, how to fix it.
//! It ends with a real sandboxed run, because a feature that looks present can still fail.

use std::path::PathBuf;
use std::process::ExitCode;

use runbox_contract::{RunRequest, Verdict};
use runbox_runner::{Runner, RunnerConfig};
use runbox_runtimes::Allowlist;

struct Check {
    name: &'static str,
    ok: bool,
    detail: String,
    fix: Option<String>,
}

pub fn main(allowlist: Allowlist, state_dir: PathBuf, json: bool) -> ExitCode {
    let mut checks = vec![root_check(), user_namespaces(), seccomp_check(), cgroup_check()];
    checks.push(trial_run(allowlist, state_dir));
    let all_ok = checks.iter().all(|c| c.ok);
    if json {
        let list: Vec<_> = checks
            .iter()
            .map(|c| serde_json::json!({"check": c.name, "ok": c.ok, "detail": c.detail, "fix": c.fix}))
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({"ok": all_ok, "checks": list})).expect("serializes")
        );
    } else {
        for c in &checks {
            println!("[{}] {}: {}", if c.ok { " ok " } else { "FAIL" }, c.name, c.detail);
            if let Some(fix) = &c.fix {
                println!("       fix: {fix}");
            }
        }
        println!(
            "{}",
            if all_ok {
                "runbox can apply every isolation layer on this host"
            } else {
                "runbox will refuse Linux runs until the failures above are fixed"
            }
        );
    }
    if all_ok { ExitCode::SUCCESS } else { ExitCode::from(1) }
}

fn check(name: &'static str, ok: bool, detail: impl Into<String>, fix: Option<&str>) -> Check {
    Check { name, ok, detail: detail.into(), fix: if ok { None } else { fix.map(String::from) } }
}

fn root_check() -> Check {
    let root = nix::unistd::geteuid().is_root();
    check(
        "root",
        root,
        if root { "running as root" } else { "not running as root" },
        Some("run runbox as root: it mounts the per-run filesystem and writes cgroups and id maps"),
    )
}

fn user_namespaces() -> Check {
    let max =
        std::fs::read_to_string("/proc/sys/user/max_user_namespaces").ok().and_then(|s| s.trim().parse::<u64>().ok());
    match max {
        Some(0) => check(
            "user_namespaces",
            false,
            "user.max_user_namespaces is 0",
            Some("sysctl -w user.max_user_namespaces=15000"),
        ),
        Some(n) => check("user_namespaces", true, format!("enabled (max {n})"), None),
        None => check(
            "user_namespaces",
            false,
            "the kernel has no user namespaces",
            Some("use a kernel built with CONFIG_USER_NS=y"),
        ),
    }
}

fn seccomp_check() -> Check {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let has = status.lines().any(|l| l.starts_with("Seccomp:"));
    let filter = runbox_linux::seccomp::SeccompFilter::from_json(runbox_linux::seccomp::DEFAULT_POLICY_JSON);
    match (has, filter) {
        (true, Ok(f)) => check(
            "seccomp",
            true,
            format!("filter mode available; policy denies {} syscall rules", f.denied_syscalls().len()),
            None,
        ),
        (false, _) => check(
            "seccomp",
            false,
            "the kernel has no seccomp",
            Some("use a kernel built with CONFIG_SECCOMP_FILTER=y"),
        ),
        (_, Err(e)) => check("seccomp", false, format!("the policy does not compile: {e}"), None),
    }
}

fn cgroup_check() -> Check {
    let support = runbox_linux::cgroup::probe();
    let found: Vec<String> = support
        .controllers
        .iter()
        .map(|c| {
            format!(
                "{}{}",
                c.name,
                if c.path.is_some() {
                    ""
                } else if c.required {
                    " (MISSING)"
                } else {
                    " (absent, optional)"
                }
            )
        })
        .collect();
    let version = match support.version {
        Some(runbox_linux::cgroup::CgroupVersion::V1) => "cgroup v1",
        Some(runbox_linux::cgroup::CgroupVersion::V2) => "cgroup v2",
        None => "no cgroup filesystem",
    };
    let detail = format!("{version}: {}", found.join(", "));
    match support.problem {
        None => check("cgroups", true, detail, None),
        Some(problem) => Check { name: "cgroups", ok: false, detail, fix: Some(problem) },
    }
}

fn trial_run(allowlist: Allowlist, state_dir: PathBuf) -> Check {
    let runner = match Runner::new(allowlist, RunnerConfig::new(state_dir)) {
        Ok(r) => r,
        Err(e) => return check("trial_run", false, e.to_string(), None),
    };
    let request = RunRequest {
        runtime: "sh".into(),
        files: vec![runbox_contract::FileSpec {
            path: "main.sh".into(),
            content: "echo ok".into(),
            encoding: Default::default(),
            executable: false,
        }],
        ..Default::default()
    };
    match runner.run(request, None) {
        Ok(r) if r.verdict == Verdict::Ok => {
            check("trial_run", true, format!("a sandboxed sh ran with layers: {}", r.isolation.join(", ")), None)
        }
        Ok(r) => check(
            "trial_run",
            false,
            format!("verdict {}: {}", r.verdict.as_str(), r.error.map(|e| e.message).unwrap_or_default()),
            Some("see the failing layer above"),
        ),
        Err(e) => check("trial_run", false, e.to_string(), Some("the sh runtime must be usable")),
    }
}
