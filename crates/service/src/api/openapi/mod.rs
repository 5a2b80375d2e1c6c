//! `GET /openapi.json`: an OpenAPI 3.1 document.
//!
//! The schemas are generated from the Rust types by schemars, which the contract crate already
//! derives (so the request and result schemas are the ones `runbox schema` prints, and cannot
//! drift from the code). OpenAPI 3.1 takes JSON Schema 2020-12 as it is, so no conversion is
//! needed. utoipa would have needed its own derive on every contract type; the paths, the one
//! thing schemars cannot see, are listed here once.

use schemars::JsonSchema;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value, json};

use super::{ErrorResponse, Health, RuntimeEntry};
use crate::record::{Accepted, RunRecord};

pub fn document() -> Value {
    let settings = SchemaSettings::draft2020_12().with(|s| {
        s.definitions_path = "/components/schemas".into();
        s.meta_schema = None;
    });
    // Requests are described as they are read, answers as they are written.
    let mut requests = settings.clone().for_deserialize().into_generator();
    let mut answers = settings.for_serialize().into_generator();
    let run_request = requests.subschema_for::<runbox_contract::RunRequest>();
    let record = schema::<RunRecord>(&mut answers);
    let accepted = schema::<Accepted>(&mut answers);
    let error = schema::<ErrorResponse>(&mut answers);
    let runtimes = schema::<Vec<RuntimeEntry>>(&mut answers);
    let health = schema::<Health>(&mut answers);
    let mut components = requests.take_definitions(true);
    for (name, schema) in answers.take_definitions(true) {
        if let Some(existing) = components.get(&name) {
            assert_eq!(existing, &schema, "schema {name} differs between requests and answers");
        }
        components.insert(name, schema);
    }
    let run_id = json!({"name": "id", "in": "path", "required": true, "description": "A run id from POST /v1/runs.",
                        "schema": {"type": "string"}});
    let errors = |codes: &[u16]| -> Map<String, Value> {
        codes.iter().map(|code| (code.to_string(), json_answer(describe(*code), error.clone()))).collect()
    };
    let with = |mut base: Map<String, Value>, extra: Map<String, Value>| {
        base.extend(extra);
        Value::Object(base)
    };
    let secured = json!([{"apiKey": []}]);
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "runbox",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Run untrusted code in a sandbox and get an honest, bounded result."
        },
        "components": {
            "schemas": components,
            "securitySchemes": {"apiKey": {"type": "http", "scheme": "bearer", "description": "An API key (rbx_...)."}}
        },
        "security": secured,
        "paths": {
            "/v1/runs": {"post": {
                "operationId": "createRun",
                "summary": "Run a request; waits for the result unless wait=false",
                "parameters": [
                    {"name": "wait", "in": "query", "required": false, "schema": {"type": "boolean", "default": true},
                     "description": "false: answer 202 at once with the run id"},
                    {"name": "Idempotency-Key", "in": "header", "required": false,
                     "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[!-~]+$"},
                     "description": "Same key and request: the recorded run, never a second execution. Same key, other request: 422."}
                ],
                "requestBody": {"required": true, "content": {"application/json": {"schema": run_request, "example": {
                    "runtime": "sh",
                    "files": [{"path": "main.sh", "content": "echo hello | tee out.txt"}]
                }}}},
                "responses": with(
                    [("200".to_string(), linked(json_answer("The run's final record", record.clone()), true)),
                     ("202".to_string(), linked(json_answer("Accepted; not waited for", accepted.clone()), false))]
                        .into_iter()
                        .collect(),
                    errors(&[400, 401, 403, 413, 422, 429, 500, 503]))
            }},
            "/v1/runs/{id}": {"get": {
                "operationId": "getRun", "summary": "A run's record", "parameters": [run_id],
                "responses": with([("200".to_string(), json_answer("The record", record.clone()))].into_iter().collect(),
                                  errors(&[401, 404, 500]))
            }},
            "/v1/runs/{id}/cancel": {"post": {
                "operationId": "cancelRun", "summary": "Cancel a run; its verdict becomes cancelled", "parameters": [run_id],
                "responses": with(
                    [("200".to_string(), json_answer("The cancelled run's final record", record.clone())),
                     ("202".to_string(), json_answer("Cancel under way", accepted))].into_iter().collect(),
                    errors(&[401, 404, 409, 500]))
            }},
            "/v1/runs/{id}/events": {"get": {
                "operationId": "runEvents",
                "summary": "Server-sent events: started, output and truncated as they happen, then result",
                "parameters": [run_id],
                "responses": with(
                    [("200".to_string(), json!({"description": "An event stream",
                        "content": {"text/event-stream": {"schema": sse_event(&record)}}}))].into_iter().collect(),
                    errors(&[401, 404, 500]))
            }},
            "/v1/runs/{id}/artifacts/{path}": {"get": {
                "operationId": "getArtifact", "summary": "An artifact's bytes; the ETag is its SHA-256",
                "parameters": [run_id, {"name": "path", "in": "path", "required": true, "schema": {"type": "string"},
                                        "description": "The artifact's path, as listed in the result"}],
                "responses": with(
                    [("200".to_string(), json!({"description": "The bytes", "headers": {"ETag": {"schema": {"type": "string"}}},
                        "content": {"application/octet-stream": {"schema": {"type": "string", "contentMediaType": "application/octet-stream"}}}})),
                     ("304".to_string(), json!({"description": "Not modified (If-None-Match)"}))].into_iter().collect(),
                    errors(&[401, 404, 409, 500]))
            }},
            "/v1/runtimes": {"get": {
                "operationId": "listRuntimes", "summary": "The runtimes this tenant may use, with its limits",
                "responses": with([("200".to_string(), json_answer("The runtimes", runtimes))].into_iter().collect(),
                                  errors(&[401]))
            }},
            "/healthz": {"get": {"operationId": "health", "summary": "Alive", "security": [],
                "responses": {"200": json_answer("Alive", health.clone())}}},
            "/readyz": {"get": {"operationId": "ready", "summary": "Ready for runs", "security": [],
                "responses": with([("200".to_string(), json_answer("Ready", health))].into_iter().collect(), errors(&[503]))}},
            "/metrics": {"get": {"operationId": "metrics", "summary": "Prometheus text format",
                "responses": with([("200".to_string(), json!({"description": "Metrics",
                    "content": {"text/plain": {"schema": {"type": "string"}}}}))].into_iter().collect(), errors(&[401]))}},
            "/openapi.json": {"get": {"operationId": "openapi", "summary": "This document", "security": [],
                "responses": {"200": {"description": "OpenAPI 3.1", "content": {"application/json": {"schema": {"type": "object"}}}}}}}
        }
    })
}

