//! A local instance metadata service that speaks each cloud's spot-notice protocol, so the
//! worker's watcher is tested over HTTP as it runs on a spot machine:
//! - AWS IMDSv2: `PUT /latest/api/token` (needs the TTL header) gives a token that every
//!   `GET /latest/meta-data/...` must carry (401 without); `spot/instance-action` and
//!   `events/recommendations/rebalance` answer 404 until a notice is raised;
//! - GCP: `GET /computeMetadata/v1/instance/preempted` needs `Metadata-Flavor: Google` and
//!   answers `FALSE`/`TRUE` with the same header;
//! - Azure: `GET /metadata/scheduledevents` and `/metadata/instance/compute/name` need
//!   `Metadata: true`; a notice is a `Preempt` event for this VM with `NotBefore`.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The cloud whose protocol the server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cloud {
    /// AWS IMDSv2.
    Aws,
    /// GCP metadata server.
    Gcp,
    /// Azure instance metadata service.
    Azure,
}

/// What the service says now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Says {
    /// No notice.
    Nothing,
    /// An interruption.
    Interruption {
        /// When the machine goes away.
        at: SystemTime,
    },
    /// AWS only: a rebalance recommendation.
    Rebalance,
}

const TOKEN: &str = "imds-test-token";
/// The Azure VM's name (events naming another VM are not ours).
pub const AZURE_VM: &str = "tessera-test-vm";

/// The running service (its thread serves until the test process ends).
pub struct Imds {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    says: Arc<Mutex<Says>>,
    polls: Arc<Mutex<u64>>,
}

impl Imds {
    /// Starts a service speaking `cloud`'s protocol, saying nothing yet.
    pub fn start(cloud: Cloud) -> Imds {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind metadata service");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let says = Arc::new(Mutex::new(Says::Nothing));
        let polls = Arc::new(Mutex::new(0));
        let (s, p) = (says.clone(), polls.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let (s, p) = (s.clone(), p.clone());
                std::thread::spawn(move || serve(conn, cloud, &s, &p));
            }
        });
        Imds { url, says, polls }
    }

    /// Raises (or clears) a notice.
    pub fn say(&self, says: Says) {
        *self.says.lock().unwrap() = says;
    }

    /// Notice polls answered so far (instance-action, preempted, scheduledevents).
    pub fn polls(&self) -> u64 {
        *self.polls.lock().unwrap()
    }
}

/// A free TCP port on 127.0.0.1 (for a worker's `--metrics-listen`).
pub fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// The status of `GET http://127.0.0.1:{port}{path}`, or None when nothing answers.
pub fn get_status(port: u16, path: &str) -> Option<u16> {
    let mut c = TcpStream::connect(("127.0.0.1", port)).ok()?;
    c.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        c,
        "GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n"
    )
    .ok()?;
    let mut line = String::new();
    BufReader::new(c).read_line(&mut line).ok()?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn serve(conn: TcpStream, cloud: Cloud, says: &Mutex<Says>, polls: &Mutex<u64>) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let mut reader = BufReader::new(conn.try_clone().expect("clone"));
    let mut conn = conn;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (method, path) = (
            parts.next().unwrap_or("").to_string(),
            parts.next().unwrap_or("").to_string(),
        );
        let mut headers = Vec::new();
        let mut length = 0usize;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                let (k, v) = (k.trim().to_ascii_lowercase(), v.trim().to_string());
                if k == "content-length" {
                    length = v.parse().unwrap_or(0);
                }
                headers.push((k, v));
            }
        }
        let mut body = vec![0; length];
        if std::io::Read::read_exact(&mut reader, &mut body).is_err() {
            return;
        }
        let now = *says.lock().unwrap();
        let (status, extra, text) = answer(cloud, &method, &path, &headers, now, polls);
        let reply = format!(
            "HTTP/1.1 {status} X\r\ncontent-length: {}\r\ncontent-type: text/plain\r\n{extra}\r\n{text}",
            text.len()
        );
        if conn.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}

