//! Where a webhook may go: public addresses only, unless the farm's allow-list names the host
//! or the network; checked when the job is submitted and again on the address the call
//! connects to, with no redirects and no proxy.
//!
//! Why: a `callback_url` is chosen by whoever submits the job. Unchecked, it makes the
//! dispatcher POST (or GET, after a redirect) to its own loopback, the cloud metadata
//! service or any internal service: server-side request forgery. Checking the name at submit
//! is not enough (a public name can resolve to 127.0.0.1, or change its answer between the
//! check and the call), so the resolver that feeds the connection filters the addresses it
//! hands on: the call goes to an address that was checked.

mod syntax;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use std::time::Duration;

use ureq::config::Config;
use ureq::http::Uri;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{DefaultConnector, NextTimeout};

/// The farm's webhook policy: extra hosts and networks beyond the public internet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WebhookGuard {
    /// Host names (`hooks.example.com`) or suffixes (`*.example.com`); when any is given, a
    /// callback's host must match one (or be an address inside `nets`).
    hosts: Vec<String>,
    /// Networks (`10.1.0.0/16`, `127.0.0.1`) a callback may reach besides public addresses.
    nets: Vec<(IpAddr, u8)>,
}

impl WebhookGuard {
    /// Parses allow-list entries: each a host name, `*.suffix`, an address or a CIDR network.
    pub fn parse(entries: &[String]) -> Result<Self, String> {
        let mut guard = WebhookGuard::default();
        for entry in entries.iter().map(|e| e.trim()).filter(|e| !e.is_empty()) {
            if let Some((addr, bits)) = entry.split_once('/') {
                let ip: IpAddr = addr
                    .parse()
                    .map_err(|_| format!("webhook allow-list: '{entry}' is not a network"))?;
                let max = if ip.is_ipv4() { 32 } else { 128 };
                let bits: u8 = bits
                    .parse()
                    .ok()
                    .filter(|b| *b <= max)
                    .ok_or_else(|| format!("webhook allow-list: '{entry}' has a bad prefix"))?;
                guard.nets.push((ip, bits));
            } else if let Ok(ip) = entry.parse::<IpAddr>() {
                guard.nets.push((ip, if ip.is_ipv4() { 32 } else { 128 }));
            } else {
                guard.hosts.push(entry.to_ascii_lowercase());
            }
        }
        Ok(guard)
    }

    /// Checks a callback URL at submit: http(s), a host the policy allows, and, for an address
    /// literal, an address it allows. Names are resolved only when the call is made.
    pub fn check_url(&self, url: &str) -> Result<(), String> {
        syntax::check(url, !self.hosts.is_empty())?;
        let uri: Uri = url
            .parse()
            .map_err(|_| "callback_url is not a valid URL".to_string())?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) {
            return Err("callback_url must be an http(s) URL".into());
        }
        let host = uri
            .host()
            .ok_or("callback_url has no host")?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        if let Ok(ip) = host.parse::<IpAddr>() {
            return if self.address_allowed(ip) {
                Ok(())
            } else {
                Err(format!(
                    "callback_url: {ip} is not a public address (loopback, private, link-local \
                     and metadata addresses are refused unless the farm's webhook allow-list \
                     names them)"
                ))
            };
        }
        if host == "localhost" || host.ends_with(".localhost") {
            return Err("callback_url: localhost is refused".into());
        }
        if !self.hosts.is_empty() && !self.host_allowed(&host) {
            return Err(format!(
                "callback_url: host {host} is not in the farm's webhook allow-list"
            ));
        }
        Ok(())
    }

    /// The allow-list's host names and `*.suffix` entries (lowercase): the API's schema
    /// states them as the hosts a `callback_url` may name.
    pub fn hosts(&self) -> &[String] {
        &self.hosts
    }

    fn host_allowed(&self, host: &str) -> bool {
        self.hosts.iter().any(|h| match h.strip_prefix("*.") {
            Some(suffix) => host.ends_with(&format!(".{suffix}")),
            None => h == host,
        })
    }

    /// Whether a call may connect to `ip`: a public address, or one inside an allowed network.
    pub fn address_allowed(&self, ip: IpAddr) -> bool {
        is_public(ip)
            || self
                .nets
                .iter()
                .any(|&(net, bits)| in_network(ip, net, bits))
    }

    /// An HTTP agent whose every connection goes to an address this guard allows: no
    /// redirects, no proxy, a 10 s limit per call.
    pub fn agent(self: &Arc<Self>) -> ureq::Agent {
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(10)))
            .http_status_as_error(false)
            .max_redirects(0)
            .proxy(None)
            .build();
        let resolver = GuardedResolver {
            guard: self.clone(),
            inner: DefaultResolver::default(),
        };
        ureq::Agent::with_parts(config, DefaultConnector::default(), resolver)
    }
}

/// Resolves with the system resolver, then keeps only the addresses the guard allows.
struct GuardedResolver {
    guard: Arc<WebhookGuard>,
    inner: DefaultResolver,
}

impl std::fmt::Debug for GuardedResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuardedResolver")
            .field("guard", &self.guard)
            .finish()
    }
}

