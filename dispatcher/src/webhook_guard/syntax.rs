//! The grammar a `callback_url` must keep, the one `/openapi.json` states as its pattern:
//! `http(s)://`, a DNS name (a label, then '.', a final label of 2-63 letters) or an address
//! literal, an optional port 1-65535 without leading zeros, then an optional path of RFC 3986
//! characters (percent escapes whole) and a query, no user info and no fragment.
//!
//! Why the server keeps it and not only the schema: a client generated from the schema must
//! be refused what the schema refuses, and a URL the HTTP parser would take loosely (`*` in a
//! path, an upper-case scheme, a port `0080`) is one the schema does not describe.

/// Characters of a path segment besides '/' and escapes (RFC 3986 `pchar`).
const PCHAR: &str = "-._~!$&'()*+,;=:@";

/// Checks `url` against the grammar; `named_hosts` (an allow-list of host names is set): a
/// name may be a single label, which the list then has to name.
pub(super) fn check(url: &str, named_hosts: bool) -> Result<(), String> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or("callback_url must be an http(s) URL (lower-case scheme)")?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    if authority.contains('@') {
        return Err("callback_url: user info (user@) is refused".into());
    }
    let (host, port) = match authority.strip_prefix('[') {
        // An IPv6 literal: the address checks decide.
        Some(v6) => match v6.split_once(']') {
            Some((_, after)) => ("", after.strip_prefix(':')),
            None => return Err("callback_url: an unclosed [address]".into()),
        },
        None => match authority.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        },
    };
    if let Some(p) = port {
        let ok = !p.starts_with('0') && p.parse::<u16>().is_ok_and(|n| n > 0);
        if !ok || !p.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("callback_url: port '{p}' is not 1-65535"));
        }
    }
    if !authority.starts_with('[') && host.parse::<std::net::Ipv4Addr>().is_err() {
        dns_name(host, named_hosts)?;
    }
    path_and_query(tail)
}

/// A host name: labels of letters, digits and inner hyphens (at most 63 each); without an
/// allow-list at least two, the last one letters only (2-63).
fn dns_name(host: &str, named_hosts: bool) -> Result<(), String> {
    let labels: Vec<&str> = host.split('.').collect();
    let label_ok = |l: &&str| {
        (1..=63).contains(&l.len())
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    let last = labels.last().copied().unwrap_or("");
    let top_ok = (2..=63).contains(&last.len()) && last.bytes().all(|b| b.is_ascii_alphabetic());
    let ok = labels.iter().all(label_ok) && (named_hosts || (labels.len() >= 2 && top_ok));
    if ok {
        Ok(())
    } else {
        Err(format!("callback_url: host '{host}' is not a DNS name"))
    }
}

/// The path (from '/') and query (from '?'): RFC 3986 characters, whole `%XX` escapes.
fn path_and_query(tail: &str) -> Result<(), String> {
    if tail.is_empty() {
        return Ok(());
    }
    if !tail.starts_with('/') {
        return Err("callback_url: a query or fragment needs a path ('/') first".into());
    }
    let (path, query) = match tail.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (tail, None),
    };
    let fine = |s: &str, extra: &str| {
        let b = s.as_bytes();
        let mut i = 0;
        while i < b.len() {
            let c = b[i] as char;
            if c == '%' {
                if !(i + 2 < b.len()
                    && b[i + 1].is_ascii_hexdigit()
                    && b[i + 2].is_ascii_hexdigit())
                {
                    return false;
                }
                i += 3;
                continue;
            }
            if !(c.is_ascii_alphanumeric() || PCHAR.contains(c) || extra.contains(c)) {
                return false;
            }
            i += 1;
        }
        true
    };
    if fine(path, "/") && query.is_none_or(|q| fine(q, "/?")) {
        Ok(())
    } else {
        Err("callback_url: the path or query has a character outside RFC 3986 (or a '#')".into())
    }
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn urls_the_schema_describes_pass_and_loose_ones_do_not() {
        for good in [
            "https://hooks.example.com/t",
            "http://a.bc",
            "http://0.aa/x/y?a=b&c=%2F",
            "https://Hooks.Example.COM:8443/p",
            "http://a.bc:65535/!$&'()*+,;=:@-._~",
            "http://93.184.216.34/x",
            "http://[2606:4700::1]/",
        ] {
            assert_eq!(check(good, false), Ok(()), "{good}");
            assert!(good.parse::<ureq::http::Uri>().is_ok(), "{good}");
        }
        for bad in [
            "http://0.aa/\"x",
            "http://0.aa/{x}",
            "HTTP://a.bc/",
            "http://a.bc:0080/",
            "http://a.bc:0/",
            "http://a.bc:65536/",
            "http://u@a.bc/",
            "http://a.bc?x=1",
            "http://a.bc/#frag",
            "http://a.bc/%zz",
            "http://a.b1/",
            "http://hooks/",
            "http://-a.bc/",
            "http://a.bc./",
        ] {
            assert!(check(bad, false).is_err(), "{bad}");
        }
        assert_eq!(check("http://hooks/", true), Ok(()));
    }
}
