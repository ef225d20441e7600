// NodeInfo (IBA 14.2.5.3), attribute 0x0011, 40 bytes.
#pragma once

#include "mad/field.h"
#include "mad/mad.h"

namespace ibsm::mad {

enum class NodeType : uint8_t { kUnknown = 0, kCa = 1, kSwitch = 2, kRouter = 3 };

struct NodeInfo {
  static constexpr uint16_t kAttrId = attr::kNodeInfo;
  uint8_t base_version = 1;
  uint8_t class_version = 1;
  NodeType node_type = NodeType::kUnknown;
  uint8_t num_ports = 0;
  uint64_t system_image_guid = 0;
  uint64_t node_guid = 0;
  uint64_t port_guid = 0;
  uint16_t partition_cap = 0;
  uint16_t device_id = 0;
  uint32_t revision = 0;
  uint8_t local_port_num = 0;
  uint32_t vendor_id = 0;  // 24 bits
};

template <>
struct Layout<NodeInfo> {
  static constexpr std::string_view kName = "NodeInfo";
  static constexpr size_t kSize = 40;
  static constexpr std::array kFields = {
      F<&NodeInfo::base_version>("base_version", 0, 8),
      F<&NodeInfo::class_version>("class_version", 8, 8),
      F<&NodeInfo::node_type>("node_type", 16, 8),
      F<&NodeInfo::num_ports>("num_ports", 24, 8),
      F<&NodeInfo::system_image_guid>("system_image_guid", 32, 64, FieldFormat::kGuid),
      F<&NodeInfo::node_guid>("node_guid", 96, 64, FieldFormat::kGuid),
      F<&NodeInfo::port_guid>("port_guid", 160, 64, FieldFormat::kGuid),
      F<&NodeInfo::partition_cap>("partition_cap", 224, 16),
      F<&NodeInfo::device_id>("device_id", 240, 16, FieldFormat::kHex),
      F<&NodeInfo::revision>("revision", 256, 32, FieldFormat::kHex),
      F<&NodeInfo::local_port_num>("local_port_num", 288, 8),
      F<&NodeInfo::vendor_id>("vendor_id", 296, 24, FieldFormat::kHex),
  };
};
static_assert(LayoutIsValid<NodeInfo>());

}  // namespace ibsm::mad
