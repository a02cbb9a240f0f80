//! Tests of the topology module, many against tables of MPICH 4.0.2's answers.
// The tables pair inputs with MPICH's outputs; their tuple types read best inline.
#![allow(clippy::type_complexity)]
use super::*;

/// A small deterministic generator (xorshift64*), so the tests need no crate.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn dims_of(nnodes: u32, dims: &[i32]) -> Result<Vec<i32>, TopoError> {
    let mut d = dims.to_vec();
    dims_create(nnodes, &mut d).map(|()| d)
}

/// MPICH 4.0.2's answers (Debian 4.0.2-3, `MPI_Dims_create` called from a C program
/// under `mpiexec.mpich -n 1`) with every entry free: nnodes, then the answer in 2, 3
/// and 4 dimensions.
#[rustfmt::skip]
const MPICH_DIMS_FREE: &[(u32, [i32; 2], [i32; 3], [i32; 4])] = &[
(1, [1, 1], [1, 1, 1], [1, 1, 1, 1]),
(2, [2, 1], [2, 1, 1], [2, 1, 1, 1]),
(3, [3, 1], [3, 1, 1], [3, 1, 1, 1]),
(4, [2, 2], [2, 2, 1], [2, 2, 1, 1]),
(5, [5, 1], [5, 1, 1], [5, 1, 1, 1]),
(6, [3, 2], [3, 2, 1], [3, 2, 1, 1]),
(7, [7, 1], [7, 1, 1], [7, 1, 1, 1]),
(8, [4, 2], [2, 2, 2], [2, 2, 2, 1]),
(9, [3, 3], [3, 3, 1], [3, 3, 1, 1]),
(10, [5, 2], [5, 2, 1], [5, 2, 1, 1]),
(11, [11, 1], [11, 1, 1], [11, 1, 1, 1]),
(12, [4, 3], [3, 2, 2], [3, 2, 2, 1]),
(13, [13, 1], [13, 1, 1], [13, 1, 1, 1]),
(14, [7, 2], [7, 2, 1], [7, 2, 1, 1]),
(15, [5, 3], [5, 3, 1], [5, 3, 1, 1]),
(16, [4, 4], [4, 2, 2], [2, 2, 2, 2]),
(17, [17, 1], [17, 1, 1], [17, 1, 1, 1]),
(18, [6, 3], [3, 3, 2], [3, 3, 2, 1]),
(19, [19, 1], [19, 1, 1], [19, 1, 1, 1]),
(20, [5, 4], [5, 2, 2], [5, 2, 2, 1]),
(21, [7, 3], [7, 3, 1], [7, 3, 1, 1]),
(22, [11, 2], [11, 2, 1], [11, 2, 1, 1]),
(23, [23, 1], [23, 1, 1], [23, 1, 1, 1]),
(24, [6, 4], [4, 3, 2], [3, 2, 2, 2]),
(25, [5, 5], [5, 5, 1], [5, 5, 1, 1]),
(26, [13, 2], [13, 2, 1], [13, 2, 1, 1]),
(27, [9, 3], [3, 3, 3], [3, 3, 3, 1]),
(28, [7, 4], [7, 2, 2], [7, 2, 2, 1]),
(29, [29, 1], [29, 1, 1], [29, 1, 1, 1]),
(30, [6, 5], [5, 3, 2], [5, 3, 2, 1]),
(31, [31, 1], [31, 1, 1], [31, 1, 1, 1]),
(32, [8, 4], [4, 4, 2], [4, 2, 2, 2]),
(33, [11, 3], [11, 3, 1], [11, 3, 1, 1]),
(34, [17, 2], [17, 2, 1], [17, 2, 1, 1]),
(35, [7, 5], [7, 5, 1], [7, 5, 1, 1]),
(36, [6, 6], [4, 3, 3], [3, 3, 2, 2]),
(37, [37, 1], [37, 1, 1], [37, 1, 1, 1]),
(38, [19, 2], [19, 2, 1], [19, 2, 1, 1]),
(39, [13, 3], [13, 3, 1], [13, 3, 1, 1]),
(40, [8, 5], [5, 4, 2], [5, 2, 2, 2]),
(41, [41, 1], [41, 1, 1], [41, 1, 1, 1]),
(42, [7, 6], [7, 3, 2], [7, 3, 2, 1]),
(43, [43, 1], [43, 1, 1], [43, 1, 1, 1]),
(44, [11, 4], [11, 2, 2], [11, 2, 2, 1]),
(45, [9, 5], [5, 3, 3], [5, 3, 3, 1]),
(46, [23, 2], [23, 2, 1], [23, 2, 1, 1]),
(47, [47, 1], [47, 1, 1], [47, 1, 1, 1]),
(48, [8, 6], [4, 4, 3], [4, 3, 2, 2]),
(49, [7, 7], [7, 7, 1], [7, 7, 1, 1]),
(50, [10, 5], [5, 5, 2], [5, 5, 2, 1]),
(51, [17, 3], [17, 3, 1], [17, 3, 1, 1]),
(52, [13, 4], [13, 2, 2], [13, 2, 2, 1]),
(53, [53, 1], [53, 1, 1], [53, 1, 1, 1]),
(54, [9, 6], [6, 3, 3], [3, 3, 3, 2]),
(55, [11, 5], [11, 5, 1], [11, 5, 1, 1]),
(56, [8, 7], [7, 4, 2], [7, 2, 2, 2]),
(57, [19, 3], [19, 3, 1], [19, 3, 1, 1]),
(58, [29, 2], [29, 2, 1], [29, 2, 1, 1]),
(59, [59, 1], [59, 1, 1], [59, 1, 1, 1]),
(60, [10, 6], [5, 4, 3], [5, 3, 2, 2]),
(61, [61, 1], [61, 1, 1], [61, 1, 1, 1]),
(62, [31, 2], [31, 2, 1], [31, 2, 1, 1]),
(63, [9, 7], [7, 3, 3], [7, 3, 3, 1]),
(64, [8, 8], [4, 4, 4], [4, 4, 2, 2]),
(65, [13, 5], [13, 5, 1], [13, 5, 1, 1]),
(66, [11, 6], [11, 3, 2], [11, 3, 2, 1]),
(67, [67, 1], [67, 1, 1], [67, 1, 1, 1]),
(68, [17, 4], [17, 2, 2], [17, 2, 2, 1]),
(69, [23, 3], [23, 3, 1], [23, 3, 1, 1]),
(70, [10, 7], [7, 5, 2], [7, 5, 2, 1]),
(71, [71, 1], [71, 1, 1], [71, 1, 1, 1]),
(72, [9, 8], [6, 4, 3], [4, 3, 3, 2]),
(73, [73, 1], [73, 1, 1], [73, 1, 1, 1]),
(74, [37, 2], [37, 2, 1], [37, 2, 1, 1]),
(75, [15, 5], [5, 5, 3], [5, 5, 3, 1]),
(76, [19, 4], [19, 2, 2], [19, 2, 2, 1]),
(77, [11, 7], [11, 7, 1], [11, 7, 1, 1]),
(78, [13, 6], [13, 3, 2], [13, 3, 2, 1]),
(79, [79, 1], [79, 1, 1], [79, 1, 1, 1]),
(80, [10, 8], [5, 4, 4], [5, 4, 2, 2]),
(81, [9, 9], [9, 3, 3], [3, 3, 3, 3]),
(82, [41, 2], [41, 2, 1], [41, 2, 1, 1]),
(83, [83, 1], [83, 1, 1], [83, 1, 1, 1]),
(84, [12, 7], [7, 4, 3], [7, 3, 2, 2]),
(85, [17, 5], [17, 5, 1], [17, 5, 1, 1]),
(86, [43, 2], [43, 2, 1], [43, 2, 1, 1]),
(87, [29, 3], [29, 3, 1], [29, 3, 1, 1]),
(88, [11, 8], [11, 4, 2], [11, 2, 2, 2]),
(89, [89, 1], [89, 1, 1], [89, 1, 1, 1]),
(90, [10, 9], [6, 5, 3], [5, 3, 3, 2]),
(91, [13, 7], [13, 7, 1], [13, 7, 1, 1]),
(92, [23, 4], [23, 2, 2], [23, 2, 2, 1]),
(93, [31, 3], [31, 3, 1], [31, 3, 1, 1]),
(94, [47, 2], [47, 2, 1], [47, 2, 1, 1]),
(95, [19, 5], [19, 5, 1], [19, 5, 1, 1]),
(96, [12, 8], [6, 4, 4], [4, 4, 3, 2]),
(97, [97, 1], [97, 1, 1], [97, 1, 1, 1]),
(98, [14, 7], [7, 7, 2], [7, 7, 2, 1]),
(99, [11, 9], [11, 3, 3], [11, 3, 3, 1]),
(100, [10, 10], [5, 5, 4], [5, 5, 2, 2]),
(101, [101, 1], [101, 1, 1], [101, 1, 1, 1]),
(102, [17, 6], [17, 3, 2], [17, 3, 2, 1]),
(103, [103, 1], [103, 1, 1], [103, 1, 1, 1]),
(104, [13, 8], [13, 4, 2], [13, 2, 2, 2]),
(105, [15, 7], [7, 5, 3], [7, 5, 3, 1]),
(106, [53, 2], [53, 2, 1], [53, 2, 1, 1]),
(107, [107, 1], [107, 1, 1], [107, 1, 1, 1]),
(108, [12, 9], [6, 6, 3], [4, 3, 3, 3]),
(109, [109, 1], [109, 1, 1], [109, 1, 1, 1]),
(110, [11, 10], [11, 5, 2], [11, 5, 2, 1]),
(111, [37, 3], [37, 3, 1], [37, 3, 1, 1]),
(112, [14, 8], [7, 4, 4], [7, 4, 2, 2]),
(113, [113, 1], [113, 1, 1], [113, 1, 1, 1]),
(114, [19, 6], [19, 3, 2], [19, 3, 2, 1]),
(115, [23, 5], [23, 5, 1], [23, 5, 1, 1]),
(116, [29, 4], [29, 2, 2], [29, 2, 2, 1]),
(117, [13, 9], [13, 3, 3], [13, 3, 3, 1]),
(118, [59, 2], [59, 2, 1], [59, 2, 1, 1]),
(119, [17, 7], [17, 7, 1], [17, 7, 1, 1]),
(120, [12, 10], [6, 5, 4], [5, 4, 3, 2]),
(121, [11, 11], [11, 11, 1], [11, 11, 1, 1]),
(122, [61, 2], [61, 2, 1], [61, 2, 1, 1]),
(123, [41, 3], [41, 3, 1], [41, 3, 1, 1]),
(124, [31, 4], [31, 2, 2], [31, 2, 2, 1]),
(125, [25, 5], [5, 5, 5], [5, 5, 5, 1]),
(126, [14, 9], [7, 6, 3], [7, 3, 3, 2]),
(127, [127, 1], [127, 1, 1], [127, 1, 1, 1]),
(128, [16, 8], [8, 4, 4], [4, 4, 4, 2]),
(131, [131, 1], [131, 1, 1], [131, 1, 1, 1]),
(257, [257, 1], [257, 1, 1], [257, 1, 1, 1]),
(360, [20, 18], [10, 6, 6], [6, 5, 4, 3]),
(720, [30, 24], [10, 9, 8], [6, 6, 5, 4]),
(1000, [40, 25], [10, 10, 10], [8, 5, 5, 5]),
(1009, [1009, 1], [1009, 1, 1], [1009, 1, 1, 1]),
(1024, [32, 32], [16, 8, 8], [8, 8, 4, 4]),
(2048, [64, 32], [16, 16, 8], [8, 8, 8, 4]),
(4096, [64, 64], [16, 16, 16], [8, 8, 8, 8]),
(5040, [72, 70], [21, 16, 15], [10, 9, 8, 7]),
(7919, [7919, 1], [7919, 1, 1], [7919, 1, 1, 1]),
(8633, [97, 89], [97, 89, 1], [97, 89, 1, 1]),
(30030, [182, 165], [35, 33, 26], [15, 14, 13, 11]),
(65521, [65521, 1], [65521, 1, 1], [65521, 1, 1, 1]),
(65536, [256, 256], [64, 32, 32], [16, 16, 16, 16]),
(362880, [630, 576], [72, 72, 70], [28, 27, 24, 20]),
(510510, [715, 714], [85, 78, 77], [35, 33, 26, 17]),
(720720, [858, 840], [91, 90, 88], [33, 30, 28, 26]),
(1000000, [1000, 1000], [100, 100, 100], [40, 40, 25, 25]),
(1048576, [1024, 1024], [128, 128, 64], [32, 32, 32, 32]),
(9699690, [3135, 3094], [221, 210, 209], [77, 65, 51, 38]),
(479001600, [22176, 21600], [810, 770, 768], [154, 150, 144, 144]),
(999999937, [999999937, 1], [999999937, 1, 1], [999999937, 1, 1, 1]),
(1073741824, [32768, 32768], [1024, 1024, 1024], [256, 256, 128, 128]),
(2147483646, [49981, 42966], [1661, 1302, 993], [331, 217, 198, 151]),
];

