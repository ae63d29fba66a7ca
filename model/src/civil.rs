//! Unix seconds as a civil UTC date and time, without a date crate.
//!
//! Why here: the CLI's job view, the dashboard and the test reports all print dates the same
//! way; one conversion (Howard Hinnant's civil_from_days) serves them.

/// Unix seconds as `YYYY-MM-DD HH:MM:SS` (UTC, proleptic Gregorian calendar).
pub fn utc_datetime(secs: i64) -> String {
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (year, month, day) = civil_from_days(days);
    let (h, m, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    format!("{year:04}-{month:02}-{day:02} {h:02}:{m:02}:{s:02}")
}

/// Year, month (1-12) and day (1-31) of the day `days` after 1970-01-01 (proleptic
/// Gregorian). Why public: other date formats (the test IMDS stand-in's RFC 3339 and RFC
/// 1123) need the same conversion.
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let (era, doe) = (z.div_euclid(146_097), z.rem_euclid(146_097));
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_across_epochs_leap_days_and_before_1970() {
        assert_eq!(utc_datetime(0), "1970-01-01 00:00:00");
        assert_eq!(utc_datetime(1_700_000_000), "2023-11-14 22:13:20");
        assert_eq!(utc_datetime(951_782_400), "2000-02-29 00:00:00");
        assert_eq!(utc_datetime(-1), "1969-12-31 23:59:59");
    }
}
