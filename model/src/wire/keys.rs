//! Store keys of a job's work area, in one place so every component agrees.
//!
//! Why a module of its own: the dispatcher, the workers and the tests all name these
//! objects; one place keeps them in agreement.

/// Prefix of everything a job keeps in the work area.
pub fn job_prefix(job: &str) -> String {
    format!("jobs/{job}/")
}
/// Prefix of one plan's objects: a job re-planned after a restart (other settings, another
/// planner) never mixes its segments with an earlier plan's.
pub fn plan_prefix(job: &str, plan: u64) -> String {
    format!("jobs/{job}/{plan:016x}/")
}
/// What a key a task names is for: the folder of its plan's area the object lives in.
///
/// Why: a worker writes and deletes the keys a task names; a task read off the queue may be
/// forged, so each key is checked to lie in the one folder of its own job's plan that its
/// use allows (a still image must not replace the stitched output, nor a chunk another job's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Area {
    /// Chunks of the source, one per segment.
    Chunks,
    /// Encoded segments, per rendition.
    Encoded,
    /// The job's transcoded audio.
    Audio,
    /// Stitched outputs, before delivery.
    Output,
    /// Still images for a streaming package.
    Stills,
    /// The input itself, for a whole-input task (`whole.rs`).
    Source,
}

impl Area {
    /// The folder under the plan's prefix.
    pub fn folder(self) -> &'static str {
        match self {
            Area::Chunks => "chunks",
            Area::Encoded => "encoded",
            Area::Audio => "audio",
            Area::Output => "output",
            Area::Stills => "stills",
            Area::Source => "source",
        }
    }

    /// What a key of the area names, for error messages.
    pub fn what(self) -> &'static str {
        match self {
            Area::Chunks => "chunk",
            Area::Encoded => "encoded segment",
            Area::Audio => "audio",
            Area::Output => "output",
            Area::Stills => "still image",
            Area::Source => "source",
        }
    }

    /// The prefix of the area in `job`'s plan `plan`.
    pub fn prefix(self, job: &str, plan: u64) -> String {
        format!("{}{}/", plan_prefix(job, plan), self.folder())
    }

    /// Whether `key` names an object in this area of `job`'s plan `plan`: below its prefix,
    /// with no empty, `.` or `..` part anywhere (a store or a staging path could fold those).
    pub fn holds(self, key: &str, job: &str, plan: u64) -> bool {
        key.strip_prefix(&self.prefix(job, plan))
            .is_some_and(|rest| !rest.is_empty())
            && key.split('/').all(|part| !matches!(part, "" | "." | ".."))
    }
}

/// The chunk of a segment.
pub fn chunk(job: &str, plan: u64, seg: u32) -> String {
    format!("{}{seg:06}.nut", Area::Chunks.prefix(job, plan))
}
/// An encoded segment of a rendition.
pub fn encoded(job: &str, plan: u64, rendition: &str, seg: u32) -> String {
    format!(
        "{}{rendition}/{seg:06}.nut",
        Area::Encoded.prefix(job, plan)
    )
}
/// The input of a whole-input task, as the dispatcher fetched it (`ext`: the input's own
/// extension, which the worker's demuxer may need; empty for none).
pub fn source(job: &str, plan: u64, ext: &str) -> String {
    let dot = if ext.is_empty() { "" } else { "." };
    format!("{}input{dot}{ext}", Area::Source.prefix(job, plan))
}
/// The job's transcoded audio.
pub fn audio(job: &str, plan: u64) -> String {
    format!("{}audio.nut", Area::Audio.prefix(job, plan))
}
/// The stitched file of one output, before the dispatcher delivers it.
pub fn output(job: &str, plan: u64, output: u32, ext: &str) -> String {
    format!("{}{output:02}.{ext}", Area::Output.prefix(job, plan))
}
/// Where one attempt of a stitch stores output `result_key`: beside it, tagged with the
/// attempt's `tag` (hex) before the extension. Why: the same task delivered twice runs
/// twice; with one key the later copy would replace the object the earlier one checked and
/// reported (review N6, chaos C53). The dispatcher delivers the key of the first result.
pub fn attempt(result_key: &str, tag: &str) -> String {
    match stem_and_extension(result_key) {
        (stem, Some(ext)) => format!("{stem}.{tag}.{ext}"),
        (_, None) => format!("{result_key}.{tag}"),
    }
}
/// `key` split before its extension (the part after the last `.` of its last folder), if any.
fn stem_and_extension(key: &str) -> (&str, Option<&str>) {
    match key.rsplit_once('.') {
        Some((stem, ext)) if !ext.contains('/') => (stem, Some(ext)),
        _ => (key, None),
    }
}
/// Whether `key` is [`attempt`]`(result_key, tag)` for some hex `tag` (or `result_key`
/// itself): the dispatcher copies only such a key, whatever an event names.
pub fn is_attempt_of(key: &str, result_key: &str) -> bool {
    if key == result_key {
        return true;
    }
    let (stem, ext) = stem_and_extension(result_key);
    let Some(rest) = key.strip_prefix(stem).and_then(|r| r.strip_prefix('.')) else {
        return false;
    };
    let tag = match ext {
        Some(ext) => rest.strip_suffix(ext).and_then(|t| t.strip_suffix('.')),
        None => Some(rest),
    };
    tag.is_some_and(|t| !t.is_empty() && t.len() <= 64 && t.bytes().all(|b| b.is_ascii_hexdigit()))
}
/// A file of the job's streaming package (root-relative `rel`), staged for delivery.
pub fn package_file(job: &str, plan: u64, rel: &str) -> String {
    format!("{}package/{rel}", plan_prefix(job, plan))
}
/// A still image a segment worker made for the job's package (package-relative `rel`).
pub fn still(job: &str, plan: u64, rel: &str) -> String {
    format!("{}{rel}", Area::Stills.prefix(job, plan))
}
/// The marker written when a job ends (done, failed, cancelled), outside the work area so
/// the cleanup keeps it: workers skip, or abort, segments of an ended job.
pub fn ended(job: &str) -> String {
    format!("ended/{job}")
}
