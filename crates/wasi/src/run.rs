//! One run of a [`Program`]: a fresh store with the run's limits, the guest on a thread of its
//! own (driving a current-thread tokio runtime, so guest code never runs on a shared worker),
//! and the watcher on the caller's thread.

use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::time::{ClockId, clock_gettime};
use runbox_contract::ResolvedLimits;
use runbox_linux::{Captured, OutputStream, OutputTap};
use wasmtime::{Store, Trap, UpdateDeadline};
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::p2::pipe::MemoryInputPipe;
use wasmtime_wasi::{FsPerms, I32Exit, WasiCtxBuilder};

use crate::determinism::make_deterministic;
use crate::limiter::RunLimiter;
use crate::pipe::{CappedPipe, Live};
use crate::program::Program;
use crate::stop::{Stop, StopReason, Stopped};
use crate::watch::{Watched, watch};

/// The store's data: the WASI context and the memory limiter.
pub(crate) struct Guest {
    pub(crate) wasi: WasiP1Ctx,
    limiter: RunLimiter,
}

/// A host directory the guest sees at `guest`.
#[derive(Debug, Clone)]
pub struct Preopen {
    pub host: PathBuf,
    pub guest: String,
    pub writable: bool,
}

/// Everything one run needs besides the program.
pub struct RunSpec<'a> {
    /// argv as the guest sees it, argv[0] included.
    pub argv: &'a [String],
    pub env: &'a [(String, String)],
    pub stdin: &'a [u8],
    pub preopens: &'a [Preopen],
    pub limits: ResolvedLimits,
    /// Stop the run when a stream passes `limits.output_bytes`, instead of truncating.
    pub kill_on_output_limit: bool,
    /// Fuel per millisecond of `limits.cpu_time_ms`; `Some` exactly when the program was
    /// compiled with fuel. `None` limits the CPU time of the guest's thread instead.
    pub fuel_per_ms: Option<u64>,
    /// Fixed clocks and seeded randomness (see `determinism`).
    pub deterministic: bool,
}

/// What the caller's thread watches while the guest runs.
#[derive(Default, Clone, Copy)]
pub struct Watchers<'a> {
    /// Readable means: cancel the run.
    pub cancel: Option<BorrowedFd<'a>>,
    /// A descriptor on the run's filesystem, sampled to notice a full disk.
    pub disk: Option<BorrowedFd<'a>>,
    /// Sees the output as it is written (up to one byte past `output_bytes` per stream), on
    /// the caller's thread, within a tick.
    pub tap: Option<&'a OutputTap<'a>>,
}

/// How the guest ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    /// `proc_exit`, the status `run` returned, or 0 when `_start` returned.
    Code(i32),
    /// A WebAssembly trap (snake_case kind, e.g. `unreachable_code_reached`), or a host call
    /// that failed because of the guest (its message).
    Trap(String),
    /// Stopped by runbox (see [`Outcome::stopped_for`]), or it never started.
    Unknown,
}

#[derive(Debug)]
pub struct Outcome {
    pub exit: Exit,
    pub stopped_for: Option<StopReason>,
    pub stdout: Captured,
    pub stderr: Captured,
    pub cpu_time_ns: u64,
    /// The largest linear memory the guest held.
    pub peak_memory_bytes: u64,
    /// A memory growth was refused at `limits.memory_bytes`.
    pub memory_denied: bool,
    /// From the start of instantiation to the end of the call.
    pub run_time: Duration,
    /// Instantiation alone (pooling slot, copy-on-write memory image, WASI context linked).
    pub instantiate_time: Duration,
    pub disk_full_seen: bool,
    pub disk_peak_used_bytes: u64,
    /// runbox failed: a preopen could not be opened, the instance pool is exhausted...
    pub failure: Option<String>,
}

/// What the guest thread hands back.
struct Ended {
    exit: Exit,
    failure: Option<String>,
    fuel_out: bool,
    cpu_time_ns: u64,
    run_time: Duration,
    instantiate_time: Duration,
    peak_memory_bytes: u64,
    memory_denied: bool,
}

