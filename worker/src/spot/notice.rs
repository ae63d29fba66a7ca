//! What each cloud's instance metadata service says when it is about to take a spot machine,
//! read into one [`Notice`]. Pure: the HTTP calls are in `spot.rs`.
//!
//! - AWS (IMDSv2): `GET /latest/meta-data/spot/instance-action` answers 404 until a notice,
//!   then `{"action": "terminate"|"stop"|"hibernate", "time": "2026-12-02T15:04:05Z"}` about
//!   two minutes ahead; `GET /latest/meta-data/events/recommendations/rebalance` answers
//!   `{"noticeTime": "..."}` when the instance is at elevated risk (no deadline).
//! - GCP: `GET /computeMetadata/v1/instance/preempted` answers `TRUE` once preempted; the VM
//!   gets 30 s from then (GKE gives pods the first 15 s of it).
//! - Azure: `GET /metadata/scheduledevents` lists events; a `Preempt` event for this VM (its
//!   `Resources` name it) has `NotBefore`, at least 30 s ahead, or empty once it started.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Deserialize;

use crate::drain::DrainReason;

/// GCP's time from the preempted flag to the machine going away.
pub const GCP_NOTICE: Duration = Duration::from_secs(30);
/// Azure's least time from a Preempt event to the machine going away, used when the event
/// has no `NotBefore`.
pub const AZURE_NOTICE: Duration = Duration::from_secs(30);

/// A notice read from the metadata service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Notice {
    /// Interruption (a deadline follows) or rebalance recommendation.
    pub reason: DrainReason,
    /// When the machine goes away, if the provider says.
    pub deadline: Option<SystemTime>,
}

/// AWS `spot/instance-action`: `body` of a 200 answer.
pub fn aws_instance_action(body: &str) -> Result<Notice, String> {
    #[derive(Deserialize)]
    struct Action {
        action: String,
        time: String,
    }
    let a: Action = serde_json::from_str(body)
        .map_err(|e| format!("spot/instance-action is not the documented JSON: {e}"))?;
    let deadline = rfc3339(&a.time)
        .ok_or_else(|| format!("spot/instance-action time {:?} is not RFC 3339", a.time))?;
    tracing::debug!(action = %a.action, "AWS spot instance action");
    Ok(Notice {
        reason: DrainReason::SpotInterruption,
        deadline: Some(deadline),
    })
}

/// AWS `events/recommendations/rebalance`: any 200 answer is a recommendation.
pub fn aws_rebalance() -> Notice {
    Notice {
        reason: DrainReason::Rebalance,
        deadline: None,
    }
}

/// GCP `instance/preempted`: `TRUE` is a notice, `FALSE` none.
pub fn gcp_preempted(body: &str, now: SystemTime) -> Result<Option<Notice>, String> {
    match body.trim() {
        "TRUE" => Ok(Some(Notice {
            reason: DrainReason::SpotInterruption,
            deadline: Some(now + GCP_NOTICE),
        })),
        "FALSE" => Ok(None),
        other => Err(format!("instance/preempted answered {other:?}")),
    }
}

/// Azure scheduled events: the earliest `Preempt` event naming `vm` (or naming no resource,
/// or any, when the VM's name is unknown).
pub fn azure_events(
    body: &str,
    vm: Option<&str>,
    now: SystemTime,
) -> Result<Option<Notice>, String> {
    #[derive(Deserialize)]
    #[serde(rename_all = "PascalCase")]
    struct Doc {
        #[serde(default)]
        events: Vec<Event>,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "PascalCase")]
    struct Event {
        event_type: String,
        #[serde(default)]
        resources: Vec<String>,
        #[serde(default)]
        not_before: String,
    }
    let doc: Doc = serde_json::from_str(body)
        .map_err(|e| format!("scheduledevents is not the documented JSON: {e}"))?;
    let ours = |e: &Event| match vm {
        Some(vm) => e.resources.is_empty() || e.resources.iter().any(|r| r == vm),
        None => true,
    };
    let deadline = doc
        .events
        .iter()
        .filter(|e| e.event_type == "Preempt" && ours(e))
        .map(|e| rfc1123(&e.not_before).unwrap_or(now + AZURE_NOTICE))
        .min();
    Ok(deadline.map(|d| Notice {
        reason: DrainReason::SpotInterruption,
        deadline: Some(d),
    }))
}

/// `2026-12-02T15:04:05Z` (UTC, optional fraction) as a time. Pure.
pub fn rfc3339(s: &str) -> Option<SystemTime> {
    let s = s.trim().strip_suffix('Z')?;
    let (date, time) = s.split_once('T')?;
    let mut d = date.split('-').map(|p| p.parse::<i64>().ok());
    let (y, mo, da) = (d.next()??, d.next()??, d.next()??);
    let time = time.split('.').next()?;
    let mut t = time.split(':').map(|p| p.parse::<i64>().ok());
    let (h, mi, se) = (t.next()??, t.next()??, t.next()??);
    at(y, mo, da, h, mi, se)
}