/// MPICH 4.0.2's answers (as above) for dims with fixed entries, 1 and 5 to 25
/// dimensions, nnodes 0, and errors (`None`: MPICH returned an error).
#[rustfmt::skip]
const MPICH_DIMS_MIXED: &[(u32, &[i32], Option<&[i32]>)] = &[
(101, &[0, 3, 1, 3], None),
(125, &[3, 4, 3], None),
(104, &[3, 0, 5], None),
(101, &[5, 1, 5], None),
(113, &[0, 0, 2, 2, 2, 2], None),
(1009, &[1, 2, 0], None),
(42, &[2, 0, 2, 0, 0, 0, 0], None),
(41, &[0, 2, 2, 2, 0], None),
(114, &[0, 0, 2, 2, 0, 0], None),
(106, &[2, 1, 3, 3], None),
(8633, &[2, 1, 3, 0], None),
(9699690, &[2, 2, 3], None),
(41, &[2, 2, 2, 0, 2, 2, 2], None),
(21, &[2, 2, 2, 0], None),
(100, &[0, 0, 3], None),
(68, &[1, 3, 4], None),
(31, &[2, 0, 0, 2, 0, 2, 0], None),
(20, &[0, 0, 0, 2, 2, 0, 2], None),
(120, &[2, 2, 0, 2, 2, 0], None),
(17266, &[2, 0, 2, 2, 2], None),
(9, &[2, 0, 0, 2, 0, 0, 2], None),
(4096, &[1, 3, 3, 0], None),
(88, &[0, 2, 2, 2, 2, 0], None),
(101, &[2, 0, 3, 3], None),
(1223272790, &[0, 0, 3], None),
(9699690, &[2, 2, 0, 2, 0, 2], None),
(30431020, &[3, 0, 0], None),
(35, &[2, 0, 3, 0], None),
(2147483646, &[2, 0, 2, 2, 2], None),
(3, &[2, 0, 2, 2, 2, 2, 2], None),
(118, &[3, 2, 1], None),
(14, &[2, 0, 3, 3], None),
(13, &[2, 0, 2, 0, 2, 2], None),
(8, &[0, 3, 0, 1], None),
(42, &[2, 2, 2, 2, 0, 0, 0], None),
(54, &[5, 1, 3], None),
(7919, &[2, 2, 0, 2, 0, 0], None),
(7, &[4, 2, 0], None),
(103, &[2, 2, 2, 0, 2, 2], None),
(73, &[1, 1, 3, 0], None),
(126, &[2, 0, 0, 0, 0, 0], Some(&[2, 7, 3, 3, 1, 1])),
(479001600, &[3, 1, 3, 0], Some(&[3, 1, 3, 53222400])),
(57, &[0, 0, 0, 3], Some(&[19, 1, 1, 3])),
(5040, &[0, 0, 0, 0, 2, 0], Some(&[7, 6, 5, 4, 2, 3])),
(68, &[1, 0, 1, 2], Some(&[1, 34, 1, 2])),
(12600, &[2, 0, 2, 0, 0, 2], Some(&[2, 15, 2, 15, 7, 2])),
(84, &[0, 0, 0, 2, 0, 0, 2], Some(&[7, 3, 1, 2, 1, 1, 2])),
(2048, &[0, 2, 0, 2, 2, 2, 2], Some(&[8, 2, 8, 2, 2, 2, 2])),
(3, &[1, 0, 0, 3], Some(&[1, 1, 1, 3])),
(1728, &[3, 3, 2, 0], Some(&[3, 3, 2, 96])),
(26, &[1, 1, 0, 0], Some(&[1, 1, 13, 2])),
(360, &[1, 3, 0, 0], Some(&[1, 3, 12, 10])),
(216, &[0, 2, 0, 0, 0, 2, 0], Some(&[3, 2, 3, 3, 2, 2, 1])),
(80, &[0, 0, 0, 2, 2, 0, 2], Some(&[5, 2, 1, 2, 2, 1, 2])),
(117, &[1, 1, 0], Some(&[1, 1, 117])),
(720720, &[3, 3, 1, 0], Some(&[3, 3, 1, 80080])),
(25, &[0, 1, 1, 1], Some(&[25, 1, 1, 1])),
(39597723, &[0, 0, 0, 0, 1, 0, 0], Some(&[83, 79, 61, 11, 1, 3, 3])),
(73, &[0, 0, 1, 0], Some(&[73, 1, 1, 1])),
(91, &[0, 1, 1], Some(&[91, 1, 1])),
(353181192, &[0, 0, 0, 0, 0, 0], Some(&[89, 79, 23, 14, 13, 12])),
(66, &[2, 1, 3, 0], Some(&[2, 1, 3, 11])),
(5040, &[3, 3, 0], Some(&[3, 3, 560])),
(84, &[0, 1, 0, 1], Some(&[12, 1, 7, 1])),
(10, &[0, 2, 0, 0, 0, 0], Some(&[5, 2, 1, 1, 1, 1])),
(22, &[1, 1, 0, 1], Some(&[1, 1, 22, 1])),
(1000000, &[0, 0, 2, 0, 2, 0, 0], Some(&[25, 10, 2, 10, 2, 10, 10])),
(703846572, &[3, 0, 0, 0, 0], Some(&[3, 143, 142, 109, 106])),
(32, &[0, 0, 2, 2, 0, 0, 2], Some(&[2, 2, 2, 2, 1, 1, 2])),
(115, &[0, 0, 1], Some(&[23, 5, 1])),
(32, &[0, 0, 2, 0, 2, 0, 2], Some(&[2, 2, 2, 1, 2, 1, 2])),
(84, &[1, 2, 0, 2], Some(&[1, 2, 21, 2])),
(112, &[2, 2, 0], Some(&[2, 2, 28])),
(21, &[0, 1], Some(&[21, 1])),
(7, &[1, 0, 0, 1], Some(&[1, 7, 1, 1])),
(60791, &[0, 0, 0, 0, 0, 0, 0, 0, 0], Some(&[53, 37, 31, 1, 1, 1, 1, 1, 1])),
(1, &[1, 0, 0, 1], Some(&[1, 1, 1, 1])),
(63, &[0, 3, 1, 3], Some(&[7, 3, 1, 3])),
(62, &[2, 0], Some(&[2, 31])),
(16, &[2, 0, 0, 0, 0, 0, 2], Some(&[2, 2, 2, 1, 1, 1, 2])),
(720, &[3, 2, 1, 0], Some(&[3, 2, 1, 120])),
(108, &[2, 0, 0, 1], Some(&[2, 9, 6, 1])),
(13916, &[0, 0, 0, 0, 0], Some(&[71, 7, 7, 2, 2])),
(114, &[0, 2, 3, 1], Some(&[19, 2, 3, 1])),
(120, &[2, 0, 0, 0, 0], Some(&[2, 5, 3, 2, 2])),
(24, &[1, 0, 0], Some(&[1, 6, 4])),
(1000000, &[2, 2, 2, 2, 0, 0, 2], Some(&[2, 2, 2, 2, 250, 125, 2])),
(34532, &[2, 0, 0, 0], Some(&[2, 97, 89, 2])),
(58, &[2, 1, 0, 1], Some(&[2, 1, 29, 1])),
(123567730, &[0, 2, 0, 0, 0, 0, 0], Some(&[55, 2, 23, 17, 17, 13, 13])),
(768, &[2, 3, 1, 0], Some(&[2, 3, 1, 128])),
(78, &[0, 2, 0, 0, 0], Some(&[13, 2, 3, 1, 1])),
(96, &[0, 2, 0, 2, 0, 0, 2], Some(&[3, 2, 2, 2, 2, 1, 2])),
(27, &[0, 1, 1, 1], Some(&[27, 1, 1, 1])),
(90, &[0, 1, 3, 3], Some(&[10, 1, 3, 3])),
(96, &[3, 1, 2, 0], Some(&[3, 1, 2, 16])),
(6, &[2, 3, 0, 0], Some(&[2, 3, 1, 1])),
(118, &[0, 2, 1, 0], Some(&[59, 2, 1, 1])),
(12558, &[0, 0, 0, 0, 0, 0], Some(&[23, 13, 7, 3, 2, 1])),
(36, &[3, 0, 4], Some(&[3, 3, 4])),
(40, &[0, 0, 0, 0, 0], Some(&[5, 2, 2, 2, 1])),
(72, &[1, 0, 0, 1], Some(&[1, 9, 8, 1])),
(224060844, &[1, 0, 0, 0], Some(&[1, 658, 618, 551])),
(32, &[0, 1], Some(&[32, 1])),
(5, &[0, 1, 0, 0], Some(&[5, 1, 1, 1])),
(18, &[2, 0, 0, 0, 0], Some(&[2, 3, 3, 1, 1])),
(720, &[3, 1, 0], Some(&[3, 1, 240])),
(1024, &[2, 2, 0, 0, 2], Some(&[2, 2, 16, 8, 2])),
(52, &[0, 2, 2, 0, 0], Some(&[13, 2, 2, 1, 1])),
(768, &[2, 2, 2, 2, 0, 0, 0], Some(&[2, 2, 2, 2, 4, 4, 3])),
(1000000, &[2, 0, 2, 0], Some(&[2, 500, 2, 500])),
(56, &[2, 0, 2], Some(&[2, 14, 2])),
(128, &[2, 2, 0, 2, 0, 2], Some(&[2, 2, 4, 2, 2, 2])),
(4096, &[0, 2, 0, 0, 2, 0, 2], Some(&[8, 2, 4, 4, 2, 4, 2])),
(56, &[0, 0, 0, 0, 2], Some(&[7, 2, 2, 1, 2])),
(790911773, &[0, 0, 0, 0, 0, 0], Some(&[25513283, 31, 1, 1, 1, 1])),
(300195126, &[0, 0, 3, 0, 0], Some(&[138, 129, 3, 77, 73])),
(40, &[5, 0], Some(&[5, 8])),
(120, &[3, 2, 0, 2], Some(&[3, 2, 10, 2])),
(675, &[0, 3, 0, 0], Some(&[9, 3, 5, 5])),
(111, &[0, 1, 1], Some(&[111, 1, 1])),
(36, &[0, 1], Some(&[36, 1])),
(113, &[0, 1, 0, 1], Some(&[113, 1, 1, 1])),
(120, &[0, 2, 0, 2, 2, 0], Some(&[5, 2, 3, 2, 2, 1])),
(63, &[0, 0, 0, 3], Some(&[7, 3, 1, 3])),
(1, &[0, 1, 1, 1], Some(&[1, 1, 1, 1])),
(479001600, &[0, 0, 2, 2, 0, 0], Some(&[112, 108, 2, 2, 100, 99])),
(88, &[2, 0, 0, 2, 2], Some(&[2, 11, 1, 2, 2])),
(8, &[1, 2, 0, 1], Some(&[1, 2, 4, 1])),
(62, &[0, 2, 0, 1], Some(&[31, 2, 1, 1])),
(55, &[1, 1, 0, 0], Some(&[1, 1, 11, 5])),
(112, &[2, 2, 0, 2, 2, 0, 0], Some(&[2, 2, 7, 2, 2, 1, 1])),
(1073741824, &[0, 2, 2, 0, 2], Some(&[16384, 2, 2, 8192, 2])),
(12600, &[2, 0, 0, 0, 0, 0, 0], Some(&[2, 7, 5, 5, 4, 3, 3])),
(362880, &[0, 2, 0, 0, 0, 2, 0], Some(&[12, 2, 12, 10, 9, 2, 7])),
(31, &[0, 0, 1], Some(&[31, 1, 1])),
(15, &[0], Some(&[15])),
(44, &[0, 0, 1, 1], Some(&[11, 4, 1, 1])),
(63, &[0, 1, 1, 3], Some(&[21, 1, 1, 3])),
(127, &[0, 0, 0, 0, 0, 0], Some(&[127, 1, 1, 1, 1, 1])),
(75, &[0, 0, 1, 0], Some(&[5, 5, 1, 3])),
(4, &[0, 0, 0, 2, 0, 0, 0], Some(&[2, 1, 1, 2, 1, 1, 1])),
(345245010, &[0, 0, 0, 0, 0, 0, 0], Some(&[79, 41, 19, 17, 11, 6, 5])),
(2147483646, &[0, 1, 3, 0], Some(&[28086, 1, 3, 25487])),
(96, &[0, 1, 0, 1], Some(&[12, 1, 8, 1])),
(86, &[1, 0, 1], Some(&[1, 86, 1])),
(112, &[1, 0, 1], Some(&[1, 112, 1])),
(24, &[2, 0, 3], Some(&[2, 4, 3])),
(24, &[0, 0, 2, 2], Some(&[3, 2, 2, 2])),
(28, &[0, 1, 0, 0], Some(&[7, 1, 2, 2])),
(60, &[2, 2, 1], Some(&[2, 2, 1])),
(479001600, &[3, 2], Some(&[3, 2])),
(216, &[1, 3], Some(&[1, 3])),
(70, &[2], Some(&[2])),
(8, &[2, 2], Some(&[2, 2])),
(2147483646, &[3], Some(&[3])),
(102, &[2, 3, 1], Some(&[2, 3, 1])),
(102, &[3, 2, 1, 1], Some(&[3, 2, 1, 1])),
(12600, &[2, 2, 2], Some(&[2, 2, 2])),
(125, &[1, 1], Some(&[1, 1])),
(36, &[3, 3, 1, 1], Some(&[3, 3, 1, 1])),
(479001600, &[1, 1, 3, 3], Some(&[1, 1, 3, 3])),
(6, &[-1, 0], None),
(6, &[0, -2, -3], None),
(6, &[4, 0], None),
(6, &[2, 2], None),
(6, &[2, 1], Some(&[2, 1])),
(2147483647, &[1], Some(&[1])),
(2147483647, &[3], None),
(0, &[0], Some(&[0])),
(0, &[3], Some(&[3])),
(0, &[2, 0], Some(&[2, 0])),
(0, &[2, 0, 5], Some(&[2, 0, 5])),
(0, &[1, 1], Some(&[1, 1])),
(6, &[], Some(&[])),
(1, &[], Some(&[])),
(0, &[], Some(&[])),
(1, &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], Some(&[1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1])),
(1, &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], None),
(1024, &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], Some(&[2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1])),
(720, &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0], Some(&[5, 3, 3, 2, 2, 2, 2, 1, 1, 1])),
(64, &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], None),
(360, &[0, 0, 0], Some(&[10, 6, 6])),
(2160, &[0, 0, 0, 0], Some(&[10, 6, 6, 6])),
(2520, &[0, 0, 0, 0], Some(&[10, 7, 6, 6])),
(2880, &[0, 0, 0, 0], Some(&[10, 8, 6, 6])),
(1585977250, &[0, 0, 0, 0, 0, 0], Some(&[109, 55, 37, 25, 22, 13])),
(259505, &[0, 0, 3, 0, 0, 0], None),
(5040, &[2, 2, 0, 2, 2, 2, 2], None),
(675, &[0, 0, 0, 0, 0, 0], Some(&[5, 5, 3, 3, 3, 1])),
(65536, &[2, 2, 0, 0, 2, 2], Some(&[2, 2, 64, 64, 2, 2])),
(516626682, &[0, 0, 0, 0, 0, 0, 0], Some(&[67, 43, 19, 13, 11, 11, 6])),
(30030, &[0, 2, 2, 2, 0, 2], None),
(2147483646, &[2, 0, 0, 0, 2, 0, 0], None),
(1000000, &[0, 2, 2, 2, 2, 0, 2], Some(&[250, 2, 2, 2, 2, 125, 2])),
(436632042, &[2, 0, 0, 0, 0, 0], Some(&[2, 89, 49, 41, 37, 33])),
(9699690, &[0, 2, 0, 2, 2, 2], None),
(65536, &[2, 2, 0, 0, 2, 0, 2], Some(&[2, 2, 16, 16, 2, 16, 2])),
(30030, &[0, 2, 0, 0, 2, 0, 0], None),
(1420664580, &[0, 0, 0, 0, 0], Some(&[109, 103, 74, 45, 38])),
(449145019, &[0, 0, 0, 0, 0, 0, 0, 0], Some(&[107, 67, 47, 43, 31, 1, 1, 1])),
(510510, &[2, 2, 0, 2, 0, 0], None),
(675, &[2, 0, 0, 0, 2, 2], None),
(57362, &[0, 0, 0, 0, 0, 0, 0, 0, 0], Some(&[43, 29, 23, 2, 1, 1, 1, 1, 1])),
(12558, &[0, 0, 0, 0, 0, 0], Some(&[23, 13, 7, 3, 2, 1])),
(1009, &[2, 0, 0, 0, 2, 2, 0], None),
(1728, &[2, 0, 0, 0, 2, 0, 0], Some(&[2, 4, 4, 3, 2, 3, 3])),
(720, &[0, 0, 0, 2, 0, 0, 0], Some(&[5, 3, 3, 2, 2, 2, 2])),
(2048, &[0, 2, 0, 0, 2, 0, 2], Some(&[4, 2, 4, 4, 2, 4, 2])),
(2048, &[2, 2, 2, 2, 0, 2, 0], Some(&[2, 2, 2, 2, 8, 2, 8])),
(360, &[2, 0, 2, 2, 0, 2, 0], None),
(649405861, &[0, 0, 0, 0, 0, 1, 0, 0, 0], Some(&[101, 101, 83, 59, 13, 1, 1, 1, 1])),
(9699690, &[0, 2, 2, 0, 2, 0, 0], None),
(362880, &[0, 0, 0, 0, 0, 2, 0], Some(&[10, 9, 8, 7, 6, 2, 6])),
(675, &[0, 0, 2, 2, 0, 2, 2], None),
(9699690, &[2, 0, 2, 0, 0, 2, 0], None),
(1728, &[0, 2, 2, 2, 0, 0, 2], Some(&[6, 2, 2, 2, 6, 3, 2])),
(222, &[0, 0, 0, 0, 0, 0, 0, 0, 0], Some(&[37, 3, 2, 1, 1, 1, 1, 1, 1])),
(1034882310, &[2, 0, 0, 0, 0, 0], Some(&[2, 85, 77, 73, 57, 19])),
(1073741824, &[0, 0, 0, 0, 2, 2, 2], Some(&[128, 128, 128, 64, 2, 2, 2])),
(559, &[0, 0, 0, 0, 0, 0], Some(&[43, 13, 1, 1, 1, 1])),
(65521, &[2, 0, 2, 2, 0, 2, 0], None),
(1009, &[0, 0, 2, 2, 0], None),
(5040, &[0, 2, 0, 2, 2, 0], Some(&[10, 2, 9, 2, 2, 7])),
(1000000, &[0, 2, 2, 2, 2, 2, 0], Some(&[250, 2, 2, 2, 2, 2, 125])),
(1100738205, &[0, 0, 0, 0, 0, 0, 0, 0, 0], Some(&[89, 79, 71, 7, 7, 5, 3, 3, 1])),
];

