//! A door in front of the S3 store that refuses chosen writes, so delivery failures are tested
//! against the real store (Garage) with the real client, not a fake of either.
//!
//! Every request is read up to the end of its head, judged, and either answered `403
//! AccessDenied` (what a bucket policy that denies the write answers) to a copy, `503
//! SlowDown` (a store in trouble) to a delete while an outage lasts (and to a copy held by a
//! stall, once it ends), or passed to the store byte for byte with `Connection: close` added,
//! so that the next request of the client comes on a new connection and is judged too. The
//! signature is untouched: SigV4 signs neither the connection header nor anything the door
//! changes.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use crate::amqp_door::Direction;
pub use rules::Trouble;
use rules::{
    cut_read, head_held, held, muting, passed_copy, refuse, stalled, troubled, unavailable, Outage,
    Rule, Stall, State,
};

mod rules;

/// The running door (its threads serve until the test process ends).
pub struct S3Faults {
    /// `http://127.0.0.1:PORT`: give it to the client whose writes may be refused.
    pub endpoint: String,
    state: Arc<Mutex<State>>,
}

impl S3Faults {
    /// Starts a door in front of the store at `upstream` (`http://HOST:PORT`).
    pub fn start(upstream: &str) -> S3Faults {
        let upstream = upstream
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string();
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the S3 door");
        let endpoint = format!("http://{}", listener.local_addr().expect("door address"));
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let (state, upstream) = (shared.clone(), upstream.clone());
                std::thread::spawn(move || serve(client, &upstream, &state));
            }
        });
        S3Faults { endpoint, state }
    }

    /// From now on, lets `pass` copies into `path_prefix` (`/bucket/prefix`) through and
    /// refuses every later one; replaces the rule before it and forgets what was refused.
    pub fn refuse_copies(&self, path_prefix: &str, pass: usize) {
        let mut state = self.state.lock().expect("door state");
        state.rule = Some(Rule {
            path_prefix: path_prefix.to_string(),
            pass,
            seen: 0,
        });
        state.refused.clear();
    }

    /// Answers every delete under `path_prefix` (`/bucket/prefix`) `503 SlowDown` for
    /// `lasting` from the first of them (so the outage meets the rollback however long the
    /// job ran before it); replaces the outage before it and forgets its deletes.
    pub fn unavailable_deletes(&self, path_prefix: &str, lasting: Duration) {
        let mut state = self.state.lock().expect("door state");
        state.outage = Some(Outage {
            path_prefix: path_prefix.to_string(),
            lasting,
            since: None,
        });
        state.unavailable.clear();
    }

    /// From now on, holds every copy into `path_prefix` (`/bucket/prefix`) unanswered until
    /// [`S3Faults::heal`], then answers it `503 SlowDown` without passing it on: the client
    /// that sent it may have been killed meanwhile, and a copy it no longer waits for must
    /// not land. A live client retries. Why: a delivery that stays in flight, to kill its
    /// dispatcher in.
    pub fn stall_copies(&self, path_prefix: &str) {
        self.stall_copies_after(path_prefix, 0);
    }

    /// As [`S3Faults::stall_copies`], once `pass` copies into `path_prefix` went through:
    /// a delivery of many copies (a package) held in its middle.
    pub fn stall_copies_after(&self, path_prefix: &str, pass: usize) {
        let mut state = self.state.lock().expect("door state");
        state.stall = Some(Stall {
            path_prefix: path_prefix.to_string(),
            pass,
            seen: 0,
        });
        state.stalled.clear();
    }

    /// From now on, passes every copy into `path_prefix` (`/bucket/prefix`) on to the store
    /// and holds its answer until [`S3Faults::heal`], then closes the connection unanswered:
    /// the copy landed, its client never heard. Why: a dispatcher killed between a copy
    /// and its record of it.
    pub fn mute_copies(&self, path_prefix: &str) {
        self.state.lock().expect("door state").mute = Some(path_prefix.to_string());
    }

    /// The paths of every copy passed on to the store so far (refused and held ones not).
    pub fn copies(&self) -> Vec<String> {
        self.state.lock().expect("door state").copies.clone()
    }

    /// Lets everything through again (held copies are answered 503, muted ones closed).
    pub fn heal(&self) {
        let mut state = self.state.lock().expect("door state");
        (state.rule, state.outage, state.stall, state.mute) = (None, None, None, None);
        (state.cut, state.trouble) = (None, None);
    }

    /// Ends a stall only (held copies are answered 503), leaving the other rules.
    pub fn end_stall(&self) {
        self.state.lock().expect("door state").stall = None;
    }

    /// From now on, passes every GET whose path holds `part` (`/encoded/`: the reads of a
    /// stitch) on `delay` late; replaces the rule before it. Why: a task made to run long
    /// without slowing the tasks before it (review M1's stitch past the consumer timeout).
    pub fn slow_reads(&self, part: &str, delay: Duration) {
        self.state.lock().expect("door state").slow_reads = Some((part.to_string(), delay));
    }

    /// Cuts the response of the next GET whose path holds `part` after `bytes` bytes (head
    /// included) and closes the connection: a body that breaks off mid-transfer, as a
    /// partition or a store restart leaves it (once; the reads after it pass).
    pub fn cut_next_read(&self, part: &str, bytes: usize) {
        self.state.lock().expect("door state").cut_read = Some((part.to_string(), bytes));
    }

    /// Holds every HEAD whose path holds `part` until [`S3Faults::release_heads`], then
    /// passes it on. Why: the dispatcher's delivery HEADs the work object before it copies
    /// it; a test changes the object in between (review N6).
    pub fn hold_heads(&self, part: &str) {
        let mut state = self.state.lock().expect("door state");
        state.hold_heads = Some(part.to_string());
        state.heads_held.clear();
    }

    /// Lets the held HEADs (and every later one) pass on.
    pub fn release_heads(&self) {
        self.state.lock().expect("door state").hold_heads = None;
    }

    /// The paths of the HEADs held since [`S3Faults::hold_heads`].
    pub fn heads_held(&self) -> Vec<String> {
        self.state.lock().expect("door state").heads_held.clone()
    }

    /// Answers `trouble` from now for `lasting` (on every other request for 503 and 429).
    pub fn trouble(&self, trouble: Trouble, lasting: Duration) {
        let mut state = self.state.lock().expect("door state");
        state.trouble = Some((trouble, Instant::now() + lasting));
    }

    /// Partitions the client from the store until [`S3Faults::mend`]: `Up` holds new
    /// requests (never passed on; the connection is closed once mended, as a client that
    /// timed out finds it), `Down` passes requests on and holds the responses (the store
    /// acts, the client does not hear), `Both` does both.
    pub fn cut(&self, direction: Direction) {
        self.state.lock().expect("door state").cut = Some(direction);
    }

    /// Ends a partition and trouble (the copy and delete rules stay).
    pub fn mend(&self) {
        let mut state = self.state.lock().expect("door state");
        (state.cut, state.trouble) = (None, None);
    }

    /// Requests answered with trouble so far (503, 429 or delayed).
    pub fn troubled(&self) -> usize {
        self.state.lock().expect("door state").troubled
    }

    /// The paths of the copies held since the stall was set.
    pub fn stalled(&self) -> Vec<String> {
        self.state.lock().expect("door state").stalled.clone()
    }

    /// The paths of the copies refused since the rule was set.
    pub fn refused(&self) -> Vec<String> {
        self.state.lock().expect("door state").refused.clone()
    }

    /// The paths of the deletes answered 503 since the outage was set.
    pub fn unavailable(&self) -> Vec<String> {
        self.state.lock().expect("door state").unavailable.clone()
    }
}

