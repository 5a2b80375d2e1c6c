//! From a request body to a run the service can accept: parsed, validated against the
//! allowlist, the runtime and the tenant's policy, all in-process and before anything is
//! recorded or spawned, so a bad request costs one fast 400, 403 or 422.

use runbox_contract::{RequestBounds, ResolvedLimits, RunRequest, RuntimeInfo};
use runbox_runtimes::{Allowlist, Usability};

use crate::usable::UsabilityCache;

use super::policy;
use crate::api::ApiError;
use crate::config::TenantPolicy;
use crate::executor::Payload;
use crate::redact::Redactor;

/// A request ready to run.
pub struct PreparedRun {
    /// What the sandbox gets: the request with the tenant's defaults filled in.
    pub request: Payload,
    pub runtime: RuntimeInfo,
    pub limits: ResolvedLimits,
    pub redactor: Redactor,
}

/// Parses and checks a body. Returns the prepared run and the canonical JSON of the request
/// as sent (before defaults), which identifies it for idempotency.
pub fn prepare(
    body: &[u8],
    tenant: &TenantPolicy,
    allowlist: &Allowlist,
    bounds: &RequestBounds,
    usability: &UsabilityCache,
) -> Result<(PreparedRun, Vec<u8>), ApiError> {
    let mut request = RunRequest::from_json(body)?;
    // Struct fields in order and maps sorted: the same request always serializes the same.
    let canonical = serde_json::to_vec(&request).expect("a request serializes");
    let runtime = runbox_plan::find_runtime(allowlist, &request.runtime)?;
    policy::apply(tenant, allowlist, &mut request, runtime)?;
    if let Usability::Unusable(why) = usability.of(allowlist, &runtime.id) {
        return Err(ApiError::unprocessable(
            "runtime",
            format!(
                "runtime {:?} is not usable on this host: {why}; GET /v1/runtimes lists the usable ones",
                runtime.id
            ),
        ));
    }
    let limits = runbox_plan::resolve_limits(&request.limits, runtime)?;
    let validated = request.clone().validate(bounds)?;
    // The whole plan, as the sandbox will build it: a missing entrypoint is refused here.
    runbox_plan::plan("check", validated, runtime)?;
    let prepared = PreparedRun {
        request: Payload { json: serde_json::to_vec(&request).expect("a request serializes"), budget: None },
        runtime: RuntimeInfo {
            id: runtime.id.clone(),
            kind: runtime.kind.as_str().to_string(),
            definition_sha256: runtime.definition_sha256.clone(),
        },
        limits,
        redactor: Redactor::new(&request.secrets),
    };
    Ok((prepared, canonical))
}
