//! A keep-alive HTTP/1.1 client on one TCP connection, just enough for the dispatcher's API.
//!
//! Why not curl (as `Farm::http` does): a process per request costs the load generator
//! several milliseconds of CPU, and at 200 requests a second on a 2-core machine that alone
//! would take a core from the dispatcher it measures. One connection answers requests in
//! order, so a pool of them keeps a steady rate while one waits.

use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// The largest response body read (the API's are a few kilobytes; `/metrics` more).
const MAX_BODY: usize = 8 << 20;

/// A connection to `host:port`, reopened when the server closes it.
pub struct Conn {
    addr: String,
    stream: Option<BufReader<TcpStream>>,
    timeout: Duration,
}

impl Conn {
    /// A connection to the `http://host:port` base of `api` (opened on first use).
    pub fn new(api: &str, timeout: Duration) -> Conn {
        let addr = api.trim_start_matches("http://").trim_end_matches('/');
        Conn {
            addr: addr.to_string(),
            stream: None,
            timeout,
        }
    }

    /// Sends one request and reads its answer: (status, body). A connection the server
    /// closed before answering is reopened and the request sent once more.
    pub async fn request(
        &mut self,
        method: &str,
        path: &str,
        token: &str,
        body: &[u8],
    ) -> Result<(u16, Vec<u8>), String> {
        let head = format!(
            "{method} {path} HTTP/1.1\r\nhost: {}\r\nauthorization: Bearer {token}\r\n\
             content-type: application/json\r\ncontent-length: {}\r\n\r\n",
            self.addr,
            body.len()
        );
        let (reused, timeout) = (self.stream.is_some(), self.timeout);
        match tokio::time::timeout(timeout, self.exchange(head.as_bytes(), body)).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(e)) if reused => {
                // A kept-alive connection the server dropped meanwhile: once more, fresh.
                self.stream = None;
                let again = self.exchange(head.as_bytes(), body);
                match tokio::time::timeout(timeout, again).await {
                    Ok(r) => r.map_err(|e2| format!("{e}; then {e2}")),
                    Err(_) => Err(format!("{e}; then timed out")),
                }
            }
            Ok(Err(e)) => {
                self.stream = None;
                Err(e)
            }
            Err(_) => {
                self.stream = None;
                Err(format!("no answer within {timeout:?}"))
            }
        }
    }

    async fn exchange(&mut self, head: &[u8], body: &[u8]) -> Result<(u16, Vec<u8>), String> {
        if self.stream.is_none() {
            let tcp = TcpStream::connect(&self.addr)
                .await
                .map_err(|e| format!("connect {}: {e}", self.addr))?;
            let _ = tcp.set_nodelay(true);
            self.stream = Some(BufReader::new(tcp));
        }
        let stream = self.stream.as_mut().expect("connected above");
        let w = stream.get_mut();
        w.write_all(head).await.map_err(|e| e.to_string())?;
        w.write_all(body).await.map_err(|e| e.to_string())?;
        let (status, length, close) = read_head(stream).await?;
        if length > MAX_BODY {
            return Err(format!("answer of {length} bytes"));
        }
        let mut answer = vec![0; length];
        stream
            .read_exact(&mut answer)
            .await
            .map_err(|e| e.to_string())?;
        if close {
            self.stream = None;
        }
        Ok((status, answer))
    }
}

/// Reads a response's status line and headers: (status, content length, whether the server
/// closes the connection after it).
async fn read_head(stream: &mut BufReader<TcpStream>) -> Result<(u16, usize, bool), String> {
    let mut line = String::new();
    let n = stream
        .read_line(&mut line)
        .await
        .map_err(|e| e.to_string())?;
    if n == 0 {
        return Err("connection closed before the answer".into());
    }
    let status = parse_status(&line).ok_or_else(|| format!("bad status line {line:?}"))?;
    let (mut length, mut close) = (None, false);
    loop {
        line.clear();
        stream
            .read_line(&mut line)
            .await
            .map_err(|e| e.to_string())?;
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
            match name.as_str() {
                "content-length" => length = value.parse().ok(),
                "connection" => close = value.eq_ignore_ascii_case("close"),
                "transfer-encoding" => return Err(format!("unsupported encoding {value}")),
                _ => {}
            }
        }
    }
    Ok((status, length.unwrap_or(0), close))
}

/// The status code of an `HTTP/1.1 202 Accepted` line.
fn parse_status(line: &str) -> Option<u16> {
    let mut parts = line.split_whitespace();
    parts.next().filter(|v| v.starts_with("HTTP/1."))?;
    parts.next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::parse_status;

    #[test]
    fn status_lines_are_read() {
        assert_eq!(parse_status("HTTP/1.1 202 Accepted\r\n"), Some(202));
        assert_eq!(parse_status("HTTP/1.0 429 Too Many Requests"), Some(429));
        assert_eq!(parse_status("SSH-2.0-OpenSSH"), None);
        assert_eq!(parse_status(""), None);
    }
}
