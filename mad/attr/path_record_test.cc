// PathRecord and MultiPathRecord layouts: golden bytes, round trips, and libibmad's own
// field table (rdma-core libibmad/fields.c IB_SA_PR_* / IB_SA_MP_*) as an independent
// oracle, in both directions, the way libibmad_oracle_test.cc checks the SMP attributes.
// libibmad describes only some PathRecord fields; the others are pinned by golden bytes
// taken from OpenSM's ib_path_rec_t byte layout (include/iba/ib_types.h).
#include "mad/attr/path_record.h"
#include "mad/attr/layout_test_util.h"

#include <gtest/gtest.h>
#include <infiniband/mad.h>

#include <set>
#include <vector>

namespace ibsm::mad {
namespace {

using test_util::PatternFilled;

struct SaMapping {
  std::string_view ours;
  MAD_FIELDS theirs;
};

// Ours encodes, libibmad reads; libibmad encodes, ours reads. Scalars up to 32 bits and
// byte arrays (GIDs) only: that is all libibmad's SA fields hold.
template <typename S>
void CheckSaRecordAgainstLibibmad(const std::vector<SaMapping>& map) {
  for (uint64_t seed : {1ull, 7ull, 0x5EEDull, 0xFFFFFFFFull}) {
    S s = PatternFilled<S>(seed);
    std::array<uint8_t, kMadSize> buf{};
    EncodeTo(s, buf);
    for (const auto& m : map) {
      const Field<S>* f = FindField<S>(m.ours);
      ASSERT_NE(f, nullptr) << m.ours;
      SCOPED_TRACE(std::string(Layout<S>::kName) + "." + std::string(m.ours));
      if (f->count > 1) {
        std::vector<uint8_t> theirs(f->count);
        mad_decode_field(buf.data(), m.theirs, theirs.data());
        for (size_t i = 0; i < f->count; ++i) EXPECT_EQ(theirs[i], f->get(s, i)) << i;
      } else {
        EXPECT_EQ(mad_get_field(buf.data(), 0, m.theirs), f->get(s, 0));
      }
    }

    std::array<uint8_t, kMadSize> theirs{};
    for (const auto& m : map) {
      const Field<S>* f = FindField<S>(m.ours);
      if (f->count > 1) {
        std::vector<uint8_t> bytes(f->count);
        for (size_t i = 0; i < f->count; ++i) bytes[i] = static_cast<uint8_t>(f->get(s, i));
        mad_encode_field(theirs.data(), m.theirs, bytes.data());
      } else {
        uint32_t v = static_cast<uint32_t>(f->get(s, 0));
        mad_encode_field(theirs.data(), m.theirs, &v);
      }
    }
    auto got = Decode<S>(theirs);
    ASSERT_TRUE(got.ok());
    for (const auto& m : map) {
      const Field<S>* f = FindField<S>(m.ours);
      for (size_t i = 0; i < f->count; ++i)
        EXPECT_EQ(f->get(*got, i), f->get(s, i)) << m.ours << "[" << i << "]";
    }
  }
}

TEST(PathRecordTest, AgreesWithLibibmadOnEveryFieldItDescribes) {
  CheckSaRecordAgainstLibibmad<PathRecord>({
      {"dgid", IB_SA_PR_DGID_F},
      {"sgid", IB_SA_PR_SGID_F},
      {"dlid", IB_SA_PR_DLID_F},
      {"slid", IB_SA_PR_SLID_F},
      {"numb_path", IB_SA_PR_NPATH_F},
      {"sl", IB_SA_PR_SL_F},
  });
}

TEST(PathRecordTest, MultiPathRecordAgreesWithLibibmadOnEveryFieldItDescribes) {
  CheckSaRecordAgainstLibibmad<MultiPathRecord>({
      {"numb_path", IB_SA_MP_NPATH_F},
      {"sgid_count", IB_SA_MP_NSRC_F},
      {"dgid_count", IB_SA_MP_NDEST_F},
  });
}

TEST(PathRecordTest, FirstMultiPathGidSitsWhereLibibmadReadsIt) {
  MultiPathRequest r;
  r.sgids = {{0xfe80000000000000ull, 0x0002c90300000011ull}};
  r.dgids = {{0xfe80000000000000ull, 0x0002c90300000021ull}};
  std::array<uint8_t, kMadSize> buf{};
  ASSERT_TRUE(EncodeMultiPathRequest(r, buf).ok());
  std::array<uint8_t, 16> gid0{};
  mad_decode_field(buf.data(), IB_SA_MP_GID0_F, gid0.data());
  EXPECT_EQ(gid0, ToGidBytes(r.sgids[0]));
  EXPECT_EQ(mad_get_field(buf.data(), 0, IB_SA_MP_NSRC_F), 1u);
  EXPECT_EQ(mad_get_field(buf.data(), 0, IB_SA_MP_NDEST_F), 1u);
}

// Bytes as OpenSM's ib_path_rec_t lays them out: service_id (8), dgid (16), sgid (16),
// dlid, slid, hop_flow_raw (raw:1 rsv:3 flow:20 hop:8), tclass, num_path (rev:1 n:7),
// pkey, qos_class_sl (qos:12 sl:4), mtu (sel:2 mtu:6), rate, pkt_life, preference, 6 rsv.
TEST(PathRecordTest, GoldenBytesMatchOpenSmsStructLayout) {
  PathRecord p;
  p.service_id = 0x1122334455667788ull;
  p.dgid = ToGidBytes({0xfe80000000000000ull, 0x0002c90300000021ull});
  p.sgid = ToGidBytes({0xfe80000000000000ull, 0x0002c90300000011ull});
  p.dlid = 0x0102;
  p.slid = 0x0304;
  p.raw_traffic = 1;
  p.flow_label = 0xABCDE;
  p.hop_limit = 0x40;
  p.tclass = 0x5A;
  p.reversible = 1;
  p.numb_path = 0x7F;
  p.pkey = 0xFFFF;
  p.qos_class = 0xABC;
  p.sl = 0xD;
  p.mtu_selector = selector::kExactly;
  p.mtu = mtu::k4096;
  p.rate_selector = selector::kExactly;
  p.rate = rate::k100;
  p.packet_life_time_selector = selector::kExactly;
  p.packet_life_time = 18;
  p.preference = 2;
  std::array<uint8_t, 64> b{};
  EncodeTo(p, b);
  const std::array<uint8_t, 64> want = {
      0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,  // service_id
      0xfe, 0x80, 0,    0,    0,    0,    0,    0,
      0x00, 0x02, 0xc9, 0x03, 0,    0,    0,    0x21,  // dgid
      0xfe, 0x80, 0,    0,    0,    0,    0,    0,
      0x00, 0x02, 0xc9, 0x03, 0,    0,    0,    0x11,  // sgid
      0x01, 0x02, 0x03, 0x04,                          // dlid, slid
      0x8A, 0xBC, 0xDE, 0x40,                          // hop_flow_raw
      0x5A, 0xFF, 0xFF, 0xFF,                          // tclass .. pkey
      0xAB, 0xCD, 0x85, 0x90, 0x92, 0x02,              // qos..preference
      0,    0,    0,    0,    0,    0};
  EXPECT_EQ(b, want);
  auto back = Decode<PathRecord>(b);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(ToGid(back->sgid).guid, 0x0002c90300000011ull);
  EXPECT_EQ(back->flow_label, 0xABCDEu);
  EXPECT_EQ(back->packet_life_time, 18);
  EXPECT_EQ(back->preference, 2);
}

TEST(PathRecordTest, MultiPathRecordGoldenBytesMatchOpenSmsStructLayout) {
  MultiPathRequest r;
  r.record.raw_traffic = 1;
  r.record.flow_label = 0x12345;
  r.record.hop_limit = 7;
  r.record.tclass = 9;
  r.record.reversible = 1;
  r.record.numb_path = 4;
  r.record.pkey = 0x8001;
  r.record.qos_class = 0x123;
  r.record.sl = 5;
  r.record.mtu_selector = selector::kGreaterThan;
  r.record.mtu = mtu::k1024;
  r.record.rate_selector = selector::kLessThan;
  r.record.rate = rate::k40;
  r.record.packet_life_time_selector = selector::kLargest;
  r.record.packet_life_time = 3;
  r.record.service_id_msb = 0x10;
  r.record.independence_selector = 2;
  r.record.service_id_lsb = 0x20304050607080ull;
  r.sgids = {{0xfe80000000000000ull, 1}, {0xfe80000000000000ull, 2}};
  r.dgids = {{0xfe80000000000000ull, 3}};
  std::vector<uint8_t> b(MultiPathRequestSize(r));
  ASSERT_EQ(b.size(), 24u + 3 * 16);
  ASSERT_TRUE(EncodeMultiPathRequest(r, b).ok());
  const std::vector<uint8_t> head = {0x81, 0x23, 0x45, 0x07, 0x09, 0x84, 0x80, 0x01,
                                     0x12, 0x35, 0x03, 0x47, 0xC3, 0x10, 0x80, 0x02,
                                     0x01, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80};
  EXPECT_EQ(std::vector<uint8_t>(b.begin(), b.begin() + 24), head);
  EXPECT_EQ(b[24 + 15], 1);
  EXPECT_EQ(b[24 + 16 + 15], 2);
  EXPECT_EQ(b[24 + 32 + 15], 3);
  EXPECT_EQ(r.record.service_id(), 0x1020304050607080ull);

  auto back = DecodeMultiPathRequest(b);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->sgids, r.sgids);
  EXPECT_EQ(back->dgids, r.dgids);
  EXPECT_EQ(back->record.independence_selector, 2);
  EXPECT_EQ(back->record.service_id(), 0x1020304050607080ull);
}

TEST(PathRecordTest, MultiPathRequestShorterThanItsGidCountsIsCorrupt) {
  std::vector<uint8_t> b(24 + 16, 0);
  b[15] = 2;  // sgid_count
  b[16] = 1;  // dgid_count
  auto r = DecodeMultiPathRequest(b);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorrupt);
  EXPECT_FALSE(DecodeMultiPathRequest(std::vector<uint8_t>(10)).ok());
}

