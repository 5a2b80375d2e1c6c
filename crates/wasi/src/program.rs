//! A module linked against WASI preview 1 and the runtime's import stubs, checked and
//! pre-instantiated once (`InstancePre`): a run then only instantiates, which with the pooling
//! allocator and copy-on-write memory images takes microseconds.

use wasmtime::{Engine, ExternType, InstancePre, Linker, Module, Val, ValType};

use crate::run::Guest;
use crate::{EngineSettings, WasiError};

/// An import answered by a constant (see `runbox_runtimes::ImportStub`).
#[derive(Debug, Clone)]
pub struct Stub {
    pub module: String,
    pub name: String,
    pub returns: i32,
}

/// How a module is entered.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Call `_initialize` first (a reactor that was not snapshotted).
    pub initialize: bool,
    /// The export that runs the program: `() -> ()` (a command's `_start`) or `() -> i32`
    /// (the exit status).
    pub export: String,
}

/// A module ready to run any number of times, concurrently.
pub struct Program {
    pub(crate) engine: Engine,
    pub(crate) settings: EngineSettings,
    pub(crate) pre: InstancePre<Guest>,
    pub(crate) entry: Entry,
    /// The export returns the exit status.
    pub(crate) returns_status: bool,
}

impl Program {
    /// Links `module` (compiled for `settings`) with WASI preview 1 (async) and `stubs`.
    /// Every failure is the module's: an export that is missing or of the wrong type, an
    /// import that is neither WASI nor a stub.
    pub fn link(
        engine: &Engine,
        settings: EngineSettings,
        module: &Module,
        entry: Entry,
        stubs: &[Stub],
    ) -> Result<Program, WasiError> {
        let bad = |message: String| WasiError::BadModule(message);
        let mut linker: Linker<Guest> = Linker::new(engine);
        wasmtime_wasi::p1::add_to_linker_async(&mut linker, |guest: &mut Guest| &mut guest.wasi)
            .map_err(|e| WasiError::Engine(format!("add WASI to the linker: {e:#}")))?;
        for stub in stubs {
            let import = module.imports().find(|i| i.module() == stub.module && i.name() == stub.name);
            let Some(ExternType::Func(ty)) = import.map(|i| i.ty()) else {
                continue;
            };
            if !matches!(ty.results().collect::<Vec<_>>().as_slice(), [ValType::I32]) {
                return Err(bad(format!("import {}::{} must return one i32 to be stubbed", stub.module, stub.name)));
            }
            let value = stub.returns;
            linker
                .func_new(&stub.module, &stub.name, ty, move |_, _, results| {
                    results[0] = Val::I32(value);
                    Ok(())
                })
                .map_err(|e| WasiError::Engine(format!("define stub {}::{}: {e:#}", stub.module, stub.name)))?;
        }
        let export_ty = match module.get_export(&entry.export) {
            Some(ExternType::Func(ty)) => ty,
            _ => return Err(bad(format!("the module has no exported function {:?} to run", entry.export))),
        };
        let results: Vec<ValType> = export_ty.results().collect();
        let returns_status = match (export_ty.params().len(), results.as_slice()) {
            (0, []) => false,
            (0, [ValType::I32]) => true,
            _ => {
                return Err(bad(format!(
                    "export {:?} must take no arguments and return nothing or an i32",
                    entry.export
                )));
            }
        };
        if entry.initialize && !matches!(module.get_export("_initialize"), Some(ExternType::Func(_))) {
            return Err(bad("the module has no `_initialize` export".into()));
        }
        let pre = linker.instantiate_pre(module).map_err(|e| bad(format!("cannot link the module: {e:#}")))?;
        Ok(Program { engine: engine.clone(), settings, pre, entry, returns_status })
    }

    pub fn settings(&self) -> EngineSettings {
        self.settings
    }
}
