//! `cclab._sim`: the simulator as Python sees it. JSON in, JSON out, so the
//! schema in docs/ARCHITECTURE.md is the only contract between the layers.

use std::time::{Duration, Instant};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// How often a run looks for Ctrl-C (Python's pending signals): well inside the
/// second within which an interrupted run must stop.
const SIGNAL_CHECK_INTERVAL: Duration = Duration::from_millis(100);

/// Runs a resolved scenario config (JSON) and returns the result (JSON).
/// The GIL is released while simulating, so runs in threads overlap. Every
/// `progress_interval_s` of wall time `progress(sim_now_ns, events_processed)` is
/// called; an exception from it (or a pending Ctrl-C) stops the run and is raised here.
#[pyfunction]
#[pyo3(signature = (config_json, progress=None, progress_interval_s=0.2))]
fn run_json(py: Python<'_>, config_json: &str, progress: Option<PyObject>, progress_interval_s: f64) -> PyResult<String> {
    let config = config_json.to_owned();
    observed(py, progress, progress_interval_s, |observe| cclab_sim::run_json_observed(&config, observe))
}

/// `cclab cc compare`: runs the config with its first flow's CC recorded and returns how a
/// fresh copy of that CC and `candidate_json`'s (a flow) answered the same hook calls (JSON).
/// Progress and Ctrl-C as in `run_json`.
#[pyfunction]
#[pyo3(signature = (config_json, candidate_json, progress=None, progress_interval_s=0.2))]
fn compare_json(py: Python<'_>, config_json: &str, candidate_json: &str, progress: Option<PyObject>, progress_interval_s: f64) -> PyResult<String> {
    let (config, candidate) = (config_json.to_owned(), candidate_json.to_owned());
    observed(py, progress, progress_interval_s, |observe| cclab_sim::differential::compare_json(&config, &candidate, observe))
}

/// Runs `simulate` without the GIL, handing it an observer that looks for Ctrl-C every
/// SIGNAL_CHECK_INTERVAL and calls `progress` every `progress_interval_s` of wall time.
fn observed(
    py: Python<'_>,
    progress: Option<PyObject>,
    progress_interval_s: f64,
    simulate: impl FnOnce(&mut dyn FnMut(cclab_sim::cc::SimTime, u64) -> bool) -> Result<String, String> + Send,
) -> PyResult<String> {
    let progress_interval = Duration::from_secs_f64(progress_interval_s.max(0.0));
    let mut raised: Option<PyErr> = None;
    let outcome = py.allow_threads(|| {
        let started = Instant::now();
        let mut last_signal_check = started;
        let mut last_progress = started;
        let mut observe = |now: cclab_sim::cc::SimTime, events: u64| {
            let wall = Instant::now();
            let report = progress.is_some() && wall.duration_since(last_progress) >= progress_interval;
            if !report && wall.duration_since(last_signal_check) < SIGNAL_CHECK_INTERVAL {
                return true;
            }
            last_signal_check = wall;
            let step = Python::with_gil(|py| -> PyResult<()> {
                py.check_signals()?;
                if report {
                    last_progress = wall;
                    if let Some(callback) = &progress {
                        callback.call1(py, (now.0, events))?;
                    }
                }
                Ok(())
            });
            match step {
                Ok(()) => true,
                Err(error) => {
                    raised = Some(error);
                    false
                }
            }
        };
        simulate(&mut observe)
    });
    match (outcome, raised) {
        (_, Some(error)) => Err(error),
        (Ok(result), None) => Ok(result),
        (Err(message), None) => Err(PyValueError::new_err(message)),
    }
}

/// The simulator's fixed constants, so Python derives frame sizes from one place.
#[pyfunction]
fn constants() -> (u32, u32, u32) {
    (cclab_sim::MSS_BYTES, cclab_sim::FRAME_OVERHEAD_BYTES, cclab_sim::FULL_FRAME_BYTES)
}

/// Version of the simulated behaviour (`cclab_sim::MODEL_VERSION`).
#[pyfunction]
fn model_version() -> u32 {
    cclab_sim::MODEL_VERSION
}

#[pymodule]
fn _sim(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run_json, m)?)?;
    m.add_function(wrap_pyfunction!(compare_json, m)?)?;
    m.add_function(wrap_pyfunction!(constants, m)?)?;
    m.add_function(wrap_pyfunction!(model_version, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
