//! Reading a child's pipes with bounded memory: stdout lines up to a cap, stderr as a tail.
//!
//! Why: a child parses untrusted media; what it writes must not grow the parent without
//! bound. A result line past the cap (a probe of an absurd packet count) fails the operation
//! instead of taking the dispatcher's memory; a decoder that logs per packet for hours keeps
//! only its last few kilobytes of stderr.

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncReadExt};
use tokio::task::JoinHandle;

/// Longest stdout line a child may write (its result line; a compact probe of a 48-hour
/// 60 fps source stays well below).
pub(crate) const MAX_LINE_BYTES: u64 = 256 << 20;

/// Stderr a child keeps in its parent: the last this many bytes (trimmed to ~2000 chars).
const STDERR_KEEP: usize = 8192;

/// The next line of `reader` without its newline (`None` at the end), or an error when a
/// line exceeds `max` bytes.
pub(crate) async fn next_line_capped<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    max: u64,
) -> std::io::Result<Option<String>> {
    let mut buf = Vec::new();
    let n = (&mut *reader)
        .take(max + 1)
        .read_until(b'\n', &mut buf)
        .await?;
    if n == 0 {
        return Ok(None);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
    } else if n as u64 > max {
        return Err(std::io::Error::other(format!(
            "child wrote a line longer than {max} bytes"
        )));
    }
    String::from_utf8(buf)
        .map(Some)
        .map_err(|_| std::io::Error::other("child wrote a line that is not UTF-8"))
}

/// Reads `stderr` to its end in the background, keeping only a recent tail in the returned
/// buffer.
pub(crate) fn stderr_tail<R: AsyncRead + Unpin + Send + 'static>(
    mut stderr: R,
) -> (Arc<Mutex<String>>, JoinHandle<()>) {
    let buffer = Arc::new(Mutex::new(String::new()));
    let sink = buffer.clone();
    let task = tokio::spawn(async move {
        let mut chunk = vec![0u8; 4096];
        while let Ok(n @ 1..) = stderr.read(&mut chunk).await {
            let mut text = sink.lock().unwrap_or_else(|p| p.into_inner());
            text.push_str(&String::from_utf8_lossy(&chunk[..n]));
            if text.len() > STDERR_KEEP {
                *text = super::tail_of(&text);
            }
        }
    });
    (buffer, task)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_are_capped_and_stderr_keeps_a_tail() {
        let data = b"short\nexactly10\nthis line is far too long\nlast".to_vec();
        let mut r = tokio::io::BufReader::new(&data[..]);
        assert_eq!(
            next_line_capped(&mut r, 10).await.unwrap().as_deref(),
            Some("short")
        );
        assert_eq!(
            next_line_capped(&mut r, 10).await.unwrap().as_deref(),
            Some("exactly10")
        );
        let err = next_line_capped(&mut r, 10).await.unwrap_err().to_string();
        assert!(err.contains("longer than 10"), "{err}");
        let mut r = tokio::io::BufReader::new(&b"last"[..]);
        assert_eq!(
            next_line_capped(&mut r, 10).await.unwrap().as_deref(),
            Some("last")
        );
        assert_eq!(next_line_capped(&mut r, 10).await.unwrap(), None);

        let noisy = "decode error at packet 12345\n".repeat(100_000);
        let (tail, task) = stderr_tail(std::io::Cursor::new(noisy.into_bytes()));
        task.await.unwrap();
        let kept = tail.lock().unwrap().clone();
        assert!(
            kept.len() <= STDERR_KEEP && kept.ends_with("12345\n"),
            "{}",
            kept.len()
        );
    }
}
