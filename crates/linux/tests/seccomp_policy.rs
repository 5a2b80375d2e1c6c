//! The seccomp policy as data: its content, its validation and the program it compiles to.
//! Nothing here installs a filter.

use std::time::Instant;

use runbox_linux::seccomp::{DEFAULT_POLICY_JSON, SeccompError, SeccompFilter};
use serde_json::Value;

/// The syscalls the policy must deny outright, whatever their arguments.
#[rustfmt::skip]
const ALWAYS_DENIED: &[&str] = &[
    "mount", "umount2", "pivot_root", "unshare", "setns", "chroot",
    "fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr", "open_tree_attr",
    "clone3", "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp", "process_madvise",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "open_by_handle_at", "name_to_handle_at",
    "reboot", "swapon", "swapoff", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
    "acct", "quotactl", "quotactl_fd", "syslog", "lookup_dcookie", "vhangup", "sethostname", "setdomainname",
];
/// Denied outright on this architecture only (the `deny_eperm@x86_64` section).
#[cfg(target_arch = "x86_64")]
const ALWAYS_DENIED_HERE: &[&str] = &["iopl", "ioperm", "uselib"];
#[cfg(not(target_arch = "x86_64"))]
const ALWAYS_DENIED_HERE: &[&str] = &[];
/// Denied for some argument values only.
const SOMETIMES_DENIED: &[&str] = &["clone", "ioctl", "personality"];

/// Read straight from the JSON, not through the crate's validation, so a validator that
/// stopped checking comments would not hide a missing one.
#[test]
fn every_rule_and_condition_in_the_policy_says_why() {
    let policy: Value = serde_json::from_str(DEFAULT_POLICY_JSON).expect("policy/seccomp.json is json");
    let mut rules = 0;
    for (section, body) in policy.as_object().expect("sections") {
        for (index, rule) in body["filter"].as_array().expect("filter list").iter().enumerate() {
            let comment = rule["comment"].as_str().unwrap_or("");
            assert!(
                comment.trim().len() > 10,
                "{section} filter[{index}] ({}) needs a comment saying why",
                rule["syscall"]
            );
            for arg in rule.get("args").and_then(Value::as_array).into_iter().flatten() {
                assert!(
                    !arg["comment"].as_str().unwrap_or("").trim().is_empty(),
                    "{section} filter[{index}]: every arg needs a comment naming the value"
                );
            }
            rules += 1;
        }
    }
    assert!(rules >= 60, "only {rules} rules: was the policy truncated?");
}

#[test]
fn the_built_in_policy_denies_what_it_must() {
    let filter = SeccompFilter::from_json(DEFAULT_POLICY_JSON).expect("the built-in policy compiles");
    let denied = filter.denied_syscalls();
    let find = |name| denied.iter().filter(move |d| d.syscall == name);
    for &name in ALWAYS_DENIED.iter().chain(ALWAYS_DENIED_HERE) {
        let rules: Vec<_> = find(name).collect();
        assert_eq!(rules.len(), 1, "{name} must have exactly one rule");
        assert!(!rules[0].conditional, "{name} must be denied whatever its arguments");
        let errno = if name == "clone3" { "ENOSYS" } else { "EPERM" };
        assert_eq!(rules[0].action, errno, "{name}");
    }
    for name in SOMETIMES_DENIED {
        assert!(
            find(name).all(|d| d.conditional && d.action == "EPERM"),
            "{name} must be denied for some arguments only"
        );
    }
    assert_eq!(find("clone").count(), 8, "one clone rule per namespace flag");
    assert!(find("getpid").next().is_none());
}

