//! Point-to-point calls, requests and their completion.

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
            if let Some(code) =
                api::call_plain(name, comm, |l| p2p::send_plain(l, comm, span, dest, tag))
            {
                return code;
            }
        }
    }
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
            let plain = api::call_plain(NAME, comm, |l| {
                Some(p2p::recv_plain(l, comm, span, source, tag)?.and_then(|st| {
                    // SAFETY: status pointer or MPI_STATUS_IGNORE (contract).
                    unsafe { mem::put_status(status, &st, false) };
                    p2p::check_truncation(&st, len)
                }))
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
            p2p::check_truncation(&st, r.packed_len())
        })
    }
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
            p2p::check_truncation(&st, r.packed_len()).map_err(|e| e.on(comm))
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

mpi_fn! {
    /// `MPI_Wait`.
    fn MPI_Wait / PMPI_Wait(request: *mut c_int, status: *mut MpiStatus) -> c_int {
        // A send that left as it started (the commonest request there is) has nothing to wait
        // for and no state: reported as the general path would, without the lock.
        // SAFETY: a non-null in-out parameter; status pointer or MPI_STATUS_IGNORE (contract).
        if !request.is_null() && unsafe { all_sent_at_once(request, 1, status) } {
            return error::SUCCESS;
        }
        // A plain send or receive: waited for without the general body (callgrind, Irecv +
        // Wait of 8 bytes: see `complete::wait_plain`).
        if !request.is_null() {
            // SAFETY: a non-null in-out parameter (contract).
            let mut h = unsafe { *request };
            let plain = api::call_plain("MPI_Wait", handle::COMM_WORLD, |l| {
                let r = complete::wait_plain(l, &mut h)?;
                Some(r.and_then(|(st, comm)| {
                    // SAFETY: in-out parameter; status pointer or MPI_STATUS_IGNORE (contract).
                    unsafe {
                        *request = h;
                        mem::put_status(status, &st, false);
                    }
                    complete::status_error(&st, comm)
                }))
            });
            if let Some(code) = plain {
                return code;
            }
        }
        api::call("MPI_Wait", handle::COMM_WORLD, |l| {
            // SAFETY: in-out parameter (contract).
            let mut h = unsafe { mem::get(request, "request") }?;
            api::query_grequests(l, &[h])?;
            let (st, comm) = complete::wait(l, &mut h)?;
            // SAFETY: out-parameters (contract).
            unsafe {
                mem::put(request, h, "request")?;
                mem::put_status(status, &st, false);
            }
            complete::status_error(&st, comm)
        })
    }
}

mpi_fn! {
    /// `MPI_Test`.
    fn MPI_Test / PMPI_Test(request: *mut c_int, flag: *mut c_int, status: *mut MpiStatus) -> c_int {
        // As in `MPI_Wait`: a send that left as it started is complete, without the lock.
        // SAFETY: non-null in-out and out parameters; status pointer or MPI_STATUS_IGNORE
        // (contract).
        if !request.is_null() && !flag.is_null() && unsafe { all_sent_at_once(request, 1, status) } {
            // SAFETY: a non-null out-parameter (contract).
            unsafe { *flag = 1 };
            return error::SUCCESS;
        }
        // A plain send or receive, tested without the general body.
        if !request.is_null() && !flag.is_null() {
            // SAFETY: a non-null in-out parameter (contract).
            let mut h = unsafe { *request };
            let plain = api::call_plain("MPI_Test", handle::COMM_WORLD, |l| {
                let done = complete::test_plain(l.core().ok()?, &mut h)?;
                // SAFETY: non-null in-out and out parameters (contract).
                unsafe {
                    *request = h;
                    *flag = c_int::from(done.is_some());
                }
                Some(match done {
                    Some((st, comm)) => {
                        // SAFETY: status pointer or MPI_STATUS_IGNORE (contract).
                        unsafe { mem::put_status(status, &st, false) };
                        complete::status_error(&st, comm)
                    }
                    None => Ok(()),
                })
            });
            if let Some(code) = plain {
                return code;
            }
        }
        api::call("MPI_Test", handle::COMM_WORLD, |l| {
            // SAFETY: in-out parameter (contract).
            let mut h = unsafe { mem::get(request, "request") }?;
            api::query_grequests(l, &[h])?;
            let done = complete::test(l.core()?, &mut h)?;
            // SAFETY: out-parameters (contract).
            unsafe {
                mem::put(request, h, "request")?;
                mem::put(flag, c_int::from(done.is_some()), "flag")?;
            }
            if let Some((st, comm)) = done {
                // SAFETY: status pointer or MPI_STATUS_IGNORE (contract).
                unsafe { mem::put_status(status, &st, false) };
                complete::status_error(&st, comm)?;
            }
            Ok(())
        })
    }
}

