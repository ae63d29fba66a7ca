//! The shapes of the chaos run's jobs: two file outputs of a fixture (most jobs), or an HLS
//! package of it (the package fault's job), whose delivery is many copies. Why one place:
//! the run submits them and the checks find their outputs by the same names.

use std::time::Duration;

use serde_json::json;

use crate::farm::Farm;
use crate::fixture::Fixture;

/// What a chaos job delivers, and from which fixture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Shape {
    /// `a.mp4`, and `b.mkv` at 144p.
    Files(Fixture),
    /// An HLS package under `pkg/`: two rungs (144p, 96p) and the audio, TS segments of 1 s,
    /// so about twenty copies to deliver.
    Package(Fixture),
}

impl Shape {
    /// The fixture the job reads.
    pub fn fixture(self) -> Fixture {
        match self {
            Shape::Files(kind) | Shape::Package(kind) => kind,
        }
    }

    /// The name of the job's reference (its outputs go under `reference/{name}`).
    pub fn name(self) -> String {
        match self {
            Shape::Files(kind) => format!("{kind:?}"),
            Shape::Package(kind) => format!("{kind:?}-package"),
        }
    }

    /// What the job delivers under `prefix`, relative to the `output` bucket: each file, or
    /// the package's folder (ending in `/`).
    pub fn outputs(self, prefix: &str) -> Vec<String> {
        match self {
            Shape::Files(_) => vec![format!("{prefix}/a.mp4"), format!("{prefix}/b.mkv")],
            Shape::Package(_) => vec![format!("{prefix}/pkg/")],
        }
    }
}

/// Submits the chaos job of `shape` with its outputs under `s3://output/{prefix}/`; its id.
pub fn submit(farm: &Farm, prefix: &str, shape: Shape) -> String {
    let outputs = match shape {
        Shape::Files(_) => json!([
            {"destination": format!("s3://output/{prefix}/a.mp4"), "preset": "ultrafast"},
            {"destination": format!("s3://output/{prefix}/b.mkv"), "preset": "ultrafast", "height": 144},
        ]),
        Shape::Package(_) => json!([{
            "destination": format!("s3://output/{prefix}/pkg/"),
            "package": {"format": "hls", "segment_type": "ts", "segment_seconds": 1,
                "ladder": [{"height": 144, "crf": 30}, {"height": 96, "crf": 30}]},
        }]),
    };
    let body = json!({"input": format!("s3://input/chaos/{:?}.mp4", shape.fixture()),
        "outputs": outputs, "segment_seconds": 1});
    // The API may be restarting (a dispatcher kill): retry briefly.
    farm.submit_retrying(&body, 100, Duration::from_millis(300))
        .unwrap_or_else(|| panic!("job {prefix} could not be submitted"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_package_is_one_folder_and_its_reference_is_named_apart() {
        let (files, package) = (
            Shape::Files(Fixture::ClosedGopH264),
            Shape::Package(Fixture::ClosedGopH264),
        );
        assert_eq!(files.outputs("chaos/3"), ["chaos/3/a.mp4", "chaos/3/b.mkv"]);
        assert_eq!(package.outputs("chaos/3"), ["chaos/3/pkg/"]);
        assert_ne!(files.name(), package.name());
        assert_eq!(package.fixture(), Fixture::ClosedGopH264);
    }
}
