//! Datatypes: the predefined C types, the type constructors, and packing.
//!
//! This module owns a datatype's type map in flattened form ([`TypeInfo`]): the runs of
//! basic elements (for `MPI_Get_elements` and reductions) and the contiguous byte blocks
//! (for packing), both in type-map order, plus size, bounds and true bounds. It packs typed
//! memory into a contiguous buffer and unpacks it back, always bounds-checked against the
//! span the caller handed in. It never touches raw pointers: [`crate::mem`] turns user
//! pointers into spans, and this module works on slices and [`kestrel_pml::buf::UserBuf`]s.
//!
//! The bytes on the wire are the packed form: `size` bytes per element in type-map order,
//! native representation (all ranks of a job share one architecture). A type is
//! *contiguous* when its packed form is the memory itself, so sends and receives use the
//! user's buffer directly and only the other types go through a staging copy.

use std::os::raw::c_int;
use std::sync::{Arc, OnceLock};

use kestrel_pml::buf::UserBuf;
use kestrel_pml::op::Dtype;

/// Byte blocks a derived type may flatten to (64 Mi blocks, 1 GiB of block list): beyond,
/// construction fails with `MPI_ERR_ARG` instead of exhausting memory.
pub const MAX_BLOCKS: usize = 1 << 26;

/// A predefined element type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Basic {
    /// Its handle (`MPI_INT`, ...).
    pub handle: c_int,
    /// Bytes per element.
    pub size: usize,
}

/// `count` elements of `basic` back to back at byte `disp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    /// Byte displacement from the buffer address.
    pub disp: isize,
    /// The element type.
    pub basic: Basic,
    /// Elements in the run.
    pub count: usize,
}

/// `len` contiguous bytes at `disp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    /// Byte displacement from the buffer address.
    pub disp: isize,
    /// Length in bytes.
    pub len: usize,
}

/// How a type was built (`MPI_Type_get_envelope`): combiner and argument counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Envelope {
    /// `MPI_COMBINER_*`.
    pub combiner: c_int,
    /// Integers the constructor took.
    pub integers: c_int,
    /// Addresses the constructor took.
    pub addresses: c_int,
    /// Datatypes the constructor took.
    pub datatypes: c_int,
}

/// `MPI_COMBINER_NAMED` and the other combiners Kestrel's constructors report.
pub mod combiner {
    use std::os::raw::c_int;
    /// A predefined type.
    pub const NAMED: c_int = 1;
    /// `MPI_Type_dup`.
    pub const DUP: c_int = 2;
    /// `MPI_Type_contiguous`.
    pub const CONTIGUOUS: c_int = 3;
    /// `MPI_Type_vector`.
    pub const VECTOR: c_int = 4;
    /// `MPI_Type_create_hvector`.
    pub const HVECTOR: c_int = 6;
    /// `MPI_Type_indexed`.
    pub const INDEXED: c_int = 7;
    /// `MPI_Type_create_hindexed`.
    pub const HINDEXED: c_int = 9;
    /// `MPI_Type_create_indexed_block`.
    pub const INDEXED_BLOCK: c_int = 10;
    /// `MPI_Type_create_struct`.
    pub const STRUCT: c_int = 12;
    /// `MPI_Type_create_subarray`.
    pub const SUBARRAY: c_int = 13;
    /// `MPI_Type_create_darray`.
    pub const DARRAY: c_int = 14;
    /// `MPI_Type_create_f90_real`.
    pub const F90_REAL: c_int = 15;
    /// `MPI_Type_create_f90_complex`.
    pub const F90_COMPLEX: c_int = 16;
    /// `MPI_Type_create_f90_integer`.
    pub const F90_INTEGER: c_int = 17;
    /// `MPI_Type_create_resized`.
    pub const RESIZED: c_int = 18;
    /// `MPI_Type_create_hindexed_block`.
    pub const HINDEXED_BLOCK: c_int = 19;
}

/// What a derived type was built from (`MPI_Type_get_contents`): the constructor's
/// integer, address and datatype arguments in the order MPI lists them for its combiner.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Contents {
    /// `MPI_COMBINER_*`.
    pub combiner: c_int,
    /// Integer arguments.
    pub integers: Vec<i64>,
    /// Address arguments.
    pub addresses: Vec<isize>,
    /// Datatype arguments: the handle passed, and for a derived type its map (the handle
    /// may be freed before the contents are asked for).
    pub datatypes: Vec<(c_int, Option<Arc<TypeInfo>>)>,
    /// Large-count arguments (`MPI_Count`), for a type built by a `_c` constructor.
    pub large: Vec<i64>,
}

