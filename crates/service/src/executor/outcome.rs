//! What a child `runbox run` process's exit means (its exit codes are in
//! crates/cli/src/exit_codes.rs), and its event lines.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use runbox_contract::RunResult;
use serde::Deserialize;

use crate::api::ErrorBody;
use crate::live::LiveEvent;
use crate::redact::Redactor;

/// `runbox run` exit codes: a request it refused, and a configuration it could not load.
const EXIT_REJECTED: i32 = 2;
const EXIT_CONFIG: i32 = 3;

#[derive(Debug)]
pub enum ChildOutcome {
    /// The sandbox ran (or tried to, and says why not): its result.
    Result(Box<RunResult>),
    /// The request was refused before anything ran (e.g. the files do not fit `disk_bytes`).
    Rejected(ErrorBody),
    /// Our SIGTERM ended the process before it could take signals as a cancel: nothing ran.
    CancelledBeforeStart,
    /// The runbox process failed in a way that gives no result (crash, bad output).
    Failed { code: &'static str, message: String },
}

impl ChildOutcome {
    pub fn failed(code: &'static str, message: String) -> ChildOutcome {
        ChildOutcome::Failed { code, message }
    }
}

#[derive(Deserialize)]
struct Refusal {
    error: RefusalBody,
}

#[derive(Deserialize)]
struct RefusalBody {
    field: Option<String>,
    message: String,
}

pub fn interpret(
    status: ExitStatus,
    stdout: &[u8],
    cancel_sent: bool,
    diagnostics: &str,
    redactor: &Redactor,
) -> ChildOutcome {
    let said = || {
        let text = diagnostics.trim();
        if text.is_empty() { String::new() } else { format!(": {}", redactor.redact(text)) }
    };
    match status.code() {
        Some(EXIT_REJECTED) => match serde_json::from_slice::<Refusal>(stdout) {
            Ok(refusal) => ChildOutcome::Rejected(ErrorBody {
                code: "invalid_request".into(),
                message: redactor.redact(&refusal.error.message),
                field: refusal.error.field,
            }),
            Err(e) => {
                ChildOutcome::failed("runner_output", format!("the sandbox refused the run but said {e}{}", said()))
            }
        },
        Some(EXIT_CONFIG) => ChildOutcome::failed("runner_config", format!("the sandbox could not start{}", said())),
        Some(_) => match serde_json::from_slice::<RunResult>(stdout) {
            Ok(result) => ChildOutcome::Result(Box::new(result)),
            Err(e) => ChildOutcome::failed(
                "runner_output",
                format!("the sandbox process ({status}) printed no result ({e}){}", said()),
            ),
        },
        None if cancel_sent && status.signal() == Some(libc_sigterm()) => ChildOutcome::CancelledBeforeStart,
        None => ChildOutcome::failed("runner_crashed", format!("the sandbox process ended with {status}{}", said())),
    }
}

fn libc_sigterm() -> i32 {
    nix::sys::signal::Signal::SIGTERM as i32
}

#[derive(Deserialize)]
struct EventLine {
    event: String,
    stream: String,
    #[serde(default)]
    data_base64: Option<String>,
}

/// One `--events` line, or `None` when the line is not an event (runbox's own message).
pub fn parse_event(line: &[u8]) -> Option<LiveEvent> {
    let event: EventLine = serde_json::from_slice(line).ok()?;
    if event.stream != "stdout" && event.stream != "stderr" {
        return None;
    }
    match (event.event.as_str(), event.data_base64) {
        ("output", Some(data_base64)) => Some(LiveEvent::Output { stream: event.stream, data_base64 }),
        ("truncated", _) => Some(LiveEvent::Truncated { stream: event.stream }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exit(code: i32) -> ExitStatus {
        ExitStatus::from_raw(code << 8)
    }

    #[test]
    fn exit_codes_map_to_outcomes() {
        let none = Redactor::default();
        let refusal = br#"{"error":{"code":"invalid_request","field":"files","message":"too big"}}"#;
        match interpret(exit(2), refusal, false, "", &none) {
            ChildOutcome::Rejected(body) => {
                assert_eq!((body.field.as_deref(), body.message.as_str()), (Some("files"), "too big"))
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            interpret(exit(3), b"", false, "bad runtimes", &none),
            ChildOutcome::Failed { code: "runner_config", .. }
        ));
        assert!(matches!(
            interpret(exit(0), b"not json", false, "", &none),
            ChildOutcome::Failed { code: "runner_output", .. }
        ));
        let killed = ExitStatus::from_raw(libc_sigterm());
        assert!(matches!(interpret(killed, b"", true, "", &none), ChildOutcome::CancelledBeforeStart));
        assert!(matches!(
            interpret(killed, b"", false, "", &none),
            ChildOutcome::Failed { code: "runner_crashed", .. }
        ));
    }

    #[test]
    fn diagnostics_are_redacted() {
        let redactor = Redactor::new(&[("TOKEN".to_string(), "hunter2".to_string())].into());
        match interpret(exit(3), b"", false, "cannot load hunter2", &redactor) {
            ChildOutcome::Failed { message, .. } => {
                assert!(message.contains("[REDACTED:TOKEN]") && !message.contains("hunter2"), "{message}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn event_lines_are_recognized() {
        let line = br#"{"event":"output","stream":"stdout","data_base64":"aGk="}"#;
        assert!(matches!(parse_event(line), Some(LiveEvent::Output { ref stream, .. }) if stream == "stdout"));
        assert!(matches!(
            parse_event(br#"{"event":"truncated","stream":"stderr"}"#),
            Some(LiveEvent::Truncated { .. })
        ));
        assert!(parse_event(b"runbox: something went wrong\n").is_none());
        assert!(parse_event(br#"{"event":"output","stream":"elsewhere","data_base64":""}"#).is_none());
    }
}
