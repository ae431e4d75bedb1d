use pyo3::prelude::*;
#[pymodule]
fn _sim(_m: &Bound<'_, PyModule>) -> PyResult<()> { Ok(()) }