impl Contents {
    /// The contents as the `_c` (large-count) form of the constructor reports them
    /// (MPI 4.0 §5.1.13): every count, block length, displacement, stride, bound and
    /// extent argument moves to the large counts, in the order the constructor lists
    /// them; what stays `int` in the C binding (dimensions, orders, distributions)
    /// stays an integer.
    pub fn into_large(mut self) -> Contents {
        let ints = std::mem::take(&mut self.integers);
        let addrs = std::mem::take(&mut self.addresses);
        match self.combiner {
            combiner::SUBARRAY if !ints.is_empty() => {
                // ndims, sizes, subsizes, starts, order: ints keep ndims and order.
                let n = ints.len();
                self.integers = vec![ints[0], ints[n - 1]];
                self.large = ints[1..n - 1].to_vec();
            }
            combiner::DARRAY if ints.len() >= 3 => {
                // size, rank, ndims, gsizes, distribs, dargs, psizes, order: only gsizes
                // is a large count.
                let nd = usize::try_from(ints[2]).unwrap_or(0).min(ints.len());
                self.integers = ints[..3].to_vec();
                self.integers.extend_from_slice(&ints[3 + nd..]);
                self.large = ints[3..3 + nd].to_vec();
            }
            combiner::DUP | combiner::NAMED => {
                self.integers = ints;
                self.addresses = addrs;
            }
            _ => {
                self.large = ints;
                self.large.extend(addrs.iter().map(|&a| a as i64));
            }
        }
        self
    }
}

/// A datatype's flattened type map.
#[derive(Debug, Clone, PartialEq)]
pub struct TypeInfo {
    /// Bytes of data in one element (`MPI_Type_size`).
    pub size: usize,
    /// Lower bound.
    pub lb: isize,
    /// Upper bound (`extent = ub - lb`).
    pub ub: isize,
    /// Lowest byte holding data.
    pub true_lb: isize,
    /// One past the highest byte holding data.
    pub true_ub: isize,
    /// Basic-element runs in type-map order.
    pub runs: Vec<Run>,
    /// Contiguous byte blocks in type-map order.
    pub blocks: Vec<Block>,
    /// The largest natural alignment among the basic types (pads struct extents).
    pub align: usize,
    /// For predefined value/index pair types (`MPI_DOUBLE_INT`, ...): the reduction type of
    /// the whole C struct, padding included.
    pub pair: Option<Dtype>,
    /// The handle if this is a predefined type.
    pub predefined: Option<c_int>,
    /// How it was built.
    pub envelope: Envelope,
    /// The constructor's arguments (derived types).
    pub contents: Option<Arc<Contents>>,
}

/// How a reduction sees a buffer of some datatype.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReduceView {
    /// The memory itself, `count * extent` bytes, is an array of this element type.
    Raw(Dtype),
    /// The packed form is an array of this element type (non-contiguous types).
    Packed(Dtype),
}

/// Predefined types: handle, MPI name, reduction element type.
const PREDEFINED: &[(c_int, &str, Option<Dtype>)] = &[
    (0x4c00_0101, "MPI_CHAR", Some(Dtype::I8)),
    (0x4c00_0118, "MPI_SIGNED_CHAR", Some(Dtype::I8)),
    (0x4c00_0102, "MPI_UNSIGNED_CHAR", Some(Dtype::U8)),
    (0x4c00_010d, "MPI_BYTE", Some(Dtype::U8)),
    (0x4c00_040e, "MPI_WCHAR", Some(Dtype::I32)),
    (0x4c00_0203, "MPI_SHORT", Some(Dtype::I16)),
    (0x4c00_0204, "MPI_UNSIGNED_SHORT", Some(Dtype::U16)),
    (0x4c00_0405, "MPI_INT", Some(Dtype::I32)),
    (0x4c00_0406, "MPI_UNSIGNED", Some(Dtype::U32)),
    (0x4c00_0807, "MPI_LONG", Some(Dtype::I64)),
    (0x4c00_0808, "MPI_UNSIGNED_LONG", Some(Dtype::U64)),
    (0x4c00_0809, "MPI_LONG_LONG_INT", Some(Dtype::I64)),
    (0x4c00_0819, "MPI_UNSIGNED_LONG_LONG", Some(Dtype::U64)),
    (0x4c00_040a, "MPI_FLOAT", Some(Dtype::F32)),
    (0x4c00_080b, "MPI_DOUBLE", Some(Dtype::F64)),
    (0x4c00_100c, "MPI_LONG_DOUBLE", LONG_DOUBLE),
    (0x4c00_010f, "MPI_PACKED", None),
    (0x4c00_0137, "MPI_INT8_T", Some(Dtype::I8)),
    (0x4c00_0238, "MPI_INT16_T", Some(Dtype::I16)),
    (0x4c00_0439, "MPI_INT32_T", Some(Dtype::I32)),
    (0x4c00_083a, "MPI_INT64_T", Some(Dtype::I64)),
    (0x4c00_013b, "MPI_UINT8_T", Some(Dtype::U8)),
    (0x4c00_023c, "MPI_UINT16_T", Some(Dtype::U16)),
    (0x4c00_043d, "MPI_UINT32_T", Some(Dtype::U32)),
    (0x4c00_083e, "MPI_UINT64_T", Some(Dtype::U64)),
    (0x4c00_013f, "MPI_C_BOOL", Some(Dtype::U8)),
    (0x4c00_0840, "MPI_C_COMPLEX", Some(Dtype::C32)), // MPI_C_FLOAT_COMPLEX too (one handle, MPICH's name)
    (0x4c00_1041, "MPI_C_DOUBLE_COMPLEX", Some(Dtype::C64)),
    (
        0x4c00_2042,
        "MPI_C_LONG_DOUBLE_COMPLEX",
        LONG_DOUBLE_COMPLEX,
    ),
    (0x4c00_0843, "MPI_AINT", Some(Dtype::I64)),
    (0x4c00_0844, "MPI_OFFSET", Some(Dtype::I64)),
    (0x4c00_0845, "MPI_COUNT", Some(Dtype::I64)),
    (0x4c00_0816, "MPI_2INT", Some(Dtype::TwoInt)),
    (0x4c00_011a, "MPI_CHARACTER", Some(Dtype::I8)),
    (0x4c00_041b, "MPI_INTEGER", Some(Dtype::I32)),
    (0x4c00_041c, "MPI_REAL", Some(Dtype::F32)),
    (0x4c00_041d, "MPI_LOGICAL", Some(Dtype::I32)),
    (0x4c00_081e, "MPI_COMPLEX", Some(Dtype::C32)),
    (0x4c00_081f, "MPI_DOUBLE_PRECISION", Some(Dtype::F64)),
    (0x4c00_0820, "MPI_2INTEGER", Some(Dtype::TwoInt)),
    (0x4c00_0821, "MPI_2REAL", Some(Dtype::TwoF32)),
    (0x4c00_1022, "MPI_DOUBLE_COMPLEX", Some(Dtype::C64)),
    (0x4c00_1023, "MPI_2DOUBLE_PRECISION", Some(Dtype::TwoF64)),
    (0x4c00_0427, "MPI_REAL4", Some(Dtype::F32)),
    (0x4c00_0828, "MPI_COMPLEX8", Some(Dtype::C32)),
    (0x4c00_0829, "MPI_REAL8", Some(Dtype::F64)),
    (0x4c00_102a, "MPI_COMPLEX16", Some(Dtype::C64)),
    (0x4c00_102b, "MPI_REAL16", None),
    (0x4c00_202c, "MPI_COMPLEX32", None),
    (0x4c00_012d, "MPI_INTEGER1", Some(Dtype::I8)),
    (0x4c00_022f, "MPI_INTEGER2", Some(Dtype::I16)),
    (0x4c00_0430, "MPI_INTEGER4", Some(Dtype::I32)),
    (0x4c00_0831, "MPI_INTEGER8", Some(Dtype::I64)),
    (0x4c00_0133, "MPI_CXX_BOOL", Some(Dtype::U8)),
    (0x4c00_0834, "MPI_CXX_FLOAT_COMPLEX", Some(Dtype::C32)),
    (0x4c00_1035, "MPI_CXX_DOUBLE_COMPLEX", Some(Dtype::C64)),
    (
        0x4c00_2036,
        "MPI_CXX_LONG_DOUBLE_COMPLEX",
        LONG_DOUBLE_COMPLEX,
    ),
];

