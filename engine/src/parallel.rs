//! Many small store transfers at once (a package's segments and images), each on its own
//! task, a bounded number in flight.
//!
//! Why: a two-hour ladder is thousands of objects; one after another, each waits a round
//! trip to the store, and the package's delivery would take minutes of mostly waiting.

use std::future::Future;

use tessera_farm::FarmError;

/// Transfers in flight at once: enough to hide round trips, few enough to stay polite to a
/// shared store.
pub(crate) const TRANSFERS: usize = 8;

/// Runs `work(item)` for every item, at most `limit` at once. Returns the items that
/// succeeded and the first error; after an error no new item starts, and the running ones
/// are waited for (so the caller knows exactly what was done).
pub(crate) async fn each<T, F, Fut>(
    items: Vec<T>,
    limit: usize,
    work: F,
) -> (Vec<T>, Option<FarmError>)
where
    T: Clone + Send + 'static,
    F: Fn(T) -> Fut,
    Fut: Future<Output = Result<(), FarmError>> + Send + 'static,
{
    let mut pending = items.into_iter();
    let mut running = tokio::task::JoinSet::new();
    let (mut done, mut failed) = (Vec::new(), None);
    loop {
        while failed.is_none() && running.len() < limit.max(1) {
            let Some(item) = pending.next() else { break };
            let job = work(item.clone());
            running.spawn(async move { (item, job.await) });
        }
        match running.join_next().await {
            Some(Ok((item, Ok(())))) => done.push(item),
            Some(Ok((_, Err(e)))) => {
                failed.get_or_insert(e);
            }
            Some(Err(e)) => {
                failed.get_or_insert(FarmError::ChildCrashed {
                    what: "store transfer".into(),
                    detail: e.to_string(),
                });
            }
            None => break,
        }
    }
    (done, failed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[tokio::test]
    async fn bounded_and_stops_after_the_first_error() {
        let (now, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let work = |i: u32| {
            let (now, most) = (now.clone(), most.clone());
            async move {
                let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(n, Ordering::SeqCst);
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                now.fetch_sub(1, Ordering::SeqCst);
                if i == 10 {
                    Err(FarmError::BadMessage("item 10".into()))
                } else {
                    Ok(())
                }
            }
        };
        let (done, err) = each((0..40).collect(), 3, work).await;
        assert!(most.load(Ordering::SeqCst) <= 3);
        assert!(matches!(err, Some(FarmError::BadMessage(_))));
        assert!(!done.contains(&10));
        assert!(
            done.len() < 39,
            "items after the error were not started: {done:?}"
        );
        let (done, err) = each((0..20).collect(), 4, |_| async { Ok(()) }).await;
        assert_eq!((done.len(), err.is_none()), (20, true));
    }
}
