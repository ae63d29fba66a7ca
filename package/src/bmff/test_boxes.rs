//! Hand-made ISO BMFF boxes for the tests of this crate (bmff, validate).
//!
//! Why builders instead of sample files: every byte of a fixture is visible next to the
//! assertion it serves, and a test can break exactly one field.

/// A box: 32-bit size, type, payload.
pub(crate) fn bx(fourcc: &[u8; 4], payload: &[u8]) -> Vec<u8> {
    let mut out = ((payload.len() + 8) as u32).to_be_bytes().to_vec();
    out.extend_from_slice(fourcc);
    out.extend_from_slice(payload);
    out
}

/// A FullBox: version, 24-bit flags, then the payload.
pub(crate) fn full(fourcc: &[u8; 4], version: u8, flags: u32, payload: &[u8]) -> Vec<u8> {
    let mut p = ((u32::from(version) << 24) | flags).to_be_bytes().to_vec();
    p.extend_from_slice(payload);
    bx(fourcc, &p)
}

/// An avcC box (configurationVersion 1, no parameter sets).
pub(crate) fn avcc(profile: u8, compat: u8, level: u8) -> Vec<u8> {
    bx(b"avcC", &[1, profile, compat, level, 0xff, 0xe0, 0x00])
}

/// An hvcC box: byte 1 = space(2) tier(1) profile(5), compat flags, 6 constraint bytes, level.
pub(crate) fn hvcc(
    space: u8,
    tier: u8,
    profile: u8,
    compat: u32,
    constraints: [u8; 6],
    level: u8,
) -> Vec<u8> {
    let mut p = vec![1, (space << 6) | (tier << 5) | profile];
    p.extend_from_slice(&compat.to_be_bytes());
    p.extend_from_slice(&constraints);
    p.push(level);
    p.extend_from_slice(&[0xf0, 0x00, 0xfc, 0xfd, 0xf8, 0xf8, 0x00, 0x00, 0x0f, 0x00]);
    bx(b"hvcC", &p)
}

/// An av1C box.
pub(crate) fn av1c(
    profile: u8,
    level: u8,
    tier: u8,
    high_bitdepth: bool,
    twelve_bit: bool,
) -> Vec<u8> {
    let b2 = (tier << 7) | (u8::from(high_bitdepth) << 6) | (u8::from(twelve_bit) << 5) | 0x0c;
    bx(b"av1C", &[0x81, (profile << 5) | level, b2, 0x00])
}

/// An MPEG-4 descriptor with a 4-byte (continuation-encoded) size, as FFmpeg writes it.
fn descriptor(tag: u8, body: &[u8]) -> Vec<u8> {
    let n = body.len() as u32;
    let mut out = vec![
        tag,
        0x80 | ((n >> 21) & 0x7f) as u8,
        0x80 | ((n >> 14) & 0x7f) as u8,
    ];
    out.extend_from_slice(&[0x80 | ((n >> 7) & 0x7f) as u8, (n & 0x7f) as u8]);
    out.extend_from_slice(body);
    out
}

/// An esds box carrying `asc` as the DecoderSpecificInfo of an AAC (0x40) stream.
pub(crate) fn esds(asc: &[u8]) -> Vec<u8> {
    let mut dcd = vec![
        0x40, 0x15, 0, 0, 0, 0, 0x01, 0xf4, 0x00, 0, 0x01, 0xf4, 0x00,
    ];
    dcd.extend(descriptor(0x05, asc));
    let mut es = vec![0x00, 0x01, 0x00];
    es.extend(descriptor(0x04, &dcd));
    es.extend(descriptor(0x06, &[0x02]));
    full(b"esds", 0, 0, &descriptor(0x03, &es))
}

/// A VisualSampleEntry of `fourcc` with its configuration box.
pub(crate) fn visual_entry(fourcc: &[u8; 4], width: u16, height: u16, config: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; 6];
    p.extend_from_slice(&1u16.to_be_bytes());
    p.extend_from_slice(&[0u8; 16]);
    p.extend_from_slice(&width.to_be_bytes());
    p.extend_from_slice(&height.to_be_bytes());
    p.extend_from_slice(&0x0048_0000u32.to_be_bytes());
    p.extend_from_slice(&0x0048_0000u32.to_be_bytes());
    p.extend_from_slice(&[0u8; 4]);
    p.extend_from_slice(&1u16.to_be_bytes());
    p.extend_from_slice(&[0u8; 32]);
    p.extend_from_slice(&0x0018u16.to_be_bytes());
    p.extend_from_slice(&0xffffu16.to_be_bytes());
    assert_eq!(p.len(), 78);
    p.extend_from_slice(config);
    bx(fourcc, &p)
}

