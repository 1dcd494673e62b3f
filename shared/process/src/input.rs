//! The input of the offline commands (`mutate`, `check`): a file, or
//! standard input when the path is `-`.

use std::io::Read as _;
use std::path::Path;

/// The bytes of `path`, or of standard input when it is `-`. A file's error
/// names the file.
pub fn read(path: &Path) -> std::io::Result<Vec<u8>> {
    if path.as_os_str() == "-" {
        let mut buf = Vec::new();
        std::io::stdin().read_to_end(&mut buf)?;
        return Ok(buf);
    }
    std::fs::read(path).map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}
