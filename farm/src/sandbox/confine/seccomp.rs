//! A seccomp filter that keeps a media child off the network: `socket` for any family but
//! AF_UNIX, and `io_uring_setup` (whose requests would bypass the filter), fail with EACCES.
//!
//! Why beside Landlock: Landlock refuses TCP only (ABI 4 or later) and not at all on older
//! kernels; this filter also refuses UDP (DNS), raw and netlink sockets, and holds where the
//! kernel has no Landlock. Installed in the forked child before exec, after no-new-privileges.

use libc::sock_filter;

#[cfg(target_arch = "x86_64")]
const ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const ARCH: u32 = 0xC000_00B7;

const DENY: u32 = libc::SECCOMP_RET_ERRNO | libc::EACCES as u32;
const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const JEQ: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
#[cfg(target_arch = "x86_64")]
const JGE: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
const RET: u16 = (libc::BPF_RET | libc::BPF_K) as u16;

fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

/// A jump of the filter: where to go when the test holds and when it does not.
enum To {
    Next,
    Allow,
    Deny,
}

/// The filter program (None on an architecture it is not written for).
pub(super) fn program() -> Option<Vec<sock_filter>> {
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    return None;
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    {
        // seccomp_data: nr at 0, arch at 4, args from 16 (the low word of args[0] on a
        // little-endian machine).
        let mut steps: Vec<(u16, u32, To, To)> = Vec::new();
        let load = |k| (LD_W_ABS, k, To::Next, To::Next);
        steps.push(load(4));
        steps.push((JEQ, ARCH, To::Next, To::Deny));
        steps.push(load(0));
        #[cfg(target_arch = "x86_64")]
        steps.push((JGE, 0x4000_0000, To::Deny, To::Next)); // x32 system calls
        let uring = u32::try_from(libc::SYS_io_uring_setup).ok()?;
        let socket = u32::try_from(libc::SYS_socket).ok()?;
        steps.push((JEQ, uring, To::Deny, To::Next));
        steps.push((JEQ, socket, To::Next, To::Allow));
        steps.push(load(16));
        steps.push((JEQ, libc::AF_UNIX as u32, To::Allow, To::Deny));
        let allow = steps.len();
        let deny = allow + 1;
        let offset = |i: usize, to: &To| -> Option<u8> {
            match to {
                To::Next => Some(0),
                To::Allow => u8::try_from(allow - i - 1).ok(),
                To::Deny => u8::try_from(deny - i - 1).ok(),
            }
        };
        let mut prog = Vec::with_capacity(steps.len() + 2);
        for (i, (code, k, jt, jf)) in steps.iter().enumerate() {
            prog.push(sock_filter {
                code: *code,
                jt: offset(i, jt)?,
                jf: offset(i, jf)?,
                k: *k,
            });
        }
        prog.push(stmt(RET, ALLOW));
        prog.push(stmt(RET, DENY));
        Some(prog)
    }
}

/// Whether this kernel takes seccomp filters (it may still refuse one in a container).
pub(super) fn available() -> bool {
    // SAFETY: PR_GET_SECCOMP only reads this process's mode; it fails with EINVAL without
    // CONFIG_SECCOMP.
    unsafe { libc::prctl(libc::PR_GET_SECCOMP) >= 0 }
}

/// Installs `prog` on the calling process; false where refused.
///
/// Async-signal-safe: one syscall on memory prepared by the parent. No-new-privileges must
/// be set first.
pub(super) fn install(prog: &[sock_filter]) -> bool {
    let Ok(len) = u16::try_from(prog.len()) else {
        return false;
    };
    let fprog = libc::sock_fprog {
        len,
        filter: prog.as_ptr().cast_mut(),
    };
    // SAFETY: the program outlives the call (the kernel copies it); the filter only
    // narrows what this process may do.
    unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            0 as libc::c_uint,
            &fprog as *const libc::sock_fprog,
        ) == 0
    }
}
