#include "units/units.h"

#include <gtest/gtest.h>

#include <stdexcept>

using namespace allocmark::units;

TEST(Units, BytesReadWithBinarySuffixes) {
  EXPECT_EQ(parse_bytes("4096"), 4096u);
  EXPECT_EQ(parse_bytes("64M"), 67108864u);
  EXPECT_EQ(parse_bytes("1.5M"), 1572864u);
  EXPECT_THROW(parse_bytes("12Q"), std::invalid_argument);
}

TEST(Units, BytesPrintInTheirShortestExactFormAndReadBack) {
  EXPECT_EQ(format_bytes(67108864), "64M");
  EXPECT_EQ(format_bytes(1572864), "1536K");
  EXPECT_EQ(format_bytes(1000), "1000");
  EXPECT_EQ(format_bytes(0), "0");
  EXPECT_EQ(format_bytes(4ull << 40), "4096G");
  for (uint64_t n : {0ull, 1ull, 4095ull, 65536ull, 3ull << 30, (1ull << 52) + 1}) EXPECT_EQ(parse_bytes(format_bytes(n)), n);
}

TEST(Units, NumbersPrintSoThatTheyReadBackExactly) {
  EXPECT_EQ(format_number(0.1234567), "0.1234567");
  EXPECT_EQ(format_number(1.0), "1");
  EXPECT_EQ(format_number(0.05), "0.05");
  EXPECT_EQ(std::stod(format_number(1.0 / 3)), 1.0 / 3);
}
