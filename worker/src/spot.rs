//! Spot-interruption notices: the worker polls its cloud's instance metadata service and,
//! on a notice, stops taking work, gives in-flight segments the time left and exits before
//! the machine is taken (the rest is requeued).
//!
//! Why poll: the SIGTERM Kubernetes sends comes late (GKE gives pods 15 s of the 30 s
//! notice) or never (the VM just vanishes), while the metadata service says it two minutes
//! ahead on AWS. Providers: AWS IMDSv2 (`spot/instance-action`, rebalance recommendation),
//! GCP (`instance/preempted`), Azure scheduled events (`Preempt`); `auto` finds which one
//! answers, retried for a while (`spot/detect.rs`). A rebalance recommendation drains a
//! worker once, when it appears; one already standing when the worker starts is ignored
//! (`spot/watch.rs`). The metadata URL can be pointed elsewhere (tests, proxies).

pub mod detect;
pub mod notice;
pub mod watch;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use tokio_util::sync::CancellationToken;
use ureq::Agent;

use crate::drain::Drain;
use notice::Notice;
use watch::Step;

/// Which metadata service to poll (`--spot-notice`, `TESSERA_SPOT_NOTICE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SpotMode {
    /// Find the provider whose metadata service answers; none: no polling.
    #[default]
    Auto,
    /// No polling.
    Off,
    /// One provider.
    Provider(Provider),
}

/// A cloud whose metadata service gives spot notices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// AWS EC2 (IMDSv2).
    Aws,
    /// Google Compute Engine / GKE.
    Gcp,
    /// Azure virtual machines / AKS.
    Azure,
}

impl std::str::FromStr for SpotMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(SpotMode::Auto),
            "off" => Ok(SpotMode::Off),
            "aws" => Ok(SpotMode::Provider(Provider::Aws)),
            "gcp" => Ok(SpotMode::Provider(Provider::Gcp)),
            "azure" => Ok(SpotMode::Provider(Provider::Azure)),
            other => Err(format!(
                "spot notice source {other:?}: expected auto, off, aws, gcp or azure"
            )),
        }
    }
}

impl Provider {
    fn name(self) -> &'static str {
        match self {
            Provider::Aws => "aws",
            Provider::Gcp => "gcp",
            Provider::Azure => "azure",
        }
    }

    /// The metadata service's usual address.
    fn default_base(self) -> &'static str {
        match self {
            Provider::Gcp => "http://metadata.google.internal",
            Provider::Aws | Provider::Azure => "http://169.254.169.254",
        }
    }
}

/// Spot-notice settings of a worker.
#[derive(Debug, Clone, Default)]
pub struct SpotSettings {
    /// Which service to poll.
    pub mode: SpotMode,
    /// Base URL of the metadata service instead of the provider's usual one.
    pub metadata_url: Option<String>,
    /// Time between polls (AWS advises 5 s).
    pub every: Option<Duration>,
}

/// One metadata call's limit: the service is link-local and answers in milliseconds.
const CALL_TIMEOUT: Duration = Duration::from_secs(2);

/// Starts polling on a blocking thread until `stop`; a notice begins `drain`.
pub fn spawn(settings: SpotSettings, drain: Arc<Drain>, stop: CancellationToken) {
    if settings.mode == SpotMode::Off {
        return;
    }
    let every = settings.every.unwrap_or(Duration::from_secs(5));
    tokio::task::spawn_blocking(move || {
        let agent: Agent = Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(CALL_TIMEOUT))
            .build()
            .into();
        let base = |p: Provider| {
            settings
                .metadata_url
                .clone()
                .unwrap_or_else(|| p.default_base().to_string())
                .trim_end_matches('/')
                .to_string()
        };
        let provider = match settings.mode {
            SpotMode::Provider(p) => p,
            _ => {
                let probe = |p: Provider| answers(&agent, p, &base(p));
                match detect::detect(probe, detect::default_backoff(), detect::DETECT_FOR, &stop) {
                    Some(p) => p,
                    None => {
                        if !stop.is_cancelled() {
                            detect::report_none(detect::DETECT_FOR);
                        }
                        return;
                    }
                }
            }
        };
        let poller = Poller::new(agent, provider, base(provider));
        watch_notices(poller, every, &drain, &stop);
    });
}

/// Polls until `stop` or an interruption: each new notice begins `drain` (see
/// [`watch::Watch`] for which rebalance recommendations count).
fn watch_notices(mut poller: Poller, every: Duration, drain: &Drain, stop: &CancellationToken) {
    let provider = poller.provider;
    tracing::info!(provider = provider.name(), "watching for spot notices");
    let mut warned = false;
    let mut watch = watch::Watch::default();
    while !stop.is_cancelled() {
        let answer = poller.check();
        if answer.is_ok() {
            warned = false;
        }
        match answer.map(|n| watch.step(n)) {
            Ok(Step::Nothing) => {}
            Ok(Step::StandingRebalance) => tracing::warn!(
                provider = provider.name(),
                "a rebalance recommendation is already standing: ignored (it drained a \
                 worker when it appeared); a termination notice still drains"
            ),
            Ok(Step::Drain(n)) => {
                let left = n
                    .deadline
                    .and_then(|d| d.duration_since(SystemTime::now()).ok());
                tracing::warn!(
                    provider = provider.name(),
                    reason = n.reason.as_str(),
                    seconds_left = left.map(|l| l.as_secs()),
                    "spot notice: taking no more work, draining"
                );
                // A deadline already past leaves no time at all.
                let deadline = n
                    .deadline
                    .map(|_| Instant::now() + left.unwrap_or_default());
                drain.begin(n.reason, deadline);
                if n.reason == crate::drain::DrainReason::SpotInterruption {
                    return;
                }
            }
            Err(e) if !warned => {
                tracing::warn!(provider = provider.name(), error = %e, "spot notice poll failed");
                warned = true;
            }
            Err(_) => {}
        }
        if !detect::sleep_unless(stop, every) {
            return;
        }
    }
}