/// When all `count` handles at `requests` are sends that completed as they started
/// (`handle::COMPLETED_SEND`), reports them (`MPI_REQUEST_NULL`, empty statuses) and says so;
/// otherwise changes nothing. Such handles have no state, so this takes no lock. With `count`
/// 1 it is `MPI_Wait`'s and `MPI_Test`'s case too (`MPI_STATUS_IGNORE` is
/// `MPI_STATUSES_IGNORE`).
///
/// # Safety
/// `requests` holds `count` handles; `statuses` holds `count` entries or ignores them.
unsafe fn all_sent_at_once(requests: *mut c_int, count: usize, statuses: *mut MpiStatus) -> bool {
    // SAFETY: `count` handles (caller).
    let hs = unsafe { std::slice::from_raw_parts_mut(requests, count) };
    if hs.iter().any(|&h| h != handle::COMPLETED_SEND) {
        return false;
    }
    let empty = mem::St::default();
    for (i, h) in hs.iter_mut().enumerate() {
        *h = handle::REQUEST_NULL;
        // SAFETY: entry `i` exists or the array is ignored (caller).
        unsafe { mem::put_status_at(statuses, i, &empty, false) };
    }
    true
}

/// Writes the statuses of a multiple completion and returns its error.
///
/// # Safety
/// `statuses` is `MPI_STATUSES_IGNORE` or holds `m.statuses.len()` statuses.
unsafe fn report_many(statuses: *mut MpiStatus, m: &complete::Many) -> Result<(), MpiError> {
    let with_error = m.in_status.is_some();
    for (i, st) in m.statuses.iter().enumerate() {
        // SAFETY: entry `i` exists (caller).
        unsafe { mem::put_status_at(statuses, i, st, with_error) };
    }
    match &m.in_status {
        Some(e) => Err(e.clone()),
        None => Ok(()),
    }
}

mpi_fn! {
    /// `MPI_Waitall`.
    fn MPI_Waitall / PMPI_Waitall(count: c_int, requests: *mut c_int, statuses: *mut MpiStatus) -> c_int {
        // A window of sends that all left as they started (as `MPI_Wait` does for one).
        // SAFETY: `requests` holds `count` handles and `statuses` as many entries or ignores
        // them (contract).
        if count > 0 && !requests.is_null() && unsafe { all_sent_at_once(requests, count as usize, statuses) } {
            return error::SUCCESS;
        }
        api::call("MPI_Waitall", handle::COMM_WORLD, |l| {
            // SAFETY: `requests` holds `count` handles (contract).
            let hs = unsafe { mem::slice_mut(requests, mem::count(count)?, "array_of_requests") }?;
            api::query_grequests(l, hs)?;
            let m = complete::waitall(l, hs, !mem::ignores_status(statuses))?;
            // SAFETY: `statuses` holds `count` entries or ignores them (contract).
            unsafe { report_many(statuses, &m) }
        })
    }
}

