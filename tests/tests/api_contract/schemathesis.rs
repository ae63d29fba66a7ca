//! schemathesis against the served document (issue 29, item 7): the generated requests the
//! schema allows are accepted, the others refused, and every answer is documented.

use std::process::Command;

use tessera_tests::farm::TOKEN;

use super::farm;

/// schemathesis with every check (`--checks all`) against `/openapi.json`, the stateful phase
/// included: no server error, no schema-valid request refused, no schema-invalid one taken,
/// every response as documented. Left out: `use_after_free`, which expects a 404 after a
/// `DELETE`; `DELETE /v1/jobs/{id}` cancels a job, which stays readable as `cancelled`. `scripts/api-contract.sh` installs schemathesis and runs
/// this; `TESSERA_SCHEMATHESIS` is the `st` binary, `TESSERA_SCHEMATHESIS_SECONDS` the time
/// budget (default 300).
#[test]
#[ignore = "needs schemathesis: run scripts/api-contract.sh"]
fn all_checks_pass() {
    let st = std::env::var("TESSERA_SCHEMATHESIS").expect("TESSERA_SCHEMATHESIS: the st binary");
    let seconds = std::env::var("TESSERA_SCHEMATHESIS_SECONDS").unwrap_or_else(|_| "300".into());
    // What the schema cannot state (destinations that differ) is told to the generator.
    let hooks = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../scripts/api-contract-hooks.py"
    );
    let farm = farm();
    let out = Command::new(st)
        .args(["run", &format!("{}/openapi.json", farm.api)])
        .args(["--url", &farm.api])
        .args(["-H", &format!("Authorization: Bearer {TOKEN}")])
        .args(["--checks", "all", "--exclude-checks", "use_after_free"])
        // The job body's patterns and branches make hypothesis drop many drafts in long runs
        // (its "filter_too_much" health check): a limit of the generator, not a finding.
        .args(["--suppress-health-check", "filter_too_much"])
        .args(["--max-time", &seconds, "--workers", "2"])
        .args(["--request-timeout", "20", "--seed", "29"])
        .env("NO_COLOR", "1")
        .env("SCHEMATHESIS_HOOKS", hooks)
        .output()
        .expect("run schemathesis");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{text}");
    assert!(out.status.success(), "schemathesis found problems:\n{text}");
    // The budget must leave the stateful phase time to follow the created job's links (the
    // coverage phase alone takes 2-3 minutes on two busy cores).
    assert!(
        text.contains("API Links:") && !text.contains(" 0 covered /"),
        "the run never followed the links (raise TESSERA_SCHEMATHESIS_SECONDS):\n{text}"
    );
    let (status, _) = farm.http("GET", "/healthz", None, None);
    assert_eq!(status, 200, "the dispatcher did not survive the run");
}