/// Runs `program` once. Blocks until the guest has ended and its thread is joined.
pub fn run(program: &Program, spec: &RunSpec<'_>, watchers: Watchers<'_>) -> Outcome {
    let stop = Arc::new(Stop::default());
    let (chunks, feed) = std::sync::mpsc::channel();
    let live = |stream| watchers.tap.map(|_| Live { stream, chunks: chunks.clone() });
    let pipe =
        |stream| CappedPipe::new(spec.limits.output_bytes, spec.kill_on_output_limit, stop.clone(), live(stream));
    let (stdout, stderr) = (pipe(OutputStream::Stdout), pipe(OutputStream::Stderr));
    drop(chunks);
    let live = watchers.tap.map(|tap| (feed, tap));
    let (ended, watched) = match UnixStream::pair() {
        Err(e) => (failed(format!("create the guest's hang-up socket: {e}")), Watched::default()),
        Ok((done_read, done_write)) => std::thread::scope(|scope| {
            let guest = std::thread::Builder::new().name("runbox-wasi".into()).spawn_scoped(scope, || {
                let ended = guest_thread(program, spec, &stop, &stdout, &stderr);
                drop(done_write);
                ended
            });
            match guest {
                Err(e) => (failed(format!("start the guest thread: {e}")), Watched::default()),
                Ok(guest) => {
                    let done = OwnedFd::from(done_read);
                    let watched = watch(&program.engine, &stop, &done, watchers.cancel, watchers.disk, live);
                    let ended = guest.join().unwrap_or_else(|_| failed("the guest thread panicked".into()));
                    (ended, watched)
                }
            }
        }),
    };
    let mut stopped_for = stop.reason();
    if ended.fuel_out && stopped_for.is_none() {
        stopped_for = Some(StopReason::CpuTime);
    }
    Outcome {
        exit: ended.exit,
        stopped_for,
        stdout: stdout.finish(),
        stderr: stderr.finish(),
        cpu_time_ns: ended.cpu_time_ns,
        peak_memory_bytes: ended.peak_memory_bytes,
        memory_denied: ended.memory_denied,
        run_time: ended.run_time,
        instantiate_time: ended.instantiate_time,
        disk_full_seen: watched.disk_full_seen,
        disk_peak_used_bytes: watched.disk_peak_used_bytes,
        failure: ended.failure,
    }
}

fn failed(message: String) -> Ended {
    Ended {
        exit: Exit::Unknown,
        failure: Some(message),
        fuel_out: false,
        cpu_time_ns: 0,
        run_time: Duration::ZERO,
        instantiate_time: Duration::ZERO,
        peak_memory_bytes: 0,
        memory_denied: false,
    }
}

fn guest_thread(
    program: &Program,
    spec: &RunSpec<'_>,
    stop: &Arc<Stop>,
    stdout: &CappedPipe,
    stderr: &CappedPipe,
) -> Ended {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_time().build() {
        Ok(rt) => rt,
        Err(e) => return failed(format!("start the guest's tokio runtime: {e}")),
    };
    let wasi = match wasi_context(spec, stdout, stderr) {
        Ok(wasi) => wasi,
        Err(e) => return failed(e),
    };
    let mut store = Store::new(&program.engine, Guest { wasi, limiter: RunLimiter::new(spec.limits.memory_bytes) });
    store.limiter(|guest| &mut guest.limiter);
    if let Some(per_ms) = spec.fuel_per_ms
        && let Err(e) = store.set_fuel(spec.limits.cpu_time_ms.saturating_mul(per_ms))
    {
        return failed(format!("set fuel: {e:#}"));
    }
    let begun = Instant::now();
    let cpu_begun = thread_cpu_ns();
    let deadline = begun + Duration::from_millis(spec.limits.wall_time_ms);
    let cpu_limit_ns = spec.fuel_per_ms.is_none().then(|| spec.limits.cpu_time_ms.saturating_mul(1_000_000));
    // Called on this thread at every epoch tick while wasm runs: the only place a busy guest
    // can be stopped, since WebAssembly cannot be pre-empted from outside.
    let watcher = stop.clone();
    store.epoch_deadline_callback(move |_| {
        if Instant::now() >= deadline {
            watcher.stop(StopReason::WallTime);
        }
        if cpu_limit_ns.is_some_and(|limit| thread_cpu_ns().saturating_sub(cpu_begun) >= limit) {
            watcher.stop(StopReason::CpuTime);
        }
        match watcher.trap() {
            Some(trap) => Err(trap),
            None => Ok(UpdateDeadline::Continue(1)),
        }
    });
    store.set_epoch_deadline(1);
    let mut instantiated = None;
    let outcome = runtime.block_on(async {
        // A guest waiting in the host (a sleep in poll_oneoff) runs no epoch callback, so the
        // deadline and a cancel also end the call from out here, dropping it.
        tokio::select! {
            biased;
            called = call(program, &mut store, &mut instantiated) => Some(called),
            () = stop.stopped() => None,
            () = tokio::time::sleep_until(deadline.into()) => {
                stop.stop(StopReason::WallTime);
                None
            }
        }
    });
    let cpu_time_ns = thread_cpu_ns().saturating_sub(cpu_begun);
    let run_time = begun.elapsed();
    let limiter = &store.data().limiter;
    let (peak_memory_bytes, memory_denied) = (limiter.peak_bytes(), limiter.denied);
    let (exit, failure, fuel_out) = match outcome {
        None => (Exit::Unknown, None, false),
        Some(Ok(status)) => (Exit::Code(status), None, false),
        Some(Err(Called::Instantiate(e))) if !memory_denied && stop.reason().is_none() => {
            (Exit::Unknown, Some(format!("instantiate: {e:#}")), false)
        }
        Some(Err(Called::Instantiate(_))) => (Exit::Unknown, None, false),
        Some(Err(Called::Run(e))) => classify(&e),
    };
    let instantiate_time = instantiated.map_or(Duration::ZERO, |at: Instant| at.duration_since(begun));
    Ended { exit, failure, fuel_out, cpu_time_ns, run_time, instantiate_time, peak_memory_bytes, memory_denied }
}

