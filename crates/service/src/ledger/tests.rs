use super::*;

fn new_run(id: &str, key: Option<&str>) -> NewRun {
    NewRun {
        run_id: id.into(),
        tenant: "t".into(),
        idempotency_key: key.map(String::from),
        request_sha256: format!("fp-{id}"),
        runtime: "sh".into(),
        created_ms: 1,
    }
}

fn done(status: RunStatus) -> Final {
    Final { status, at_ms: 5, result_json: None, error: None, artifacts: None }
}

#[tokio::test]
async fn an_idempotency_key_is_bound_once_per_tenant() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open(&dir.path().join("l.sqlite3"), Synchronous::Normal).unwrap();
    // Many accepts with one key, at once: exactly one is recorded.
    let accepts = (0..16).map(|i| {
        let ledger = ledger.clone();
        tokio::spawn(async move { ledger.accept(new_run(&format!("r{i}"), Some("k"))).await.unwrap() })
    });
    let mut accepted = 0;
    for accept in accepts {
        match accept.await.unwrap() {
            Accept::Accepted => accepted += 1,
            Accept::Existing(stored) => assert_eq!(stored.record.idempotency_key.as_deref(), Some("k")),
        }
    }
    assert_eq!(accepted, 1);
    let other_tenant = NewRun { tenant: "u".into(), ..new_run("u1", Some("k")) };
    assert!(matches!(ledger.accept(other_tenant).await.unwrap(), Accept::Accepted));
    assert!(matches!(ledger.accept(new_run("plain1", None)).await.unwrap(), Accept::Accepted));
    assert!(matches!(ledger.accept(new_run("plain2", None)).await.unwrap(), Accept::Accepted), "no key, no binding");
}

#[tokio::test]
async fn a_restart_interrupts_unfinished_runs_and_never_rewrites_final_ones() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.sqlite3");
    {
        let ledger = Ledger::open(&path, Synchronous::Full).unwrap();
        for id in ["queued", "running", "done"] {
            assert!(matches!(ledger.accept(new_run(id, None)).await.unwrap(), Accept::Accepted));
        }
        ledger.mark_running("running", 2).await.unwrap();
        ledger.mark_running("done", 2).await.unwrap();
        ledger.finish("done", done(RunStatus::Finished)).await.unwrap();
    }
    let ledger = Ledger::open(&path, Synchronous::Full).unwrap();
    let mut interrupted = ledger.interrupt_unfinished(9).await.unwrap();
    interrupted.sort();
    assert_eq!(interrupted, ["queued", "running"]);
    let running = ledger.get("running").await.unwrap().unwrap().record;
    assert_eq!(running.status, RunStatus::Interrupted);
    assert!(running.error.unwrap().message.contains("outcome is unknown"));
    let queued = ledger.get("queued").await.unwrap().unwrap().record;
    assert!(queued.error.unwrap().message.contains("did not run"));
    assert_eq!(ledger.get("done").await.unwrap().unwrap().record.status, RunStatus::Finished);
    // A final record stays as it is.
    ledger.finish("running", done(RunStatus::Finished)).await.unwrap();
    assert_eq!(ledger.get("running").await.unwrap().unwrap().record.status, RunStatus::Interrupted);
    assert!(ledger.interrupt_unfinished(10).await.unwrap().is_empty());
}

#[tokio::test]
async fn artifacts_are_adopted_by_digest_and_purged_with_their_last_run() {
    let dir = tempfile::tempdir().unwrap();
    let (blobs, incoming) = (dir.path().join("blobs"), dir.path().join("incoming"));
    std::fs::create_dir_all(&blobs).unwrap();
    let ledger = Ledger::open(&dir.path().join("l.sqlite3"), Synchronous::Normal).unwrap();
    let digest = "a".repeat(64);
    for (id, finished_at) in [("old", 5), ("new", 50)] {
        assert!(matches!(ledger.accept(new_run(id, None)).await.unwrap(), Accept::Accepted));
        let run_incoming = incoming.join(id);
        std::fs::create_dir_all(&run_incoming).unwrap();
        std::fs::write(run_incoming.join(&digest), b"bytes").unwrap();
        let artifacts = AdoptArtifacts {
            incoming: run_incoming.clone(),
            blobs: blobs.clone(),
            artifacts: vec![("out.txt".into(), digest.clone(), 5), ("bad".into(), "../x".into(), 1)],
        };
        let mut final_state = done(RunStatus::Finished);
        final_state.at_ms = finished_at;
        final_state.artifacts = Some(artifacts);
        ledger.finish(id, final_state).await.unwrap();
        assert!(!run_incoming.exists(), "the incoming directory is removed");
    }
    assert_eq!(std::fs::read(blobs.join(&digest)).unwrap(), b"bytes");
    assert_eq!(ledger.artifact("new", "out.txt").await.unwrap(), Some((digest.clone(), 5)));
    assert_eq!(ledger.artifact("new", "bad").await.unwrap(), None, "not a digest: not adopted");
    std::fs::write(blobs.join("f".repeat(64)), b"orphan").unwrap();
    // Drops "old"; the blob stays for "new"; the orphan goes.
    let report = ledger.purge(10, blobs.clone()).await.unwrap();
    assert_eq!((report.runs_deleted, report.blobs_deleted), (1, 1));
    assert!(ledger.get("old").await.unwrap().is_none());
    assert!(blobs.join(&digest).exists());
    let report = ledger.purge(100, blobs.clone()).await.unwrap();
    assert_eq!((report.runs_deleted, report.blobs_deleted), (1, 1));
    assert!(!blobs.join(&digest).exists());
}
