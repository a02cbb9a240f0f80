//! Point-to-point calls and requests (their completion: `ffi::wait`).

use std::os::raw::{c_int, c_void};

use super::{region, BYTE};
use crate::api;
use crate::complete::{self, UNDEFINED};
use crate::error::{self, MpiError};
use crate::handle;
use crate::mem::{self, MpiStatus, Region};
use crate::p2p;
use crate::requests::{self, Mode, Persistent, ReqRec};
use crate::state;

/// The blocking sends; inlined into each entry point, so that `MPI_Send`'s common form
/// costs one frame and the other modes none of it.
#[inline(always)]
fn blocking_send(
    name: &'static str,
    buf: *const c_void,
    count: i64,
    dt: c_int,
    dest: c_int,
    tag: c_int,
    comm: c_int,
    mode: Mode,
) -> c_int {
    if mode == Mode::Standard {
        // SAFETY: `buf` holds `count` elements of `dt` (contract); the send completes before
        // this returns.
        if let Some(span) = unsafe { mem::plain_span(buf, count, dt) } {
            let start = p2p::PlainSend {
                comm,
                span,
                dest,
                tag,
            };
            if let Some(code) = api::call_blocking(name, comm, start, p2p::sent) {
                return code;
            }
        }
    }
    blocking_send_general(name, buf, count, dt, dest, tag, comm, mode)
}

/// [`blocking_send`] in its general form, out of line: inlined, its closure's captures made
/// the common path store every argument in a larger frame.
#[inline(never)]
fn blocking_send_general(
    name: &'static str,
    buf: *const c_void,
    count: i64,
    dt: c_int,
    dest: c_int,
    tag: c_int,
    comm: c_int,
    mode: Mode,
) -> c_int {
    api::call(name, comm, |l| {
        // SAFETY: `buf` holds `count` elements of `dt` (contract); the send completes before
        // this returns.
        let r = unsafe { region(buf, count, dt) }?;
        p2p::send(l, comm, &r, dest, tag, mode)
    })
}

mpi_fn_c! {
    /// `MPI_Send`.
    fn MPI_Send / PMPI_Send, MPI_Send_c / PMPI_Send_c(buf: *const c_void, count: Count, datatype: c_int, dest: c_int, tag: c_int, comm: c_int) -> c_int {
        blocking_send(NAME, buf, count.into(), datatype, dest, tag, comm, Mode::Standard)
    }
}

mpi_fn_c! {
    /// `MPI_Ssend`.
    fn MPI_Ssend / PMPI_Ssend, MPI_Ssend_c / PMPI_Ssend_c(buf: *const c_void, count: Count, datatype: c_int, dest: c_int, tag: c_int, comm: c_int) -> c_int {
        blocking_send(NAME, buf, count.into(), datatype, dest, tag, comm, Mode::Sync)
    }
}

mpi_fn_c! {
    /// `MPI_Rsend`.
    fn MPI_Rsend / PMPI_Rsend, MPI_Rsend_c / PMPI_Rsend_c(buf: *const c_void, count: Count, datatype: c_int, dest: c_int, tag: c_int, comm: c_int) -> c_int {
        blocking_send(NAME, buf, count.into(), datatype, dest, tag, comm, Mode::Ready)
    }
}

mpi_fn_c! {
    /// `MPI_Bsend`.
    fn MPI_Bsend / PMPI_Bsend, MPI_Bsend_c / PMPI_Bsend_c(buf: *const c_void, count: Count, datatype: c_int, dest: c_int, tag: c_int, comm: c_int) -> c_int {
        blocking_send(NAME, buf, count.into(), datatype, dest, tag, comm, Mode::Buffered)
    }
}