/// The value/index pair types, direct handles 0x8c000000 + n: name, value type, index
/// offset, extent, reduction type.
const PAIRS: &[(&str, c_int, isize, isize, Option<Dtype>)] = &[
    ("MPI_FLOAT_INT", 0x4c00_040a, 4, 8, Some(Dtype::FloatInt)),
    ("MPI_DOUBLE_INT", 0x4c00_080b, 8, 16, Some(Dtype::DoubleInt)),
    ("MPI_LONG_INT", 0x4c00_0807, 8, 16, Some(Dtype::LongInt)),
    ("MPI_SHORT_INT", 0x4c00_0203, 4, 8, Some(Dtype::ShortInt)),
    ("MPI_LONG_DOUBLE_INT", 0x4c00_100c, 16, 32, LONG_DOUBLE_INT),
];

const INT: c_int = 0x4c00_0405;

/// The reduction types of C's `long double` family: the x87 extended format of x86-64, the
/// only platform whose `long double` the engine's kernels know (elsewhere reductions on them
/// fail naming the type). `MPI_REAL16`/`MPI_COMPLEX32` are IEEE quad precision: none.
const LONG_DOUBLE: Option<Dtype> = if cfg!(target_arch = "x86_64") {
    Some(Dtype::F80)
} else {
    None
};
const LONG_DOUBLE_COMPLEX: Option<Dtype> = if cfg!(target_arch = "x86_64") {
    Some(Dtype::C80)
} else {
    None
};
const LONG_DOUBLE_INT: Option<Dtype> = if cfg!(target_arch = "x86_64") {
    Some(Dtype::LongDoubleInt)
} else {
    None
};

/// `MPI_LB` and `MPI_UB`, removed in MPI-3.
const LB_UB: [c_int; 2] = [0x4c00_0010, 0x4c00_0011];

/// Natural alignment of a predefined type: its size for scalars, the component's for
/// complex types and pairs of Fortran values, at most 16.
fn natural_align(handle: c_int, size: usize, name: &str) -> usize {
    if name.contains("COMPLEX") || name.starts_with("MPI_2") {
        if handle == 0x4c00_0816 || handle == 0x4c00_0820 || handle == 0x4c00_0821 {
            return 4;
        }
        return (size / 2).clamp(1, 16);
    }
    size.clamp(1, 16)
}