#[test]
fn dims_create_matches_mpich_with_every_entry_free() {
    assert!(MPICH_DIMS_FREE.len() * 3 >= 200);
    for &(n, d2, d3, d4) in MPICH_DIMS_FREE {
        assert_eq!(dims_of(n, &[0; 2]).unwrap(), d2, "nnodes {n}, 2 dims");
        assert_eq!(dims_of(n, &[0; 3]).unwrap(), d3, "nnodes {n}, 3 dims");
        assert_eq!(dims_of(n, &[0; 4]).unwrap(), d4, "nnodes {n}, 4 dims");
    }
}

#[test]
fn dims_create_matches_mpich_with_fixed_entries_and_errors() {
    assert!(MPICH_DIMS_MIXED.len() >= 200);
    for &(n, input, want) in MPICH_DIMS_MIXED {
        let got = dims_of(n, input);
        match want {
            Some(w) => assert_eq!(got.as_deref(), Ok(w), "nnodes {n}, dims {input:?}"),
            None => assert!(got.is_err(), "nnodes {n}, dims {input:?}: {got:?}"),
        }
    }
}

#[test]
fn dims_create_mpich_specifics() {
    // Equally balanced candidates: MPICH keeps the larger smallest entries.
    assert_eq!(dims_of(360, &[0; 3]).unwrap(), [10, 6, 6]); // not 9x8x5
    assert_eq!(dims_of(2160, &[0; 4]).unwrap(), [10, 6, 6, 6]); // not 9x8x6x5
                                                                // Fixed entries need only divide nnodes; no free entry means no change.
    assert_eq!(dims_of(6, &[2, 1]).unwrap(), [2, 1]);
    assert_eq!(dims_of(7, &[]).unwrap(), Vec::<i32>::new());
    // Free entries are filled in order, around the fixed ones.
    assert_eq!(dims_of(24, &[0, 1, 0, 0]).unwrap(), [4, 1, 3, 2]);
    // nnodes 0: one free entry takes 0 (MPICH); two would hang MPICH.
    assert_eq!(dims_of(0, &[2, 0]).unwrap(), [2, 0]);
    assert_eq!(dims_of(0, &[0, 0]), Err(TopoError::NoNodes(2)));
    // A prime above 46337^2 crashes MPICH; here it is a prime like any other.
    assert_eq!(dims_of(2147483647, &[0, 0, 0]).unwrap(), [2147483647, 1, 1]);
    assert_eq!(
        dims_of(u32::MAX, &[0, 0]),
        Err(TopoError::NodesTooLarge(u32::MAX.into()))
    );
    assert_eq!(dims_of(1, &[0; 21]), Err(TopoError::TooManyFree(21)));
    assert_eq!(dims_of(1, &[0; 20]).unwrap(), [1; 20]);
}

