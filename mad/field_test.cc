#include "mad/field.h"

#include <gtest/gtest.h>

#include "mad/attr/linear_forwarding_table.h"
#include "mad/attr/node_description.h"
#include "mad/attr/node_info.h"
#include "mad/attr/notice.h"
#include "mad/attr/path_record.h"
#include "mad/mad.h"

namespace ibsm::mad {
namespace {

TEST(FieldTest, BitsAreBigEndianFromTheMostSignificantBitOfByteZero) {
  std::array<uint8_t, 8> b{};
  SetBits(b, 0, 1, 1);
  EXPECT_EQ(b[0], 0x80);
  SetBits(b, 4, 12, 0xABC);
  EXPECT_EQ(b[0], 0x8A);
  EXPECT_EQ(b[1], 0xBC);
  EXPECT_EQ(GetBits(b, 4, 12), 0xABCu);
  SetBits(b, 0, 64, 0x0102030405060708ull);
  EXPECT_EQ(GetBits(b, 0, 64), 0x0102030405060708ull);
  EXPECT_EQ(b[7], 0x08);
}

TEST(FieldTest, SetBitsLeavesNeighbouringBitsAlone) {
  std::array<uint8_t, 2> b{0xFF, 0xFF};
  SetBits(b, 3, 6, 0);
  EXPECT_EQ(b[0], 0xE0);
  EXPECT_EQ(b[1], 0x7F);
}

// The byte-aligned fast path must agree with the general bit loop: compare every aligned
// (offset, width) against the same field read one bit at a time.
TEST(FieldTest, ByteAlignedFieldsReadAndWriteTheSameBitsAsUnalignedOnes) {
  std::array<uint8_t, 16> b{};
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(0x9D * (i + 1));
  for (uint32_t off = 0; off <= 64; off += 8) {
    for (uint32_t w = 8; w <= 64; w += 8) {
      uint64_t bitwise = 0;
      for (uint32_t k = 0; k < w; ++k) bitwise = (bitwise << 1) | GetBits(b, off + k, 1);
      EXPECT_EQ(GetBits(b, off, w), bitwise) << "offset " << off << " width " << w;
      std::array<uint8_t, 16> c = b;
      std::array<uint8_t, 16> d = b;
      uint64_t v = 0xF1E2D3C4B5A69788ull;
      SetBits(c, off, w, v);
      for (uint32_t k = 0; k < w; ++k) SetBits(d, off + k, 1, v >> (w - 1 - k));
      EXPECT_EQ(c, d) << "offset " << off << " width " << w;
    }
  }
}

// Byte arrays go whole (Field::get_bytes/set_bytes): the same bytes as field by field, and
// the same values back. Every field is filled with a pattern; the reference writes each
// element with SetBits and reads it with GetBits.
template <typename S>
void ExpectBulkCopySameAsFieldByField() {
  constexpr size_t n = Layout<S>::kSize;
  S s{};
  size_t bulk = 0;
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (const auto& f : Layout<S>::kFields) {
    bulk += f.get_bytes != nullptr;
    for (size_t i = 0; i < f.count; ++i) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      f.set(s, i, f.bit_width == 64 ? x : (x >> 7) & ((uint64_t{1} << f.bit_width) - 1));
    }
  }
  EXPECT_GT(bulk, 0u) << Layout<S>::kName;
  std::array<uint8_t, n> want{}, got{};
  for (const auto& f : Layout<S>::kFields)
    for (size_t i = 0; i < f.count; ++i)
      SetBits(want, f.bit_offset + static_cast<uint32_t>(i * f.stride), f.bit_width, f.get(s, i));
  EncodeTo(s, got);
  EXPECT_EQ(got, want) << Layout<S>::kName;
  S back{};
  ASSERT_TRUE(DecodeFrom(std::span<const uint8_t>(want), &back).ok());
  for (const auto& f : Layout<S>::kFields)
    for (size_t i = 0; i < f.count; ++i)
      EXPECT_EQ(f.get(back, i), GetBits(want, f.bit_offset + static_cast<uint32_t>(i * f.stride),
                                        f.bit_width))
          << Layout<S>::kName << " " << f.name << "[" << i << "]";
}

TEST(FieldTest, ByteArraysCopiedWholeGiveTheSameBytesAsFieldByField) {
  ExpectBulkCopySameAsFieldByField<Smp>();
  ExpectBulkCopySameAsFieldByField<LinearForwardingTable>();
  ExpectBulkCopySameAsFieldByField<NodeDescription>();
  ExpectBulkCopySameAsFieldByField<PathRecord>();
  ExpectBulkCopySameAsFieldByField<Notice>();
}

TEST(NodeInfoTest, EncodesGoldenBytesAndDecodesThemBack) {
  NodeInfo ni;
  ni.node_type = NodeType::kSwitch;
  ni.num_ports = 36;
  ni.system_image_guid = 0x0002c90200000001;
  ni.node_guid = 0x0002c90200000001;
  ni.port_guid = 0x0002c90200000001;
  ni.partition_cap = 8;
  ni.device_id = 0xcf08;
  ni.revision = 0xa0;
  ni.local_port_num = 3;
  ni.vendor_id = 0x02c9;
  std::array<uint8_t, 64> buf{};
  EncodeTo(ni, buf);
  const uint8_t golden[40] = {0x01, 0x01, 0x02, 0x24, 0x00, 0x02, 0xc9, 0x02, 0x00, 0x00,
                              0x00, 0x01, 0x00, 0x02, 0xc9, 0x02, 0x00, 0x00, 0x00, 0x01,
                              0x00, 0x02, 0xc9, 0x02, 0x00, 0x00, 0x00, 0x01, 0x00, 0x08,
                              0xcf, 0x08, 0x00, 0x00, 0x00, 0xa0, 0x03, 0x00, 0x02, 0xc9};
  EXPECT_TRUE(std::equal(std::begin(golden), std::end(golden), buf.begin()));
  auto back = Decode<NodeInfo>(buf);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->node_guid, ni.node_guid);
  EXPECT_EQ(back->vendor_id, 0x02c9u);
  EXPECT_EQ(back->node_type, NodeType::kSwitch);
}

