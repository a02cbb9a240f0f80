//! Self-checking collectives against a serial reference: every rank computes what each
//! collective must return from the deterministic inputs of all ranks, and compares.
//!
//! `coll_check MODE`: `full` (every operation × predefined op × type × count × root ×
//! communicator size 1..=size via split, in place too), `concurrent` (two halves of the
//! world run collectives at the same time), `repeat N` (N back-to-back small collectives),
//! `user` (user-defined operations, commutative or not), `large` (1 Mi elements),
//! `interleaved` (`full`'s checks on the world reordered even ranks first, so that with
//! ranks placed by block each node's members are not consecutive ranks).

use kestrel::collective::{
    CommunicatorCollectives, DoubleInt, Reducible, Root, SystemOperation, TwoInt, UserOperation,
};
use kestrel::{Color, Communicator, SimpleCommunicator};

fn fail(rank: i32, what: String) -> ! {
    eprintln!("coll_check: rank {rank}: {what}");
    std::process::exit(1)
}

/// A value type the reference can compute with exactly.
trait Val: Reducible + PartialEq + std::fmt::Debug {
    fn from_i64(v: i64) -> Self;
    fn combine(op: &str, a: Self, b: Self) -> Self;
}

macro_rules! int_val {
    ($($t:ty),*) => {$(
        impl Val for $t {
            fn from_i64(v: i64) -> Self { v as $t }
            fn combine(op: &str, a: Self, b: Self) -> Self {
                match op {
                    "sum" => a.wrapping_add(b),
                    "prod" => a.wrapping_mul(b),
                    "min" => a.min(b),
                    "max" => a.max(b),
                    "land" => ((a != 0) && (b != 0)) as $t,
                    "lor" => ((a != 0) || (b != 0)) as $t,
                    "lxor" => ((a != 0) != (b != 0)) as $t,
                    "band" => a & b,
                    "bor" => a | b,
                    "bxor" => a ^ b,
                    _ => unreachable!(),
                }
            }
        }
    )*};
}
int_val!(i8, u8, i16, u16, i32, u32, i64, u64);

macro_rules! float_val {
    ($($t:ty),*) => {$(
        impl Val for $t {
            fn from_i64(v: i64) -> Self { v as $t }
            fn combine(op: &str, a: Self, b: Self) -> Self {
                match op {
                    "sum" => a + b,
                    "prod" => a * b,
                    "min" => if a < b { a } else { b },
                    "max" => if a > b { a } else { b },
                    _ => unreachable!(),
                }
            }
        }
    )*};
}
float_val!(f32, f64);

fn sysop(name: &str) -> SystemOperation {
    match name {
        "sum" => SystemOperation::sum(),
        "prod" => SystemOperation::product(),
        "min" => SystemOperation::min(),
        "max" => SystemOperation::max(),
        "land" => SystemOperation::logical_and(),
        "lor" => SystemOperation::logical_or(),
        "lxor" => SystemOperation::logical_xor(),
        "band" => SystemOperation::bitwise_and(),
        "bor" => SystemOperation::bitwise_or(),
        _ => SystemOperation::bitwise_xor(),
    }
}

/// Element i of rank r's contribution: small values so sums and products stay exact.
fn input<T: Val>(op: &str, r: i32, i: usize) -> T {
    let v = match op {
        "prod" => 1 + ((r as i64 + i as i64) % 2),
        "land" | "lor" | "lxor" => ((r as i64 * 7 + i as i64) % 3 == 0) as i64,
        _ => ((r as i64 * 31 + i as i64 * 17) % 101) - 50,
    };
    T::from_i64(v)
}

fn reference<T: Val>(op: &str, ranks: std::ops::Range<i32>, i: usize) -> T {
    let mut acc = input::<T>(op, ranks.start, i);
    for r in ranks.start + 1..ranks.end {
        acc = T::combine(op, acc, input::<T>(op, r, i));
    }
    acc
}

