//! The ranks' standard streams: a terminal copied to rank 0, and the ranks' output forwarded
//! in whole lines (tagged with the rank under `--tag-output`).
//!
//! Every rank's stdout and stderr are pipes read here, so that lines of different ranks never
//! interleave mid-line: a rank's bytes are passed on only up to its last newline, and one
//! writer thread per stream writes each batch with one call. A partial line goes out when the
//! rank has been quiet for [`PARTIAL_LINE_WAIT`] (a prompt), when it reaches
//! [`MAX_LINE`] bytes, or when the pipe closes. The writers are threads, not tasks, so that a
//! slow reader of `kestrel-run`'s output holds back the ranks that write (their pipes fill)
//! and never the event loop that serves PMI.
//!
//! It owns the threads and tasks that move bytes between `kestrel-run`'s own streams and the
//! ranks'. It never interprets what passes through and never waits for a rank to end.

use std::sync::OnceLock;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::process::Child;
use tokio::sync::mpsc::{channel, Sender};
use tokio::task::JoinHandle;

/// How long a rank's unfinished line waits for its newline before it is passed on anyway.
pub const PARTIAL_LINE_WAIT: Duration = Duration::from_millis(200);
/// The longest line held back whole; a longer one is passed on in pieces of this size.
pub const MAX_LINE: usize = 64 << 10;
/// Batches queued for a writer thread before the ranks' readers wait for it.
const QUEUE: usize = 64;

/// Which of the launcher's streams a batch goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stream {
    /// Standard output.
    Out,
    /// Standard error.
    Err,
}

/// What a writer thread is given.
enum Item {
    /// Bytes to write with one call.
    Batch(Vec<u8>),
    /// Answer once everything queued before is written.
    Flush(std::sync::mpsc::SyncSender<()>),
}

static OUT: OnceLock<Sender<Item>> = OnceLock::new();
static ERR: OnceLock<Sender<Item>> = OnceLock::new();

fn cell(stream: Stream) -> &'static OnceLock<Sender<Item>> {
    match stream {
        Stream::Out => &OUT,
        Stream::Err => &ERR,
    }
}

/// The writer thread of `stream`, started on first use.
fn writer(stream: Stream) -> Sender<Item> {
    cell(stream)
        .get_or_init(|| {
            let (tx, mut rx) = channel::<Item>(QUEUE);
            let spawned = std::thread::Builder::new()
                .name(format!("kestrel-run {stream:?} writer"))
                .spawn(move || {
                    use std::io::Write;
                    while let Some(item) = rx.blocking_recv() {
                        let batch = match item {
                            Item::Batch(b) => b,
                            Item::Flush(done) => {
                                let _ = done.send(());
                                continue;
                            }
                        };
                        // A closed stream (`kestrel-run ... | head`) drops the output; the
                        // ranks go on.
                        let _ = match stream {
                            Stream::Out => {
                                let mut out = std::io::stdout().lock();
                                out.write_all(&batch).and_then(|_| out.flush())
                            }
                            Stream::Err => std::io::stderr().lock().write_all(&batch),
                        };
                    }
                });
            if let Err(e) = spawned {
                eprintln!("kestrel-run: cannot start the {stream:?} writer thread: {e}");
            }
            tx
        })
        .clone()
}

/// Waits (at most `limit` per stream) until the ranks' output queued so far is written, so
/// that the launcher's last words come after the ranks' and nothing is lost at exit.
pub fn drain(limit: Duration) {
    for stream in [Stream::Out, Stream::Err] {
        let Some(tx) = cell(stream).get() else {
            continue;
        };
        let deadline = std::time::Instant::now() + limit;
        let (done_tx, done_rx) = std::sync::mpsc::sync_channel(1);
        let mut item = Item::Flush(done_tx);
        // Called from the event loop's last steps: no await, a short sleep while the queue is
        // full.
        loop {
            match tx.try_send(item) {
                Ok(()) => {
                    let left = deadline.saturating_duration_since(std::time::Instant::now());
                    let _ = done_rx.recv_timeout(left);
                    break;
                }
                Err(tokio::sync::mpsc::error::TrySendError::Full(back))
                    if std::time::Instant::now() < deadline =>
                {
                    item = back;
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(_) => break,
            }
        }
    }
}

/// Starts forwarding `child`'s piped streams: stdin from this process's terminal, stdout and
/// stderr in whole lines, tagged `[1,rank]<stdout>:` when `tag` is set. Returns the output
/// tasks, which end when the pipes close.
pub(super) fn forward_child_io(child: &mut Child, rank: u32, tag: bool) -> Vec<JoinHandle<()>> {
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
        let prefix = tag.then(|| format!("[1,{rank}]<stdout>:").into_bytes());
        pipes.push(tokio::spawn(forward_lines(
            out,
            prefix,
            writer(Stream::Out),
        )));
    }
    if let Some(err) = child.stderr.take() {
        let prefix = tag.then(|| format!("[1,{rank}]<stderr>:").into_bytes());
        pipes.push(tokio::spawn(forward_lines(
            err,
            prefix,
            writer(Stream::Err),
        )));
    }
    pipes
}

