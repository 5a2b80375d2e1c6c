//! The ledger thread: it owns the SQLite connection and runs every operation, in the order they
//! arrive. Operations that arrive together share one transaction and one fsync (group commit),
//! and each caller hears back only after its transaction is on disk. One thread also makes each
//! operation atomic with respect to the others, which is what idempotency keys rely on.

use std::sync::mpsc::{Receiver, TryRecvError};

use rusqlite::Connection;

/// Most operations in one transaction: enough to amortize the fsync, few enough that the first
/// caller of a batch does not wait long for the last.
const MAX_BATCH: usize = 256;

/// Runs on the connection, inside the batch's transaction, and returns what to do once the
/// transaction has committed (or failed to).
pub type Job = Box<dyn FnOnce(&Connection) -> Reply + Send>;
pub type Reply = Box<dyn FnOnce(Result<(), String>) + Send>;

pub fn run(conn: Connection, jobs: Receiver<Job>) {
    while let Ok(first) = jobs.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match jobs.try_recv() {
                Ok(job) => batch.push(job),
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
            }
        }
        run_batch(&conn, batch);
    }
}

fn run_batch(conn: &Connection, batch: Vec<Job>) {
    if let Err(e) = conn.execute_batch("BEGIN IMMEDIATE") {
        let message = format!("begin a transaction: {e}");
        // Each job still runs (outside a transaction) so that its reply carries the failure.
        for job in batch {
            job(conn)(Err(message.clone()));
        }
        return;
    }
    let mut replies = Vec::with_capacity(batch.len());
    for job in batch {
        // A savepoint per job: a job that fails half-way is undone alone, the batch goes on.
        let savepoint = conn.execute_batch("SAVEPOINT job");
        let reply = job(conn);
        let released = savepoint.and_then(|()| conn.execute_batch("RELEASE job"));
        replies.push((reply, released.err().map(|e| format!("savepoint: {e}"))));
    }
    let committed = conn.execute_batch("COMMIT").map_err(|e| format!("commit: {e}"));
    if committed.is_err() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    for (reply, savepoint_error) in replies {
        reply(match (&committed, savepoint_error) {
            (Err(e), _) => Err(e.clone()),
            (Ok(()), Some(e)) => Err(e),
            (Ok(()), None) => Ok(()),
        });
    }
}

/// Undoes a failed job's writes: called by a job before it reports its error.
pub fn undo_job(conn: &Connection) {
    let _ = conn.execute_batch("ROLLBACK TO job");
}