fn basic_type(handle: c_int, name: &str) -> TypeInfo {
    let size = ((handle as u32 & 0xff00) >> 8) as usize;
    let basic = Basic { handle, size };
    TypeInfo {
        size,
        lb: 0,
        ub: size as isize,
        true_lb: 0,
        true_ub: size as isize,
        runs: vec![Run {
            disp: 0,
            basic,
            count: 1,
        }],
        blocks: vec![Block { disp: 0, len: size }],
        align: natural_align(handle, size, name),
        pair: None,
        predefined: Some(handle),
        envelope: Envelope {
            combiner: combiner::NAMED,
            integers: 0,
            addresses: 0,
            datatypes: 0,
        },
        contents: None,
    }
}

struct Predefined {
    scalars: Vec<(c_int, &'static str, TypeInfo)>,
    /// Index into `scalars` by a handle's low byte (MPICH numbers predefined types uniquely).
    by_number: [Option<u8>; 256],
    pairs: Vec<TypeInfo>,
}

/// By a handle's low byte: the handle and element size of each predefined scalar type of at
/// least one byte (all contiguous: one block of their size, see [`basic_type`]), `(0, 0)`
/// elsewhere (see [`plain_size`]). Built at compile time, so the lookup on every send and
/// receive does not first ask whether [`predefined_tables`] is built.
static PLAIN: [(c_int, u32); 256] = plain_table();

const fn plain_table() -> [(c_int, u32); 256] {
    let mut plain = [(0, 0); 256];
    let mut i = 0;
    while i < PREDEFINED.len() {
        let h = PREDEFINED[i].0;
        let size = (h as u32 & 0xff00) >> 8;
        let n = (h as u32 & 0xff) as usize;
        assert!(plain[n].0 == 0, "predefined type numbers are unique");
        if size > 0 {
            plain[n] = (h, size);
        }
        i += 1;
    }
    plain
}

fn predefined_tables() -> &'static Predefined {
    static TABLES: OnceLock<Predefined> = OnceLock::new();
    TABLES.get_or_init(|| {
        let scalars: Vec<(c_int, &'static str, TypeInfo)> = PREDEFINED
            .iter()
            .map(|&(h, name, _)| (h, name, basic_type(h, name)))
            .collect();
        let int = basic_type(INT, "MPI_INT");
        let pairs = PAIRS
            .iter()
            .enumerate()
            .map(|(i, &(name, value, index_at, extent, pair))| {
                let v = basic_type(value, name);
                let mut t = build(
                    &[
                        Part {
                            disp: 0,
                            count: 1,
                            ty: &v,
                        },
                        Part {
                            disp: index_at,
                            count: 1,
                            ty: &int,
                        },
                    ],
                    Envelope {
                        combiner: combiner::NAMED,
                        integers: 0,
                        addresses: 0,
                        datatypes: 0,
                    },
                )
                .expect("pair types are small");
                t.ub = extent;
                t.pair = pair;
                t.predefined = Some(0x8c00_0000u32 as c_int + i as c_int);
                t
            })
            .collect();
        let mut by_number = [None; 256];
        for (i, (h, _, _)) in scalars.iter().enumerate() {
            let n = (*h as u32 & 0xff) as usize;
            assert!(by_number[n].is_none(), "predefined type numbers are unique");
            by_number[n] = Some(i as u8);
        }
        Predefined {
            scalars,
            by_number,
            pairs,
        }
    })
}

/// The type map of a predefined datatype handle; `None` for anything else.
#[inline]
pub fn predefined(handle: c_int) -> Option<&'static TypeInfo> {
    let t = predefined_tables();
    if (handle as u32) >> 26 == 0x23 {
        // Direct datatype handles 0x8c000000..=0x8c000004: the pairs.
        let i = (handle as u32 & 0x03ff_ffff) as usize;
        return t.pairs.get(i);
    }
    let i = t.by_number[(handle as u32 & 0xff) as usize]?;
    let (h, _, ti) = &t.scalars[i as usize];
    (*h == handle).then_some(ti)
}

/// The element size of a contiguous predefined scalar type of at least one byte, in one
/// table lookup: the common send and receive ask this on every call. `None` for anything
/// else (pairs included: [`predefined`] answers for them).
#[inline]
pub fn plain_size(handle: c_int) -> Option<usize> {
    let (h, size) = PLAIN[(handle as u32 & 0xff) as usize];
    (h == handle && size != 0).then_some(size as usize)
}

/// The element size and reduction element type of a predefined non-pair type whose elements
/// are contiguous (extent equal to a non-zero size): one lookup for the one-sided fast path.
#[inline]
pub fn contiguous_scalar(handle: c_int) -> Option<(usize, Option<Dtype>)> {
    let t = predefined_tables();
    let i = t.by_number[(handle as u32 & 0xff) as usize]? as usize;
    let (h, _, ti) = &t.scalars[i];
    if *h != handle || ti.pair.is_some() || ti.size == 0 || ti.ub - ti.lb != ti.size as isize {
        return None;
    }
    Some((ti.size, PREDEFINED[i].2))
}

