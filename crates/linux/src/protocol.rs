//! The tiny protocol between the supervisor and the sandbox's init over a close-on-exec
//! socketpair. The supervisor sends one byte to let setup start; the child side sends a
//! [`SetupFailure`] when a step fails. End-of-file without a failure means the program's
//! execve succeeded, so a setup failure is never mistaken for a crash of the user's code.

use nix::errno::Errno;

/// The ordered setup steps, named in error reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Step {
    WaitForParent = 1,
    ParentDeathSignal,
    CgroupNamespace,
    BuildRoot,
    PrivateMounts,
    BindRoot,
    MountEntry,
    PivotRoot,
    ReadOnlyRoot,
    Hostname,
    Loopback,
    Chdir,
    DropGroups,
    SetGid,
    SetUid,
    DropCapabilities,
    NoNewPrivs,
    NotDumpable,
    ForkProgram,
    NewSession,
    Signals,
    Stdio,
    Rlimits,
    CloseFds,
    Seccomp,
    Exec,
}

impl Step {
    pub const ALL: [Step; 26] = [
        Step::WaitForParent,
        Step::ParentDeathSignal,
        Step::CgroupNamespace,
        Step::BuildRoot,
        Step::PrivateMounts,
        Step::BindRoot,
        Step::MountEntry,
        Step::PivotRoot,
        Step::ReadOnlyRoot,
        Step::Hostname,
        Step::Loopback,
        Step::Chdir,
        Step::DropGroups,
        Step::SetGid,
        Step::SetUid,
        Step::DropCapabilities,
        Step::NoNewPrivs,
        Step::NotDumpable,
        Step::ForkProgram,
        Step::NewSession,
        Step::Signals,
        Step::Stdio,
        Step::Rlimits,
        Step::CloseFds,
        Step::Seccomp,
        Step::Exec,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Step::WaitForParent => "wait for the supervisor",
            Step::ParentDeathSignal => "set the parent-death signal",
            Step::CgroupNamespace => "unshare the cgroup namespace",
            Step::BuildRoot => "build the root skeleton",
            Step::PrivateMounts => "make mounts private",
            Step::BindRoot => "bind the new root",
            Step::MountEntry => "mount a root entry",
            Step::PivotRoot => "pivot_root",
            Step::ReadOnlyRoot => "remount the root read-only",
            Step::Hostname => "set the hostname",
            Step::Loopback => "bring up loopback",
            Step::Chdir => "enter the working directory",
            Step::DropGroups => "drop supplementary groups",
            Step::SetGid => "set the gid",
            Step::SetUid => "set the uid",
            Step::DropCapabilities => "drop capabilities",
            Step::NoNewPrivs => "set no_new_privs",
            Step::NotDumpable => "make init undumpable",
            Step::ForkProgram => "fork the program",
            Step::NewSession => "start a new session",
            Step::Signals => "reset signals",
            Step::Stdio => "connect stdio",
            Step::Rlimits => "set rlimits",
            Step::CloseFds => "close inherited descriptors",
            Step::Seccomp => "install the seccomp filter",
            Step::Exec => "execve the program",
        }
    }

    fn from_u32(v: u32) -> Option<Step> {
        Step::ALL.iter().copied().find(|s| *s as u32 == v)
    }
}

/// A failed setup step, with the errno and, for mount entries, the entry's index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetupFailure {
    pub step: Step,
    pub errno: Errno,
    pub detail: u32,
}

pub const MESSAGE_BYTES: usize = 12;

impl SetupFailure {
    pub fn encode(&self) -> [u8; MESSAGE_BYTES] {
        let mut buf = [0u8; MESSAGE_BYTES];
        buf[..4].copy_from_slice(&(self.step as u32).to_le_bytes());
        buf[4..8].copy_from_slice(&(self.errno as i32).to_le_bytes());
        buf[8..].copy_from_slice(&self.detail.to_le_bytes());
        buf
    }

    pub fn decode(buf: &[u8]) -> Option<SetupFailure> {
        if buf.len() != MESSAGE_BYTES {
            return None;
        }
        let word = |i: usize| u32::from_le_bytes(buf[i..i + 4].try_into().expect("4 bytes"));
        Some(SetupFailure { step: Step::from_u32(word(0))?, errno: Errno::from_raw(word(4) as i32), detail: word(8) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_round_trip() {
        for step in Step::ALL {
            let failure = SetupFailure { step, errno: Errno::EPERM, detail: 7 };
            assert_eq!(SetupFailure::decode(&failure.encode()), Some(failure));
        }
        assert_eq!(SetupFailure::decode(&[0; 12]), None);
        assert_eq!(SetupFailure::decode(&[1; 3]), None);
    }
}
