// memory_check.h — refusing a run the machine cannot hold, before any arena is allocated.
//
// Every arena's size follows from the config and the batch (gpt.h, trainer.h), so what a run
// needs is known before it allocates: the state (weights, AdamW's two moments, a gradient per
// model replica) and the activations with their backward scratch (per replica, for its rows).
// That is compared with what the kernel says a new process can still get without swapping
// (MemAvailable in /proc/meminfo, or a container's cgroup limit when that is lower). A run that
// does not fit is refused with the numbers and a batch size that would fit, instead of being
// killed by the kernel's OOM killer later. The check leaves 10 % of MemAvailable for
// everything the arenas do not count (the data, the checkpoint buffer, the libraries, and the
// products' partial sums of split terms, at most kSplitScratch floats, 64 MiB, per thread that
// issues products, matmul_split.h; and our sgemm's packed block, 1 MiB per thread, gemm.h).
// Each replica adds a gradient arena: train checks one model before `--batch_threads=auto`
// chooses, and auto then considers only the replicas that fit (memory_fits,
// lib/train/batch_threads.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "lib/model/config.h"

namespace hg {

// The floats gpt_build's activation and backward-scratch arenas hold for (max_B, max_T) under
// `plan`, computed without allocating: with flash attention O(T) a row for attention's state,
// with materialized attention T² per (b, h) in each block that keeps it and in the scratch; what
// the plan recomputes counted once, not per block. Defined in gpt.cpp, beside the layout it
// measures.
size_t gpt_activation_floats(const GPTConfig& config, int max_B, int max_T, ActivationPlan plan = {});
// The bf16 numbers of a bf16 run's activation copies (gpt_use_bf16), likewise.
size_t gpt_bf16_numbers(const GPTConfig& config, int max_B, int max_T, ActivationPlan plan = {});

struct MemoryNeed {
    double state_bytes = 0;       // weights, moments, gradients
    double activation_bytes = 0;  // activations and backward scratch, every replica
    // What it was computed from, for finding a batch that fits.
    GPTConfig config;
    int batch_size = 0, T = 0, replicas = 1, state_copies = 1;
    bool with_bf16 = false;  // a bf16 run: its copies counted too
    ActivationPlan plan;     // which attention runs and what the forward keeps
    double total() const { return state_bytes + activation_bytes; }
};

// What a model of `config` needs for batches of (batch_size, T) split over `replicas` model
// replicas (batch_threads), with `state_copies` parameter-sized arenas besides the replicas'
// gradients (3 for training: weights and two moments; 1 for inference: the weights). With bf16,
// the bf16 copies too: 2 bytes per parameter and per number of gpt_bf16_numbers per replica.
// The activations as `plan` lays them out (gpt_activation_floats).
// hg::Error when the sizes are beyond any machine (a product that would overflow).
MemoryNeed memory_need(const GPTConfig& config, int batch_size, int T, int replicas, int state_copies,
                       bool with_bf16 = false, ActivationPlan plan = {});

// MemAvailable from /proc/meminfo, in bytes, or less when the cgroup's memory.max leaves less
// (a container's limit); nothing when neither can be read.
std::optional<double> available_memory_bytes();

// Whether `need` fits in `available` bytes: need.total() within 90 % of it.
bool memory_fits(const MemoryNeed& need, double available);

// hg::Error when need.total() exceeds 90 % of `available`, e.g. "needs 31.2 GiB of
// activations for batch 64 × 1024 (plus 1.4 GiB of weights and optimizer state); 22.9 GiB
// available; try --batch_size=40". `what` names the flag that sets the batch ("--batch_size").
void check_memory(const MemoryNeed& need, double available, const std::string& batch_flag = "--batch_size");

// check_memory against available_memory_bytes(), when /proc/meminfo can be read.
void check_memory_available(const MemoryNeed& need, const std::string& batch_flag = "--batch_size");

}  // namespace hg