/// Reads `pipe` to its end, passing whole lines (each with `prefix`) to `out`.
async fn forward_lines<R: tokio::io::AsyncRead + Unpin>(
    mut pipe: R,
    prefix: Option<Vec<u8>>,
    out: Sender<Item>,
) {
    let mut lines = LineBuffer::new(prefix);
    let mut chunk = vec![0u8; 16 << 10];
    loop {
        let read = if lines.has_partial() {
            match tokio::time::timeout(PARTIAL_LINE_WAIT, pipe.read(&mut chunk)).await {
                Ok(r) => r,
                Err(_) => {
                    // Quiet with an unfinished line: a prompt, most likely.
                    if let Some(batch) = lines.take_partial() {
                        if out.send(Item::Batch(batch)).await.is_err() {
                            return;
                        }
                    }
                    continue;
                }
            }
        } else {
            pipe.read(&mut chunk).await
        };
        match read {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if let Some(batch) = lines.push(&chunk[..n]) {
                    if out.send(Item::Batch(batch)).await.is_err() {
                        return;
                    }
                }
            }
        }
    }
    if let Some(batch) = lines.take_partial() {
        let _ = out.send(Item::Batch(batch)).await;
    }
}

/// Bytes of one stream cut into whole lines: what [`LineBuffer::push`] returns ends with a
/// newline (or is a piece of a line longer than [`MAX_LINE`]); the rest waits.
#[derive(Debug)]
pub(super) struct LineBuffer {
    prefix: Option<Vec<u8>>,
    partial: Vec<u8>,
}

impl LineBuffer {
    pub(super) fn new(prefix: Option<Vec<u8>>) -> LineBuffer {
        LineBuffer {
            prefix,
            partial: Vec::new(),
        }
    }

    /// Whether bytes of an unfinished line are held.
    pub(super) fn has_partial(&self) -> bool {
        !self.partial.is_empty()
    }

    /// Adds `bytes`; returns the complete lines now available (prefixed), if any.
    pub(super) fn push(&mut self, bytes: &[u8]) -> Option<Vec<u8>> {
        self.partial.extend_from_slice(bytes);
        let cut = match self.partial.iter().rposition(|&b| b == b'\n') {
            Some(last) => last + 1,
            None if self.partial.len() >= MAX_LINE => self.partial.len(),
            None => return None,
        };
        let whole: Vec<u8> = self.partial.drain(..cut).collect();
        Some(self.prefixed(&whole))
    }

    /// The unfinished line, passed on as it is (prefixed), with a newline added when tagging
    /// so that the next tag starts a line.
    pub(super) fn take_partial(&mut self) -> Option<Vec<u8>> {
        if self.partial.is_empty() {
            return None;
        }
        let mut rest = std::mem::take(&mut self.partial);
        if self.prefix.is_some() {
            rest.push(b'\n');
        }
        Some(self.prefixed(&rest))
    }

    fn prefixed(&self, text: &[u8]) -> Vec<u8> {
        let Some(prefix) = &self.prefix else {
            return text.to_vec();
        };
        let mut out = Vec::with_capacity(text.len() + prefix.len() * 4);
        for line in text.split_inclusive(|&b| b == b'\n') {
            out.extend_from_slice(prefix);
            out.extend_from_slice(line);
        }
        if !out.ends_with(b"\n") {
            out.push(b'\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_whole_lines_pass() {
        let mut b = LineBuffer::new(None);
        assert_eq!(b.push(b"par"), None);
        assert!(b.has_partial());
        assert_eq!(b.push(b"tial\nnext"), Some(b"partial\n".to_vec()));
        assert_eq!(b.push(b" line\nand\n"), Some(b"next line\nand\n".to_vec()));
        assert!(!b.has_partial());
        assert_eq!(b.push(b"prompt> "), None);
        assert_eq!(b.take_partial(), Some(b"prompt> ".to_vec()));
        assert_eq!(b.take_partial(), None);
    }

    #[test]
    fn tags_start_every_line() {
        let mut b = LineBuffer::new(Some(b"[1,3]<stderr>:".to_vec()));
        assert_eq!(
            b.push(b"a\nb\nc"),
            Some(b"[1,3]<stderr>:a\n[1,3]<stderr>:b\n".to_vec())
        );
        assert_eq!(b.take_partial(), Some(b"[1,3]<stderr>:c\n".to_vec()));
    }

    #[test]
    fn an_endless_line_is_passed_on_in_bounded_pieces() {
        let mut b = LineBuffer::new(None);
        let piece = vec![b'x'; MAX_LINE / 2];
        assert_eq!(b.push(&piece), None);
        let out = b.push(&piece).expect("a full buffer is passed on");
        assert_eq!(out.len(), MAX_LINE);
        assert!(!b.has_partial());
    }
}
