use super::*;

/// Every `$ref` in `value`, recursively.
fn refs<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(target)) = map.get("$ref") {
                out.push(target);
            }
            map.values().for_each(|v| refs(v, out));
        }
        Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
        _ => {}
    }
}

#[test]
fn every_reference_resolves() {
    let doc = document();
    let mut found = Vec::new();
    refs(&doc, &mut found);
    assert!(!found.is_empty());
    for target in found {
        let name = target.strip_prefix("#/components/schemas/").unwrap_or_else(|| panic!("{target}"));
        assert!(doc["components"]["schemas"].get(name).is_some(), "{target} is not defined");
    }
}

#[test]
fn lists_every_endpoint_and_the_contract_types() {
    let doc = document();
    for path in [
        "/v1/runs",
        "/v1/runs/{id}",
        "/v1/runs/{id}/cancel",
        "/v1/runs/{id}/events",
        "/v1/runs/{id}/artifacts/{path}",
        "/v1/runtimes",
        "/healthz",
        "/readyz",
        "/metrics",
        "/openapi.json",
    ] {
        assert!(doc["paths"].get(path).is_some(), "{path}");
    }
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    for name in ["RunRequest", "RunResult", "RunRecord", "ErrorResponse", "Limits", "Verdict", "RunStatus"] {
        assert!(schemas.contains_key(name), "{name}: {:?}", schemas.keys().collect::<Vec<_>>());
    }
    // The request schema is the contract's: unknown fields are refused.
    assert_eq!(schemas["RunRequest"]["additionalProperties"], Value::Bool(false));
    assert_eq!(doc["openapi"], "3.1.0");
}
