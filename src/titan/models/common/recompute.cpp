#include "titan/models/common/recompute.h"

namespace titan::models {
namespace {

thread_local bool recomputing = false;

}  // namespace

bool is_recomputing() { return recomputing; }

RecomputeScope::RecomputeScope() : previous_(recomputing) { recomputing = true; }

RecomputeScope::~RecomputeScope() { recomputing = previous_; }

}  // namespace titan::models