TEST(PathRecordTest, EveryFieldHasAComponentMaskBitAndNoBitIsUsedTwice) {
  auto check = [](const auto& fields, const auto& bits) {
    ASSERT_EQ(fields.size(), bits.size());
    std::set<uint8_t> seen;
    for (uint8_t b : bits) {
      EXPECT_LT(b, 64);
      EXPECT_TRUE(seen.insert(b).second) << "bit " << int(b) << " used twice";
    }
  };
  check(Layout<PathRecord>::kFields, Layout<PathRecord>::kCompBits);
  check(Layout<MultiPathRecord>::kFields, Layout<MultiPathRecord>::kCompBits);
  // Spot checks against the named constants.
  auto pr_bit = [](std::string_view name) {
    const auto& f = Layout<PathRecord>::kFields;
    for (size_t i = 0; i < f.size(); ++i)
      if (f[i].name == name) return uint64_t{1} << Layout<PathRecord>::kCompBits[i];
    return uint64_t{0};
  };
  EXPECT_EQ(pr_bit("dgid"), path_comp::kDgid);
  EXPECT_EQ(pr_bit("slid"), path_comp::kSlid);
  EXPECT_EQ(pr_bit("numb_path"), path_comp::kNumbPath);
  EXPECT_EQ(pr_bit("packet_life_time"), path_comp::kPacketLifeTime);
  EXPECT_EQ(pr_bit("preference"), path_comp::kPreference);
}

