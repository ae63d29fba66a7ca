//! Reading a playlist back: tags, attribute lists, segments and variant streams.
//!
//! Why a parser in a writer crate: the validator must see the text the way a client does
//! (quoted strings with commas, EXTINF + URI pairs, byte ranges), not trust the writer.

/// One attribute of an attribute list, with its quoting kept for the RFC 8216 type rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attribute {
    /// The attribute name ("BANDWIDTH").
    pub name: String,
    /// The value without surrounding quotes.
    pub value: String,
    /// Whether the value was a quoted-string.
    pub quoted: bool,
}

/// One tag line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tag {
    /// 1-based line number, for messages.
    pub line: usize,
    /// The tag name without '#' ("EXT-X-TARGETDURATION").
    pub name: String,
    /// Everything after the first ':' ("" when none).
    pub value: String,
    /// The parsed attribute list, for tags that carry one.
    pub attributes: Vec<Attribute>,
}

impl Tag {
    /// The value of attribute `name`, unquoted.
    pub fn attr(&self, name: &str) -> Option<&str> {
        self.attribute(name).map(|a| a.value.as_str())
    }

    /// The attribute `name` with its quoting.
    pub fn attribute(&self, name: &str) -> Option<&Attribute> {
        self.attributes.iter().find(|a| a.name == name)
    }
}

/// A media segment line with what applies to it.
#[derive(Debug, Clone, PartialEq)]
pub struct PlaylistSegment {
    /// 1-based line number of the URI.
    pub line: usize,
    /// The EXTINF duration in seconds.
    pub duration: f64,
    /// EXT-X-BYTERANGE (length, offset) when given.
    pub byterange: Option<(u64, Option<u64>)>,
    /// The URI as written (relative to the playlist).
    pub uri: String,
    /// The EXT-X-MAP URI in force for this segment.
    pub map: Option<String>,
}

/// An EXT-X-STREAM-INF tag with its URI line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variant {
    /// The EXT-X-STREAM-INF tag.
    pub tag: Tag,
    /// The URI line after it.
    pub uri: String,
}

/// A parsed playlist (master or media).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Playlist {
    /// Every tag except EXTINF and EXT-X-BYTERANGE, in order.
    pub tags: Vec<Tag>,
    /// Media segments in order.
    pub segments: Vec<PlaylistSegment>,
    /// Variant streams (master playlists).
    pub variants: Vec<Variant>,
}

impl Playlist {
    /// The first tag called `name`.
    pub fn tag(&self, name: &str) -> Option<&Tag> {
        self.tags.iter().find(|t| t.name == name)
    }

    /// Every tag called `name`.
    pub fn tags_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Tag> + 'a {
        self.tags.iter().filter(move |t| t.name == name)
    }
}

const ATTRIBUTE_TAGS: [&str; 9] = [
    "EXT-X-MEDIA",
    "EXT-X-STREAM-INF",
    "EXT-X-I-FRAME-STREAM-INF",
    "EXT-X-MAP",
    "EXT-X-KEY",
    "EXT-X-SESSION-KEY",
    "EXT-X-SESSION-DATA",
    "EXT-X-START",
    "EXT-X-DATERANGE",
];

/// Parses an attribute list: NAME=value pairs separated by commas, values either
/// quoted-strings (which may hold commas) or unquoted up to the next comma.
fn attributes(text: &str) -> Result<Vec<Attribute>, String> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let eq = rest
            .find('=')
            .ok_or_else(|| format!("attribute without '=' in {rest:?}"))?;
        let name = &rest[..eq];
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '-')
        {
            return Err(format!("bad attribute name {name:?}"));
        }
        rest = &rest[eq + 1..];
        let (value, quoted) = if let Some(q) = rest.strip_prefix('"') {
            let end = q
                .find('"')
                .ok_or_else(|| format!("unterminated quoted string for {name}"))?;
            rest = &q[end + 1..];
            (q[..end].to_string(), true)
        } else {
            let end = rest.find(',').unwrap_or(rest.len());
            let v = rest[..end].to_string();
            rest = &rest[end..];
            (v, false)
        };
        out.push(Attribute {
            name: name.to_string(),
            value,
            quoted,
        });
        if let Some(r) = rest.strip_prefix(',') {
            rest = r;
        } else if !rest.is_empty() {
            return Err(format!("expected ',' after attribute {name}"));
        }
    }
    Ok(out)
}

fn byterange(value: &str) -> Result<(u64, Option<u64>), String> {
    let bad = || format!("bad EXT-X-BYTERANGE {value:?}");
    match value.split_once('@') {
        Some((n, o)) => Ok((
            n.parse().map_err(|_| bad())?,
            Some(o.parse().map_err(|_| bad())?),
        )),
        None => Ok((value.parse().map_err(|_| bad())?, None)),
    }
}

/// Parses a playlist; errors name the line.
pub fn parse_playlist(text: &str) -> Result<Playlist, String> {
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim_end_matches('\r')));
    match lines.next() {
        Some((_, "#EXTM3U")) => {}
        _ => return Err("line 1: the first line is not #EXTM3U".into()),
    }
    let mut out = Playlist::default();
    let mut extinf: Option<f64> = None;
    let mut range: Option<(u64, Option<u64>)> = None;
    let mut stream_inf: Option<Tag> = None;
    let mut map: Option<String> = None;
    for (line, text) in lines {
        let text = text.trim();
        if text.is_empty() || (text.starts_with('#') && !text.starts_with("#EXT")) {
            continue;
        }
        let err = |e: String| format!("line {line}: {e}");
        if let Some(tag) = text.strip_prefix('#') {
            let (name, value) = tag.split_once(':').unwrap_or((tag, ""));
            let attributes = if ATTRIBUTE_TAGS.contains(&name) {
                attributes(value).map_err(err)?
            } else {
                Vec::new()
            };
            let tag = Tag {
                line,
                name: name.into(),
                value: value.into(),
                attributes,
            };
            match name {
                "EXTINF" => {
                    let secs = value.split(',').next().unwrap_or("");
                    let secs: f64 = secs
                        .parse()
                        .map_err(|_| err(format!("bad EXTINF duration {secs:?}")))?;
                    if !secs.is_finite() || secs < 0.0 {
                        return Err(err(format!("bad EXTINF duration {secs}")));
                    }
                    extinf = Some(secs);
                }
                "EXT-X-BYTERANGE" => range = Some(byterange(value).map_err(err)?),
                "EXT-X-STREAM-INF" => stream_inf = Some(tag),
                _ => {
                    if name == "EXT-X-MAP" {
                        map = tag.attr("URI").map(str::to_string);
                    }
                    out.tags.push(tag);
                }
            }
            continue;
        }
        if let Some(tag) = stream_inf.take() {
            out.variants.push(Variant {
                tag,
                uri: text.into(),
            });
        } else if let Some(duration) = extinf.take() {
            let byterange = range.take();
            out.segments.push(PlaylistSegment {
                line,
                duration,
                byterange,
                uri: text.into(),
                map: map.clone(),
            });
        } else {
            return Err(err(format!(
                "URI {text:?} without EXTINF or EXT-X-STREAM-INF"
            )));
        }
    }
    if extinf.is_some() || stream_inf.is_some() {
        return Err("the last EXTINF / EXT-X-STREAM-INF has no URI".into());
    }
    Ok(out)
}