#[test]
fn dims_create_errors_name_the_argument() {
    let e = dims_of(6, &[0, -2, -3]).unwrap_err();
    assert_eq!(e, TopoError::Dim("dims_create", 1, -2));
    assert!(
        e.to_string().starts_with("dims_create: dims[1] is -2;"),
        "{e}"
    );
    assert_eq!(e.class(), ErrorClass::Dims);
    // On an error dims is left as it was.
    let mut d = [4, 0, 0];
    assert!(dims_create(6, &mut d).is_err());
    assert_eq!(d, [4, 0, 0]);
    let e = dims_of(6, &[4, 0]).unwrap_err();
    assert_eq!(e, TopoError::Indivisible(6, 4));
    assert!(e.to_string().contains("multiply to 4"), "{e}");
    assert!(e.to_string().contains("nnodes = 6"), "{e}");
    assert_eq!(e.class(), ErrorClass::Dims);
}

#[test]
fn dims_create_is_balanced_and_fast_on_large_inputs() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    const PRIMES: [u64; 10] = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29];
    // Unoptimized (the CI's build without libfabric) a call takes ~12 ms: 3,000 of them were
    // 37 of that step's seconds. The release run keeps every case.
    let cases = if cfg!(debug_assertions) { 300 } else { 3000 };
    for _ in 0..cases {
        let mut n: u64 = 1;
        for _ in 0..rng.below(31) {
            let span = 1 + rng.below(10);
            let p = PRIMES[rng.below(span) as usize];
            if n * p > i32::MAX as u64 {
                break;
            }
            n *= p;
        }
        let nd = 2 + rng.below(12) as usize;
        let d = dims_of(n as u32, &vec![0; nd]).unwrap();
        assert_eq!(d.iter().map(|&x| x as u64).product::<u64>(), n, "{n} {d:?}");
        assert!(d.windows(2).all(|w| w[0] >= w[1]), "{n}: {d:?}");
    }
}