mpi_fn_c! {
    /// `MPI_Recv`.
    fn MPI_Recv / PMPI_Recv, MPI_Recv_c / PMPI_Recv_c(buf: *mut c_void, count: Count, datatype: c_int, source: c_int, tag: c_int, comm: c_int, status: *mut MpiStatus) -> c_int {
        // SAFETY: `buf` holds `count` elements (contract); complete before returning.
        if let Some(span) = unsafe { mem::plain_span(buf, count, datatype) } {
            let len = span.len();
            let start = |core: &mut state::Core| p2p::recv_plain(core, comm, span, source, tag);
            let plain = api::call_blocking(NAME, comm, start, |engine, s| {
                // A clean receive into an ignored status reads two fields of `s` and writes
                // nothing: this runs after the wait, on a ping-pong's critical path.
                if s.truncated_from.is_none()
                    && s.failed_peer.is_none()
                    && mem::ignores_status(status)
                {
                    return Ok(());
                }
                received(engine, s, status, len)
            });
            if let Some(code) = plain {
                return code;
            }
        }
        api::call(NAME, comm, |l| {
            // SAFETY: `buf` holds `count` elements (contract); complete before returning.
            let r = unsafe { region(buf, count, datatype) }?;
            let st = p2p::recv(l, comm, &r, source, tag)?;
            // SAFETY: status pointer or MPI_STATUS_IGNORE (contract).
            unsafe { mem::put_status(status, &st, false) };
            p2p::check_status(&st, r.packed_len())
        })
    }
}

/// `MPI_Recv`'s status and error, out of line: inlined, its reads of every field of the
/// engine's status were hoisted above the check for the common case, which needs two.
/// Anything but a clean receive into `MPI_STATUS_IGNORE` comes here.
#[inline(never)]
fn received(
    engine: &kestrel_pml::Engine,
    s: &kestrel_pml::engine::Status,
    status: *mut MpiStatus,
    len: usize,
) -> crate::error::MpiResult<()> {
    let st = requests::status_of(engine, *s);
    // SAFETY: status pointer or MPI_STATUS_IGNORE (contract).
    unsafe { mem::put_status(status, &st, false) };
    p2p::check_status(&st, len)
}

fn nonblocking_send(
    name: &'static str,
    buf: *const c_void,
    count: i64,
    dt: c_int,
    dest: c_int,
    tag: c_int,
    comm: c_int,
    mode: Mode,
    request: *mut c_int,
) -> c_int {
    // The common call, with nothing to report: no error routing. A null `request` takes the
    // general path, which reports it.
    if mode == Mode::Standard && !request.is_null() {
        // SAFETY: `buf` holds `count` elements and stays untouched until the request
        // completes (contract).
        if let Some(span) = unsafe { mem::plain_span(buf, count, dt) } {
            if let Some(h) = api::plain_start(|core| p2p::isend_plain(core, comm, span, dest, tag))
            {
                // SAFETY: a non-null out-parameter (contract).
                unsafe { *request = h };
                return error::SUCCESS;
            }
        }
    }
    api::call(name, comm, |l| {
        let core = l.core()?;
        // SAFETY: `buf` holds `count` elements and stays untouched until the request
        // completes (contract).
        let r = unsafe { region(buf, count, dt) }?;
        let rec = p2p::start_send(core, comm, &r, dest, tag, mode)?;
        let h = core.insert_request(rec);
        // SAFETY: out-parameter (contract).
        unsafe { mem::put(request, h, "request") }
    })
}

mpi_fn_c! {
    /// `MPI_Isend`.
    fn MPI_Isend / PMPI_Isend, MPI_Isend_c / PMPI_Isend_c(buf: *const c_void, count: Count, datatype: c_int, dest: c_int, tag: c_int, comm: c_int, request: *mut c_int) -> c_int {
        nonblocking_send(NAME, buf, count.into(), datatype, dest, tag, comm, Mode::Standard, request)
    }
}

mpi_fn_c! {
    /// `MPI_Issend`.
    fn MPI_Issend / PMPI_Issend, MPI_Issend_c / PMPI_Issend_c(buf: *const c_void, count: Count, datatype: c_int, dest: c_int, tag: c_int, comm: c_int, request: *mut c_int) -> c_int {
        nonblocking_send(NAME, buf, count.into(), datatype, dest, tag, comm, Mode::Sync, request)
    }
}

mpi_fn_c! {
    /// `MPI_Irsend`.
    fn MPI_Irsend / PMPI_Irsend, MPI_Irsend_c / PMPI_Irsend_c(buf: *const c_void, count: Count, datatype: c_int, dest: c_int, tag: c_int, comm: c_int, request: *mut c_int) -> c_int {
        nonblocking_send(NAME, buf, count.into(), datatype, dest, tag, comm, Mode::Ready, request)
    }
}

mpi_fn_c! {
    /// `MPI_Ibsend`: complete once the data is in the attached buffer.
    fn MPI_Ibsend / PMPI_Ibsend, MPI_Ibsend_c / PMPI_Ibsend_c(buf: *const c_void, count: Count, datatype: c_int, dest: c_int, tag: c_int, comm: c_int, request: *mut c_int) -> c_int {
        nonblocking_send(NAME, buf, count.into(), datatype, dest, tag, comm, Mode::Buffered, request)
    }
}

