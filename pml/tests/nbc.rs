//! Nonblocking and persistent collective schedules on the simulated cluster (`sim`): every
//! collective against a serial reference computed here, for 1-6 ranks, every root, in place
//! and not, every predefined operation on every type it applies to, a non-commutative user
//! operation, sizes on both sides of the eager limit, a network that reorders, delays and
//! pushes back, many schedules outstanding at once completed in a shuffled order, and
//! persistent schedules run several times.
// Rank-indexed tables read clearest by rank.
#![allow(clippy::needless_range_loop)]

mod sim;

use kestrel_pml::nbc::Schedule;
use kestrel_pml::op::{self, Dtype, Op, Reduction, UserOp};
use kestrel_pml::PmlError;
use sim::*;

/// A deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn configs() -> Vec<(&'static str, NetConfig)> {
    vec![
        ("default", NetConfig::default()),
        (
            "reordering, delays, push-back",
            NetConfig {
                reorder: true,
                delay: 3,
                push_back: 7,
                seed: 11,
                ..NetConfig::default()
            },
        ),
        (
            "small eager limit, no single copy",
            NetConfig {
                eager: 96,
                max_send: 256,
                get: false,
                ..NetConfig::default()
            },
        ),
    ]
}

fn send_buf(v: &[u8]) -> UserBuf {
    // SAFETY: every test completes its schedules before the buffers drop, and does not
    // touch them meanwhile.
    unsafe { UserBuf::for_send(v.as_ptr(), v.len()) }
}

fn recv_buf(v: &mut [u8]) -> UserBuf {
    // SAFETY: as for `send_buf`.
    unsafe { UserBuf::for_recv(v.as_mut_ptr(), v.len()) }
}

/// Builds one schedule per rank with `build`, runs them all, and checks they end well.
fn run_all(
    c: &mut Cluster,
    mut build: impl FnMut(&mut Engine, usize) -> Result<Schedule, PmlError>,
) {
    let ids: Vec<(usize, ReqId)> = (0..c.engines.len())
        .map(|r| {
            let s = build(&mut c.engines[r], r).expect("schedule builds");
            (r, c.engines[r].coll_run(s))
        })
        .collect();
    for (i, st) in c.complete(&ids).into_iter().enumerate() {
        let err = c.engines[ids[i].0].coll_error(ids[i].1);
        assert!(
            !st.op_failed && st.failed_peer.is_none() && st.truncated_from.is_none(),
            "rank {i}: {st:?} {err:?}"
        );
    }
}

/// The x86-64 `long double` bytes of a small integer (sign, biased exponent, explicit
/// integer bit; 6 bytes of zero padding).
fn long_double(v: i32) -> [u8; 16] {
    let mut out = [0u8; 16];
    if v != 0 {
        let m = u64::from(v.unsigned_abs());
        let shift = m.leading_zeros();
        out[..8].copy_from_slice(&(m << shift).to_le_bytes());
        let exponent = (16383 + 63 - shift) as u16 | if v < 0 { 0x8000 } else { 0 };
        out[8..10].copy_from_slice(&exponent.to_le_bytes());
    }
    out
}

