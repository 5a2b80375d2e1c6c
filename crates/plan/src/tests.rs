use runbox_contract::{FileSpec, Limits, RequestBounds, RunRequest};
use runbox_runtimes::Allowlist;

use super::*;

fn request(runtime: &str, files: &[(&str, &str)]) -> RunRequest {
    RunRequest {
        runtime: runtime.into(),
        files: files
            .iter()
            .map(|(p, c)| FileSpec {
                path: p.to_string(),
                content: c.to_string(),
                encoding: Default::default(),
                executable: false,
            })
            .collect(),
        ..Default::default()
    }
}

fn plan_for(req: RunRequest) -> Result<ExecPlan, ValidationError> {
    let allowlist = Allowlist::embedded().unwrap();
    let runtime = find_runtime(&allowlist, &req.runtime)?;
    plan("r1", req.validate(&RequestBounds::default()).unwrap(), runtime)
}

#[test]
fn unknown_runtime_lists_the_allowed_ones() {
    let err = plan_for(request("cobol", &[])).unwrap_err();
    assert_eq!(err.field, "runtime");
    assert!(err.message.contains("python") && err.message.contains("sh"), "{err}");
}

#[test]
fn argv_comes_from_the_runtime_with_entrypoint_and_args_substituted() {
    let mut req = request("python", &[("main.py", "print(1)")]);
    req.args = vec!["a b".into(), "{entrypoint}".into()];
    let plan = plan_for(req).unwrap();
    assert_eq!(plan.program.argv, ["/usr/bin/python3", "-I", "-B", "/workspace/main.py", "a b", "{entrypoint}"]);
}

#[test]
fn limits_above_the_maximum_are_refused_with_the_maximum() {
    let mut req = request("python", &[("main.py", "")]);
    req.limits = Limits { memory_bytes: Some(1 << 40), ..Default::default() };
    let err = plan_for(req).unwrap_err();
    assert_eq!(err.field, "limits.memory_bytes");
    assert!(err.message.contains("at most 4294967296"), "{err}");
}

#[test]
fn omitted_limits_take_the_defaults() {
    let mut req = request("python", &[("main.py", "")]);
    req.limits = Limits { wall_time_ms: Some(1234), ..Default::default() };
    let plan = plan_for(req).unwrap();
    assert_eq!(plan.program.limits.wall_time_ms, 1234);
    assert_eq!(plan.program.limits.memory_bytes, 268_435_456);
}

#[test]
fn entrypoint_must_be_among_the_files() {
    let err = plan_for(request("python", &[("other.py", "")])).unwrap_err();
    assert_eq!(err.field, "entrypoint");
    assert!(err.message.contains("other.py"), "{err}");
}

#[test]
fn env_holds_only_base_runtime_and_request_values() {
    let mut req = request("python", &[("main.py", "")]);
    req.env.insert("FOO".into(), "bar".into());
    req.secrets.insert("TOKEN".into(), "s3cret".into());
    let plan = plan_for(req).unwrap();
    let names: Vec<&str> = plan.env.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        names,
        ["FOO", "HOME", "LANG", "LOGNAME", "PATH", "PYTHONIOENCODING", "PYTHONUNBUFFERED", "TMPDIR", "TOKEN", "USER"]
    );
    assert_eq!(plan.secrets, vec![("TOKEN".to_string(), b"s3cret".to_vec())]);
}

#[test]
fn c_runtime_builds_first_with_the_runs_disk() {
    let plan = plan_for(request("c", &[("main.c", "int main(){}")])).unwrap();
    let build = plan.build.unwrap();
    assert_eq!(build.argv[0], "/usr/bin/gcc");
    assert!(build.argv.contains(&"/workspace/main.c".to_string()));
    assert_eq!(build.limits.disk_bytes, plan.program.limits.disk_bytes);
    assert_eq!(plan.program.argv, ["/tmp/runbox-prog"]);
}

#[test]
fn root_has_no_sys_and_only_run_dirs_writable() {
    let plan = plan_for(request("sh", &[("main.sh", "")])).unwrap();
    let paths: Vec<String> = plan.root.iter().map(|e| format!("{e:?}")).collect();
    assert!(!paths.iter().any(|p| p.contains("\"/sys")), "{paths:?}");
    let writable: Vec<&RootEntry> = plan.root.iter().filter(|e| matches!(e, RootEntry::RunDir { .. })).collect();
    assert_eq!(writable.len(), 3);
}

#[test]
fn every_root_entry_comes_after_its_parent_directory() {
    let plan = plan_for(request("python", &[("main.py", "")])).unwrap();
    let mut dirs = vec!["".to_string()];
    for entry in &plan.root {
        let (path, is_dir) = match entry {
            RootEntry::Dir { path } | RootEntry::Proc { path } | RootEntry::RunDir { path, .. } => (path, true),
            RootEntry::Mirror { path, .. } => (path, true),
            RootEntry::File { path, .. } | RootEntry::Device { path } | RootEntry::Symlink { path, .. } => {
                (path, false)
            }
        };
        let parent = &path[..path.rfind('/').unwrap()];
        assert!(dirs.iter().any(|d| d == parent), "{path} comes before its parent {parent:?}");
        if is_dir {
            dirs.push(path.clone());
        }
    }
}
