use std::time::Duration;

use runbox_contract::Limits;

use super::*;

fn settings(concurrent: usize, queue: usize) -> AdmissionSettings {
    AdmissionSettings {
        max_concurrent_runs: concurrent,
        queue_depth: queue,
        queue_bytes: 8 << 10,
        max_request_bytes: 4 << 10,
        drain_timeout: Duration::from_secs(1),
    }
}

fn tenant(name: &str, concurrent: usize, queued: usize) -> TenantPolicy {
    TenantPolicy {
        name: name.into(),
        runtimes: None,
        max_limits: Limits::default(),
        max_concurrent_runs: concurrent,
        max_queued: queued,
        rate: None,
    }
}

#[test]
fn a_full_queue_is_refused_with_retry_after() {
    let admission = Arc::new(Admission::new(settings(1, 2), [&tenant("a", 1, 10)]));
    let first = admission.enqueue("a").unwrap();
    let _second = admission.enqueue("a").unwrap();
    let err = admission.enqueue("a").err().expect("the queue holds two");
    assert_eq!(err.status, StatusCode::TOO_MANY_REQUESTS);
    assert!(err.retry_after_s.is_some());
    assert_eq!(admission.queue_depth(), 2);
    drop(first);
    assert_eq!(admission.queue_depth(), 1);
    assert!(admission.enqueue("a").is_ok());
}

#[test]
fn a_tenant_cannot_take_the_whole_queue() {
    let admission = Arc::new(Admission::new(settings(1, 10), [&tenant("a", 1, 1), &tenant("b", 1, 5)]));
    let _a = admission.enqueue("a").unwrap();
    let err = admission.enqueue("a").err().expect("a may queue one");
    assert!(err.body.message.contains("tenant \"a\""), "{}", err.body.message);
    assert!(admission.enqueue("b").is_ok(), "b still has room");
}

#[tokio::test]
async fn slots_bound_running_runs_globally_and_per_tenant() {
    let admission = Arc::new(Admission::new(settings(2, 10), [&tenant("a", 1, 10), &tenant("b", 2, 10)]));
    let a1 = admission.enqueue("a").unwrap().start().await;
    // The tenant's second run waits for its first, whatever the global room.
    let a2 = admission.enqueue("a").unwrap();
    let waiting = tokio::spawn(a2.start());
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(!waiting.is_finished());
    assert_eq!((admission.active_runs(), admission.queue_depth()), (1, 1));
    let b1 = admission.enqueue("b").unwrap().start().await;
    assert_eq!(admission.active_runs(), 2);
    // Global slots are full: b's second run waits although b has room.
    let b2 = tokio::spawn(admission.enqueue("b").unwrap().start());
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(!b2.is_finished());
    // Slots go in the order they were asked for: a's second run now holds its tenant's slot,
    // but b's second run was first in line for the global one.
    drop(a1);
    let b2 = b2.await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(!waiting.is_finished());
    drop(b1);
    let a2 = waiting.await.unwrap();
    assert_eq!((admission.active_runs(), admission.queue_depth()), (2, 0));
    drop((a2, b2));
    assert_eq!(admission.active_runs(), 0);
}

#[test]
fn request_bytes_are_bounded() {
    let admission = Admission::new(settings(1, 10), [&tenant("a", 1, 10)]);
    let first = admission.reserve_bytes(6 << 10).unwrap();
    let err = admission.reserve_bytes(4 << 10).expect_err("over the budget");
    assert_eq!(err.status, StatusCode::TOO_MANY_REQUESTS);
    drop(first);
    assert!(admission.reserve_bytes(4 << 10).is_ok());
}

#[test]
fn draining_refuses_with_503() {
    let admission = Admission::new(settings(1, 10), [&tenant("a", 1, 10)]);
    assert!(admission.check_open().is_ok());
    admission.start_draining();
    let err = admission.check_open().unwrap_err();
    assert_eq!(err.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(err.retry_after_s.is_some());
}
