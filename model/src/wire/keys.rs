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
/// The chunk of a segment.
pub fn chunk(job: &str, plan: u64, seg: u32) -> String {
    format!("{}chunks/{seg:06}.nut", plan_prefix(job, plan))
}
/// An encoded segment of a rendition.
pub fn encoded(job: &str, plan: u64, rendition: &str, seg: u32) -> String {
    format!("{}encoded/{rendition}/{seg:06}.nut", plan_prefix(job, plan))
}
/// The job's transcoded audio.
pub fn audio(job: &str, plan: u64) -> String {
    format!("{}audio/audio.nut", plan_prefix(job, plan))
}
/// The stitched file of one output, before the dispatcher delivers it.
pub fn output(job: &str, plan: u64, output: u32, ext: &str) -> String {
    format!("{}output/{output:02}.{ext}", plan_prefix(job, plan))
}
/// A file of the job's streaming package (root-relative `rel`), staged for delivery.
pub fn package_file(job: &str, plan: u64, rel: &str) -> String {
    format!("{}package/{rel}", plan_prefix(job, plan))
}
/// A still image a segment worker made for the job's package (package-relative `rel`).
pub fn still(job: &str, plan: u64, rel: &str) -> String {
    format!("{}stills/{rel}", plan_prefix(job, plan))
}
/// The marker written when a job ends (done, failed, cancelled), outside the work area so
/// the cleanup keeps it: workers skip, or abort, segments of an ended job.
pub fn ended(job: &str) -> String {
    format!("ended/{job}")
}
