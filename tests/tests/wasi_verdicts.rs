//! Every verdict and limit of the WASI backend, reached by a `.wat` module (tests/fixtures/wasi)
//! run with the `wasm` runtime through the real runbox binary and real wasmtime. Each test checks
//! the verdict, the CLI's exit code, how the module ended, the limits that triggered, the output
//! kept, and that nothing is left behind.

use std::time::Instant;

use runbox_tests::*;
use serde_json::{Value, json};

const MIB: u64 = 1 << 20;

fn wat(source: &str) -> Value {
    request("wasm", "main.wasm", source)
}

#[track_caller]
fn assert_clean(rb: &Runbox) {
    assert!(rb.leftover_runs().is_empty(), "left behind under the state dir: {:?}", rb.leftover_runs());
}

#[test]
fn ok_returns_output_and_a_linux_shaped_result() {
    let rb = Runbox::new();
    let ran = rb.run(&wat(include_str!("../fixtures/wasi/hello.wat")));
    let result = assert_verdict(&ran, Verdict::Ok);
    assert_eq!(ran.exit_code, 0);
    assert_eq!((result.exit_code, result.signal, result.trap.as_deref()), (Some(0), None, None));
    assert_eq!(stdout_text(&result), "hello from wasm\n");
    assert_eq!(result.runtime.kind, "wasi");
    assert_eq!(result.step, "run");
    assert!(result.cleanup.ok, "{:?}", result.cleanup);
    assert!(result.limits_hit.is_empty(), "{:?}", result.limits_hit);
    for layer in ["wasmtime", "wasi_preview1", "preopen:/workspace:rw", "no_sockets", "memory_limit", "epoch_deadline"]
    {
        assert!(result.isolation.iter().any(|l| l == layer), "{layer} missing from {:?}", result.isolation);
    }
    assert!(result.isolation.last().is_some_and(|l| l.starts_with("tmpfs_workspace:")), "{:?}", result.isolation);
    // The module itself is the one artifact, hashed like any other.
    let module = include_str!("../fixtures/wasi/hello.wat");
    assert_eq!(result.artifacts.len(), 1);
    assert_eq!(result.artifacts[0].sha256, sha256_hex(module.as_bytes()));
    // Same top-level fields as a Linux result: callers never care which backend ran.
    let linux = rb.run(&sh("echo hi"));
    let keys = |v: &Value| v.as_object().unwrap().keys().filter(|k| *k != "trap").cloned().collect::<Vec<_>>();
    assert_eq!(keys(&ran.json), keys(&linux.json));
    assert_clean(&rb);
}

#[test]
fn proc_exit_status_is_nonzero_exit() {
    let rb = Runbox::new();
    let ran = rb.run(&wat(include_str!("../fixtures/wasi/exit3.wat")));
    let result = assert_verdict(&ran, Verdict::NonzeroExit);
    assert_eq!(ran.exit_code, 10);
    assert_eq!((result.exit_code, result.signal), (Some(3), None));
    assert_eq!(stderr_text(&result), "exiting with 3\n");
    assert_clean(&rb);
}

#[test]
fn a_trap_is_signaled_with_its_kind() {
    let rb = Runbox::new();
    let ran = rb.run(&wat(include_str!("../fixtures/wasi/trap.wat")));
    let result = assert_verdict(&ran, Verdict::Signaled);
    assert_eq!(ran.exit_code, 11);
    assert_eq!((result.exit_code, result.signal), (None, None));
    assert_eq!(result.trap.as_deref(), Some("unreachable_code_reached"));
    assert_eq!(stdout_text(&result), "before the trap\n", "output before the trap is kept");
    assert_clean(&rb);
}

#[test]
fn an_infinite_loop_is_stopped_at_the_wall_deadline() {
    let rb = Runbox::new();
    let request = with_limit(wat(include_str!("../fixtures/wasi/spin.wat")), "wall_time_ms", 1000);
    let ran = rb.run(&request);
    let result = assert_verdict(&ran, Verdict::WallTimeout);
    assert_eq!(ran.exit_code, 12);
    assert_eq!(result.limits_hit, vec![LimitKind::WallTime]);
    assert_eq!(stdout_text(&result), "spinning\n");
    assert!((1000..5000).contains(&result.usage.wall_time_ms), "{:?}", result.usage);
    assert_clean(&rb);
}

#[test]
fn a_blocking_sleep_is_stopped_at_the_wall_deadline() {
    let rb = Runbox::new();
    let request = with_limit(wat(include_str!("../fixtures/wasi/sleep.wat")), "wall_time_ms", 1000);
    let begun = Instant::now();
    let ran = rb.run(&request);
    let result = assert_verdict(&ran, Verdict::WallTimeout);
    // The module asked for 60 s in one poll_oneoff; it must not get it.
    assert!(begun.elapsed().as_secs() < 20, "took {:?}", begun.elapsed());
    assert!(result.usage.wall_time_ms < 5000, "{:?}", result.usage);
    assert_eq!(result.limits_hit, vec![LimitKind::WallTime]);
    assert_eq!(stdout_text(&result), "sleeping\n");
    assert_clean(&rb);
}

