// A cell's identity in the results model (model_identity.cpp): the interning of CellIdentity, and
// which records are the same cell (a copy read twice, a retry that supersedes an attempt, a
// duplicate line); a record written without a key gets its cell's (record::Cell::key). Private to
// the model's files (model*.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "harness/results/model.h"

namespace allocmark::results::detail {

// FNV-1a of `text`, and its first `digits` hex digits (a short tag that tells long values apart).
std::uint64_t fnv1a(std::string_view text);
std::string fnv1a_hex(std::string_view text, std::size_t digits);

}  // namespace allocmark::results::detail
