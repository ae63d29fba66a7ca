//! Which NVML card is which CUDA device: the session books are kept per NVML index, but
//! FFmpeg opens a card by CUDA ordinal.
//!
//! Why: the two numberings agree only with `CUDA_DEVICE_ORDER=PCI_BUS_ID` (CUDA's default
//! is fastest first; every media child gets PCI_BUS_ID) and without `CUDA_VISIBLE_DEVICES`,
//! which NVML ignores and CUDA applies. On a mixed host the books (card i) and the real
//! sessions (card j) would otherwise diverge, and with a visible-devices list indexes past
//! its length fail as "invalid device". Cards are matched by PCI bus id order and UUID.

use std::collections::BTreeMap;

use tessera_gpu::{CardInfo, Inventory};

/// NVML index -> CUDA ordinal, for the cards CUDA can see.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CudaOrdinals {
    by_index: BTreeMap<u32, u32>,
}

impl CudaOrdinals {
    /// The mapping for `cards` under `visible` (the worker's `CUDA_VISIBLE_DEVICES`, if set),
    /// with CUDA enumerating in PCI bus order. Entries are ordinals in that order or UUIDs
    /// (a unique prefix is enough); as in CUDA, the list ends at the first entry that names
    /// no card. MIG instances are not supported and end the list too (with a warning).
    pub fn new(cards: &[CardInfo], visible: Option<&str>) -> CudaOrdinals {
        let mut pci_order: Vec<&CardInfo> = cards.iter().collect();
        if pci_order.iter().all(|c| c.pci_bus_id.is_some()) {
            pci_order.sort_by_key(|c| c.pci_bus_id.as_deref().map(str::to_ascii_lowercase));
        } else {
            pci_order.sort_by_key(|c| c.index);
        }
        let chosen: Vec<&CardInfo> = match visible {
            None => pci_order,
            Some(list) => {
                let mut chosen = Vec::new();
                for entry in list.split(',').map(str::trim) {
                    let found = if let Ok(n) = entry.parse::<usize>() {
                        pci_order.get(n).copied()
                    } else if entry.len() > 4 && entry[..4].eq_ignore_ascii_case("GPU-") {
                        let mut matching = pci_order.iter().filter(|c| {
                            c.uuid.as_deref().is_some_and(|u| {
                                u.len() >= entry.len()
                                    && u[..entry.len()].eq_ignore_ascii_case(entry)
                            })
                        });
                        match (matching.next(), matching.next()) {
                            (Some(c), None) => Some(*c),
                            _ => None,
                        }
                    } else {
                        if entry.starts_with("MIG-") {
                            tracing::warn!(entry, "MIG instances are not supported for NVENC work");
                        }
                        None
                    };
                    match found {
                        Some(c) if !chosen.iter().any(|k: &&CardInfo| k.index == c.index) => {
                            chosen.push(c)
                        }
                        _ => break,
                    }
                }
                chosen
            }
        };
        CudaOrdinals {
            by_index: chosen
                .iter()
                .enumerate()
                .map(|(ordinal, c)| (c.index, ordinal as u32))
                .collect(),
        }
    }

    /// From this process's environment.
    pub fn from_env(cards: &[CardInfo]) -> CudaOrdinals {
        let visible = std::env::var("CUDA_VISIBLE_DEVICES").ok();
        CudaOrdinals::new(cards, visible.as_deref())
    }

    /// The CUDA ordinal of NVML card `index`; `None` when CUDA cannot see it.
    pub fn ordinal(&self, index: u32) -> Option<u32> {
        self.by_index.get(&index).copied()
    }

    /// `inventory` with only the cards CUDA can see (the others get no work).
    pub fn visible(&self, inventory: &Inventory) -> Inventory {
        Inventory {
            driver_version: inventory.driver_version.clone(),
            cards: (inventory.cards.iter())
                .filter(|c| self.by_index.contains_key(&c.index))
                .cloned()
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn card(index: u32, bus: &str, uuid: &str) -> CardInfo {
        let mut c = CardInfo::simulated(index, "NVIDIA L4", uuid);
        c.pci_bus_id = Some(bus.to_string());
        c
    }

    fn host() -> Vec<CardInfo> {
        // NVML lists by index; the bus ids are deliberately not in index order.
        vec![
            card(0, "00000000:3B:00.0", "GPU-aaaa1111"),
            card(1, "00000000:1A:00.0", "GPU-bbbb2222"),
            card(2, "00000000:5E:00.0", "GPU-cccc3333"),
        ]
    }

    #[test]
    fn without_a_visible_list_ordinals_follow_the_pci_bus() {
        let o = CudaOrdinals::new(&host(), None);
        assert_eq!(
            (o.ordinal(1), o.ordinal(0), o.ordinal(2)),
            (Some(0), Some(1), Some(2))
        );
    }

    #[test]
    fn a_visible_list_renumbers_and_hides() {
        let cards = host();
        // "2,0" in PCI order: the third bus (card 2) becomes ordinal 0, the first (card 1) 1.
        let o = CudaOrdinals::new(&cards, Some("2,0"));
        assert_eq!(
            (o.ordinal(2), o.ordinal(1), o.ordinal(0)),
            (Some(0), Some(1), None)
        );
        let inv = o.visible(&Inventory::simulated(cards.clone()));
        let mut seen: Vec<u32> = inv.cards.iter().map(|c| c.index).collect();
        seen.sort();
        assert_eq!(seen, vec![1, 2]);
        // UUIDs and unique prefixes; the list ends at the first unknown entry.
        let o = CudaOrdinals::new(&cards, Some("GPU-cccc, GPU-AAAA1111 ,7,1"));
        assert_eq!(
            (o.ordinal(2), o.ordinal(0), o.ordinal(1)),
            (Some(0), Some(1), None)
        );
        assert_eq!(CudaOrdinals::new(&cards, Some("")).ordinal(0), None);
        assert_eq!(CudaOrdinals::new(&cards, Some("MIG-1234")).ordinal(0), None);
        // An ambiguous prefix names no card.
        assert_eq!(CudaOrdinals::new(&cards, Some("GPU-")).ordinal(0), None);
    }

    #[test]
    fn without_bus_ids_the_nvml_order_is_used() {
        let cards = vec![
            CardInfo::simulated(1, "Tesla T4", "GPU-1"),
            CardInfo::simulated(0, "Tesla T4", "GPU-0"),
        ];
        let o = CudaOrdinals::new(&cards, None);
        assert_eq!((o.ordinal(0), o.ordinal(1)), (Some(0), Some(1)));
    }
}
