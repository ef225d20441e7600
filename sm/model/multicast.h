// Multicast groups (IBA 15.2.5.17, o15-0.1.x): what MCMemberRecord joins and leaves build.
// A group is keyed by its MGID and owns an MLID from 0xC000 upward (lowest free first, as
// OpenSM); its Q_Key, P_Key, MTU, rate, packet lifetime, SL, FlowLabel, TClass, HopLimit
// and scope are fixed by the join that creates it; its members are ports with JoinState
// bits (full, non, send-only non, send-only full).
//
// Rules kept here, each answered with an SA status and counted:
//   - a join names MGID, PortGID and JoinState (else ERR_INSUFFICIENT_COMPONENTS); a join
//     that creates a group also names Q_Key, TClass, P_Key, FlowLabel and SL, and carries
//     the full-member bit;
//   - the MTU and rate a create asks for (with their selectors) must fit the joining
//     port's link; a join of an existing group must match every component it names and its
//     port's link must carry the group's MTU and rate;
//   - a zero MGID asks the SA to assign one: ff1S:a01b:<subnet prefix>:<counter> (OpenSM's
//     build_new_mgid), S the requested scope or link-local;
//   - a leave clears the JoinState bits it names; a port with none left is removed; a group
//     with no full member left is deleted (trap 67), except a permanent group (the IPoIB
//     broadcast group of the default partition, created at start as OpenSM does).
//
// The manager knows nothing of MADs or of the fabric: the SA passes what it knows of the
// joining port (McPortCaps), and the SM asks which ports are gone after a sweep (Prune).
//
// Threading: the io_context thread that owns the SM (the SA runs there too).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/types.h"
#include "conf/partitions.h"
#include "mad/attr/mc_member_record.h"

namespace ibsm::sm {

// The IPoIB broadcast MGID of a partition (RFC 4391): ff12:401b:<P_Key>::ffff:ffff.
mad::Gid IpoibBroadcastMgid(uint16_t p_key, uint8_t scope = mad::mc_scope::kLinkLocal);

struct MulticastOptions {
  uint64_t subnet_prefix = 0xfe80000000000000ull;
  uint8_t packet_life_time = 18;  // OpenSM's subnet_timeout: what groups get by default
  // Highest MLID handed out (MulticastFDBCap of the smallest switch above 0xC000).
  uint16_t max_mlid = 0xC000 + 1024 - 1;
  // The default partition's IPoIB broadcast group (OpenSM's "Default=0x7fff,ipoib").
  bool ipoib_broadcast = true;
  uint8_t broadcast_mtu = mad::mtu::k2048;
  uint8_t broadcast_rate = mad::rate::k10;
  uint8_t broadcast_sl = 0;
  uint32_t broadcast_q_key = 0x0B1B;
  // Groups one requesting port may have created and still hold (README "What one SA request
  // may cost or hold"): one host cannot take every MLID. 0: no cap.
  size_t max_groups_per_requester = 64;
};

// What the SA knows of the port a request names, from the last fabric snapshot.
struct McPortCaps {
  Guid port_guid{0};
  uint8_t mtu = 0;   // the port's link MTU (mad::mtu code); 0: unknown, not checked
  uint8_t rate = 0;  // its link rate (mad::rate code); 0: unknown, not checked
  // Whether the port holds a P_Key (15-bit base compared); null: no partitions, not checked.
  std::function<bool(uint16_t)> holds_pkey;
};

// Whether the requester of a Get or Leave holds a P_Key; null: everyone does.
using PKeyFilter = std::function<bool(uint16_t)>;

struct McMember {
  mad::Gid port_gid;
  uint8_t join_state = 0;
  bool proxy_join = false;
};

struct McGroup {
  mad::Gid mgid;
  uint16_t mlid = 0;
  uint32_t q_key = 0;
  uint16_t p_key = 0;
  uint8_t mtu = 0;
  uint8_t rate = 0;
  uint8_t packet_life_time = 0;
  uint8_t sl = 0;
  uint32_t flow_label = 0;
  uint8_t tclass = 0;
  uint8_t hop_limit = 0;
  uint8_t scope = 0;
  bool permanent = false;             // never deleted for want of members
  // The port whose join created it (its cap); 0 for groups the SM made or restored from the
  // state file, which holds no creator.
  Guid creator{0};
  std::map<Guid, McMember> members;   // by port GUID