fn check_type<T: Val>(c: &SimpleCommunicator, ops: &[&str], counts: &[usize]) {
    let (me, n) = (c.rank(), c.size());
    for &op in ops {
        for &count in counts {
            let mine: Vec<T> = (0..count).map(|i| input::<T>(op, me, i)).collect();
            let want: Vec<T> = (0..count).map(|i| reference::<T>(op, 0..n, i)).collect();
            let what = |name: &str| {
                format!(
                    "{name} {op} on {} x{count} ({} ranks)",
                    std::any::type_name::<T>(),
                    n
                )
            };
            let mut out = vec![T::from_i64(0); count];
            c.all_reduce_into(&mine, &mut out, sysop(op));
            if out != want {
                fail(me, what("allreduce"));
            }
            let mut inplace = mine.clone();
            c.all_reduce_in_place(&mut inplace, sysop(op));
            if inplace != want {
                fail(me, what("allreduce in place"));
            }
            for root in 0..n {
                if root == me {
                    let mut out = vec![T::from_i64(0); count];
                    c.process_at_rank(root)
                        .reduce_into_root(&mine, &mut out, sysop(op));
                    if out != want {
                        fail(me, what(&format!("reduce to {root}")));
                    }
                } else {
                    c.process_at_rank(root).reduce_into(&mine, sysop(op));
                }
            }
            let mut scan = vec![T::from_i64(0); count];
            c.scan_into(&mine, &mut scan, sysop(op));
            let want_scan: Vec<T> = (0..count)
                .map(|i| reference::<T>(op, 0..me + 1, i))
                .collect();
            if scan != want_scan {
                fail(me, what("scan"));
            }
            let mut ex = vec![T::from_i64(7); count];
            c.exclusive_scan_into(&mine, &mut ex, sysop(op));
            let want_ex: Vec<T> = if me == 0 {
                vec![T::from_i64(7); count]
            } else {
                (0..count).map(|i| reference::<T>(op, 0..me, i)).collect()
            };
            if ex != want_ex {
                fail(me, what("exscan"));
            }
            // reduce_scatter_block: each rank gets `count` elements of an n*count reduction.
            let big: Vec<T> = (0..count * n as usize)
                .map(|i| input::<T>(op, me, i))
                .collect();
            let mut block = vec![T::from_i64(0); count];
            c.reduce_scatter_block_into(&big, &mut block, sysop(op));
            let want_block: Vec<T> = (0..count)
                .map(|i| reference::<T>(op, 0..n, me as usize * count + i))
                .collect();
            if block != want_block {
                fail(me, what("reduce_scatter_block"));
            }
        }
    }
}

