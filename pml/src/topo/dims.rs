//! `MPI_Dims_create`'s factorization, as MPICH 4.0.2 answers it (see [`dims_create`]).
//! Pure arithmetic: no communication, no state.

use super::{TopoError, DIMS_CREATE_MAX_FREE};

/// `MPI_Dims_create`, answering exactly as MPICH 4.0.2 does.
///
/// Positive entries of `dims` are fixed; the 0 entries get a non-increasing factorization
/// of `nnodes / product(fixed)`, in turn. MPICH's rules, all kept here:
///
/// - an empty `dims` succeeds whatever `nnodes` is;
/// - a negative entry is an error (the first is reported), then fixed entries whose
///   product does not divide `nnodes`;
/// - with no 0 entry nothing changes and the call succeeds, even when the product is a
///   proper divisor of `nnodes` (MPI only requires divisibility);
/// - more than [`DIMS_CREATE_MAX_FREE`] entries of 0 are an error;
/// - one 0 entry takes the whole quotient (0 when `nnodes` is 0);
/// - the factorization minimizes (largest - smallest) entry. MPICH first gives each prime
///   factor above the square root of what is left a dimension of its own, takes shortcuts
///   (the prime factors padded with 1s when there are no more of them than dimensions,
///   round robin for a prime power, equal entries when every exponent divides evenly),
///   and otherwise searches the factorizations into entries >= 2; among equally balanced
///   ones it keeps the one whose smallest entries are largest (360 in 3 dimensions is
///   10x6x6, not 9x8x5).
///
/// Where MPICH gives no answer this one does: `nnodes` 0 with two or more 0 entries hangs
/// MPICH and is [`TopoError::NoNodes`] here; a prime `nnodes` above 46337² (2147483647)
/// with two or more 0 entries crashes MPICH and is `[nnodes, 1, ...]` here.
pub fn dims_create(nnodes: u32, dims: &mut [i32]) -> Result<(), TopoError> {
    if dims.is_empty() {
        return Ok(());
    }
    let (mut fixed, mut free) = (1u64, 0usize);
    for (i, &d) in dims.iter().enumerate() {
        match d {
            d if d < 0 => return Err(TopoError::Dim("dims_create", i, d)),
            0 => free += 1,
            d => fixed = fixed.saturating_mul(d as u64),
        }
    }
    let n = u64::from(nnodes);
    if n % fixed != 0 {
        return Err(TopoError::Indivisible(n, fixed));
    }
    if free == 0 {
        return Ok(());
    }
    if free > DIMS_CREATE_MAX_FREE {
        return Err(TopoError::TooManyFree(free));
    }
    if n > i32::MAX as u64 {
        return Err(TopoError::NodesTooLarge(n));
    }
    let rest = n / fixed;
    let mut parts = [0u64; DIMS_CREATE_MAX_FREE];
    let parts = &mut parts[..free];
    if free == 1 {
        parts[0] = rest;
    } else if rest == 0 {
        return Err(TopoError::NoNodes(free));
    } else {
        factorize(rest, parts);
    }
    // Every part divides rest <= i32::MAX.
    for (d, &p) in dims.iter_mut().filter(|d| **d == 0).zip(parts.iter()) {
        *d = p as i32;
    }
    Ok(())
}

/// Prime factors of `m` with their exponents, ascending (at most 9 distinct below 2^32).
fn prime_factors(mut m: u64) -> ([(u64, u32); 16], usize) {
    let (mut f, mut nf, mut p) = ([(0u64, 0u32); 16], 0, 2u64);
    while p * p <= m {
        if m.is_multiple_of(p) {
            let mut c = 0;
            while m.is_multiple_of(p) {
                m /= p;
                c += 1;
            }
            f[nf] = (p, c);
            nf += 1;
        }
        p += if p == 2 { 1 } else { 2 };
    }
    if m > 1 {
        f[nf] = (m, 1);
        nf += 1;
    }
    (f, nf)
}

