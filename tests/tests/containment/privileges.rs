use super::*;

// ---------------------------------------------------------------------------------------------
// Credentials

#[test]
fn the_program_has_no_privileges_and_setuid_binaries_grant_none() {
    for binary in ["/usr/bin/su", "/usr/bin/passwd", "/usr/bin/mount"] {
        let meta = fs::metadata(binary).unwrap_or_else(|e| panic!("{binary}: {e}"));
        assert!(meta.uid() == 0 && meta.mode() & 0o4000 != 0, "{binary} is not setuid root on this host");
    }
    let rb = Runbox::new();
    let running = rb.spawn_run(&python_probe("credentials.py", &[]), |_| {});
    let host_id = (HOST_ID_BASE + running.pid()).to_string();
    let report = probe_report(&running.wait());

    let status = &report["status"];
    for cap in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert_eq!(status[cap], "0000000000000000", "{cap}: {report}");
    }
    assert_eq!(status["NoNewPrivs"], "1", "{report}");
    assert_eq!(status["Seccomp"], "2", "{report}");
    assert_eq!(status["Uid"], "1000\t1000\t1000\t1000", "{report}");
    assert_eq!(status["Gid"], "1000\t1000\t1000\t1000", "{report}");
    assert_eq!(status["Groups"].as_str().map(str::trim), Some(""), "{report}");
    assert_eq!(report["groups"], json!([]), "{report}");
    assert_eq!(report["id"], "uid=1000(runbox) gid=1000(runbox) groups=1000(runbox)", "{report}");
    // One id mapped, to an unprivileged host id; uid 0 of the namespace maps to nothing.
    assert_eq!(report["uid_map"], json!(["1000", host_id, "1"]), "{report}");
    assert_eq!(report["gid_map"], json!(["1000", host_id, "1"]), "{report}");
    for call in ["setuid0", "setgid0", "seteuid0", "setresuid0", "setgroups0", "setuid65534"] {
        assert!(["EINVAL", "EPERM"].contains(&errno_of(&report[call])), "{call}: {report}");
    }
    for binary in ["su", "passwd", "mount"] {
        let ran = &report[binary];
        assert_eq!(ran["setuid_bit"], true, "{binary} should look setuid inside too: {report}");
        assert_eq!(ran["name"], binary, "{report}");
        assert_eq!(ran["uid"], json!(["1000", "1000", "1000", "1000"]), "{binary} ran with other ids: {report}");
        assert_eq!(ran["gid"], json!(["1000", "1000", "1000", "1000"]), "{binary} ran with other ids: {report}");
        assert_ne!(ran["exit"], 0, "{report}");
        assert!(!ran["output"].as_str().unwrap_or("").contains("uid=0"), "{report}");
    }
}

// ---------------------------------------------------------------------------------------------
// Descriptors and environment

