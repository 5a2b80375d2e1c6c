//! `GET /v1/runs/{id}/artifacts/{path}`: an artifact's bytes, streamed from the blob store,
//! with its SHA-256 as a strong ETag (`If-None-Match` answers 304).

use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use tokio::io::AsyncReadExt;

use super::runs::lookup;
use super::{ApiError, Caller};
use crate::state::SharedApp;

const CHUNK_BYTES: usize = 64 << 10;

pub async fn get(
    State(app): State<SharedApp>,
    caller: Caller,
    path: Result<Path<(String, String)>, PathRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let Path((id, artifact)) = path.map_err(|e| ApiError::not_found(format!("no such artifact: {e}")))?;
    let stored = lookup(&app, &caller, &id).await?;
    if !stored.record.status.is_final() {
        return Err(ApiError::conflict(format!(
            "run {id} has not ended yet; its artifacts can be fetched once it has (GET /v1/runs/{id})"
        )));
    }
    let missing =
        || ApiError::not_found(format!("run {id} has no artifact {artifact:?}; its result lists the artifacts"));
    let (sha256, size) =
        app.ledger.artifact(&id, &artifact).await.map_err(|e| ApiError::ledger(&e))?.ok_or_else(missing)?;
    let etag = format!("\"{sha256}\"");
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim() == "*" || v.split(',').any(|tag| tag.trim().trim_start_matches("W/") == etag));
    let mut response = if matches {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let file = tokio::fs::File::open(app.blobs_dir.join(&sha256)).await.map_err(|e| {
            tracing::warn!(run_id = %id, sha256, error = %e, "artifact blob missing");
            ApiError::not_found(format!("the content of artifact {artifact:?} is no longer kept"))
        })?;
        let mut response = Body::from_stream(chunks(file)).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(size));
        headers.insert(header::CONTENT_DISPOSITION, HeaderValue::from_static("attachment"));
        headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
        response
    };
    let headers = response.headers_mut();
    headers.insert(header::ETAG, HeaderValue::from_str(&etag).expect("hex is a valid header value"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("private, immutable"));
    Ok(response)
}

/// The file in chunks, read as the client takes them.
fn chunks(file: tokio::fs::File) -> impl futures_util::Stream<Item = std::io::Result<Vec<u8>>> {
    stream::unfold(Some(file), |file| async move {
        let mut file = file?;
        let mut buf = vec![0; CHUNK_BYTES];
        match file.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(buf), Some(file)))
            }
            Err(e) => Some((Err(e), None)),
        }
    })
}
