//! Tenant policy on top of the runtime allowlist: which runtimes a tenant may use, and the
//! ceilings on its limits. A request outside the policy is refused with 403 and told what is
//! allowed; a limit the request leaves out takes the runtime's default, lowered to the
//! tenant's ceiling (so a tenant with small ceilings need not spell out every limit).

use runbox_contract::{Limits, RunRequest};
use runbox_runtimes::{Allowlist, Runtime};

use crate::api::ApiError;
use crate::config::TenantPolicy;

pub fn apply(
    tenant: &TenantPolicy,
    allowlist: &Allowlist,
    request: &mut RunRequest,
    runtime: &Runtime,
) -> Result<(), ApiError> {
    if !tenant.allows_runtime(&runtime.id) {
        let allowed: Vec<&str> = allowlist.ids().filter(|id| tenant.allows_runtime(id)).collect();
        let allowed = if allowed.is_empty() { "none".to_string() } else { allowed.join(", ") };
        return Err(ApiError::forbidden(
            "runtime",
            format!("tenant {:?} may not use runtime {:?}; it may use: {allowed}", tenant.name, runtime.id),
        ));
    }
    let ceilings = tenant.max_limits.fields();
    let defaults = runtime.default_limits.fields();
    for (i, (name, ceiling)) in ceilings.into_iter().enumerate() {
        let Some(ceiling) = ceiling else { continue };
        let slot = request.limits.field_mut(name);
        match *slot {
            Some(value) if value > ceiling => {
                return Err(ApiError::forbidden(
                    format!("limits.{name}"),
                    format!("{value} is above the maximum of tenant {:?}; ask for at most {ceiling}", tenant.name),
                ));
            }
            Some(_) => {}
            None => *slot = Some(defaults[i].1.min(ceiling)),
        }
    }
    Ok(())
}

/// The tenant's view of a runtime's limits: (defaults, maxima), each lowered to its ceiling.
pub fn effective_limits(
    tenant: &TenantPolicy,
    runtime: &Runtime,
) -> (runbox_contract::ResolvedLimits, runbox_contract::ResolvedLimits) {
    let mut defaults = runtime.default_limits;
    let mut maxima = runtime.max_limits;
    let mut requested = Limits::default();
    for (name, ceiling) in tenant.max_limits.fields() {
        let Some(ceiling) = ceiling else { continue };
        *requested.field_mut(name) = Some(ceiling);
    }
    for (name, ceiling) in requested.fields() {
        let Some(ceiling) = ceiling else { continue };
        let (d, m) = (defaults.field_mut(name), maxima.field_mut(name));
        *d = (*d).min(ceiling);
        *m = (*m).min(ceiling);
    }
    (defaults, maxima)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tenant(runtimes: Option<&[&str]>, wall: Option<u64>) -> TenantPolicy {
        TenantPolicy {
            name: "t".into(),
            runtimes: runtimes.map(|r| r.iter().map(|s| s.to_string()).collect()),
            max_limits: Limits { wall_time_ms: wall, ..Default::default() },
            max_concurrent_runs: 1,
            max_queued: 1,
            rate: None,
        }
    }

    #[test]
    fn a_runtime_outside_the_policy_is_refused_with_the_allowed_ones() {
        let allowlist = Allowlist::embedded().unwrap();
        let python = allowlist.get("python").unwrap();
        let mut request = RunRequest { runtime: "python".into(), ..Default::default() };
        let err = apply(&tenant(Some(&["sh", "bash"]), None), &allowlist, &mut request, python).unwrap_err();
        assert_eq!(err.status, axum::http::StatusCode::FORBIDDEN);
        assert_eq!(err.body.field.as_deref(), Some("runtime"));
        assert!(err.body.message.contains("it may use: bash, sh"), "{}", err.body.message);
    }

    #[test]
    fn limits_above_the_ceiling_are_refused_and_omitted_ones_lowered() {
        let allowlist = Allowlist::embedded().unwrap();
        let sh = allowlist.get("sh").unwrap();
        let policy = tenant(None, Some(2000));
        let mut request = RunRequest { runtime: "sh".into(), ..Default::default() };
        request.limits.wall_time_ms = Some(5000);
        let err = apply(&policy, &allowlist, &mut request, sh).unwrap_err();
        assert_eq!(err.body.field.as_deref(), Some("limits.wall_time_ms"));
        assert!(err.body.message.contains("at most 2000"), "{}", err.body.message);
        request.limits.wall_time_ms = None;
        apply(&policy, &allowlist, &mut request, sh).unwrap();
        assert_eq!(request.limits.wall_time_ms, Some(2000.min(sh.default_limits.wall_time_ms)));
        assert_eq!(request.limits.memory_bytes, None, "no ceiling: the runtime's default applies");
        let (defaults, maxima) = effective_limits(&policy, sh);
        assert_eq!((defaults.wall_time_ms, maxima.wall_time_ms), (2000, 2000));
        assert_eq!(maxima.memory_bytes, sh.max_limits.memory_bytes);
    }
}
