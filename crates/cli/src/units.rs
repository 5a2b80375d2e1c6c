//! Limit values with units, as people type them: `5s`, `250ms`, `256M`, `1G`, `64k`.

/// Parses a duration into milliseconds. A bare number is milliseconds.
pub fn parse_millis(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (number, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1000.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60_000.0)
    } else {
        (t, 1.0)
    };
    scaled(number, scale).ok_or_else(|| format!("{text:?} is not a duration; use e.g. 500ms, 5s or 2m"))
}

/// Parses a size into bytes. Suffixes K, M, G (powers of 1024), optionally followed by `i`/`B`.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim().trim_end_matches(['B', 'b']).trim_end_matches('i');
    let (number, scale) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1024.0),
        Some('m' | 'M') => (&t[..t.len() - 1], 1024.0 * 1024.0),
        Some('g' | 'G') => (&t[..t.len() - 1], 1024.0 * 1024.0 * 1024.0),
        _ => (t, 1.0),
    };
    scaled(number, scale).ok_or_else(|| format!("{text:?} is not a size; use e.g. 65536, 64K, 256M or 1G"))
}

fn scaled(number: &str, scale: f64) -> Option<u64> {
    let value: f64 = number.trim().parse().ok()?;
    (value.is_finite() && value >= 0.0).then(|| (value * scale).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_millis("5s"), Ok(5000));
        assert_eq!(parse_millis("250ms"), Ok(250));
        assert_eq!(parse_millis("1.5s"), Ok(1500));
        assert_eq!(parse_millis("2m"), Ok(120_000));
        assert_eq!(parse_millis("300"), Ok(300));
        assert!(parse_millis("soon").unwrap_err().contains("not a duration"));
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_bytes("256M"), Ok(256 << 20));
        assert_eq!(parse_bytes("1G"), Ok(1 << 30));
        assert_eq!(parse_bytes("64k"), Ok(64 << 10));
        assert_eq!(parse_bytes("2MiB"), Ok(2 << 20));
        assert_eq!(parse_bytes("100"), Ok(100));
        assert!(parse_bytes("-1M").is_err());
    }
}
