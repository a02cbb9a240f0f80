//! The ranks' standard streams: a terminal copied to rank 0, and output lines tagged with the
//! rank (`--tag-output`).
//!
//! It owns the threads and tasks that move bytes between `kestrel-run`'s own streams and the
//! ranks'. It never interprets what passes through and never waits for a rank to end.

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;
use tokio::task::JoinHandle;

/// Starts forwarding `child`'s piped streams: stdin from this process's terminal, stdout and
/// stderr as tagged lines. Returns the output tasks, which end when the pipes close.
pub(super) fn forward_child_io(child: &mut Child, rank: u32) -> Vec<JoinHandle<()>> {
    if let Some(stdin) = child.stdin.take() {
        // A terminal cannot be shared with a rank in another process group, so copy it.
        if let Ok(fd) = stdin.into_owned_fd() {
            std::thread::spawn(move || {
                let mut out = std::fs::File::from(fd);
                let _ = std::io::copy(&mut std::io::stdin().lock(), &mut out);
            });
        }
    }
    let mut pipes = Vec::new();
    if let Some(out) = child.stdout.take() {
        pipes.push(tokio::spawn(tag_lines(out, rank, false)));
    }
    if let Some(err) = child.stderr.take() {
        pipes.push(tokio::spawn(tag_lines(err, rank, true)));
    }
    pipes
}

async fn tag_lines<R: tokio::io::AsyncRead + Unpin>(pipe: R, rank: u32, is_err: bool) {
    let mut lines = BufReader::new(pipe).split(b'\n');
    let tag = if is_err { "stderr" } else { "stdout" };
    while let Ok(Some(line)) = lines.next_segment().await {
        use std::io::Write;
        let mut text = format!("[1,{rank}]<{tag}>:").into_bytes();
        text.extend_from_slice(&line);
        text.push(b'\n');
        if is_err {
            let _ = std::io::stderr().lock().write_all(&text);
        } else {
            let _ = std::io::stdout().lock().write_all(&text);
        }
    }
}
