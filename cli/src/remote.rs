//! The remote commands, `tessera submit/status/list/cancel`, against a dispatcher's HTTP API.
//!
//! Why: users of a shared farm submit and follow jobs from their own machine; a local file is
//! uploaded straight to S3 through a presigned URL, so the dispatcher never carries the bytes.
//! Results go to stdout (the job id, the output URI, readable lines or `--json`); progress,
//! notes and errors go to stderr, so scripts can read stdout.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use clap::ValueEnum;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

mod body;
pub use body::{default_output, job_body, stem, SubmitArgs};

use crate::args::{parse_bitrate, CodecArg};
use crate::client::{put_file, Client, ClientConfig, ServerArgs};
use crate::jobview::{describe, is_final, output_of, table, JobDisplay};

/// Arguments of `tessera status` and `tessera cancel`.
#[derive(Debug, Clone, clap::Args)]
pub struct JobArgs {
    /// The job id (as `tessera submit` printed it).
    pub id: String,
    /// Print the server's JSON instead of readable lines.
    #[arg(long)]
    pub json: bool,
    /// The server.
    #[command(flatten)]
    pub server: ServerArgs,
}

/// Job states, for `tessera list --state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StateArg {
    /// Accepted, not started.
    Queued,
    /// Input being split.
    Splitting,
    /// Segments being encoded.
    Encoding,
    /// Output being stitched.
    Stitching,
    /// Finished with an output.
    Done,
    /// Ended with an error.
    Failed,
    /// Cancelled on request.
    Cancelled,
}

/// `tessera list` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct ListArgs {
    /// Only jobs in this state.
    #[arg(long)]
    pub state: Option<StateArg>,
    /// At most this many jobs, newest first.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=500))]
    pub limit: u32,
    /// Print the server's JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// The server.
    #[command(flatten)]
    pub server: ServerArgs,
}

fn connect(server: &ServerArgs, config: Option<&Path>) -> anyhow::Result<Client> {
    let token = std::env::var("TESSERA_TOKEN").ok();
    Ok(Client::new(ClientConfig::resolve(
        server.server.clone(),
        token,
        config,
    )?))
}

/// Refuses ids that could change the request path: ids are 1-100 of `[A-Za-z0-9_-]`.
pub fn check_id(id: &str) -> anyhow::Result<()> {
    let ok = (1..=100).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !ok {
        bail!("job id '{id}' is not valid: expected letters, digits, '-' or '_'");
    }
    Ok(())
}

/// Asks the API for an upload URL for `path` and streams the file there; the input's URI.
fn upload(client: &Client, path: &Path) -> anyhow::Result<String> {
    let filename = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .with_context(|| format!("{}: not a file name", path.display()))?;
    let size = std::fs::metadata(path)
        .with_context(|| format!("{}: cannot read its size", path.display()))?
        .len();
    // The size is signed into the URL (the store takes exactly that many bytes) and tenants
    // must give it.
    let body = json!({"filename": filename, "size": size});
    let answer = client.post("/v1/uploads", &body, None)?;
    let (Some(url), Some(input)) = (answer["url"].as_str(), answer["input"].as_str()) else {
        bail!("{}: the upload answer has no url or input", client.server());
    };
    eprintln!("uploading {} ({size} bytes) to {input}", path.display());
    put_file(url, path)?;
    Ok(input.to_string())
}

/// `tessera submit`: uploads a local input, submits the job, prints its id; with `--wait`,
/// follows it and prints the output URI (an error for a failed or cancelled job).
pub fn submit(
    args: SubmitArgs,
    config: Option<&Path>,
    stop: &CancellationToken,
) -> anyhow::Result<()> {
    // Cheap local checks before any network call.
    let local = (!args.input.starts_with("s3://")).then(|| PathBuf::from(&args.input));
    if let Some(path) = &local {
        match std::fs::metadata(path) {
            Ok(m) if m.is_file() => {}
            Ok(_) => bail!("{}: not a regular file", path.display()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                bail!("{}: no such file", path.display())
            }
            Err(e) => bail!("{}: cannot read: {e}", path.display()),
        }
    }
    for b in [&args.bitrate, &args.max_bitrate].into_iter().flatten() {
        parse_bitrate(b)?;
    }
    if let Some(o) = &args.output {
        if !o.starts_with("s3://") {
            bail!("output '{o}' must be an s3://bucket/key URI");
        }
    }
    let client = connect(&args.server, config)?;
    let input = match &local {
        Some(path) => upload(&client, path)?,
        None => args.input.clone(),
    };
    let output = match &args.output {
        Some(o) => o.clone(),
        None => default_output(&input, &args.input, args.codec.unwrap_or(CodecArg::H264))?,
    };
    let body = job_body(&args, &input, &output)?;
    let answer = client.post("/v1/jobs", &body, args.idempotency_key.as_deref())?;
    let id = answer["id"]
        .as_str()
        .with_context(|| format!("{}: the submit answer has no job id", client.server()))?
        .to_string();
    println!("{id}");
    if !args.wait {
        return Ok(());
    }
    let job = wait(&client, &id, stop)?;
    match job["state"].as_str() {
        Some("done") => {
            println!("{}", output_of(&job).unwrap_or(output));
            Ok(())
        }
        state => bail!(
            "job {id} {}: {}: {}",
            state.unwrap_or("ended"),
            job["error"]["code"].as_str().unwrap_or("unknown"),
            job["error"]["message"].as_str().unwrap_or("no message")
        ),
    }
}