mpi_fn_c! {
    /// `MPI_Irecv`.
    fn MPI_Irecv / PMPI_Irecv, MPI_Irecv_c / PMPI_Irecv_c(buf: *mut c_void, count: Count, datatype: c_int, source: c_int, tag: c_int, comm: c_int, request: *mut c_int) -> c_int {
        // The common call, with nothing to report: no error routing. A null `request` takes
        // the general path, which reports it.
        if !request.is_null() {
            // SAFETY: `buf` holds `count` elements and stays untouched until the request
            // completes (contract).
            if let Some(span) = unsafe { mem::plain_span(buf, count, datatype) } {
                if let Some(h) = api::plain_start(|core| p2p::irecv_plain(core, comm, span, source, tag)) {
                    // SAFETY: a non-null out-parameter (contract).
                    unsafe { *request = h };
                    return error::SUCCESS;
                }
            }
        }
        api::call(NAME, comm, |l| {
            let core = l.core()?;
            // SAFETY: `buf` holds `count` elements and stays untouched until the request
            // completes (contract).
            let r = unsafe { region(buf, count, datatype) }?;
            let rec = p2p::start_recv(core, comm, &r, source, tag)?;
            let h = core.insert_request(rec);
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(request, h, "request") }
        })
    }
}

fn persistent(
    name: &'static str,
    buf: *const c_void,
    count: i64,
    dt: c_int,
    peer: c_int,
    tag: c_int,
    comm: c_int,
    mode: Option<Mode>,
    request: *mut c_int,
) -> c_int {
    api::call(name, comm, |l| {
        let core = l.core()?;
        // SAFETY: `buf` stays valid while the persistent request exists and untouched while
        // it is active (contract).
        let region = unsafe { region(buf, count, dt) }?;
        let c = core.comm(comm)?;
        let ctx = c.ctx;
        let p = match mode {
            Some(mode) => {
                p2p::dest_rank(c, peer)?;
                p2p::send_tag(tag)?;
                Persistent::Send {
                    mode,
                    region,
                    peer,
                    tag,
                }
            }
            None => {
                p2p::source_rank(c, peer)?;
                p2p::recv_tag(tag)?;
                Persistent::Recv { region, peer, tag }
            }
        };
        let mut rec = ReqRec::new(comm, ctx, mode.is_none());
        rec.extra().persistent = Some(p);
        let h = core.insert_request(rec);
        // SAFETY: out-parameter (contract).
        unsafe { mem::put(request, h, "request") }
    })
}

mpi_fn_c! {
    /// `MPI_Send_init`.
    fn MPI_Send_init / PMPI_Send_init, MPI_Send_init_c / PMPI_Send_init_c(buf: *const c_void, count: Count, datatype: c_int, dest: c_int, tag: c_int, comm: c_int, request: *mut c_int) -> c_int {
        persistent(NAME, buf, count.into(), datatype, dest, tag, comm, Some(Mode::Standard), request)
    }
}

mpi_fn_c! {
    /// `MPI_Ssend_init`.
    fn MPI_Ssend_init / PMPI_Ssend_init, MPI_Ssend_init_c / PMPI_Ssend_init_c(buf: *const c_void, count: Count, datatype: c_int, dest: c_int, tag: c_int, comm: c_int, request: *mut c_int) -> c_int {
        persistent(NAME, buf, count.into(), datatype, dest, tag, comm, Some(Mode::Sync), request)
    }
}

mpi_fn_c! {
    /// `MPI_Rsend_init`.
    fn MPI_Rsend_init / PMPI_Rsend_init, MPI_Rsend_init_c / PMPI_Rsend_init_c(buf: *const c_void, count: Count, datatype: c_int, dest: c_int, tag: c_int, comm: c_int, request: *mut c_int) -> c_int {
        persistent(NAME, buf, count.into(), datatype, dest, tag, comm, Some(Mode::Ready), request)
    }
}

mpi_fn_c! {
    /// `MPI_Bsend_init`.
    fn MPI_Bsend_init / PMPI_Bsend_init, MPI_Bsend_init_c / PMPI_Bsend_init_c(buf: *const c_void, count: Count, datatype: c_int, dest: c_int, tag: c_int, comm: c_int, request: *mut c_int) -> c_int {
        persistent(NAME, buf, count.into(), datatype, dest, tag, comm, Some(Mode::Buffered), request)
    }
}