TEST(NodeInfoTest, TruncatedInputIsRejectedAsCorrupt) {
  std::array<uint8_t, 12> buf{};
  auto r = Decode<NodeInfo>(buf);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorrupt);
  EXPECT_EQ(r.status().message(), "NodeInfo needs 40 bytes, got 12");
}

TEST(SmpTest, DirectedRouteHeaderPutsDirectionHopPointerAndCountWhereTheSpecSays) {
  const uint8_t path[] = {1, 3};
  Smp s = MakeDrSmp(method::kGet, attr::kNodeInfo, 0, path);
  s.tid = 0x1122334455667788;
  s.direction = 1;
  s.hop_pointer = 2;
  MadBytes b{};
  EncodeTo(s, b);
  EXPECT_EQ(b[1], 0x81);
  EXPECT_EQ(b[3], 0x01);
  EXPECT_EQ(b[4], 0x80);  // D bit
  EXPECT_EQ(b[6], 2);     // hop pointer
  EXPECT_EQ(b[7], 2);     // hop count
  EXPECT_EQ(b[8], 0x11);
  EXPECT_EQ(b[16], 0x00);
  EXPECT_EQ(b[17], 0x11);
  EXPECT_EQ(b[32], 0xFF);  // DrSLID permissive
  EXPECT_EQ(b[128 + 1], 1);
  EXPECT_EQ(b[128 + 2], 3);
  auto back = Decode<Smp>(b);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->tid, s.tid);
  EXPECT_EQ(back->initial_path, s.initial_path);
}

TEST(DumpTest, PrintsEveryFieldWithItsFormat) {
  NodeInfo ni;
  ni.node_guid = 0x0002c90300000010;
  std::string d = Dump(ni);
  EXPECT_NE(d.find("node_guid"), std::string::npos);
  EXPECT_NE(d.find("0x0002c90300000010"), std::string::npos);
}

}  // namespace
}  // namespace ibsm::mad
