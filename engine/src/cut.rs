//! Whether a run's workers cut their own chunks from the job's source (model's wire/cut.rs),
//! and the publish stage of such a run: the source stored once, every segment published.
//!
//! Why: the dispatcher's split (a remux child reading the whole input) and one PUT per chunk
//! were its serial work per segment. A cut run hands both to the workers: the dispatcher
//! stores the input it fetched once and publishes; each worker fetches the source once per
//! job and cuts its segment's chunk with the same split on the same plan.
//!
//! The rule ([`cuts_on_workers`]): only CPU runs (GPU workers take chunks; a card's slot is
//! better spent encoding), only inputs whose pts the container stores (the probe's derived
//! pts would ride in every task), only while a worker consumes the cut queue (a worker of an
//! earlier release reads no cut task); a resumed run keeps the way its plan was published,
//! told apart by the plan's fingerprint ([`CUT_SALT`]).

use tessera_farm::FarmError;
use tessera_model::wire::keys;

use crate::patience::patiently;
use crate::publish::{spawn_publisher, Publisher};
use crate::request::{DispatchContext, JobPlan, JobRequest};

/// Sets a cut run's fingerprint (and so its work-area keys and events) apart from a split
/// run of the same plan: a resumed run knows which way its tasks were published, and tasks
/// of the other way can never be taken for its own.
pub(crate) const CUT_SALT: u64 = 0x5bd1_e995_c3a5_c85d;

/// How an earlier run of the job published its segments, by the fingerprint it recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resumed {
    /// Cut tasks (the cut fingerprint).
    Cut,
    /// Chunks and plain tasks (the split fingerprint).
    Split,
    /// No earlier run of this plan.
    Fresh,
}

/// What decides whether a run's workers cut their chunks.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CutCase {
    /// The dispatcher sends cut tasks at all (`cut_on_workers`).
    pub enabled: bool,
    /// The run's segments go to the CPU queue.
    pub on_cpu_queue: bool,
    /// The probe derived the pts (the container stores none).
    pub derived_pts: bool,
    /// Workers consuming the cut queue now.
    pub consumers: u32,
    /// How an earlier run published.
    pub resumed: Resumed,
}

/// The rule (module doc): a fresh run cuts on workers when it may and one consumes the cut
/// queue; a resumed run keeps its way (a cut run's tasks may be on the queue while its
/// workers reconnect, so consumers are not asked), unless cutting is no longer allowed.
pub(crate) fn cuts_on_workers(c: &CutCase) -> bool {
    let allowed = c.enabled && c.on_cpu_queue && !c.derived_pts;
    match c.resumed {
        Resumed::Cut => allowed,
        Resumed::Split => false,
        Resumed::Fresh => allowed && c.consumers > 0,
    }
}

/// Decides for a run whose split plan has `split_fingerprint`, with cut tasks going to
/// `queue`; returns whether it cuts on workers.
async fn decide(
    ctx: &DispatchContext,
    queue: &str,
    req: &JobRequest,
    (on_cpu_queue, derived_pts): (bool, bool),
    split_fingerprint: u64,
) -> bool {
    let resumed = match req.resume.as_ref().map(|r| r.plan_fingerprint) {
        Some(fp) if fp == split_fingerprint ^ CUT_SALT => Resumed::Cut,
        Some(fp) if fp == split_fingerprint => Resumed::Split,
        _ => Resumed::Fresh,
    };
    let case = CutCase {
        enabled: true,
        on_cpu_queue,
        derived_pts,
        consumers: if resumed == Resumed::Fresh && on_cpu_queue && !derived_pts {
            ctx.queue.consumers(queue).await.unwrap_or(0)
        } else {
            0
        },
        resumed,
    };
    cuts_on_workers(&case)
}

/// The fingerprint the whole-input rule takes for a resumed split run's: a resumed cut run's
/// when the job has one (it stays split, whatever the fleet's business now).
pub(crate) fn split_seen(req: &JobRequest, split_fingerprint: u64) -> u64 {
    match req.resume.as_ref().map(|r| r.plan_fingerprint) {
        Some(fp) if fp == split_fingerprint ^ CUT_SALT => fp,
        _ => split_fingerprint,
    }
}

/// Routes a split run of `fingerprint` bound for `queue`: whether its workers cut, and its
/// fingerprint and queue then (the cut queue and the salted fingerprint when they do).
pub(crate) async fn route(
    ctx: &DispatchContext,
    req: &JobRequest,
    able: (bool, bool),
    fingerprint: u64,
    queue: String,
) -> (bool, u64, String) {
    match &ctx.cut_queue {
        Some(cut_queue) if decide(ctx, cut_queue, req, able, fingerprint).await => {
            (true, fingerprint ^ CUT_SALT, cut_queue.clone())
        }
        _ => (false, fingerprint, queue),
    }
}

/// The publish stage of a cut run: stores the input in the work area under the plan's
/// source key, then hands every segment's task to the publisher at once (no split waits).
pub(crate) async fn store_and_publish(
    ctx: &DispatchContext,
    plan: &JobPlan,
) -> Result<Publisher, FarmError> {
    let source_key = keys::source(&plan.req.id, plan.fingerprint, "");
    patiently("store the source for cutting", || {
        ctx.store.put_file(&source_key, &plan.req.input)
    })
    .await?;
    tracing::info!(job = %plan.req.id, key = %source_key, segments = plan.segments.len(),
        "source stored for the workers to cut");
    let (ready_tx, ready_rx) = tokio::sync::mpsc::unbounded_channel();
    for segment in &plan.segments {
        let _ = ready_tx.send(crate::publish::segment_task(plan, segment));
    }
    drop(ready_tx);
    Ok(spawn_publisher(ctx, plan, ready_rx))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case() -> CutCase {
        CutCase {
            enabled: true,
            on_cpu_queue: true,
            derived_pts: false,
            consumers: 2,
            resumed: Resumed::Fresh,
        }
    }

    #[test]
    fn a_fresh_cpu_run_cuts_only_while_a_worker_consumes_the_cut_queue() {
        assert!(cuts_on_workers(&case()));
        assert!(!cuts_on_workers(&CutCase {
            consumers: 0,
            ..case()
        }));
    }

    #[test]
    fn gpu_runs_derived_pts_and_a_disabled_dispatcher_never_cut() {
        for c in [
            CutCase {
                on_cpu_queue: false,
                ..case()
            },
            CutCase {
                derived_pts: true,
                ..case()
            },
            CutCase {
                enabled: false,
                ..case()
            },
        ] {
            for resumed in [Resumed::Fresh, Resumed::Cut, Resumed::Split] {
                assert!(!cuts_on_workers(&CutCase { resumed, ..c }), "{c:?}");
            }
        }
    }

    #[test]
    fn a_resumed_run_keeps_its_way_whatever_the_consumers_now() {
        for consumers in [0, 3] {
            let cut = CutCase {
                resumed: Resumed::Cut,
                consumers,
                ..case()
            };
            assert!(cuts_on_workers(&cut));
            let split = CutCase {
                resumed: Resumed::Split,
                consumers,
                ..case()
            };
            assert!(!cuts_on_workers(&split));
        }
    }
}