#[test]
fn fuel_runs_out_at_the_cpu_limit() {
    let rb = Runbox::new();
    let request = with_limit(wat(include_str!("../fixtures/wasi/spin.wat")), "cpu_time_ms", 300);
    let ran = rb.run(&with_limit(request, "wall_time_ms", 30_000));
    let result = assert_verdict(&ran, Verdict::CpuTimeout);
    assert_eq!(ran.exit_code, 13);
    assert_eq!(result.limits_hit, vec![LimitKind::CpuTime]);
    assert!(result.isolation.iter().any(|l| l == "cpu_fuel"), "{:?}", result.isolation);
    assert!(result.usage.wall_time_ms < 30_000, "{:?}", result.usage);
    assert_clean(&rb);
}

#[test]
fn memory_growth_is_refused_at_the_limit() {
    let rb = Runbox::new();
    let ran = rb.run(&with_limit(wat(include_str!("../fixtures/wasi/grow.wat")), "memory_bytes", 64 * MIB));
    let result = assert_verdict(&ran, Verdict::MemoryLimit);
    assert_eq!(ran.exit_code, 14);
    assert_eq!(result.exit_code, Some(1));
    assert_eq!(result.limits_hit, vec![LimitKind::Memory]);
    // It got as close to the limit as 4 MiB steps allow, and not past it.
    assert!((60 * MIB..=64 * MIB).contains(&result.usage.peak_memory_bytes), "{:?}", result.usage);
    assert_clean(&rb);
}

#[test]
fn an_output_flood_is_truncated_head_and_tail() {
    let rb = Runbox::new();
    let ran = rb.run(&with_limit(wat(include_str!("../fixtures/wasi/flood.wat")), "output_bytes", 1024));
    let result = assert_verdict(&ran, Verdict::Ok);
    assert_eq!(result.limits_hit, vec![LimitKind::Output]);
    assert!(result.stdout.truncated);
    assert_eq!(result.stdout.bytes_total, MIB);
    let text = stdout_text(&result);
    assert!(text.starts_with("0123456789abcdef"), "{text}");
    assert!(text.contains(&format!("[runbox: {} of {MIB} bytes omitted here", MIB - 1024)), "{text}");
    assert!(text.ends_with("0123456789abcdef"), "{text}");
    assert_clean(&rb);
}

#[test]
fn an_output_flood_is_killed_on_request() {
    let rb = Runbox::new();
    let mut request = with_limit(wat(include_str!("../fixtures/wasi/flood.wat")), "output_bytes", 1024);
    request["on_output_limit"] = json!("kill");
    let ran = rb.run(&request);
    let result = assert_verdict(&ran, Verdict::OutputLimit);
    assert_eq!(ran.exit_code, 15);
    assert_eq!(result.limits_hit, vec![LimitKind::Output]);
    assert!(result.stdout.bytes_total < MIB, "stopped early: {}", result.stdout.bytes_total);
    assert!(stdout_text(&result).starts_with("0123456789abcdef"), "output before the kill is kept");
    assert_clean(&rb);
}

#[test]
fn filling_the_disk_is_disk_limit() {
    let rb = Runbox::new();
    let ran = rb.run(&with_limit(wat(include_str!("../fixtures/wasi/fill.wat")), "disk_bytes", MIB));
    let result = assert_verdict(&ran, Verdict::DiskLimit);
    assert_eq!(ran.exit_code, 16);
    assert_eq!(result.exit_code, Some(1), "the module saw the write fail and exited 1");
    assert!(result.limits_hit.contains(&LimitKind::Disk), "{:?}", result.limits_hit);
    let fill = result.artifacts.iter().find(|a| a.path == "fill").expect("the partial file is an artifact");
    assert!(fill.size_bytes > MIB / 2 && fill.size_bytes <= MIB, "{fill:?}");
    assert_clean(&rb);
}

#[test]
fn an_invalid_module_is_refused_before_anything_runs() {
    let rb = Runbox::new();
    let ran = rb.run(&wat("(module (func $f (result i32)))) garbage"));
    let (field, message) = ran.rejection();
    assert_eq!(field, "entrypoint");
    assert!(message.contains("not a valid WebAssembly module"), "{message}");
    let ran = rb.run(&wat("(module (import \"env\" \"nope\" (func)) (func (export \"_start\")))"));
    let (field, message) = ran.rejection();
    assert_eq!(field, "entrypoint");
    assert!(message.contains("cannot link"), "{message}");
    assert_clean(&rb);
}

#[test]
fn cancelling_stops_a_sleeping_module() {
    let rb = Runbox::new();
    let running = rb.spawn_run(&wat(include_str!("../fixtures/wasi/sleep.wat")), |_| {});
    std::thread::sleep(std::time::Duration::from_millis(500));
    // SAFETY: kill(2) with a pid we own (our child) and a plain signal number.
    let rc = unsafe { libc::kill(running.pid() as i32, libc::SIGTERM) };
    assert_eq!(rc, 0);
    let ran = running.wait();
    let result = assert_verdict(&ran, Verdict::Cancelled);
    assert_eq!(ran.exit_code, 17);
    assert!(result.usage.wall_time_ms < 5000, "{:?}", result.usage);
    assert_clean(&rb);
}
