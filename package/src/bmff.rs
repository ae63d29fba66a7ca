//! Minimal ISO BMFF (fragmented MP4) reading: the facts a manifest and its validator need.
//!
//! Why our own reader instead of a demuxer: the writers and the validator need a handful of
//! numbers (timescale, codec string, dimensions, tfdt, durations, the first sample's byte
//! range) from files that are already on disk; a few hundred lines of bounds-checked slicing
//! keep the crate pure and let every rule be tested on hand-made boxes. Nothing here panics
//! on arbitrary bytes: every read is checked and reported as a [`BmffError`].
//!
//! The box walking and bounds-checked reads live here; `init` reads an initialisation
//! segment, `fragment` a media segment, and `codec` the codec strings of sample entries.

use thiserror::Error;

/// Why a file could not be read as the ISO BMFF structure expected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BmffError {
    /// Fewer bytes remain than a box header needs.
    #[error("truncated box header at offset {offset}")]
    TruncatedHeader {
        /// Offset of the header in the slice being iterated.
        offset: usize,
    },
    /// A box declares a size smaller than its header or larger than what remains.
    #[error(
        "box '{fourcc}' at offset {offset} declares {size} bytes but {available} are available"
    )]
    BadSize {
        /// The box type.
        fourcc: String,
        /// Offset of the box in the slice being iterated.
        offset: usize,
        /// Declared size.
        size: u64,
        /// Bytes from the box start to the end of its parent.
        available: usize,
    },
    /// A box the reading needs is absent.
    #[error("no '{0}' box")]
    Missing(&'static str),
    /// A box's payload is shorter than its fields.
    #[error("'{0}' box is truncated")]
    Truncated(&'static str),
    /// The structure is readable but says something this reader cannot use.
    #[error("{0}")]
    Invalid(String),
}

/// One box: its type, where it starts and its payload (after the header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BmffBox<'a> {
    /// The four-character type.
    pub fourcc: [u8; 4],
    /// Offset of the box's first byte, counted from the start of the outermost slice.
    pub offset: usize,
    /// Header length (8, 16 with a largesize, plus 16 for 'uuid').
    pub header_len: usize,
    /// The bytes after the header.
    pub payload: &'a [u8],
}

impl<'a> BmffBox<'a> {
    /// The type as text, for messages and comparisons.
    pub fn kind(&self) -> String {
        String::from_utf8_lossy(&self.fourcc).into_owned()
    }

    /// Total size in bytes, header included.
    pub fn size(&self) -> usize {
        self.header_len + self.payload.len()
    }

    /// The children of a container box (moov, trak, moof, ...).
    pub fn children(&self) -> Boxes<'a> {
        Boxes::at(self.payload, self.offset + self.header_len)
    }
}

/// Iterator over consecutive boxes in a byte slice; stops after the first error.
///
/// Why an iterator of `Result`: callers decide whether a broken tail matters (the validator
/// reports it, a search for one box can stop before it).
#[derive(Debug, Clone)]
pub struct Boxes<'a> {
    data: &'a [u8],
    pos: usize,
    base: usize,
    failed: bool,
}

impl<'a> Boxes<'a> {
    /// Boxes of a whole file (offsets counted from its first byte).
    pub fn new(data: &'a [u8]) -> Self {
        Self::at(data, 0)
    }

    /// Boxes of a slice that starts `base` bytes into the file (for absolute offsets).
    pub fn at(data: &'a [u8], base: usize) -> Self {
        Boxes {
            data,
            pos: 0,
            base,
            failed: false,
        }
    }
}

impl<'a> Iterator for Boxes<'a> {
    type Item = Result<BmffBox<'a>, BmffError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.data.len() {
            return None;
        }
        let result = read_box(self.data, self.pos, self.base);
        match &result {
            Ok(b) => self.pos += b.size(),
            Err(_) => self.failed = true,
        }
        Some(result)
    }
}

