//! Reduction kernels for the element types Rust has no native type for: C's complex types
//! (`float _Complex`, `double _Complex`, `long double _Complex`), the x86-64 `long double`
//! (the x87 80-bit extended format, stored in 16 bytes) and its `MPI_LONG_DOUBLE_INT` pair.
//!
//! Complex numbers are (real, imaginary) pairs computed in their own precision, as C
//! computes them (`(a+bi)(c+di) = (ac-bd) + (ad+bc)i`, without C's Annex G recovery of
//! infinities from NaN products). Long doubles are computed by the x87 unit itself, so sums,
//! products and comparisons are exactly C's; only the 10 value bytes of each element are
//! read and written, never its padding. Elsewhere than x86-64 the long double kernels do not
//! exist: the reduction then fails naming the type (its format differs by platform).
//!
//! The module owns these kernels and nothing else; [`super`] dispatches to them. Its only
//! `unsafe` is the x87 instructions, on buffers checked to hold the bytes they touch.

use super::{Elem, Op};

/// `inout[i] = input[i] OP inout[i]` over complex numbers of two `T` parts; `Sum` and
/// `Prod` only (false otherwise).
pub(crate) fn complex<T>(op: Op, input: &[u8], inout: &mut [u8]) -> bool
where
    T: Elem + std::ops::Add<Output = T> + std::ops::Sub<Output = T> + std::ops::Mul<Output = T>,
{
    let n = T::SIZE;
    let prod = match op {
        Op::Sum => false,
        Op::Prod => true,
        _ => return false,
    };
    for (a, b) in input.chunks_exact(2 * n).zip(inout.chunks_exact_mut(2 * n)) {
        let (ar, ai) = (T::load(&a[..n]), T::load(&a[n..]));
        let (br, bi) = (T::load(&b[..n]), T::load(&b[n..]));
        let (r, i) = if prod {
            (ar * br - ai * bi, ar * bi + ai * br)
        } else {
            (ar + br, ai + bi)
        };
        r.store(&mut b[..n]);
        i.store(&mut b[n..]);
    }
    true
}

/// Bytes of a long double's value; the rest of its 16 bytes is padding.
const VALUE: usize = 10;

/// `MPI_LONG_DOUBLE`: `Sum`, `Prod`, `Min` (C's `a < b ? a : b`, `a` from `input`), `Max`.
pub(crate) fn long_double(op: Op, input: &[u8], inout: &mut [u8]) -> bool {
    if !matches!(op, Op::Sum | Op::Prod | Op::Min | Op::Max) || !x87::AVAILABLE {
        return false;
    }
    for (a, b) in input.chunks_exact(16).zip(inout.chunks_exact_mut(16)) {
        scalar(op, &a[..VALUE], &mut b[..VALUE]);
    }
    true
}

/// One long double: `b = a OP b`.
fn scalar(op: Op, a: &[u8], b: &mut [u8]) {
    let mut out = [0u8; VALUE];
    match op {
        Op::Sum => x87::arith(x87::Arith::Add, a, b, &mut out),
        Op::Prod => x87::arith(x87::Arith::Mul, a, b, &mut out),
        Op::Min if x87::compare(a, b) == Some(std::cmp::Ordering::Less) => out.copy_from_slice(a),
        Op::Max if x87::compare(a, b) == Some(std::cmp::Ordering::Greater) => {
            out.copy_from_slice(a)
        }
        _ => return,
    }
    b.copy_from_slice(&out);
}

/// `MPI_C_LONG_DOUBLE_COMPLEX`: `Sum` and `Prod` over (real, imaginary) long doubles of 16
/// bytes each.
pub(crate) fn long_double_complex(op: Op, input: &[u8], inout: &mut [u8]) -> bool {
    if !matches!(op, Op::Sum | Op::Prod) || !x87::AVAILABLE {
        return false;
    }
    use x87::Arith::{Add, Mul, Sub};
    for (a, b) in input.chunks_exact(32).zip(inout.chunks_exact_mut(32)) {
        let (ar, ai) = (&a[..VALUE], &a[16..16 + VALUE]);
        let (mut r, mut i) = ([0u8; VALUE], [0u8; VALUE]);
        if op == Op::Sum {
            x87::arith(Add, ar, &b[..VALUE], &mut r);
            x87::arith(Add, ai, &b[16..16 + VALUE], &mut i);
        } else {
            let (br, bi) = (&b[..VALUE], &b[16..16 + VALUE]);
            let mut t = [[0u8; VALUE]; 4];
            x87::arith(Mul, ar, br, &mut t[0]);
            x87::arith(Mul, ai, bi, &mut t[1]);
            x87::arith(Mul, ar, bi, &mut t[2]);
            x87::arith(Mul, ai, br, &mut t[3]);
            x87::arith(Sub, &t[0], &t[1], &mut r);
            x87::arith(Add, &t[2], &t[3], &mut i);
        }
        b[..VALUE].copy_from_slice(&r);
        b[16..16 + VALUE].copy_from_slice(&i);
    }
    true
}

