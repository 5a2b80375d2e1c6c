//! Exit codes of `runbox run`: one per class of outcome, so scripts can branch on them.

use runbox_contract::Verdict;

pub const REJECTED: u8 = 2;
pub const CONFIG: u8 = 3;

pub fn for_verdict(verdict: Verdict) -> u8 {
    match verdict {
        Verdict::Ok => 0,
        Verdict::NonzeroExit => 10,
        Verdict::Signaled => 11,
        Verdict::WallTimeout => 12,
        Verdict::CpuTimeout => 13,
        Verdict::MemoryLimit => 14,
        Verdict::OutputLimit => 15,
        Verdict::DiskLimit => 16,
        Verdict::Cancelled => 17,
        Verdict::SandboxError => 20,
    }
}
