#include "sm/record/multicast_state.h"

#include <array>

namespace ibsm::sm {

std::vector<ha::McGroupRow> ToRows(const std::map<mad::Gid, McGroup>& groups) {
  std::vector<ha::McGroupRow> out;
  for (const auto& [mgid, g] : groups) {
    ha::McGroupRow row;
    row.mgid = mad::ToGidBytes(mgid);
    row.mlid = g.mlid;
    mad::McMemberRecord r = g.Record(nullptr);
    r.join_state = 0;
    row.record.assign(ha::kMcGroupRecordSize, 0);
    mad::EncodeRecord(r, row.record);
    row.permanent = g.permanent;
    for (const auto& [guid, m] : g.members) {
      ha::McMemberRow mr;
      mr.port_guid = guid.value();
      mr.port_gid = mad::ToGidBytes(m.port_gid);
      mr.join_state = m.join_state;
      mr.proxy_join = m.proxy_join;
      row.members.push_back(mr);
    }
    out.push_back(std::move(row));
  }
  return out;
}

Result<std::vector<McGroup>> FromRows(const std::vector<ha::McGroupRow>& rows) {
  std::vector<McGroup> out;
  for (const ha::McGroupRow& row : rows) {
    IBSM_ASSIGN_OR_RETURN(mad::McMemberRecord r, mad::DecodeRecord<mad::McMemberRecord>(row.record));
    if (r.mgid() != mad::ToGid(row.mgid) || r.mlid != row.mlid) {
      return Corrupt("multicast group row: record disagrees with its MGID or MLID");
    }
    McGroup g;
    g.mgid = r.mgid();
    g.mlid = r.mlid;
    g.q_key = r.q_key;
    g.p_key = r.p_key;
    g.mtu = r.mtu;
    g.rate = r.rate;
    g.packet_life_time = r.packet_life_time;
    g.sl = r.sl;
    g.flow_label = r.flow_label;
    g.tclass = r.tclass;
    g.hop_limit = r.hop_limit;
    g.scope = r.scope;
    g.permanent = row.permanent;
    for (const ha::McMemberRow& m : row.members) {
      g.members[Guid{m.port_guid}] =
          McMember{mad::ToGid(m.port_gid), static_cast<uint8_t>(m.join_state & 0x0F),
                   m.proxy_join};
    }
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace ibsm::sm
