//! `cclab._sim`: the simulator as Python sees it. JSON in, JSON out, so the
//! schema in docs/ARCHITECTURE.md is the only contract between the layers.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// Runs a resolved scenario config (JSON) and returns the result (JSON).
/// The GIL is released while simulating, so runs in threads overlap.
#[pyfunction]
fn run_json(py: Python<'_>, config_json: &str) -> PyResult<String> {
    let config = config_json.to_owned();
    py.allow_threads(move || cclab_sim::run_json(&config)).map_err(PyValueError::new_err)
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
    m.add_function(wrap_pyfunction!(constants, m)?)?;
    m.add_function(wrap_pyfunction!(model_version, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
