//! Listing what the program left in /workspace, with SHA-256. The program controls every
//! entry, so the walk is descriptor-relative, follows no symlink, opens nothing but regular
//! files and directories, and reads no more bytes than the caps allow.

use std::ffi::CStr;
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd};

use nix::errno::Errno;
use nix::sys::stat::FileStat;
use runbox_contract::{Artifact, SkippedArtifact};
use sha2::{Digest, Sha256};

use crate::{ArtifactStore, Workspace, fd};

/// Directories nested deeper than this below /workspace are not entered; each is reported
/// as `too_deep`. Bounds both the open descriptors and the recursion of one walk.
pub const MAX_WALK_DEPTH: usize = 64;

/// The `reason` of a [`SkippedArtifact`].
pub mod reason {
    pub const SYMLINK: &str = "symlink";
    pub const FIFO: &str = "fifo";
    pub const SOCKET: &str = "socket";
    pub const DEVICE: &str = "device";
    /// Larger than `max_total_bytes` on its own; never read.
    pub const TOO_LARGE: &str = "too_large";
    /// Would fit on its own, but not in what is left of `max_total_bytes`; never read.
    pub const OVER_TOTAL_BYTES: &str = "over_total_bytes";
    /// Past `max_count` artifacts.
    pub const OVER_COUNT: &str = "over_count";
    /// A directory deeper than [`super::MAX_WALK_DEPTH`]; not entered.
    pub const TOO_DEEP: &str = "too_deep";
    /// The name is not UTF-8; the path is shown with U+FFFD replacements.
    pub const NON_UTF8_NAME: &str = "non_utf8_name";
    pub const UNREADABLE: &str = "unreadable";
}

/// Bounds on one artifact walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArtifactCaps {
    /// Most files listed (and hashed).
    pub max_count: usize,
    /// Most bytes hashed over all files. A file that does not fit is not read at all.
    pub max_total_bytes: u64,
}

/// The outcome of a walk: listed files sorted by path, and everything else with the reason.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArtifactReport {
    pub artifacts: Vec<Artifact>,
    pub skipped: Vec<SkippedArtifact>,
    /// A regular file was left out because of `max_count` or `max_total_bytes`.
    pub truncated: bool,
}

impl Workspace {
    /// Lists every regular file under the workspace directory with its size and SHA-256.
    /// Never fails: what cannot be listed is in `skipped`, with why.
    pub fn collect_artifacts(&self, caps: &ArtifactCaps) -> ArtifactReport {
        self.collect_artifacts_into(caps, None)
    }

    /// Like [`Self::collect_artifacts`], and every listed file is also copied into `store`
    /// as it is hashed (one read per file). A file that cannot be stored is `unreadable`.
    pub fn collect_artifacts_into(&self, caps: &ArtifactCaps, store: Option<&ArtifactStore>) -> ArtifactReport {
        let mut walk = Walk { caps: *caps, hashed_bytes: 0, report: ArtifactReport::default(), store };
        walk.dir(self.workspace_fd().as_fd(), "", 0);
        let mut report = walk.report;
        report.artifacts.sort_by(|a, b| a.path.cmp(&b.path));
        report.skipped.sort_by(|a, b| a.path.cmp(&b.path));
        report
    }
}

struct Walk<'a> {
    caps: ArtifactCaps,
    hashed_bytes: u64,
    report: ArtifactReport,
    store: Option<&'a ArtifactStore>,
}

