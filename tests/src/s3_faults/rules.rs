//! The door's rules and how a request is judged against them: which copies are refused or
//! held, which deletes answer 503, which reads are cut, whether a partition holds a
//! direction, and the trouble a request meets. Why a module: the door's serving (bytes in,
//! bytes out) reads apart from its judgement.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::amqp_door::Direction;

/// Which server-side copies (`CopyObject`, `UploadPartCopy`: the requests that deliver) to
/// refuse: those whose path starts with `path_prefix` (`/bucket/key-prefix`), once `pass` of
/// them went through.
#[derive(Debug, Clone, Default)]
pub(super) struct Rule {
    pub(super) path_prefix: String,
    pub(super) pass: usize,
    pub(super) seen: usize,
}

/// Which copies to hold unanswered: those whose path starts with `path_prefix`, once `pass`
/// of them went through.
#[derive(Debug, Clone)]
pub(super) struct Stall {
    pub(super) path_prefix: String,
    pub(super) pass: usize,
    pub(super) seen: usize,
}

/// Which deletes to answer 503 SlowDown: those whose path starts with `path_prefix`, for
/// `lasting` from the first of them (`since`).
#[derive(Debug, Clone)]
pub(super) struct Outage {
    pub(super) path_prefix: String,
    pub(super) lasting: Duration,
    pub(super) since: Option<Instant>,
}

/// Every rule of the door and what it met, behind one lock.
#[derive(Debug, Default)]
pub(super) struct State {
    pub(super) rule: Option<Rule>,
    pub(super) refused: Vec<String>,
    pub(super) outage: Option<Outage>,
    pub(super) unavailable: Vec<String>,
    /// Copies held (see `S3Faults::stall_copies_after`).
    pub(super) stall: Option<Stall>,
    pub(super) stalled: Vec<String>,
    /// Trouble answered to every other request until the instant (see `S3Faults::trouble`).
    pub(super) trouble: Option<(Trouble, Instant)>,
    /// Requests seen while in trouble; the odd ones are answered with it.
    pub(super) troubled: usize,
    /// A partition between the client and the store (see `S3Faults::cut`).
    pub(super) cut: Option<Direction>,
    /// Reads whose path holds this text are passed on this late (see `S3Faults::slow_reads`).
    pub(super) slow_reads: Option<(String, Duration)>,
    /// The next read whose path holds this text is cut after so many bytes of its response.
    pub(super) cut_read: Option<(String, usize)>,
    /// HEADs whose path holds this text wait until the rule goes, then pass on.
    pub(super) hold_heads: Option<String>,
    /// The paths of the HEADs held.
    pub(super) heads_held: Vec<String>,
    /// Copies whose path starts with this land, their answers held (see
    /// `S3Faults::mute_copies`).
    pub(super) mute: Option<String>,
    /// The paths of every copy passed on to the store.
    pub(super) copies: Vec<String>,
}

/// What a store in trouble does (the chaos run's store faults, review N10).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trouble {
    /// Every other request answered `503 SlowDown`.
    SlowDown,
    /// Every other request answered `429 Too Many Requests` (`TooManyRequests`).
    TooMany,
    /// Every request passed on after this delay.
    Latency(Duration),
}

/// The byte count after which the GET of `path` is cut, taking the one-shot rule.
pub(super) fn cut_read(state: &Mutex<State>, path: &str) -> Option<usize> {
    let mut state = state.lock().expect("door state");
    let (part, _) = state.cut_read.as_ref()?;
    if !path.contains(part.as_str()) {
        return None;
    }
    state.cut_read.take().map(|(_, bytes)| bytes)
}

/// Whether a partition holds the bytes going `way` (`Up` or `Down`).
pub(super) fn held(state: &Mutex<State>, way: Direction) -> bool {
    let cut = state.lock().expect("door state").cut;
    cut.is_some_and(|c| c == way || c == Direction::Both)
}

/// The trouble this request meets, if any (and counts it).
pub(super) fn troubled(state: &Mutex<State>) -> Option<Trouble> {
    let mut state = state.lock().expect("door state");
    let (trouble, until) = state.trouble?;
    if Instant::now() >= until {
        state.trouble = None;
        return None;
    }
    let first = state.troubled.is_multiple_of(2);
    state.troubled += 1;
    match trouble {
        Trouble::Latency(_) => Some(trouble),
        _ if first => Some(trouble),
        _ => None,
    }
}

/// Holds the copy to `path` while a stall covers it; whether it was held (and is to be
/// answered 503 now that the stall is over).
pub(super) fn stalled(state: &Mutex<State>, path: &str) -> bool {
    let mut held = false;
    loop {
        {
            let mut state = state.lock().expect("door state");
            let Some(stall) = state
                .stall
                .as_mut()
                .filter(|s| path.starts_with(&s.path_prefix))
            else {
                return held;
            };
            if !held {
                stall.seen += 1;
                if stall.seen <= stall.pass {
                    return false;
                }
                state.stalled.push(path.to_string());
                held = true;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Whether the delete of `path` falls in the current outage (and records it if so).
pub(super) fn unavailable(state: &Mutex<State>, path: &str) -> bool {
    let mut state = state.lock().expect("door state");
    let Some(outage) = state
        .outage
        .as_mut()
        .filter(|o| path.starts_with(&o.path_prefix))
    else {
        return false;
    };
    let since = *outage.since.get_or_insert_with(Instant::now);
    let down = since.elapsed() < outage.lasting;
    if down {
        state.unavailable.push(path.to_string());
    }
    down
}

/// Whether the copy to `path` is refused under the current rule (and records it if so).
pub(super) fn refuse(state: &Mutex<State>, path: &str) -> bool {
    let mut state = state.lock().expect("door state");
    let State { rule, refused, .. } = &mut *state;
    let Some(rule) = rule.as_mut().filter(|r| path.starts_with(&r.path_prefix)) else {
        return false;
    };
    rule.seen += 1;
    if rule.seen <= rule.pass {
        return false;
    }
    refused.push(path.to_string());
    true
}

/// Holds the HEAD of `path` while the head rule covers it (recording it once), then lets it
/// pass on.
pub(super) fn head_held(state: &Mutex<State>, path: &str) {
    let mut recorded = false;
    loop {
        {
            let mut state = state.lock().expect("door state");
            let covered = state
                .hold_heads
                .as_ref()
                .is_some_and(|part| path.contains(part.as_str()));
            if !covered {
                return;
            }
            if !recorded {
                state.heads_held.push(path.to_string());
                recorded = true;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Records the copy of `path` passed on to the store; whether its answer is to be held.
pub(super) fn passed_copy(state: &Mutex<State>, path: &str) -> bool {
    let mut state = state.lock().expect("door state");
    state.copies.push(path.to_string());
    state
        .mute
        .as_ref()
        .is_some_and(|p| path.starts_with(p.as_str()))
}

/// Whether copies are still muted.
pub(super) fn muting(state: &Mutex<State>) -> bool {
    state.lock().expect("door state").mute.is_some()
}
