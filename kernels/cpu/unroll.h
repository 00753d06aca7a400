// Loops over a register tile (compile-time trip counts: rows x vectors of accumulators) are marked with
// SPARK_UNROLL. GCC 12 otherwise unrolls them only after scalar replacement of aggregates has run, so
// the accumulator array is not split into registers: it is kept on the stack with a store per FMA, or
// copied between registers around every vpdpbusd, which halves a tile's throughput. Unrolled early,
// every accumulator stays in its register.
#pragma once

#define SPARK_UNROLL _Pragma("GCC unroll 16")