/// `Mon, 19 Sep 2016 18:29:47 GMT` as a time. Pure.
pub fn rfc1123(s: &str) -> Option<SystemTime> {
    let mut parts = s.split_whitespace();
    let _weekday = parts.next()?;
    let day = parts.next()?.parse().ok()?;
    let month = parts.next()?;
    let year = parts.next()?.parse().ok()?;
    let mut t = parts.next()?.split(':').map(|p| p.parse::<i64>().ok());
    let (h, mi, se) = (t.next()??, t.next()??, t.next()??);
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let mo = MONTHS.iter().position(|m| *m == month)? as i64 + 1;
    at(year, mo, day, h, mi, se)
}

/// A UTC calendar time as a `SystemTime` (days from the civil date, proleptic Gregorian).
fn at(y: i64, mo: i64, d: i64, h: i64, mi: i64, s: i64) -> Option<SystemTime> {
    let valid = (1..=12).contains(&mo)
        && (1..=31).contains(&d)
        && (0..24).contains(&h)
        && (0..60).contains(&mi)
        && (0..=60).contains(&s);
    if !valid {
        return None;
    }
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + mi * 60 + s;
    u64::try_from(secs)
        .ok()
        .map(|s| UNIX_EPOCH + Duration::from_secs(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unix(t: SystemTime) -> u64 {
        t.duration_since(UNIX_EPOCH).unwrap().as_secs()
    }

    #[test]
    fn dates_in_both_formats_read_as_utc() {
        assert_eq!(unix(rfc3339("1970-01-01T00:00:00Z").unwrap()), 0);
        assert_eq!(
            unix(rfc3339("2017-09-18T08:22:00Z").unwrap()),
            1_505_722_920
        );
        assert_eq!(
            unix(rfc3339("2024-02-29T23:59:59.250Z").unwrap()),
            1_709_251_199
        );
        assert_eq!(
            unix(rfc1123("Mon, 19 Sep 2016 18:29:47 GMT").unwrap()),
            1_474_309_787
        );
        assert!(rfc3339("2017-09-18 08:22:00").is_none());
        assert!(rfc3339("2017-13-18T08:22:00Z").is_none());
        assert!(rfc1123("Mon, 19 Foo 2016 18:29:47 GMT").is_none());
    }

    #[test]
    fn each_provider_answer_reads_as_a_notice_or_none() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000_000);
        let n = aws_instance_action(r#"{"action": "terminate", "time": "2017-09-18T08:22:00Z"}"#)
            .unwrap();
        assert_eq!(n.reason, DrainReason::SpotInterruption);
        assert_eq!(unix(n.deadline.unwrap()), 1_505_722_920);
        assert!(aws_instance_action("<html>").is_err());
        assert_eq!(aws_rebalance().reason, DrainReason::Rebalance);

        assert_eq!(gcp_preempted("FALSE", now).unwrap(), None);
        let n = gcp_preempted("TRUE\n", now).unwrap().unwrap();
        assert_eq!(n.deadline, Some(now + GCP_NOTICE));
        assert!(gcp_preempted("maybe", now).is_err());

        let none = r#"{"DocumentIncarnation": 1, "Events": []}"#;
        assert_eq!(azure_events(none, Some("vm1"), now).unwrap(), None);
        let other = r#"{"DocumentIncarnation": 2, "Events": [
            {"EventId": "a", "EventType": "Reboot", "ResourceType": "VirtualMachine",
             "Resources": ["vm1"], "EventStatus": "Scheduled", "NotBefore": ""},
            {"EventId": "b", "EventType": "Preempt", "ResourceType": "VirtualMachine",
             "Resources": ["vm2"], "EventStatus": "Scheduled",
             "NotBefore": "Mon, 19 Sep 2016 18:29:47 GMT"}]}"#;
        assert_eq!(azure_events(other, Some("vm1"), now).unwrap(), None);
        let n = azure_events(other, Some("vm2"), now).unwrap().unwrap();
        assert_eq!(unix(n.deadline.unwrap()), 1_474_309_787);
        let started = r#"{"Events": [{"EventType": "Preempt", "Resources": ["vm1"],
            "EventStatus": "Started", "NotBefore": ""}]}"#;
        let n = azure_events(started, Some("vm1"), now).unwrap().unwrap();
        assert_eq!(n.deadline, Some(now + AZURE_NOTICE));
        assert!(azure_events("<html>", None, now).is_err());
    }
}
