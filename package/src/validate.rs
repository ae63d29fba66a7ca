//! Checks a written package the way a strict client would, before it is published.
//!
//! Why: a package that plays in one player and stalls in another is worse than a failed
//! job. Every rule here is one a real client (or Apple's mediastreamvalidator, or the DASH
//! conformance checker) enforces; each problem names the file and the rule so an operator
//! can act on it. The checks read the files back (through `read`) instead of trusting the
//! writer's model, so they catch a broken segmenter as well as a broken manifest writer.

mod master;
mod media;
mod mpd;
pub use master::validate_hls;
pub use mpd::validate_mpd;

/// Reads a file by root-relative path.
///
/// Why a function instead of a directory: the checks run the same over files on disk and
/// over files held in memory (the unit tests' packages).
pub type ReadFn<'a> = &'a dyn Fn(&str) -> Option<Vec<u8>>;

#[cfg(test)]
mod fixture;

#[cfg(test)]
mod tests;
