//! Checking a validated job plan against what its tenant may read and write, and against
//! the watched prefixes.

use tessera_model::error_code::ErrorCode;

use super::{Grant, Prefix};
use crate::job_plan::JobPlan;
use crate::jobspec::Invalid;

/// The scopes of a grant, for a refusal's message.
fn listed(scopes: &[Prefix]) -> String {
    if scopes.is_empty() {
        return "none".into();
    }
    let names: Vec<String> = scopes.iter().map(Prefix::to_string).collect();
    names.join(", ")
}

fn out_of_scope(
    what: &str,
    object: &str,
    grant: &Grant,
    access: &str,
    scopes: &[Prefix],
) -> Invalid {
    (
        ErrorCode::ObjectNotAllowed,
        format!(
            "{what} {object} is outside what tenant '{}' may {access} ({})",
            grant.tenant,
            listed(scopes)
        ),
    )
}

/// Refuses a plan that reads outside the grant's read scopes, writes outside its write
/// scopes (each destination, the package's folder), or writes inside a watched prefix
/// (whose uploads start jobs: the output would be transcoded again, and the job counted to
/// the watch's tenant). 403 `object_not_allowed` names the object and the tenant; a write
/// into a watched prefix is 422 `invalid_job`.
pub fn check_plan(plan: &JobPlan, grant: &Grant, watched: &[Prefix]) -> Result<(), Invalid> {
    let input = &plan.input;
    if !grant
        .read
        .iter()
        .any(|s| s.covers(&input.bucket, &input.key))
    {
        let object = input.to_string();
        return Err(out_of_scope("input", &object, grant, "read", &grant.read));
    }
    for (i, out) in plan.outputs.iter().enumerate() {
        let d = &out.destination;
        if !grant.write.iter().any(|s| s.covers(&d.bucket, &d.key)) {
            let what = format!("outputs[{i}]: destination");
            return Err(out_of_scope(
                &what,
                &d.to_string(),
                grant,
                "write",
                &grant.write,
            ));
        }
        if let Some(w) = watched.iter().find(|w| w.covers(&d.bucket, &d.key)) {
            return Err(into_watched(&d.to_string(), w));
        }
    }
    if let Some(p) = &plan.package {
        let folder = format!("s3://{}/{}", p.bucket, p.prefix);
        if !grant
            .write
            .iter()
            .any(|s| s.covers_folder(&p.bucket, &p.prefix))
        {
            return Err(out_of_scope(
                "package destination",
                &folder,
                grant,
                "write",
                &grant.write,
            ));
        }
        if let Some(w) = watched.iter().find(|w| w.overlaps(&p.bucket, &p.prefix)) {
            return Err(into_watched(&folder, w));
        }
    }
    Ok(())
}

fn into_watched(object: &str, watched: &Prefix) -> Invalid {
    (
        ErrorCode::InvalidJob,
        format!(
            "destination {object} lies in the watched prefix {watched}: its output would start \
             another job"
        ),
    )
}