  bool HasFullMember() const;
  uint8_t JoinStates() const;  // OR over members
  // The record of `member` (null: the group's own record, PortGID zero). Selectors are
  // "exactly", as OpenSM answers.
  mad::McMemberRecord Record(const McMember* member) const;
};

struct McCounters {
  uint64_t groups_created = 0;
  uint64_t groups_deleted = 0;
  uint64_t joins = 0;            // successful joins (new members and added JoinState bits)
  uint64_t leaves = 0;           // successful leaves
  uint64_t members_pruned = 0;   // members dropped because their port left the fabric
  uint64_t joins_rejected = 0;
  uint64_t leaves_rejected = 0;
  uint64_t mlids_exhausted = 0;  // creates refused: no free MLID
  // creates refused: the requester holds max_groups_per_requester groups already (SA-MC-022)
  uint64_t creates_over_requester_cap = 0;
  std::map<std::string, uint64_t> rejected_by_id;  // stable log ID ("SA-MC-004") -> count
};

// The outcome of a join or leave: status 0 and the record to answer with, or an SA status.
struct McAnswer {
  uint16_t status = 0;
  mad::McMemberRecord record;
  std::string id;     // log ID of a refusal
  std::string why;    // its explanation
  bool ok() const { return status == 0; }
};

class MulticastManager {
 public:
  // trap 66 (group created) or 67 (group deleted) and the group's MGID.
  using EventFn = std::function<void(uint16_t trap, const mad::Gid& mgid)>;

  explicit MulticastManager(MulticastOptions options = {});

  // Creates the permanent groups (the IPoIB broadcast group) unless present. Idempotent.
  void CreateDefaultGroups();
  // The permanent groups partitions.conf asks for (OpenSM's osm_prtn_add_mcgroup): each
  // partition with the `ipoib` flag gets its IPoIB broadcast group (P_Key with the full bit,
  // its mtu/rate/sl/scope/Q_Key flags, one group per scope given), each `mgid=` line its
  // group. Null config: the default partition's broadcast group alone. Groups that were
  // permanent and are no longer asked for become ordinary groups (deleted when no full member
  // is left). Idempotent; called at start and on every partitions.conf reload.
  void SetPartitionGroups(const conf::PartitionConfig* config);

  // SubnAdmSet(MCMemberRecord). `requester`: the port GUID the request came from; 0 (its LID
  // names no known port) is refused, SA-MC-021, as is a Leave from it.
  McAnswer Join(const mad::McMemberRecord& req, uint64_t comp_mask, const McPortCaps& port,
                Guid requester);
  // SubnAdmDelete(MCMemberRecord).
  McAnswer Leave(const mad::McMemberRecord& req, uint64_t comp_mask, Guid requester,
                 const PKeyFilter& requester_holds = {});

  // SubnAdmGet/GetTable(MCMemberRecord): the records matching `want` under `comp_mask`,
  // selectors honoured. A trusted requester that names no PortGID sees every member's
  // record; anyone else one record per group (the named port's, or the group's own).
  // Groups whose P_Key the requester does not hold are invisible (OpenSM's rule).
  std::vector<mad::McMemberRecord> Query(const mad::McMemberRecord& want, uint64_t comp_mask,
                                         bool trusted, const PKeyFilter& requester_holds = {}) const;

  // Removes every member whose port GUID `present` rejects; groups left without a full
  // member are deleted. Returns the number of members removed.
  size_t Prune(const std::function<bool(Guid)>& present);

  // Puts back groups read from the state file (same MGIDs, MLIDs and members), replacing
  // what is held. Groups with a duplicate MGID or MLID, or an MLID out of range, are skipped
  // and counted in the return value.
  size_t Restore(std::vector<McGroup> groups);

  const std::map<mad::Gid, McGroup>& groups() const { return groups_; }
  const McGroup* Find(const mad::Gid& mgid) const;
  const McGroup* FindByMlid(uint16_t mlid) const;
  // Bumped whenever a group is created or deleted or its member set changes (the SM
  // reprograms MFTs and saves the state when it moved).
  uint64_t generation() const { return generation_; }
  const McCounters& counters() const { return counters_; }
  const MulticastOptions& options() const { return options_; }

  void set_on_event(EventFn fn) { on_event_ = std::move(fn); }
  // Runs after every change (join, leave, prune, create, delete), once per call that changed
  // something.
  void set_on_change(std::function<void()> fn) { on_change_ = std::move(fn); }
  void set_max_mlid(uint16_t mlid) { options_.max_mlid = mlid; }
  void set_subnet_prefix(uint64_t prefix) { options_.subnet_prefix = prefix; }

 private:
  McAnswer Refuse(bool join, uint16_t status, std::string id, std::string why);
  std::optional<uint16_t> FreeMlid() const;
  std::optional<mad::Gid> AssignMgid(uint8_t scope);
  McAnswer Create(const mad::McMemberRecord& req, uint64_t comp_mask, const McPortCaps& port,
                  Guid requester);
  void Delete(std::map<mad::Gid, McGroup>::iterator it);
  void Changed();

  MulticastOptions options_;
  std::map<mad::Gid, McGroup> groups_;
  uint32_t mgid_counter_ = 0;
  uint64_t generation_ = 0;
  McCounters counters_;
  EventFn on_event_;
  std::function<void()> on_change_;
};

}  // namespace ibsm::sm
