//! One setting's value from its layers: the flag or its `TESSERA_*` variable (clap merges those
//! two), over the config file, over the default; optionally checked.
//!
//! Why one helper: every binary layers its settings the same way; written once, the precedence
//! cannot drift between them, and a refused value's error always names the setting.

use std::fmt;

/// A named setting's value as the layers leave it: `Setting<Option<T>>` while no default has
/// been applied, `Setting<T>` after [`Setting::or`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Setting<V> {
    name: &'static str,
    value: V,
}

/// A setting's value that was refused: which setting, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingError {
    /// The setting, as its errors name it (e.g. `workers`, `max_decode_error_share`).
    pub setting: &'static str,
    /// What is wrong with the value (it shows the value itself).
    pub reason: String,
}

impl fmt::Display for SettingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.setting, self.reason)
    }
}

impl std::error::Error for SettingError {}

impl From<SettingError> for String {
    fn from(e: SettingError) -> String {
        e.to_string()
    }
}

impl<T> Setting<Option<T>> {
    /// The flag (or its environment variable) over the file.
    pub fn layered(name: &'static str, flag: Option<T>, file: Option<T>) -> Self {
        Setting {
            name,
            value: flag.or(file),
        }
    }

    /// The default under the flag and the file.
    pub fn or(self, default: T) -> Setting<T> {
        self.or_else(|| default)
    }

    /// A default computed only when neither the flag nor the file gave a value.
    pub fn or_else(self, default: impl FnOnce() -> T) -> Setting<T> {
        Setting {
            name: self.name,
            value: self.value.unwrap_or_else(default),
        }
    }

    /// Refuses a given value for which `ok` is false, with `why(value)` as the reason; an unset
    /// value passes (its default is the caller's).
    pub fn check_set(
        self,
        ok: impl FnOnce(&T) -> bool,
        why: impl FnOnce(&T) -> String,
    ) -> Result<Self, SettingError> {
        match &self.value {
            Some(v) if !ok(v) => Err(SettingError {
                setting: self.name,
                reason: why(v),
            }),
            _ => Ok(self),
        }
    }

    /// The value, for a setting without a default.
    pub fn optional(self) -> Option<T> {
        self.value
    }
}

impl<T> Setting<T> {
    /// Refuses the value (the default included) when `ok` is false, with `why(value)` as the
    /// reason.
    pub fn check(
        self,
        ok: impl FnOnce(&T) -> bool,
        why: impl FnOnce(&T) -> String,
    ) -> Result<Self, SettingError> {
        if ok(&self.value) {
            Ok(self)
        } else {
            Err(SettingError {
                setting: self.name,
                reason: why(&self.value),
            })
        }
    }

    /// The resolved value.
    pub fn get(self) -> T {
        self.value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_wins_over_the_file_and_the_file_over_the_default() {
        assert_eq!(Setting::layered("n", Some(1), Some(2)).or(3).get(), 1);
        assert_eq!(Setting::layered("n", None, Some(2)).or(3).get(), 2);
        assert_eq!(Setting::layered("n", None, None).or(3).get(), 3);
        assert_eq!(Setting::layered("n", Some(1), None).optional(), Some(1));
        assert_eq!(
            Setting::<Option<u8>>::layered("n", None, None).optional(),
            None
        );
    }

    #[test]
    fn a_computed_default_is_computed_only_when_needed() {
        let v = Setting::layered("n", Some(1), None)
            .or_else(|| panic!("default computed"))
            .get();
        assert_eq!(v, 1);
        assert_eq!(Setting::layered("n", None, None).or_else(|| 7).get(), 7);
    }

    #[test]
    fn a_refused_value_names_the_setting_and_the_reason() {
        let e = Setting::layered("workers", Some(0), Some(4))
            .or(1)
            .check(
                |w| (1..=256).contains(w),
                |w| format!("{w} must be within 1..=256"),
            )
            .unwrap_err();
        assert_eq!(e.setting, "workers");
        assert_eq!(e.to_string(), "workers 0 must be within 1..=256");
        assert_eq!(String::from(e), "workers 0 must be within 1..=256");
        // The default is checked too.
        let e = Setting::layered("workers", None, None)
            .or(300)
            .check(|w| *w <= 256, |w| format!("{w} must be within 1..=256"))
            .unwrap_err();
        assert_eq!(e.to_string(), "workers 300 must be within 1..=256");
    }

    #[test]
    fn check_set_looks_only_at_given_values() {
        let positive = |v: &f64| *v > 0.0;
        let why = |v: &f64| format!("{v} must be a positive number");
        let unset = Setting::layered("rate", None, None).check_set(positive, why);
        assert_eq!(unset.unwrap().or(-1.0).get(), -1.0);
        let e = Setting::layered("rate", None, Some(-2.0))
            .check_set(positive, why)
            .unwrap_err();
        assert_eq!(e.to_string(), "rate -2 must be a positive number");
        let ok = Setting::layered("rate", Some(2.0), Some(-2.0)).check_set(positive, why);
        assert_eq!(ok.unwrap().optional(), Some(2.0));
    }
}
