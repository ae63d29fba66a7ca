//! HTTP client of the dispatcher API: server and token resolution, JSON calls, streamed uploads
//! to presigned URLs.
//!
//! Why a module of its own: every remote command needs the same rules. Every call has a
//! timeout; an HTTP error shows the server's JSON error code and message; a connection failure
//! names the server; the token comes from the environment or the config file (never a flag,
//! which `ps` would show) and never appears in a log, an error or `Debug` output.

use std::fmt;
use std::fs::File;
use std::path::Path;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use serde::Deserialize;
use serde_json::Value;
use tessera_farm::config::{read_toml_file, Setting};
use ureq::Agent;

/// The API address used when neither `--server`, `TESSERA_SERVER` nor the config file names one.
pub const DEFAULT_SERVER: &str = "http://127.0.0.1:8080";

/// Limit of one API call, from connecting to the last byte of the answer.
const API_TIMEOUT: Duration = Duration::from_secs(30);
/// Limit of establishing a connection (API and uploads).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest stall of one socket read or write during an upload.
const UPLOAD_STALL: Duration = Duration::from_secs(60);

/// `--server`, shared by the remote commands.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ServerArgs {
    /// Dispatcher API URL [default: `server` in the config file's [client] table, else
    /// http://127.0.0.1:8080]. The token comes from TESSERA_TOKEN or the [client] table.
    #[arg(long, env = "TESSERA_SERVER")]
    pub server: Option<String>,
}

/// The `[client]` table of the config file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileClient {
    server: Option<String>,
    token: Option<String>,
}

/// The parts of the config file the client reads (other tables belong to other commands).
#[derive(Debug, Default, Deserialize)]
struct FileConfig {
    #[serde(default)]
    client: FileClient,
}

/// The server to talk to and the token to present.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientConfig {
    /// API base URL without a trailing slash.
    pub server: String,
    /// Bearer token (redacted in `Debug`).
    pub token: String,
}

impl fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientConfig")
            .field("server", &self.server)
            .field("token", &"<redacted>")
            .finish()
    }
}

impl ClientConfig {
    /// Layers `--server`/`TESSERA_SERVER` (`server`) and `TESSERA_TOKEN` (`token_env`) over the
    /// config file's `[client]` table over the default server, and checks both values.
    pub fn resolve(
        server: Option<String>,
        token_env: Option<String>,
        config_file: Option<&Path>,
    ) -> anyhow::Result<Self> {
        let file = read_toml_file::<FileConfig>(config_file)?.client;
        let server = Setting::layered("server", server, file.server)
            .or_else(|| DEFAULT_SERVER.to_string())
            .get();
        let server = server.trim().trim_end_matches('/').to_string();
        let scheme_ok = server.starts_with("http://") || server.starts_with("https://");
        if !scheme_ok || server.contains(char::is_whitespace) {
            bail!("server '{server}' must be an http:// or https:// URL");
        }
        let token_env = token_env.filter(|t| !t.is_empty());
        let Some(token) = Setting::layered("token", token_env, file.token).optional() else {
            bail!("no API token: set TESSERA_TOKEN, or `token` in the [client] table of the config file (--config)");
        };
        if token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()) {
            bail!("the API token must be non-empty printable ASCII without spaces");
        }
        Ok(ClientConfig { server, token })
    }
}

/// An error answer of the API: its status and the server's error code and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status.
    pub status: u16,
    /// The server's stable error code (`http_error` when the body held none).
    pub code: String,
    /// The server's message.
    pub message: String,
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HTTP {} {}: {}", self.status, self.code, self.message)
    }
}

impl std::error::Error for ApiError {}

/// A connection to one dispatcher API.
pub struct Client {
    cfg: ClientConfig,
    agent: Agent,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client").field("cfg", &self.cfg).finish()
    }
}

impl Client {
    /// A client with a 30 s limit on every call (10 s to connect).
    pub fn new(cfg: ClientConfig) -> Self {
        let agent: Agent = Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(API_TIMEOUT))
            .timeout_connect(Some(CONNECT_TIMEOUT))
            .build()
            .into();
        Client { cfg, agent }
    }

    /// The API base URL (for messages).
    pub fn server(&self) -> &str {
        &self.cfg.server
    }

    /// `GET path`: the answer's JSON.
    pub fn get(&self, path: &str) -> anyhow::Result<Value> {
        let url = format!("{}{path}", self.cfg.server);
        let answer = self
            .agent
            .get(&url)
            .header("authorization", &self.bearer())
            .call();
        self.finish("GET", path, answer)
    }

    /// `DELETE path`: the answer's JSON.
    pub fn delete(&self, path: &str) -> anyhow::Result<Value> {
        let url = format!("{}{path}", self.cfg.server);
        let answer = self
            .agent
            .delete(&url)
            .header("authorization", &self.bearer())
            .call();
        self.finish("DELETE", path, answer)
    }

    /// `POST path` with a JSON body (and an `Idempotency-Key` when given): the answer's JSON.
    pub fn post(
        &self,
        path: &str,
        body: &Value,
        idempotency_key: Option<&str>,
    ) -> anyhow::Result<Value> {
        let url = format!("{}{path}", self.cfg.server);
        let mut req = self
            .agent
            .post(&url)
            .header("authorization", &self.bearer())
            .content_type("application/json");
        if let Some(key) = idempotency_key {
            req = req.header("idempotency-key", key);
        }
        let answer = req.send(body.to_string());
        self.finish("POST", path, answer)
    }

    fn bearer(&self) -> String {
        format!("Bearer {}", self.cfg.token)
    }

    /// Turns an answer into its JSON, or an error naming the server, the call and the reason.
    fn finish(
        &self,
        method: &str,
        path: &str,
        answer: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> anyhow::Result<Value> {
        let server = &self.cfg.server;
        let mut resp =
            answer.map_err(|e| anyhow!("cannot reach the tessera server at {server}: {e}"))?;
        let status = resp.status().as_u16();
        let text = resp
            .body_mut()
            .read_to_string()
            .map_err(|e| anyhow!("{server}: {method} {path}: reading the answer: {e}"))?;
        let json: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if (200..300).contains(&status) {
            return Ok(json);
        }
        let err = ApiError {
            status,
            code: json["error"]["code"]
                .as_str()
                .unwrap_or("http_error")
                .to_string(),
            message: json["error"]["message"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| text.chars().take(200).collect()),
        };
        Err(anyhow::Error::new(err).context(format!("{server}: {method} {path}")))
    }
}

