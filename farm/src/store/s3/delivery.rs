//! Deliveries that say who made them. The copy of a work object to its destination carries
//! `DELIVERY_MARK` (`x-amz-meta-tessera-delivery`) in its metadata: the job that delivered
//! it and the ETag of the work object it copied. A delivery finds the mark of its own job
//! and that very object at the destination and copies nothing.
//!
//! Why: a dispatcher killed inside delivery resumes the job and delivers again; an output
//! the killed run already copied would be copied a second time (the same bytes, but a
//! second write a bucket notification, a CDN purge or a versioned bucket sees), and the
//! job's own record of the copy can miss it when the kill falls between the copy and the
//! record. The mark lives with the object, so no window is left.

use super::client::{Mark, S3Store};
use crate::FarmError;

/// What a delivery did: the size at the destination, and whether an earlier delivery of
/// the same job had put that very object there already (nothing copied now).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivered {
    /// Bytes at the destination.
    pub size: u64,
    /// True when the destination already held this job's copy of this object.
    pub earlier: bool,
}

/// The mark job `by` gives its copy of the work object of ETag `etag`.
fn mark_of(by: &str, etag: &str) -> String {
    format!("{by} {}", etag.trim_matches('"'))
}

impl S3Store {
    /// Copies `src_key` of bucket `src_bucket` to `key` in this store's bucket for job `by`,
    /// once: a destination that already holds `by`'s copy of this very object (the same
    /// ETag, the same size) is left as it is. Otherwise as [`S3Store::copy_tagged`] (pinned
    /// to `etag` when given), the copy marked with `by` and the source's ETag.
    pub async fn deliver_once(
        &self,
        src_bucket: &str,
        src_key: &str,
        etag: Option<&str>,
        key: &str,
        by: &str,
    ) -> Result<Delivered, FarmError> {
        let src = self.checked_source(src_bucket, src_key, etag, key).await?;
        let value = mark_of(by, &src.info.etag);
        if let Some(there) = self.head_full(key).await? {
            if there.mark.as_deref() == Some(value.as_str()) && there.info.size == src.info.size {
                return Ok(Delivered {
                    size: there.info.size,
                    earlier: true,
                });
            }
        }
        let mark = Mark {
            value,
            content_type: src.content_type,
        };
        let size = self
            .copy_pinned(src_bucket, &src.info, key, Some(&mark))
            .await?;
        Ok(Delivered {
            size,
            earlier: false,
        })
    }

    /// The delivery mark of `key` (None when the object is absent or carries none). Why
    /// public: tests and operators tell which job put an output where it is.
    pub async fn delivery_mark(&self, key: &str) -> Result<Option<String>, FarmError> {
        Ok(self.head_full(key).await?.and_then(|h| h.mark))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_names_the_job_and_the_etag_without_quotes() {
        assert_eq!(mark_of("j1", "\"abc-3\""), "j1 abc-3");
        assert_ne!(mark_of("j1", "abc"), mark_of("j2", "abc"));
        assert_ne!(mark_of("j1", "abc"), mark_of("j1", "abd"));
    }
}
