//! Writing a file whole: to a temporary name beside it, then renamed over it, so a reader
//! (or a run stopped half-way) never sees half a file. The one writer beneath
//! [`crate::report::write_whole`] (which lists the file in the `--out` folder's manifest
//! first) and the manifest's own writes.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use anyhow::Result;

/// Writes `bytes` to `path` whole (`.NAME.PID.tmp`, then renamed), without the manifest.
pub fn write_unlisted(path: &Path, bytes: &[u8]) -> Result<()> {
    let name = path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let temp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let written = File::create(&temp)
        .and_then(|mut f| f.write_all(bytes).and_then(|()| f.sync_data()))
        .and_then(|()| std::fs::rename(&temp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(anyhow::Error::from(e).context(format!("cannot write {}", path.display())));
    }
    Ok(())
}
