//! The tmpfs that holds a run's files, and reading the mount table to find what is mounted
//! under a run directory.

use std::ffi::OsString;
use std::io;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::mount::{MntFlags, MsFlags};

/// Mounts a fresh tmpfs at `target`. The kernel enforces `size` and `nr_inodes`: a program
/// that fills it gets ENOSPC inside the run, and the host disk is never touched. Both must be
/// non-zero, because for tmpfs 0 means unlimited (Documentation/filesystems/tmpfs.rst).
/// MS_NOSUID and MS_NODEV: a set-id binary or device node written by the program is inert.
pub(crate) fn mount_tmpfs(target: &Path, size_bytes: u64, inodes: u64, uid: u32, gid: u32) -> nix::Result<()> {
    debug_assert!(size_bytes > 0 && inodes > 0, "0 would mean unlimited");
    let data = format!("size={size_bytes},nr_inodes={inodes},mode=0755,uid={uid},gid={gid}");
    nix::mount::mount(Some("tmpfs"), target, Some("tmpfs"), MsFlags::MS_NOSUID | MsFlags::MS_NODEV, Some(data.as_str()))
}

/// Lazily detaches the mount at `target` (umount2(2) with MNT_DETACH): it leaves the mount
/// table at once even if a straggler still holds a file open in it, and the tmpfs memory is
/// freed when the last reference goes. EINVAL means it is no longer a mount point.
pub(crate) fn detach(target: &Path) -> nix::Result<()> {
    match nix::mount::umount2(target, MntFlags::MNT_DETACH) {
        Err(Errno::EINVAL | Errno::ENOENT) => Ok(()),
        other => other,
    }
}

/// Mount points at or under `dir`, deepest first, from /proc/self/mountinfo. A path mounted
/// over several times appears once per mount.
pub(crate) fn mount_points_under(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let table = std::fs::read("/proc/self/mountinfo")?;
    let mut found: Vec<PathBuf> =
        table.split(|&b| b == b'\n').filter_map(mount_point_of).filter(|point| point.starts_with(dir)).collect();
    found.sort_by_key(|point| std::cmp::Reverse(point.components().count()));
    Ok(found)
}

/// The fifth field of a mountinfo line (proc_pid_mountinfo(5)), with the kernel's octal
/// escapes (`\040` for a space, and so on) undone.
fn mount_point_of(line: &[u8]) -> Option<PathBuf> {
    let field = line.split(|&b| b == b' ').nth(4)?;
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        let octal =
            field.get(i + 1..i + 4).filter(|d| field[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) => {
                out.push(d.iter().fold(0u8, |acc, c| acc.wrapping_mul(8).wrapping_add(c - b'0')));
                i += 4;
            }
            None => {
                out.push(field[i]);
                i += 1;
            }
        }
    }
    Some(PathBuf::from(OsString::from_vec(out)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_fields_are_unescaped() {
        let line = b"42 27 0:39 / /tmp/a\\040b\\134c rw,nosuid - tmpfs tmpfs rw,size=1024k";
        assert_eq!(mount_point_of(line), Some(PathBuf::from("/tmp/a b\\c")));
        assert_eq!(mount_point_of(b"short line"), None);
    }

    #[test]
    fn the_root_mount_is_found_under_slash() {
        let points = mount_points_under(Path::new("/")).unwrap();
        assert!(points.contains(&PathBuf::from("/")), "{points:?}");
    }
}
