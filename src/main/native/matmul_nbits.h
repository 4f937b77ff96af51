// dev.ortserve.MatMulNBits (matmul_nbits.cc), added to the library's domain by RegisterCustomOps (ortserve_ops.cc).
#pragma once

struct OrtCustomOp;

namespace ortserve {
OrtCustomOp* matmul_nbits_op();
}
