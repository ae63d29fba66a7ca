//! What the farm's media children spent in a round, by operation: the dispatcher's (probe,
//! split, audio) and the workers' (encode, audio, stitch with its QC gate, split), from the
//! `tessera_media_cpu_seconds_total{op}` series of their `/metrics`, sampled before and after.
//!
//! Why beside the `/proc` figures ([`super::cpu`]): those say which process spent the CPU,
//! these say on which step, which is what a change to the farm's work has to move.

use std::collections::BTreeMap;

/// CPU-seconds by operation name.
pub type OpCpu = BTreeMap<String, f64>;

/// The media CPU of the farm's two kinds of process, by operation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MediaOps {
    /// The dispatcher's media children.
    pub dispatcher: OpCpu,
    /// Every worker's media children, summed.
    pub workers: OpCpu,
}

/// The `tessera_media_cpu_seconds_total` series of one `/metrics` text, by `op`.
pub fn parse(text: &str) -> OpCpu {
    series(text, "tessera_media_cpu_seconds_total")
}

/// The series `name` of one `/metrics` text, by its `op` label.
pub fn series(text: &str, name: &str) -> OpCpu {
    let prefix = format!("{name}{{op=\"");
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix(&prefix)?;
            let (op, value) = rest.split_once("\"} ")?;
            Some((op.to_string(), value.trim().parse().ok()?))
        })
        .collect()
}

/// The text of `url` (a `/metrics` endpoint); panics when it does not answer.
pub fn metrics_text(url: &str) -> String {
    let out = std::process::Command::new("curl")
        .args(["-sS", "-f", "-m", "20", url])
        .output()
        .expect("curl");
    assert!(
        out.status.success(),
        "{url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Scrapes `url` (a `/metrics` endpoint); panics when it does not answer.
pub fn scrape(url: &str) -> OpCpu {
    parse(&metrics_text(url))
}

/// `a` plus `b`, op by op.
pub fn sum(a: &OpCpu, b: &OpCpu) -> OpCpu {
    let mut out = a.clone();
    for (op, v) in b {
        *out.entry(op.clone()).or_default() += v;
    }
    out
}

fn minus(after: &OpCpu, before: &OpCpu) -> OpCpu {
    after
        .iter()
        .map(|(op, v)| (op.clone(), v - before.get(op).copied().unwrap_or(0.0)))
        .filter(|(_, v)| *v > 0.0)
        .collect()
}

impl MediaOps {
    /// What was spent between `before` and this sample.
    pub fn since(&self, before: &MediaOps) -> MediaOps {
        MediaOps {
            dispatcher: minus(&self.dispatcher, &before.dispatcher),
            workers: minus(&self.workers, &before.workers),
        }
    }

    /// Round `n`'s lines: each side's operations as CPU-seconds per output minute.
    pub fn lines(&self, n: usize, output_min: f64) -> Vec<String> {
        let show = |ops: &OpCpu| {
            // `+ 0.0`: an empty f64 sum is -0.0, which would print as "-0.00".
            let total: f64 = ops.values().sum::<f64>() + 0.0;
            let parts: Vec<String> = ops
                .iter()
                .map(|(op, v)| format!("{op} {:.2}", v / output_min.max(1e-9)))
                .collect();
            format!(
                "{:.2} ({})",
                total / output_min.max(1e-9),
                if parts.is_empty() {
                    "none".to_string()
                } else {
                    parts.join(", ")
                }
            )
        };
        vec![format!(
            "round {n}: media CPU-s per output minute, workers' children {}; dispatcher's children {}",
            show(&self.workers),
            show(&self.dispatcher)
        )]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_series_are_read_by_op_and_a_round_is_the_difference() {
        let text = "# TYPE tessera_media_cpu_seconds_total counter\n\
            tessera_media_cpu_seconds_total{op=\"encode\"} 12.500\n\
            tessera_media_cpu_seconds_total{op=\"stitch\"} 2.000\n\
            tessera_media_wall_seconds_total{op=\"encode\"} 9.000\n";
        let before = parse(text);
        assert_eq!(before.len(), 2);
        assert_eq!(before["encode"], 12.5);
        let after = parse(&text.replace("12.500", "20.500"));
        let one = MediaOps {
            dispatcher: OpCpu::new(),
            workers: sum(&after, &OpCpu::from([("audio".to_string(), 1.0)])),
        };
        let round = one.since(&MediaOps {
            dispatcher: OpCpu::new(),
            workers: before,
        });
        assert_eq!(round.workers.len(), 2, "{round:?}");
        assert_eq!(round.workers["encode"], 8.0);
        assert_eq!(round.workers["audio"], 1.0);
        let line = &round.lines(1, 2.0)[0];
        assert!(
            line.contains("workers' children 4.50 (audio 0.50, encode 4.00)"),
            "{line}"
        );
        assert!(line.contains("dispatcher's children 0.00 (none)"), "{line}");
    }
}
