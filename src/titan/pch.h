// Precompiled header: the heavy LibTorch includes every translation unit needs.
// Keep only stable third-party headers here; project headers change too often.
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>