/// Whether a failed poll may be a passing fault: no answer, or a 5xx.
fn retryable(e: &anyhow::Error) -> bool {
    !matches!(e.downcast_ref::<crate::client::ApiError>(), Some(api) if api.status < 500)
}

/// Polls `GET /v1/jobs/{id}` every second until the job ends, showing progress on stderr.
/// Up to 5 failed polls in a row (connection failures, 5xx) are retried; a 4xx is not.
fn wait(client: &Client, id: &str, stop: &CancellationToken) -> anyhow::Result<Value> {
    let mut display = JobDisplay::new(id, std::io::stderr().is_terminal());
    let mut failures = 0;
    loop {
        match client.get(&format!("/v1/jobs/{id}")) {
            Ok(job) => {
                failures = 0;
                display.update(&job);
                if is_final(&job) {
                    display.finish();
                    return Ok(job);
                }
            }
            // Connection failures and 5xx answers may pass (a dispatcher restarting).
            Err(e) if failures < 5 && retryable(&e) => {
                failures += 1;
                eprintln!("warning: {e:#} (retrying)");
            }
            Err(e) => {
                display.finish();
                return Err(e);
            }
        }
        for _ in 0..10 {
            if stop.is_cancelled() {
                display.finish();
                bail!("stopped waiting; job {id} goes on (`tessera cancel {id}` stops it)");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// `tessera status ID`: the job as readable lines, or its JSON.
pub fn status(args: JobArgs, config: Option<&Path>) -> anyhow::Result<()> {
    check_id(&args.id)?;
    let client = connect(&args.server, config)?;
    let job = client.get(&format!("/v1/jobs/{}", args.id))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&job)?);
    } else {
        print!("{}", describe(&job));
    }
    Ok(())
}

/// `tessera list`: recent jobs as a table, or the JSON.
pub fn list(args: ListArgs, config: Option<&Path>) -> anyhow::Result<()> {
    let client = connect(&args.server, config)?;
    let mut path = format!("/v1/jobs?limit={}", args.limit);
    if let Some(s) = args.state {
        let name = s.to_possible_value().context("state name")?;
        path.push_str(&format!("&state={}", name.get_name()));
    }
    let answer = client.get(&path)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&answer)?);
    } else {
        let jobs = answer["jobs"].as_array().cloned().unwrap_or_default();
        print!("{}", table(&jobs));
    }
    Ok(())
}

/// `tessera cancel ID`: cancels a job that has not ended.
pub fn cancel(args: JobArgs, config: Option<&Path>) -> anyhow::Result<()> {
    check_id(&args.id)?;
    let client = connect(&args.server, config)?;
    let answer = client.delete(&format!("/v1/jobs/{}", args.id))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&answer)?);
    } else {
        println!(
            "job {} {}",
            args.id,
            answer["state"].as_str().unwrap_or("cancelled")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn flags_are_checked() {
        let r = crate::Cli::try_parse_from([
            "tessera",
            "submit",
            "a.mp4",
            "--crf",
            "20",
            "--bitrate",
            "1M",
        ]);
        assert!(r.is_err());
        assert!(crate::Cli::try_parse_from(["tessera", "list", "--limit", "0"]).is_err());
        assert!(crate::Cli::try_parse_from(["tessera", "list", "--state", "sleeping"]).is_err());
        assert!(check_id("0f3a9c").is_ok());
        assert!(check_id("../admin").is_err());
        assert!(check_id("").is_err());
    }
}
