//! Runs a resolved config (JSON file) and prints the per-flow and bottleneck
//! summary: `cargo run --release --example run_config -- config.json`.
fn main() {
    let path = std::env::args().nth(1).expect("usage: run_config CONFIG.json");
    let text = std::fs::read_to_string(&path).expect("readable config");
    let config: cclab_sim::SimConfig = serde_json::from_str(&text).expect("valid config");
    match cclab_sim::run(config) {
        Ok(result) => {
            let summary = serde_json::json!({
                "flows": result.flows, "bottleneck": result.bottleneck, "stats": result.stats,
            });
            println!("{}", serde_json::to_string_pretty(&summary).unwrap());
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
}
