use std::path::Path;
use std::process::ExitCode;

use runbox_runner::usability;
use runbox_runtimes::{Allowlist, Usability};

pub fn main(allowlist: &Allowlist, cache_dir: &Path, json: bool) -> ExitCode {
    if json {
        let list: Vec<serde_json::Value> = allowlist
            .iter()
            .map(|rt| {
                let (usable, reason) = match usability(rt, cache_dir) {
                    Usability::Usable => (true, None),
                    Usability::Unusable(why) => (false, Some(why)),
                };
                serde_json::json!({
                    "id": rt.id, "kind": rt.kind.as_str(), "description": rt.description,
                    "entrypoint": rt.entrypoint, "usable": usable, "unusable_reason": reason,
                    "default_limits": rt.default_limits, "max_limits": rt.max_limits,
                    "definition_sha256": rt.definition_sha256,
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&list).expect("serializes"));
        return ExitCode::SUCCESS;
    }
    for rt in allowlist.iter() {
        let status = match usability(rt, cache_dir) {
            Usability::Usable => "usable".to_string(),
            Usability::Unusable(why) => format!("UNUSABLE: {why}"),
        };
        println!("{:<11} {:<6} {:<10} {}  [{status}]", rt.id, rt.kind.as_str(), rt.entrypoint, rt.description);
    }
    ExitCode::SUCCESS
}