/// The URL without its query (a presigned URL's query is a credential: never shown).
pub fn redact_url(url: &str) -> &str {
    url.split('?').next().unwrap_or(url)
}

/// Time allowed for a whole upload of `len` bytes: 10 minutes plus one second per MiB.
pub fn upload_budget(len: u64) -> Duration {
    Duration::from_secs(600 + len / (1 << 20))
}

/// PUTs the file at `path` to a presigned `url`, streamed from disk with its length set.
/// Why streamed: inputs are often gigabytes; reading them whole would need that much memory.
pub fn put_file(url: &str, path: &Path) -> anyhow::Result<()> {
    let file = File::open(path).with_context(|| format!("{}: cannot open", path.display()))?;
    let len = file
        .metadata()
        .with_context(|| format!("{}: cannot read its size", path.display()))?
        .len();
    let agent: Agent = Agent::config_builder()
        .http_status_as_error(false)
        .timeout_connect(Some(CONNECT_TIMEOUT))
        .timeout_per_write(Some(UPLOAD_STALL))
        .timeout_per_read(Some(UPLOAD_STALL))
        .timeout_recv_response(Some(Duration::from_secs(300)))
        .timeout_per_call(Some(upload_budget(len)))
        .build()
        .into();
    let target = redact_url(url);
    // A declared length, not chunks: an upload URL may sign its Content-Length.
    let mut resp = agent
        .put(url)
        .header("content-length", len.to_string())
        .send(file)
        .map_err(|e| anyhow!("upload of {} to {target} failed: {e}", path.display()))?;
    let status = resp.status().as_u16();
    if (200..300).contains(&status) {
        return Ok(());
    }
    let text = resp.body_mut().read_to_string().unwrap_or_default();
    let tag = |name: &str| {
        let open = format!("<{name}>");
        let start = text.find(&open)? + open.len();
        let end = text[start..].find(&format!("</{name}>"))? + start;
        Some(text[start..end].to_string())
    };
    bail!(
        "upload of {} to {target} failed: HTTP {status} {}: {}",
        path.display(),
        tag("Code").unwrap_or_else(|| "http_error".into()),
        tag("Message").unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_and_token_layering() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t.toml");
        std::fs::write(
            &file,
            "[transcode]\nworkers = 2\n[client]\nserver = \"http://farm:9000/\"\ntoken = \"from-file\"\n",
        )
        .unwrap();
        let c = ClientConfig::resolve(None, None, Some(&file)).unwrap();
        assert_eq!(
            (c.server.as_str(), c.token.as_str()),
            ("http://farm:9000", "from-file")
        );
        let c = ClientConfig::resolve(Some("https://x".into()), Some("env".into()), Some(&file))
            .unwrap();
        assert_eq!((c.server.as_str(), c.token.as_str()), ("https://x", "env"));
        let c = ClientConfig::resolve(None, Some("t".into()), None).unwrap();
        assert_eq!(c.server, DEFAULT_SERVER);
        assert!(!format!("{c:?}").contains("\"t\""), "token in Debug: {c:?}");
    }

    #[test]
    fn bad_settings_are_refused_with_reasons() {
        let e = ClientConfig::resolve(None, None, None).unwrap_err();
        assert!(e.to_string().contains("TESSERA_TOKEN"), "{e}");
        let e = ClientConfig::resolve(Some("farm:80".into()), Some("t".into()), None).unwrap_err();
        assert!(e.to_string().contains("farm:80"), "{e}");
        let e = ClientConfig::resolve(None, Some("a b".into()), None).unwrap_err();
        assert!(!e.to_string().contains("a b"), "token echoed: {e}");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t.toml");
        std::fs::write(&file, "[client]\ntokn = \"x\"\n").unwrap();
        let e = ClientConfig::resolve(None, None, Some(&file)).unwrap_err();
        assert!(format!("{e:#}").contains("tokn"), "{e:#}");
    }

    #[test]
    fn urls_lose_their_credentials_in_messages() {
        assert_eq!(
            redact_url("http://s3:3900/in/uploads/a.mp4?X-Amz-Signature=abc"),
            "http://s3:3900/in/uploads/a.mp4"
        );
        assert_eq!(upload_budget(3 << 30), Duration::from_secs(600 + 3072));
    }
}
