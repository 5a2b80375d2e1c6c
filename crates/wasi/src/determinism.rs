//! Deterministic mode: a clock that starts at a fixed time and advances by a fixed step on
//! every read, and random bytes from a fixed seed. Given the same request, a guest then sees
//! the same times and the same "random" numbers on every run, so its output is byte-identical.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::StdRng;
use wasmtime_wasi::{HostMonotonicClock, HostWallClock, WasiCtxBuilder};

/// 2000-01-01T00:00:00Z, in seconds since the Unix epoch.
const WALL_START_SECS: u64 = 946_684_800;
/// How far both clocks move on each read: time passes, so loops that wait for it still end.
const STEP_NANOS: u64 = 1_000_000;
/// The seed of the guest's random bytes (secure and insecure alike).
const SEED: u64 = 0x7275_6e62_6f78; // "runbox"

#[derive(Default)]
struct SteppingClock {
    reads: AtomicU64,
}

impl SteppingClock {
    fn next_nanos(&self) -> u64 {
        self.reads.fetch_add(1, Ordering::Relaxed).saturating_mul(STEP_NANOS)
    }
}

impl HostWallClock for SteppingClock {
    fn resolution(&self) -> Duration {
        Duration::from_nanos(STEP_NANOS)
    }

    fn now(&self) -> Duration {
        Duration::from_secs(WALL_START_SECS) + Duration::from_nanos(self.next_nanos())
    }
}

impl HostMonotonicClock for SteppingClock {
    fn resolution(&self) -> u64 {
        STEP_NANOS
    }

    fn now(&self) -> u64 {
        self.next_nanos()
    }
}

/// Replaces the host clocks and random sources of `builder` with deterministic ones.
pub(crate) fn make_deterministic(builder: &mut WasiCtxBuilder) {
    builder
        .wall_clock(SteppingClock::default())
        .monotonic_clock(SteppingClock::default())
        .secure_random(StdRng::seed_from_u64(SEED))
        .insecure_random(StdRng::seed_from_u64(SEED + 1))
        .insecure_random_seed(u128::from(SEED));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clocks_start_fixed_and_step() {
        let clock = SteppingClock::default();
        assert_eq!(HostWallClock::now(&clock), Duration::from_secs(WALL_START_SECS));
        assert_eq!(HostWallClock::now(&clock), Duration::from_secs(WALL_START_SECS) + Duration::from_millis(1));
        let mono = SteppingClock::default();
        assert_eq!((HostMonotonicClock::now(&mono), HostMonotonicClock::now(&mono)), (0, STEP_NANOS));
    }
}