/// Links from a run's id (and, for a finished run, its first artifact) to the operations on it:
/// documentation for people, and what lets a fuzzer reach real runs.
fn linked(mut answer: Value, finished: bool) -> Value {
    let id = json!({"id": "$response.body#/run_id"});
    let mut links = json!({
        "GetRun": {"operationId": "getRun", "parameters": id},
        "RunEvents": {"operationId": "runEvents", "parameters": id},
        "CancelRun": {"operationId": "cancelRun", "parameters": id}
    });
    if finished {
        links["GetArtifact"] = json!({"operationId": "getArtifact", "parameters": {
            "id": "$response.body#/run_id", "path": "$response.body#/result/artifacts/0/path"}});
    }
    answer["links"] = links;
    answer
}

/// One server-sent event (OpenAPI 3.1: the schema of an event stream describes each event).
fn sse_event(record: &Value) -> Value {
    json!({
        "type": "object",
        "required": ["event", "data"],
        "properties": {
            "event": {"enum": ["started", "output", "truncated", "result"]},
            "id": {"type": "string", "description": "The event's index; send it back as Last-Event-ID to resume"},
            "data": {
                "type": "string",
                "contentMediaType": "application/json",
                "description": "started: {run_id}; output: {stream, data_base64}; truncated: {stream}; \
                                result: the RunRecord",
                "contentSchema": {"anyOf": [
                    {"type": "object", "required": ["run_id"], "properties": {"run_id": {"type": "string"}}},
                    {"type": "object", "required": ["stream"], "properties": {
                        "stream": {"enum": ["stdout", "stderr"]}, "data_base64": {"type": "string"}}},
                    record
                ]}
            }
        }
    })
}

fn schema<T: JsonSchema>(generator: &mut SchemaGenerator) -> Value {
    generator.subschema_for::<T>().to_value()
}

fn json_answer(description: &str, schema: Value) -> Value {
    json!({"description": description, "content": {"application/json": {"schema": schema}}})
}

fn describe(code: u16) -> &'static str {
    match code {
        400 => "Malformed request; the message says what to fix",
        401 => "No valid API key",
        403 => "Outside the tenant's policy; the message says what is allowed",
        404 => "No such run, artifact or endpoint",
        409 => "The run is not in a state that allows this",
        413 => "Request body too large",
        422 => "A well-formed request that cannot run as asked, or an Idempotency-Key reused for another request",
        429 => "Queue full or rate limited; see Retry-After",
        503 => "Draining before shutdown; see Retry-After",
        _ => "Internal error",
    }
}

#[cfg(test)]
mod tests;