mpi_fn_c! {
    /// `MPI_Recv_init`.
    fn MPI_Recv_init / PMPI_Recv_init, MPI_Recv_init_c / PMPI_Recv_init_c(buf: *mut c_void, count: Count, datatype: c_int, source: c_int, tag: c_int, comm: c_int, request: *mut c_int) -> c_int {
        persistent(NAME, buf, count.into(), datatype, source, tag, comm, None, request)
    }
}

mpi_fn! {
    /// `MPI_Start`.
    fn MPI_Start / PMPI_Start(request: *mut c_int) -> c_int {
        api::call("MPI_Start", handle::COMM_WORLD, |l| {
            // SAFETY: in-out parameter (contract).
            let h = unsafe { mem::get(request, "request") }?;
            complete::start(l.core()?, h)
        })
    }
}

mpi_fn! {
    /// `MPI_Startall`.
    fn MPI_Startall / PMPI_Startall(count: c_int, requests: *mut c_int) -> c_int {
        api::call("MPI_Startall", handle::COMM_WORLD, |l| {
            // SAFETY: `requests` holds `count` handles (contract).
            let hs = unsafe { mem::slice(requests, mem::count(count)?, "array_of_requests") }?;
            let core = l.core()?;
            for &h in hs {
                complete::start(core, h)?;
            }
            Ok(())
        })
    }
}

mpi_fn_c! {
    /// `MPI_Buffer_attach`.
    fn MPI_Buffer_attach / PMPI_Buffer_attach, MPI_Buffer_attach_c / PMPI_Buffer_attach_c(buffer: *mut c_void, size: Count) -> c_int {
        api::call(NAME, handle::COMM_WORLD, |l| {
            let n = mem::count(size)?;
            let t = state::datatype(BYTE, true)?;
            // SAFETY: the program gives the library `size` bytes at `buffer` until it
            // detaches them (contract).
            let r = unsafe { Region::new(buffer, n, t) }?;
            p2p::buffer_attach(l.core()?, r.span, buffer as usize)
        })
    }
}

mpi_fn_c! {
    /// `MPI_Buffer_detach`: waits for the buffered sends, then returns the buffer.
    fn MPI_Buffer_detach / PMPI_Buffer_detach, MPI_Buffer_detach_c / PMPI_Buffer_detach_c(buffer_addr: *mut c_void, size: *mut Count) -> c_int {
        api::call(NAME, handle::COMM_WORLD, |l| {
            let (addr, n) = p2p::buffer_detach(l.core()?)?;
            // SAFETY: `buffer_addr` is a `void **` in disguise; `size` an int (contract).
            unsafe {
                mem::put(buffer_addr as *mut usize, addr, "buffer_addr")?;
                mem::put(size, mem::narrow(n).unwrap_or(Count::MAX), "size")
            }
        })
    }
}

mpi_fn_c! {
    /// `MPI_Sendrecv`.
    fn MPI_Sendrecv / PMPI_Sendrecv, MPI_Sendrecv_c / PMPI_Sendrecv_c(
        sendbuf: *const c_void, sendcount: Count, sendtype: c_int, dest: c_int, sendtag: c_int,
        recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, source: c_int, recvtag: c_int,
        comm: c_int, status: *mut MpiStatus,
    ) -> c_int {
        api::call(NAME, comm, |l| {
            // SAFETY: both buffers hold their elements (contract); complete before returning.
            let s = unsafe { region(sendbuf, sendcount, sendtype) }?;
            // SAFETY: as above.
            let r = unsafe { region(recvbuf, recvcount, recvtype) }?;
            let st = p2p::sendrecv(l, comm, &s, dest, sendtag, &r, source, recvtag)?;
            // SAFETY: status pointer or MPI_STATUS_IGNORE (contract).
            unsafe { mem::put_status(status, &st, false) };
            Ok(())
        })
    }
}

