//! Background sends: data the engine owns and sends on its own, completed without anyone
//! waiting for it. Collective schedules use them for rendezvous-sized messages, so that a
//! round ends once its receives are in, whether or not the peer has read the data yet
//! (a peer busy computing reads it later from the engine's copy). The receiver is asked to
//! pull the whole message itself (no split copy), so with single copy the transfer needs no
//! further progress here. Owns that data until the send completes; it must never expose it
//! to anyone but the transport.

use super::*;

/// The most bytes of background-send copies in flight: a root whose nonblocking rounds only
/// send completes each call at once, and without a bound would copy call after call ahead
/// of peers that read later (measured: `osu_ibcast` 1 MiB on 4 ranks faulted in ~500 fresh
/// pages per call for its copies).
const DETACHED_MAX: usize = 16 << 20;

impl Engine {
    /// Sends a copy of `data` to rank `dest` of `ctx` in the background: the engine keeps
    /// the copy until the send completes and frees the request itself.
    pub fn isend_detached(
        &mut self,
        ctx: u16,
        dest: u32,
        tag: i32,
        data: &[u8],
    ) -> Result<(), PmlError> {
        let mut copy = self.st.spares.take_empty(data.len());
        copy.extend_from_slice(data);
        // SAFETY: the vector is kept in `st.detached` (never resized, so its bytes never
        // move) until the request completes, and nothing writes it meanwhile.
        #[allow(unsafe_code)]
        let buf = unsafe { UserBuf::for_send(copy.as_ptr(), copy.len()) };
        let id = self.isend_with(ctx, dest, tag, buf, false, true)?;
        if id == DONE {
            self.st.spares.keep(copy);
        } else {
            self.st.detached.push((id, copy));
        }
        Ok(())
    }

    /// Whether a background send of `len` more bytes keeps the copies in flight within
    /// [`DETACHED_MAX`] (the first always fits).
    pub(crate) fn detached_room(&self, len: usize) -> bool {
        let in_flight: usize = self.st.detached.iter().map(|(_, b)| b.len()).sum();
        in_flight == 0 || in_flight + len <= DETACHED_MAX
    }

    /// Whether a message of `len` bytes to rank `dest` of `ctx` goes eagerly (completing
    /// when `isend` returns).
    pub fn is_eager(&self, ctx: u16, dest: u32, len: usize) -> bool {
        let Some(Some(c)) = self.st.ctxs.get(ctx as usize) else {
            return true;
        };
        let Some(&peer) = c.group.get(dest as usize) else {
            return true;
        };
        match self.route.get(peer as usize) {
            Some(&b) if b != NO_ROUTE => len + hdr::MATCH_LEN <= self.eager_limits[b as usize],
            _ => true,
        }
    }

    /// Frees the background sends that completed.
    #[inline(never)]
    pub(super) fn reap_detached(&mut self) {
        let mut k = 0;
        while k < self.st.detached.len() {
            let id = self.st.detached[k].0;
            if self.is_complete(id) {
                self.try_complete(id);
                let (_, b) = self.st.detached.swap_remove(k);
                self.st.spares.keep(b);
            } else {
                k += 1;
            }
        }
    }
}
