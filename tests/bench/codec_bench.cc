// Encode/decode rate of the table-driven codec (mad/field.h): a whole directed-route SMP
// carrying PortInfo, as a sweep sends and receives it, and a bare NodeInfo payload.
// Reports items/second; asserts nothing about timing.
#include <benchmark/benchmark.h>

#include <array>

#include "mad/attr/node_info.h"
#include "mad/attr/port_info.h"
#include "mad/mad.h"

namespace ibsm::mad {
namespace {

PortInfo SamplePortInfo() {
  PortInfo pi;
  pi.m_key = 0x1122334455667788;
  pi.gid_prefix = 0xfe80000000000000;
  pi.lid = 17;
  pi.master_sm_base_lid = 1;
  pi.capability_mask = 0x02514868;
  pi.local_port_num = 3;
  pi.link_width_enabled = 3;
  pi.link_width_supported = 3;
  pi.link_width_active = 2;
  pi.link_speed_supported = 7;
  pi.port_state = 4;
  pi.port_phys_state = 5;
  pi.lmc = 2;
  pi.link_speed_active = 4;
  pi.neighbor_mtu = 5;
  pi.vl_cap = 4;
  pi.mtu_cap = 5;
  pi.hoq_life = 18;
  pi.operational_vls = 4;
  pi.subnet_timeout = 18;
  pi.link_speed_ext_active = 1;
  return pi;
}

NodeInfo SampleNodeInfo() {
  NodeInfo ni;
  ni.node_type = NodeType::kSwitch;
  ni.num_ports = 36;
  ni.system_image_guid = 0x0002c90200000001;
  ni.node_guid = 0x0002c90200000001;
  ni.port_guid = 0x0002c90200000001;
  ni.partition_cap = 8;
  ni.device_id = 0xcf08;
  ni.revision = 0xa0;
  ni.local_port_num = 1;
  ni.vendor_id = 0x02c9;
  return ni;
}

// Payload encode + whole-SMP encode, as the sender of a PortInfo Set does.
void BM_EncodeDrSmpWithPortInfo(benchmark::State& state) {
  const uint8_t path[] = {1, 3, 7, 2};
  Smp smp = MakeDrSmp(method::kSet, attr::kPortInfo, 3, path);
  PortInfo pi = SamplePortInfo();
  MadBytes wire{};
  for (auto _ : state) {
    EncodeTo(pi, smp.data);
    EncodeTo(smp, wire);
    benchmark::DoNotOptimize(wire.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(kMadSize));
}
BENCHMARK(BM_EncodeDrSmpWithPortInfo);

// Whole-SMP decode + payload decode, as the receiver of a PortInfo GetResp does.
void BM_DecodeDrSmpWithPortInfo(benchmark::State& state) {
  const uint8_t path[] = {1, 3, 7, 2};
  Smp smp = MakeDrSmp(method::kGetResp, attr::kPortInfo, 3, path);
  EncodeTo(SamplePortInfo(), smp.data);
  MadBytes wire{};
  EncodeTo(smp, wire);
  Smp out;
  PortInfo pi;
  for (auto _ : state) {
    Status s1 = DecodeFrom(wire, &out);
    Status s2 = DecodeFrom(out.data, &pi);
    benchmark::DoNotOptimize(s1.ok() && s2.ok());
    benchmark::DoNotOptimize(pi.lid);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(kMadSize));
}
BENCHMARK(BM_DecodeDrSmpWithPortInfo);

void BM_EncodeNodeInfo(benchmark::State& state) {
  NodeInfo ni = SampleNodeInfo();
  std::array<uint8_t, kSmpDataSize> buf{};
  for (auto _ : state) {
    EncodeTo(ni, buf);
    benchmark::DoNotOptimize(buf.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EncodeNodeInfo);

void BM_DecodeNodeInfo(benchmark::State& state) {
  std::array<uint8_t, kSmpDataSize> buf{};
  EncodeTo(SampleNodeInfo(), buf);
  NodeInfo ni;
  for (auto _ : state) {
    Status s = DecodeFrom(buf, &ni);
    benchmark::DoNotOptimize(s.ok());
    benchmark::DoNotOptimize(ni.node_guid);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_DecodeNodeInfo);

}  // namespace
}  // namespace ibsm::mad

BENCHMARK_MAIN();