/// An AudioSampleEntry "mp4a" with an esds.
pub(crate) fn audio_entry(channels: u16, rate: u32, esds: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; 6];
    p.extend_from_slice(&1u16.to_be_bytes());
    p.extend_from_slice(&[0u8; 8]);
    p.extend_from_slice(&channels.to_be_bytes());
    p.extend_from_slice(&16u16.to_be_bytes());
    p.extend_from_slice(&[0u8; 4]);
    p.extend_from_slice(&(rate << 16).to_be_bytes());
    p.extend_from_slice(esds);
    bx(b"mp4a", &p)
}

/// An initialisation segment with one track: mdhd (version `mdhd_version`), hdlr, stsd.
pub(crate) fn init_segment(
    handler: &[u8; 4],
    timescale: u32,
    mdhd_version: u8,
    entry: &[u8],
) -> Vec<u8> {
    let mut mdhd = Vec::new();
    if mdhd_version == 1 {
        mdhd.extend_from_slice(&[0u8; 16]);
        mdhd.extend_from_slice(&timescale.to_be_bytes());
        mdhd.extend_from_slice(&[0u8; 8]);
    } else {
        mdhd.extend_from_slice(&[0u8; 8]);
        mdhd.extend_from_slice(&timescale.to_be_bytes());
        mdhd.extend_from_slice(&[0u8; 4]);
    }
    mdhd.extend_from_slice(&[0x55, 0xc4, 0, 0]);
    let mut hdlr = vec![0u8; 4];
    hdlr.extend_from_slice(handler);
    hdlr.extend_from_slice(&[0u8; 12]);
    hdlr.extend_from_slice(b"handler\0");
    let mut stsd = 1u32.to_be_bytes().to_vec();
    stsd.extend_from_slice(entry);
    let stbl = bx(b"stbl", &full(b"stsd", 0, 0, &stsd));
    let minf = bx(b"minf", &stbl);
    let mut mdia = full(b"mdhd", mdhd_version, 0, &mdhd);
    mdia.extend(full(b"hdlr", 0, 0, &hdlr));
    mdia.extend(minf);
    let mut trak = full(b"tkhd", 0, 3, &[0u8; 80]);
    trak.extend(bx(b"mdia", &mdia));
    let mut moov = full(b"mvhd", 0, 0, &[0u8; 96]);
    moov.extend(bx(b"trak", &trak));
    let mut out = bx(b"ftyp", b"iso6\0\0\0\0iso6mp41");
    out.extend(bx(b"moov", &moov));
    out
}

/// One sample of a hand-made fragment.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sample {
    pub duration: u32,
    pub size: u32,
    pub cto: i32,
}

/// `n` samples of `duration` ticks and `size` bytes without composition offsets.
pub(crate) fn samples(n: usize, duration: u32, size: u32) -> Vec<Sample> {
    vec![
        Sample {
            duration,
            size,
            cto: 0
        };
        n
    ]
}

/// A moof (default-base-is-moof, tfdt v1, trun v1 with duration/size/cto and data_offset)
/// followed by its mdat.
pub(crate) fn fragment(seq: u32, track_id: u32, tfdt: u64, samples: &[Sample]) -> Vec<u8> {
    let build = |data_offset: i32| {
        let mut trun = (samples.len() as u32).to_be_bytes().to_vec();
        trun.extend_from_slice(&data_offset.to_be_bytes());
        for s in samples {
            trun.extend_from_slice(&s.duration.to_be_bytes());
            trun.extend_from_slice(&s.size.to_be_bytes());
            trun.extend_from_slice(&s.cto.to_be_bytes());
        }
        let mut traf = full(b"tfhd", 0, 0x02_0000, &track_id.to_be_bytes());
        traf.extend(full(b"tfdt", 1, 0, &tfdt.to_be_bytes()));
        traf.extend(full(b"trun", 1, 0x01 | 0x100 | 0x200 | 0x800, &trun));
        let mut moof = full(b"mfhd", 0, 0, &seq.to_be_bytes());
        moof.extend(bx(b"traf", &traf));
        bx(b"moof", &moof)
    };
    let moof_len = build(0).len();
    let mut out = build((moof_len + 8) as i32);
    let total: u32 = samples.iter().map(|s| s.size).sum();
    out.extend(bx(b"mdat", &vec![0xab; total as usize]));
    out
}

/// A media segment: styp then one fragment.
pub(crate) fn media_segment(seq: u32, track_id: u32, tfdt: u64, samples: &[Sample]) -> Vec<u8> {
    let mut out = bx(b"styp", b"msdh\0\0\0\0msdhmsix");
    out.extend(fragment(seq, track_id, tfdt, samples));
    out
}
