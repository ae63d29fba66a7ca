//! A real browser for tests: headless Chromium driven through `chromedriver` by the W3C
//! WebDriver protocol (plain HTTP and JSON), killed when the test ends.
//!
//! Why not a client crate: the dashboard test needs a dozen commands (open, find, type,
//! click, read text, alerts, screenshots); a page of HTTP calls keeps the harness's
//! dependencies as they are and shows exactly what the browser is asked.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// Debian's Chromium and its driver (`apt-get install chromium chromium-driver`, as
/// scripts/setup-deps.sh does).
const CHROMIUM: &str = "/usr/bin/chromium";
/// See [`CHROMIUM`].
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// W3C's key for an element reference in a JSON answer.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// Panics with what to install when Chromium or chromedriver is missing. Why a check of its
/// own: the test should say so before it starts a farm, not time out inside the driver.
pub fn require_browser() {
    for (path, package) in [(CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")] {
        assert!(
            Path::new(path).is_file(),
            "{path} not found: the browser tests need Debian's {package} \
             (scripts/setup-deps.sh installs it: apt-get install chromium chromium-driver)"
        );
    }
}

/// One headless Chromium session.
pub struct Browser {
    driver: Child,
    base: String,
    agent: ureq::Agent,
    _profile: tempfile::TempDir,
}

/// A reference to an element of the current page.
#[derive(Debug, Clone)]
pub struct Element(String);

impl Browser {
    /// Starts chromedriver on a free port and a headless Chromium session (1280x900).
    pub fn start() -> Browser {
        require_browser();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            .build()
            .into();
        let profile = tempfile::tempdir().expect("profile dir");
        let mut browser = Browser {
            driver,
            base: format!("http://127.0.0.1:{port}"),
            agent,
            _profile: profile,
        };
        browser.wait_ready();
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--window-size=1280,900",
                         format!("--user-data-dir={}", browser._profile.path().display())],
            },
        }}});
        let session = browser
            .call("POST", "/session", Some(caps))
            .expect("new session");
        let id = session["sessionId"].as_str().expect("session id");
        browser.base = format!("{}/session/{id}", browser.base);
        browser
    }

    /// Waits (up to 20 s) for chromedriver to answer `/status` ready.
    fn wait_ready(&mut self) {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(20) {
            if let Ok(v) = self.call("GET", "/status", None) {
                if v["ready"] == true {
                    return;
                }
            }
            assert!(
                matches!(self.driver.try_wait(), Ok(None)),
                "chromedriver exited"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("chromedriver not ready after 20 s");
    }

    /// One WebDriver command: its `value`, or the driver's error as text.
    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, String> {
        let url = format!("{}{path}", self.base);
        let sent = match (method, body) {
            ("GET", _) => self.agent.get(&url).call(),
            ("DELETE", _) => self.agent.delete(&url).call(),
            (_, body) => self
                .agent
                .post(&url)
                .header("content-type", "application/json")
                .send(body.unwrap_or(json!({})).to_string().as_bytes()),
        };
        let mut resp = sent.map_err(|e| format!("{method} {path}: {e}"))?;
        let status = resp.status();
        let text = resp
            .body_mut()
            .with_config()
            .limit(64 << 20)
            .read_to_string()
            .map_err(|e| format!("{method} {path}: {e}"))?;
        let v: Value = serde_json::from_str(&text).map_err(|e| format!("{path}: {e}: {text}"))?;
        if status.is_success() {
            Ok(v["value"].clone())
        } else {
            Err(format!("{method} {path}: {status}: {}", v["value"]))
        }
    }

    /// Opens `url` and waits for it to load.
    pub fn goto(&self, url: &str) {
        self.call("POST", "/url", Some(json!({"url": url})))
            .unwrap_or_else(|e| panic!("open {url}: {e}"));
    }

    /// The address of the current page.
    pub fn url(&self) -> String {
        let v = self.call("GET", "/url", None).expect("current url");
        v.as_str().unwrap_or_default().to_string()
    }

    /// The first element matching CSS `selector` now, if any.
    pub fn find(&self, selector: &str) -> Result<Element, String> {
        let body = json!({"using": "css selector", "value": selector});
        let v = self.call("POST", "/element", Some(body))?;
        match v[ELEMENT].as_str() {
            Some(id) => Ok(Element(id.to_string())),
            None => Err(format!("{selector}: no element in {v}")),
        }
    }

    /// The rendered text of an element.
    pub fn text(&self, e: &Element) -> Result<String, String> {
        let v = self.call("GET", &format!("/element/{}/text", e.0), None)?;
        Ok(v.as_str().unwrap_or_default().to_string())
    }

    /// The text of the first element matching `selector`, once it is there (reloads and
    /// navigations in progress are waited out), within `timeout`.
    pub fn text_of(&self, selector: &str, timeout: Duration) -> String {
        let mut last = String::new();
        let started = Instant::now();
        while started.elapsed() < timeout {
            match self.find(selector).and_then(|e| self.text(&e)) {
                Ok(t) => return t,
                Err(e) => last = e,
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "{selector} not found on {} within {timeout:?}: {last}",
            self.url()
        );
    }

    /// Types `text` into an element.
    pub fn type_into(&self, e: &Element, text: &str) -> Result<(), String> {
        let body = json!({"text": text});
        self.call("POST", &format!("/element/{}/value", e.0), Some(body))
            .map(|_| ())
    }

    /// Clicks an element.
    pub fn click(&self, e: &Element) -> Result<(), String> {
        self.call("POST", &format!("/element/{}/click", e.0), Some(json!({})))
            .map(|_| ())
    }

    /// The text of an open alert, if a page opened one.
    pub fn alert_text(&self) -> Option<String> {
        self.call("GET", "/alert/text", None)
            .ok()
            .map(|v| v.as_str().unwrap_or_default().to_string())
    }

    /// The value of the current page's cookie `name` (HttpOnly ones included: WebDriver sees
    /// what scripts cannot).
    pub fn cookie(&self, name: &str) -> Option<String> {
        let v = self.call("GET", &format!("/cookie/{name}"), None).ok()?;
        v["value"].as_str().map(str::to_string)
    }

    /// The current page's HTML as the browser serialises its document.
    pub fn source(&self) -> String {
        let v = self.call("GET", "/source", None).expect("page source");
        v.as_str().unwrap_or_default().to_string()
    }

    /// Saves a PNG of the viewport to `dir/name`; returns its path.
    pub fn screenshot(&self, dir: &Path, name: &str) -> PathBuf {
        use base64::Engine;
        let v = self.call("GET", "/screenshot", None).expect("screenshot");
        let png = base64::engine::general_purpose::STANDARD
            .decode(v.as_str().unwrap_or_default())
            .expect("screenshot base64");
        std::fs::create_dir_all(dir).expect("screenshot dir");
        let path = dir.join(name);
        std::fs::write(&path, png).expect("write screenshot");
        path
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.call("DELETE", "", None);
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
