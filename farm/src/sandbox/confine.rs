//! What a media child may reach besides its pipes: no parent secrets, no network, and
//! writes only where its work goes.
//!
//! Why: FFmpeg parses untrusted uploads, and an exploited decoder runs as the same uid as
//! the worker or dispatcher that started it. Its environment is already empty
//! ([`super::Sandbox`]); here:
//! - the parent makes itself not dumpable ([`hide_parent`]), so a process of the same uid
//!   without CAP_SYS_PTRACE cannot read its `/proc/<pid>/environ` (S3 secret, API tokens,
//!   broker URL) or `mem`;
//! - the child, before exec, sets no-new-privileges, drops every capability (also the
//!   bounding set: a child of a root parent keeps none across exec), then restricts itself
//!   with Landlock (reads: the system's library and configuration directories and the paths
//!   the sandbox names; writes: only the sandbox's work directories and a few device nodes;
//!   TCP refused with ABI 4 or later; no ptrace of processes outside its own domain), and
//!   installs a seccomp filter refusing every socket but AF_UNIX.
//!
//! Where the kernel lacks Landlock (or a container's profile refuses it), the child keeps
//! the seccomp filter, no capabilities and the non-dumpable parent; files are then guarded by
//! the uid alone. [`report`] says at start-up what holds.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

mod landlock;
mod seccomp;

use landlock::{Access, Rules};

/// System directories a media child reads: the dynamic loader's libraries, FFmpeg's and the
/// GPU driver's configuration, /proc and /sys (CPU count, its own memory figures). Token
/// files (/var/run/secrets, /run), home directories and /tmp are not among them.
const SYSTEM_READ: &[&str] = &[
    "/usr",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/bin",
    "/sbin",
    "/etc",
    "/opt",
    "/nix/store",
    "/proc",
    "/sys",
];

/// Device nodes a media child opens (for writing too): the null and random devices, and the
/// NVIDIA and DRM nodes of the GPU path.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/dri",
    "/dev/nvidia-caps",
];

/// The paths a sandbox's children may read and write beyond the system's (built by the
/// process that owns the sandbox: a worker's staging directory, the one-process farm's work
/// directory and input).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Confinement {
    read: Vec<PathBuf>,
    write: Vec<PathBuf>,
    cuda_cache: Option<PathBuf>,
}

impl Confinement {
    /// Lets children read `path` (a file, or a directory and everything beneath it).
    pub fn reading(mut self, path: impl Into<PathBuf>) -> Self {
        self.read.push(path.into());
        self
    }

    /// Gives children the directory `dir` (created now, writable) as CUDA's kernel cache,
    /// `CUDA_CACHE_PATH`. Why: `scale_cuda`'s PTX is compiled for the card the first time a
    /// process loads it, and children start with an empty environment (no HOME, so no
    /// default cache) and never serve two jobs: without it every job's child compiles it
    /// again (GPU re-review, failure 6).
    pub fn cuda_cache(self, dir: impl Into<PathBuf>) -> Self {
        let dir = dir.into();
        Confinement {
            cuda_cache: Some(dir.clone()),
            ..self.writing(dir)
        }
    }

    /// The CUDA kernel cache children get ([`Confinement::cuda_cache`]).
    pub(super) fn cuda_cache_dir(&self) -> Option<&Path> {
        self.cuda_cache.as_deref()
    }

    /// Lets children create, write and remove beneath the directory `path` (created now
    /// when missing, since a Landlock rule names an existing directory).
    pub fn writing(mut self, path: impl Into<PathBuf>) -> Self {
        let path = path.into();
        if let Err(e) = std::fs::create_dir_all(&path) {
            tracing::warn!(path = %path.display(), error = %e, "media children's work directory cannot be created");
        }
        self.write.push(path);
        self
    }
}

/// What one child applies before exec, prepared in the parent (the child must not allocate).
pub(super) struct Prepared {
    rules: Option<Rules>,
    filter: Option<Vec<libc::sock_filter>>,
}

impl Prepared {
    /// The rules for a child started from `exe` under `confinement`.
    pub(super) fn new(exe: &Path, confinement: &Confinement) -> Prepared {
        let support = support();
        let rules = support.landlock.map(|abi| {
            let mut paths: Vec<(PathBuf, Access)> = Vec::new();
            let read = |p: PathBuf| (p, Access::Read);
            paths.extend(SYSTEM_READ.iter().map(|p| read(PathBuf::from(p))));
            paths.extend(exe.parent().map(|p| read(p.to_path_buf())));
            if let Ok(real) = exe.canonicalize() {
                paths.extend(real.parent().map(|p| read(p.to_path_buf())));
            }
            let libs = std::env::var_os("LD_LIBRARY_PATH").unwrap_or_default();
            paths.extend(std::env::split_paths(&libs).map(read));
            paths.extend(confinement.read.iter().cloned().map(read));
            paths.extend(confinement.write.iter().map(|p| (p.clone(), Access::Write)));
            paths.extend(devices().into_iter().map(|p| (p, Access::Device)));
            let refs: Vec<(&Path, Access)> = paths.iter().map(|(p, a)| (p.as_path(), *a)).collect();
            Rules::new(abi, &refs)
        });
        Prepared {
            rules,
            filter: support.seccomp.then(seccomp::program).flatten(),
        }
    }

