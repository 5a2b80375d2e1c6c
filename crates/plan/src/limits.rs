use runbox_contract::{Limits, ResolvedLimits, ValidationError};
use runbox_runtimes::Runtime;

/// Fills omitted limits from the runtime's defaults and refuses any above its maximum.
/// A limit is never lowered silently: the caller learns the maximum and asks again.
pub fn resolve_limits(requested: &Limits, runtime: &Runtime) -> Result<ResolvedLimits, ValidationError> {
    let mut resolved = runtime.default_limits;
    let max = runtime.max_limits.fields();
    for (i, (name, value)) in requested.fields().into_iter().enumerate() {
        let Some(value) = value else { continue };
        let field = format!("limits.{name}");
        let minimum = minimum_of(name);
        if value < minimum {
            return Err(ValidationError::new(field, format!("{value} is below the minimum of {minimum}")));
        }
        let (_, maximum) = max[i];
        if value > maximum {
            return Err(ValidationError::new(
                field,
                format!("{value} is above the maximum of runtime {:?}; ask for at most {maximum}", runtime.id),
            ));
        }
        *resolved.field_mut(name) = value;
    }
    Ok(resolved)
}

/// The smallest value with which a program can start at all. A request below it is refused
/// here rather than failing later as if runbox had broken.
fn minimum_of(name: &str) -> u64 {
    match name {
        // A dynamically linked shell needs about this much to exec.
        "memory_bytes" => 4 << 20,
        "disk_bytes" => 64 << 10,
        "open_files" => 8,
        _ => 1,
    }
}
