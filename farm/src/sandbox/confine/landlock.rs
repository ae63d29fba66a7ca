//! Landlock rules of a media child, kept by raw syscalls.
//!
//! Why raw syscalls: the rules are applied in the forked child before exec, where only
//! async-signal-safe calls are allowed; the paths are turned into C strings in the parent
//! and the child only opens them, adds them and restricts itself (no allocation). Each child
//! gets a domain of its own, so two children (of two jobs) cannot trace or read each other
//! either: Landlock refuses ptrace, and so `/proc/<pid>/environ` and `mem`, across domains.

use std::ffi::{CStr, CString};
use std::path::Path;

const CREATE_RULESET_VERSION: libc::c_uint = 1;
const RULE_PATH_BENEATH: libc::c_int = 1;

const EXECUTE: u64 = 1 << 0;
const WRITE_FILE: u64 = 1 << 1;
const READ_FILE: u64 = 1 << 2;
const READ_DIR: u64 = 1 << 3;
const REFER: u64 = 1 << 13;
const TRUNCATE: u64 = 1 << 14;
const IOCTL_DEV: u64 = 1 << 15;
const NET_BIND_TCP: u64 = 1 << 0;
const NET_CONNECT_TCP: u64 = 1 << 1;
const SCOPE_ABSTRACT_UNIX_SOCKET: u64 = 1 << 0;
const SCOPE_SIGNAL: u64 = 1 << 1;

#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

#[repr(C, packed)]
struct PathBeneath {
    allowed_access: u64,
    parent_fd: i32,
}

/// The Landlock ABI version this kernel offers (None: no Landlock, or it is disabled or
/// refused, e.g. by a container's seccomp profile).
pub(super) fn abi() -> Option<u32> {
    // SAFETY: with the VERSION flag and no attribute the call only returns the ABI version.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<RulesetAttr>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(v).ok().filter(|v| *v > 0)
}

/// What a child may do with a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Access {
    /// Read files, list directories, run programs.
    Read,
    /// Anything: create, write, remove, rename within.
    Write,
    /// Open a device node for reading and writing, and its ioctls (/dev/null, GPU nodes).
    Device,
}

/// A child's Landlock ruleset, ready to apply in the forked child.
pub(super) struct Rules {
    attr: RulesetAttr,
    size: usize,
    paths: Vec<(CString, u64)>,
}

impl Rules {
    /// The ruleset for ABI `abi` with `paths` (paths that do not exist are left out): files
    /// everywhere else refused, and with ABI 4 or later TCP bind and connect refused, with
    /// ABI 6 or later signals and abstract UNIX sockets outside the child refused.
    pub(super) fn new(abi: u32, paths: &[(&Path, Access)]) -> Rules {
        let mut fs = (1u64 << 13) - 1;
        if abi >= 2 {
            fs |= REFER;
        }
        if abi >= 3 {
            fs |= TRUNCATE;
        }
        if abi >= 5 {
            fs |= IOCTL_DEV;
        }
        let (net, size) = match abi {
            0..=3 => (0, 8),
            4 | 5 => (NET_BIND_TCP | NET_CONNECT_TCP, 16),
            _ => (NET_BIND_TCP | NET_CONNECT_TCP, 24),
        };
        let scoped = if abi >= 6 {
            SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
        } else {
            0
        };
        let file_only = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV;
        let paths = paths
            .iter()
            .filter_map(|(path, access)| {
                let meta = std::fs::metadata(path).ok()?;
                let wanted = match access {
                    Access::Read => READ_FILE | READ_DIR | EXECUTE,
                    Access::Write => fs,
                    Access::Device => READ_FILE | WRITE_FILE | TRUNCATE | IOCTL_DEV,
                };
                let mask = if meta.is_dir() { fs } else { fs & file_only };
                let c = CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
                Some((c, wanted & mask))
            })
            .collect();
        Rules {
            attr: RulesetAttr {
                handled_access_fs: fs,
                handled_access_net: net,
                scoped,
            },
            size,
            paths,
        }
    }

    /// Restricts the calling process (the forked child) to these rules; false where the
    /// kernel refused. (The child cannot write its own /proc files then: its parent resets
    /// its peak memory figure.)
    ///
    /// Async-signal-safe: only syscalls on memory prepared by the parent. No-new-privileges
    /// must be set first.
    pub(super) fn restrict_self(&self) -> bool {
        // SAFETY: the attribute lives in self, its size is the one the ABI takes.
        let ruleset = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                &self.attr as *const RulesetAttr,
                self.size,
                0 as libc::c_uint,
            )
        };
        let Ok(ruleset) = libc::c_int::try_from(ruleset) else {
            return false;
        };
        if ruleset < 0 {
            return false;
        }
        for (path, access) in &self.paths {
            add_rule(ruleset, path, *access);
        }
        // SAFETY: plain integer arguments; the ruleset descriptor is ours to close.
        unsafe {
            let done = libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0 as libc::c_uint);
            libc::close(ruleset);
            done == 0
        }
    }
}

/// Allows `access` beneath `path` (a missing path, or a refused rule, allows nothing).
///
/// Async-signal-safe: open, landlock_add_rule and close on caller-owned memory.
fn add_rule(ruleset: libc::c_int, path: &CStr, access: u64) {
    if access == 0 {
        return;
    }
    // SAFETY: a NUL-terminated path; O_PATH opens nothing for reading or writing.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if fd < 0 {
        return;
    }
    let attr = PathBeneath {
        allowed_access: access,
        parent_fd: fd,
    };
    // SAFETY: the attribute is on our stack; the descriptor is ours to close.
    unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset,
            RULE_PATH_BENEATH,
            &attr as *const PathBeneath,
            0 as libc::c_uint,
        );
        libc::close(fd);
    }
}