/// Whether `handle` is one of the pair types' direct handles (never a user type).
pub fn is_pair_handle(handle: c_int) -> bool {
    (handle as u32) >= 0x8c00_0000 && (handle as u32) < 0x8c00_0000 + PAIRS.len() as u32
}

/// Whether `handle` is `MPI_LB` or `MPI_UB`.
pub fn is_removed_marker(handle: c_int) -> bool {
    LB_UB.contains(&handle)
}

/// The MPI name of a predefined type.
pub fn predefined_name(handle: c_int) -> Option<&'static str> {
    if is_pair_handle(handle) {
        return PAIRS
            .get((handle as u32 - 0x8c00_0000) as usize)
            .map(|p| p.0);
    }
    PREDEFINED
        .iter()
        .find(|(h, _, _)| *h == handle)
        .map(|p| p.1)
}

/// The reduction element type of a predefined scalar type (indexed by the handle's type
/// number, as [`predefined`]: one-sided atomics look it up on every call).
pub fn reduction_type(handle: c_int) -> Option<Dtype> {
    let i = predefined_tables().by_number[(handle as u32 & 0xff) as usize]?;
    let p = PREDEFINED.get(i as usize)?;
    if p.0 == handle {
        p.2
    } else {
        None
    }
}

/// One constituent of a constructed type: `count` copies of `ty`, one extent apart,
/// starting at byte `disp`.
#[derive(Debug, Clone, Copy)]
pub struct Part<'a> {
    /// Byte displacement of the first copy.
    pub disp: isize,
    /// Copies.
    pub count: usize,
    /// The type copied.
    pub ty: &'a TypeInfo,
}

/// Why a type cannot be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildError(pub String);

fn overflow() -> BuildError {
    BuildError("displacements or sizes overflow the address space".into())
}

fn checked_offset(base: isize, i: usize, extent: isize) -> Result<isize, BuildError> {
    let i = isize::try_from(i).map_err(|_| overflow())?;
    i.checked_mul(extent)
        .and_then(|o| o.checked_add(base))
        .ok_or_else(overflow)
}

