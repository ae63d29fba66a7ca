//! A store in a local directory: the one-process farm's work area.

use std::path::{Path, PathBuf};

use async_trait::async_trait;

use super::{validate_key, Store};
use crate::FarmError;

/// Objects as files under a root directory; puts are atomic (temporary file + rename), and use
/// a hard link instead of a copy when source and root share a filesystem.
#[derive(Debug, Clone)]
pub struct LocalStore {
    root: PathBuf,
}

impl LocalStore {
    /// A store rooted at `root` (created if missing).
    pub fn new(root: impl Into<PathBuf>) -> Result<Self, FarmError> {
        let root = root.into();
        std::fs::create_dir_all(&root).map_err(|e| FarmError::io(&root, e))?;
        Ok(LocalStore { root })
    }

    /// The file behind a key.
    pub fn path_of(&self, key: &str) -> Result<PathBuf, FarmError> {
        validate_key(key)?;
        Ok(self.root.join(key))
    }
}

/// Places `src` at `dst` atomically: link (or copy) to a temporary name, then rename.
fn place(src: &Path, dst: &Path) -> Result<u64, FarmError> {
    if let Some(dir) = dst.parent() {
        std::fs::create_dir_all(dir).map_err(|e| FarmError::io(dir, e))?;
    }
    let tmp = dst.with_extension(format!("tmp-{}", uuid::Uuid::new_v4().simple()));
    if std::fs::hard_link(src, &tmp).is_err() {
        std::fs::copy(src, &tmp).map_err(|e| FarmError::io(src, e))?;
    }
    std::fs::rename(&tmp, dst).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        FarmError::io(dst, e)
    })?;
    std::fs::metadata(dst)
        .map(|m| m.len())
        .map_err(|e| FarmError::io(dst, e))
}

#[async_trait]
impl Store for LocalStore {
    async fn put_file(&self, key: &str, src: &Path) -> Result<u64, FarmError> {
        let dst = self.path_of(key)?;
        let src = src.to_path_buf();
        tokio::task::spawn_blocking(move || place(&src, &dst))
            .await
            .map_err(|e| FarmError::Store {
                key: key.into(),
                reason: e.to_string(),
            })?
    }

    async fn get_file(&self, key: &str, dst: &Path) -> Result<u64, FarmError> {
        let src = self.path_of(key)?;
        if !src.is_file() {
            return Err(FarmError::Store {
                key: key.into(),
                reason: "no such object".into(),
            });
        }
        let dst = dst.to_path_buf();
        tokio::task::spawn_blocking(move || place(&src, &dst))
            .await
            .map_err(|e| FarmError::Store {
                key: key.into(),
                reason: e.to_string(),
            })?
    }

    async fn exists(&self, key: &str) -> Result<bool, FarmError> {
        Ok(self.path_of(key)?.is_file())
    }

    async fn delete_prefix(&self, prefix: &str) -> Result<u64, FarmError> {
        let dir = self.path_of(prefix)?;
        tokio::task::spawn_blocking(move || {
            if !dir.exists() {
                return Ok(0);
            }
            let count = count_files(&dir);
            std::fs::remove_dir_all(&dir).map_err(|e| FarmError::io(&dir, e))?;
            Ok(count)
        })
        .await
        .map_err(|e| FarmError::Store {
            key: prefix.into(),
            reason: e.to_string(),
        })?
    }

    async fn delete(&self, key: &str) -> Result<(), FarmError> {
        let path = self.path_of(key)?;
        match tokio::fs::remove_file(&path).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(FarmError::io(&path, e)),
        }
    }
}

fn count_files(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| {
                    let p = e.path();
                    if p.is_dir() {
                        count_files(&p)
                    } else {
                        1
                    }
                })
                .sum()
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn put_get_delete() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new(dir.path().join("store")).unwrap();
        let src = dir.path().join("a.bin");
        std::fs::write(&src, b"hello").unwrap();
        assert_eq!(
            store.put_file("jobs/j/chunks/0.nut", &src).await.unwrap(),
            5
        );
        assert!(store.exists("jobs/j/chunks/0.nut").await.unwrap());
        // Replacing the source later must not change the stored object.
        std::fs::remove_file(&src).unwrap();
        std::fs::write(&src, b"other").unwrap();
        let out = dir.path().join("out/b.bin");
        store.get_file("jobs/j/chunks/0.nut", &out).await.unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), b"hello");
        assert!(store.get_file("jobs/j/none", &out).await.is_err());
        assert!(store.put_file("../escape", &src).await.is_err());
        // One object deleted, absent ones fine, escapes refused.
        store.put_file("jobs/j/chunks/1.nut", &src).await.unwrap();
        store.delete("jobs/j/chunks/1.nut").await.unwrap();
        store.delete("jobs/j/chunks/1.nut").await.unwrap();
        assert!(!store.exists("jobs/j/chunks/1.nut").await.unwrap());
        assert!(store.exists("jobs/j/chunks/0.nut").await.unwrap());
        assert!(store.delete("../escape").await.is_err());
        assert_eq!(store.delete_prefix("jobs/j/").await.unwrap(), 1);
        assert!(!store.exists("jobs/j/chunks/0.nut").await.unwrap());
    }
}
