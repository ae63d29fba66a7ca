//! The pieces of the document's regular expressions that the file and the package request
//! schemas share (request.rs, package.rs): what no key holds, a key's byte limit, the farm's
//! buckets and a literal.

/// Characters no key may hold: the C0 and C1 controls (Rust's `char::is_control`).
pub(super) const CTRL: &str = r"\x00-\x1f\x7f-\x9f";

/// The most bytes of an object key (S3's limit, `tessera_farm::store::validate_key`).
pub const MAX_KEY_BYTES: usize = 1024;

/// The buckets as one alternation (`(?!)`, which matches nothing, when there are none).
pub(super) fn bucket_alternation(buckets: &[String]) -> String {
    if buckets.is_empty() {
        return "(?!)".into();
    }
    let names: Vec<String> = buckets.iter().map(|b| b.replace('.', r"\.")).collect();
    format!("(?:{})", names.join("|"))
}

/// `s` as a regular expression that matches it alone (an object key may hold any of
/// `.^$|?*+()[]{}` and the backslash).
pub(super) fn literal(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if r"\.^$|?*+()[]{}".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