    /// Confines the calling process: the forked child, before exec.
    ///
    /// Async-signal-safe: prctl, capset, Landlock and seccomp syscalls on memory prepared
    /// by the parent; no allocation, no lock.
    pub(super) fn apply(&self) -> std::io::Result<()> {
        // SAFETY: plain integer arguments; it only narrows what this process may gain.
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        drop_capabilities();
        // Each layer is best effort here: what the kernel offers was probed and logged by
        // the parent ([`report`]), and a refusal leaves the other layers in place.
        if let Some(rules) = &self.rules {
            rules.restrict_self();
        }
        if let Some(filter) = &self.filter {
            seccomp::install(filter);
        }
        Ok(())
    }
}

/// Drops every capability of the calling process, the bounding set first (refused without
/// CAP_SETPCAP, harmless then), so that with no-new-privileges a root child keeps none.
///
/// Async-signal-safe: prctl and capset on stack memory.
fn drop_capabilities() {
    for cap in 0..64 {
        // SAFETY: plain integer arguments; dropping a capability only narrows this process.
        unsafe {
            libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0);
        }
    }
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let header = Header {
        version: 0x2008_0522,
        pid: 0,
    };
    let none = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: header and data (two 32-bit halves, version 3) are on our stack; clearing
    // every set is always allowed.
    unsafe {
        libc::syscall(libc::SYS_capset, &header as *const Header, none.as_ptr());
    }
}

/// The device nodes of [`DEVICES`] and the NVIDIA nodes (`/dev/nvidia*`) present here.
fn devices() -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = DEVICES.iter().map(PathBuf::from).collect();
    if let Ok(dir) = std::fs::read_dir("/dev") {
        found.extend(
            dir.flatten()
                .filter(|e| e.file_name().as_encoded_bytes().starts_with(b"nvidia"))
                .map(|e| e.path()),
        );
    }
    found
}

/// What this kernel lets the sandbox apply to its children.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Support {
    /// The Landlock ABI version (None: no Landlock here).
    pub landlock: Option<u32>,
    /// Whether seccomp filters are available.
    pub seccomp: bool,
}

/// What holds here, probed once.
pub fn support() -> Support {
    static SUPPORT: OnceLock<Support> = OnceLock::new();
    *SUPPORT.get_or_init(|| Support {
        landlock: landlock::abi(),
        seccomp: seccomp::available(),
    })
}

/// Makes this process not dumpable (once), so its children and other processes of the same
/// uid without CAP_SYS_PTRACE cannot read its `/proc/<pid>/environ` or `mem`, and logs once
/// what confines the media children here.
///
/// Why at sandbox creation: every process that starts media children (worker, dispatcher,
/// `tessera`) creates a sandbox first. Side effects: no core dumps of this process, and its
/// `/proc/<pid>` files belong to root.
pub(super) fn hide_parent() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        // SAFETY: PR_SET_DUMPABLE takes a plain integer and changes only this process.
        let hidden = unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } == 0;
        let s = support();
        let text = report(s, hidden);
        if s.landlock.is_some() && s.seccomp && hidden {
            tracing::info!("{text}");
        } else {
            tracing::warn!("{text}");
        }
    });
}

/// One line saying what confines media children under `support`.
pub fn report(support: Support, parent_hidden: bool) -> String {
    let landlock = match support.landlock {
        None => "no Landlock (files guarded by the uid only)".to_string(),
        Some(abi) if abi < 4 => format!("Landlock ABI {abi} (files; no TCP rules)"),
        Some(abi) if abi < 6 => format!("Landlock ABI {abi} (files, TCP)"),
        Some(abi) => format!("Landlock ABI {abi} (files, TCP, signals and abstract sockets)"),
    };
    let seccomp = if support.seccomp {
        "seccomp socket filter"
    } else {
        "no seccomp"
    };
    let parent = if parent_hidden {
        "parent not dumpable"
    } else {
        "parent dumpable (PR_SET_DUMPABLE refused)"
    };
    format!("media children: no-new-privileges, no capabilities, {landlock}, {seccomp}, {parent}")
}

/// Whether a media child inherits the variable `key`: the paths and locale the C libraries
/// read, and the CUDA/NVIDIA selection the GPU driver reads. Nothing else, and never a
/// `TESSERA_*` setting (they carry the farm's secrets).
pub(super) fn child_may_see(key: &str) -> bool {
    matches!(
        key,
        "PATH" | "LD_LIBRARY_PATH" | "TMPDIR" | "TZ" | "LANG" | "LC_ALL" | "RUST_BACKTRACE"
    ) || key.starts_with("CUDA_")
        || key.starts_with("NVIDIA_")
        || key.starts_with("__NV")
}

pub(super) fn set_limit(resource: libc::__rlimit_resource_t, value: u64) {
    let lim = libc::rlimit {
        rlim_cur: value,
        rlim_max: value,
    };
    // SAFETY: setrlimit reads a valid rlimit struct on our stack; failure only leaves the
    // inherited limit in place.
    unsafe {
        libc::setrlimit(resource, &lim);
    }
}

/// The seccomp program, for the sandbox's tests.
#[cfg(test)]
pub(super) fn seccomp_program_for_tests() -> Vec<libc::sock_filter> {
    seccomp::program().unwrap_or_default()
}