mpi_fn_c! {
    /// `MPI_Sendrecv_replace`: the outgoing data is copied first.
    fn MPI_Sendrecv_replace / PMPI_Sendrecv_replace, MPI_Sendrecv_replace_c / PMPI_Sendrecv_replace_c(
        buf: *mut c_void, count: Count, datatype: c_int, dest: c_int, sendtag: c_int,
        source: c_int, recvtag: c_int, comm: c_int, status: *mut MpiStatus,
    ) -> c_int {
        api::call(NAME, comm, |l| {
            // SAFETY: `buf` holds `count` elements (contract); complete before returning.
            let r = unsafe { region(buf, count, datatype) }?;
            let copy = r.pack()?;
            let byte = state::datatype(BYTE, true)?;
            // SAFETY: `copy` outlives the send, which completes inside `sendrecv`.
            let s = unsafe { Region::new(copy.as_ptr() as *const c_void, copy.len(), byte) }?;
            let st = p2p::sendrecv(l, comm, &s, dest, sendtag, &r, source, recvtag)?;
            drop(copy);
            // SAFETY: status pointer or MPI_STATUS_IGNORE (contract).
            unsafe { mem::put_status(status, &st, false) };
            Ok(())
        })
    }
}

mpi_fn! {
    /// `MPI_Probe`.
    fn MPI_Probe / PMPI_Probe(source: c_int, tag: c_int, comm: c_int, status: *mut MpiStatus) -> c_int {
        api::call("MPI_Probe", comm, |l| {
            let st = p2p::probe(l, comm, source, tag, true)?.unwrap_or_default();
            // SAFETY: status pointer or MPI_STATUS_IGNORE (contract).
            unsafe { mem::put_status(status, &st, false) };
            Ok(())
        })
    }
}

mpi_fn! {
    /// `MPI_Iprobe`.
    fn MPI_Iprobe / PMPI_Iprobe(source: c_int, tag: c_int, comm: c_int, flag: *mut c_int, status: *mut MpiStatus) -> c_int {
        api::call("MPI_Iprobe", comm, |l| {
            let found = p2p::probe(l, comm, source, tag, false)?;
            if let Some(st) = &found {
                // SAFETY: status pointer or MPI_STATUS_IGNORE (contract).
                unsafe { mem::put_status(status, st, false) };
            }
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(flag, c_int::from(found.is_some()), "flag") }
        })
    }
}

mpi_fn! {
    /// `MPI_Mprobe`.
    fn MPI_Mprobe / PMPI_Mprobe(source: c_int, tag: c_int, comm: c_int, message: *mut c_int, status: *mut MpiStatus) -> c_int {
        api::call("MPI_Mprobe", comm, |l| {
            let (m, st) = p2p::mprobe(l, comm, source, tag, true)?
                .unwrap_or((handle::REQUEST_NULL, mem::St::default()));
            // SAFETY: out-parameters (contract).
            unsafe {
                mem::put_status(status, &st, false);
                mem::put(message, m, "message")
            }
        })
    }
}

mpi_fn! {
    /// `MPI_Improbe`.
    fn MPI_Improbe / PMPI_Improbe(source: c_int, tag: c_int, comm: c_int, flag: *mut c_int, message: *mut c_int, status: *mut MpiStatus) -> c_int {
        api::call("MPI_Improbe", comm, |l| {
            let found = p2p::mprobe(l, comm, source, tag, false)?;
            if let Some((m, st)) = &found {
                // SAFETY: out-parameters (contract).
                unsafe {
                    mem::put_status(status, st, false);
                    mem::put(message, *m, "message")?;
                }
            }
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(flag, c_int::from(found.is_some()), "flag") }
        })
    }
}

mpi_fn_c! {
    /// `MPI_Mrecv`.
    fn MPI_Mrecv / PMPI_Mrecv, MPI_Mrecv_c / PMPI_Mrecv_c(buf: *mut c_void, count: Count, datatype: c_int, message: *mut c_int, status: *mut MpiStatus) -> c_int {
        api::call(NAME, handle::COMM_WORLD, |l| {
            let core = l.core()?;
            // SAFETY: in-out parameter (contract).
            let m = unsafe { mem::get(message, "message") }?;
            // SAFETY: `buf` holds `count` elements (contract); complete before returning.
            let r = unsafe { region(buf, count, datatype) }?;
            let mut rec = p2p::start_mrecv(core, m, &r)?;
            let comm = rec.comm;
            let st = crate::blocking::wait_rec(l, &mut rec)?;
            // SAFETY: out-parameters (contract).
            unsafe {
                mem::put_status(status, &st, false);
                mem::put(message, handle::REQUEST_NULL, "message")?;
            }
            p2p::check_status(&st, r.packed_len()).map_err(|e| e.on(comm))
        })
    }
}

