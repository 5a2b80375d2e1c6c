//! A token bucket: `burst` tokens, refilled at `per_second`; a request takes one.

use std::time::Instant;

use crate::config::Rate;

#[derive(Debug)]
pub struct TokenBucket {
    rate: Rate,
    tokens: f64,
    updated: Instant,
}

impl TokenBucket {
    pub fn new(rate: Rate) -> TokenBucket {
        TokenBucket { rate, tokens: rate.burst, updated: Instant::now() }
    }

    /// Takes a token, or says in how many seconds (rounded up) one will be there.
    pub fn take(&mut self, now: Instant) -> Result<(), u64> {
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate.per_second).min(self.rate.burst);
        self.updated = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(((1.0 - self.tokens) / self.rate.per_second).ceil().max(1.0) as u64)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_burst_is_allowed_then_the_rate_applies() {
        let start = Instant::now();
        let mut bucket = TokenBucket::new(Rate { per_second: 2.0, burst: 3.0 });
        bucket.updated = start;
        assert!((0..3).all(|_| bucket.take(start).is_ok()));
        assert_eq!(bucket.take(start), Err(1), "empty: one token in half a second, rounded up");
        assert!(bucket.take(start + Duration::from_millis(500)).is_ok());
        assert!(bucket.take(start + Duration::from_millis(500)).is_err());
        // Never more than the burst, however long it was idle.
        let later = start + Duration::from_secs(3600);
        assert!((0..3).all(|_| bucket.take(later).is_ok()));
        assert!(bucket.take(later).is_err());
    }

    #[test]
    fn a_slow_rate_says_how_long_to_wait() {
        let start = Instant::now();
        let mut bucket = TokenBucket::new(Rate { per_second: 0.1, burst: 1.0 });
        bucket.updated = start;
        assert!(bucket.take(start).is_ok());
        assert_eq!(bucket.take(start), Err(10));
    }
}