mpi_fn! {
    /// `MPI_Testall`.
    fn MPI_Testall / PMPI_Testall(count: c_int, requests: *mut c_int, flag: *mut c_int, statuses: *mut MpiStatus) -> c_int {
        api::call("MPI_Testall", handle::COMM_WORLD, |l| {
            // SAFETY: `requests` holds `count` handles (contract).
            let hs = unsafe { mem::slice_mut(requests, mem::count(count)?, "array_of_requests") }?;
            api::query_grequests(l, hs)?;
            let m = complete::testall(l, hs, !mem::ignores_status(statuses))?;
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(flag, c_int::from(m.is_some()), "flag") }?;
            match m {
                // SAFETY: `statuses` holds `count` entries or ignores them (contract).
                Some(m) => unsafe { report_many(statuses, &m) },
                None => Ok(()),
            }
        })
    }
}

fn any(
    name: &'static str,
    count: c_int,
    requests: *mut c_int,
    index: *mut c_int,
    flag: *mut c_int,
    status: *mut MpiStatus,
    block: bool,
) -> c_int {
    api::call(name, handle::COMM_WORLD, |l| {
        // SAFETY: `requests` holds `count` handles (contract of the calling entry point).
        let hs = unsafe { mem::slice_mut(requests, mem::count(count)?, "array_of_requests") }?;
        api::query_grequests(l, hs)?;
        let found = complete::any(l, hs, block)?;
        if !block {
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(flag, c_int::from(found.is_some()), "flag") }?;
        }
        match found {
            Some((i, st, comm)) => {
                // SAFETY: out-parameters (contract).
                unsafe {
                    mem::put(index, i, "index")?;
                    mem::put_status(status, &st, false);
                }
                complete::status_error(&st, comm)
            }
            // SAFETY: out-parameter (contract).
            None => unsafe { mem::put(index, UNDEFINED, "index") },
        }
    })
}

mpi_fn! {
    /// `MPI_Waitany`.
    fn MPI_Waitany / PMPI_Waitany(count: c_int, requests: *mut c_int, index: *mut c_int, status: *mut MpiStatus) -> c_int {
        any("MPI_Waitany", count, requests, index, std::ptr::null_mut(), status, true)
    }
}

mpi_fn! {
    /// `MPI_Testany`.
    fn MPI_Testany / PMPI_Testany(count: c_int, requests: *mut c_int, index: *mut c_int, flag: *mut c_int, status: *mut MpiStatus) -> c_int {
        any("MPI_Testany", count, requests, index, flag, status, false)
    }
}

fn some(
    name: &'static str,
    incount: c_int,
    requests: *mut c_int,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut MpiStatus,
    block: bool,
) -> c_int {
    api::call(name, handle::COMM_WORLD, |l| {
        let n = mem::count(incount)?;
        // SAFETY: `requests` holds `incount` handles (contract of the calling entry point).
        let hs = unsafe { mem::slice_mut(requests, n, "array_of_requests") }?;
        api::query_grequests(l, hs)?;
        match complete::some(l, hs, block)? {
            // SAFETY: out-parameter (contract).
            None => unsafe { mem::put(outcount, UNDEFINED, "outcount") },
            Some((idx, m)) => {
                // SAFETY: `indices` holds up to `incount` ints (contract).
                let out = unsafe { mem::slice_mut(indices, idx.len(), "array_of_indices") }?;
                out.copy_from_slice(&idx);
                // SAFETY: out-parameter; `statuses` holds up to `incount` entries (contract).
                unsafe {
                    mem::put(outcount, idx.len() as c_int, "outcount")?;
                    report_many(statuses, &m)
                }
            }
        }
    })
}

mpi_fn! {
    /// `MPI_Waitsome`.
    fn MPI_Waitsome / PMPI_Waitsome(incount: c_int, requests: *mut c_int, outcount: *mut c_int, indices: *mut c_int, statuses: *mut MpiStatus) -> c_int {
        some("MPI_Waitsome", incount, requests, outcount, indices, statuses, true)
    }
}

mpi_fn! {
    /// `MPI_Testsome`.
    fn MPI_Testsome / PMPI_Testsome(incount: c_int, requests: *mut c_int, outcount: *mut c_int, indices: *mut c_int, statuses: *mut MpiStatus) -> c_int {
        some("MPI_Testsome", incount, requests, outcount, indices, statuses, false)
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