#[test]
fn the_program_starts_with_the_abi_check_and_allows_only_at_the_end() {
    let program = SeccompFilter::default_policy().expect("compiles").program();
    let ret_k = (libc::BPF_RET | libc::BPF_K) as u16;
    let last = program.last().expect("non-empty");
    assert_eq!((last.code, last.k), (ret_k, libc::SECCOMP_RET_ALLOW));
    // Every other way out of the program denies: a section's "allow" must have become a
    // jump to the next section, or it would skip the sections after it.
    let early_allows =
        program[..program.len() - 1].iter().filter(|i| i.code == ret_k && i.k == libc::SECCOMP_RET_ALLOW).count();
    assert_eq!(early_allows, 0);
    // The prefix: load arch, compare with the native one, kill; on x86_64 then the x32 check.
    let kill = (ret_k, libc::SECCOMP_RET_KILL_PROCESS);
    assert_eq!((program[0].code, program[0].k), ((libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16, 4));
    assert_eq!((program[2].code, program[2].k), kill);
    #[cfg(target_arch = "x86_64")]
    {
        assert_eq!(program[1].k, 0xc000_003e, "AUDIT_ARCH_X86_64");
        assert_eq!(
            (program[4].code, program[4].k),
            ((libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16, 0x4000_0000)
        );
        assert_eq!((program[5].code, program[5].k), kill);
    }
    #[cfg(target_arch = "aarch64")]
    assert_eq!(program[1].k, 0xc000_00b7, "AUDIT_ARCH_AARCH64");
    assert!(program.len() <= libc::BPF_MAXINSNS as usize);
}

#[test]
fn the_built_in_policy_compiles_once_and_quickly() {
    let mut compiles: Vec<_> = (0..20)
        .map(|_| {
            let started = Instant::now();
            SeccompFilter::from_json(DEFAULT_POLICY_JSON).expect("compiles");
            started.elapsed()
        })
        .collect();
    compiles.sort();
    let first = SeccompFilter::default_policy().expect("compiles");
    let started = Instant::now();
    let again = SeccompFilter::default_policy().expect("compiles");
    let cached = started.elapsed();
    assert!(std::ptr::eq(first, again), "default_policy must not recompile");
    eprintln!(
        "seccomp policy: {} instructions, {} rules; compile min {} µs, median {} µs; cached call {} ns",
        first.program().len(),
        first.denied_syscalls().len(),
        compiles[0].as_micros(),
        compiles[compiles.len() / 2].as_micros(),
        cached.as_nanos()
    );
}

fn section(filter: &str) -> String {
    format!(r#"{{"deny": {{"mismatch_action": "allow", "match_action": {{"errno": 1}}, "filter": [{filter}]}}}}"#)
}

fn error(json: &str) -> SeccompError {
    SeccompFilter::from_json(json).expect_err("this policy must be refused")
}

#[test]
fn broken_json_is_refused_with_its_position() {
    let err = error("{\"deny\": {\"filter\": [\n  {\"syscall\": \"mount\",}\n]}}");
    assert!(matches!(err, SeccompError::Json { .. }), "{err:?}");
    assert!(err.to_string().contains("line 2"), "{err}");
}

#[test]
fn a_bad_rule_is_refused_by_section_index_and_name() {
    let dword_eq = |index: u8| format!(r#"[{{"index": {index}, "type": "dword", "op": "eq", "val": 1}}]"#);
    #[rustfmt::skip]
    let cases = [
        (r#"{"syscall": "mount", "comment": "ok"}, {"syscall": "mount2", "comment": "typo"}"#.to_owned(), 1, "mount2", "mount2"),
        (r#"{"syscall": "open_tree_attr", "nr": 467, "comment": "new"}, {"syscall": "mount2", "comment": "typo"}"#.to_owned(), 1, "mount2", "mount2"),
        (r#"{"syscall": "mount"}"#.to_owned(), 0, "mount", "comment"),
        (r#"{"syscall": "mount", "comment": "  "}"#.to_owned(), 0, "mount", "comment"),
        (r#"{"syscall": "mount", "comment": "ok", "comments": "typo"}"#.to_owned(), 0, "mount", "comments"),
        (r#"{"syscall": "mount", "comment": "ok", "args": []}"#.to_owned(), 0, "mount", "args"),
        (format!(r#"{{"syscall": "ioctl", "comment": "all"}}, {{"syscall": "ioctl", "comment": "some", "args": {}}}"#, dword_eq(1)), 1, "ioctl", "without"),
        (format!(r#"{{"syscall": "ioctl", "comment": "x", "args": {}}}"#, dword_eq(9)), 0, "ioctl", "argument index"),
        (r#"{"syscall": "open_tree_attr", "nr": 12, "comment": "x"}"#.to_owned(), 0, "open_tree_attr", "424"),
        (format!(r#"{{"syscall": "open_tree_attr", "nr": 467, "comment": "x", "args": {}}}"#, dword_eq(0)), 0, "open_tree_attr", "cannot have"),
        (r#"{"comment": "no name"}"#.to_owned(), 0, "?", "syscall"),
    ];
    for (rules, want_index, want_syscall, want_words) in cases {
        let err = error(&section(&rules));
        let SeccompError::Rule { ref section, index, ref syscall, ref reason } = err else {
            panic!("expected a rule error for {rules}, got {err:?}");
        };
        assert_eq!((section.as_str(), index, syscall.as_str()), ("deny", want_index, want_syscall), "{err}");
        assert!(reason.contains(want_words), "{err}");
        assert!(err.to_string().starts_with("seccomp policy section `deny`, filter["), "{err}");
    }
}

#[test]
fn a_bad_section_is_refused_by_name() {
    let section = |key: &str, mismatch: &str, action: &str| {
        format!(
            r#"{{"{key}": {{"mismatch_action": {mismatch}, "match_action": {action}, "filter": [{{"syscall": "mount", "comment": "ok"}}]}}}}"#
        )
    };
    #[rustfmt::skip]
    let cases = [
        (section("deny", r#""kill_process""#, r#""allow""#), "deny", "mismatch_action"),
        (section("deny", r#""allow""#, r#""allow""#), "deny", "match_action"),
        (section("deny", r#""allow""#, r#"{"errno": "x"}"#), "deny", "match_action"),
        (section("deny@sparc", r#""allow""#, r#""trap""#), "deny@sparc", "sparc"),
    ];
    for (json, want_section, want_words) in cases {
        let err = error(&json);
        let SeccompError::Section { ref section, ref reason } = err else {
            panic!("expected a section error for {json}, got {err:?}");
        };
        assert_eq!(section, want_section, "{err}");
        assert!(reason.contains(want_words), "{err}");
    }
    assert_eq!(error("[]"), SeccompError::NotSections);
    assert_eq!(error("{}"), SeccompError::NotSections);
}

#[test]
fn numbered_rules_are_matched_by_number() {
    let json = section(r#"{"syscall": "open_tree_attr", "nr": 467, "comment": "newer than seccompiler"}"#);
    let filter = SeccompFilter::from_json(&json).expect("compiles");
    let program = filter.program();
    let at = program.iter().position(|i| i.code == (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16 && i.k == 467);
    let at = at.expect("a compare with 467");
    assert_eq!((program[at].jt, program[at].jf), (0, 1));
    assert_eq!(program[at + 1].k, libc::SECCOMP_RET_ERRNO | 1, "then EPERM");
    assert_eq!(filter.denied_syscalls()[0].syscall, "open_tree_attr");
}

#[test]
fn a_syscall_belongs_to_one_section() {
    let json = r#"{
        "a": {"mismatch_action": "allow", "match_action": {"errno": 1}, "filter": [{"syscall": "mount", "comment": "one"}]},
        "b": {"mismatch_action": "allow", "match_action": {"errno": 38}, "filter": [{"syscall": "mount", "comment": "two"}]}
    }"#;
    let err = error(json);
    assert!(
        matches!(&err, SeccompError::Rule { section, syscall, .. } if section == "b" && syscall == "mount"),
        "{err:?}"
    );
    assert!(err.to_string().contains("already listed in section `a`"), "{err}");
}

#[test]
fn sections_for_another_arch_are_checked_but_not_compiled() {
    // `iopl` exists on x86_64 only; `no_such_syscall` exists nowhere.
    let other = if cfg!(target_arch = "x86_64") { "aarch64" } else { "x86_64" };
    let json = format!(
        r#"{{"deny": {{"mismatch_action": "allow", "match_action": {{"errno": 1}}, "filter": [{{"syscall": "mount", "comment": "ok"}}]}},
            "deny@{other}": {{"mismatch_action": "allow", "match_action": {{"errno": 1}}, "filter": [{{"syscall": "no_such_syscall", "comment": "elsewhere"}}]}}}}"#
    );
    let filter = SeccompFilter::from_json(&json).expect("a section for another arch is skipped");
    let names: Vec<_> = filter.denied_syscalls().iter().map(|d| d.syscall.as_str()).collect();
    assert_eq!(names, ["mount"]);
    let missing_comment = json.replace(r#""comment": "elsewhere""#, r#""comment": """#);
    assert!(matches!(error(&missing_comment), SeccompError::Rule { .. }), "skipped sections are still validated");
}

/// The embedded x86_64 program is the JSON policy compiled: editing one without the other
/// fails here. `RUNBOX_UPDATE_SECCOMP_BPF=1 cargo test -p runbox-linux --test seccomp_policy`
/// rewrites the embedded program from the JSON.
#[test]
#[cfg(target_arch = "x86_64")]
fn the_precompiled_default_program_is_the_json_policy_compiled() {
    let compiled = SeccompFilter::from_json(runbox_linux::seccomp::DEFAULT_POLICY_JSON).unwrap().to_bpf_bytes();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/policy/seccomp.x86_64.bpf");
    if std::env::var_os("RUNBOX_UPDATE_SECCOMP_BPF").is_some() {
        std::fs::write(path, &compiled).unwrap();
    }
    let embedded = runbox_linux::seccomp::PRECOMPILED_DEFAULT.unwrap();
    assert!(embedded == compiled.as_slice(), "{path} is stale: run with RUNBOX_UPDATE_SECCOMP_BPF=1 to rebuild it");
    assert_eq!(SeccompFilter::default_policy().unwrap().program().len(), compiled.len() / 8);
}
