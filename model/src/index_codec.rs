//! The probe's packet index in a compact form for the trip from the probe child to its parent.
//!
//! Why: a 2-hour 60 fps input has 432,000 video packets. As JSON objects (one `serde_json::Value`
//! map per packet on the way through the sandbox) that is about 40 bytes of text and several
//! hundred bytes of heap per packet; the dispatcher would spend seconds and hundreds of MiB
//! on it. Here each packet is a few bytes: the pts as a zigzag varint delta from the previous
//! packet, the pts-dts gap, and a flag byte (key, discard, recovery count follows), all in one
//! base64 string.

use base64::Engine;
use serde::{Deserialize, Deserializer, Serializer};

use crate::probe::PacketEntry;

const KEY: u8 = 1;
const DISCARD: u8 = 2;
const RECOVERY: u8 = 4;

/// Serializes a packet list as one base64 string (serde `with` target).
pub fn serialize<S: Serializer>(packets: &[PacketEntry], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&base64::engine::general_purpose::STANDARD_NO_PAD.encode(encode(packets)))
}

/// Reads what [`serialize`] wrote.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<PacketEntry>, D::Error> {
    let text = String::deserialize(d)?;
    let bytes = base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(text.as_bytes())
        .map_err(serde::de::Error::custom)?;
    decode(&bytes).map_err(serde::de::Error::custom)
}

fn encode(packets: &[PacketEntry]) -> Vec<u8> {
    let mut out = Vec::with_capacity(packets.len() * 4);
    put(&mut out, packets.len() as u64);
    let mut prev = 0i64;
    for p in packets {
        put(&mut out, zigzag(p.pts.wrapping_sub(prev)));
        put(&mut out, zigzag(p.pts.wrapping_sub(p.dts)));
        let mut flags = 0;
        if p.key {
            flags |= KEY;
        }
        if p.discard {
            flags |= DISCARD;
        }
        if p.recovery.is_some() {
            flags |= RECOVERY;
        }
        out.push(flags);
        if let Some(r) = p.recovery {
            put(&mut out, u64::from(r));
        }
        prev = p.pts;
    }
    out
}

fn decode(bytes: &[u8]) -> Result<Vec<PacketEntry>, String> {
    let mut pos = 0usize;
    let n = get(bytes, &mut pos)?;
    // Never trust a count to size an allocation: each packet takes at least 3 bytes.
    let mut packets = Vec::with_capacity((n as usize).min(bytes.len() / 3));
    let mut prev = 0i64;
    for _ in 0..n {
        let pts = prev.wrapping_add(unzigzag(get(bytes, &mut pos)?));
        let dts = pts.wrapping_sub(unzigzag(get(bytes, &mut pos)?));
        let flags = *bytes.get(pos).ok_or("packet index ends early")?;
        pos += 1;
        let recovery = if flags & RECOVERY != 0 {
            Some(u32::try_from(get(bytes, &mut pos)?).map_err(|e| e.to_string())?)
        } else {
            None
        };
        packets.push(PacketEntry {
            pts,
            dts,
            key: flags & KEY != 0,
            discard: flags & DISCARD != 0,
            recovery,
        });
        prev = pts;
    }
    if pos != bytes.len() {
        return Err("packet index has trailing bytes".into());
    }
    Ok(packets)
}

/// The same compact form for a plain list of timestamps (deltas as zigzag varints, base64):
/// the presentation timestamps the probe derived for a container that stores none.
pub mod timestamps {
    use base64::Engine;
    use serde::{Deserialize, Deserializer, Serializer};

    /// Serializes the list as one base64 string (serde `with` target).
    pub fn serialize<S: Serializer>(values: &[i64], s: S) -> Result<S::Ok, S::Error> {
        let mut out = Vec::with_capacity(values.len() * 2);
        super::put(&mut out, values.len() as u64);
        let mut prev = 0i64;
        for &v in values {
            super::put(&mut out, super::zigzag(v.wrapping_sub(prev)));
            prev = v;
        }
        s.serialize_str(&base64::engine::general_purpose::STANDARD_NO_PAD.encode(out))
    }

    /// Reads what [`serialize`] wrote.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<i64>, D::Error> {
        let text = String::deserialize(d)?;
        let bytes = base64::engine::general_purpose::STANDARD_NO_PAD
            .decode(text.as_bytes())
            .map_err(serde::de::Error::custom)?;
        let mut pos = 0usize;
        let n = super::get(&bytes, &mut pos).map_err(serde::de::Error::custom)?;
        let mut values = Vec::with_capacity((n as usize).min(bytes.len()));
        let mut prev = 0i64;
        for _ in 0..n {
            let delta = super::get(&bytes, &mut pos).map_err(serde::de::Error::custom)?;
            prev = prev.wrapping_add(super::unzigzag(delta));
            values.push(prev);
        }
        if pos != bytes.len() {
            return Err(serde::de::Error::custom(
                "timestamp list has trailing bytes",
            ));
        }
        Ok(values)
    }
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get(bytes: &[u8], pos: &mut usize) -> Result<u64, String> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*pos).ok_or("packet index ends early")?;
        *pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err("packet index has an overlong number".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn entry() -> impl Strategy<Value = PacketEntry> {
        (
            any::<i64>(),
            -5000i64..5000,
            any::<bool>(),
            any::<bool>(),
            proptest::option::of(0u32..1000),
        )
            .prop_map(|(pts, gap, key, discard, recovery)| PacketEntry {
                pts,
                dts: pts.wrapping_sub(gap),
                key,
                discard,
                recovery,
            })
    }

    proptest! {
        #[test]
        fn round_trips(packets in proptest::collection::vec(entry(), 0..300)) {
            prop_assert_eq!(decode(&encode(&packets)).unwrap(), packets);
        }

        #[test]
        fn garbage_is_an_error_not_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode(&bytes);
        }
    }

    #[test]
    fn a_typical_packet_takes_about_four_bytes() {
        let packets: Vec<PacketEntry> = (0..10_000)
            .map(|i| PacketEntry {
                pts: i * 1001 + (i % 3) * 2002,
                dts: i * 1001 - 2002,
                key: i % 250 == 0,
                discard: false,
                recovery: None,
            })
            .collect();
        let bytes = encode(&packets);
        assert!(bytes.len() < packets.len() * 6, "{} bytes", bytes.len());
    }
}