/// Builds the type whose type map is the concatenation of `parts`.
pub fn build(parts: &[Part<'_>], envelope: Envelope) -> Result<TypeInfo, BuildError> {
    let mut size = 0usize;
    let mut lb: Option<isize> = None;
    let mut ub: Option<isize> = None;
    let mut tlb: Option<isize> = None;
    let mut tub: Option<isize> = None;
    // At least one run and block per part, unless they merge: reserving that much spares
    // the growth steps of the common small types (a contiguous type, a subarray's rows),
    // which programs such as ARMCI-MPI build and free for every operation.
    let reserve = parts.len().min(1 << 10);
    let mut runs: Vec<Run> = Vec::with_capacity(reserve);
    let mut blocks: Vec<Block> = Vec::with_capacity(reserve);
    let mut align = 1;
    for p in parts {
        if p.count == 0 {
            continue;
        }
        let ext = p.ty.ub - p.ty.lb;
        align = align.max(p.ty.align);
        size = p
            .count
            .checked_mul(p.ty.size)
            .and_then(|s| s.checked_add(size))
            .ok_or_else(overflow)?;
        let last = checked_offset(0, p.count - 1, ext)?;
        let (lo_shift, hi_shift) = (last.min(0), last.max(0));
        let lo = p
            .disp
            .checked_add(p.ty.lb + lo_shift)
            .ok_or_else(overflow)?;
        let hi = p
            .disp
            .checked_add(p.ty.ub + hi_shift)
            .ok_or_else(overflow)?;
        lb = Some(lb.map_or(lo, |v| v.min(lo)));
        ub = Some(ub.map_or(hi, |v| v.max(hi)));
        if p.ty.size > 0 {
            let lo = p.disp + p.ty.true_lb + lo_shift;
            let hi = p.disp + p.ty.true_ub + hi_shift;
            tlb = Some(tlb.map_or(lo, |v| v.min(lo)));
            tub = Some(tub.map_or(hi, |v| v.max(hi)));
        }
        let dense = p.ty.blocks.len() == 1
            && p.ty.runs.len() == 1
            && p.ty.blocks[0].len == p.ty.size
            && ext == p.ty.size as isize;
        if dense {
            // Copies of a gapless single-run type lie back to back: one run, one block.
            let (r, b) = (p.ty.runs[0], p.ty.blocks[0]);
            push_run(&mut runs, p.disp + r.disp, r.basic, r.count * p.count);
            push_block(&mut blocks, p.disp + b.disp, p.ty.size * p.count);
            continue;
        }
        for i in 0..p.count {
            let base = checked_offset(p.disp, i, ext)?;
            for r in &p.ty.runs {
                push_run(&mut runs, base + r.disp, r.basic, r.count);
            }
            for b in &p.ty.blocks {
                push_block(&mut blocks, base + b.disp, b.len);
            }
            if blocks.len() > MAX_BLOCKS || runs.len() > MAX_BLOCKS {
                return Err(BuildError(format!(
                    "the type would flatten to more than {MAX_BLOCKS} separate blocks; build it from fewer, larger pieces"
                )));
            }
        }
    }
    Ok(TypeInfo {
        size,
        lb: lb.unwrap_or(0),
        ub: ub.unwrap_or(0),
        true_lb: tlb.unwrap_or(0),
        true_ub: tub.unwrap_or(0),
        runs,
        blocks,
        align,
        pair: None,
        predefined: None,
        envelope,
        contents: None,
    })
}

fn push_run(runs: &mut Vec<Run>, disp: isize, basic: Basic, count: usize) {
    if count == 0 || basic.size == 0 {
        return;
    }
    if let Some(last) = runs.last_mut() {
        if last.basic == basic && last.disp + (last.count * basic.size) as isize == disp {
            last.count += count;
            return;
        }
    }
    runs.push(Run { disp, basic, count });
}

fn push_block(blocks: &mut Vec<Block>, disp: isize, len: usize) {
    if len == 0 {
        return;
    }
    if let Some(last) = blocks.last_mut() {
        if last.disp + last.len as isize == disp {
            last.len += len;
            return;
        }
    }
    blocks.push(Block { disp, len });
}

impl TypeInfo {
    /// `ub - lb`.
    pub fn extent(&self) -> isize {
        self.ub - self.lb
    }

    /// Basic elements in one element of this type.
    pub fn elements(&self) -> usize {
        self.runs.iter().map(|r| r.count).sum()
    }

    /// Whether `count` elements are exactly `count * size` bytes at the buffer address, in
    /// order (so the packed form is the memory itself).
    pub fn is_contiguous(&self) -> bool {
        self.size == 0
            || (self.blocks.len() == 1
                && self.blocks[0].disp == 0
                && self.blocks[0].len == self.size
                && self.extent() == self.size as isize)
    }

    /// The bytes `count` elements touch, relative to the buffer address: `(start, length)`,
    /// or `None` when they touch none.
    pub fn span(&self, count: usize) -> Option<(isize, usize)> {
        if count == 0 || self.size == 0 {
            return None;
        }
        let last = isize::try_from(count - 1)
            .ok()?
            .checked_mul(self.extent())?;
        let lo = self.true_lb.checked_add(last.min(0))?;
        let hi = self.true_ub.checked_add(last.max(0))?;
        Some((lo, usize::try_from(hi - lo).ok()?))
    }

    /// The single basic type every element of this type is made of, if there is one.
    pub fn uniform_basic(&self) -> Option<Basic> {
        let first = self.runs.first()?.basic;
        self.runs.iter().all(|r| r.basic == first).then_some(first)
    }

    /// How a predefined reduction sees buffers of this type; `None` when no predefined
    /// operation applies (mixed element types, complex, long double).
    pub fn reduce_view(&self) -> Option<ReduceView> {
        if let Some(p) = self.pair {
            return Some(ReduceView::Raw(p));
        }
        let basic = self.uniform_basic()?;
        let d = reduction_type(basic.handle)?;
        Some(if self.is_contiguous() {
            ReduceView::Raw(d)
        } else {
            ReduceView::Packed(d)
        })
    }

    /// `MPI_Get_elements`: basic elements in `bytes` of packed data; `None` when the bytes
    /// end inside a basic element (`MPI_UNDEFINED`).
    pub fn elements_in(&self, bytes: usize) -> Option<usize> {
        if self.size == 0 {
            return (bytes == 0).then_some(0);
        }
        let full = bytes / self.size;
        let mut rest = bytes % self.size;
        let mut n = full * self.elements();
        for r in &self.runs {
            let fit = (rest / r.basic.size).min(r.count);
            n += fit;
            rest -= fit * r.basic.size;
            if fit < r.count {
                break;
            }
        }
        (rest == 0).then_some(n)
    }

    /// Bytes of packed data holding `elements` basic elements (`MPI_Status_set_elements`).
    pub fn bytes_for_elements(&self, elements: usize) -> Option<usize> {
        let per = self.elements();
        if per == 0 {
            return (elements == 0).then_some(0);
        }
        let mut bytes = (elements / per).checked_mul(self.size)?;
        let mut rest = elements % per;
        for r in &self.runs {
            let take = rest.min(r.count);
            bytes += take * r.basic.size;
            rest -= take;
            if rest == 0 {
                break;
            }
        }
        Some(bytes)
    }

    /// Appends the packed form of `count` elements to `out`; `span` holds the bytes of
    /// [`TypeInfo::span`] and `origin` is the buffer address's offset within it.
    pub fn pack(
        &self,
        count: usize,
        span: &[u8],
        origin: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), String> {
        let ext = self.extent();
        out.reserve(count.saturating_mul(self.size));
        if self.is_contiguous() {
            // One block of `count * size` bytes at the buffer address.
            let n = count * self.size;
            out.extend_from_slice(span.get(origin..origin + n).ok_or_else(outside)?);
            return Ok(());
        }
        for i in 0..count {
            let base = origin as isize + i as isize * ext;
            for b in &self.blocks {
                let at = usize::try_from(base + b.disp).map_err(|_| outside())?;
                let bytes = span.get(at..at + b.len).ok_or_else(outside)?;
                out.extend_from_slice(bytes);
            }
        }
        Ok(())
    }

    /// Writes `count` elements from their packed form `packed` into typed memory: `sink`
    /// holds the span and `origin` is the buffer address's offset within it. Returns the
    /// packed bytes consumed (less than `count * size` when `packed` is shorter).
    pub fn unpack<S: Sink + ?Sized>(
        &self,
        count: usize,
        packed: &[u8],
        sink: &mut S,
        origin: usize,
    ) -> Result<usize, String> {
        let ext = self.extent();
        if self.is_contiguous() {
            let n = (count * self.size).min(packed.len());
            if !sink.put(origin, &packed[..n]) {
                return Err(outside());
            }
            return Ok(n);
        }
        let mut at = 0;
        'outer: for i in 0..count {
            let base = origin as isize + i as isize * ext;
            for b in &self.blocks {
                if at >= packed.len() {
                    break 'outer;
                }
                let n = b.len.min(packed.len() - at);
                let to = usize::try_from(base + b.disp).map_err(|_| outside())?;
                if !sink.put(to, &packed[at..at + n]) {
                    return Err(outside());
                }
                at += n;
            }
        }
        Ok(at)
    }
}

