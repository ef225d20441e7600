#include "sm/sweep/port_settings.h"

#include <algorithm>

#include "mad/attr/port_info.h"
#include "sm/sweep/qos_program.h"

namespace ibsm::sm {

mad::PortInfo PortSettings::Desired(PortId p) const {
  const DiscoveryResult& model = model_();
  const Fabric& f = model.fabric;
  const Port& port = f.port(p);
  const DiscoveredNode& dn = model.nodes[port.node];
  const uint8_t num = port.num.value();
  const mad::PortInfo& now = dn.port_info[num];
  mad::PortInfo pi = now;
  pi.port_state = 0;       // no change
  pi.port_phys_state = 0;  // no change
  pi.link_down_default_state = 0;
  pi.link_speed_enabled = 0;
  pi.link_width_enabled = 0;
  pi.link_speed_ext_enabled = 0;
  pi.client_reregister = 0;
  const bool is_switch = f.node(port.node).is_switch();
  bool end_port = !is_switch || num == 0;
  if (end_port) {
    pi.lid = lids_.base[p];
    pi.lmc = lids_.lmc[p];
    pi.master_sm_base_lid = sm_lid_.value();
    pi.gid_prefix = options_.subnet_prefix;
    pi.m_key = options_.m_key;
    pi.m_key_lease_period = options_.m_key_lease_period;
    pi.m_key_protect_bits = options_.m_key_protection_level;
    pi.subnet_timeout = options_.subnet_timeout;
    pi.master_sm_sl = options_.sm_sl;
  } else if (port.connected()) {
    // A switch port facing a CA or router gets the leaf values (OpenSM's link manager).
    bool leaf = !f.node(f.port(port.peer).node).is_switch();
    pi.hoq_life = leaf ? options_.leaf_head_of_queue_lifetime: options_.head_of_queue_lifetime;
    pi.vl_stall_count = leaf ? options_.leaf_vl_stall_count: options_.vl_stall_count;
  }
  if (is_switch && num == 0) return pi;  // switch port 0 has no link
  // The link fields, as OpenSM's link manager sets them (docs/port-programming.md).
  pi.link_down_default_state = 2;  // Polling
  pi.local_phy_errors = options_.local_phy_errors_threshold;
  pi.overrun_errors = options_.overrun_errors_threshold;
  const uint8_t fw = options_.force_link_width;
  if (fw != 0 && (fw < 16 || (now.capability_mask2 & mad::port_cap2::kIsLinkWidth2xSupported)) &&
      (fw != 255 || now.link_width_enabled != now.link_width_supported)) {
    pi.link_width_enabled = fw;
  }
  const uint8_t fs = options_.force_link_speed;
  if (fs != 0 && (fs != 15 || now.link_speed_enabled != now.link_speed_supported)) {
    pi.link_speed_enabled = fs;
  }
  // A switch's external ports carry their capabilities in port 0's PortInfo.
  auto cap_mask = [&](NodeId n, uint8_t pn) -> uint32_t {
    const DiscoveredNode& d = model.nodes[n];
    const uint8_t at = f.node(n).is_switch() ? 0 : pn;
    return at < d.port_info.size() && d.port_info_valid[at] ? d.port_info[at].capability_mask
                                                            : 0;
  };
  const mad::PortInfo* peer = nullptr;
  if (port.connected()) {
    const Port& pp = f.port(port.peer);
    const DiscoveredNode& pd = model.nodes[pp.node];
    if (pd.port_info_valid[pp.num.value()]) peer = &pd.port_info[pp.num.value()];
    const uint8_t fse = options_.force_link_speed_ext;
    if (peer && fse != 0 &&
        (cap_mask(port.node, num) & mad::port_cap::kIsExtendedSpeedsSupported) &&
        (cap_mask(pp.node, pp.num.value()) & mad::port_cap::kIsExtendedSpeedsSupported) &&
        (fse != 31 || now.link_speed_ext_enabled != now.link_speed_ext_supported)) {
      pi.link_speed_ext_enabled = fse;
    }
  }
  // NeighborMTU and OperationalVLs: the smaller capability of the two ends (OperationalVLs
  // at most max_op_vls); a port whose neighbour did not answer keeps what it has.
  if (peer) {
    pi.neighbor_mtu = std::min(now.mtu_cap, peer->mtu_cap);
    pi.operational_vls = std::min(now.vl_cap, peer->vl_cap);
  }
  if (pi.neighbor_mtu == 0) pi.neighbor_mtu = 1;
  if (pi.operational_vls == 0) pi.operational_vls = 1;
  pi.operational_vls = std::min(pi.operational_vls, options_.max_op_vls);
  if (options_.qos) {
    if (auto hl = QosHighLimit(f, model.nodes, p, options_.qos_levels)) pi.vl_high_limit = *hl;
  }
  return pi;
}

bool PortSettings::LinkFieldsDiffer(PortId p, const mad::PortInfo& now,
                                    const mad::PortInfo& want) const {
  const Fabric& f = model_().fabric;
  const Port& port = f.port(p);
  auto echo = link_echo_.find({f.node(port.node).guid, port.num.value()});
  const mad::PortInfo* e = echo == link_echo_.end() ? nullptr : &echo->second;
  // A field is in sync when it holds what we want, or what the port answered last time.
#define IBSM_FIELD_DIFFERS(field) \
  (now.field != want.field && !(e != nullptr && e->field == now.field))
  bool differs = IBSM_FIELD_DIFFERS(hoq_life) || IBSM_FIELD_DIFFERS(vl_stall_count) ||
                 IBSM_FIELD_DIFFERS(master_sm_sl) || IBSM_FIELD_DIFFERS(vl_high_limit);
  if (!(f.node(port.node).is_switch() && port.num.value() == 0)) {
    differs = differs || IBSM_FIELD_DIFFERS(neighbor_mtu) ||
              IBSM_FIELD_DIFFERS(operational_vls) || IBSM_FIELD_DIFFERS(local_phy_errors) ||
              IBSM_FIELD_DIFFERS(overrun_errors) || IBSM_FIELD_DIFFERS(link_down_default_state);
    // The Enabled fields are set only when Desired asks for a change.
    differs = differs || (want.link_width_enabled != 0 && IBSM_FIELD_DIFFERS(link_width_enabled));
    differs = differs || (want.link_speed_enabled != 0 && IBSM_FIELD_DIFFERS(link_speed_enabled));
    differs = differs ||
              (want.link_speed_ext_enabled != 0 && IBSM_FIELD_DIFFERS(link_speed_ext_enabled));
  }
#undef IBSM_FIELD_DIFFERS
  return differs;
}

uint32_t PortSettings::SetModifier(PortId p) const {
  const DiscoveryResult& model = model_();
  const Fabric& f = model.fabric;
  const Port& port = f.port(p);
  const DiscoveredNode& dn = model.nodes[port.node];
  const uint8_t at = f.node(port.node).is_switch() ? 0 : port.num.value();
  const bool ext = at < dn.port_info.size() && dn.port_info_valid[at] &&
                   (dn.port_info[at].capability_mask & mad::port_cap::kIsExtendedSpeedsSupported);
  // Bit 31: SMSupportsExtendedSpeeds, as OpenSM's link manager sends it.
  return port.num.value() | (ext ? 0x80000000u : 0u);
}

void PortSettings::NoteLinkEcho(PortId p, const mad::PortInfo& answered) {
  const Fabric& f = model_().fabric;
  const Port& port = f.port(p);
  link_echo_[{f.node(port.node).guid, port.num.value()}] = answered;
}

bool PortSettings::TimeoutAndLeaseInSync(Guid port_guid, const mad::PortInfo& now,
                                         const mad::PortInfo& want) const {
  auto echo = echo_.find(port_guid);
  const bool timeout_ok =
      now.subnet_timeout == want.subnet_timeout ||
      (echo != echo_.end() && echo->second.subnet_timeout == now.subnet_timeout);
  const bool lease_ok =
      now.m_key_lease_period == want.m_key_lease_period ||
      (echo != echo_.end() && echo->second.m_key_lease == now.m_key_lease_period);
  return timeout_ok && lease_ok;
}

void PortSettings::NoteEndPortEcho(Guid port_guid, const mad::PortInfo& answered,
                                   const mad::PortInfo& want) {
  if (answered.subnet_timeout != want.subnet_timeout ||
      answered.m_key_lease_period != want.m_key_lease_period) {
    echo_[port_guid] = {answered.subnet_timeout, answered.m_key_lease_period};
  }
}

}  // namespace ibsm::sm