/// What MPICH 4.0.2 reported on Cartesian grids (`MPI_Cart_create` on `MPI_COMM_WORLD`
/// under `mpiexec.mpich -n size()`, reorder 0): per rank, what `MPI_Neighbor_alltoall`
/// left in each receive block when rank r sent `100 * r + i` in block i (-1: untouched),
/// so a value names the sender and its send block.
#[rustfmt::skip]
const MPICH_CART_ALLTOALL: &[(&[u32], &[bool], &[&[i32]])] = &[
    (&[3, 2], &[true, true], &[
        &[401, 200, 103, 102], &[501, 300, 3, 2], &[1, 400, 303, 302],
        &[101, 500, 203, 202], &[201, 0, 503, 502], &[301, 100, 403, 402],
    ]),
    (&[2, 1], &[true, true], &[&[101, 100, 3, 2], &[1, 0, 103, 102]]),
    (&[1, 1], &[true, true], &[&[3, 2, 1, 0]]),
    (&[2, 2], &[true, true], &[
        &[201, 200, 103, 102], &[301, 300, 3, 2], &[1, 0, 303, 302], &[101, 100, 203, 202],
    ]),
    (&[3, 2], &[false, false], &[
        &[-1, 200, -1, 102], &[-1, 300, 3, -1], &[1, 400, -1, 302],
        &[101, 500, 203, -1], &[201, -1, -1, 502], &[301, -1, 403, -1],
    ]),
    (&[3, 2], &[true, false], &[
        &[401, 200, -1, 102], &[501, 300, 3, -1], &[1, 400, -1, 302],
        &[101, 500, 203, -1], &[201, 0, -1, 502], &[301, 100, 403, -1],
    ]),
    (&[2], &[true], &[&[101, 100], &[1, 0]]),
    (&[1], &[true], &[&[1, 0]]),
    (&[3], &[true], &[&[201, 100], &[1, 200], &[101, 0]]),
    (&[4], &[true], &[&[301, 100], &[1, 200], &[101, 300], &[201, 0]]),
];

/// MPICH 4.0.2's `MPI_Cart_shift(comm, d, 1)` on the 3x2 grids: per rank and
/// dimension, (source, dest), -1 for `MPI_PROC_NULL`.
#[rustfmt::skip]
const MPICH_SHIFTS_3X2: &[(bool, bool, [[(i32, i32); 2]; 6])] = &[
    (true, true, [
        [(4, 2), (1, 1)], [(5, 3), (0, 0)], [(0, 4), (3, 3)],
        [(1, 5), (2, 2)], [(2, 0), (5, 5)], [(3, 1), (4, 4)],
    ]),
    (false, false, [
        [(-1, 2), (-1, 1)], [(-1, 3), (0, -1)], [(0, 4), (-1, 3)],
        [(1, 5), (2, -1)], [(2, -1), (-1, 5)], [(3, -1), (4, -1)],
    ]),
    (true, false, [
        [(4, 2), (-1, 1)], [(5, 3), (0, -1)], [(0, 4), (-1, 3)],
        [(1, 5), (2, -1)], [(2, 0), (-1, 5)], [(3, 1), (4, -1)],
    ]),
];

fn proc_null(r: Option<u32>) -> i32 {
    r.map_or(-1, |r| r as i32)
}

#[test]
fn cart_neighbor_lists_and_alltoall_blocks_match_mpich() {
    for &(dims, periods, want) in MPICH_CART_ALLTOALL {
        let cart = Cart::new(dims.to_vec(), periods.to_vec()).unwrap();
        assert_eq!(cart.size() as usize, want.len());
        let hoods: Vec<Neighborhood> = (0..cart.size())
            .map(|r| cart.neighbors(r).unwrap())
            .collect();
        let got = delivery(&hoods, RepeatOrder::ALLTOALL);
        for (r, (hood, blocks)) in hoods.iter().zip(&got).enumerate() {
            // Sources and destinations: per dimension, -1 then +1.
            assert_eq!(hood.sources, hood.dests);
            for d in 0..cart.ndims() {
                let (s, t) = cart.shift(r as u32, d, 1).unwrap();
                assert_eq!(&hood.sources[2 * d..2 * d + 2], &[s, t]);
            }
            let values: Vec<i32> = blocks
                .iter()
                .map(|b| b.map_or(-1, |(p, i)| 100 * p as i32 + i as i32))
                .collect();
            assert_eq!(values, want[r], "grid {dims:?} {periods:?}, rank {r}");
        }
    }
}

#[test]
fn cart_shift_matches_mpich() {
    for &(p0, p1, want) in MPICH_SHIFTS_3X2 {
        let cart = Cart::new(vec![3, 2], vec![p0, p1]).unwrap();
        for (r, dims) in want.iter().enumerate() {
            for (d, &(s, t)) in dims.iter().enumerate() {
                let (gs, gt) = cart.shift(r as u32, d, 1).unwrap();
                assert_eq!((proc_null(gs), proc_null(gt)), (s, t), "rank {r} dim {d}");
            }
        }
    }
    // MPICH: displacement 0 gives the rank itself; off the edge of a non-periodic
    // dimension gives MPI_PROC_NULL both ways.
    let line = Cart::new(vec![3, 1], vec![false, false]).unwrap();
    assert_eq!(line.shift(0, 0, 0).unwrap(), (Some(0), Some(0)));
    assert_eq!(line.shift(0, 0, 7).unwrap(), (None, None));
    assert_eq!(line.shift(1, 0, -1).unwrap(), (Some(2), Some(0)));
    let ring = Cart::new(vec![5], vec![true]).unwrap();
    assert_eq!(ring.shift(1, 0, 12).unwrap(), (Some(4), Some(3)));
    assert_eq!(ring.shift(1, 0, -3).unwrap(), (Some(4), Some(3)));
    // No overflow at the ends of the int range.
    assert_eq!(ring.shift(1, 0, i32::MIN).unwrap(), (Some(4), Some(3)));
    assert_eq!(ring.shift(1, 0, i32::MAX).unwrap(), (Some(4), Some(3)));
    let e = line.shift(0, 2, 1).unwrap_err();
    assert_eq!(e, TopoError::Direction(2, 2));
    assert!(e.to_string().contains("use 0..2"), "{e}");
    assert_eq!(line.shift(3, 0, 1).unwrap_err().class(), ErrorClass::Rank);
}

