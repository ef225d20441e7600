// PortSettings alone (sm/sweep/port_settings.h): what each port should hold, on a model read
// from the simulator, and the echoes that keep a device's unkept fields from being Set again
// every sweep.
#include "sm/sweep/port_settings.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "sm/testing/port_stage_bed.h"

namespace ibsm::sm {
namespace {

using PortSettingsBed = testutil::PortStageBed;

TEST(PortSettingsTest, AnEndPortGetsItsLidAndTheSmsFieldsASwitchPortItsLinkFields) {
  PortSettingsBed b;
  b.options.m_key = 0x1234;  // read at each Desired (no Set is sent here)
  b.options.subnet_timeout = 17;
  const PortId ca = *b.d.fabric.FindPort(b.built.port(testutil::FirstCaPort(b.built)).guid);
  const mad::PortInfo want = b.ports.Desired(ca);
  EXPECT_EQ(want.lid, b.lids.base[ca]);
  EXPECT_EQ(want.master_sm_base_lid, 1);
  EXPECT_EQ(want.m_key, 0x1234u);
  EXPECT_EQ(want.subnet_timeout, 17);
  EXPECT_EQ(want.port_state, 0);  // no change
  EXPECT_EQ(want.link_down_default_state, 2);  // Polling
  const Port& port = b.d.fabric.port(ca);
  const Port& peer = b.d.fabric.port(port.peer);
  EXPECT_EQ(want.neighbor_mtu,
            std::min(b.d.nodes[port.node].port_info[port.num.value()].mtu_cap,
                     b.d.nodes[peer.node].port_info[peer.num.value()].mtu_cap));

  const PortId leaf_down = b.SwitchPort(/*to_ca=*/true);
  const PortId leaf_up = b.SwitchPort(/*to_ca=*/false);
  ASSERT_NE(leaf_down, kNoPort);
  ASSERT_NE(leaf_up, kNoPort);
  EXPECT_EQ(b.ports.Desired(leaf_down).hoq_life, b.options.leaf_head_of_queue_lifetime);
  EXPECT_EQ(b.ports.Desired(leaf_up).hoq_life, b.options.head_of_queue_lifetime);
  EXPECT_EQ(b.ports.Desired(leaf_up).lid, 0);  // an external switch port owns no LID
}

// A device that does not keep a field answers its own value to every Set: once that answer
// is noted the field is in sync, until the port holds yet another value.
TEST(PortSettingsTest, AFieldTheDeviceDoesNotKeepIsInSyncOnceItsAnswerIsNoted) {
  PortSettingsBed b;
  const PortId p = b.SwitchPort(/*to_ca=*/false);
  const Port& port = b.d.fabric.port(p);
  const mad::PortInfo want = b.ports.Desired(p);
  mad::PortInfo now = b.d.nodes[port.node].port_info[port.num.value()];
  now.vl_stall_count = static_cast<uint8_t>(want.vl_stall_count ^ 1);
  EXPECT_TRUE(b.ports.LinkFieldsDiffer(p, now, want));
  b.ports.NoteLinkEcho(p, now);  // what it answered to the Set of `want`
  EXPECT_FALSE(b.ports.LinkFieldsDiffer(p, now, want));
  now.vl_stall_count = static_cast<uint8_t>(want.vl_stall_count ^ 2);
  EXPECT_TRUE(b.ports.LinkFieldsDiffer(p, now, want));

  const Guid g{0x42};
  mad::PortInfo end = want;
  end.subnet_timeout = 0;  // kept nothing
  EXPECT_FALSE(b.ports.TimeoutAndLeaseInSync(g, end, want));
  b.ports.NoteEndPortEcho(g, end, want);
  EXPECT_TRUE(b.ports.TimeoutAndLeaseInSync(g, end, want));
  end.subnet_timeout = 5;
  EXPECT_FALSE(b.ports.TimeoutAndLeaseInSync(g, end, want));
}

TEST(PortSettingsTest, TheSetModifierCarriesThePortNumberAndExtendedSpeedsBit) {
  PortSettingsBed b;
  const PortId p = b.SwitchPort(/*to_ca=*/true);
  const Port& port = b.d.fabric.port(p);
  const NodeId n = port.node;
  const uint32_t mod = b.ports.SetModifier(p);
  EXPECT_EQ(mod & 0xff, port.num.value());
  const bool ext = b.d.nodes[n].port_info[0].capability_mask &
                   mad::port_cap::kIsExtendedSpeedsSupported;
  EXPECT_EQ((mod & 0x80000000u) != 0, ext);
}

}  // namespace
}  // namespace ibsm::sm