/// Serves one client connection: one request, judged, then refused or passed on.
fn serve(mut client: TcpStream, upstream: &str, state: &Mutex<State>) {
    let _ = client.set_read_timeout(Some(Duration::from_secs(60)));
    let Some((head, rest)) = read_head(&mut client) else {
        return;
    };
    if held(state, Direction::Up) {
        while held(state, Direction::Up) {
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = client.shutdown(Shutdown::Both);
        return;
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    let mut lines = text.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let is_copy =
        method == "PUT" && lines.any(|l| l.to_ascii_lowercase().starts_with("x-amz-copy-source:"));
    if is_copy && stalled(state, path) {
        let message = "Please reduce your request rate (the test's stall ended)";
        return answer(client, "503 Slow Down", "SlowDown", message, path);
    }
    if is_copy && refuse(state, path) {
        let message = "Access Denied by the test's fault rule";
        return answer(client, "403 Forbidden", "AccessDenied", message, path);
    }
    if method == "HEAD" {
        head_held(state, path);
    }
    if method == "DELETE" && unavailable(state, path) {
        let message = "Please reduce your request rate (the test's outage)";
        return answer(client, "503 Slow Down", "SlowDown", message, path);
    }
    let cut_after = (method == "GET").then(|| cut_read(state, path)).flatten();
    if method == "GET" {
        let slow = state.lock().expect("door state").slow_reads.clone();
        if let Some((_, delay)) = slow.filter(|(part, _)| path.contains(part.as_str())) {
            std::thread::sleep(delay);
        }
    }
    match troubled(state) {
        Some(Trouble::SlowDown) => {
            let message = "Please reduce your request rate (the test's trouble)";
            return answer(client, "503 Slow Down", "SlowDown", message, path);
        }
        Some(Trouble::TooMany) => {
            let message = "Too many requests (the test's trouble)";
            return answer(
                client,
                "429 Too Many Requests",
                "TooManyRequests",
                message,
                path,
            );
        }
        Some(Trouble::Latency(delay)) => std::thread::sleep(delay),
        None => {}
    }
    let Ok(mut server) = TcpStream::connect(upstream) else {
        let _ = client.shutdown(Shutdown::Both);
        return;
    };
    let muted = is_copy && passed_copy(state, path);
    let head: String = text
        .split("\r\n")
        .filter(|l| !l.to_ascii_lowercase().starts_with("connection:"))
        .filter(|l| !l.is_empty())
        .map(|l| format!("{l}\r\n"))
        .collect();
    let sent = server
        .write_all(format!("{head}connection: close\r\n\r\n").as_bytes())
        .and_then(|()| server.write_all(&rest));
    if sent.is_err() {
        let _ = client.shutdown(Shutdown::Both);
        return;
    }
    // The rest of the request body one way, the whole response the other.
    if let (Ok(mut from_client), Ok(mut to_server)) = (client.try_clone(), server.try_clone()) {
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut from_client, &mut to_server);
        });
    }
    if muted {
        // The store copies and answers; the client hears nothing until the door heals.
        let _ = std::io::copy(&mut server, &mut std::io::sink());
        while muting(state) {
            std::thread::sleep(Duration::from_millis(100));
        }
    } else {
        let limit = cut_after.unwrap_or(usize::MAX);
        respond(&mut server, &mut client, state, limit);
    }
    let _ = client.shutdown(Shutdown::Both);
    let _ = server.shutdown(Shutdown::Both);
}