/// Element values of `dtype` for rank `rank`: random integers; small integral floats, so
/// every order of summing or multiplying gives the same result; pairs with the rank as
/// index and zero padding.
fn values(rng: &mut Rng, dtype: Dtype, count: usize, rank: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(count * dtype.size());
    for _ in 0..count {
        let small = (rng.next() % 7) as i32 - 3;
        match dtype {
            Dtype::F32 => out.extend_from_slice(&(small as f32).to_ne_bytes()),
            Dtype::F64 => out.extend_from_slice(&(small as f64).to_ne_bytes()),
            Dtype::FloatInt => {
                out.extend_from_slice(&(small as f32).to_ne_bytes());
                out.extend_from_slice(&(rank as i32).to_ne_bytes());
            }
            Dtype::DoubleInt => {
                out.extend_from_slice(&(small as f64).to_ne_bytes());
                out.extend_from_slice(&(rank as i32).to_ne_bytes());
                out.extend_from_slice(&[0; 4]);
            }
            Dtype::LongInt => {
                out.extend_from_slice(&(small as i64).to_ne_bytes());
                out.extend_from_slice(&(rank as i32).to_ne_bytes());
                out.extend_from_slice(&[0; 4]);
            }
            Dtype::TwoInt => {
                out.extend_from_slice(&small.to_ne_bytes());
                out.extend_from_slice(&(rank as i32).to_ne_bytes());
            }
            Dtype::ShortInt => {
                out.extend_from_slice(&(small as i16).to_ne_bytes());
                out.extend_from_slice(&[0; 2]);
                out.extend_from_slice(&(rank as i32).to_ne_bytes());
            }
            // Complex values are positive reals: with an imaginary part, the sign of a zero
            // in a product depends on the order of the factors, and orders differ.
            Dtype::C32 => {
                out.extend_from_slice(&(small.abs() as f32 + 1.0).to_ne_bytes());
                out.extend_from_slice(&0f32.to_ne_bytes());
            }
            Dtype::C64 => {
                out.extend_from_slice(&(small.abs() as f64 + 1.0).to_ne_bytes());
                out.extend_from_slice(&0f64.to_ne_bytes());
            }
            Dtype::F80 => out.extend_from_slice(&long_double(small)),
            Dtype::C80 => {
                out.extend_from_slice(&long_double(small.abs() + 1));
                out.extend_from_slice(&long_double(0));
            }
            Dtype::LongDoubleInt => {
                out.extend_from_slice(&long_double(small));
                out.extend_from_slice(&(rank as i32).to_ne_bytes());
                out.extend_from_slice(&[0; 12]);
            }
            Dtype::TwoF32 => {
                out.extend_from_slice(&(small as f32).to_ne_bytes());
                out.extend_from_slice(&(rank as f32).to_ne_bytes());
            }
            Dtype::TwoF64 => {
                out.extend_from_slice(&(small as f64).to_ne_bytes());
                out.extend_from_slice(&(rank as f64).to_ne_bytes());
            }
            d => {
                for _ in 0..d.size() {
                    out.push(rng.next() as u8);
                }
            }
        }
    }
    out
}

/// 2x2 matrices of wrapping u64: associative, not commutative.
const MAT: usize = 32;

fn mat_mul(a: &[u8], b: &[u8]) -> [u8; MAT] {
    let get = |m: &[u8], i: usize| u64::from_ne_bytes(m[i * 8..i * 8 + 8].try_into().unwrap());
    let (a0, a1, a2, a3) = (get(a, 0), get(a, 1), get(a, 2), get(a, 3));
    let (b0, b1, b2, b3) = (get(b, 0), get(b, 1), get(b, 2), get(b, 3));
    let r = [
        a0.wrapping_mul(b0).wrapping_add(a1.wrapping_mul(b2)),
        a0.wrapping_mul(b1).wrapping_add(a1.wrapping_mul(b3)),
        a2.wrapping_mul(b0).wrapping_add(a3.wrapping_mul(b2)),
        a2.wrapping_mul(b1).wrapping_add(a3.wrapping_mul(b3)),
    ];
    let mut out = [0u8; MAT];
    for (i, v) in r.iter().enumerate() {
        out[i * 8..i * 8 + 8].copy_from_slice(&v.to_ne_bytes());
    }
    out
}

/// The non-commutative user operation: `inout = input × inout`, element by element.
fn matrix_op() -> Reduction {
    Reduction::User(UserOp::new(false, |input, inout| {
        for (a, b) in input.chunks_exact(MAT).zip(inout.chunks_exact_mut(MAT)) {
            let r = mat_mul(a, b);
            b.copy_from_slice(&r);
        }
    }))
}

/// `a OP b` with `a` the lower ranks' operand.
fn combine(op: &Reduction, dtype: Dtype, a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut out = b.to_vec();
    op.apply(dtype, a, &mut out).expect("reference reduction");
    out
}

/// The reduction of `data[range]` in rank order.
fn fold(op: &Reduction, dtype: Dtype, data: &[Vec<u8>]) -> Vec<u8> {
    let mut acc = data[0].clone();
    for d in &data[1..] {
        acc = combine(op, dtype, &acc, d);
    }
    acc
}

