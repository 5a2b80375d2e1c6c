//! Graceful shutdown. On SIGTERM or SIGINT the service drains: it keeps answering (new runs get
//! 503, `/readyz` turns 503), lets every accepted run finish, and only then stops listening. A
//! run still going after `drain_timeout_s`, or at a second signal, is cancelled: its sandbox is
//! torn down and its `cancelled` result recorded, so nothing is left `running`.

use std::time::Duration;

use tokio::signal::unix::{SignalKind, signal};

use crate::state::SharedApp;

/// After cancelling, how long runs get to tear down and be recorded.
const CANCEL_GRACE: Duration = Duration::from_secs(30);

/// Resolves when the service has been asked to stop and has drained.
pub async fn drain_on_signal(app: SharedApp) {
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        tracing::error!("cannot listen for SIGTERM and SIGINT; the service stops only when killed");
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    app.admission.start_draining();
    tracing::info!(in_flight = app.live.len(), "draining: no new runs; waiting for the accepted ones");
    let timeout = app.admission.settings().drain_timeout;
    tokio::select! {
        () = app.live.drained() => return tracing::info!("drained"),
        () = tokio::time::sleep(timeout) => {
            tracing::warn!(in_flight = app.live.len(), "drain timeout: cancelling the runs still going");
        }
        _ = term.recv() => tracing::warn!("second signal: cancelling the runs still going"),
        _ = int.recv() => tracing::warn!("second signal: cancelling the runs still going"),
    }
    for run in app.live.all() {
        run.request_cancel();
    }
    if tokio::time::timeout(CANCEL_GRACE, app.live.drained()).await.is_err() {
        tracing::error!(in_flight = app.live.len(), "runs did not end after cancel; stopping anyway");
    }
}
