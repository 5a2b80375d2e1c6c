//! The basic promise: code runs, output comes back, the workspace is gone afterwards.

use runbox_tests::*;

#[test]
fn hello_world_runs_and_leaves_nothing_behind() {
    let rb = Runbox::new();
    let ran = rb.run(&python("print('hello')"));
    let result = assert_verdict(&ran, Verdict::Ok);
    assert_eq!(ran.exit_code, 0);
    assert_eq!(stdout_text(&result), "hello\n");
    assert_eq!(result.exit_code, Some(0));
    assert!(result.cleanup.ok, "{:?}", result.cleanup);
    assert!(result.isolation.iter().any(|l| l == "seccomp"), "{:?}", result.isolation);
    assert_eq!(result.runtime.id, "python");
    assert!(rb.leftover_runs().is_empty(), "{:?}", rb.leftover_runs());
}

/// Every shipped runtime that is usable on this host runs a hello world. A runtime whose
/// interpreter is not installed must say so in `runbox runtimes` instead.
#[test]
fn every_usable_runtime_says_hello() {
    let rb = Runbox::new();
    let listing: serde_json::Value =
        serde_json::from_slice(&rb.cli(&["runtimes", "--json"]).stdout).expect("runtimes json");
    let programs = [
        ("python", "main.py", "print('hello')"),
        ("sh", "main.sh", "echo hello"),
        ("bash", "main.bash", "echo hello"),
        ("node", "main.js", "console.log('hello')"),
        ("c", "main.c", "#include <stdio.h>\nint main(void) { puts(\"hello\"); return 0; }\n"),
    ];
    for (id, entry, code) in programs {
        let runtime =
            listing.as_array().unwrap().iter().find(|r| r["id"] == id).unwrap_or_else(|| panic!("{id} listed"));
        if runtime["usable"] != true {
            assert!(runtime["unusable_reason"].as_str().is_some_and(|r| !r.is_empty()), "{runtime}");
            continue;
        }
        let result = assert_verdict(&rb.run(&request(id, entry, code)), Verdict::Ok);
        assert_eq!(stdout_text(&result), "hello\n", "{id}");
    }
    assert!(rb.leftover_runs().is_empty());
}