/// Starts runbox with `file` open as fd 7 and the host's `/` open as fd 8, neither
/// close-on-exec: descriptors a careless caller might leak into runbox.
fn inherit_host_fds(cmd: &mut std::process::Command, file: &Path) {
    // Opened above fd 8, so that putting one in place cannot overwrite the other.
    let high = |f: fs::File| {
        // SAFETY: fcntl(F_DUPFD_CLOEXEC) only reads `f`'s descriptor, which `f` keeps open.
        let fd = unsafe { libc::fcntl(std::os::fd::AsRawFd::as_raw_fd(&f), libc::F_DUPFD_CLOEXEC, 100) };
        assert!(fd >= 100, "dup above 100: {}", std::io::Error::last_os_error());
        // SAFETY: the descriptor was just made by fcntl and nothing else owns it.
        unsafe { <fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) }
    };
    let file = high(fs::File::open(file).expect("open file"));
    let root = high(fs::File::open("/").expect("open /"));
    let (file_fd, root_fd) = (std::os::fd::AsRawFd::as_raw_fd(&file), std::os::fd::AsRawFd::as_raw_fd(&root));
    // SAFETY: the closure runs in the forked child before exec and only calls dup2, which is
    // async-signal-safe; `file` and `root` move into it, so both descriptors stay open until
    // the fork, and dup2 gives the child copies without close-on-exec.
    unsafe {
        cmd.pre_exec(move || {
            let _keep = (&file, &root);
            for (from, to) in [(file_fd, 7), (root_fd, 8)] {
                if libc::dup2(from, to) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
}

#[test]
fn inherited_host_descriptors_do_not_reach_the_program() {
    let _sysctls = sysctls_unchanged();
    let dir = tempfile::Builder::new().prefix("runbox-fd-").tempdir_in("/tmp").expect("tempdir");
    let canary = Canary::new(dir.path().join("inherited.txt"), format!("runbox-inherited-{}\n", nonce()));
    let rb = Runbox::new();
    let running =
        rb.spawn_run(&python_probe("fds.py", &["--hold", "7", "8"]), |cmd| inherit_host_fds(cmd, &canary.path));
    let run_id = wait_started(&rb);
    // Control: runbox really got both descriptors.
    let fd_target = |fd: u32| fs::read_link(format!("/proc/{}/fd/{fd}", running.pid())).ok();
    assert_eq!(fd_target(7).as_deref(), Some(canary.path.as_path()));
    assert_eq!(fd_target(8).as_deref(), Some(Path::new("/")));
    release(&rb, &run_id);
    let ran = running.wait();
    let report = probe_report(&ran);

    assert_eq!(report["listed"], json!([0, 1, 2, 3]), "fd 3 is the listing's own: {report}");
    for (fd, target) in report["fds"].as_object().expect("fds") {
        assert!(target.as_str().is_some_and(|t| t.starts_with("pipe:")), "fd {fd} is {target}: {report}");
    }
    for fd in ["7", "8"] {
        let tries = &report["tries"][fd];
        assert_eq!(tries["fstat"], "EBADF", "fd {fd}: {report}");
        assert_eq!(tries["read"], "EBADF", "fd {fd}: {report}");
        assert_eq!(tries["proc_self"], "ENOENT", "fd {fd}: {report}");
        assert_eq!(tries["proc_init"], "EACCES", "fd {fd} through pid 1: {report}");
    }
    assert_eq!(report["proc_init_fds"], "EACCES", "{report}");
    assert!(!ran.json.to_string().contains(&canary.content.trim().to_string()), "the inherited file's content leaked");
}

#[test]
fn environment_holds_only_documented_variables() {
    let _sysctls = sysctls_unchanged();
    let secret = format!("host-secret-{}", nonce());
    let mut request = python_probe("environment.py", &[]);
    request["env"] = json!({"RUNBOX_REQUEST_VAR": "from-the-request"});
    request["secrets"] = json!({"RUNBOX_REQUEST_SECRET": format!("request-secret-{}", nonce())});
    let rb = Runbox::new();
    let ran = rb
        .spawn_run(&request, |cmd| {
            cmd.env("RUNBOX_TEST_HOST_SECRET", &secret)
                .env("PYTHONPATH", "/root/evil")
                .env("LD_PRELOAD", "/root/evil.so");
        })
        .wait();
    let report = probe_report(&ran);

    let environ = report["environ"].as_object().expect("environ");
    let keys: Vec<&str> = environ.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "HOME",
            "LANG",
            "LOGNAME",
            "PATH",
            "PYTHONIOENCODING",
            "PYTHONUNBUFFERED",
            "RUNBOX_REQUEST_SECRET",
            "RUNBOX_REQUEST_VAR",
            "TMPDIR",
            "USER"
        ],
        "{report}"
    );
    assert_eq!(report["count"], keys.len(), "duplicate variables: {report}");
    for (key, value) in [
        ("HOME", "/workspace"),
        ("LANG", "C.UTF-8"),
        ("LOGNAME", "runbox"),
        ("PATH", "/usr/local/bin:/usr/bin:/bin"),
        ("PYTHONIOENCODING", "utf-8"),
        ("PYTHONUNBUFFERED", "1"),
        ("RUNBOX_REQUEST_VAR", "from-the-request"),
        ("TMPDIR", "/tmp"),
        ("USER", "runbox"),
    ] {
        assert_eq!(environ[key], value, "{key}: {report}");
    }
    // The supervisor (pid 1 inside) holds runbox's host environment; it must stay closed.
    assert_eq!(report["init_environ"], "EACCES", "{report}");
    assert!(!ran.json.to_string().contains(&secret), "the host's variable reached the run: {}", ran.json);
}

// ---------------------------------------------------------------------------------------------
// init is a copy of the supervisor: it must hold nothing of the host.

/// pid 1 of the sandbox is a fork of the runbox supervisor that never execs, so it would keep
/// every descriptor the supervisor had (its stdio, anything its caller leaked into it, the
/// workspace directory, cgroup files) unless it closes them: it keeps only its channels.
#[test]
fn sandbox_init_keeps_no_host_descriptors() {
    let dir = tempfile::Builder::new().prefix("runbox-fd-").tempdir_in("/tmp").expect("tempdir");
    let canary = Canary::new(dir.path().join("inherited.txt"), format!("runbox-inherited-{}\n", nonce()));
    let rb = Runbox::new();
    let running = rb.spawn_run(&sh(HOLD_SH), |cmd| inherit_host_fds(cmd, &canary.path));
    let run_id = wait_started(&rb);
    let host_uid = HOST_ID_BASE + running.pid();
    let init = host_processes()
        .into_iter()
        .find(|p| p.ppid == running.pid() && p.uid == host_uid)
        .expect("the sandbox's init");
    let mut held = Vec::new();
    for entry in fs::read_dir(format!("/proc/{}/fd", init.pid)).expect("init fds").flatten() {
        let target = fs::read_link(entry.path()).unwrap_or_default();
        if target == canary.path || target == Path::new("/") {
            held.push(format!("fd {} -> {}", entry.file_name().to_string_lossy(), target.display()));
        }
    }
    release(&rb, &run_id);
    assert_verdict(&running.wait(), Verdict::Ok);
    assert!(held.is_empty(), "the sandbox's init (host pid {}) holds host descriptors: {held:?}", init.pid);
}

/// Restores a sysctl when dropped.
struct Sysctl {
    path: &'static str,
    old: String,
}

impl Drop for Sysctl {
    fn drop(&mut self) {
        let _ = fs::write(self.path, &self.old);
    }
}

/// With fs.suid_dumpable=1 (a documented admin/debug setting) the uid switch alone would leave
/// the sandbox's init dumpable, and the program, with the same uid, could read its environment
/// (runbox's host environment) and open its descriptors. init makes itself undumpable.
/// Changes a host-wide sysctl for the length of one run, under a lock that keeps the tests
/// that assume /proc/1 is closed from running meanwhile.
#[test]
fn init_stays_closed_when_the_host_allows_suid_dumps() {
    let dir = tempfile::Builder::new().prefix("runbox-fd-").tempdir_in("/tmp").expect("tempdir");
    let canary = Canary::new(dir.path().join("inherited.txt"), format!("runbox-inherited-{}\n", nonce()));
    let secret = format!("host-secret-{}", nonce());
    let _exclusive = HOST_SYSCTLS.write().unwrap_or_else(|poisoned| poisoned.into_inner());
    let path = "/proc/sys/fs/suid_dumpable";
    let restore = Sysctl { path, old: fs::read_to_string(path).expect("read sysctl") };
    fs::write(path, "1").expect("set fs.suid_dumpable=1");
    let script = "for f in /proc/1/environ /proc/1/fd/7 /proc/1/fd/8/etc/hostname; do \
                  if head -c 4096 $f >/dev/null 2>&1; then echo \"$f readable\"; fi; done\n\
                  (tr '\\0' '\\n' </proc/1/environ | grep RUNBOX_TEST_HOST_SECRET) 2>/dev/null\ncat /proc/1/fd/7 2>/dev/null\nexit 0\n";
    let rb = Runbox::new();
    let ran = rb.spawn_run(&sh(script), |cmd| {
        cmd.env("RUNBOX_TEST_HOST_SECRET", &secret);
        inherit_host_fds(cmd, &canary.path);
    });
    let ran = ran.wait();
    drop(restore);
    let result = assert_verdict(&ran, Verdict::Ok);
    assert_eq!(stdout_text(&result), "", "the program reached its init's host state");
}

/// pid 1 inside is runbox itself, forked without exec, and /proc/<pid>/cmdline is readable by
/// anyone: init scrubs its copy of runbox's command line (state dir, --env and --secret values,
/// a service's flags) and environment, and shows `runbox-init`.
#[test]
fn supervisor_command_line_is_not_visible_inside() {
    let rb = Runbox::new();
    let result = assert_verdict(&rb.run(&sh("tr '\\0' ' ' </proc/1/cmdline")), Verdict::Ok);
    let seen = stdout_text(&result);
    let state_dir = rb.state_dir().display().to_string();
    assert!(!seen.contains(&state_dir), "the program read runbox's host command line: {seen:?}");
}