/// `MPI_LONG_DOUBLE_INT` (`{ long double; int }`, 32 bytes, the index at byte 16):
/// `Minloc`/`Maxloc` as for the other pairs (a strictly better value wins; a tie takes the
/// smaller index; a NaN never wins).
pub(crate) fn long_double_int(op: Op, input: &[u8], inout: &mut [u8]) -> bool {
    use std::cmp::Ordering::{Equal, Greater, Less};
    let better = match op {
        Op::Minloc => Less,
        Op::Maxloc => Greater,
        _ => return false,
    };
    if !x87::AVAILABLE {
        return false;
    }
    for (a, b) in input.chunks_exact(32).zip(inout.chunks_exact_mut(32)) {
        let (ai, bi) = (i32::load(&a[16..20]), i32::load(&b[16..20]));
        match x87::compare(&a[..VALUE], &b[..VALUE]) {
            Some(o) if o == better => {
                b[..VALUE].copy_from_slice(&a[..VALUE]);
                ai.store(&mut b[16..20]);
            }
            Some(Equal) if ai < bi => ai.store(&mut b[16..20]),
            _ => {}
        }
    }
    true
}

#[cfg(target_arch = "x86_64")]
mod x87 {
    use std::arch::asm;
    use std::cmp::Ordering;

    use super::VALUE;

    pub const AVAILABLE: bool = true;

    /// An x87 operation on two values.
    #[derive(Clone, Copy)]
    pub enum Arith {
        Add,
        Sub,
        Mul,
    }

    /// `out = x OP y` on 80-bit extended values (the 10 bytes of each slice).
    #[allow(unsafe_code)]
    pub fn arith(op: Arith, x: &[u8], y: &[u8], out: &mut [u8; VALUE]) {
        assert!(x.len() >= VALUE && y.len() >= VALUE, "long double operands");
        let (x, y, o) = (x.as_ptr(), y.as_ptr(), out.as_mut_ptr());
        // SAFETY: `x` and `y` are readable and `o` writable for the 10 bytes each `tbyte`
        // access touches (checked above; `out` is exactly that long). Each block pushes two
        // values on the x87 stack and pops both, so it leaves the stack as the ABI has it
        // (empty); the x87 registers it uses are declared clobbered. x - y is x + (-y): the
        // operand order of the popping subtractions differs between assemblers.
        unsafe {
            // Loads y, then x, then applies `$combine` (popping into one value) and stores it.
            macro_rules! x87_binop {
                ($($after_y:literal,)* ; $combine:literal) => {
                    asm!(
                        "fld tbyte ptr [{y}]",
                        $($after_y,)*
                        "fld tbyte ptr [{x}]",
                        $combine,
                        "fstp tbyte ptr [{o}]",
                        x = in(reg) x, y = in(reg) y, o = in(reg) o,
                        out("st(0)") _, out("st(1)") _,
                        options(nostack),
                    )
                };
            }
            match op {
                Arith::Add => x87_binop!(; "faddp st(1), st"),
                Arith::Sub => x87_binop!("fchs", ; "faddp st(1), st"),
                Arith::Mul => x87_binop!(; "fmulp st(1), st"),
            }
        }
    }

