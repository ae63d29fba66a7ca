use super::*;

/// A busy fleet, a short input, a worker on the whole-input queue: the case that goes whole.
fn busy() -> WholeCase {
    WholeCase {
        input_seconds: 8.0,
        max_seconds: DEFAULT_WHOLE_MAX_SECONDS,
        package: false,
        on_cpu_queue: true,
        whole_consumers: 2,
        segments_waiting: 5,
        resumed: Resumed::Fresh,
    }
}

#[test]
fn a_short_input_goes_whole_only_while_segments_wait() {
    assert!(goes_whole(&busy()));
    // An idle fleet: split for latency, as always.
    let idle = WholeCase {
        segments_waiting: 0,
        ..busy()
    };
    assert!(!goes_whole(&idle));
}

#[test]
fn long_inputs_packages_gpu_jobs_and_fleets_without_whole_workers_split() {
    let cases = [
        WholeCase {
            input_seconds: 61.0,
            ..busy()
        },
        WholeCase {
            package: true,
            ..busy()
        },
        WholeCase {
            on_cpu_queue: false,
            ..busy()
        },
        WholeCase {
            whole_consumers: 0,
            ..busy()
        },
    ];
    for case in cases {
        assert!(!goes_whole(&case), "{case:?}");
    }
    // The limit itself is short enough.
    let at_limit = WholeCase {
        input_seconds: DEFAULT_WHOLE_MAX_SECONDS,
        ..busy()
    };
    assert!(goes_whole(&at_limit));
}

#[test]
fn a_resumed_job_keeps_the_plan_its_earlier_run_recorded() {
    // Split before the restart: split again, however busy the fleet is now.
    let split = WholeCase {
        resumed: Resumed::Split,
        ..busy()
    };
    assert!(!goes_whole(&split));
    // Whole before: whole again even if the queue has emptied meanwhile.
    let whole = WholeCase {
        resumed: Resumed::Whole,
        segments_waiting: 0,
        ..busy()
    };
    assert!(goes_whole(&whole));
    // ...unless no worker takes whole tasks any more (a rollback of the workers).
    let gone = WholeCase {
        whole_consumers: 0,
        ..whole
    };
    assert!(!goes_whole(&gone));
}