/// Split `m` (>= 1) into `parts.len()` (>= 2) factors, non-increasing, as MPICH does.
fn factorize(mut m: u64, parts: &mut [u64]) {
    let k = parts.len();
    let (f, mut nf) = prime_factors(m);
    let mut nprimes: u32 = f[..nf].iter().map(|&(_, c)| c).sum();
    // A prime above the square root of what is left gets a dimension of its own, largest
    // first (never the smallest prime, and one dimension stays for the rest).
    let mut taken = 0;
    while nf > 1 && taken < k - 1 && f[nf - 1].1 == 1 && f[nf - 1].0.pow(2) > m {
        parts[taken] = f[nf - 1].0;
        m /= f[nf - 1].0;
        (taken, nprimes, nf) = (taken + 1, nprimes - 1, nf - 1);
    }
    let (f, rest) = (&f[..nf], &mut parts[taken..]);
    let r = rest.len();
    if nprimes as usize <= r {
        // One prime per dimension, largest first, then 1s.
        let primes = f.iter().rev().flat_map(|&(p, c)| (0..c).map(move |_| p));
        rest.fill(1);
        for (slot, p) in rest.iter_mut().zip(primes) {
            *slot = p;
        }
    } else if r == 1 {
        rest[0] = m;
    } else if nf == 1 {
        // A prime power: the factors dealt round robin.
        rest.fill(1);
        for j in 0..f[0].1 as usize {
            rest[j % r] *= f[0].0;
        }
    } else if f.iter().all(|&(_, c)| (c as usize).is_multiple_of(r)) {
        rest.fill(f.iter().map(|&(p, c)| p.pow(c / r as u32)).product());
    } else {
        balanced(m, f, rest);
    }
}

/// The factorization of `m` into `out.len()` (>= 2) entries >= 2, non-increasing, with the
/// least (largest - smallest). The search picks entries from the last (smallest) up, each
/// in increasing order, the last two as the pair nearest a square, and keeps the last of
/// equally good candidates: the one with the largest smallest entries.
fn balanced(m: u64, factors: &[(u64, u32)], out: &mut [u64]) {
    let mut divs = vec![1u64];
    for &(p, c) in factors {
        let len = divs.len();
        let mut pk = 1;
        for _ in 0..c {
            pk *= p;
            for i in 0..len {
                divs.push(divs[i] * pk);
            }
        }
    }
    divs.sort_unstable();
    let mut s = Search {
        divs: &divs[1..divs.len() - 1], // neither 1 nor m
        r: out.len(),
        prefix: [0; DIMS_CREATE_MAX_FREE],
        depth: 0,
        best: None,
        best_dims: [0; DIMS_CREATE_MAX_FREE],
    };
    s.run(m, out.len(), 2);
    debug_assert!(s.best.is_some(), "no factorization of {m}");
    out.copy_from_slice(&s.best_dims[..out.len()]);
}

/// The search state: the divisors, the entries chosen (`prefix[..depth]`, smallest
/// first), the least (largest - smallest) found and its `r` entries.
struct Search<'a> {
    divs: &'a [u64],
    r: usize,
    prefix: [u64; DIMS_CREATE_MAX_FREE],
    depth: usize,
    best: Option<u64>,
    best_dims: [u64; DIMS_CREATE_MAX_FREE],
}

impl Search<'_> {
    /// Fill `left` more entries, each >= `lo`, multiplying to `q`.
    fn run(&mut self, q: u64, left: usize, lo: u64) {
        let divs = self.divs.iter().copied().skip_while(|&d| d < lo);
        if left == 2 {
            // The pair: the largest divisor f in [lo, sqrt(q)].
            let pair = divs
                .take_while(|&d| d * d <= q)
                .filter(|&d| q.is_multiple_of(d))
                .last();
            let Some(f) = pair else { return };
            let smallest = if self.depth == 0 { f } else { self.prefix[0] };
            let spread = q / f - smallest;
            if self.best.is_none_or(|b| spread <= b) {
                self.best = Some(spread);
                self.best_dims[..2].copy_from_slice(&[q / f, f]);
                for i in 0..self.depth {
                    self.best_dims[self.r - 1 - i] = self.prefix[i];
                }
            }
            return;
        }
        for d in divs {
            if pow_exceeds(d, left, q) {
                break; // the other entries are >= d too
            }
            let smallest = if self.depth == 0 { d } else { self.prefix[0] };
            if self.best.is_some_and(|b| d - smallest > b) {
                break; // the largest entry is >= d
            }
            if q.is_multiple_of(d) {
                self.prefix[self.depth] = d;
                self.depth += 1;
                self.run(q / d, left - 1, d);
                self.depth -= 1;
            }
        }
    }
}

/// `d^k > q`, without overflow.
fn pow_exceeds(d: u64, k: usize, q: u64) -> bool {
    let mut acc: u64 = 1;
    (0..k).any(|_| {
        acc = acc.saturating_mul(d);
        acc > q
    })
}