/// Every (operation, element type) pair MPI defines, and the matrix product.
fn reductions() -> Vec<(String, Reduction, Dtype)> {
    let mut v = Vec::new();
    for o in Op::ALL {
        for d in Dtype::ALL {
            if o.applies_to(d) {
                v.push((format!("{} on {d}", o.name()), Reduction::Predefined(o), d));
            }
        }
    }
    v.push((
        "matrix product".into(),
        matrix_op(),
        Dtype::Opaque(MAT as u32),
    ));
    v
}

fn data_for(rng: &mut Rng, dtype: Dtype, count: usize, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|r| {
            if let Dtype::Opaque(_) = dtype {
                (0..count * 4)
                    .flat_map(|_| (rng.next() % 5).to_ne_bytes())
                    .collect()
            } else {
                values(rng, dtype, count, r)
            }
        })
        .collect()
}

#[test]
fn every_reduction_on_every_type_matches_the_serial_result() {
    let mut rng = Rng(0x5eed);
    for n in 1..=6usize {
        for (name, op, dtype) in reductions() {
            let count = 5;
            let data = data_for(&mut rng, dtype, count, n);
            let len = data[0].len();
            let total = fold(&op, dtype, &data);
            let mut c = Cluster::new(n as u32, NetConfig::default());

            // allreduce, out of place and in place.
            for in_place in [false, true] {
                let mut out: Vec<Vec<u8>> = if in_place {
                    data.clone()
                } else {
                    vec![vec![0; len]; n]
                };
                run_all(&mut c, |e, r| {
                    let send = (!in_place).then(|| send_buf(&data[r]));
                    e.nbc_allreduce(CTX_WORLD, send, recv_buf(&mut out[r]), dtype, op.clone())
                });
                for (r, o) in out.iter().enumerate() {
                    assert_eq!(
                        o, &total,
                        "allreduce {name}, n={n}, rank {r}, in place {in_place}"
                    );
                }
            }

            // reduce at every root.
            for root in 0..n {
                let mut out = vec![0u8; len];
                run_all(&mut c, |e, r| {
                    let recv = (r == root).then(|| recv_buf(&mut out));
                    e.nbc_reduce(
                        CTX_WORLD,
                        root as u32,
                        Some(send_buf(&data[r])),
                        recv,
                        dtype,
                        op.clone(),
                    )
                });
                assert_eq!(out, total, "reduce {name}, n={n}, root {root}");
            }

            // scan and exscan.
            for exclusive in [false, true] {
                let mut out: Vec<Vec<u8>> = vec![vec![0; len]; n];
                run_all(&mut c, |e, r| {
                    e.nbc_scan(
                        CTX_WORLD,
                        Some(send_buf(&data[r])),
                        recv_buf(&mut out[r]),
                        dtype,
                        op.clone(),
                        exclusive,
                    )
                });
                for r in usize::from(exclusive)..n {
                    let upto = if exclusive { r } else { r + 1 };
                    assert_eq!(
                        out[r],
                        fold(&op, dtype, &data[..upto]),
                        "scan {name} exclusive {exclusive}, n={n}, rank {r}"
                    );
                }
            }

            // reduce_scatter with uneven blocks (one may be empty).
            let es = dtype.size();
            let counts: Vec<usize> = (0..n).map(|r| ((r * 3 + 1) % 4) * es).collect();
            let sum: usize = counts.iter().sum();
            let vdata = data_for(&mut rng, dtype, sum / es, n);
            let vtotal = fold(&op, dtype, &vdata);
            let mut out: Vec<Vec<u8>> = counts.iter().map(|&c| vec![0u8; c]).collect();
            run_all(&mut c, |e, r| {
                e.nbc_reduce_scatter(
                    CTX_WORLD,
                    Some(send_buf(&vdata[r])),
                    recv_buf(&mut out[r]),
                    &counts,
                    dtype,
                    op.clone(),
                )
            });
            let mut at = 0;
            for (r, o) in out.iter().enumerate() {
                assert_eq!(
                    o[..],
                    vtotal[at..at + counts[r]],
                    "reduce_scatter {name}, n={n}, rank {r}"
                );
                at += counts[r];
            }
        }
    }
}