mpi_fn_c! {
    /// `MPI_Imrecv`.
    fn MPI_Imrecv / PMPI_Imrecv, MPI_Imrecv_c / PMPI_Imrecv_c(buf: *mut c_void, count: Count, datatype: c_int, message: *mut c_int, request: *mut c_int) -> c_int {
        api::call(NAME, handle::COMM_WORLD, |l| {
            let core = l.core()?;
            // SAFETY: in-out parameter (contract).
            let m = unsafe { mem::get(message, "message") }?;
            // SAFETY: `buf` holds `count` elements, untouched until completion (contract).
            let r = unsafe { region(buf, count, datatype) }?;
            let rec = p2p::start_mrecv(core, m, &r)?;
            let h = core.insert_request(rec);
            // SAFETY: out-parameters (contract).
            unsafe {
                mem::put(message, handle::REQUEST_NULL, "message")?;
                mem::put(request, h, "request")
            }
        })
    }
}

mpi_fn! {
    /// `MPI_Cancel`.
    fn MPI_Cancel / PMPI_Cancel(request: *mut c_int) -> c_int {
        api::call("MPI_Cancel", handle::COMM_WORLD, |l| {
            // SAFETY: in parameter (contract).
            let h = unsafe { mem::get(request, "request") }?;
            let g = requests::slot(h)
                .and_then(|i| l.core().ok()?.requests.get(i))
                .and_then(|r| r.extra.as_ref()?.grequest.as_ref())
                .map(|g| (g.cancel, g.extra, g.complete));
            if let Some((cancel, extra, complete)) = g {
                // The program's cancel function may call MPI: run it unlocked.
                return match cancel {
                    Some(f) => l.unlocked(|| crate::grequest::run_cancel(f, extra, complete)),
                    None => Ok(()),
                };
            }
            complete::cancel(l.core()?, h)
        })
    }
}

mpi_fn! {
    /// `MPI_Request_free`.
    fn MPI_Request_free / PMPI_Request_free(request: *mut c_int) -> c_int {
        api::call("MPI_Request_free", handle::COMM_WORLD, |l| {
            // SAFETY: in-out parameter (contract).
            let mut h = unsafe { mem::get(request, "request") }?;
            complete::free(l.core()?, &mut h)?;
            // SAFETY: as above.
            unsafe { mem::put(request, h, "request") }
        })
    }
}

mpi_fn! {
    /// `MPI_Request_get_status`.
    fn MPI_Request_get_status / PMPI_Request_get_status(request: c_int, flag: *mut c_int, status: *mut MpiStatus) -> c_int {
        api::call("MPI_Request_get_status", handle::COMM_WORLD, |l| {
            api::query_grequests(l, &[request])?;
            let found = complete::get_status(l.core()?, request)?;
            if let Some(st) = &found {
                // SAFETY: status pointer or MPI_STATUS_IGNORE (contract).
                unsafe { mem::put_status(status, st, false) };
            }
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(flag, c_int::from(found.is_some()), "flag") }
        })
    }
}

mpi_fn! {
    /// `MPI_Test_cancelled`.
    fn MPI_Test_cancelled / PMPI_Test_cancelled(status: *const MpiStatus, flag: *mut c_int) -> c_int {
        api::call_types("MPI_Test_cancelled", || {
            // SAFETY: a status (contract).
            let st = unsafe { mem::get_status(status) }?;
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(flag, c_int::from(st.cancelled), "flag") }
        })
    }
}

mpi_fn_c! {
    /// `MPI_Get_count`: `MPI_UNDEFINED` when the bytes are not whole elements.
    fn MPI_Get_count / PMPI_Get_count, MPI_Get_count_c / PMPI_Get_count_c(status: *const MpiStatus, datatype: c_int, count: *mut Count) -> c_int {
        api::call_types(NAME, || {
            // SAFETY: a status (contract).
            let st = unsafe { mem::get_status(status) }?;
            let t = state::datatype(datatype, false)?;
            let n: Count = if t.size == 0 {
                0
            } else if st.bytes % t.size != 0 {
                Count::from(UNDEFINED)
            } else {
                mem::narrow(st.bytes / t.size).unwrap_or(Count::from(UNDEFINED))
            };
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(count, n, "count") }
        })
    }
}

