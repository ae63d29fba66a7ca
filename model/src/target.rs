//! The rate-factor search of target-quality encoding: which rate factor (CRF for x264, x265 and
//! SVT-AV1, `cq` for NVENC) to probe next, from the VMAF the probes so far scored, and which
//! probe to keep.
//!
//! Why pure and here: the search is the part of target quality that decides bits, and its
//! cases (curves that bend or go the wrong way, bounds, a target out of reach, one-frame
//! segments) are tested without an encoder; the media child runs it around its probe encodes.
//!
//! The rule, after Av1an's and ab-av1's searches and their users' findings: the first probe
//! at a predicted rate factor; then a step along the codec's typical slope (VMAF per rate
//! factor unit) while one probe is known, interpolation between the two probes that bracket
//! the target once two do, and extrapolation along the last two probes' own slope when it is
//! sane. A probe is scored with the same pooling the report uses (the mean), on every frame,
//! at the final preset: a probe then is the final encode, and the kept probe's file is the
//! segment's output.

use serde::{Deserialize, Serialize};

pub mod scenes;

/// One probe: the rate factor encoded at and the segment's mean VMAF it scored.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    /// The rate factor (lower: more bits).
    pub rate_factor: f64,
    /// Mean VMAF of the probe against the segment's source frames.
    pub vmaf: f64,
}

/// The search's settings for one segment of one rendition.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Search {
    /// The VMAF aimed at.
    pub target: f64,
    /// The lowest rate factor allowed (the most bits).
    pub min_rate_factor: f64,
    /// The highest rate factor allowed (the fewest bits).
    pub max_rate_factor: f64,
    /// The rate factor's granularity (x264 and x265: 0.5; SVT-AV1, NVENC: 1).
    pub step: f64,
    /// The codec's typical VMAF lost per rate factor unit near the target (positive).
    pub slope: f64,
    /// Probes at most (the last one's file is kept when none lands in the window).
    pub max_probes: usize,
    /// The finest rate factor step the encoder takes (x264 and x265: 0.1; whole numbers
    /// for SVT-AV1 and NVENC): where a steep curve crosses the target between two grid
    /// points, the search closes in on it at this step.
    pub fine_step: f64,
}

/// A probe lands when its score is in `[target - BELOW, target + ABOVE]`: close enough below
/// that the output's mean stays within 1 of the target, and not so far above that bits are
/// wasted.
pub const BELOW: f64 = 0.5;
/// See [`BELOW`].
pub const ABOVE: f64 = 1.0;

/// What to do after the probes so far.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Next {
    /// Encode and score at this rate factor.
    Probe(f64),
    /// Keep the probe at this index.
    Keep(usize),
}

impl Search {
    /// The first probe: `hint` (a prediction: the rendition's CRF, or the rate factor the
    /// scene's first segment kept) on the fine grid, or the middle of the bounds on the grid.
    pub fn first(&self, hint: Option<f64>) -> f64 {
        match hint {
            Some(hint) => {
                let fine = self.fine_step.clamp(1e-3, self.step);
                let r = (hint / fine).round() * fine;
                r.clamp(self.min_rate_factor, self.max_rate_factor)
            }
            None => self.on_grid((self.min_rate_factor + self.max_rate_factor) / 2.0),
        }
    }

    /// The next step after `probes` (in the order they ran).
    pub fn next(&self, probes: &[Probe]) -> Next {
        let Some(last) = probes.last() else {
            return Next::Probe(self.first(None));
        };
        if self.lands(last) || probes.len() >= self.max_probes {
            return Next::Keep(self.keep(probes));
        }
        let guess = self.on_grid(self.predict(probes));
        let probed =
            |rf: f64| (probes.iter()).any(|p| (p.rate_factor - rf).abs() < self.step / 2.0);
        if !probed(guess) {
            return Next::Probe(guess);
        }
        // The guess was probed: on a steep curve the crossing falls between two grid points.
        // The untried point next to it between the probes that bracket the window, if any;
        // else nothing new to learn (the bound is reached).
        match self.between(probes) {
            Some(rf) => Next::Probe(rf),
            None => Next::Keep(self.keep(probes)),
        }
    }