/// Copies the store's response to the client, at most `limit` bytes, each chunk waiting
/// while a partition holds responses.
fn respond(server: &mut TcpStream, client: &mut TcpStream, state: &Mutex<State>, limit: usize) {
    let (mut buf, mut left) = ([0u8; 16384], limit);
    while let Ok(n) = server.read(&mut buf) {
        if n == 0 || left == 0 {
            return;
        }
        while held(state, Direction::Down) {
            std::thread::sleep(Duration::from_millis(100));
        }
        let n = n.min(left);
        left -= n;
        if client.write_all(&buf[..n]).is_err() {
            return;
        }
    }
}

/// Answers the request with `status` and an S3 error of `code`, then closes.
fn answer(mut client: TcpStream, status: &str, code: &str, message: &str, path: &str) {
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{code}</Code>\
         <Message>{message}</Message><Resource>{path}</Resource></Error>"
    );
    let _ = write!(
        client,
        "HTTP/1.1 {status}\r\ncontent-type: application/xml\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = client.shutdown(Shutdown::Both);
}

/// Reads a request head (up to and without the blank line); returns it and the bytes read
/// past it (the start of the body). None if the client closed or sent no head in 64 KiB.
fn read_head(client: &mut TcpStream) -> Option<(Vec<u8>, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            buf.truncate(end);
            return Some((buf, rest));
        }
        if buf.len() > 64 * 1024 {
            return None;
        }
        match client.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}