#[test]
fn repeated_neighbors_pair_up_as_in_mpich() {
    // 2 ranks, MPI_Dist_graph_create_adjacent with repeated edges and a repeated
    // self-edge; MPICH 4.0.2's receive blocks (sender 100 * r + send block).
    let hoods = [
        DistGraph::adjacent(2, &[1, 1], None, &[1, 1, 1], None).unwrap(),
        DistGraph::adjacent(2, &[0, 1, 0, 0, 1], None, &[0, 1, 1, 0], None).unwrap(),
    ]
    .map(|g| g.neighborhood());
    let values = |order| -> Vec<Vec<i32>> {
        delivery(&hoods, order)
            .iter()
            .map(|b| {
                b.iter()
                    .map(|x| x.map_or(-1, |(p, i)| 100 * p as i32 + i as i32))
                    .collect()
            })
            .collect()
    };
    // MPI_Neighbor_alltoall and MPI_Ineighbor_alltoall:
    assert_eq!(
        values(RepeatOrder::ALLTOALL),
        [vec![103, 100], vec![2, 102, 1, 0, 101]]
    );
    // MPI_Neighbor_alltoallv/w and their nonblocking forms:
    assert_eq!(
        values(RepeatOrder::ALLTOALLV),
        [vec![100, 103], vec![0, 101, 1, 2, 102]]
    );
    // MPI_Graph_create(2, {2, 6}, {1, 1, 0, 0, 1, 1}), MPI_Neighbor_alltoall.
    let g = Graph::new(vec![2, 6], vec![1, 1, 0, 0, 1, 1]).unwrap();
    let hoods: Vec<_> = (0..2).map(|r| g.neighborhood(r).unwrap()).collect();
    let got: Vec<Vec<i32>> = delivery(&hoods, RepeatOrder::ALLTOALL)
        .iter()
        .map(|b| {
            b.iter()
                .map(|x| x.map_or(-1, |(p, i)| 100 * p as i32 + i as i32))
                .collect()
        })
        .collect();
    assert_eq!(got, [vec![101, 100], vec![1, 0, 103, 102]]);
    // Periodic 1x1 grid and ring of 2, MPI_Neighbor_alltoallv: in order.
    let one = Cart::new(vec![1, 1], vec![true, true]).unwrap();
    let d = delivery(&[one.neighbors(0).unwrap()], RepeatOrder::ALLTOALLV);
    assert_eq!(
        d[0],
        [Some((0, 0)), Some((0, 1)), Some((0, 2)), Some((0, 3))]
    );
    let ring = Cart::new(vec![2], vec![true]).unwrap();
    let hoods: Vec<_> = (0..2).map(|r| ring.neighbors(r).unwrap()).collect();
    let d = delivery(&hoods, RepeatOrder::ALLTOALLV);
    assert_eq!(d[0], [Some((1, 0)), Some((1, 1))]);
    // The receive order that produces each pairing.
    let post: Vec<usize> = RepeatOrder::Reversed.recv_post_order(4).collect();
    assert_eq!(post, [3, 2, 1, 0]);
    let post: Vec<usize> = RepeatOrder::InOrder.recv_post_order(3).collect();
    assert_eq!(post, [0, 1, 2]);
}

#[test]
fn cartesian_blocks_pair_by_direction() {
    // Periodic 1x1 grid: what goes to the -1 neighbor (itself) arrives from its +1 side.
    let one = Cart::new(vec![1, 1], vec![true, true]).unwrap();
    let d = delivery(&[one.neighbors(0).unwrap()], RepeatOrder::Directional);
    assert_eq!(
        d[0],
        [Some((0, 1)), Some((0, 0)), Some((0, 3)), Some((0, 2))]
    );
    // Ring of 2: the other process is both neighbors.
    let ring = Cart::new(vec![2], vec![true]).unwrap();
    let hoods: Vec<_> = (0..2).map(|r| ring.neighbors(r).unwrap()).collect();
    let d = delivery(&hoods, RepeatOrder::Directional);
    assert_eq!(d[0], [Some((1, 1)), Some((1, 0))]);
    // Where no process repeats, direction and order agree (3x2, periodic in both).
    let grid = Cart::new(vec![3, 2], vec![true, false]).unwrap();
    let hoods: Vec<_> = (0..6).map(|r| grid.neighbors(r).unwrap()).collect();
    let by_dir = delivery(&hoods, RepeatOrder::Directional);
    assert_eq!(by_dir, delivery(&hoods, RepeatOrder::InOrder));
    assert!(by_dir[0].iter().any(|b| b.is_none()), "open dimension");
}

#[test]
fn cart_coords_and_rank_round_trip_on_random_grids() {
    let mut rng = Rng(42);
    for _ in 0..300 {
        let nd = rng.below(5) as usize;
        let dims: Vec<u32> = (0..nd).map(|_| 1 + rng.below(6) as u32).collect();
        let periods: Vec<bool> = (0..nd).map(|_| rng.below(2) == 1).collect();
        let cart = Cart::new(dims.clone(), periods.clone()).unwrap();
        assert_eq!(cart.size(), dims.iter().product::<u32>());
        let mut expect = vec![0u32; nd];
        for r in 0..cart.size() {
            let c = cart.coords(r).unwrap();
            // Row-major: the last dimension varies fastest.
            assert_eq!(c, expect, "grid {dims:?}, rank {r}");
            let ci: Vec<i32> = c.iter().map(|&x| x as i32).collect();
            assert_eq!(cart.rank(&ci).unwrap(), r);
            // Periodic dimensions wrap any coordinate.
            let wrapped: Vec<i32> = ci
                .iter()
                .zip(&dims)
                .zip(&periods)
                .map(|((&x, &d), &p)| {
                    if p {
                        x + d as i32 * (rng.below(7) as i32 - 3)
                    } else {
                        x
                    }
                })
                .collect();
            assert_eq!(cart.rank(&wrapped).unwrap(), r, "{dims:?} {wrapped:?}");
            for i in (0..nd).rev() {
                expect[i] += 1;
                if expect[i] < dims[i] {
                    break;
                }
                expect[i] = 0;
            }
        }
        assert!(cart.coords(cart.size()).is_err());
    }
}

#[test]
fn cart_rank_wraps_periodic_and_rejects_the_rest() {
    let cart = Cart::new(vec![3, 4], vec![false, true]).unwrap();
    assert_eq!(cart.rank(&[1, -1]).unwrap(), 7);
    assert_eq!(cart.rank(&[2, -9]).unwrap(), 11);
    assert_eq!(cart.rank(&[0, i32::MIN]).unwrap(), 0);
    let e = cart.rank(&[3, 0]).unwrap_err();
    assert_eq!(e, TopoError::Coord(0, 3, 3));
    assert!(e.to_string().contains("coords[0] is 3"), "{e}");
    assert!(cart.rank(&[-1, 0]).is_err());
    assert!(matches!(
        cart.rank(&[0]),
        Err(TopoError::Length(_, "coords", ..))
    ));
    // No dimensions: one process.
    let point = Cart::new(vec![], vec![]).unwrap();
    assert_eq!(point.size(), 1);
    assert_eq!(point.rank(&[]).unwrap(), 0);
    assert_eq!(point.coords(0).unwrap(), Vec::<u32>::new());
    assert_eq!(point.neighbors(0).unwrap(), Neighborhood::default());
    assert!(point.shift(0, 0, 1).is_err());
}

#[test]
fn cart_new_rejects_bad_grids() {
    let e = Cart::new(vec![2, 0], vec![false, false]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "cart_create: dims[1] is 0; every dimension needs at least one process"
    );
    let e = Cart::from_c(&[2, -1], &[0, 0]).unwrap_err();
    assert!(
        e.to_string().starts_with("cart_create: dims[1] is -1;"),
        "{e}"
    );
    let e = Cart::from_c(&[2, 3], &[1]).unwrap_err();
    assert!(
        e.to_string().contains("periods has 1 entries but needs 2"),
        "{e}"
    );
    assert_eq!(
        Cart::new(vec![65536, 65536], vec![false; 2]),
        Err(TopoError::Overflow("cart_create"))
    );
    let c = Cart::from_c(&[3, 2], &[0, 7]).unwrap();
    assert_eq!(c.periods(), [false, true]);
    assert_eq!(c.dims(), [3, 2]);
}

