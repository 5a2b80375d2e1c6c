//! Captured streams to their public form: secrets redacted, head and tail joined by a note
//! that says how much was cut and how to get the rest, text when UTF-8 and base64 otherwise.

use base64::Engine as _;
use runbox_contract::StreamOutput;
use runbox_linux::Captured;

pub fn stream(captured: &Captured, secrets: &[(String, Vec<u8>)], output_bytes: u64) -> StreamOutput {
    let mut bytes = redact(&captured.head, secrets);
    if captured.truncated() {
        bytes.extend_from_slice(omission_note(captured, output_bytes).as_bytes());
        bytes.extend(redact(&captured.tail, secrets));
    }
    let (text, base64) = match String::from_utf8(bytes) {
        Ok(text) => (Some(text), None),
        Err(e) => (None, Some(base64::engine::general_purpose::STANDARD.encode(e.as_bytes()))),
    };
    StreamOutput { text, base64, bytes_total: captured.total_bytes, truncated: captured.truncated() }
}

fn omission_note(captured: &Captured, output_bytes: u64) -> String {
    format!(
        "\n[runbox: {} of {} bytes omitted here; {output_bytes} bytes are kept per stream. Raise limits.output_bytes, print less, or write large output to a file in /workspace to get it as an artifact]\n",
        captured.omitted_bytes, captured.total_bytes
    )
}

/// Replaces every occurrence of a secret's value with `[REDACTED:NAME]`. Secrets come longest
/// first, so a secret that contains another is replaced whole.
pub fn redact(data: &[u8], secrets: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut out = data.to_vec();
    for (name, value) in secrets {
        out = replace_all(&out, value, format!("[REDACTED:{name}]").as_bytes());
    }
    out
}

pub fn redact_text(text: &str, secrets: &[(String, Vec<u8>)]) -> String {
    String::from_utf8_lossy(&redact(text.as_bytes(), secrets)).into_owned()
}

fn replace_all(haystack: &[u8], needle: &[u8], with: &[u8]) -> Vec<u8> {
    if needle.is_empty() || haystack.len() < needle.len() {
        return haystack.to_vec();
    }
    let mut out = Vec::with_capacity(haystack.len());
    let mut i = 0;
    while i < haystack.len() {
        if haystack[i..].starts_with(needle) {
            out.extend_from_slice(with);
            i += needle.len();
        } else {
            out.push(haystack[i]);
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secrets() -> Vec<(String, Vec<u8>)> {
        vec![("LONG".into(), b"hunter2hunter2".to_vec()), ("PW".into(), b"hunter2".to_vec())]
    }

    #[test]
    fn secrets_are_redacted_longest_first() {
        let out = redact(b"a hunter2hunter2 b hunter2", &secrets());
        assert_eq!(out, b"a [REDACTED:LONG] b [REDACTED:PW]");
    }

    #[test]
    fn truncated_streams_say_what_was_cut_and_how_to_get_it() {
        let captured = Captured { head: b"start".to_vec(), tail: b"end".to_vec(), total_bytes: 100, omitted_bytes: 92 };
        let out = stream(&captured, &[], 8);
        let text = out.text.unwrap();
        assert!(text.starts_with("start\n[runbox: 92 of 100 bytes omitted"), "{text}");
        assert!(text.ends_with("]\nend"));
        assert!(text.contains("limits.output_bytes"));
        assert!(out.truncated);
        assert_eq!(out.bytes_total, 100);
    }

    #[test]
    fn binary_output_is_base64() {
        let captured = Captured { head: vec![0xff, 0xfe], tail: vec![], total_bytes: 2, omitted_bytes: 0 };
        let out = stream(&captured, &[], 8);
        assert_eq!((out.text, out.base64.as_deref()), (None, Some("//4=")));
    }
}
