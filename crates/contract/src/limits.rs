use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Limits a request asks for. Every field is optional: an omitted one takes the runtime's default.
/// A value above the runtime's maximum is rejected, never silently lowered.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Wall-clock deadline for the program, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_time_ms: Option<u64>,
    /// CPU time of all processes of the run together, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_time_ms: Option<u64>,
    /// Memory of all processes of the run together (no swap), in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// Most processes and threads alive at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<u64>,
    /// Size of the run's private filesystem (/workspace, /tmp, /dev/shm), in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_bytes: Option<u64>,
    /// Bytes kept of each of stdout and stderr.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_bytes: Option<u64>,
    /// Most open file descriptors per process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_files: Option<u64>,
}

/// The limits actually in effect for a run: every field is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResolvedLimits {
    pub wall_time_ms: u64,
    pub cpu_time_ms: u64,
    pub memory_bytes: u64,
    pub processes: u64,
    pub disk_bytes: u64,
    pub output_bytes: u64,
    pub open_files: u64,
}

impl ResolvedLimits {
    /// Each field by its public name, for messages and policy checks.
    pub fn fields(&self) -> [(&'static str, u64); 7] {
        [
            ("wall_time_ms", self.wall_time_ms),
            ("cpu_time_ms", self.cpu_time_ms),
            ("memory_bytes", self.memory_bytes),
            ("processes", self.processes),
            ("disk_bytes", self.disk_bytes),
            ("output_bytes", self.output_bytes),
            ("open_files", self.open_files),
        ]
    }
}

/// The field named `name` (one of the names `fields()` gives) of a limits struct.
macro_rules! field_by_name {
    ($limits:expr, $name:expr) => {
        match $name {
            "wall_time_ms" => &mut $limits.wall_time_ms,
            "cpu_time_ms" => &mut $limits.cpu_time_ms,
            "memory_bytes" => &mut $limits.memory_bytes,
            "processes" => &mut $limits.processes,
            "disk_bytes" => &mut $limits.disk_bytes,
            "output_bytes" => &mut $limits.output_bytes,
            "open_files" => &mut $limits.open_files,
            other => panic!("unknown limit field {other}"),
        }
    };
}

impl ResolvedLimits {
    /// The field called `name`; panics on a name `fields()` does not give.
    pub fn field_mut(&mut self, name: &str) -> &mut u64 {
        field_by_name!(self, name)
    }
}

impl Limits {
    /// The field called `name`; panics on a name `fields()` does not give.
    pub fn field_mut(&mut self, name: &str) -> &mut Option<u64> {
        field_by_name!(self, name)
    }

    /// Each requested field by its public name.
    pub fn fields(&self) -> [(&'static str, Option<u64>); 7] {
        [
            ("wall_time_ms", self.wall_time_ms),
            ("cpu_time_ms", self.cpu_time_ms),
            ("memory_bytes", self.memory_bytes),
            ("processes", self.processes),
            ("disk_bytes", self.disk_bytes),
            ("output_bytes", self.output_bytes),
            ("open_files", self.open_files),
        ]
    }
}