TEST(PathRecordTest, GidConvertsToAndFromNetworkOrderBytes) {
  Gid g{0xfe80000000000000ull, 0x0002c90300000011ull};
  GidBytes b = ToGidBytes(g);
  EXPECT_EQ(b[0], 0xfe);
  EXPECT_EQ(b[1], 0x80);
  EXPECT_EQ(b[15], 0x11);
  EXPECT_EQ(ToGid(b), g);
  EXPECT_TRUE(g.is_link_local());
  EXPECT_FALSE(g.is_multicast());
  EXPECT_TRUE((Gid{0xff12401bffff0000ull, 1}).is_multicast());
  EXPECT_FALSE((Gid{0xfec0000000000000ull, 1}).is_link_local());
}

TEST(PathRecordTest, RateOrderRanksCodesByBandwidthNotByNumber) {
  EXPECT_LT(rate::Rank(rate::k5), rate::Rank(rate::k10));     // code 5 < code 3
  EXPECT_LT(rate::Rank(rate::k56), rate::Rank(rate::k60));    // code 12 < code 8
  EXPECT_LT(rate::Rank(rate::k100), rate::Rank(rate::k112));  // code 16 < code 13
  EXPECT_EQ(rate::Rank(0), -1);
  EXPECT_EQ(rate::Rank(25), -1);
  EXPECT_TRUE(IsValidRate(rate::k1200));
  EXPECT_FALSE(IsValidMtu(0));
  EXPECT_FALSE(IsValidMtu(6));
  for (size_t i = 1; i < rate::kByBandwidth.size(); ++i)
    EXPECT_LT(rate::kByBandwidth[i - 1].half_gbps, rate::kByBandwidth[i].half_gbps);
}

}  // namespace
}  // namespace ibsm::mad
