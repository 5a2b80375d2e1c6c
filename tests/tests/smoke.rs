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
