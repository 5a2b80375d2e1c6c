//! Redaction of a request's secrets from text the service returns or logs. The sandbox already
//! redacts the program's output; this covers what the service itself says about a run (the
//! sandbox process's own messages, errors).

use std::collections::BTreeMap;

#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// (name, value), longest value first, so a secret that contains another is replaced whole.
    secrets: Vec<(String, String)>,
}

impl Redactor {
    pub fn new(secrets: &BTreeMap<String, String>) -> Redactor {
        let mut secrets: Vec<(String, String)> =
            secrets.iter().filter(|(_, v)| !v.is_empty()).map(|(k, v)| (k.clone(), v.clone())).collect();
        secrets.sort_by_key(|(_, v)| std::cmp::Reverse(v.len()));
        Redactor { secrets }
    }

    /// `text` with every secret value replaced by `[REDACTED:NAME]`, as the sandbox does.
    pub fn redact(&self, text: &str) -> String {
        let mut text = text.to_string();
        for (name, value) in &self.secrets {
            if text.contains(value.as_str()) {
                text = text.replace(value.as_str(), &format!("[REDACTED:{name}]"));
            }
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_every_secret_longest_first() {
        let secrets = BTreeMap::from([
            ("SHORT".to_string(), "abc".to_string()),
            ("LONG".to_string(), "abcdef".to_string()),
            ("EMPTY".to_string(), String::new()),
        ]);
        let redactor = Redactor::new(&secrets);
        assert_eq!(redactor.redact("x abcdef y abc z"), "x [REDACTED:LONG] y [REDACTED:SHORT] z");
        assert_eq!(redactor.redact("nothing here"), "nothing here");
    }
}