/// MPICH 4.0.2's `MPI_Cart_sub` on the periodic 3x2 grid of 6 ranks: per kept
/// dimension, per rank, (rank in the sub-grid, its size, rank 0 of it as a world rank).
#[rustfmt::skip]
const MPICH_SUB_3X2: [(usize, [(u32, u32, u32); 6]); 2] = [
    (0, [(0, 3, 0), (0, 3, 1), (1, 3, 0), (1, 3, 1), (2, 3, 0), (2, 3, 1)]),
    (1, [(0, 2, 0), (1, 2, 0), (0, 2, 2), (1, 2, 2), (0, 2, 4), (1, 2, 4)]),
];

/// Groups ranks as `MPI_Comm_split` would: by color, then by key (then rank).
fn split_all(cart: &Cart, remain: &[bool]) -> Vec<Option<(u32, u32, u32)>> {
    let splits: Vec<Split> = (0..cart.size())
        .map(|r| cart.sub_split(r, remain).unwrap())
        .collect();
    splits
        .iter()
        .map(|s| {
            let color = s.color?;
            let mut members: Vec<(u32, u32)> = (0..cart.size())
                .filter(|&q| splits[q as usize].color == Some(color))
                .map(|q| (splits[q as usize].key, q))
                .collect();
            members.sort();
            let rank = members.iter().position(|&(k, _)| k == s.key).unwrap();
            Some((rank as u32, members.len() as u32, members[0].1))
        })
        .collect()
}

#[test]
fn cart_sub_split_matches_mpich() {
    let cart = Cart::new(vec![3, 2], vec![true, true]).unwrap();
    for (kept, want) in MPICH_SUB_3X2 {
        let mut remain = [false; 2];
        remain[kept] = true;
        let got = split_all(&cart, &remain);
        assert_eq!(got, want.map(Some), "keeping dimension {kept}");
        let sub = cart.sub(&remain).unwrap();
        assert_eq!(sub.dims(), [cart.dims()[kept]]);
        assert_eq!(sub.periods(), [true]);
    }
    // Nothing kept: MPICH gives rank 0 a 0-dimensional grid, the others
    // MPI_COMM_NULL.
    let got = split_all(&cart, &[false, false]);
    assert_eq!(got[0], Some((0, 1, 0)));
    assert!(got[1..].iter().all(Option::is_none));
    assert_eq!(cart.sub(&[false, false]).unwrap().size(), 1);
    assert!(matches!(
        cart.sub_split(0, &[true]),
        Err(TopoError::Length(_, "remain_dims", ..))
    ));
}

#[test]
fn cart_sub_split_is_the_sub_grid_on_random_grids() {
    let mut rng = Rng(7);
    for _ in 0..200 {
        let nd = 1 + rng.below(4) as usize;
        let dims: Vec<u32> = (0..nd).map(|_| 1 + rng.below(4) as u32).collect();
        let periods: Vec<bool> = (0..nd).map(|_| rng.below(2) == 1).collect();
        let remain: Vec<bool> = (0..nd).map(|_| rng.below(2) == 1).collect();
        if !remain.iter().any(|&k| k) {
            continue;
        }
        let cart = Cart::new(dims, periods).unwrap();
        let sub = cart.sub(&remain).unwrap();
        let groups = split_all(&cart, &remain);
        for r in 0..cart.size() {
            let (sr, ssize, _) = groups[r as usize].unwrap();
            assert_eq!(ssize, sub.size());
            // The rank in the sub-grid has the kept coordinates.
            let kept: Vec<u32> = cart
                .coords(r)
                .unwrap()
                .into_iter()
                .zip(&remain)
                .filter(|(_, &k)| k)
                .map(|(c, _)| c)
                .collect();
            assert_eq!(sub.coords(sr).unwrap(), kept);
            // Members share the dropped coordinates.
            let leader = groups[r as usize].unwrap().2;
            let (a, b) = (cart.coords(r).unwrap(), cart.coords(leader).unwrap());
            for d in 0..cart.ndims() {
                if !remain[d] {
                    assert_eq!(a[d], b[d]);
                }
            }
        }
    }
}

#[test]
fn maps_are_the_identity() {
    let cart = Cart::new(vec![3, 1], vec![false, false]).unwrap();
    let got: Vec<_> = (0..4).map(|r| cart.map(4, r).unwrap()).collect();
    assert_eq!(got, [Some(0), Some(1), Some(2), None]);
    let e = Cart::new(vec![3, 2], vec![false; 2])
        .unwrap()
        .map(4, 0)
        .unwrap_err();
    assert_eq!(e.class(), ErrorClass::Dims);
    assert!(e
        .to_string()
        .contains("needs 6 processes but the communicator has 4"));
    assert!(cart.fits(3).is_ok() && cart.fits(2).is_err());
    assert_eq!(cart.map(4, 4).unwrap_err().class(), ErrorClass::Rank);
    // MPI_Cart_map with no dimensions: rank 0 only.
    let point = Cart::new(vec![], vec![]).unwrap();
    assert_eq!(point.map(4, 0).unwrap(), Some(0));
    assert_eq!(point.map(4, 3).unwrap(), None);
    let g = Graph::new(vec![1, 2, 3], vec![1, 2, 0]).unwrap();
    let got: Vec<_> = (0..4).map(|r| g.map(4, r).unwrap()).collect();
    assert_eq!(got, [Some(0), Some(1), Some(2), None]);
    assert_eq!(g.map(2, 0).unwrap_err().class(), ErrorClass::Arg);
    assert!(g.fits(3).is_ok() && g.fits(2).is_err());
}

#[test]
fn graph_neighbors_and_validation() {
    // The ring of MPI's example, with a self-loop and a repeated edge.
    let g = Graph::new(vec![2, 3, 6, 6], vec![1, 3, 0, 2, 2, 1]).unwrap();
    assert_eq!((g.nnodes(), g.nedges()), (4, 6));
    assert_eq!(g.neighbors(0).unwrap(), [1, 3]);
    assert_eq!(g.neighbors(2).unwrap(), [2, 2, 1]);
    assert_eq!(g.neighbors(3).unwrap(), [] as [i32; 0]);
    assert_eq!(g.neighbors_count(2).unwrap(), 3);
    let h = g.neighborhood(2).unwrap();
    assert_eq!(h.sources, [Some(2), Some(2), Some(1)]);
    assert_eq!(h.sources, h.dests);
    let e = g.neighbors_count(4).unwrap_err();
    assert_eq!(e.class(), ErrorClass::Rank);
    assert!(
        e.to_string().starts_with("graph_neighbors_count: rank 4"),
        "{e}"
    );
    assert_eq!(
        (g.index(), g.edges()),
        (&[2, 3, 6, 6][..], &[1, 3, 0, 2, 2, 1][..])
    );

    let e = Graph::new(vec![1, 0, 2], vec![1, 0]).unwrap_err();
    assert_eq!(e, TopoError::Index(1, 0, 1));
    assert!(
        e.to_string()
            .contains("index[1] is 0, less than index[0] = 1"),
        "{e}"
    );
    let e = Graph::new(vec![-1, 2, 3], vec![1, 0, 0]).unwrap_err();
    assert_eq!(e, TopoError::Index(0, -1, 0));
    let e = Graph::new(vec![1, 2, 3], vec![1, 3, 0]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "graph_create: edges[1] is 3, but there are 3 nodes; use 0..3"
    );
    assert!(Graph::new(vec![1, 2, 3], vec![1, -1, 0]).is_err());
    let e = Graph::new(vec![1, 2], vec![1]).unwrap_err();
    assert!(
        e.to_string().contains("edges has 1 entries but needs 2"),
        "{e}"
    );
    let empty = Graph::new(vec![], vec![]).unwrap();
    assert_eq!(empty.nnodes(), 0);
    assert!(empty.neighbors(0).is_err());
}

/// `MPI_Dist_graph_create`'s arguments of the 4-rank test program: every rank names
/// edges in a scrambled order, edges it is no end of, a repeated edge (1 -> 0), a
/// self-edge (3 -> 3), and a source of degree 0. Weights are 100 * source + ...
#[rustfmt::skip]
const SCRAMBLED: [(&[i32], &[i32], &[i32], &[i32]); 4] = [
    (&[2, 0, 3], &[2, 1, 2], &[1, 3, 2, 0, 1], &[201, 203, 2, 300, 301]),
    (&[1, 0, 1, 3], &[1, 1, 1, 1], &[0, 1, 0, 3], &[100, 1, 101, 333]),
    (&[0, 2], &[1, 2], &[3, 0, 1], &[3, 200, 211]),
    (&[1], &[0], &[], &[]),
];

fn scrambled(weighted: bool) -> Vec<EdgeList<'static>> {
    SCRAMBLED
        .iter()
        .map(|&(sources, degrees, destinations, w)| EdgeList {
            sources,
            degrees,
            destinations,
            weights: weighted.then_some(w),
        })
        .collect()
}