fn elements(status: *const MpiStatus, datatype: c_int) -> Result<Option<usize>, MpiError> {
    // SAFETY: a status (contract of the calling entry point).
    let st = unsafe { mem::get_status(status) }?;
    Ok(state::datatype(datatype, false)?.elements_in(st.bytes))
}

mpi_fn_c! {
    /// `MPI_Get_elements`.
    fn MPI_Get_elements / PMPI_Get_elements, MPI_Get_elements_c / PMPI_Get_elements_c(status: *const MpiStatus, datatype: c_int, count: *mut Count) -> c_int {
        api::call_types(NAME, || {
            let n: Count = elements(status, datatype)?
                .and_then(mem::narrow)
                .unwrap_or(Count::from(UNDEFINED));
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(count, n, "count") }
        })
    }
}

mpi_fn! {
    /// `MPI_Get_elements_x`.
    fn MPI_Get_elements_x / PMPI_Get_elements_x(status: *const MpiStatus, datatype: c_int, count: *mut i64) -> c_int {
        api::call_types("MPI_Get_elements_x", || {
            let n = elements(status, datatype)?.map_or(i64::from(UNDEFINED), |n| n as i64);
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(count, n, "count") }
        })
    }
}

fn set_elements(name: &'static str, status: *mut MpiStatus, datatype: c_int, count: i64) -> c_int {
    api::call_types(name, || {
        let n = mem::count(count)?;
        let t = state::datatype(datatype, false)?;
        let bytes = t.bytes_for_elements(n).ok_or_else(|| {
            MpiError::new(
                error::ERR_COUNT,
                format!("{n} elements overflow a byte count"),
            )
        })?;
        // SAFETY: a status (contract of the entry points).
        let mut st = unsafe { mem::get_status(status) }?;
        st.bytes = bytes;
        // SAFETY: as above.
        unsafe { mem::put_status(status, &st, true) };
        Ok(())
    })
}

mpi_fn! {
    /// `MPI_Status_set_elements`.
    fn MPI_Status_set_elements / PMPI_Status_set_elements(status: *mut MpiStatus, datatype: c_int, count: c_int) -> c_int {
        set_elements("MPI_Status_set_elements", status, datatype, count.into())
    }
}

mpi_fn! {
    /// `MPI_Status_set_elements_x`.
    fn MPI_Status_set_elements_x / PMPI_Status_set_elements_x(status: *mut MpiStatus, datatype: c_int, count: i64) -> c_int {
        set_elements("MPI_Status_set_elements_x", status, datatype, count)
    }
}

mpi_fn! {
    /// `MPI_Status_set_cancelled`.
    fn MPI_Status_set_cancelled / PMPI_Status_set_cancelled(status: *mut MpiStatus, flag: c_int) -> c_int {
        api::call_types("MPI_Status_set_cancelled", || {
            // SAFETY: a status (contract).
            let mut st = unsafe { mem::get_status(status) }?;
            st.cancelled = flag != 0;
            // SAFETY: as above.
            unsafe { mem::put_status(status, &st, true) };
            Ok(())
        })
    }
}

#[allow(clippy::too_many_arguments)]
fn isendrecv(
    name: &'static str,
    sendbuf: *const c_void,
    sendcount: i64,
    sendtype: c_int,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: i64,
    recvtype: c_int,
    source: c_int,
    recvtag: c_int,
    comm: c_int,
    request: *mut c_int,
    replace: bool,
) -> c_int {
    api::call(name, comm, |l| {
        let core = l.core()?;
        // SAFETY: both buffers hold their elements until the request completes (contract).
        let s = unsafe { region(sendbuf, sendcount, sendtype) }?;
        // SAFETY: as above.
        let r = unsafe { region(recvbuf, recvcount, recvtype) }?;
        let rec =
            crate::isendrecv::start(core, comm, &s, dest, sendtag, &r, source, recvtag, replace)?;
        let h = core.insert_request(rec);
        // SAFETY: out-parameter (contract).
        unsafe { mem::put(request, h, "request") }
    })
}

mpi_fn_c! {
    /// `MPI_Isendrecv` (MPI-4).
    fn MPI_Isendrecv / PMPI_Isendrecv, MPI_Isendrecv_c / PMPI_Isendrecv_c(
        sendbuf: *const c_void, sendcount: Count, sendtype: c_int, dest: c_int, sendtag: c_int,
        recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, source: c_int, recvtag: c_int,
        comm: c_int, request: *mut c_int,
    ) -> c_int {
        isendrecv(NAME, sendbuf, sendcount.into(), sendtype, dest, sendtag, recvbuf, recvcount.into(), recvtype, source, recvtag, comm, request, false)
    }
}