fn outside() -> String {
    "datatype block outside the buffer span (internal error)".to_string()
}

/// Memory that unpacking writes into.
pub trait Sink {
    /// Copies `data` to byte `at`; false when it does not fit.
    fn put(&mut self, at: usize, data: &[u8]) -> bool;
}

impl Sink for [u8] {
    fn put(&mut self, at: usize, data: &[u8]) -> bool {
        match self.get_mut(at..at + data.len()) {
            Some(dst) => {
                dst.copy_from_slice(data);
                true
            }
            None => false,
        }
    }
}

impl Sink for UserBuf {
    fn put(&mut self, at: usize, data: &[u8]) -> bool {
        at + data.len() <= self.len() && self.write_at(at, data) == data.len()
    }
}

/// A datatype as calls use it: a predefined type's static map or a derived type's shared one.
#[derive(Debug, Clone)]
pub enum Dt {
    /// Predefined.
    Static(&'static TypeInfo),
    /// Built by the program (kept alive by every operation using it, even after
    /// `MPI_Type_free`).
    Shared(Arc<TypeInfo>),
}

impl std::ops::Deref for Dt {
    type Target = TypeInfo;
    fn deref(&self) -> &TypeInfo {
        match self {
            Dt::Static(t) => t,
            Dt::Shared(t) => t,
        }
    }
}

/// `MPI_Type_create_struct`'s extent rule: the upper bound rounds up to a multiple of the
/// largest member alignment, as the C compiler pads the struct the type describes.
pub fn pad_struct(t: &mut TypeInfo) {
    let ext = t.extent();
    let a = t.align as isize;
    if a > 1 && ext % a != 0 {
        t.ub += a - ext.rem_euclid(a);
    }
}

/// `MPI_Type_create_resized`.
pub fn resized(old: &TypeInfo, lb: isize, extent: isize) -> TypeInfo {
    resized_owned(old.clone(), lb, extent)
}

/// [`resized`] of a type the caller no longer needs (no copy of its type map).
pub fn resized_owned(mut t: TypeInfo, lb: isize, extent: isize) -> TypeInfo {
    t.lb = lb;
    t.ub = lb + extent;
    t.pair = None;
    t.predefined = None;
    t.envelope = Envelope {
        combiner: combiner::RESIZED,
        integers: 0,
        addresses: 2,
        datatypes: 1,
    };
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The short paths (one-sided, collectives) and the general path must see one element
    /// size and reduction type for every predefined type they both take.
    #[test]
    fn contiguous_scalar_agrees_with_the_reduction_view() {
        let mut taken = 0;
        for &(h, name, _) in PREDEFINED {
            let Some((size, d)) = contiguous_scalar(h) else {
                continue;
            };
            taken += 1;
            let t = predefined(h).expect("predefined");
            assert_eq!(size, t.size, "{name}");
            let general = match t.reduce_view() {
                Some(ReduceView::Raw(g)) => Some(g),
                Some(ReduceView::Packed(_)) => panic!("{name}: contiguous but packed"),
                None => None,
            };
            assert_eq!(d, general, "{name}");
        }
        assert!(
            taken > 30,
            "only {taken} predefined types take the short paths"
        );
    }

    /// The compile-time table of the common send and receive must give every predefined
    /// scalar type exactly the size of its type map, and nothing to a type without bytes
    /// or to a handle that is no predefined type.
    #[test]
    fn plain_size_agrees_with_the_type_maps() {
        let mut plain = 0;
        for &(h, name, _) in PREDEFINED {
            let t = predefined(h).expect("predefined");
            let expected = (t.size > 0 && t.is_contiguous()).then_some(t.size);
            assert_eq!(plain_size(h), expected, "{name}");
            plain += usize::from(expected.is_some());
        }
        assert!(plain > 40, "only {plain} types take the common path");
        // Same low byte, other bits: a handle that names no predefined type.
        assert_eq!(plain_size(INT ^ 0x0100_0000), None);
        assert_eq!(plain_size(0x4c00_01ff), None);
    }

    fn int() -> &'static TypeInfo {
        predefined(INT).unwrap()
    }