/// Status, extra header lines and body for one request.
fn answer(
    cloud: Cloud,
    method: &str,
    path: &str,
    headers: &[(String, String)],
    says: Says,
    polls: &Mutex<u64>,
) -> (u16, String, String) {
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let poll = || *polls.lock().unwrap() += 1;
    let none = (404, String::new(), "Not Found".to_string());
    match cloud {
        Cloud::Aws => {
            if method == "PUT" && path == "/latest/api/token" {
                return match header("x-aws-ec2-metadata-token-ttl-seconds") {
                    Some(_) => (200, String::new(), TOKEN.into()),
                    None => (400, String::new(), "Missing TTL".into()),
                };
            }
            if header("x-aws-ec2-metadata-token") != Some(TOKEN) {
                return (401, String::new(), "Unauthorized".into());
            }
            match (path, says) {
                ("/latest/meta-data/spot/instance-action", Says::Interruption { at }) => {
                    poll();
                    let body = format!(r#"{{"action": "terminate", "time": "{}"}}"#, rfc3339(at));
                    (200, String::new(), body)
                }
                ("/latest/meta-data/spot/instance-action", _) => {
                    poll();
                    none
                }
                ("/latest/meta-data/events/recommendations/rebalance", Says::Rebalance) => (
                    200,
                    String::new(),
                    format!(r#"{{"noticeTime": "{}"}}"#, rfc3339(SystemTime::now())),
                ),
                _ => none,
            }
        }
        Cloud::Gcp => {
            if header("metadata-flavor") != Some("Google") {
                return (
                    403,
                    String::new(),
                    "Missing Metadata-Flavor:Google header".into(),
                );
            }
            let flavor = "metadata-flavor: Google\r\n".to_string();
            match path {
                "/computeMetadata/v1/" => (200, flavor, "instance/\nproject/\n".into()),
                "/computeMetadata/v1/instance/preempted" => {
                    poll();
                    let v = matches!(says, Says::Interruption { .. });
                    (200, flavor, if v { "TRUE" } else { "FALSE" }.into())
                }
                _ => (404, flavor, "Not Found".into()),
            }
        }
        Cloud::Azure => {
            if header("metadata") != Some("true") {
                return (
                    400,
                    String::new(),
                    "Bad request: missing Metadata header".into(),
                );
            }
            let path_only = path.split('?').next().unwrap_or("");
            match path_only {
                "/metadata/instance" => (200, String::new(), "{}".into()),
                "/metadata/instance/compute/name" => (200, String::new(), AZURE_VM.into()),
                "/metadata/scheduledevents" => {
                    poll();
                    let events = match says {
                        Says::Interruption { at } => format!(
                            r#"[{{"EventId": "e1", "EventType": "Preempt", "ResourceType": "VirtualMachine", "Resources": ["{AZURE_VM}"], "EventStatus": "Scheduled", "NotBefore": "{}", "Description": "", "EventSource": "Platform", "DurationInSeconds": -1}}, {{"EventId": "e2", "EventType": "Preempt", "ResourceType": "VirtualMachine", "Resources": ["another-vm"], "EventStatus": "Scheduled", "NotBefore": "{}"}}]"#,
                            rfc1123(at),
                            rfc1123(SystemTime::now())
                        ),
                        _ => "[]".into(),
                    };
                    (
                        200,
                        String::new(),
                        format!(r#"{{"DocumentIncarnation": 1, "Events": {events}}}"#),
                    )
                }
                _ => none,
            }
        }
    }
}

fn civil(t: SystemTime) -> (i64, i64, i64, i64, i64, i64, i64) {
    let secs = t.duration_since(UNIX_EPOCH).expect("after 1970").as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = tessera_model::civil::civil_from_days(days);
    let weekday = (days + 4).rem_euclid(7); // 1970-01-01 was a Thursday
    (y, m, d, rem / 3600, rem / 60 % 60, rem % 60, weekday)
}

fn rfc3339(t: SystemTime) -> String {
    let (y, m, d, h, mi, s, _) = civil(t);
    format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

fn rfc1123(t: SystemTime) -> String {
    const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let (y, m, d, h, mi, s, wd) = civil(t);
    format!(
        "{}, {d:02} {} {y} {h:02}:{mi:02}:{s:02} GMT",
        DAYS[wd as usize],
        MONTHS[(m - 1) as usize]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_written_as_the_providers_do() {
        let t = UNIX_EPOCH + Duration::from_secs(1_474_309_787);
        assert_eq!(rfc1123(t), "Mon, 19 Sep 2016 18:29:47 GMT");
        assert_eq!(rfc3339(t), "2016-09-19T18:29:47Z");
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(1_709_251_199)),
            "2024-02-29T23:59:59Z"
        );
    }
}
