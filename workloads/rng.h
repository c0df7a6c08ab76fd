// A small, fast, deterministic generator: the same seed gives the same operation sequence on every
// allocator, and its cost inside measured loops is a few instructions.
#pragma once

#include <cstdint>

namespace allocmark::workloads {

class Rng {
 public:
  explicit Rng(uint64_t seed = 1) : state_(seed) {}
  uint64_t next() {  // splitmix64
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n); n > 0.
  uint64_t below(uint64_t n) { return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64); }
  double uniform() { return (next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

}  // namespace allocmark::workloads
