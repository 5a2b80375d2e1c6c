//! `Authorization: Bearer <key>` → the key's tenant. With auth off (loopback only), every
//! request is tenant `default`.

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{StatusCode, header};

use super::ApiError;
use crate::config::{DEFAULT_TENANT, TenantPolicy, keys};
use crate::state::SharedApp;

/// The authenticated caller.
pub struct Caller {
    pub tenant: Arc<TenantPolicy>,
}

impl FromRequestParts<SharedApp> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, app: &SharedApp) -> Result<Caller, ApiError> {
        let tenant_of = |name: &str| app.config.tenants.get(name).cloned();
        if !app.config.auth {
            let tenant = tenant_of(DEFAULT_TENANT).ok_or_else(|| ApiError::internal("no default tenant"))?;
            return Ok(Caller { tenant });
        }
        let unauthorized = |message: &str| ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message);
        let Some(value) = parts.headers.get(header::AUTHORIZATION) else {
            return Err(unauthorized("send an API key: `Authorization: Bearer <key>`"));
        };
        let key = value
            .to_str()
            .ok()
            // The scheme is case-insensitive (RFC 9110, section 11.1).
            .and_then(|v| v.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, key)| key.trim())
            .ok_or_else(|| unauthorized("the Authorization header must be `Bearer <key>`"))?;
        let binding =
            app.config.keys.get(&keys::hash_key(key)).ok_or_else(|| unauthorized("the API key is not valid"))?;
        let tenant = tenant_of(&binding.tenant).ok_or_else(|| ApiError::internal("the key's tenant is gone"))?;
        tracing::Span::current().record("key_id", binding.key_id.as_str());
        Ok(Caller { tenant })
    }
}
