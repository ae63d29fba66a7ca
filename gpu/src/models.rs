//! The built-in table of NVENC/NVDEC engines and default session budgets by card model.
//!
//! NVML tells us a card's name but not how many encode/decode engines it has, whether its
//! NVENC does AV1, or how many sessions keep it busy; this table does. Names are matched
//! case-insensitively on whole tokens ("A10" does not match "A100").
//!
//! Default encode-session budgets: **4 sessions per NVENC engine** on datacenter cards
//! (T4 4, A10 4, L4 8, L40S 12). One 1080p H.264/HEVC session runs an engine at several
//! hundred frames per second, so one session per engine leaves it idle whenever that
//! segment's pipeline (demux, NVDEC, scale, mux, upload) stalls; about four interleave
//! enough to keep it saturated. More only time-slice the same engine — each segment gets
//! slower (the queue's 30-minute consumer timeout is global) — and cost VRAM (roughly
//! 0.3-0.5 GB per 1080p session with look-ahead and B-frames, plus decode surfaces), which
//! a 16 GB T4 feels first. Cards without NVENC (A30, A100, H100, H200) get 0. Workstation
//! cards get a conservative 3. Consumer (GeForce) cards are bounded by the driver's
//! system-wide session cap instead, shared by every consumer card in the machine. Unknown
//! cards get the `unknown_card_encode_sessions` setting. Every default is overridable per
//! card in [`crate::BudgetConfig`].

use crate::decode::{DecodeFormat, Generation};
use serde::{Deserialize, Serialize};

/// Which session-limit regime a card falls under.
///
/// Why: GeForce cards share a driver-imposed system-wide encode-session cap; datacenter and
/// workstation cards are limited only by memory and throughput.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CardClass {
    /// Tesla / datacenter cards (T4, L4, A10, L40S, A100, H100, H200, ...).
    Datacenter,
    /// Quadro and RTX professional cards: no session cap, conservative defaults.
    Workstation,
    /// GeForce / TITAN: the driver's system-wide encode-session cap applies.
    Consumer,
    /// A name the table does not know: conservative defaults.
    Unknown,
}

/// What one card model offers: engines, AV1 encode, architecture and default budget.
///
/// Why: the scheduler needs these facts per card and NVML does not report them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelSpec {
    /// The canonical short model name ("T4", "L40S", "GeForce", "unknown").
    pub model: &'static str,
    /// Session-limit regime.
    pub class: CardClass,
    /// Architecture, for the NVDEC codec matrix.
    pub generation: Generation,
    /// NVENC engines on the card (0: no hardware encode at all).
    pub nvenc_engines: u32,
    /// NVDEC engines on the card.
    pub nvdec_engines: u32,
    /// Whether NVENC encodes AV1 (Ada and later).
    pub av1_encode: bool,
    /// Default concurrent encode sessions; `None` means "from the configuration" (the
    /// consumer system cap for GeForce, `unknown_card_encode_sessions` for unknown cards).
    pub default_encode_sessions: Option<u32>,
}

impl ModelSpec {
    /// The spec for an NVML card name (e.g. "NVIDIA L4", "Tesla T4"); unknown names get a
    /// conservative default (1 NVENC, 1 NVDEC, budget from the configuration).
    pub fn lookup(name: &str) -> ModelSpec {
        let upper = name.to_ascii_uppercase();
        let tokens: Vec<&str> = upper
            .split(|c: char| !c.is_ascii_alphanumeric())
            .filter(|t| !t.is_empty())
            .collect();
        let has = |t: &str| tokens.contains(&t);
        if has("GEFORCE") || has("TITAN") {
            return consumer(&tokens);
        }
        if let Some(spec) = workstation(&tokens) {
            return spec;
        }
        for (token, spec) in DATACENTER {
            if has(token) {
                return *spec;
            }
        }
        if has("RTX") || has("GTX") {
            return consumer(&tokens);
        }
        UNKNOWN
    }

    /// Whether this is a consumer card under the shared system-wide session cap.
    pub fn is_consumer(&self) -> bool {
        self.class == CardClass::Consumer
    }

    /// Whether this card can decode `format` on NVDEC (has an NVDEC and its generation
    /// supports the codec, chroma format and bit depth).
    pub fn nvdec_decodes(&self, format: &DecodeFormat) -> bool {
        self.nvdec_engines > 0 && self.generation.nvdec_decodes(format)
    }
}

