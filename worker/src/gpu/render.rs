//! The worker's GPU metrics in Prometheus' text format, and its cards' part of the status
//! report (status.rs).
//!
//! Why apart: the rendering is long and only reads the books; gpu.rs keeps the books.

use super::Gpus;

impl Gpus {
    /// Prometheus lines for every card: sessions in use and budget, utilization, health.
    pub fn render_metrics(&self, out: &mut String) {
        let snap = self.scheduler.snapshot();
        let inv = self.inventory.lock().unwrap_or_else(|p| p.into_inner());
        let gauge = |out: &mut String, name: &str, help: &str| {
            out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} gauge\n"));
        };
        let label = |c: &tessera_gpu::CardSnapshot| {
            format!(
                "card=\"{}\",name=\"{}\"",
                c.index,
                c.name.replace('\\', "\\\\").replace('"', "\\\"")
            )
        };
        type Field = fn(&tessera_gpu::CardSnapshot) -> u32;
        let per_card: [(&str, &str, Field); 5] = [
            (
                "tessera_gpu_encode_sessions_in_use",
                "NVENC sessions this worker holds.",
                |c| c.encode_in_use,
            ),
            (
                "tessera_gpu_encode_session_budget",
                "NVENC sessions this worker may hold now.",
                |c| c.encode_budget,
            ),
            (
                "tessera_gpu_decode_sessions_in_use",
                "NVDEC sessions this worker holds.",
                |c| c.decode_in_use,
            ),
            (
                "tessera_gpu_foreign_encode_sessions",
                "NVENC sessions other processes hold.",
                |c| c.foreign_encode,
            ),
            ("tessera_gpu_healthy", "1 when the card takes work.", |c| {
                u32::from(c.healthy)
            }),
        ];
        for (name, help, f) in per_card {
            gauge(out, name, help);
            for c in &snap.cards {
                out.push_str(&format!("{name}{{{}}} {}\n", label(c), f(c)));
            }
        }
        type Util = fn(&tessera_gpu::CardInfo) -> Option<u32>;
        let utilization: [(&str, &str, Util); 2] = [
            (
                "tessera_gpu_encoder_utilization_ratio",
                "NVENC utilization (NVML), 0-1.",
                |i| i.encoder_utilization_pct,
            ),
            (
                "tessera_gpu_decoder_utilization_ratio",
                "NVDEC utilization (NVML), 0-1.",
                |i| i.decoder_utilization_pct,
            ),
        ];
        for (name, help, util) in utilization {
            gauge(out, name, help);
            for c in &snap.cards {
                let pct = inv.cards.iter().find(|i| i.index == c.index).and_then(util);
                if let Some(p) = pct {
                    out.push_str(&format!(
                        "{name}{{{}}} {}\n",
                        label(c),
                        f64::from(p) / 100.0
                    ));
                }
            }
        }
    }
    /// Each card as the status report gives it: sessions in use against the budget, foreign
    /// sessions, NVML's encoder and decoder use, health (a penalty's cut budget is named as
    /// the fault while it lasts).
    pub fn card_status(&self) -> Vec<tessera_model::wire::CardStatus> {
        let snap = self.scheduler.snapshot();
        let inv = self.inventory.lock().unwrap_or_else(|p| p.into_inner());
        snap.cards
            .iter()
            .map(|c| {
                let info = inv.cards.iter().find(|i| i.index == c.index);
                let penalty = (c.penalty_level > 0).then(|| {
                    format!(
                        "budget cut after a refused session (level {})",
                        c.penalty_level
                    )
                });
                tessera_model::wire::CardStatus {
                    index: c.index,
                    name: c.name.clone(),
                    encode_in_use: c.encode_in_use,
                    encode_budget: c.encode_budget,
                    decode_in_use: c.decode_in_use,
                    decode_budget: c.decode_budget,
                    foreign_encode: c.foreign_encode,
                    encoder_pct: info.and_then(|i| i.encoder_utilization_pct),
                    decoder_pct: info.and_then(|i| i.decoder_utilization_pct),
                    healthy: c.healthy,
                    fault: c.fault.clone().or(penalty),
                }
            })
            .collect()
    }
}