impl Resolver for GuardedResolver {
    fn resolve(
        &self,
        uri: &Uri,
        config: &Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let resolved = self.inner.resolve(uri, config, timeout)?;
        let mut kept = self.empty();
        for addr in resolved.iter() {
            if self.guard.address_allowed(addr.ip()) {
                kept.push(*addr);
            } else {
                tracing::warn!(host = ?uri.host(), ip = %addr.ip(), "webhook address refused");
            }
        }
        if kept.is_empty() {
            return Err(ureq::Error::BadUri(format!(
                "{}: resolves only to addresses webhooks may not reach",
                uri.host().unwrap_or("?")
            )));
        }
        Ok(kept)
    }
}

fn in_network(ip: IpAddr, net: IpAddr, bits: u8) -> bool {
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

/// Whether `ip` is a public unicast address: not loopback, private, shared (CGNAT),
/// link-local (cloud metadata), documentation, benchmarking, reserved, multicast or
/// unspecified. IPv6 addresses that carry an IPv4 address (mapped `::ffff:a.b.c.d` and the
/// deprecated compatible `::a.b.c.d`) are judged as that IPv4 address; tunnel and
/// translation prefixes that reach IPv4 hosts (6to4, Teredo, NAT64) are refused whole,
/// since the host behind them cannot be judged from the address.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) if v6.is_loopback() || v6.is_unspecified() => false,
        IpAddr::V6(v6) => match v6.to_ipv4() {
            Some(v4) => is_public_v4(v4),
            None => is_public_v6(v6),
        },
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let o = ip.octets();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_broadcast()
        || ip.is_documentation()
        || ip.is_multicast()
        || o[0] == 0
        || (o[0] == 100 && (64..128).contains(&o[1]))
        || (o[0] == 192 && o[1] == 0 && o[2] == 0)
        || (o[0] == 198 && (18..20).contains(&o[1]))
        || o[0] >= 240)
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        || (s[0] & 0xfe00) == 0xfc00 // unique local fc00::/7
        || (s[0] & 0xffc0) == 0xfe80 // link-local fe80::/10
        || (s[0] & 0xffc0) == 0xfec0 // site-local fec0::/10 (deprecated, still routed inside)
        || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
        || (s[0] == 0x2001 && s[1] == 0x0000) // Teredo 2001::/32
        || s[0] == 0x2002 // 6to4 2002::/16
        || (s[0] == 0x0064 && s[1] == 0xff9b) // NAT64 64:ff9b::/96 and 64:ff9b:1::/48
        || (s[0] == 0x0100 && s[1..4] == [0, 0, 0])) // discard-only 100::/64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_targets_are_refused_and_public_ones_taken() {
        let open = WebhookGuard::default();
        for url in [
            "http://127.0.0.1:15672/api/overview",
            "http://169.254.169.254/latest/meta-data/",
            "http://[::1]/",
            "http://[::ffff:127.0.0.1]/",
            "http://10.1.2.3/",
            "http://192.168.0.1/",
            "http://172.16.0.1/",
            "http://100.64.0.1/",
            "http://[fd00::1]/",
            "http://[fe80::1]/",
            "http://[fec0::1]/",
            "http://[2002:7f00:1::1]/",
            "http://[2002:5db8:d822::1]/",
            "http://[2001:0:4136:e378::1]/",
            "http://[::127.0.0.1]/",
            "http://[::169.254.169.254]/",
            "http://[64:ff9b:1::a00:1]/",
            "http://[100::1]/",
            "http://0.0.0.0/",
            "http://localhost:8080/",
            "ftp://example.com/",
            "not a url",
        ] {
            assert!(open.check_url(url).is_err(), "{url}");
        }
        for url in [
            "https://hooks.example.com/t",
            "http://93.184.216.34/x",
            "http://[2606:4700::1]/",
        ] {
            assert!(open.check_url(url).is_ok(), "{url}");
        }
    }

    #[test]
    fn the_allow_list_names_hosts_and_networks() {
        let entries = [
            "*.example.com",
            "hooks.internal",
            "10.1.0.0/16",
            "127.0.0.1",
        ]
        .map(String::from);
        let guard = WebhookGuard::parse(&entries).unwrap();
        assert!(guard.check_url("https://a.example.com/").is_ok());
        assert!(guard.check_url("http://hooks.internal/").is_ok());
        assert!(
            guard.check_url("http://other.org/").is_err(),
            "hosts are limited"
        );
        assert!(guard.check_url("http://10.1.9.9/").is_ok());
        assert!(guard.check_url("http://10.2.0.1/").is_err());
        assert!(guard.check_url("http://127.0.0.1:9/").is_ok());
        assert!(guard.address_allowed("10.1.200.1".parse().unwrap()));
        assert!(!guard.address_allowed("169.254.169.254".parse().unwrap()));
        for bad in ["10.0.0.0/33", "zz/8"] {
            assert!(WebhookGuard::parse(&[bad.to_string()]).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_name_that_resolves_to_loopback_is_refused_when_called() {
        // The check at submit cannot see where a name points; the call's resolver can.
        let guard = Arc::new(WebhookGuard::default());
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let err = guard
            .agent()
            .post(&format!("http://localhost:{port}/hook"))
            .send(&b"{}"[..])
            .unwrap_err()
            .to_string();
        assert!(err.contains("may not reach"), "{err}");
        listener.set_nonblocking(true).unwrap();
        assert!(
            listener.accept().is_err(),
            "a connection reached the listener"
        );
    }
}
