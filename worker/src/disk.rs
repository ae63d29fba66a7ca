//! Free space on the staging disk.

use std::path::Path;

/// Bytes available to unprivileged users on the filesystem holding `path`; `u64::MAX` when it
/// cannot be read (the check then never blocks work).
pub(crate) fn free_bytes(path: &Path) -> u64 {
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else {
        return u64::MAX;
    };
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c` is a valid NUL-terminated path and `st` points at writable memory of the
    // right type; statvfs fills it completely when it returns 0, and we read it only then.
    let rc = unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return u64::MAX;
    }
    // SAFETY: rc == 0, so statvfs initialised the struct.
    let st = unsafe { st.assume_init() };
    st.f_bavail.saturating_mul(st.f_frsize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_space_of_temp_dir_is_positive_and_missing_paths_do_not_block() {
        let free = free_bytes(&std::env::temp_dir());
        assert!(free > 0 && free < u64::MAX);
        assert_eq!(free_bytes(Path::new("/no/such/dir/here")), u64::MAX);
    }
}