fn check_data_movement(c: &SimpleCommunicator, count: usize) {
    let (me, n) = (c.rank(), c.size());
    let nn = n as usize;
    let val = |r: i32, i: usize| (r as u64) << 32 | i as u64;
    let mine: Vec<u64> = (0..count).map(|i| val(me, i)).collect();
    for root in 0..n {
        let mut b: Vec<u64> = if me == root {
            mine.clone()
        } else {
            vec![0; count]
        };
        c.process_at_rank(root).broadcast_into(&mut b);
        if b != (0..count).map(|i| val(root, i)).collect::<Vec<_>>() {
            fail(me, format!("bcast from {root} x{count} ({n} ranks)"));
        }
        if me == root {
            let mut all = vec![0u64; count * nn];
            c.process_at_rank(root).gather_into_root(&mine, &mut all);
            let want: Vec<u64> = (0..n)
                .flat_map(|r| (0..count).map(move |i| val(r, i)))
                .collect();
            if all != want {
                fail(me, format!("gather to {root} x{count}"));
            }
            let mut back = vec![0u64; count];
            c.process_at_rank(root).scatter_into_root(&want, &mut back);
            if back != mine {
                fail(me, format!("scatter from {root} x{count}"));
            }
            // Variable counts: rank r sends r+1 more elements than count/2.
            let counts: Vec<usize> = (0..nn).map(|r| count / 2 + r).collect();
            let mut v = vec![0u64; counts.iter().sum()];
            c.process_at_rank(root).gather_varcount_into_root(
                &mine_var(me, count),
                &mut v,
                &counts,
            );
            let want_v: Vec<u64> = (0..n).flat_map(|r| mine_var(r, count)).collect();
            if v != want_v {
                fail(me, format!("gatherv to {root} x{count}"));
            }
            let mut vb = vec![0u64; counts[me as usize]];
            c.process_at_rank(root)
                .scatter_varcount_into_root(&want_v, &counts, &mut vb);
            if vb != mine_var(me, count) {
                fail(me, format!("scatterv from {root}"));
            }
        } else {
            c.process_at_rank(root).gather_into(&mine);
            let mut back = vec![0u64; count];
            c.process_at_rank(root).scatter_into(&mut back);
            if back != mine {
                fail(me, format!("scatter from {root} x{count}"));
            }
            c.process_at_rank(root)
                .gather_varcount_into(&mine_var(me, count));
            let mut vb = vec![0u64; count / 2 + me as usize];
            c.process_at_rank(root).scatter_varcount_into(&mut vb);
            if vb != mine_var(me, count) {
                fail(me, format!("scatterv from {root} (non-root)"));
            }
        }
    }
    let mut all = vec![0u64; count * nn];
    c.all_gather_into(&mine, &mut all);
    if all
        != (0..n)
            .flat_map(|r| (0..count).map(move |i| val(r, i)))
            .collect::<Vec<_>>()
    {
        fail(me, format!("allgather x{count} ({n} ranks)"));
    }
    let counts: Vec<usize> = (0..nn).map(|r| count / 2 + r).collect();
    let mut allv = vec![0u64; counts.iter().sum()];
    c.all_gather_varcount_into(&mine_var(me, count), &mut allv, &counts);
    if allv != (0..n).flat_map(|r| mine_var(r, count)).collect::<Vec<_>>() {
        fail(me, format!("allgatherv x{count}"));
    }
    // alltoall: block d of rank s holds (s, d, i).
    let a2a = |s: i32, d: usize, i: usize| ((s as u64) << 40) | ((d as u64) << 20) | i as u64;
    let send: Vec<u64> = (0..nn)
        .flat_map(|d| (0..count).map(move |i| a2a(me, d, i)))
        .collect();
    let mut recv = vec![0u64; count * nn];
    c.all_to_all_into(&send, &mut recv);
    if recv
        != (0..n)
            .flat_map(|s| (0..count).map(move |i| a2a(s, me as usize, i)))
            .collect::<Vec<_>>()
    {
        fail(me, format!("alltoall x{count} ({n} ranks)"));
    }
    // alltoallv: rank s sends d+1 elements to rank d.
    let scounts: Vec<usize> = (0..nn).map(|d| d + 1).collect();
    let sdispls: Vec<usize> = (0..nn).map(|d| d * (d + 1) / 2).collect();
    let sendv: Vec<u64> = (0..nn)
        .flat_map(|d| (0..d + 1).map(move |i| a2a(me, d, i)))
        .collect();
    let rcounts = vec![me as usize + 1; nn];
    let rdispls: Vec<usize> = (0..nn).map(|s| s * (me as usize + 1)).collect();
    let mut recvv = vec![0u64; nn * (me as usize + 1)];
    c.all_to_all_varcount_into(&sendv, &scounts, &sdispls, &mut recvv, &rcounts, &rdispls);
    if recvv
        != (0..n)
            .flat_map(|s| (0..me as usize + 1).map(move |i| a2a(s, me as usize, i)))
            .collect::<Vec<_>>()
    {
        fail(me, "alltoallv".into());
    }
    c.barrier();
}

fn mine_var(r: i32, count: usize) -> Vec<u64> {
    (0..count / 2 + r as usize)
        .map(|i| (r as u64) << 32 | (i as u64 + 1000))
        .collect()
}

