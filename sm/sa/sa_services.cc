// The SA's ServiceRecord store and answers (SaServer members kept apart from
// sa_server.cc): Set (register), Delete and Get/GetTable with lease expiry, the records'
// rows in the state file (FlushServices, LoadServices); and InformInfo Set and
// InformInfoRecord Get/GetTable through sm/sa/inform.h.
#include <algorithm>
#include <array>
#include <functional>

#include "base/log.h"
#include "base/log_limit.h"
#include "sm/sa/sa_pack.h"
#include "sm/sa/sa_server.h"
#include "sm/sa/sa_server_internal.h"

namespace ibsm::sm {
namespace {

using mad::SaRecord;
using sa_internal::AnswerCollected;
using sa_internal::Collector;
using sa_internal::Frame;
using sa_internal::kNoStatus;
using sa_internal::Query;

std::array<uint8_t, mad::Layout<mad::ServiceRecord>::kSize> ServiceWire(
    const mad::ServiceRecord& r) {
  std::array<uint8_t, mad::Layout<mad::ServiceRecord>::kSize> buf{};
  mad::EncodeRecord(r, buf);
  return buf;
}

ha::ServiceKey KeyOf(const mad::ServiceRecord& r) {
  return ha::ServiceKey{r.service_id, r.service_gid, r.service_p_key};
}


}  // namespace

size_t SaServer::ServiceKeyHash::operator()(const ha::ServiceKey& k) const {
  uint64_t h = k.service_id * 0x9E3779B97F4A7C15ull ^ k.pkey;
  for (uint8_t b : k.service_gid) h = (h ^ b) * 0x100000001B3ull;
  return static_cast<size_t>(h);
}

void SaServer::PutService(const mad::ServiceRecord& r, std::optional<int64_t> expires_us,
                          Guid owner) {
  const ha::ServiceKey key = KeyOf(r);
  ServiceList::iterator it;
  if (auto found = service_index_.find(key); found != service_index_.end()) {
    it = found->second;
    if (it->expires_us) service_expiry_.erase(it->expiry);
    it->record = r;
    it->expires_us = expires_us;
  } else {
    it = services_.insert(services_.end(), Service{r, expires_us, owner, {}});
    service_index_.emplace(key, it);
    ++services_by_owner_[owner];
  }
  if (expires_us) it->expiry = service_expiry_.emplace(*expires_us, key);
}

void SaServer::DropService(ServiceList::iterator it) {
  if (it->expires_us) service_expiry_.erase(it->expiry);
  if (auto o = services_by_owner_.find(it->owner); o != services_by_owner_.end() && --o->second == 0)
    services_by_owner_.erase(o);
  service_index_.erase(KeyOf(it->record));
  services_.erase(it);
}

void SaServer::MarkServiceChanged(const ha::ServiceKey& key, bool removed) {
  if (!store_) return;
  if (removed) {
    pending_upserts_.erase(key);
    pending_removals_.insert(key);
  } else {
    pending_removals_.erase(key);
    pending_upserts_.insert(key);
  }
  if (!on_services_dirty_) {
    (void)FlushServices();  // nobody schedules a flush: write through
  } else {
    on_services_dirty_();
  }
}

Status SaServer::FlushServices() {
  if (!store_ || !services_dirty()) return Status();
  std::vector<ha::ServiceRow> upserts;
  for (const ha::ServiceKey& key : pending_upserts_) {
    auto it = service_index_.find(key);
    if (it == service_index_.end()) continue;
    auto wire = ServiceWire(it->second->record);
    upserts.push_back(ha::ServiceRow{key, std::vector<uint8_t>(wire.begin(), wire.end()),
                                     it->second->expires_us});
  }
  std::vector<ha::ServiceKey> removals(pending_removals_.begin(), pending_removals_.end());
  Status st = store_->SaveServiceRecords(upserts, removals);
  if (!st.ok()) {
    // Memory keeps serving them; the next flush writes them (and LoadServices drops records
    // whose lease ran out, so a removal that never reached the file does no harm).
    const uint64_t n = ++counters_.service_state_failures;
    if (ShouldLogOccurrence(n)) {
      Log(LogName::kSa).warn("SA-SR-001 {} ServiceRecord change(s) not written to the state "
                             "file: {} ({} failed writes so far)",
                             upserts.size() + removals.size(), st.ToString(), n);
    }
    return st;
  }
  pending_upserts_.clear();
  pending_removals_.clear();
  return Status();
}

Status SaServer::LoadServices() {
  if (!store_) return Status();
  IBSM_ASSIGN_OR_RETURN(std::vector<ha::ServiceRow> rows, store_->LoadServiceRecords());
  services_.clear();
  service_index_.clear();
  service_expiry_.clear();
  services_by_owner_.clear();
  pending_upserts_.clear();
  pending_removals_.clear();
  for (const ha::ServiceRow& row : rows) {
    auto r = mad::DecodeRecord<mad::ServiceRecord>(row.record);
    if (!r.ok()) return r.status();
    // Who registered it is not in the file: the port it names is the likeliest owner.
    PutService(*r, row.expires_us, Guid{r->GidGuid()});
  }
  size_t dropped = ExpireServices();
  Log(LogName::kSa).info("{} ServiceRecord(s) restored from the state file, {} expired",
                         services_.size(), dropped);
  return Status();
}

size_t SaServer::ExpireServices() {
  const int64_t now = clock_.UnixMicros();
  size_t gone = 0;
  // Memory drops them even if the file cannot: an expired lease is never served.
  while (!service_expiry_.empty() && service_expiry_.begin()->first <= now) {
    const ha::ServiceKey key = service_expiry_.begin()->second;
    DropService(service_index_.at(key));
    MarkServiceChanged(key, /*removed=*/true);
    ++gone;
  }
  counters_.services_expired += gone;
  return gone;
}

std::vector<mad::ServiceRecord> SaServer::services() const {
  std::vector<mad::ServiceRecord> out;
  for (const Service& sv : services_) out.push_back(sv.record);
  return out;
}

// Set registers (or replaces the record with the same ServiceID, ServiceGID and
// ServiceP_Key) and answers GetResp with it; Delete removes the record of that key and
// answers DeleteResp with it; Get/GetTable match by component mask (15.2.5.14, 15.4).
std::optional<mad::MadMessage> SaServer::AnswerService(const mad::MadMessage& msg,
                                                       const mad::SaMad& req,
                                                       std::span<const uint8_t> data) {
  auto error = [&](uint16_t status) {
    ++counters_.by_error[status];
    // SubnAdmSet is answered by SubnAdmGetResp (15.4.2).
    uint8_t method = req.hdr.method == mad::method::kSet
                         ? mad::method::kGetResp
                         : static_cast<uint8_t>(req.hdr.method | mad::method::kResponseBit);
    return Frame(msg, req, method, status, 0);
  };
  auto one = [&](uint8_t method, const mad::ServiceRecord& r) {
    mad::MadMessage out =
        Frame(msg, req, method, kNoStatus, SaRecord<mad::ServiceRecord>::kAttrOffset);
    mad::EncodeRecord(r, std::span<uint8_t>(out.bytes).subspan(mad::kSaHeaderSize));
    ++counters_.records_sent;
    return out;
  };
  ExpireServices();
  const SaSnapshot& s = *snapshot_;
  const int64_t now = clock_.UnixMicros();
  constexpr uint64_t kKey =
      mad::sr_comp::kServiceId | mad::sr_comp::kServiceGid | mad::sr_comp::kServicePKey;
  const bool set = req.hdr.method == mad::method::kSet;
  const bool del = req.hdr.method == mad::method::kDelete;

  auto decoded = mad::DecodeRecord<mad::ServiceRecord>(data);
  if (!decoded.ok()) return error(mad::sa_status::kReqInvalid);
  mad::ServiceRecord want = *decoded;
  const bool trusted = options_.sa_key != 0 && req.sm_key == options_.sa_key;
  const PortId requester = s.lids ? s.lids->owner(msg.addr.lid) : kNoPort;

  if (set) {
    // A registration is named by its ServiceID and ServiceGID; a Set that leaves them out
    // of the mask names nothing (OpenSM refuses it too, with REQ_INVALID; INSUFFICIENT
    // COMPONENTS says what is wrong, as Delete's check below does).
    constexpr uint64_t kNamed = mad::sr_comp::kServiceId | mad::sr_comp::kServiceGid;
    if ((req.comp_mask & kNamed) != kNamed)
      return error(mad::sa_status::kReqInsufficientComponents);
    // What the mask leaves out is not the requester's to choose through the record's bytes:
    // no ServiceP_Key is the default partition's key and no ServiceLease an infinite lease,
    // as OpenSM's set method fills them. The key stored is the key checked below.
    if (!(req.comp_mask & mad::sr_comp::kServicePKey)) want.service_p_key = 0xFFFF;
    if (!(req.comp_mask & mad::sr_comp::kServiceLease))
      want.service_lease = mad::kServiceLeaseInfinite;
  }
  // A Delete names one registration by its key; a wider mask could wipe other clients'.
  if (del && (req.comp_mask & kKey) != kKey)
    return error(mad::sa_status::kReqInsufficientComponents);

  // Set and Delete (OpenSM validate_sr): the ServiceP_Key must be held by the requester and
  // by the service's port, so no host registers into or removes from a partition it is not
  // in.
  if ((set || del) && s.partitioned && !trusted) {
    auto port = want.GidGuid() == 0 ? std::nullopt : s.fabric().FindPort(Guid{want.GidGuid()});
    if (requester == kNoPort || !s.HoldsPKey(requester, want.service_p_key) ||
        (port && !s.HoldsPKey(*port, want.service_p_key))) {
      if (ShouldLogOccurrence(++counters_.service_pkey_refused)) {
        Log(LogName::kSa).info("SA-SR-004 ServiceRecord {:#x} {} from LID {} refused: "
                               "ServiceP_Key {:#06x} is not held by the requester or the "
                               "service port ({} so far)",
                               want.service_id, set ? "Set" : "Delete", msg.addr.lid.value(),
                               want.service_p_key, counters_.service_pkey_refused);
      }
      return error(mad::sa_status::kReqInvalid);
    }
  }
  // A registration with a ServiceKey belongs to whoever knows the key: replacing or
  // deleting it takes the same key (or the SA key). A zero key protects nothing.
  auto key_refused = [&](const mad::ServiceRecord& held) {
    if (trusted) return false;
    bool keyed = std::any_of(held.service_key.begin(), held.service_key.end(),
                             [](uint8_t b) { return b != 0; });
    if (!keyed || held.service_key == want.service_key) return false;
    if (ShouldLogOccurrence(++counters_.service_key_refused)) {
      Log(LogName::kSa).info("SA-SR-005 ServiceRecord {:#x} {} from LID {} refused: another "
                             "ServiceKey than the registration's ({} so far)",
                             held.service_id, set ? "Set" : "Delete", msg.addr.lid.value(),
                             counters_.service_key_refused);
    }
    return true;
  };

  if (set) {
    // The service must live on a port of this subnet.
    auto port = want.GidGuid() == 0 ? std::nullopt : s.fabric().FindPort(Guid{want.GidGuid()});
    if (!port || want.GidPrefix() != s.subnet_prefix) {
      Log(LogName::kSa).debug("ServiceRecord {:#x} names GID {:#x}:{:#x}, not a port here",
                              want.service_id, want.GidPrefix(), want.GidGuid());
      return error(mad::sa_status::kReqInvalidGid);
    }
    std::optional<int64_t> expires;
    if (want.service_lease != mad::kServiceLeaseInfinite)
      expires = now + int64_t{want.service_lease} * 1'000'000;
    const ha::ServiceKey key = KeyOf(want);
    auto held = service_index_.find(key);
    if (held != service_index_.end() && key_refused(held->second->record))
      return error(mad::sa_status::kReqDenied);
    const Guid owner = requester == kNoPort ? Guid{0} : s.fabric().port(requester).guid;
    if (held == service_index_.end()) {
      // A replacement takes nothing more; a new registration must fit both caps.
      auto mine = services_by_owner_.find(owner);
      if (mine != services_by_owner_.end() && mine->second >= options_.services_per_port) {
        const uint64_t n = ++counters_.service_port_cap_refused;
        if (ShouldLogOccurrence(n)) {
          Log(LogName::kSa).warn("SA-SR-006 ServiceRecord {:#x} Set from LID {} refused: its "
                                 "port holds {} registrations already ({} refused so far)",
                                 want.service_id, msg.addr.lid.value(),
                                 options_.services_per_port, n);
        }
        return error(mad::sa_status::kNoResources);
      }
      if (services_.size() >= options_.services_total) {
        const uint64_t n = ++counters_.service_total_cap_refused;
        if (ShouldLogOccurrence(n)) {
          Log(LogName::kSa).warn("SA-SR-007 ServiceRecord {:#x} Set from LID {} refused: the SA "
                                 "holds {} registrations, its limit ({} refused so far)",
                                 want.service_id, msg.addr.lid.value(),
                                 options_.services_total, n);
        }
        return error(mad::sa_status::kNoResources);
      }
    }
    PutService(want, expires, owner);
    MarkServiceChanged(key, /*removed=*/false);
    ++counters_.services_registered;
    return one(mad::method::kGetResp, want);
  }

  if (del) {
    auto held = service_index_.find(KeyOf(want));
    // The key names the registration; the rest of the mask must match it too.
    if (held == service_index_.end() ||
        !mad::Matches<mad::ServiceRecord>(req.comp_mask, data, ServiceWire(held->second->record)))
      return error(mad::sa_status::kNoRecords);
    if (key_refused(held->second->record)) return error(mad::sa_status::kReqDenied);
    mad::ServiceRecord gone = held->second->record;
    DropService(held->second);
    MarkServiceChanged(KeyOf(gone), /*removed=*/true);
    ++counters_.services_deleted;
    return one(mad::method::kDeleteResp, gone);
  }

  if (req.hdr.method != mad::method::kGet && req.hdr.method != mad::method::kGetTable)
    return error(mad::mad_status::kMethodAttrUnsupported);
  Query q;
  q.mad = req;
  q.data = data;
  q.get = req.hdr.method == mad::method::kGet;
  q.trusted = trusted;
  Collector<mad::ServiceRecord> c(q);
  for (const Service& sv : services_) {
    // OpenSM: a requester sees a service only if it holds the service's P_Key.
    if (s.partitioned && !q.trusted && sv.record.service_p_key != 0 &&
        (requester == kNoPort || !s.HoldsPKey(requester, sv.record.service_p_key)))
      continue;
    // The ServiceKey is shown only to the trusted (15.2.5.14; OpenSM sr_rcv_respond), so
    // no one learns the key that guards a registration by reading it. Matching (a Get by
    // ServiceKey) still compares the real key.
    mad::ServiceRecord shown = sv.record;
    uint64_t matched = 0;
    if (!q.trusted) {
      auto wire = ServiceWire(sv.record);
      if (!mad::Matches<mad::ServiceRecord>(req.comp_mask, data, wire)) continue;
      shown.service_key.fill(0);
      matched = ~uint64_t{0};  // compared above, against the real key
    }
    if (!c.Add(shown, matched)) break;
  }
  return AnswerCollected(msg, req, q, c, counters_);
}

// InformInfo: Set only (13.4.8.3), answered GetResp with a copy of the request (Subscribe
// cleared on an error). InformInfoRecord: Get/GetTable by component mask (15.2.5.12).
std::optional<mad::MadMessage> SaServer::AnswerInform(const mad::MadMessage& msg,
                                                      const mad::SaMad& req,
                                                      std::span<const uint8_t> data,
                                                      bool trusted) {
  const SaSnapshot& s = *snapshot_;
  if (req.hdr.attr_id == mad::sa_attr::kInformInfo) {
    if (req.hdr.method != mad::method::kSet) {
      ++counters_.by_error[mad::mad_status::kMethodAttrUnsupported];
      return Frame(msg, req, static_cast<uint8_t>(req.hdr.method | mad::method::kResponseBit),
                   mad::mad_status::kMethodAttrUnsupported, 0);
    }
    auto ii = mad::Decode<mad::InformInfo>(data);
    InformSetAnswer a;
    if (ii.ok()) {
      a = inform_.Set(s.fabric(), s.subnet_prefix, *ii, msg.addr, trusted);
    } else {
      a.status = mad::sa_status::kReqInvalid;
    }
    if (a.status != kNoStatus) ++counters_.by_error[a.status];
    mad::MadMessage out = Frame(msg, req, mad::method::kGetResp, a.status, 0);
    mad::EncodeTo(a.info, std::span<uint8_t>(out.bytes).subspan(mad::kSaHeaderSize));
    return out;
  }
  auto error = [&](uint16_t status) {
    ++counters_.by_error[status];
    return Frame(msg, req, static_cast<uint8_t>(req.hdr.method | mad::method::kResponseBit),
                 status, 0);
  };
  if (req.hdr.method != mad::method::kGet && req.hdr.method != mad::method::kGetTable)
    return error(mad::mad_status::kMethodAttrUnsupported);
  Query q;
  q.mad = req;
  q.data = data;
  q.get = req.hdr.method == mad::method::kGet;
  Collector<mad::InformInfoRecord> c(q);
  for (const mad::InformInfoRecord& r : inform_.Records(trusted))
    if (!c.Add(r)) break;
  return AnswerCollected(msg, req, q, c, counters_);
}

}  // namespace ibsm::sm
