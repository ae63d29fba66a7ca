//! Free space on a staging disk.
//!
//! Why here: workers pause below their floor, and the dispatcher refuses an input its staging
//! cannot hold; both read the same figure.

use std::path::Path;

/// Bytes available to unprivileged users on the filesystem holding `path`; `u64::MAX` when it
/// cannot be read (the check then never blocks work).
pub fn free_bytes(path: &Path) -> u64 {
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

/// Takes an exclusive lock on the file `path` (created if missing) for as long as the
/// returned file lives: `Ok(None)` when another process (or handle) holds it. Why: a
/// dispatcher per database and a worker per staging directory are enforced this way.
pub fn try_lock_file(path: &Path) -> std::io::Result<Option<std::fs::File>> {
    let file = std::fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
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
