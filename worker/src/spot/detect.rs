//! `auto`: finding which cloud's metadata service answers, retried for a while.
//!
//! Why retried: one probe at start is fragile. IMDS throttles, a pod's network may come up a
//! moment after the process, and a metadata hop limit of 1 drops every answer. A single
//! failure used to turn notices off for the worker's life with an info line. Now the probes
//! are repeated with jittered, doubling waits for [`DETECT_FOR`]; if none answers, a machine
//! whose firmware names a cloud (DMI vendor) gets a warning, since notices are then off where
//! they are needed.

use std::time::{Duration, Instant};

use tessera_farm::backoff::Backoff;
use tokio_util::sync::CancellationToken;

use super::Provider;

/// How long `auto` keeps probing before it gives up (notices off).
pub const DETECT_FOR: Duration = Duration::from_secs(300);

/// The usual waits between rounds of probes: 1 s doubling to 30 s, jittered so a fleet
/// started together does not probe a throttling service in step.
pub fn default_backoff() -> Backoff {
    Backoff::new(Duration::from_secs(1), Duration::from_secs(30)).jittered()
}

/// Probes each provider in turn (`probe` says whether one answers) until one does, `give_up`
/// has passed, or `stop` is cancelled.
pub fn detect(
    mut probe: impl FnMut(Provider) -> bool,
    mut backoff: Backoff,
    give_up: Duration,
    stop: &CancellationToken,
) -> Option<Provider> {
    let started = Instant::now();
    let mut round = 0u32;
    loop {
        let all = [Provider::Aws, Provider::Gcp, Provider::Azure];
        if let Some(p) = all.into_iter().find(|&p| !stop.is_cancelled() && probe(p)) {
            if round > 0 {
                tracing::info!(
                    provider = p.name(),
                    tries = round + 1,
                    "instance metadata service answered after retries"
                );
            }
            return Some(p);
        }
        round += 1;
        let wait = backoff.next_delay();
        if started.elapsed() + wait > give_up {
            return None;
        }
        if round == 1 {
            tracing::info!(
                for_seconds = give_up.as_secs(),
                "no instance metadata service answers yet: retrying"
            );
        }
        if !sleep_unless(stop, wait) {
            return None;
        }
    }
}

/// Sleeps `d` in short slices; false if `stop` was cancelled meanwhile. Why sliced: the
/// watcher runs on a blocking thread, which the runtime waits for at shutdown.
pub fn sleep_unless(stop: &CancellationToken, d: Duration) -> bool {
    let until = Instant::now() + d;
    loop {
        if stop.is_cancelled() {
            return false;
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        std::thread::sleep(left.min(Duration::from_millis(200)));
    }
}

/// The cloud this machine's firmware names, read from `/sys/class/dmi/id`, if any.
pub fn cloud_vendor() -> Option<&'static str> {
    let dmi: String = ["sys_vendor", "bios_vendor", "product_name", "bios_version"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(format!("/sys/class/dmi/id/{f}")).ok())
        .collect::<Vec<_>>()
        .join("\n");
    vendor_in(&dmi)
}

/// The cloud named by DMI text (vendor, product and BIOS strings). Pure.
pub fn vendor_in(dmi: &str) -> Option<&'static str> {
    let dmi = dmi.to_ascii_lowercase();
    if dmi.contains("amazon") {
        Some("aws")
    } else if dmi.contains("google") {
        Some("gcp")
    } else if dmi.contains("microsoft corporation") {
        Some("azure")
    } else {
        None
    }
}

/// Logs that `auto` found no service: a warning on a machine that looks like a cloud VM.
pub fn report_none(give_up: Duration) {
    match cloud_vendor() {
        Some(cloud) => tracing::warn!(
            cloud,
            seconds = give_up.as_secs(),
            "this looks like a {cloud} VM, but no instance metadata service answered: spot \
             notices are off (check the metadata hop limit or network policy, or set \
             --spot-notice explicitly)"
        ),
        None => tracing::info!("no instance metadata service answers: spot notices off"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quick() -> Backoff {
        Backoff::new(Duration::from_millis(1), Duration::from_millis(5)).jittered()
    }

    #[test]
    fn a_service_that_fails_the_first_probe_and_answers_the_second_is_found() {
        let mut calls = Vec::new();
        let found = detect(
            |p| {
                calls.push(p);
                p == Provider::Gcp && calls.len() > 3
            },
            quick(),
            Duration::from_secs(10),
            &CancellationToken::new(),
        );
        assert_eq!(found, Some(Provider::Gcp));
        // One full failed round, then AWS and GCP again.
        assert_eq!(calls.len(), 5, "{calls:?}");
    }

    #[test]
    fn no_answer_gives_up_after_the_time_and_a_stop_ends_it_at_once() {
        let started = Instant::now();
        let found = detect(
            |_| false,
            quick(),
            Duration::from_millis(50),
            &CancellationToken::new(),
        );
        assert_eq!(found, None);
        assert!(started.elapsed() < Duration::from_secs(5));
        let stop = CancellationToken::new();
        stop.cancel();
        let slow = Backoff::new(Duration::from_secs(60), Duration::from_secs(60));
        let started = Instant::now();
        assert_eq!(detect(|_| false, slow, DETECT_FOR, &stop), None);
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn dmi_strings_name_the_cloud() {
        assert_eq!(
            vendor_in("Amazon EC2\nAmazon EC2\nm5.large\n1.0"),
            Some("aws")
        );
        assert_eq!(vendor_in("Xen\nXen\nHVM domU\n4.11.amazon"), Some("aws"));
        assert_eq!(
            vendor_in("Google\nGoogle\nGoogle Compute Engine"),
            Some("gcp")
        );
        assert_eq!(
            vendor_in("Microsoft Corporation\nMicrosoft Corporation\nVirtual Machine"),
            Some("azure")
        );
        assert_eq!(vendor_in("Dell Inc.\nDell Inc.\nPowerEdge R640"), None);
    }
}