fn check_loc(c: &SimpleCommunicator) {
    let (me, n) = (c.rank(), c.size());
    let mine: Vec<DoubleInt> = (0..5)
        .map(|i| DoubleInt::new(((me as i64 * 3 + i) % 4) as f64, me))
        .collect();
    let mut min = vec![DoubleInt::default(); 5];
    c.all_reduce_into(&mine, &mut min, SystemOperation::min_loc());
    for (i, m) in min.iter().enumerate() {
        let best = (0..n)
            .map(|r| (((r as i64 * 3 + i as i64) % 4) as f64, r))
            .fold((f64::MAX, 0), |a, b| if b.0 < a.0 { b } else { a });
        if (m.value, m.index) != best {
            fail(me, format!("minloc element {i}: {m:?}, want {best:?}"));
        }
    }
    let mine2 = [TwoInt::new(me % 2, me)];
    let mut max = [TwoInt::default()];
    c.all_reduce_into(&mine2, &mut max, SystemOperation::max_loc());
    let want = if n > 1 { (1, 1) } else { (0, 0) };
    if (max[0].value, max[0].index) != want {
        fail(me, format!("maxloc: {:?}", max[0]));
    }
}

fn full(c: &SimpleCommunicator) {
    let int_ops = [
        "sum", "prod", "min", "max", "land", "lor", "lxor", "band", "bor", "bxor",
    ];
    let float_ops = ["sum", "prod", "min", "max"];
    let counts = [0usize, 1, 7, 4096];
    check_type::<i8>(c, &int_ops, &counts);
    check_type::<u8>(c, &int_ops, &counts);
    check_type::<i16>(c, &int_ops, &counts);
    check_type::<u16>(c, &int_ops, &counts);
    check_type::<i32>(c, &int_ops, &counts);
    check_type::<u32>(c, &int_ops, &counts);
    check_type::<i64>(c, &int_ops, &counts);
    check_type::<u64>(c, &int_ops, &counts);
    check_type::<f32>(c, &float_ops, &counts);
    check_type::<f64>(c, &float_ops, &counts);
    check_loc(c);
    // 40 elements (320 bytes): one block fits an inline line, all of them do not; 20 (160
    // bytes): at 4 ranks a scatter's blocks but the root's fit the root's line, all four do
    // not (as 40 at 2 ranks); 300: blocks past an inline line but within a fragment slot;
    // 2048 (16 KiB): single copy between two members, the fragment slots in larger groups.
    for count in [0usize, 1, 7, 20, 40, 300, 2048, 4096] {
        check_data_movement(c, count);
    }
}

/// The product of two 2x2 integer matrices (row-major), wrapping: the non-commutative
/// operation of the user-operation checks. Matrices of the form [a 1; 1 0] do not commute
/// for different a (upper unitriangular ones, which these checks once used, do), so a
/// reduction that combines out of rank order fails.
fn mul1(x: &[i64; 4], y: &[i64; 4]) -> [i64; 4] {
    let dot = |a: i64, b: i64, c: i64, d: i64| a.wrapping_mul(b).wrapping_add(c.wrapping_mul(d));
    [
        dot(x[0], y[0], x[1], y[2]),
        dot(x[0], y[1], x[1], y[3]),
        dot(x[2], y[0], x[3], y[2]),
        dot(x[2], y[1], x[3], y[3]),
    ]
}