fn read_box(data: &[u8], pos: usize, base: usize) -> Result<BmffBox<'_>, BmffError> {
    let rest = &data[pos..];
    let offset = base + pos;
    if rest.len() < 8 {
        return Err(BmffError::TruncatedHeader { offset });
    }
    let size32 = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]);
    let fourcc = [rest[4], rest[5], rest[6], rest[7]];
    let (mut header_len, size) = match size32 {
        0 => (8usize, rest.len() as u64),
        1 => {
            let large = rest
                .get(8..16)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_be_bytes)
                .ok_or(BmffError::TruncatedHeader { offset })?;
            (16, large)
        }
        n => (8, u64::from(n)),
    };
    if &fourcc == b"uuid" {
        header_len += 16;
    }
    let bad = || BmffError::BadSize {
        fourcc: String::from_utf8_lossy(&fourcc).into_owned(),
        offset,
        size,
        available: rest.len(),
    };
    if size < header_len as u64 || size > rest.len() as u64 {
        return Err(bad());
    }
    let size = usize::try_from(size).map_err(|_| bad())?;
    Ok(BmffBox {
        fourcc,
        offset,
        header_len,
        payload: &rest[header_len..size],
    })
}

/// The first child of type `fourcc` among `boxes`, or `None`; errors before it are returned.
pub fn find<'a>(boxes: Boxes<'a>, fourcc: &[u8; 4]) -> Result<Option<BmffBox<'a>>, BmffError> {
    for b in boxes {
        let b = b?;
        if &b.fourcc == fourcc {
            return Ok(Some(b));
        }
    }
    Ok(None)
}

/// Follows a path of box types from `data`'s top level, each the first of its type.
fn find_path<'a>(
    mut boxes: Boxes<'a>,
    path: &[&'static [u8; 4]],
) -> Result<BmffBox<'a>, BmffError> {
    let mut found = None;
    for fourcc in path {
        let b = find(boxes, fourcc)?.ok_or(BmffError::Missing(fourcc_str(fourcc)))?;
        boxes = b.children();
        found = Some(b);
    }
    found.ok_or(BmffError::Missing("box"))
}

fn fourcc_str(f: &'static [u8; 4]) -> &'static str {
    std::str::from_utf8(f).unwrap_or("????")
}

/// Big-endian reads that name the box when its payload is too short.
pub(crate) struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(data: &'a [u8], what: &'static str) -> Self {
        Reader { data, pos: 0, what }
    }

    pub(crate) fn bytes(&mut self, n: usize) -> Result<&'a [u8], BmffError> {
        let end = self
            .pos
            .checked_add(n)
            .ok_or(BmffError::Truncated(self.what))?;
        let out = self
            .data
            .get(self.pos..end)
            .ok_or(BmffError::Truncated(self.what))?;
        self.pos = end;
        Ok(out)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, BmffError> {
        Ok(self.bytes(1)?[0])
    }

    pub(crate) fn u16(&mut self) -> Result<u16, BmffError> {
        let b = self.bytes(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    pub(crate) fn u32(&mut self) -> Result<u32, BmffError> {
        let b = self.bytes(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn u64(&mut self) -> Result<u64, BmffError> {
        let hi = self.u32()?;
        let lo = self.u32()?;
        Ok((u64::from(hi) << 32) | u64::from(lo))
    }

    /// A FullBox header: (version, flags).
    pub(crate) fn full(&mut self) -> Result<(u8, u32), BmffError> {
        let v = self.u32()?;
        Ok(((v >> 24) as u8, v & 0x00ff_ffff))
    }

    pub(crate) fn remaining(&self) -> usize {
        self.data.len().saturating_sub(self.pos)
    }
}

mod codec;
pub use codec::codec_string;
#[cfg(test)]
pub(crate) use codec::esds_config;

mod fragment;
pub use fragment::{segment_info, SegmentInfo};

mod init;
pub use init::{init_info, InitInfo};

#[cfg(test)]
pub(crate) mod test_boxes;

#[cfg(test)]
mod tests;
