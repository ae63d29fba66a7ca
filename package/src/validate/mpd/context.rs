//! What the checks of one MPD share: the DASH namespace, the MPD's place and reader, and
//! the two ways its elements are looked up.
//!
//! Why a module of its own: the Representation checks (`mpd`), the SegmentTemplate checks
//! (`template`), the thumbnail checks (`tiles`) and the timeline expansion (`timeline`) all
//! read the same tree the same way; keeping that here lets each of them depend on it without
//! depending on each other.

use crate::validate::ReadFn;
use roxmltree::Node;

/// The MPD schema namespace every element of a DASH MPD is in.
pub(super) const NS: &str = "urn:mpeg:dash:schema:mpd:2011";

/// One MPD under check: its path, its folder (templates resolve against it), how to read
/// the files it names, and its mediaPresentationDuration (seconds) when valid.
pub(super) struct Ctx<'a> {
    /// The MPD's root-relative path, for messages.
    pub(super) mpd: &'a str,
    /// The MPD's folder, which relative segment URLs resolve against.
    pub(super) dir: &'a str,
    /// Reads a file by root-relative path.
    pub(super) read: ReadFn<'a>,
    /// MPD@mediaPresentationDuration in seconds, when valid.
    pub(super) total: Option<f64>,
}

/// Attribute `name` of a Representation, or else of its AdaptationSet (DASH lets the set
/// carry what all its Representations share).
pub(super) fn attr<'a>(node: Node<'a, '_>, set: Node<'a, '_>, name: &str) -> Option<&'a str> {
    node.attribute(name).or_else(|| set.attribute(name))
}

/// The first child element named `name` (any namespace).
pub(super) fn child<'a, 'i>(node: Node<'a, 'i>, name: &str) -> Option<Node<'a, 'i>> {
    node.children()
        .find(|c| c.is_element() && c.tag_name().name() == name)
}