enum Called {
    Instantiate(wasmtime::Error),
    Run(wasmtime::Error),
}

/// Instantiates and enters the program. Ok is the exit status.
async fn call(program: &Program, store: &mut Store<Guest>, instantiated: &mut Option<Instant>) -> Result<i32, Called> {
    let instance = program.pre.instantiate_async(&mut *store).await.map_err(Called::Instantiate)?;
    *instantiated = Some(Instant::now());
    let run = async {
        if program.entry.initialize {
            let init = instance.get_typed_func::<(), ()>(&mut *store, "_initialize")?;
            init.call_async(&mut *store, ()).await?;
        }
        if program.returns_status {
            let main = instance.get_typed_func::<(), i32>(&mut *store, &program.entry.export)?;
            main.call_async(&mut *store, ()).await
        } else {
            let main = instance.get_typed_func::<(), ()>(&mut *store, &program.entry.export)?;
            main.call_async(&mut *store, ()).await.map(|()| 0)
        }
    };
    run.await.map_err(Called::Run)
}

/// How a call that returned an error ended: (exit, runbox failure, out of fuel).
fn classify(error: &wasmtime::Error) -> (Exit, Option<String>, bool) {
    if error.downcast_ref::<Stopped>().is_some() {
        return (Exit::Unknown, None, false);
    }
    if let Some(exit) = error.downcast_ref::<I32Exit>() {
        return (Exit::Code(exit.0), None, false);
    }
    match error.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => (Exit::Unknown, None, true),
        Some(trap) => (Exit::Trap(snake_case(&format!("{trap:?}"))), None, false),
        // A host call refused what the guest asked (a bad pointer, an invalid argument):
        // the guest's fault, reported by the root cause's message.
        None => (Exit::Trap(format!("host_error: {}", error.root_cause())), None, false),
    }
}

/// `UnreachableCodeReached` -> `unreachable_code_reached`.
fn snake_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// The guest's WASI context: argv, env, stdin and the capped pipes, the preopens and nothing
/// else. `WasiCtxBuilder` denies by default: no inherited stdio, env or args, no sockets (no
/// network is granted, so socket calls fail), no preopens but these.
fn wasi_context(spec: &RunSpec<'_>, stdout: &CappedPipe, stderr: &CappedPipe) -> Result<WasiP1Ctx, String> {
    let mut builder = WasiCtxBuilder::new();
    builder
        .args(spec.argv)
        .envs(spec.env)
        .stdin(MemoryInputPipe::new(spec.stdin.to_vec()))
        .stdout(stdout.clone())
        .stderr(stderr.clone())
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false);
    for preopen in spec.preopens {
        let perms = if preopen.writable { FsPerms::ReadWrite } else { FsPerms::ReadOnly };
        builder
            .preopened_dir(&preopen.host, &preopen.guest, perms)
            .map_err(|e| format!("preopen {} at {}: {e:#}", preopen.host.display(), preopen.guest))?;
    }
    if spec.deterministic {
        make_deterministic(&mut builder);
    }
    Ok(builder.build_p1())
}

/// CPU time of the calling thread, in nanoseconds.
pub(crate) fn thread_cpu_ns() -> u64 {
    clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map(|t| (t.tv_sec() as u64).saturating_mul(1_000_000_000).saturating_add(t.tv_nsec() as u64))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::snake_case;

    #[test]
    fn trap_kinds_are_snake_case() {
        assert_eq!(snake_case("UnreachableCodeReached"), "unreachable_code_reached");
        assert_eq!(snake_case("StackOverflow"), "stack_overflow");
    }
}