fn user(c: &SimpleCommunicator) {
    let me = c.rank();
    let n = c.size();
    // Non-commutative: 2x2 integer matrix product, in rank order. A matrix is one element.
    let mat = |r: i32| [r as i64 + 1, 1, 1, 0];
    let mul = |a: &[[i64; 4]], b: &mut [[i64; 4]]| {
        for (x, y) in a.iter().zip(b.iter_mut()) {
            *y = mul1(x, y);
        }
    };
    let mut want = mat(0);
    for r in 1..n {
        want = mul1(&want, &mat(r));
    }
    let mut out = [[0i64; 4]; 3];
    let mine = [mat(me), mat(me), mat(me)];
    c.all_reduce_into(&mine, &mut out, UserOperation::non_commutative(mul));
    if out != [want; 3] {
        fail(
            me,
            format!("non-commutative user allreduce {out:?} want {want:?}"),
        );
    }
    let mut scan = [[0i64; 4]; 3];
    c.scan_into(&mine, &mut scan, UserOperation::non_commutative(mul));
    let mut prefix = mat(0);
    for r in 1..=me {
        prefix = mul1(&prefix, &mat(r));
    }
    if scan != [prefix; 3] {
        fail(me, "non-commutative user scan".into());
    }
    if me == 0 {
        let mut red = [[0i64; 4]; 3];
        c.process_at_rank(0)
            .reduce_into_root(&mine, &mut red, UserOperation::non_commutative(mul));
        if red != [want; 3] {
            fail(me, "non-commutative user reduce".into());
        }
    } else {
        c.process_at_rank(0)
            .reduce_into(&mine, UserOperation::non_commutative(mul));
    }
    // The same between the inline line and single copy (2 and 12.5 KiB: one-barrier
    // reductions through the fragment slots, or sliced ones), rooted at the last rank.
    for count in [64usize, 400] {
        let mine = vec![mat(me); count];
        let mut out = vec![[0i64; 4]; count];
        c.all_reduce_into(&mine[..], &mut out[..], UserOperation::non_commutative(mul));
        if out.iter().any(|m| *m != want) {
            fail(me, format!("non-commutative user allreduce of {count}"));
        }
        let root = c.process_at_rank(n - 1);
        if me == n - 1 {
            root.reduce_into_root(&mine[..], &mut out[..], UserOperation::non_commutative(mul));
            if out.iter().any(|m| *m != want) {
                fail(
                    me,
                    format!("non-commutative user reduce of {count} at rank {}", n - 1),
                );
            }
        } else {
            root.reduce_into(&mine[..], UserOperation::non_commutative(mul));
        }
    }
    let add = UserOperation::commutative(|a: &[f64], b: &mut [f64]| {
        b.iter_mut().zip(a).for_each(|(y, x)| *y += x)
    });
    let mut sum = [0.0f64; 3];
    c.all_reduce_into(&[me as f64, 1.0, 2.0], &mut sum, add);
    let s = (n * (n - 1) / 2) as f64;
    if sum != [s, n as f64, 2.0 * n as f64] {
        fail(me, format!("commutative user allreduce {sum:?}"));
    }
}

fn large(c: &SimpleCommunicator) {
    // A non-commutative operation over 640 KiB: the single-copy path must keep rank order.
    let me = c.rank();
    let n = c.size();
    let mat = |r: i32, i: usize| [(r as i64 + 1) * (i as i64 % 7 + 1), 1, 1, 0];
    let mine: Vec<[i64; 4]> = (0..20_000).map(|i| mat(me, i)).collect();
    let mut out = vec![[0i64; 4]; mine.len()];
    let op = UserOperation::non_commutative(|a: &[[i64; 4]], b: &mut [[i64; 4]]| {
        for (x, y) in a.iter().zip(b.iter_mut()) {
            *y = mul1(x, y);
        }
    });
    c.all_reduce_into(&mine, &mut out, op);
    let want = |i: usize| (1..n).fold(mat(0, i), |w, r| mul1(&w, &mat(r, i)));
    for (i, o) in out.iter().enumerate() {
        if *o != want(i) {
            let want = want(i);
            fail(
                me,
                format!("large non-commutative allreduce element {i}: {o:?}, want {want:?}"),
            );
        }
    }
    // The same to the first and to the last rank: between two members a reduce of this size
    // is a stream through the segment, whose root combines in rank order on either side.
    for root_rank in [0, n - 1] {
        let op = UserOperation::non_commutative(|a: &[[i64; 4]], b: &mut [[i64; 4]]| {
            for (x, y) in a.iter().zip(b.iter_mut()) {
                *y = mul1(x, y);
            }
        });
        let root = c.process_at_rank(root_rank);
        if me == root_rank {
            let mut red = vec![[0i64; 4]; mine.len()];
            root.reduce_into_root(&mine, &mut red, op);
            if let Some(i) = (0..red.len()).find(|&i| red[i] != want(i)) {
                fail(
                    me,
                    format!("large non-commutative reduce to rank {root_rank}, element {i}: {:?}, want {:?}", red[i], want(i)),
                );
            }
        } else {
            root.reduce_into(&mine, op);
        }
    }
    // 1 MiB and 8 MiB of f64: in groups of more than two an allreduce goes through the
    // fragment slots below 2 MiB and single copy from there, a reduce single copy from 256 KiB.
    let count = 1 << 20;
    check_type::<f64>(c, &["sum", "max"], &[1 << 17, count]);
    check_type::<i32>(c, &["sum", "bxor"], &[count]);
    check_data_movement(c, 1 << 17);
    // Gather and scatter of 256 KiB blocks (1 MiB in all at 4 ranks: single copy from the
    // program buffers in every group size), rooted at the last rank.
    let block = 32 << 10;
    let root = c.process_at_rank(n - 1);
    let word = |r: i32, i: usize| ((r as u64) << 32) | i as u64;
    let mine: Vec<u64> = (0..block).map(|i| word(me, i)).collect();
    if me == n - 1 {
        let mut all = vec![0u64; block * n as usize];
        root.gather_into_root(&mine[..], &mut all[..]);
        let want: Vec<u64> = (0..n)
            .flat_map(|r| (0..block).map(move |i| word(r, i)))
            .collect();
        if all != want {
            fail(me, format!("gather of {block}-element blocks"));
        }
        let mut back = vec![0u64; block];
        root.scatter_into_root(&want[..], &mut back[..]);
        if back != mine {
            fail(me, format!("scatter of {block}-element blocks"));
        }
    } else {
        root.gather_into(&mine[..]);
        let mut back = vec![0u64; block];
        root.scatter_into(&mut back[..]);
        if back != mine {
            fail(me, format!("scatter of {block}-element blocks"));
        }
    }
}

