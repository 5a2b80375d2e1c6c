//! Per-run overhead of the WASI executor, in one warm process (what a long-running service
//! pays per run): instantiation alone, and a whole run (guest thread, store, instantiation,
//! call, join) of a module that does nothing, then of python-wasi running `pass`.
//!
//!     cargo run --release -p runbox-wasi --example overhead -- [CACHE_DIR] [RUNS]
//!
//! python-wasi is measured when `runbox prepare` has filled CACHE_DIR (default
//! /var/cache/runbox). Not a test.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use runbox_contract::ResolvedLimits;
use runbox_runtimes::{Allowlist, CpuMetering, PreopenSource, WasiModule};
use runbox_wasi::{EngineSettings, Entry, Executor, Preopen, Program, RunSpec, Stub};

fn main() {
    let mut args = std::env::args().skip(1);
    let cache_dir = PathBuf::from(args.next().unwrap_or_else(|| "/var/cache/runbox".into()));
    let runs: u32 = args.next().map_or(200, |n| n.parse().expect("RUNS is a number"));
    let executor = Executor::new(&cache_dir, false);
    let workspace = tempfile::tempdir().expect("temp dir");
    let limits = ResolvedLimits {
        wall_time_ms: 10_000,
        cpu_time_ms: 10_000,
        memory_bytes: 1 << 30,
        processes: 1,
        disk_bytes: 1 << 30,
        output_bytes: 1 << 20,
        open_files: 256,
    };
    let empty = "(module (memory (export \"memory\") 1) (func (export \"_start\")))";
    let settings = EngineSettings { fuel: false, wasm_stack_bytes: 1 << 20 };
    let module = executor.compile(settings, empty.as_bytes()).expect("compile");
    let entry = Entry { initialize: false, export: "_start".into() };
    let program = executor.link(settings, &module, entry, &[]).expect("link");
    let preopens = [Preopen { host: workspace.path().into(), guest: "/workspace".into(), writable: true }];
    measure("empty module", &program, &["main.wasm".into()], &preopens, limits, runs);

    let allowlist = Allowlist::embedded().expect("embedded runtimes");
    let runtime = allowlist.get("python-wasi").expect("python-wasi");
    let wasi = runtime.wasi.as_ref().expect("a wasi runtime");
    let (Some(package), WasiModule::Package { sha256, .. }) = (&wasi.package, &wasi.module) else {
        unreachable!("python-wasi has a package module")
    };
    let Ok(dir) = runbox_wasi::check_package(&cache_dir, package) else {
        println!("python-wasi: not prepared in {}; run `runbox prepare`", cache_dir.display());
        return;
    };
    let settings = EngineSettings {
        fuel: matches!(wasi.cpu, CpuMetering::Fuel { .. }),
        wasm_stack_bytes: wasi.wasm_stack_bytes as usize,
    };
    let begun = Instant::now();
    let module = executor.load_prepared(settings, sha256).expect("prepared module");
    let stubs: Vec<Stub> = wasi
        .stubs
        .iter()
        .map(|s| Stub { module: s.module.clone(), name: s.name.clone(), returns: s.returns })
        .collect();
    let entry = Entry { initialize: wasi.initialize, export: wasi.export.clone() };
    let program = executor.link(settings, &module, entry, &stubs).expect("link");
    println!("python-wasi: module mapped from the cache and linked in {:?}", begun.elapsed());
    let preopens: Vec<Preopen> = wasi
        .preopens
        .iter()
        .map(|p| Preopen {
            host: match &p.source {
                PreopenSource::Package(sub) => dir.join(sub),
                _ => workspace.path().into(),
            },
            guest: p.guest.clone(),
            writable: p.source.writable(),
        })
        .collect();
    let argv = ["/usr/local/bin/python.wasm".to_string(), "-c".into(), "pass".into()];
    measure("python-wasi -c pass", &program, &argv, &preopens, limits, runs.min(50));
    // Guest threads are joined and the runtime's blocking threads shut down with it, so a
    // process that also starts Linux sandboxes is single-threaded again between runs.
    let threads = std::fs::read_dir("/proc/self/task").map(|d| d.count()).unwrap_or(0);
    println!("threads left in this process after the runs: {threads}");
}

fn measure(name: &str, program: &Program, argv: &[String], preopens: &[Preopen], limits: ResolvedLimits, runs: u32) {
    let (mut whole, mut instantiate) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let begun = Instant::now();
        let spec = RunSpec {
            argv,
            env: &[],
            stdin: b"",
            preopens,
            limits,
            kill_on_output_limit: false,
            fuel_per_ms: None,
            deterministic: false,
        };
        let outcome = runbox_wasi::run(program, &spec, Default::default());
        whole.push(begun.elapsed());
        instantiate.push(outcome.instantiate_time);
        assert!(outcome.failure.is_none(), "{:?}", outcome.failure);
    }
    println!(
        "{name}: median per run {:?} (instantiation {:?}) over {runs} runs",
        median(&mut whole),
        median(&mut instantiate)
    );
}

fn median(times: &mut [Duration]) -> Duration {
    times.sort();
    times[times.len() / 2]
}
