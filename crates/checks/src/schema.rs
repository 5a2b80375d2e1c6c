//! A small JSON Schema: enough to say "an object with these fields of these types". Unknown
//! keywords are refused when the request is validated, so a check never silently ignores
//! part of what the caller asked for.

use serde_json::Value;

const KEYWORDS: &[&str] = &[
    "type",
    "enum",
    "const",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "description",
    "title",
];

/// Refuses keywords this subset does not implement, anywhere in the schema.
pub fn check_supported(schema: &Value) -> Result<(), String> {
    let Some(object) = schema.as_object() else {
        return Err("schema must be a JSON object".into());
    };
    for (key, value) in object {
        if !KEYWORDS.contains(&key.as_str()) {
            return Err(format!("schema keyword {key:?} is not supported; use only {}", KEYWORDS.join(", ")));
        }
        match key.as_str() {
            "properties" => {
                for sub in value.as_object().ok_or("properties must be an object")?.values() {
                    check_supported(sub)?;
                }
            }
            "items" => check_supported(value)?,
            _ => {}
        }
    }
    Ok(())
}

/// Whether `value` matches `schema`; on a mismatch, where and why.
pub fn matches(schema: &Value, value: &Value, at: &str) -> Result<(), String> {
    let Some(schema) = schema.as_object() else { return Ok(()) };
    let fail = |why: String| Err(format!("{at}: {why}"));
    if let Some(expected) = schema.get("type") {
        let names: Vec<&str> = match expected {
            Value::String(name) => vec![name.as_str()],
            Value::Array(list) => list.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        if !names.iter().any(|name| is_type(value, name)) {
            return fail(format!("expected type {}, got {}", names.join(" or "), type_of(value)));
        }
    }
    if let Some(Value::Array(options)) = schema.get("enum")
        && !options.contains(value)
    {
        return fail(format!("{value} is not one of {}", Value::Array(options.clone())));
    }
    if let Some(expected) = schema.get("const")
        && expected != value
    {
        return fail(format!("expected {expected}, got {value}"));
    }
    bounds(schema, value).or_else(fail)?;
    match value {
        Value::Object(object) => {
            if let Some(Value::Array(required)) = schema.get("required")
                && let Some(name) = required.iter().filter_map(Value::as_str).find(|n| !object.contains_key(*n))
            {
                return fail(format!("missing required property {name:?}"));
            }
            let properties = schema.get("properties").and_then(Value::as_object);
            for (name, sub_value) in object {
                match properties.and_then(|p| p.get(name)) {
                    Some(sub_schema) => matches(sub_schema, sub_value, &format!("{at}.{name}"))?,
                    None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                        return fail(format!("property {name:?} is not allowed"));
                    }
                    None => {}
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    matches(item_schema, item, &format!("{at}[{i}]"))?;
                }
            }
        }
        _ => {}
    }
    Ok(())
}

fn bounds(schema: &serde_json::Map<String, Value>, value: &Value) -> Result<(), String> {
    let number = |k: &str| schema.get(k).and_then(Value::as_f64);
    let count = |k: &str| schema.get(k).and_then(Value::as_u64);
    if let Some(x) = value.as_f64()
        && (number("minimum").is_some_and(|min| x < min) || number("maximum").is_some_and(|max| x > max))
    {
        return Err(format!("{x} is out of range"));
    }
    let length = match value {
        Value::String(s) => Some((s.chars().count() as u64, "minLength", "maxLength")),
        Value::Array(a) => Some((a.len() as u64, "minItems", "maxItems")),
        _ => None,
    };
    if let Some((len, min_key, max_key)) = length
        && (count(min_key).is_some_and(|min| len < min) || count(max_key).is_some_and(|max| len > max))
    {
        return Err(format!("length {len} is out of range"));
    }
    Ok(())
}

fn is_type(value: &Value, name: &str) -> bool {
    match name {
        "integer" => value.as_i64().is_some() || value.as_u64().is_some(),
        other => type_of(value) == other || (other == "number" && value.is_number()),
    }
}

fn type_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}