mpi_fn_c! {
    /// `MPI_Isendrecv_replace` (MPI-4): the outgoing data is copied first.
    fn MPI_Isendrecv_replace / PMPI_Isendrecv_replace, MPI_Isendrecv_replace_c / PMPI_Isendrecv_replace_c(
        buf: *mut c_void, count: Count, datatype: c_int, dest: c_int, sendtag: c_int,
        source: c_int, recvtag: c_int, comm: c_int, request: *mut c_int,
    ) -> c_int {
        isendrecv(NAME, buf, count.into(), datatype, dest, sendtag, buf, count.into(), datatype, source, recvtag, comm, request, true)
    }
}

mpi_fn! {
    /// `MPI_Grequest_start`.
    fn MPI_Grequest_start / PMPI_Grequest_start(query_fn: Option<crate::grequest::QueryFn>, free_fn: Option<crate::grequest::FreeFn>, cancel_fn: Option<crate::grequest::CancelFn>, extra_state: *mut c_void, request: *mut c_int) -> c_int {
        api::call("MPI_Grequest_start", handle::COMM_WORLD, |l| {
            let core = l.core()?;
            let mut rec = ReqRec::new(handle::COMM_WORLD, 0, false);
            rec.state = requests::ReqState::Generalized;
            core.grequests += 1;
            rec.extra().grequest = Some(crate::grequest::Grequest {
                query: query_fn,
                free: free_fn,
                cancel: cancel_fn,
                extra: crate::grequest::Extra { state: extra_state as usize, fortran: false },
                complete: false,
                queried: None,
                freed: false,
            });
            let h = core.insert_request(rec);
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(request, h, "request") }
        })
    }
}

mpi_fn! {
    /// `MPI_Grequest_complete`.
    fn MPI_Grequest_complete / PMPI_Grequest_complete(request: c_int) -> c_int {
        api::call("MPI_Grequest_complete", handle::COMM_WORLD, |l| {
            let core = l.core()?;
            let g = requests::slot(request)
                .and_then(|i| core.requests.get_mut(i))
                .and_then(|r| r.extra.as_mut())
                .and_then(|x| x.grequest.as_mut())
                .ok_or_else(|| MpiError::new(error::ERR_REQUEST, format!("{request:#x} is not a generalized request (MPI_Grequest_start)")))?;
            if g.complete {
                return Err(MpiError::new(error::ERR_REQUEST, format!("MPI_Grequest_complete was already called for {request:#x}")));
            }
            g.complete = true;
            if g.freed {
                // Freed by the program before it completed: nobody will wait for it.
                let f = g.free.take().map(|f| (f, g.extra));
                core.deferred_frees.extend(f);
                if let Some(i) = requests::slot(request) {
                    core.requests.remove(i);
                }
            }
            Ok(())
        })
    }
}

mpi_fn! {
    /// `MPI_Status_c2f`: a C status as Fortran's `INTEGER STATUS(MPI_STATUS_SIZE)` (the same
    /// five ints in the same order, as in MPICH).
    fn MPI_Status_c2f / PMPI_Status_c2f(c_status: *const MpiStatus, f_status: *mut c_int) -> c_int {
        api::call_types("MPI_Status_c2f", || {
            // SAFETY: a status, and an array of MPI_STATUS_SIZE ints (contract).
            unsafe {
                let s = mem::get(c_status, "c_status")?;
                let out = mem::slice_mut(f_status, 5, "f_status")?;
                out.copy_from_slice(&[s.count_lo, s.count_hi_and_cancelled, s.source, s.tag, s.error]);
            }
            Ok(())
        })
    }
}

mpi_fn! {
    /// `MPI_Status_f2c`.
    fn MPI_Status_f2c / PMPI_Status_f2c(f_status: *const c_int, c_status: *mut MpiStatus) -> c_int {
        api::call_types("MPI_Status_f2c", || {
            // SAFETY: an array of MPI_STATUS_SIZE ints, and a status (contract).
            unsafe {
                let f = mem::slice(f_status, 5, "f_status")?;
                mem::put(c_status, MpiStatus { count_lo: f[0], count_hi_and_cancelled: f[1], source: f[2], tag: f[3], error: f[4] }, "c_status")
            }
        })
    }
}