impl Walk<'_> {
    /// Visits the entries of `dir`, whose path below the workspace is `prefix` ("" for the
    /// workspace itself) and which is `depth` directories below it.
    fn dir(&mut self, dir: BorrowedFd<'_>, prefix: &str, depth: usize) {
        let names = match fd::list_dir(dir) {
            Ok(names) => names,
            Err(_) => {
                return self.skip(if prefix.is_empty() { "." } else { prefix }, reason::UNREADABLE, None);
            }
        };
        for name in names {
            let Ok(name_utf8) = name.to_str() else {
                self.skip(&join(prefix, &name.to_string_lossy()), reason::NON_UTF8_NAME, None);
                continue;
            };
            let path = join(prefix, name_utf8);
            match fd::stat_at(dir, &name) {
                Ok(st) => self.entry(dir, &name, &path, &st, depth),
                // Gone since the listing: nothing to report.
                Err(Errno::ENOENT) => {}
                Err(_) => self.skip(&path, reason::UNREADABLE, None),
            }
        }
    }

    /// Dispatches on what lstat says the entry is; only directories and regular files are
    /// ever opened, so a FIFO, socket or device is never touched.
    fn entry(&mut self, parent: BorrowedFd<'_>, name: &CStr, path: &str, st: &FileStat, depth: usize) {
        match st.st_mode & libc::S_IFMT {
            libc::S_IFDIR if depth >= MAX_WALK_DEPTH => self.skip(path, reason::TOO_DEEP, None),
            libc::S_IFDIR => match fd::open_dir_at(parent, name) {
                Ok(child) => self.dir(child.as_fd(), path, depth + 1),
                Err(_) => self.skip(path, reason::UNREADABLE, None),
            },
            libc::S_IFREG => self.file(parent, name, path, file_size(st)),
            mode => self.skip(path, special_reason(mode), None),
        }
    }

    fn file(&mut self, parent: BorrowedFd<'_>, name: &CStr, path: &str, lstat_size: u64) {
        if let Some(why) = self.over_cap(lstat_size) {
            return self.skip_for_cap(path, why, lstat_size);
        }
        let Ok(file) = fd::open_file_at(parent, name) else {
            return self.skip(path, reason::UNREADABLE, Some(lstat_size));
        };
        // The entry may have been swapped since the lstat; from here on only what the open
        // descriptor says counts (a symlink cannot be here: O_NOFOLLOW would have failed).
        let st = match fd::stat_fd(file.as_fd()) {
            Ok(st) => st,
            Err(_) => return self.skip(path, reason::UNREADABLE, Some(lstat_size)),
        };
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return self.skip(path, special_reason(st.st_mode & libc::S_IFMT), None);
        }
        let size = file_size(&st);
        if let Some(why) = self.over_cap(size) {
            return self.skip_for_cap(path, why, size);
        }
        // take(size): a file that grows while we read cannot push us past the budget.
        let mut source = std::fs::File::from(file).take(size);
        match hash_file(&mut source, self.store) {
            Ok((read_bytes, sha256)) => {
                self.hashed_bytes += read_bytes;
                self.report.artifacts.push(Artifact { path: path.to_owned(), size_bytes: read_bytes, sha256 });
            }
            Err(_) => self.skip(path, reason::UNREADABLE, Some(size)),
        }
    }

    /// Which cap, if any, keeps a file of `size` bytes from being hashed now.
    fn over_cap(&self, size: u64) -> Option<&'static str> {
        if self.report.artifacts.len() >= self.caps.max_count {
            Some(reason::OVER_COUNT)
        } else if size > self.caps.max_total_bytes {
            Some(reason::TOO_LARGE)
        } else if size > self.caps.max_total_bytes.saturating_sub(self.hashed_bytes) {
            Some(reason::OVER_TOTAL_BYTES)
        } else {
            None
        }
    }

    fn skip_for_cap(&mut self, path: &str, why: &'static str, size: u64) {
        self.report.truncated = true;
        self.skip(path, why, Some(size));
    }

    fn skip(&mut self, path: &str, why: &'static str, size_bytes: Option<u64>) {
        self.report.skipped.push(SkippedArtifact { path: path.to_owned(), reason: why.to_owned(), size_bytes });
    }
}

/// The reason for an entry that is neither a directory nor a regular file (`S_IFMT` bits).
/// Reads `source` to its end, hashing it and, with a store, keeping a copy.
fn hash_file(source: &mut impl Read, store: Option<&ArtifactStore>) -> std::io::Result<(u64, String)> {
    let Some(store) = store else {
        let mut hasher = Sha256::new();
        let read_bytes = std::io::copy(source, &mut hasher)?;
        return Ok((read_bytes, hex::encode(hasher.finalize())));
    };
    let mut sink = store.sink()?;
    match std::io::copy(source, &mut sink) {
        Ok(read_bytes) => Ok((read_bytes, sink.finish()?)),
        Err(e) => {
            sink.abandon();
            Err(e)
        }
    }
}

fn special_reason(file_type: libc::mode_t) -> &'static str {
    match file_type {
        libc::S_IFLNK => reason::SYMLINK,
        libc::S_IFIFO => reason::FIFO,
        libc::S_IFSOCK => reason::SOCKET,
        libc::S_IFCHR | libc::S_IFBLK => reason::DEVICE,
        _ => reason::UNREADABLE,
    }
}

/// st_size is signed in the C API; it is never negative for a regular file.
fn file_size(st: &FileStat) -> u64 {
    u64::try_from(st.st_size).unwrap_or(0)
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() { name.to_owned() } else { format!("{prefix}/{name}") }
}
