use super::*;

// ---------------------------------------------------------------------------------------------
// Syscalls

/// Each probe line of syscalls.c, with the syscall the policy must deny (None: must work).
const SYSCALL_ATTEMPTS: &[(&str, Option<&str>)] = &[
    ("fork", None),
    ("pthread_create", None),
    ("workspace_file", None),
    ("ptrace_traceme", Some("ptrace")),
    ("ptrace_attach", Some("ptrace")),
    ("process_vm_readv", Some("process_vm_readv")),
    ("process_vm_writev", Some("process_vm_writev")),
    ("kcmp", Some("kcmp")),
    ("pidfd_getfd", Some("pidfd_getfd")),
    ("mount", Some("mount")),
    ("umount2", Some("umount2")),
    ("pivot_root", Some("pivot_root")),
    ("chroot", Some("chroot")),
    ("fsopen", Some("fsopen")),
    ("open_tree", Some("open_tree")),
    ("open_tree_attr", Some("open_tree_attr")),
    ("unshare_newuser", Some("unshare")),
    ("unshare_newns", Some("unshare")),
    ("setns", Some("setns")),
    ("clone_newuser", Some("clone")),
    ("clone_newnet", Some("clone")),
    ("clone3", Some("clone3")),
    ("keyctl", Some("keyctl")),
    ("add_key", Some("add_key")),
    ("request_key", Some("request_key")),
    ("bpf", Some("bpf")),
    ("perf_event_open", Some("perf_event_open")),
    ("userfaultfd", Some("userfaultfd")),
    ("io_uring_setup", Some("io_uring_setup")),
    ("io_uring_enter", Some("io_uring_enter")),
    ("name_to_handle_at", Some("name_to_handle_at")),
    ("open_by_handle_at", Some("open_by_handle_at")),
    ("personality", Some("personality")),
    ("reboot", Some("reboot")),
    ("swapon", Some("swapon")),
    ("settimeofday", Some("settimeofday")),
    ("clock_settime", Some("clock_settime")),
    ("kexec_load", Some("kexec_load")),
    ("init_module", Some("init_module")),
    ("sethostname", Some("sethostname")),
    ("ioctl_tiocsti", Some("ioctl")),
    ("ioctl_tiocsti_high_bits", Some("ioctl")),
    ("ioctl_tioclinux", Some("ioctl")),
];

/// What the policy (crates/linux/policy/seccomp.json) says a denied syscall fails with,
/// by the errno of the section that lists it.
fn policy_outcomes() -> BTreeMap<String, String> {
    let policy: Value =
        serde_json::from_str(include_str!("../../../crates/linux/policy/seccomp.json")).expect("policy json");
    let mut outcomes = BTreeMap::new();
    for (section, body) in policy.as_object().expect("sections") {
        if section.split_once('@').is_some_and(|(_, arch)| arch != std::env::consts::ARCH) {
            continue;
        }
        let errno = match body["match_action"]["errno"].as_i64() {
            Some(1) => "EPERM",
            Some(38) => "ENOSYS",
            other => panic!("section {section}: unexpected action {other:?}"),
        };
        for rule in body["filter"].as_array().expect("filter") {
            outcomes.insert(rule["syscall"].as_str().expect("syscall").to_string(), errno.to_string());
        }
    }
    outcomes
}

#[test]
fn denied_syscalls_fail_as_the_policy_says() {
    let rb = Runbox::new();
    let ran = rb.run(&request("c", "main.c", probe_source("syscalls.c")));
    let result = assert_verdict(&ran, Verdict::Ok);
    assert_eq!(result.step, "run");
    let out = stdout_text(&result);
    let lines: BTreeMap<&str, &str> = out.lines().filter_map(|l| l.split_once(' ')).collect();
    assert_eq!(lines.get("pid"), Some(&"2"), "{out}");
    assert!(out.ends_with("done\n"), "the probe did not finish: {out}\nstderr: {}", stderr_text(&result));

    let policy = policy_outcomes();
    let mut wrong = Vec::new();
    for &(attempt, syscall) in SYSCALL_ATTEMPTS {
        let want = match syscall {
            None => "ok",
            Some(name) => policy.get(name).unwrap_or_else(|| panic!("the policy has no rule for {name}")).as_str(),
        };
        let got = lines.get(attempt).copied().unwrap_or("<missing>");
        if got != want {
            wrong.push(format!("{attempt}: got {got}, policy says {want}"));
        }
    }
    // seccomp.rs `abi_prefix`: a foreign ABI kills the whole process (SECCOMP_RET_KILL_PROCESS).
    for attempt in ["x32_getpid", "i386_getpid"] {
        if lines.get(attempt) != Some(&"killed:SIGSYS") {
            wrong.push(format!("{attempt}: got {:?}, want killed:SIGSYS", lines.get(attempt)));
        }
    }
    assert!(wrong.is_empty(), "{}\nprobe output:\n{out}", wrong.join("\n"));
}
