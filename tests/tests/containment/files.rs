use super::*;

// ---------------------------------------------------------------------------------------------
// Files

#[test]
fn host_files_are_out_of_reach() {
    let _sysctls = sysctls_unchanged();
    let id = nonce();
    let dir = tempfile::Builder::new().prefix("runbox-canary-").tempdir_in("/tmp").expect("tempdir");
    let marker = format!("runbox-canary-{id}");
    let in_tmp = Canary::new(dir.path().join("canary.txt"), format!("{marker} in /tmp\n"));
    let in_root = Canary::new(PathBuf::from(format!("/root/runbox-canary-{id}.txt")), format!("{marker} in /root\n"));
    let canaries = [&in_tmp, &in_root];
    let tmp_before = listing(dir.path());
    let control = format!("runbox-control-{id}");

    let paths: Vec<String> = canaries.iter().map(|c| c.path.display().to_string()).collect();
    let mut args = vec![marker.as_str(), control.as_str()];
    args.extend(paths.iter().map(String::as_str));
    let mut request = python_probe("host_files.py", &args);
    request["files"].as_array_mut().expect("files").push(json!({"path": "control.txt", "content": control}));
    let rb = Runbox::new();
    let ran = rb.run(&request);
    let report = probe_report(&ran);

    for path in &paths {
        let tries = &report["paths"][path];
        for how in ["read", "read_proc_self_root", "read_dotdot", "list_parent", "append", "create_beside"] {
            assert_eq!(errno_of(&tries[how]), "ENOENT", "{how} {path}: {tries}");
        }
        // pid 1 is not dumpable, so even its root link is closed to the program.
        assert_eq!(errno_of(&tries["read_proc1_root"]), "EACCES", "{path}: {tries}");
        // Under /tmp the program may make the directory in its own /tmp and write there;
        // /root cannot be made in the read-only root. Either way the host must not see it.
        let made = errno_of(&tries["mkdir_parent"]);
        assert!(["ok", "EROFS", "EACCES"].contains(&made), "{path}: {tries}");
    }
    assert_eq!(errno_of(&report["proc1_root"]), "EACCES", "{report}");
    assert_eq!(
        report["control_found_in"],
        json!(["/workspace/control.txt"]),
        "the marker search found no control: {report}"
    );
    assert_eq!(report["marker_found_in"], json!([]), "host canary content visible inside: {report}");

    // Host side: the canaries are intact, nothing appeared beside them.
    for canary in canaries {
        assert_eq!(fs::read_to_string(&canary.path).expect("canary still there"), canary.content);
    }
    assert_eq!(listing(dir.path()), tmp_before);
    assert!(!Path::new("/root/sandbox-was-here").exists());
    // runbox's artifact walk on the host must not have followed the planted symlinks.
    let result = ran.result();
    let canary_hashes: Vec<String> = canaries.iter().map(|c| sha256_hex(c.content.as_bytes())).collect();
    for artifact in &result.artifacts {
        assert!(
            !canary_hashes.contains(&artifact.sha256) && !artifact.path.starts_with("link-"),
            "artifact reached a host file: {artifact:?}"
        );
    }
    let skipped: BTreeMap<&str, &str> =
        result.artifacts_skipped.iter().map(|s| (s.path.as_str(), s.reason.as_str())).collect();
    for i in 0..canaries.len() {
        for link in [format!("link-abs-{i}"), format!("link-rel-{i}"), format!("link-dir-{i}")] {
            assert_eq!(skipped.get(link.as_str()), Some(&"symlink"), "{:?}", result.artifacts_skipped);
        }
    }
}

#[test]
fn root_is_read_only_and_dev_holds_only_the_listed_nodes() {
    let name = format!("runbox-escape-{}", nonce());
    let passwd_before = fs::read("/etc/passwd").expect("host passwd");
    let rb = Runbox::new();
    let report = probe_report(&rb.run(&python_probe("filesystem.py", &[&name])));

    for (path, got) in report["create"].as_object().expect("create") {
        let writable = ["/workspace/", "/tmp/", "/dev/shm/"].iter().any(|d| path.starts_with(d));
        match (writable, errno_of(got)) {
            (true, got) => assert_eq!(got, "ok", "the run's own {path} must be writable"),
            (false, "EROFS" | "EACCES") => {}
            (false, "ENOENT") if path.starts_with("/proc/") => {}
            (false, got) => panic!("create {path}: {got}"),
        }
    }
    for (what, results) in [
        ("mkdir", &report["mkdir"]),
        ("write", &report["write"]),
        ("chmod", &report["chmod"]),
        ("rename", &report["rename"]),
        ("unlink", &report["unlink"]),
        ("open", &report["open"]),
    ] {
        for (path, got) in results.as_object().expect(what) {
            assert!(["EROFS", "EACCES", "EPERM", "ENOENT"].contains(&errno_of(got)), "{what} {path}: {got}");
        }
    }
    assert!(["EROFS", "EACCES"].contains(&errno_of(&report["write"]["/etc/passwd"])), "{report}");
    for (path, got) in report["stat"].as_object().expect("stat") {
        assert_eq!(errno_of(got), "ENOENT", "{path} exists in the sandbox: {got}");
    }
    let read_only = json!({"read_only": true, "nosuid": true, "nodev": true});
    let writable = json!({"read_only": false, "nosuid": true, "nodev": true});
    for (path, want) in [
        ("/", &read_only),
        ("/usr", &read_only),
        ("/etc/passwd", &read_only),
        ("/workspace", &writable),
        ("/tmp", &writable),
        ("/dev/shm", &writable),
        ("/proc", &writable),
    ] {
        assert_eq!(&report["flags"][path], want, "mount flags of {path}");
    }
    assert_eq!(
        report["dev"],
        json!({
            "fd": "link:/proc/self/fd", "full": "char:1:7", "null": "char:1:3", "random": "char:1:8",
            "shm": "dir", "stderr": "link:/proc/self/fd/2", "stdin": "link:/proc/self/fd/0",
            "stdout": "link:/proc/self/fd/1", "urandom": "char:1:9", "zero": "char:1:5"
        }),
        "/dev"
    );
    let passwd = report["passwd"].as_str().expect("passwd");
    assert!(passwd.starts_with("runbox:x:1000:1000:") && !passwd.contains("root:"), "{passwd}");

    for path in [
        format!("/usr/{name}"),
        format!("/{name}"),
        format!("/etc/{name}"),
        format!("/usr/lib/{name}"),
        format!("/{name}-dir"),
    ] {
        assert!(!Path::new(&path).exists(), "{path} appeared on the host");
    }
    assert_eq!(fs::read("/etc/passwd").expect("host passwd"), passwd_before);
}
