//! Compiles proto/ with protox (pure Rust), so no protoc is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Read when the script runs, not baked in when it is compiled: a build
    // script compiled for another checkout may be reused from the cache.
    let root = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
    let file = root.join("portcullis/certs/v1/certs.proto");
    println!("cargo:rerun-if-changed={}", file.display());
    let descriptors = protox::compile([&file], [&root])?;
    tonic_prost_build::configure().compile_fds(descriptors)?;
    Ok(())
}
