// Per-instruction-set bodies of attention, each compiled in its own translation unit with its own target
// flags; dispatch.cpp calls them once the probe says the CPU has the ISA (tests call them directly).
#pragma once

#include "attention/attention.h"

namespace spark::kernels {

// Whether the vector bodies take this head size (their value loads are whole vectors of head_dim).
bool attention_avx2_supports(int head_dim);
bool attention_avx512_supports(int head_dim);

void attention_avx2(const AttentionShape& shape, std::span<const AttentionTask> tasks, ThreadPool& pool);
void attention_avx512(const AttentionShape& shape, std::span<const AttentionTask> tasks, ThreadPool& pool);

}  // namespace spark::kernels