#[test]
fn reductions_in_place_and_across_the_eager_limit_on_every_network() {
    for (net, cfg) in configs() {
        let mut rng = Rng(77);
        for n in 1..=6usize {
            for count in [1usize, 300, 3000] {
                for (name, op, dtype) in [
                    ("sum i32", Reduction::Predefined(Op::Sum), Dtype::I32),
                    ("matrix", matrix_op(), Dtype::Opaque(MAT as u32)),
                ] {
                    let data = data_for(&mut rng, dtype, count, n);
                    let len = data[0].len();
                    let total = fold(&op, dtype, &data);
                    let mut c = Cluster::new(n as u32, cfg);
                    let what = format!("{name}, {count} elements, n={n}, {net}");
                    for root in [0, n - 1, n / 2] {
                        // The root reduces in place.
                        let mut out = data[root].clone();
                        run_all(&mut c, |e, r| {
                            let (send, recv) = if r == root {
                                (None, Some(recv_buf(&mut out)))
                            } else {
                                (Some(send_buf(&data[r])), None)
                            };
                            e.nbc_reduce(CTX_WORLD, root as u32, send, recv, dtype, op.clone())
                        });
                        assert_eq!(out, total, "reduce in place at {root}: {what}");
                    }
                    let mut out = data.clone();
                    run_all(&mut c, |e, r| {
                        e.nbc_allreduce(CTX_WORLD, None, recv_buf(&mut out[r]), dtype, op.clone())
                    });
                    assert!(
                        out.iter().all(|o| o == &total),
                        "allreduce in place: {what}"
                    );
                    let mut out = data.clone();
                    run_all(&mut c, |e, r| {
                        e.nbc_scan(
                            CTX_WORLD,
                            None,
                            recv_buf(&mut out[r]),
                            dtype,
                            op.clone(),
                            false,
                        )
                    });
                    for r in 0..n {
                        assert_eq!(
                            out[r],
                            fold(&op, dtype, &data[..=r]),
                            "scan in place rank {r}: {what}"
                        );
                    }
                    let mut out = data.clone();
                    run_all(&mut c, |e, r| {
                        e.nbc_scan(
                            CTX_WORLD,
                            None,
                            recv_buf(&mut out[r]),
                            dtype,
                            op.clone(),
                            true,
                        )
                    });
                    for r in 1..n {
                        assert_eq!(
                            out[r],
                            fold(&op, dtype, &data[..r]),
                            "exscan in place rank {r}: {what}"
                        );
                    }
                    // reduce_scatter_block in place: the whole vector is in the receive buffer.
                    let block = len;
                    let vdata = data_for(&mut rng, dtype, count * n, n);
                    let vtotal = fold(&op, dtype, &vdata);
                    let mut out = vdata.clone();
                    run_all(&mut c, |e, r| {
                        e.nbc_reduce_scatter(
                            CTX_WORLD,
                            None,
                            recv_buf(&mut out[r]),
                            &vec![block; n],
                            dtype,
                            op.clone(),
                        )
                    });
                    for r in 0..n {
                        assert_eq!(
                            out[r][..block],
                            vtotal[r * block..(r + 1) * block],
                            "reduce_scatter_block in place rank {r}: {what}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn data_movement_collectives_match_the_serial_result() {
    for (net, cfg) in configs() {
        let mut rng = Rng(99);
        for n in 1..=6usize {
            let mut c = Cluster::new(n as u32, cfg);
            for len in [0usize, 1, 100, 5000] {
                let what = format!("{len} bytes, n={n}, {net}");
                let data: Vec<Vec<u8>> = (0..n)
                    .map(|_| (0..len).map(|_| rng.next() as u8).collect())
                    .collect();
                run_all(&mut c, |e, _| e.nbc_barrier(CTX_WORLD));
                for root in 0..n {
                    let mut bufs: Vec<Vec<u8>> = (0..n)
                        .map(|r| {
                            if r == root {
                                data[root].clone()
                            } else {
                                vec![0; len]
                            }
                        })
                        .collect();
                    run_all(&mut c, |e, r| {
                        e.nbc_bcast(CTX_WORLD, root as u32, recv_buf(&mut bufs[r]))
                    });
                    assert!(
                        bufs.iter().all(|b| b == &data[root]),
                        "bcast from {root}: {what}"
                    );

                    // gather: uneven blocks; the root in place half of the time.
                    let counts: Vec<usize> = (0..n).map(|r| (len + r * 7) % (len + 3)).collect();
                    let displs: Vec<usize> = counts
                        .iter()
                        .scan(5, |at, &c| {
                            let d = *at;
                            *at += c + 2;
                            Some(d)
                        })
                        .collect();
                    let size = displs[n - 1] + counts[n - 1] + 1;
                    let parts: Vec<Vec<u8>> = (0..n)
                        .map(|r| (0..counts[r]).map(|_| rng.next() as u8).collect())
                        .collect();
                    let in_place = root % 2 == 1;
                    let mut out = vec![0xeeu8; size];
                    if in_place {
                        out[displs[root]..displs[root] + counts[root]]
                            .copy_from_slice(&parts[root]);
                    }
                    run_all(&mut c, |e, r| {
                        let send = (!(in_place && r == root)).then(|| send_buf(&parts[r]));
                        let recv = (r == root).then(|| recv_buf(&mut out));
                        e.nbc_gatherv(CTX_WORLD, root as u32, send, recv, &counts, &displs)
                    });
                    for r in 0..n {
                        assert_eq!(
                            out[displs[r]..displs[r] + counts[r]],
                            parts[r][..],
                            "gatherv block {r} at {root}: {what}"
                        );
                    }
                    assert_eq!(out[0], 0xee, "gatherv wrote outside the blocks: {what}");

                    // scatter: the same layout back.
                    let mut got: Vec<Vec<u8>> = counts.iter().map(|&c| vec![0; c]).collect();
                    run_all(&mut c, |e, r| {
                        let send = (r == root).then(|| send_buf(&out));
                        let recv = (!(in_place && r == root)).then(|| recv_buf(&mut got[r]));
                        e.nbc_scatterv(CTX_WORLD, root as u32, send, &counts, &displs, recv)
                    });
                    for r in (0..n).filter(|&r| !(in_place && r == root)) {
                        assert_eq!(got[r], parts[r], "scatterv block {r} from {root}: {what}");
                    }
                }

                // allgatherv, in place on odd ranks.
                let counts: Vec<usize> = (0..n).map(|r| (len * (r + 1)) % (len + 5)).collect();
                let displs: Vec<usize> = counts
                    .iter()
                    .scan(0, |at, &c| {
                        let d = *at;
                        *at += c;
                        Some(d)
                    })
                    .collect();
                let total: usize = counts.iter().sum();
                let parts: Vec<Vec<u8>> = (0..n)
                    .map(|r| (0..counts[r]).map(|_| rng.next() as u8).collect())
                    .collect();
                let expect: Vec<u8> = parts.concat();
                let mut outs: Vec<Vec<u8>> = (0..n)
                    .map(|r| {
                        let mut o = vec![0u8; total];
                        if r % 2 == 1 {
                            o[displs[r]..displs[r] + counts[r]].copy_from_slice(&parts[r]);
                        }
                        o
                    })
                    .collect();
                run_all(&mut c, |e, r| {
                    let send = (r % 2 == 0).then(|| send_buf(&parts[r]));
                    e.nbc_allgatherv(CTX_WORLD, send, recv_buf(&mut outs[r]), &counts, &displs)
                });
                assert!(outs.iter().all(|o| o == &expect), "allgatherv: {what}");

                // alltoallv: rank s sends (s + d) % 3 * len/3 bytes to d; in place on rank 0.
                let sz = |s: usize, d: usize| ((s + d) % 3) * (len / 3 + 1);
                let payload = |s: usize, d: usize| -> Vec<u8> {
                    (0..sz(s, d)).map(|i| (s * 31 + d * 7 + i) as u8).collect()
                };
                let sends: Vec<(Vec<u8>, Vec<usize>, Vec<usize>)> = (0..n)
                    .map(|s| {
                        let counts: Vec<usize> = (0..n).map(|d| sz(s, d)).collect();
                        let displs: Vec<usize> = counts
                            .iter()
                            .scan(0, |at, &c| {
                                let d = *at;
                                *at += c;
                                Some(d)
                            })
                            .collect();
                        ((0..n).flat_map(|d| payload(s, d)).collect(), counts, displs)
                    })
                    .collect();
                let recvs: Vec<(Vec<usize>, Vec<usize>)> = (0..n)
                    .map(|d| {
                        let counts: Vec<usize> = (0..n).map(|s| sz(s, d)).collect();
                        let displs: Vec<usize> = counts
                            .iter()
                            .scan(0, |at, &c| {
                                let x = *at;
                                *at += c;
                                Some(x)
                            })
                            .collect();
                        (counts, displs)
                    })
                    .collect();
                let mut outs: Vec<Vec<u8>> =
                    (0..n).map(|d| vec![0u8; recvs[d].0.iter().sum()]).collect();
                // In place on rank 0: its data is in the receive buffer with the receive layout
                // (which for this pattern is the same as the send layout).
                outs[0] = (0..n).flat_map(|d| payload(0, d)).collect();
                run_all(&mut c, |e, r| {
                    let send = (r != 0).then(|| send_buf(&sends[r].0));
                    e.nbc_alltoallv(
                        CTX_WORLD,
                        send,
                        &sends[r].1,
                        &sends[r].2,
                        recv_buf(&mut outs[r]),
                        &recvs[r].0,
                        &recvs[r].1,
                    )
                });
                for d in 0..n {
                    let expect: Vec<u8> = (0..n).flat_map(|s| payload(s, d)).collect();
                    assert_eq!(outs[d], expect, "alltoallv at {d}: {what}");
                }
            }
        }
    }
}

#[test]
fn many_outstanding_schedules_complete_in_any_order() {
    let n = 4usize;
    let mut c = Cluster::new(
        n as u32,
        NetConfig {
            reorder: true,
            delay: 2,
            seed: 5,
            ..NetConfig::default()
        },
    );
    let rounds = 40;
    let data: Vec<Vec<Vec<u8>>> = (0..rounds)
        .map(|k| {
            (0..n)
                .map(|r| ((k * 10 + r) as i64).to_ne_bytes().repeat(1 + k % 5))
                .collect()
        })
        .collect();
    let mut outs: Vec<Vec<Vec<u8>>> = (0..rounds)
        .map(|k| vec![vec![0u8; data[k][0].len()]; n])
        .collect();
    let mut bc: Vec<Vec<Vec<u8>>> = (0..rounds)
        .map(|k| {
            (0..n)
                .map(|r| {
                    if r == k % n {
                        vec![k as u8; 2000]
                    } else {
                        vec![0; 2000]
                    }
                })
                .collect()
        })
        .collect();
    let mut ids: Vec<(usize, ReqId)> = Vec::new();
    for k in 0..rounds {
        for r in 0..n {
            let s = c.engines[r]
                .nbc_allreduce(
                    CTX_WORLD,
                    Some(send_buf(&data[k][r])),
                    recv_buf(&mut outs[k][r]),
                    Dtype::I64,
                    Reduction::Predefined(Op::Sum),
                )
                .unwrap();
            ids.push((r, c.engines[r].coll_run(s)));
            let s = c.engines[r]
                .nbc_bcast(CTX_WORLD, (k % n) as u32, recv_buf(&mut bc[k][r]))
                .unwrap();
            ids.push((r, c.engines[r].coll_run(s)));
        }
    }
    // Complete them in a shuffled order, one at a time (the others progress meanwhile).
    let mut rng = Rng(3);
    for i in (1..ids.len()).rev() {
        let j = (rng.next() % (i as u64 + 1)) as usize;
        ids.swap(i, j);
    }
    for &id in &ids {
        let st = c.complete(&[id]);
        assert!(!st[0].op_failed);
    }
    for k in 0..rounds {
        let mut expect = data[k][0].clone();
        for r in 1..n {
            op::reduce(Op::Sum, Dtype::I64, &data[k][r], &mut expect).unwrap();
        }
        for r in 0..n {
            assert_eq!(outs[k][r], expect, "allreduce {k} at {r}");
            assert_eq!(bc[k][r], vec![k as u8; 2000], "bcast {k} at {r}");
        }
    }
}

#[test]
fn persistent_schedules_run_again_with_new_data() {
    let n = 3usize;
    let mut c = Cluster::new(n as u32, NetConfig::default());
    let mut send: Vec<Vec<u8>> = vec![vec![0; 8]; n];
    let mut recv: Vec<Vec<u8>> = vec![vec![0; 8]; n];
    let ids: Vec<(usize, ReqId)> = (0..n)
        .map(|r| {
            let s = c.engines[r]
                .nbc_allreduce(
                    CTX_WORLD,
                    Some(send_buf(&send[r])),
                    recv_buf(&mut recv[r]),
                    Dtype::I64,
                    Reduction::Predefined(Op::Sum),
                )
                .unwrap();
            (r, c.engines[r].coll_persist(s))
        })
        .collect();
    // Not started: waiting on it returns at once.
    for &(r, id) in &ids {
        assert!(!c.engines[r].coll_is_active(id));
        assert!(c.engines[r].try_complete(id).is_some());
    }
    for run in 1..=5i64 {
        for (r, s) in send.iter_mut().enumerate() {
            s.copy_from_slice(&(run * (r as i64 + 1)).to_ne_bytes());
        }
        for &(r, id) in &ids {
            c.engines[r].coll_start(id).unwrap();
            assert!(
                c.engines[r].coll_start(id).is_err(),
                "an active request cannot start again"
            );
        }
        c.complete(&ids);
        for r in &recv {
            assert_eq!(
                i64::from_ne_bytes(r[..].try_into().unwrap()),
                run * 6,
                "run {run}"
            );
        }
    }
    for &(r, id) in &ids {
        c.engines[r].coll_free(id);
        assert!(
            c.engines[r].coll_start(id).is_err(),
            "a freed request is gone"
        );
    }
}

#[test]
fn a_count_mismatch_is_an_error_not_a_hang() {
    let mut c = Cluster::new(2, NetConfig::default());
    let a = vec![1u8; 16];
    let mut b = vec![0u8; 8];
    let s0 = c.engines[0].nbc_bcast(CTX_WORLD, 0, send_buf(&a)).unwrap();
    let s1 = c.engines[1]
        .nbc_bcast(CTX_WORLD, 0, recv_buf(&mut b))
        .unwrap();
    let ids = [
        (0, c.engines[0].coll_run(s0)),
        (1, c.engines[1].coll_run(s1)),
    ];
    let st = c.complete(&ids);
    assert_eq!(st[1].truncated_from, Some(16));
    let e = c.engines[1]
        .coll_error(ids[1].1)
        .expect("the error is kept");
    assert!(
        e.to_string()
            .contains("rank 0 sent 16 bytes where 8 were expected"),
        "{e}"
    );
}

#[test]
fn a_rank_completes_while_its_peer_makes_no_progress() {
    // Two ranks; after both started, only rank 1 progresses (rank 0 "computes"). With
    // single copy, rank 1's allreduce must complete at every size: the peer's data is read
    // from its engine's copy, and rank 1's own large send goes on in the background.
    for len in [8usize, 4096, 100_000] {
        let mut c = Cluster::new(2, NetConfig::default());
        let data: Vec<Vec<u8>> = (0..2).map(|r| vec![r as u8 + 1; len]).collect();
        let mut out = vec![vec![0u8; len]; 2];
        let ids: Vec<ReqId> = (0..2)
            .map(|r| {
                let s = c.engines[r]
                    .nbc_allreduce(
                        CTX_WORLD,
                        Some(send_buf(&data[r])),
                        recv_buf(&mut out[r]),
                        Dtype::U8,
                        Reduction::Predefined(Op::Sum),
                    )
                    .unwrap();
                c.engines[r].coll_run(s)
            })
            .collect();
        let mut done = None;
        for _ in 0..1000 {
            c.net.borrow_mut().now += 1;
            c.engines[1].progress();
            if let Some(st) = c.engines[1].try_complete(ids[1]) {
                done = Some(st);
                break;
            }
        }
        assert!(
            done.is_some(),
            "{len} bytes: rank 1 waited for its idle peer"
        );
        assert_eq!(out[1], vec![3u8; len], "{len} bytes");
        // Rank 0 catches up later.
        c.complete(&[(0, ids[0])]);
        assert_eq!(out[0], vec![3u8; len]);
    }
}
