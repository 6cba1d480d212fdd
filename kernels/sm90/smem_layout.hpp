// Shared-memory operands of wgmma in the canonical K-major layout without swizzle (PTX ISA,
// "Matrix Descriptor Format" and "Shared Memory Matrix Layout"), host and device.
//
// An operand of R rows (m for A, n for B) by K elements, each row's K bytes in order, is cut into
// core matrices of 8 rows x 16 bytes, each core matrix 128 contiguous bytes (row after row):
//   byte of (row, kb) = (row % 8) * 16 + (kb % 16) + (kb / 16) * LBO + (row / 8) * SBO
// LBO ("leading dimension byte offset") steps to the next core matrix along K, SBO ("stride") to
// the next 8 rows. The core matrices of 8 rows sit side by side along K: LBO = 128 and
// SBO = 128 * K_bytes / 16, so 8 rows of the operand are 8 * K_bytes contiguous bytes, and a
// 16-byte piece of a row is one aligned 16-byte store (cp.async).
// The layout the wgmma probes verified on an H100 (kernels/wgmma_probe.cu).
#pragma once

#include <cstdint>

#include "emulation/format.hpp"  // LOWBIT_HD

namespace lowbit::kernels::sm90 {

struct KMajorLayout {
  int k_bytes = 0;  // bytes of one row along K (a multiple of 16)

  static constexpr int kCoreRows = 8;
  static constexpr int kCoreRowBytes = 16;
  static constexpr int kLeadingByteOffset = kCoreRows * kCoreRowBytes;  // 128

  LOWBIT_HD constexpr int stride_byte_offset() const { return k_bytes / kCoreRowBytes * kLeadingByteOffset; }
  LOWBIT_HD constexpr int offset(int row, int k_byte) const {
    return row % kCoreRows * kCoreRowBytes + k_byte % kCoreRowBytes + k_byte / kCoreRowBytes * kLeadingByteOffset +
           row / kCoreRows * stride_byte_offset();
  }
  // The byte offset of the k-slice `step` of `slice_bytes` bytes (a wgmma's k): whole core matrices.
  LOWBIT_HD constexpr int slice_offset(int step, int slice_bytes) const {
    return step * (slice_bytes / kCoreRowBytes) * kLeadingByteOffset;
  }
  // The byte offset of row `row` (a multiple of 8): a warpgroup's 64 rows of a larger A tile.
  LOWBIT_HD constexpr int row_offset(int row) const { return row / kCoreRows * stride_byte_offset(); }
  // Piece p of 16 bytes of a tile of `rows` rows: the order in which consecutive pieces land on
  // consecutive 16-byte slots (conflict-free stores): piece -> (row, k_byte).
  LOWBIT_HD constexpr int piece_row(int piece) const {
    return piece / (kCoreRows * pieces_per_row()) * kCoreRows + piece % kCoreRows;
  }
  LOWBIT_HD constexpr int piece_k_byte(int piece) const {
    return piece / kCoreRows % pieces_per_row() * kCoreRowBytes;
  }
  LOWBIT_HD constexpr int pieces_per_row() const { return k_bytes / kCoreRowBytes; }
};

}  // namespace lowbit::kernels::sm90