fn repeat(c: &SimpleCommunicator, times: usize) {
    let me = c.rank();
    let n = c.size() as u64;
    for i in 0..times as u64 {
        let mut out = [0u64];
        c.all_reduce_into(&[i + me as u64], &mut out, SystemOperation::sum());
        if out[0] != n * i + n * (n - 1) / 2 {
            fail(me, format!("repeat {i}: allreduce gave {}", out[0]));
        }
        let mut b = [if me == 0 { i } else { 0 }];
        c.process_at_rank(0).broadcast_into(&mut b);
        if b[0] != i {
            fail(me, format!("repeat {i}: bcast gave {}", b[0]));
        }
        c.barrier();
    }
}

fn main() {
    let universe = kestrel::initialize().unwrap_or_else(|e| kestrel::exit_with(&e));
    let world = universe.world();
    let (me, size) = (world.rank(), world.size());
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mode = args.first().map(String::as_str).unwrap_or("full");
    match mode {
        "full" => {
            // Every communicator size from 1 to the world's, as sub-communicators.
            for k in 1..=size {
                let sub = world.split_by_color(if me < k {
                    Color::with_value(0)
                } else {
                    Color::undefined()
                });
                if let Some(sub) = sub {
                    full(&sub);
                }
                world.barrier();
            }
        }
        "concurrent" => {
            let half = world
                .split_by_color(Color::with_value(me % 2))
                .expect("a color");
            let dup = world.duplicate();
            // The halves run different operations at the same time as the world does others.
            for round in 0..20 {
                if me % 2 == 0 {
                    check_data_movement(&half, 33 + round);
                } else {
                    check_type::<i64>(&half, &["sum", "max"], &[round, 1000]);
                }
                repeat(&dup, 5);
            }
        }
        "repeat" => repeat(
            &world,
            args.get(1).and_then(|a| a.parse().ok()).unwrap_or(10_000),
        ),
        "interleaved" => {
            // Even world ranks first, then odd ones: launched by block over several nodes, a
            // node's members are no longer consecutive, so the hierarchical gathers and
            // scatters must reorder their blocks.
            let key = (me % 2) * size + me;
            let c = world
                .split_by_color_with_key(Color::with_value(0), key)
                .expect("a color");
            full(&c);
        }
        "user" => user(&world),
        "large" => large(&world),
        other => fail(me, format!("unknown mode '{other}'")),
    }
    world.barrier();
    if me == 0 {
        println!("coll_check {mode}: passed on {size} ranks");
    }
}
