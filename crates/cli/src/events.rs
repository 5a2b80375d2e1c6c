//! `--events`: the program's output as it is written, one JSON object per line:
//! `{"event":"output","stream":"stdout","data_base64":"..."}`, and
//! `{"event":"truncated","stream":"stdout"}` once a stream passes `limits.output_bytes`.

use std::io::Write;

use base64::Engine as _;
use runbox_linux::OutputStream;
use runbox_runner::LiveChunk;

pub fn write(out: &mut impl Write, chunk: LiveChunk) {
    let line = match chunk {
        LiveChunk::Data(stream, data) => serde_json::json!({
            "event": "output",
            "stream": name(stream),
            "data_base64": base64::engine::general_purpose::STANDARD.encode(data),
        }),
        LiveChunk::Truncated(stream) => serde_json::json!({"event": "truncated", "stream": name(stream)}),
    };
    // A reader that went away must not stop the run: the result still comes at the end.
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}

fn name(stream: OutputStream) -> &'static str {
    match stream {
        OutputStream::Stdout => "stdout",
        OutputStream::Stderr => "stderr",
    }
}