    fn env() -> Envelope {
        Envelope {
            combiner: combiner::STRUCT,
            integers: 0,
            addresses: 0,
            datatypes: 0,
        }
    }

    #[test]
    fn predefined_sizes_come_from_the_handle() {
        assert_eq!(predefined(0x4c00_080b).unwrap().size, 8);
        assert_eq!(predefined(0x4c00_100c).unwrap().size, 16);
        assert!(predefined(0x4c00_0405).unwrap().is_contiguous());
        assert!(predefined(0x4c00_0499).is_none());
        assert!(predefined(0x0c00_0000).is_none());
        let di = predefined(0x8c00_0001u32 as i32).unwrap();
        assert_eq!((di.size, di.extent(), di.true_ub), (12, 16, 12));
        assert!(!di.is_contiguous());
        assert_eq!(di.reduce_view(), Some(ReduceView::Raw(Dtype::DoubleInt)));
        assert_eq!(di.elements(), 2);
        assert!(predefined(0x8c00_0005u32 as i32).is_none());
    }

    #[test]
    fn vector_packs_strided_elements_in_order() {
        // vector(count 3, blocklength 2, stride 4) of int.
        let parts: Vec<Part> = (0..3)
            .map(|i| Part {
                disp: i * 16,
                count: 2,
                ty: int(),
            })
            .collect();
        let v = build(&parts, env()).unwrap();
        assert_eq!(v.size, 24);
        assert_eq!((v.lb, v.ub), (0, 40));
        assert_eq!(v.blocks.len(), 3);
        assert_eq!(v.runs.len(), 3);
        assert!(!v.is_contiguous());
        let mem: Vec<u8> = (0..96u8).collect();
        let (lo, len) = v.span(2).unwrap();
        assert_eq!((lo, len), (0, 80));
        let mut out = Vec::new();
        v.pack(2, &mem[..len], 0, &mut out).unwrap();
        assert_eq!(out.len(), 48);
        assert_eq!(&out[..8], &mem[0..8]);
        assert_eq!(&out[8..16], &mem[16..24]);
        assert_eq!(&out[24..32], &mem[40..48]);
        let mut back = vec![0u8; len];
        assert_eq!(v.unpack(2, &out, &mut back[..], 0).unwrap(), 48);
        assert_eq!(&back[16..24], &mem[16..24]);
        assert_eq!(&back[8..16], &[0u8; 8]);
        assert_eq!(v.elements_in(48), Some(12));
        assert_eq!(v.elements_in(28), Some(7));
        assert_eq!(v.elements_in(30), None);
        assert_eq!(v.bytes_for_elements(7), Some(28));
        assert_eq!(v.reduce_view(), Some(ReduceView::Packed(Dtype::I32)));
    }

    #[test]
    fn negative_displacements_and_resize() {
        let t = build(
            &[Part {
                disp: -8,
                count: 1,
                ty: int(),
            }],
            env(),
        )
        .unwrap();
        assert_eq!((t.lb, t.ub, t.true_lb, t.true_ub), (-8, -4, -8, -4));
        let r = resized(&t, -8, 16);
        assert_eq!(r.extent(), 16);
        assert_eq!(r.span(3), Some((-8, 36)));
        let c = resized(int(), 0, 4);
        assert!(c.is_contiguous());
    }

    #[test]
    fn struct_extent_is_padded_to_member_alignment() {
        let c = predefined(0x4c00_0101).unwrap();
        let d = predefined(0x4c00_080b).unwrap();
        let mut s = build(
            &[
                Part {
                    disp: 0,
                    count: 1,
                    ty: d,
                },
                Part {
                    disp: 8,
                    count: 1,
                    ty: c,
                },
            ],
            env(),
        )
        .unwrap();
        pad_struct(&mut s);
        assert_eq!((s.size, s.extent()), (9, 16));
        assert_eq!(s.uniform_basic(), None);
        assert_eq!(s.reduce_view(), None);
    }

    #[test]
    fn contiguous_runs_merge() {
        let t = build(
            &[Part {
                disp: 0,
                count: 1000,
                ty: int(),
            }],
            env(),
        )
        .unwrap();
        assert_eq!(t.blocks.len(), 1);
        assert_eq!(t.runs.len(), 1);
        assert!(t.is_contiguous());
        assert_eq!(t.reduce_view(), Some(ReduceView::Raw(Dtype::I32)));
    }

    #[test]
    fn unpack_stops_at_short_input_and_rejects_bad_spans() {
        let t = build(
            &[
                Part {
                    disp: 0,
                    count: 1,
                    ty: int(),
                },
                Part {
                    disp: 8,
                    count: 1,
                    ty: int(),
                },
            ],
            env(),
        )
        .unwrap();
        let mut mem = [0u8; 12];
        assert_eq!(
            t.unpack(1, &[1, 2, 3, 4, 5, 6], &mut mem[..], 0).unwrap(),
            6
        );
        assert_eq!(&mem[8..10], &[5, 6]);
        assert!(t.unpack(1, &[0; 8], &mut mem[..4], 0).is_err());
        assert!(t.pack(1, &mem[..4], 0, &mut Vec::new()).is_err());
    }
}
