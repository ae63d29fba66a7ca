//! Running external programs (the `tessera` binary, `ffmpeg`, `ffprobe`)
//! with captured output, a timeout and failure messages that show the command.

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// Default limit for one `tessera` run; override with `TESSERA_TEST_TIMEOUT_S`.
const DEFAULT_TIMEOUT_S: u64 = 300;

/// The finished run of one external command.
#[derive(Debug)]
pub struct Run {
    /// The command line, shell-quoted, for failure messages.
    pub cmdline: String,
    /// How the process ended (a signal, or a timeout kill, shows as no code).
    pub status: ExitStatus,
    /// Whether the harness killed it for running past its time limit.
    pub timed_out: bool,
    /// Everything it wrote to standard output (lossy UTF-8).
    pub stdout: String,
    /// Everything it wrote to standard error (lossy UTF-8).
    pub stderr: String,
    /// Wall-clock time it ran.
    pub elapsed: Duration,
}

impl Run {
    /// A multi-line description (command, exit status, output tails) for
    /// assertion messages.
    pub fn describe(&self) -> String {
        format!(
            "command: {}\nstatus: {}{} after {:.1}s\n--- stderr (tail) ---\n{}\n--- stdout (tail) ---\n{}",
            self.cmdline,
            self.status,
            if self.timed_out { " (killed: timed out)" } else { "" },
            self.elapsed.as_secs_f64(),
            tail(&self.stderr, 4000),
            tail(&self.stdout, 2000),
        )
    }

    /// Panics with [`Run::describe`] unless the command exited with status 0.
    pub fn assert_success(&self) -> &Self {
        assert!(
            self.status.success() && !self.timed_out,
            "command failed\n{}",
            self.describe()
        );
        self
    }
}

/// The last `max` bytes of `s` (cut at a character boundary).
pub fn tail(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// Quotes one argument for display in a shell-like command line.
fn quote(arg: &OsStr) -> String {
    let s = arg.to_string_lossy();
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if plain {
        s.into_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Runs `program` with `args`, capturing stdout and stderr, and kills it
/// after `timeout`. Panics only if the program cannot be started.
pub fn run_command<I, S>(program: &Path, args: I, timeout: Duration) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    run_command_env(program, args, &[], timeout)
}

/// [`run_command`] with `env` set for the program (over this process's environment).
pub fn run_command_env<I, S>(
    program: &Path,
    args: I,
    env: &[(&str, &str)],
    timeout: Duration,
) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let args: Vec<OsString> = args.into_iter().map(|a| a.as_ref().to_owned()).collect();
    let cmdline = std::iter::once(program.as_os_str())
        .chain(args.iter().map(OsString::as_os_str))
        .map(quote)
        .collect::<Vec<_>>()
        .join(" ");
    let start = Instant::now();
    let mut command = Command::new(program);
    command
        .args(&args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // Own process group, so a timeout can end the workers it started too.
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut child = command
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start `{cmdline}`: {e}"));
    let out_reader = reader(child.stdout.take());
    let err_reader = reader(child.stderr.take());
    let mut timed_out = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if start.elapsed() > timeout => {
                timed_out = true;
                // The group id is the child's pid (process_group(0) above).
                #[cfg(unix)]
                let _ = Command::new("kill")
                    .args(["-KILL", "--", &format!("-{}", child.id())])
                    .status();
                // The child may have exited just now; either way wait reaps it.
                let _ = child.kill();
                break child.wait().expect("wait for killed child");
            }
            Ok(None) => thread::sleep(Duration::from_millis(20)),
            Err(e) => panic!("waiting for `{cmdline}` failed: {e}"),
        }
    };
    Run {
        cmdline,
        status,
        timed_out,
        stdout: out_reader.join().unwrap_or_default(),
        stderr: err_reader.join().unwrap_or_default(),
        elapsed: start.elapsed(),
    }
}

/// Drains a pipe on its own thread so a chatty child never blocks.
fn reader<R: Read + Send + 'static>(pipe: Option<R>) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_end(&mut buf);
        }
        String::from_utf8_lossy(&buf).into_owned()
    })
}

/// The `target/` directory the running test executable lives in, if it
/// sits at `target/<profile>/deps/<test>` as cargo puts it.
pub fn target_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let deps = exe.parent()?;
    if deps.file_name()? != "deps" {
        return None;
    }
    Some(deps.parent()?.parent()?.to_path_buf())
}

/// Path of the `tessera` binary under test: `$TESSERA_BIN` if set, else
/// `target/<profile>/tessera` next to the running test executable.
/// Panics with instructions if it does not exist.
pub fn tessera_bin() -> PathBuf {
    let candidate = match std::env::var_os("TESSERA_BIN") {
        Some(p) => PathBuf::from(p),
        None => {
            let exe = std::env::current_exe().expect("current_exe");
            // target/<profile>/deps/<test-exe> -> target/<profile>/tessera
            let profile_dir = exe
                .parent()
                .and_then(Path::parent)
                .expect("test executable should live in target/<profile>/deps/");
            profile_dir.join(format!("tessera{}", std::env::consts::EXE_SUFFIX))
        }
    };
    assert!(
        candidate.is_file(),
        "tessera binary not found at {}: run `cargo build -p tessera-cli` first \
         (same profile as the tests), or set TESSERA_BIN to its path",
        candidate.display()
    );
    candidate
}

/// Time limit for one `tessera` run.
fn tessera_timeout() -> Duration {
    let secs = std::env::var("TESSERA_TEST_TIMEOUT_S")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_TIMEOUT_S);
    Duration::from_secs(secs)
}

/// Runs the `tessera` binary with `args` (see [`tessera_bin`]), capturing
/// its output; it is killed if it runs past `TESSERA_TEST_TIMEOUT_S`
/// (default 300 s).
pub fn run_tessera<I, S>(args: I) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    run_command(&tessera_bin(), args, tessera_timeout())
}

/// Runs an FFmpeg tool (`ffmpeg` or `ffprobe`, from `PATH`) and panics with
/// the command and its stderr unless it succeeds. Returns the finished run.
pub fn run_ffmpeg_tool<I, S>(tool: &str, args: I) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let run = run_command(Path::new(tool), args, Duration::from_secs(300));
    run.assert_success();
    run
}