const fn dc(
    model: &'static str,
    generation: Generation,
    nvenc: u32,
    nvdec: u32,
    av1_encode: bool,
) -> ModelSpec {
    ModelSpec {
        model,
        class: CardClass::Datacenter,
        generation,
        nvenc_engines: nvenc,
        nvdec_engines: nvdec,
        av1_encode,
        default_encode_sessions: Some(nvenc * SESSIONS_PER_NVENC),
    }
}

/// Encode sessions per NVENC engine on datacenter cards (see the module docs).
const SESSIONS_PER_NVENC: u32 = 4;

/// Conservative encode budget for workstation cards whose engine count we do not track.
const WORKSTATION_SESSIONS: u32 = 3;

/// Datacenter models by the whole token that identifies them in the NVML name.
const DATACENTER: &[(&str, ModelSpec)] = &[
    ("T4", dc("T4", Generation::Turing, 1, 2, false)),
    ("A2", dc("A2", Generation::Ampere, 1, 2, false)),
    ("A10", dc("A10", Generation::Ampere, 1, 2, false)),
    ("A10G", dc("A10G", Generation::Ampere, 1, 2, false)),
    ("A16", dc("A16", Generation::Ampere, 1, 2, false)),
    ("A30", dc("A30", Generation::Ampere, 0, 4, false)),
    ("A40", dc("A40", Generation::Ampere, 1, 2, false)),
    ("A100", dc("A100", Generation::Ampere, 0, 5, false)),
    ("A800", dc("A800", Generation::Ampere, 0, 5, false)),
    ("L4", dc("L4", Generation::Ada, 2, 4, true)),
    ("L20", dc("L20", Generation::Ada, 3, 3, true)),
    ("L40", dc("L40", Generation::Ada, 3, 3, true)),
    ("L40S", dc("L40S", Generation::Ada, 3, 3, true)),
    ("H100", dc("H100", Generation::Hopper, 0, 7, false)),
    ("H800", dc("H800", Generation::Hopper, 0, 7, false)),
    ("H200", dc("H200", Generation::Hopper, 0, 7, false)),
    ("GH200", dc("GH200", Generation::Hopper, 0, 7, false)),
];

const UNKNOWN: ModelSpec = ModelSpec {
    model: "unknown",
    class: CardClass::Unknown,
    generation: Generation::Unknown,
    nvenc_engines: 1,
    nvdec_engines: 1,
    av1_encode: false,
    default_encode_sessions: None,
};

/// GeForce / TITAN: generation from the series number, engines from the few big cards.
fn consumer(tokens: &[&str]) -> ModelSpec {
    let number = tokens
        .iter()
        .find_map(|t| t.parse::<u32>().ok().filter(|n| (1000..10000).contains(n)));
    let generation = match number.map(|n| n / 100) {
        Some(16 | 20) => Generation::Turing,
        Some(30) => Generation::Ampere,
        Some(40) => Generation::Ada,
        Some(50) => Generation::Blackwell,
        _ => Generation::Unknown,
    };
    let nvenc_engines = match number {
        Some(5090) => 3,
        Some(4080) | Some(4090) | Some(5080) => 2,
        _ => 1,
    };
    let nvdec_engines = match number {
        Some(5090) | Some(5080) => 2,
        _ => 1,
    };
    ModelSpec {
        model: "GeForce",
        class: CardClass::Consumer,
        generation,
        nvenc_engines,
        nvdec_engines,
        av1_encode: matches!(generation, Generation::Ada | Generation::Blackwell),
        default_encode_sessions: None,
    }
}

