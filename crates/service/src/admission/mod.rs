//! Admission: who may start a run, and when.
//!
//! - a run needs a slot of its tenant (`max_concurrent_runs` per tenant) and a global slot
//!   (`max_concurrent_runs`, default the number of cores), taken in that order;
//! - while it waits for them it holds a place in the queue, which is bounded globally
//!   (`queue_depth`) and per tenant (`max_queued`): a full queue is answered 429 at once;
//! - request bodies are bounded in bytes (`queue_bytes`), from the first byte read until the
//!   sandbox has the request, so memory stays bounded however many clients send at once;
//! - each tenant may have a request rate (a token bucket);
//! - once draining, nothing new is admitted (503).

mod rate;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::http::StatusCode;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::api::ApiError;
use crate::config::{AdmissionSettings, TenantPolicy};
use rate::TokenBucket;

/// Request bytes are counted in KiB permits: a semaphore counts in u32 steps.
const BYTES_PER_PERMIT: u64 = 1024;

pub struct Admission {
    settings: AdmissionSettings,
    global: Arc<Semaphore>,
    bytes: Arc<Semaphore>,
    waiting: AtomicUsize,
    running: AtomicUsize,
    tenants: HashMap<String, Arc<TenantGate>>,
    draining: AtomicBool,
}

struct TenantGate {
    running: Arc<Semaphore>,
    waiting: AtomicUsize,
    max_queued: usize,
    bucket: Option<Mutex<TokenBucket>>,
}

/// A place in the queue. Dropping it gives the place back.
pub struct Ticket {
    admission: Arc<Admission>,
    tenant: Arc<TenantGate>,
}

/// Permission to run. Dropping it frees both slots.
pub struct Slot {
    admission: Arc<Admission>,
    _tenant: OwnedSemaphorePermit,
    _global: OwnedSemaphorePermit,
}

impl Admission {
    pub fn new<'a>(settings: AdmissionSettings, tenants: impl IntoIterator<Item = &'a TenantPolicy>) -> Admission {
        let tenants = tenants
            .into_iter()
            .map(|t| {
                let gate = TenantGate {
                    running: Arc::new(Semaphore::new(t.max_concurrent_runs)),
                    waiting: AtomicUsize::new(0),
                    max_queued: t.max_queued,
                    bucket: t.rate.map(|rate| Mutex::new(TokenBucket::new(rate))),
                };
                (t.name.clone(), Arc::new(gate))
            })
            .collect();
        let byte_permits = usize::try_from(settings.queue_bytes / BYTES_PER_PERMIT).unwrap_or(usize::MAX);
        Admission {
            settings,
            global: Arc::new(Semaphore::new(settings.max_concurrent_runs)),
            bytes: Arc::new(Semaphore::new(byte_permits.min(Semaphore::MAX_PERMITS))),
            waiting: AtomicUsize::new(0),
            running: AtomicUsize::new(0),
            tenants,
            draining: AtomicBool::new(false),
        }
    }

    pub fn settings(&self) -> &AdmissionSettings {
        &self.settings
    }

    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// Runs waiting for a slot, all tenants.
    pub fn queue_depth(&self) -> usize {
        self.waiting.load(Ordering::SeqCst)
    }

    pub fn active_runs(&self) -> usize {
        self.running.load(Ordering::SeqCst)
    }

    pub fn check_open(&self) -> Result<(), ApiError> {
        if self.is_draining() { Err(ApiError::draining()) } else { Ok(()) }
    }

    /// Takes one token of the tenant's rate, or answers 429 with when to retry.
    pub fn check_rate(&self, tenant: &str) -> Result<(), ApiError> {
        let Some(bucket) = self.tenants.get(tenant).and_then(|g| g.bucket.as_ref()) else { return Ok(()) };
        bucket.lock().expect("token bucket").take(Instant::now()).map_err(|seconds| {
            ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limited",
                format!("tenant {tenant:?} is over its request rate; retry in {seconds} s"),
            )
            .retry_after(seconds)
        })
    }

    /// Reserves `bytes` of the request-bytes budget, or answers 429.
    pub fn reserve_bytes(&self, bytes: u64) -> Result<OwnedSemaphorePermit, ApiError> {
        let permits = u32::try_from(bytes.div_ceil(BYTES_PER_PERMIT)).unwrap_or(u32::MAX);
        self.bytes.clone().try_acquire_many_owned(permits).map_err(|_| {
            ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "queue_full",
                "the service holds as many request bytes as it allows (admission.queue_bytes); retry shortly",
            )
            .retry_after(1)
        })
    }

    /// Takes a place in the queue, or answers 429 when the tenant's or the global queue is full.
    pub fn enqueue(self: &Arc<Self>, tenant: &str) -> Result<Ticket, ApiError> {
        let gate = self.tenants.get(tenant).cloned().ok_or_else(|| ApiError::internal("unknown tenant"))?;
        let full = |message: String| {
            ApiError::new(StatusCode::TOO_MANY_REQUESTS, "queue_full", message).retry_after(self.retry_estimate_s())
        };
        if gate.waiting.fetch_add(1, Ordering::SeqCst) >= gate.max_queued {
            gate.waiting.fetch_sub(1, Ordering::SeqCst);
            return Err(full(format!(
                "tenant {tenant:?} already has {} runs waiting, its maximum; retry when some have finished",
                gate.max_queued
            )));
        }
        if self.waiting.fetch_add(1, Ordering::SeqCst) >= self.settings.queue_depth {
            self.waiting.fetch_sub(1, Ordering::SeqCst);
            gate.waiting.fetch_sub(1, Ordering::SeqCst);
            return Err(full(format!(
                "the queue is full ({} runs waiting); retry when some have finished",
                self.settings.queue_depth
            )));
        }
        Ok(Ticket { admission: self.clone(), tenant: gate })
    }

    /// A rough wait before a retry can be admitted: one second per batch of queued runs.
    fn retry_estimate_s(&self) -> u64 {
        let batches = self.queue_depth() / self.settings.max_concurrent_runs.max(1);
        (batches as u64 / 50).clamp(1, 30)
    }
}

impl Ticket {
    /// Waits for the tenant's slot, then a global one.
    pub async fn start(self) -> Slot {
        let tenant = self.tenant.running.clone().acquire_owned().await.expect("semaphore never closed");
        let global = self.admission.global.clone().acquire_owned().await.expect("semaphore never closed");
        self.admission.running.fetch_add(1, Ordering::SeqCst);
        // Dropping the ticket (here) leaves the queue only once the slots are held.
        Slot { admission: self.admission.clone(), _tenant: tenant, _global: global }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.tenant.waiting.fetch_sub(1, Ordering::SeqCst);
        self.admission.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.admission.running.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests;