/// What MPICH 4.0.2's `MPI_Dist_graph_neighbors` reported for `SCRAMBLED` (weighted)
/// over 75 runs: per rank, every (sources, source weights) and (destinations,
/// destination weights) seen. MPICH appends one run per contributing rank as its
/// messages arrive, so the runs come in varying orders.
#[rustfmt::skip]
const MPICH_SCRAMBLED_IN: [&[(&[u32], &[i32])]; 4] = [
    &[(&[3, 1, 1, 2], &[300, 100, 101, 200]), (&[2, 3, 1, 1], &[200, 300, 100, 101]),
      (&[2, 1, 1, 3], &[200, 100, 101, 300]), (&[3, 2, 1, 1], &[300, 200, 100, 101])],
    &[(&[0, 2, 3, 2], &[1, 201, 301, 211]), (&[0, 2, 2, 3], &[1, 211, 201, 301]),
      (&[2, 0, 2, 3], &[211, 1, 201, 301])],
    &[(&[0], &[2])],
    &[(&[0, 3, 2], &[3, 333, 203]), (&[3, 2, 0], &[333, 203, 3]), (&[2, 0, 3], &[203, 3, 333]),
      (&[3, 0, 2], &[333, 3, 203]), (&[0, 2, 3], &[3, 203, 333]), (&[2, 3, 0], &[203, 333, 3])],
];
#[rustfmt::skip]
const MPICH_SCRAMBLED_OUT: [&[(&[u32], &[i32])]; 4] = [
    &[(&[2, 1, 3], &[2, 1, 3]), (&[3, 2, 1], &[3, 2, 1]), (&[2, 3, 1], &[2, 3, 1])],
    &[(&[0, 0], &[100, 101])],
    &[(&[0, 1, 1, 3], &[200, 211, 201, 203]), (&[1, 3, 0, 1], &[201, 203, 200, 211])],
    &[(&[3, 0, 1], &[333, 300, 301]), (&[0, 1, 3], &[300, 301, 333])],
];

/// Splits `list` into the runs each contributing rank added (contributors in rank
/// order, as `dist_graph_create` appends them).
fn runs(list: &[(u32, i32)], all: &[EdgeList], me: u32, incoming: bool) -> Vec<Vec<(u32, i32)>> {
    let mut out = Vec::new();
    let mut at = 0;
    for l in all {
        let n = l
            .edges()
            .filter(|&(s, d, _)| if incoming { d == me } else { s == me })
            .count();
        if n > 0 {
            out.push(list[at..at + n].to_vec());
        }
        at += n;
    }
    assert_eq!(at, list.len());
    out
}

/// Whether `seen` is a concatenation of `runs` in some order.
fn is_run_permutation(seen: &[(u32, i32)], runs: &[Vec<(u32, i32)>]) -> bool {
    if runs.is_empty() {
        return seen.is_empty();
    }
    runs.iter().enumerate().any(|(i, r)| {
        seen.starts_with(r) && {
            let mut rest = runs.to_vec();
            rest.remove(i);
            is_run_permutation(&seen[r.len()..], &rest)
        }
    })
}

fn zip_w(ranks: &[u32], w: &[i32]) -> Vec<(u32, i32)> {
    ranks.iter().copied().zip(w.iter().copied()).collect()
}

#[test]
fn dist_graph_create_orders_as_mpich() {
    let all = scrambled(true);
    let graphs = dist_graph_create(&all).unwrap();
    #[rustfmt::skip]
    let want: [(&[u32], &[i32], &[u32], &[i32]); 4] = [
        (&[3, 1, 1, 2], &[300, 100, 101, 200], &[2, 1, 3], &[2, 1, 3]),
        (&[2, 3, 0, 2], &[201, 301, 1, 211], &[0, 0], &[100, 101]),
        (&[0], &[2], &[1, 3, 0, 1], &[201, 203, 200, 211]),
        (&[2, 3, 0], &[203, 333, 3], &[0, 1, 3], &[300, 301, 333]),
    ];
    for (me, (g, w)) in graphs.iter().zip(want).enumerate() {
        assert_eq!(g.sources, w.0, "rank {me}");
        assert_eq!(g.source_weights.as_deref(), Some(w.1), "rank {me}");
        assert_eq!(g.dests, w.2, "rank {me}");
        assert_eq!(g.dest_weights.as_deref(), Some(w.3), "rank {me}");
        assert!(g.weighted());
        assert_eq!(*g, DistGraph::from_edges(me as u32, &all).unwrap());
        let (me, ins) = (me as u32, zip_w(&g.sources, w.1));
        let outs = zip_w(&g.dests, w.3);
        // Every order MPICH reported is the same runs, each in argument order.
        let (rin, rout) = (runs(&ins, &all, me, true), runs(&outs, &all, me, false));
        for (s, sw) in MPICH_SCRAMBLED_IN[me as usize] {
            assert!(
                is_run_permutation(&zip_w(s, sw), &rin),
                "rank {me} in {s:?}"
            );
        }
        for (d, dw) in MPICH_SCRAMBLED_OUT[me as usize] {
            assert!(
                is_run_permutation(&zip_w(d, dw), &rout),
                "rank {me} out {d:?}"
            );
        }
    }
    // The rank-order answer is one MPICH gave where the runs arrived in rank order.
    assert!(MPICH_SCRAMBLED_IN[0].contains(&(&[3, 1, 1, 2][..], &[300, 100, 101, 200][..])));
    assert!(MPICH_SCRAMBLED_OUT[2].contains(&(&[1, 3, 0, 1][..], &[201, 203, 200, 211][..])));
}

#[test]
fn dist_graph_weights_follow_the_own_call() {
    let graphs = dist_graph_create(&scrambled(false)).unwrap();
    assert!(graphs
        .iter()
        .all(|g| !g.weighted() && g.dest_weights.as_deref().is_none()));
    assert_eq!(graphs[1].sources, [2, 3, 0, 2]);
    assert_eq!((graphs[1].sources.len(), graphs[1].dests.len()), (4, 2));
    let h = graphs[3].neighborhood();
    assert_eq!(h.sources, [Some(2), Some(3), Some(0)]);
    assert_eq!(h.dests, [Some(0), Some(1), Some(3)]);
    // Rank 0 passes weights, the others MPI_UNWEIGHTED: rank 0's lists are weighted
    // and the other calls' edges weigh 0 (MPICH).
    let mut mixed = scrambled(false);
    mixed[0].weights = Some(SCRAMBLED[0].3);
    let g0 = DistGraph::from_edges(0, &mixed).unwrap();
    assert_eq!(g0.source_weights.as_deref(), Some(&[300, 0, 0, 0][..]));
    assert!(!DistGraph::from_edges(1, &mixed).unwrap().weighted());
}

#[test]
fn dist_graph_validation() {
    let mut all = scrambled(true);
    all[2].destinations = &[3, 4, 1];
    let e = dist_graph_create(&all).unwrap_err();
    assert_eq!(
        e.to_string(),
        "dist_graph_create: rank 2's destinations[1] is 4, but there are 4 processes; use 0..4"
    );
    let mut all = scrambled(true);
    all[1].degrees = &[1, -1, 1, 1];
    assert_eq!(
        dist_graph_create(&all).unwrap_err(),
        TopoError::Degree(1, 1, -1)
    );
    let mut all = scrambled(true);
    all[0].weights = Some(&[1, 2]);
    assert!(DistGraph::from_edges(3, &all)
        .unwrap_err()
        .to_string()
        .contains("weights has 2 entries but needs 5"));
    let all = scrambled(false);
    assert_eq!(
        DistGraph::from_edges(4, &all).unwrap_err().class(),
        ErrorClass::Rank
    );

    let g = DistGraph::adjacent(3, &[2, 0], Some(&[5, 6]), &[1], Some(&[7])).unwrap();
    assert_eq!((&g.sources[..], &g.dests[..]), (&[2, 0][..], &[1][..]));
    assert_eq!(
        (g.source_weights.as_deref(), g.dest_weights.as_deref()),
        (Some(&[5, 6][..]), Some(&[7][..]))
    );
    let e = DistGraph::adjacent(3, &[2], None, &[1], Some(&[7])).unwrap_err();
    assert_eq!(
        (e.clone(), e.class()),
        (TopoError::WeightsMixed, ErrorClass::Topology)
    );
    let e = DistGraph::adjacent(3, &[3], None, &[1], None).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("dist_graph_create_adjacent: sources[0] is 3"),
        "{e}"
    );
    let e = DistGraph::adjacent(3, &[1], Some(&[]), &[1], Some(&[1])).unwrap_err();
    assert!(
        e.to_string()
            .contains("sourceweights has 0 entries but needs 1"),
        "{e}"
    );
}