/// Whether `provider`'s metadata service answers at `base` (for `auto`).
fn answers(agent: &Agent, provider: Provider, base: &str) -> bool {
    // GCP's server names itself in a header, so a different server on the same name is not
    // taken for it.
    let ok = |r: Result<ureq::http::Response<ureq::Body>, ureq::Error>, flavor: bool| {
        r.map(|r| {
            r.status().is_success() && (!flavor || r.headers().contains_key("metadata-flavor"))
        })
        .unwrap_or(false)
    };
    match provider {
        Provider::Aws => aws_token(agent, base).is_ok(),
        Provider::Gcp => ok(
            agent
                .get(format!("{base}/computeMetadata/v1/"))
                .header("Metadata-Flavor", "Google")
                .call(),
            true,
        ),
        Provider::Azure => ok(
            agent
                .get(format!("{base}/metadata/instance?api-version=2021-02-01"))
                .header("Metadata", "true")
                .call(),
            false,
        ),
    }
}

fn aws_token(agent: &Agent, base: &str) -> Result<String, String> {
    let mut r = agent
        .put(format!("{base}/latest/api/token"))
        .header("X-aws-ec2-metadata-token-ttl-seconds", "21600")
        .send_empty()
        .map_err(|e| e.to_string())?;
    if !r.status().is_success() {
        return Err(format!("IMDSv2 token: HTTP {}", r.status().as_u16()));
    }
    r.body_mut().read_to_string().map_err(|e| e.to_string())
}

/// One provider's polling state (AWS token, Azure VM name).
struct Poller {
    agent: Agent,
    provider: Provider,
    base: String,
    aws_token: Option<String>,
    azure_vm: Option<String>,
}

impl Poller {
    fn new(agent: Agent, provider: Provider, base: String) -> Self {
        Poller {
            agent,
            provider,
            base,
            aws_token: None,
            azure_vm: None,
        }
    }

    /// GET `path` with the provider's headers: (status, body).
    fn get(&mut self, path: &str) -> Result<(u16, String), String> {
        let mut req = self.agent.get(format!("{}{path}", self.base));
        match self.provider {
            Provider::Aws => {
                if self.aws_token.is_none() {
                    self.aws_token = Some(aws_token(&self.agent, &self.base)?);
                }
                let token = self.aws_token.clone().unwrap_or_default();
                req = req.header("X-aws-ec2-metadata-token", token.trim());
            }
            Provider::Gcp => req = req.header("Metadata-Flavor", "Google"),
            Provider::Azure => req = req.header("Metadata", "true"),
        }
        let mut r = req.call().map_err(|e| e.to_string())?;
        let status = r.status().as_u16();
        if status == 401 {
            // The IMDSv2 token expired: a new one next time.
            self.aws_token = None;
        }
        let body = r.body_mut().read_to_string().map_err(|e| e.to_string())?;
        Ok((status, body))
    }

    /// One poll: a notice, none, or why the service could not be read.
    fn check(&mut self) -> Result<Option<Notice>, String> {
        let now = SystemTime::now();
        match self.provider {
            Provider::Aws => {
                match self.get("/latest/meta-data/spot/instance-action")? {
                    (200, body) => return notice::aws_instance_action(&body).map(Some),
                    (404, _) => {}
                    (s, _) => return Err(format!("spot/instance-action: HTTP {s}")),
                }
                match self.get("/latest/meta-data/events/recommendations/rebalance")? {
                    (200, _) => Ok(Some(notice::aws_rebalance())),
                    (404, _) => Ok(None),
                    (s, _) => Err(format!("rebalance recommendation: HTTP {s}")),
                }
            }
            Provider::Gcp => match self.get("/computeMetadata/v1/instance/preempted")? {
                (200, body) => notice::gcp_preempted(&body, now),
                (s, _) => Err(format!("instance/preempted: HTTP {s}")),
            },
            Provider::Azure => {
                if self.azure_vm.is_none() {
                    if let Ok((200, name)) = self
                        .get("/metadata/instance/compute/name?api-version=2021-02-01&format=text")
                    {
                        self.azure_vm = Some(name.trim().to_string());
                    }
                }
                match self.get("/metadata/scheduledevents?api-version=2020-07-01")? {
                    (200, body) => notice::azure_events(&body, self.azure_vm.as_deref(), now),
                    (s, _) => Err(format!("scheduledevents: HTTP {s}")),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_and_unknown_ones_are_refused_with_the_choices() {
        assert_eq!("auto".parse::<SpotMode>(), Ok(SpotMode::Auto));
        assert_eq!("off".parse::<SpotMode>(), Ok(SpotMode::Off));
        assert_eq!(
            "gcp".parse::<SpotMode>(),
            Ok(SpotMode::Provider(Provider::Gcp))
        );
        let err = "ibm".parse::<SpotMode>().unwrap_err();
        assert!(err.contains("auto, off, aws, gcp or azure"), "{err}");
    }
}
