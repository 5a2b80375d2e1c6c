//! Reading a request body within the size cap (413) and the request-bytes budget (429). Bytes
//! are counted against the budget as they arrive, so many slow uploads cannot add up to more
//! memory than the budget either.

use axum::body::Body;
use axum::http::{HeaderMap, StatusCode, header};
use futures_util::StreamExt;
use tokio::sync::OwnedSemaphorePermit;

use super::ApiError;
use crate::admission::Admission;

pub async fn read(
    body: Body,
    headers: &HeaderMap,
    admission: &Admission,
) -> Result<(Vec<u8>, OwnedSemaphorePermit), ApiError> {
    let max = admission.settings().max_request_bytes;
    let too_large = || {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("the request is larger than {max} bytes; send fewer or smaller files"),
        )
        .with_field("body")
    };
    let declared =
        headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > max) {
        return Err(too_large());
    }
    // `held` counts what the budget granted, in whole KiB, as the budget does.
    let mut held = declared.unwrap_or(0).div_ceil(1024) * 1024;
    let mut budget = admission.reserve_bytes(held)?;
    let mut bytes = Vec::with_capacity(usize::try_from(declared.unwrap_or(0)).unwrap_or(0));
    let mut stream = body.into_data_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| ApiError::malformed("body", format!("the body could not be read: {e}")))?;
        let total = (bytes.len() + chunk.len()) as u64;
        if total > max {
            return Err(too_large());
        }
        if total > held {
            let more = (total - held).div_ceil(1024) * 1024;
            budget.merge(admission.reserve_bytes(more)?);
            held += more;
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok((bytes, budget))
}
