// Memory figures for the step line. On a GPU, CUDA's caching allocator's peaks (TorchTitan's
// DeviceMemoryMonitor); on the CPU, the peak of live tensor bytes (a counting allocator around
// LibTorch's CPU allocator, the counterpart of max_active) and the process's peak resident set
// (VmHWM) as the reserved bytes. The counting allocator also sorts live CPU bytes by what they
// are for (memory snapshots): each allocation is counted under its thread's MemoryTag at the
// time, and retag_memory() moves a tensor's bytes to another category later.
#pragma once

#include <torch/torch.h>

#include <array>
#include <cstdint>
#include <optional>

namespace titan::platform {

/// Routes every later CPU tensor allocation through a counting allocator. Idempotent; call
/// before building the model. Tensors allocated earlier are not counted. Test hook:
/// TITAN_TEST_MEMORY_LIMIT_BYTES=<n> refuses an allocation that would take the live bytes
/// over n, as a device that size would.
void enable_memory_counting();

/// Bytes of CPU tensors alive now (0 before enable_memory_counting()).
int64_t live_tensor_bytes();
/// Highest live_tensor_bytes() since the last reset_peak_tensor_bytes().
int64_t peak_tensor_bytes();
/// Starts a new peak window at the current live bytes.
void reset_peak_tensor_bytes();

/// What live CPU bytes are for.
enum class MemoryCategory : uint8_t {
  Other,                // data batches, scalars, anything untagged
  Parameters,           // the rank's (sharded) parameters
  Gradients,            // their gradients
  OptimizerState,       // the optimizer's moments and its step's temporaries
  Activations,          // a block's forward (saved for backward), or outside the blocks
  ActivationGradients,  // a block's backward temporaries, or outside the blocks
  Communication,        // collective buffers, FSDP's gathered (unsharded) parameters
  Loss,                 // the final norm, logits, loss and their gradients
};
inline constexpr int kMemoryCategories = 8;
static_assert(static_cast<int>(MemoryCategory::Loss) + 1 == kMemoryCategories);
/// The category's index in a CategoryBytes.
inline size_t index_of(MemoryCategory c) { return static_cast<size_t>(c); }
/// "parameters", "gradients", "optimizer_state", ... (snake case).
const char* memory_category_name(MemoryCategory c);

/// The category later CPU allocations of a thread count under, and for a block's activations
/// and activation gradients the block's layer id (-1: none). Threads titan does not tag
/// (Gloo's, OpenMP's workers) count as Other.
struct MemoryTag {
  MemoryCategory category = MemoryCategory::Other;
  int32_t block = -1;
};

MemoryTag current_memory_tag();
/// Sets this thread's tag (the pieces that open and close in separate calls: block_trace.h).
void set_memory_tag(MemoryTag tag);

/// This thread's allocations count under `category` (and `block`) while it lives.
class MemoryScope {
 public:
  explicit MemoryScope(MemoryCategory category, int32_t block = -1)
      : saved_(current_memory_tag()) {
    set_memory_tag({category, block});
  }
  ~MemoryScope() { set_memory_tag(saved_); }
  MemoryScope(const MemoryScope&) = delete;
  MemoryScope& operator=(const MemoryScope&) = delete;

 private:
  MemoryTag saved_;
};

/// Counts the storage of `t` under `category` from now on (no-op for a tensor the counting
/// allocator did not make, or an undefined one).
void retag_memory(const torch::Tensor& t, MemoryCategory category);

using CategoryBytes = std::array<int64_t, kMemoryCategories>;
/// Bytes of CPU tensors alive now, per category.
CategoryBytes live_bytes_by_category();

/// Sees every counted allocation, free and retag while installed (memory snapshots). `id`
/// names one allocation for its life. Calls come from any thread, one at a time.
class MemoryObserver {
 public:
  virtual ~MemoryObserver() = default;
  virtual void allocated(uint64_t id, int64_t bytes, MemoryTag tag) = 0;
  virtual void freed(uint64_t id, int64_t bytes, MemoryTag tag) = 0;
  virtual void retagged(uint64_t id, int64_t bytes, MemoryCategory from, MemoryCategory to) = 0;
};
/// Installs `observer` (nullptr: none); it must outlive its installation.
void set_memory_observer(MemoryObserver* observer);

/// A CPU allocation the system refused (thrown as c10::OutOfMemoryError), and what was alive.
struct AllocationFailure {
  int64_t requested = 0;
  CategoryBytes live{};
};
/// The latest refused allocation since the start, if any.
std::optional<AllocationFailure> last_allocation_failure();

/// Peak resident set size of this process in bytes (0 if unknown).
int64_t peak_rss_bytes();

struct MemoryPeaks {
  int64_t max_active = 0;    // bytes of live tensors at the peak
  int64_t max_reserved = 0;  // bytes the allocator held from the system at the peak
  int64_t alloc_retries = 0; // allocations that had to free cached blocks and retry (all run)
  int64_t ooms = 0;          // CUDA: out-of-memory errors the allocator raised
  int64_t system_allocs = 0; // blocks taken from the system (cudaMalloc; CPU: LibTorch's
                             // allocator) since the last reset
};

/// Compile mode's planned buffers (allocation_cache.h): from now on, freed CPU storage is
/// kept for later allocations of its size class instead of going back to the system.
/// Idempotent; turns memory counting on.
void enable_allocation_cache();
/// Returns the cached blocks to the system (no-op without the cache), as
/// torch.cuda.empty_cache() does on a GPU.
void release_cached_memory();
/// Bytes the cache holds now (0 without it).
int64_t cached_memory_bytes();

/// Peaks on `device` since the last reset_memory_peaks(device). On the CPU, max_reserved is
/// the process's peak RSS over its whole life.
MemoryPeaks memory_peaks(const torch::Device& device);
void reset_memory_peaks(const torch::Device& device);

}  // namespace titan::platform