    /// How `x` compares with `y` (`None`: unordered, a NaN).
    #[allow(unsafe_code)]
    pub fn compare(x: &[u8], y: &[u8]) -> Option<Ordering> {
        assert!(x.len() >= VALUE && y.len() >= VALUE, "long double operands");
        let (lt, eq, unordered): (u8, u8, u8);
        // SAFETY: as in `arith`, reading only; `fucomip` pops one value and `fstp st(0)` the
        // other, and the flags it sets are read before anything else changes them.
        unsafe {
            asm!(
                "fld tbyte ptr [{y}]",
                "fld tbyte ptr [{x}]",
                "fucomip st, st(1)",
                "fstp st(0)",
                "setb {lt}",
                "sete {eq}",
                "setp {un}",
                x = in(reg) x.as_ptr(), y = in(reg) y.as_ptr(),
                lt = out(reg_byte) lt, eq = out(reg_byte) eq, un = out(reg_byte) unordered,
                out("st(0)") _, out("st(1)") _,
                options(nostack, readonly),
            );
        }
        if unordered != 0 {
            None
        } else if eq != 0 {
            Some(Ordering::Equal)
        } else if lt != 0 {
            Some(Ordering::Less)
        } else {
            Some(Ordering::Greater)
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod x87 {
    //! No x87 unit: `long double` is another format here, which these kernels do not know.
    use std::cmp::Ordering;

    pub const AVAILABLE: bool = false;

    #[derive(Clone, Copy)]
    pub enum Arith {
        Add,
        Sub,
        Mul,
    }

    pub fn arith(_: Arith, _: &[u8], _: &[u8], _: &mut [u8; super::VALUE]) {
        unreachable!("long double kernels are x86-64 only (AVAILABLE is false)")
    }

    pub fn compare(_: &[u8], _: &[u8]) -> Option<Ordering> {
        unreachable!("long double kernels are x86-64 only (AVAILABLE is false)")
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    /// The x87 bytes of a small integer (exact in every format): sign, biased exponent and
    /// an explicit integer bit, built by hand so the test does not trust the kernels.
    fn ld(v: i64) -> [u8; 16] {
        let mut out = [0u8; 16];
        if v == 0 {
            return out;
        }
        let m = v.unsigned_abs();
        let shift = m.leading_zeros();
        let mantissa = m << shift;
        let exponent = 16383 + 63 - shift as u64;
        out[..8].copy_from_slice(&mantissa.to_le_bytes());
        let se = exponent as u16 | if v < 0 { 0x8000 } else { 0 };
        out[8..10].copy_from_slice(&se.to_le_bytes());
        out
    }

    fn nan() -> [u8; 16] {
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&0xc000_0000_0000_0000u64.to_le_bytes());
        out[8..10].copy_from_slice(&0x7fffu16.to_le_bytes());
        out
    }

    fn run(f: fn(Op, &[u8], &mut [u8]) -> bool, op: Op, a: &[u8], b: &[u8]) -> Vec<u8> {
        let mut out = b.to_vec();
        assert!(f(op, a, &mut out), "{op:?}");
        out
    }

    #[test]
    fn long_doubles_add_multiply_and_compare_as_c_does() {
        let (a, b) = ([ld(3), ld(-7)].concat(), [ld(5), ld(2)].concat());
        assert_eq!(run(long_double, Op::Sum, &a, &b), [ld(8), ld(-5)].concat());
        assert_eq!(
            run(long_double, Op::Prod, &a, &b),
            [ld(15), ld(-14)].concat()
        );
        assert_eq!(run(long_double, Op::Min, &a, &b), [ld(3), ld(-7)].concat());
        assert_eq!(run(long_double, Op::Max, &a, &b), [ld(5), ld(2)].concat());
        // A NaN from input never wins a comparison; padding is never written.
        let mut padded = ld(4);
        padded[12] = 0xaa;
        assert_eq!(run(long_double, Op::Min, &nan(), &padded), padded);
        assert!(!long_double(Op::Band, &a, &mut b.clone()));
        // 2^64 + 1 needs the 64-bit mantissa: a double would lose the 1.
        let big = {
            let mut v = [0u8; 16];
            v[..8].copy_from_slice(&0x8000_0000_0000_0000u64.to_le_bytes());
            v[8..10].copy_from_slice(&(16383u16 + 63).to_le_bytes());
            v
        };
        let sum = run(long_double, Op::Sum, &big, &ld(1));
        assert_eq!(&sum[..8], &0x8000_0000_0000_0001u64.to_le_bytes());
    }

    #[test]
    fn complex_sums_and_products() {
        let c = |r: f64, i: f64| [r.to_ne_bytes(), i.to_ne_bytes()].concat();
        let (a, b) = (c(1.0, 2.0), c(3.0, -1.0));
        assert_eq!(run(complex::<f64>, Op::Sum, &a, &b), c(4.0, 1.0));
        assert_eq!(run(complex::<f64>, Op::Prod, &a, &b), c(5.0, 5.0));
        let f = |r: f32, i: f32| [r.to_ne_bytes(), i.to_ne_bytes()].concat();
        assert_eq!(
            run(complex::<f32>, Op::Prod, &f(0.0, 1.0), &f(0.0, 1.0)),
            f(-1.0, 0.0)
        );
        assert!(!complex::<f64>(Op::Max, &a, &mut b.clone()));
        let l = |r: i64, i: i64| [ld(r), ld(i)].concat();
        assert_eq!(
            run(long_double_complex, Op::Prod, &l(1, 2), &l(3, -1)),
            l(5, 5)
        );
        assert_eq!(
            run(long_double_complex, Op::Sum, &l(1, 2), &l(3, -1)),
            l(4, 1)
        );
    }

    #[test]
    fn long_double_int_pairs_keep_the_better_value_and_the_smaller_index_on_ties() {
        let p = |v: i64, i: i32| {
            let mut e = [0u8; 32];
            e[..16].copy_from_slice(&ld(v));
            e[16..20].copy_from_slice(&i.to_ne_bytes());
            e
        };
        assert_eq!(
            run(long_double_int, Op::Minloc, &p(1, 5), &p(2, 0)),
            p(1, 5)
        );
        assert_eq!(
            run(long_double_int, Op::Maxloc, &p(1, 5), &p(2, 0)),
            p(2, 0)
        );
        assert_eq!(
            run(long_double_int, Op::Minloc, &p(2, 1), &p(2, 3)),
            p(2, 1)
        );
        assert_eq!(
            run(long_double_int, Op::Maxloc, &p(2, 4), &p(2, 3)),
            p(2, 3)
        );
    }
}
