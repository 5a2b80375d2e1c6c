//! `GET /v1/runs/{id}/events`: server-sent events.
//!
//! ```text
//! event: started    data: {"run_id": ...}                          the sandbox was spawned
//! event: output     data: {"stream": "stdout", "data_base64": ...}  output as written (redacted)
//! event: truncated  data: {"stream": "stderr"}                      the stream passed output_bytes
//! event: result     data: <RunRecord>                               always last; then the stream ends
//! ```
//!
//! Each event has an `id` (its index); a reconnecting client sends `Last-Event-ID` and gets
//! what followed. A run that has already ended gets its `result` event alone.

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::stream::{self, Stream, StreamExt};

use super::runs::lookup;
use super::{ApiError, Caller, RunId};
use crate::live::{LiveEvent, LiveRun};
use crate::record::RunRecord;
use crate::state::SharedApp;

type EventStream = std::pin::Pin<Box<dyn Stream<Item = Result<Event, Infallible>> + Send>>;

pub async fn stream(
    State(app): State<SharedApp>,
    caller: Caller,
    RunId(id): RunId,
    headers: HeaderMap,
) -> Result<impl axum::response::IntoResponse, ApiError> {
    let stored = lookup(&app, &caller, &id).await?;
    let resume_from = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<usize>().ok())
        .map_or(0, |last| last + 1);
    let events: EventStream = match app.live.get(&id) {
        Some(live) if !stored.record.status.is_final() => live_events(live, resume_from),
        _ => {
            // Ended (possibly between the two lookups): its final record.
            let record =
                app.ledger.get(&id).await.map_err(|e| ApiError::ledger(&e))?.map_or(stored.record, |s| s.record);
            Box::pin(stream::iter([Ok(result_event(&record, 0))]))
        }
    };
    Ok(Sse::new(events).keep_alive(KeepAlive::default()))
}

fn live_events(live: Arc<LiveRun>, from: usize) -> EventStream {
    let batches = stream::unfold((live, from, false), |(live, next, done)| async move {
        if done {
            return None;
        }
        let batch = live.events_from(next).await;
        let ended = batch.iter().any(|e| matches!(e, LiveEvent::Finished(_)));
        let events: Vec<Result<Event, Infallible>> =
            batch.iter().enumerate().map(|(i, event)| Ok(to_sse(&live.run_id, event, next + i))).collect();
        let next = next + batch.len();
        Some((stream::iter(events), (live, next, ended)))
    });
    Box::pin(batches.flatten())
}

fn to_sse(run_id: &str, event: &LiveEvent, index: usize) -> Event {
    let (name, data) = match event {
        LiveEvent::Started => ("started", serde_json::json!({"run_id": run_id})),
        LiveEvent::Output { stream, data_base64 } => {
            ("output", serde_json::json!({"stream": stream, "data_base64": data_base64}))
        }
        LiveEvent::Truncated { stream } => ("truncated", serde_json::json!({"stream": stream})),
        LiveEvent::Finished(record) => return result_event(record, index),
    };
    Event::default().event(name).id(index.to_string()).data(data.to_string())
}

fn result_event(record: &RunRecord, index: usize) -> Event {
    let data = serde_json::to_string(record).expect("a record serializes");
    Event::default().event("result").id(index.to_string()).data(data)
}