    /// The fine point at or below the predicted crossing, when it lies strictly between the
    /// highest rate factor that reaches the window and the lowest one that scored under it
    /// and was not probed.
    fn between(&self, probes: &[Probe]) -> Option<f64> {
        let floor = self.target - BELOW;
        let reaching = (probes.iter())
            .filter(|p| p.vmaf >= floor)
            .map(|p| p.rate_factor)
            .max_by(f64::total_cmp)?;
        let short = (probes.iter())
            .filter(|p| p.vmaf < floor && p.rate_factor > reaching)
            .map(|p| p.rate_factor)
            .min_by(f64::total_cmp)?;
        // The fine point at or below the crossing: the side that reaches the target.
        let fine = self.fine_step.clamp(1e-3, self.step);
        let below = (self.predict(probes) / fine + 1e-9).floor() * fine;
        let inside = below > reaching + fine / 2.0 && below < short - fine / 2.0;
        let new = (probes.iter()).all(|p| (p.rate_factor - below).abs() >= fine / 2.0);
        (inside && new).then(|| below.clamp(self.min_rate_factor, self.max_rate_factor))
    }

    /// Whether `probe` is in the window around the target.
    pub fn lands(&self, probe: &Probe) -> bool {
        probe.vmaf >= self.target - BELOW && probe.vmaf <= self.target + ABOVE
    }

    /// The probe to keep: the fewest bits (the highest rate factor) among those that reach
    /// the target's window from above (`target - BELOW` or better); when none does, the best
    /// scoring one.
    pub fn keep(&self, probes: &[Probe]) -> usize {
        let reaching = (probes.iter().enumerate())
            .filter(|(_, p)| p.vmaf >= self.target - BELOW)
            .max_by(|a, b| a.1.rate_factor.total_cmp(&b.1.rate_factor));
        let best = (probes.iter().enumerate()).max_by(|a, b| a.1.vmaf.total_cmp(&b.1.vmaf));
        reaching.or(best).map_or(0, |(i, _)| i)
    }

    /// Where the target should be, from the probes: between the closest pair that brackets
    /// it; else along the slope of the two closest probes when it falls as the rate factor
    /// rises at a plausible rate; else along the codec's typical slope from the closest.
    fn predict(&self, probes: &[Probe]) -> f64 {
        let t = self.target;
        let above = (probes.iter())
            .filter(|p| p.vmaf >= t)
            .max_by(|a, b| a.rate_factor.total_cmp(&b.rate_factor));
        let below = (probes.iter())
            .filter(|p| p.vmaf < t)
            .min_by(|a, b| a.rate_factor.total_cmp(&b.rate_factor));
        if let (Some(a), Some(b)) = (above, below) {
            if a.rate_factor < b.rate_factor && a.vmaf > b.vmaf {
                let share = (a.vmaf - t) / (a.vmaf - b.vmaf);
                return a.rate_factor + share * (b.rate_factor - a.rate_factor);
            }
        }
        let mut near: Vec<&Probe> = probes.iter().collect();
        near.sort_by(|a, b| (a.vmaf - t).abs().total_cmp(&(b.vmaf - t).abs()));
        let closest = near[0];
        let slope = match near.get(1) {
            Some(other) if (other.rate_factor - closest.rate_factor).abs() > 1e-9 => {
                let s = (closest.vmaf - other.vmaf) / (other.rate_factor - closest.rate_factor);
                // VMAF lost per unit: positive, and within 1/4 to 4 times the typical one.
                if s > self.slope / 4.0 && s < self.slope * 4.0 {
                    s
                } else {
                    self.slope
                }
            }
            _ => self.slope,
        };
        closest.rate_factor + (closest.vmaf - t) / slope
    }

    /// `rate_factor` on the grid, within the bounds.
    fn on_grid(&self, rate_factor: f64) -> f64 {
        let r = (rate_factor / self.step).round() * self.step;
        r.clamp(self.min_rate_factor, self.max_rate_factor)
    }
}

#[cfg(test)]
mod tests;
