//! How many threads a segment encode gets.
//!
//! Why not always the slot's share: the one-process farm runs one job, and a job of fewer
//! segments than workers (a short clip packaged in one media segment) would leave cores idle
//! for its whole encode. A service worker keeps the fixed share: with many jobs its slots stay
//! full, and more threads per encode only cost CPU per frame (x264's frame threads).

/// The cores of a process whose workers may lend idle ones to the encodes that run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoreShare {
    /// CPUs of the process.
    pub cpus: usize,
    /// Segment encodes the process runs at once (its workers' slots together).
    pub slots: usize,
}

impl CoreShare {
    /// Threads for one encode of a job of `segments` segments (0: unknown): the cores shared
    /// among the encodes the job can have at once, never fewer than `floor`.
    pub fn threads(&self, floor: usize, segments: u32) -> usize {
        let floor = floor.max(1);
        if segments == 0 {
            return floor;
        }
        let at_once = (segments as usize).min(self.slots).max(1);
        (self.cpus / at_once).max(floor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_cores_go_to_a_job_of_fewer_segments_than_slots() {
        let two = CoreShare { cpus: 2, slots: 2 };
        // One segment on two workers: both cores; two or more: one each.
        assert_eq!(two.threads(1, 1), 2);
        assert_eq!(two.threads(1, 2), 1);
        assert_eq!(two.threads(1, 6), 1);
        // An older dispatcher says nothing: the fixed share.
        assert_eq!(two.threads(1, 0), 1);
        let big = CoreShare { cpus: 16, slots: 4 };
        assert_eq!(big.threads(4, 1), 16);
        assert_eq!(big.threads(4, 3), 5);
        assert_eq!(big.threads(4, 9), 4);
        // Never below the floor, nor zero.
        assert_eq!(CoreShare { cpus: 1, slots: 8 }.threads(0, 1), 1);
    }
}
