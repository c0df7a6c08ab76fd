// The one spelling of quantities in text, below everything (workloads, topology files, the
// harness's flags): sizes such as "64M" and numbers printed so that they read back exactly.
// No dependencies beyond the standard library, so any floor may include it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace allocmark::units {

// Parses "64", "64K", "1.5M", "2G" (binary multiples; also B, KiB, MiB, GiB, k); throws
// std::invalid_argument naming the text.
uint64_t parse_bytes(std::string_view text);

// A byte count in its shortest exact form with a binary suffix: 67108864 -> "64M", 1572864 ->
// "1536K", 1000 -> "1000". parse_bytes(format_bytes(n)) == n for every n.
std::string format_bytes(uint64_t bytes);

// The shortest text that reads back as exactly `value` (std::to_chars): 0.1234567 stays
// "0.1234567", 1.0 is "1".
std::string format_number(double value);

}  // namespace allocmark::units