/// Quadro and RTX professional cards ("RTX A4000", "RTX 6000 Ada Generation", "Quadro RTX
/// 8000"): datacenter-like (no session cap) with a conservative 1 NVENC / 1 NVDEC.
fn workstation(tokens: &[&str]) -> Option<ModelSpec> {
    let rtx_a = tokens
        .windows(2)
        .any(|w| w[0] == "RTX" && w[1].starts_with('A') && w[1][1..].parse::<u32>().is_ok());
    let ada = tokens.contains(&"RTX") && tokens.contains(&"ADA");
    let quadro = tokens.contains(&"QUADRO");
    if !(rtx_a || ada || quadro) {
        return None;
    }
    let generation = if ada {
        Generation::Ada
    } else if rtx_a {
        Generation::Ampere
    } else if tokens.contains(&"RTX") {
        Generation::Turing
    } else {
        Generation::Unknown
    };
    Some(ModelSpec {
        model: "workstation",
        class: CardClass::Workstation,
        generation,
        nvenc_engines: 1,
        nvdec_engines: 1,
        av1_encode: generation == Generation::Ada,
        default_encode_sessions: Some(WORKSTATION_SESSIONS),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::Codec;

    fn spec(name: &str) -> ModelSpec {
        ModelSpec::lookup(name)
    }

    #[test]
    fn datacenter_names_from_nvml() {
        let t4 = spec("Tesla T4");
        assert_eq!((t4.model, t4.nvenc_engines, t4.nvdec_engines), ("T4", 1, 2));
        assert!(!t4.av1_encode);
        assert!(!t4.nvdec_decodes(&DecodeFormat::yuv420_8bit(Codec::Av1)));
        assert_eq!(t4.default_encode_sessions, Some(4));

        let l4 = spec("NVIDIA L4");
        assert_eq!(
            (l4.nvenc_engines, l4.nvdec_engines, l4.av1_encode),
            (2, 4, true)
        );
        assert!(l4.nvdec_decodes(&DecodeFormat::yuv420_8bit(Codec::Av1)));
        assert_eq!(l4.default_encode_sessions, Some(8));

        let a10 = spec("NVIDIA A10");
        assert_eq!(
            (a10.model, a10.nvenc_engines, a10.nvdec_engines),
            ("A10", 1, 2)
        );
        assert_eq!(spec("NVIDIA A10G").model, "A10G");

        let l40s = spec("NVIDIA L40S");
        assert_eq!((l40s.nvenc_engines, l40s.nvdec_engines), (3, 3));
        assert!(l40s.av1_encode);
        assert_eq!(l40s.default_encode_sessions, Some(12));
    }

    #[test]
    fn compute_cards_have_no_nvenc() {
        for (name, nvdec) in [
            ("NVIDIA A100-SXM4-80GB", 5),
            ("NVIDIA A100 80GB PCIe", 5),
            ("NVIDIA H100 80GB HBM3", 7),
            ("NVIDIA H200", 7),
            ("NVIDIA H200 NVL", 7),
        ] {
            let s = spec(name);
            assert_eq!(s.nvenc_engines, 0, "{name}");
            assert_eq!(s.default_encode_sessions, Some(0), "{name}");
            assert_eq!(s.nvdec_engines, nvdec, "{name}");
            assert_eq!(s.class, CardClass::Datacenter, "{name}");
        }
    }

    #[test]
    fn a10_does_not_match_a100_and_case_is_ignored() {
        assert_eq!(spec("nvidia a100-pcie-40gb").model, "A100");
        assert_eq!(spec("NVIDIA a10").model, "A10");
        assert_eq!(spec("NVIDIA L40").model, "L40");
    }

    #[test]
    fn consumer_cards_fall_under_the_shared_cap() {
        let g = spec("NVIDIA GeForce RTX 4090");
        assert!(g.is_consumer());
        assert_eq!(g.default_encode_sessions, None);
        assert_eq!(g.generation, Generation::Ada);
        assert_eq!(g.nvenc_engines, 2);
        assert!(g.av1_encode);
        let g3 = spec("NVIDIA GeForce RTX 3060");
        assert_eq!(g3.generation, Generation::Ampere);
        assert!(!g3.av1_encode);
        assert!(spec("NVIDIA RTX 2080").is_consumer());
        assert!(spec("NVIDIA TITAN RTX").is_consumer());
    }

    #[test]
    fn workstation_cards_are_datacenter_like_and_conservative() {
        for name in [
            "NVIDIA RTX A4000",
            "NVIDIA RTX 6000 Ada Generation",
            "Quadro RTX 8000",
        ] {
            let s = spec(name);
            assert_eq!(s.class, CardClass::Workstation, "{name}");
            assert_eq!(s.default_encode_sessions, Some(3), "{name}");
        }
        assert_eq!(spec("NVIDIA RTX A4000").generation, Generation::Ampere);
        assert!(spec("NVIDIA RTX 6000 Ada Generation").av1_encode);
    }

    #[test]
    fn unknown_cards_get_conservative_defaults() {
        let s = spec("NVIDIA Hypothetical X9");
        assert_eq!(s.class, CardClass::Unknown);
        assert_eq!((s.nvenc_engines, s.nvdec_engines), (1, 1));
        assert_eq!(s.default_encode_sessions, None);
        assert_eq!(spec("").class, CardClass::Unknown);
    }
}
