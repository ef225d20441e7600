#include "sm/sa/inform.h"

#include <algorithm>
#include <array>

#include "base/log.h"
#include "base/log_limit.h"
#include "mad/attr/sa_records.h"

namespace ibsm::sm {
namespace {

constexpr uint32_t kGsiQkey = 0x80010000;
constexpr uint16_t kMaxUnicastLid = 0xBFFF;
constexpr uint16_t kFirstSecurityTrap = mad::trap::kBadMKey;       // 256
constexpr uint16_t kLastSecurityTrap = mad::trap::kSwitchBadPKey;  // 259

bool GidIsZero(const std::array<uint8_t, 16>& gid) {
  return std::all_of(gid.begin(), gid.end(), [](uint8_t b) { return b == 0; });
}

uint64_t GidPart(const std::array<uint8_t, 16>& gid, size_t from) {
  uint64_t v = 0;
  for (size_t i = from; i < from + 8; ++i) v = (v << 8) | gid[i];
  return v;
}

bool IsSecurityTrap(const mad::Notice& n) {
  return n.is_generic == 1 && n.trap_number_or_device_id >= kFirstSecurityTrap &&
         n.trap_number_or_device_id <= kLastSecurityTrap;
}

std::vector<uint8_t> RecordWire(const mad::InformInfoRecord& r) {
  std::vector<uint8_t> buf(mad::Layout<mad::InformInfoRecord>::kSize);
  mad::EncodeRecord(r, buf);
  return buf;
}

// A LID range with end 0 means the one LID `begin` (OpenSM's validate_ports_access_rights);
// kept that way so matching reads begin <= LID <= end.
void NormalizeRange(mad::InformInfo* ii) {
  if (!GidIsZero(ii->gid) || ii->lid_range_begin == mad::kInformAllLids) return;
  if (ii->lid_range_end == 0) ii->lid_range_end = ii->lid_range_begin;
  if (ii->lid_range_end > kMaxUnicastLid && ii->lid_range_begin <= kMaxUnicastLid)
    ii->lid_range_end = kMaxUnicastLid;
}

}  // namespace

std::array<uint8_t, 16> PortGid(uint64_t prefix, Guid guid) {
  std::array<uint8_t, 16> gid{};
  for (size_t i = 0; i < 8; ++i) {
    gid[i] = static_cast<uint8_t>(prefix >> (56 - 8 * i));
    gid[8 + i] = static_cast<uint8_t>(guid.value() >> (56 - 8 * i));
  }
  return gid;
}

std::vector<uint8_t> SubscriptionKey(const Subscription& s) {
  mad::InformInfo id = s.record.inform_info;
  id.subscribe = 0;
  id.qpn = 0;
  id.resp_time_value = 0;
  if (!GidIsZero(id.gid)) {
    id.lid_range_begin = 0;
    id.lid_range_end = 0;
  }
  std::vector<uint8_t> key(5 + mad::Layout<mad::InformInfo>::kSize);
  const uint16_t lid = s.report_to.lid.value();
  key[0] = static_cast<uint8_t>(lid >> 8);
  key[1] = static_cast<uint8_t>(lid);
  key[2] = static_cast<uint8_t>(s.report_to.qpn >> 16);
  key[3] = static_cast<uint8_t>(s.report_to.qpn >> 8);
  key[4] = static_cast<uint8_t>(s.report_to.qpn);
  mad::EncodeTo(id, std::span<uint8_t>(key).subspan(5));
  return key;
}

struct InformManager::Report {
  mad::MadMessage msg;
  int attempts = 0;
  uint16_t trap = 0;
};

InformManager::InformManager(mad::Transport& transport, InformOptions options,
                             ha::SaRows* store)
    : transport_(transport), options_(options), store_(store) {}

InformManager::~InformManager() = default;

Status InformManager::Load() {
  if (!store_) return Status();
  IBSM_ASSIGN_OR_RETURN(std::vector<ha::InformRow> rows, store_->LoadInformSubscriptions());
  std::vector<Subscription> loaded;
  for (const ha::InformRow& row : rows) {
    auto r = mad::DecodeRecord<mad::InformInfoRecord>(row.record);
    if (!r.ok()) return r.status();
    Subscription s;
    s.record = *r;
    s.report_to.lid = Lid{row.report_lid};
    s.report_to.qpn = row.report_qpn;
    s.report_to.qkey = row.report_qkey;
    s.report_to.pkey_index = row.pkey_index;
    s.report_to.sl = row.sl;
    s.trusted = row.trusted;
    loaded.push_back(s);
  }
  subs_ = std::move(loaded);
  Log(LogName::kSa).info("{} event subscription(s) restored from the state file", subs_.size());
  return Status();
}

Status InformManager::Persist(const std::vector<const Subscription*>& upserts,
                              const std::vector<std::vector<uint8_t>>& removals) {
  if (!store_) return Status();
  std::vector<ha::InformRow> rows;
  for (const Subscription* s : upserts) {
    ha::InformRow row;
    row.key = SubscriptionKey(*s);
    row.record = RecordWire(s->record);
    row.report_lid = s->report_to.lid.value();
    row.report_qpn = s->report_to.qpn & 0xFFFFFF;
    row.report_qkey = s->report_to.qkey;
    row.pkey_index = s->report_to.pkey_index;
    row.sl = s->report_to.sl & 0xF;
    row.trusted = s->trusted;
    rows.push_back(std::move(row));
  }
  Status st = store_->SaveInformSubscriptions(rows, removals);
  if (!st.ok()) ++counters_.state_failures;
  return st;
}

InformSetAnswer InformManager::Set(const Fabric& fabric, uint64_t subnet_prefix,
                                   const mad::InformInfo& req, const mad::MadAddress& from,
                                   bool trusted) {
  InformSetAnswer answer;
  answer.info = req;
  auto reject = [&](uint16_t status, std::string_view why) {
    ++counters_.rejected;
    Log(LogName::kSa).debug("SA-INF-001 InformInfo Set from LID {} rejected: {}",
                            from.lid.value(), why);
    answer.status = status;
    answer.info.subscribe = 0;  // o13-13.1.1
    return answer;
  };
  if (req.subscribe > 1) return reject(mad::sa_status::kReqInvalid, "Subscribe above 1");
  auto requester = fabric.FindPortByLid(from.lid);
  if (!requester) return reject(mad::sa_status::kReqInvalid, "requester LID is not a port here");

  Subscription sub;
  sub.record.subscriber_gid = PortGid(subnet_prefix, fabric.port(*requester).guid);
  sub.record.enum_ = 0;  // as OpenSM: one Enum per subscriber
  sub.record.inform_info = req;
  sub.record.inform_info.subscribe = 1;
  sub.report_to = from;
  sub.report_to.qkey = kGsiQkey;
  // An SA request comes from a GSI QP; QP0 never carries one, and ibsim's preload reports
  // the source QP as 0: Reports then go to QP1, as the SA's answers do.
  if (sub.report_to.qpn == 0) sub.report_to.qpn = 1;
  sub.report_to.qpn &= 0xFFFFFF;
  sub.record.inform_info.qpn = sub.report_to.qpn;
  NormalizeRange(&sub.record.inform_info);
  sub.trusted = trusted;
  const std::vector<uint8_t> key = SubscriptionKey(sub);
  auto same = std::find_if(subs_.begin(), subs_.end(),
                           [&](const Subscription& s) { return SubscriptionKey(s) == key; });

  if (req.subscribe == 0) {
    if (same == subs_.end()) return reject(mad::sa_status::kReqInvalid, "no such subscription");
    if (!Persist({}, {key}).ok()) {
      Log(LogName::kSa).warn("SA-INF-003 unsubscribe of LID {} refused: state file not written",
                             from.lid.value());
      return reject(mad::sa_status::kNoResources, "state file");
    }
    subs_.erase(same);
    // One line per request would let any host fill the log: the first ones, then a sample.
    if (ShouldLogOccurrence(++counters_.unsubscribed)) {
      Log(LogName::kSa).info("event subscription of LID {} QPN {:#x} removed ({} so far)",
                             from.lid.value(), from.qpn, counters_.unsubscribed);
    }
    return answer;
  }

  const mad::InformInfo& ii = sub.record.inform_info;
  if (ii.is_generic > 1) return reject(mad::sa_status::kReqInvalid, "IsGeneric above 1");
  if (!GidIsZero(ii.gid)) {
    auto port = fabric.FindPort(Guid{GidPart(ii.gid, 8)});
    if (GidPart(ii.gid, 0) != subnet_prefix || !port)
      return reject(mad::sa_status::kReqInvalidGid, "GID is not a port of this subnet");
  } else if (ii.lid_range_begin != mad::kInformAllLids) {
    if (ii.lid_range_begin == 0 || ii.lid_range_begin > kMaxUnicastLid ||
        ii.lid_range_end < ii.lid_range_begin)
      return reject(mad::sa_status::kReqInvalid, "LID range is not a unicast range");
  }
  if (ii.is_generic == 1) {
    if (ii.type != mad::kInformAnyType && ii.type > static_cast<uint16_t>(mad::NoticeType::kInfo))
      return reject(mad::sa_status::kReqInvalid, "unknown notice Type");
    const uint32_t pt = ii.producer_type_or_vendor_id;
    if (pt != mad::kInformAnyProducer &&
        (pt < mad::producer::kCa || pt > mad::producer::kClassManager))
      return reject(mad::sa_status::kReqInvalid, "unknown ProducerType");
    // C15-0.2-1.16: security traps only for a trusted requester (OpenSM ERR 430B).
    const uint16_t t = ii.trap_number_or_device_id;
    if (!trusted && t >= kFirstSecurityTrap && t <= kLastSecurityTrap)
      return reject(mad::sa_status::kReqInvalid, "security trap from an untrusted requester");
  }
  if (same == subs_.end()) {
    const Guid subscriber = fabric.port(*requester).guid;
    size_t mine = std::count_if(subs_.begin(), subs_.end(), [&](const Subscription& s) {
      return GidPart(s.record.subscriber_gid, 8) == subscriber.value();
    });
    if (subs_.size() >= options_.max_subscriptions || mine >= options_.max_per_subscriber) {
      Log(LogName::kSa).warn("SA-INF-004 subscription of port {} refused: {} in all, {} its own",
                             ToString(subscriber), subs_.size(), mine);
      return reject(mad::sa_status::kNoResources, "too many subscriptions");
    }
  }
  if (!Persist({&sub}, {}).ok()) {
    Log(LogName::kSa).warn("SA-INF-002 subscription of LID {} refused: state file not written",
                           from.lid.value());
    return reject(mad::sa_status::kNoResources, "state file");
  }
  if (same != subs_.end()) {
    *same = sub;
  } else {
    subs_.push_back(sub);
  }
  if (ShouldLogOccurrence(++counters_.subscribed)) {
    Log(LogName::kSa).info(
        "event subscription of LID {} QPN {:#x}: generic {} type {:#x} trap {:#x} producer "
        "{:#x} ({} so far)",
        from.lid.value(), from.qpn, ii.is_generic, ii.type, ii.trap_number_or_device_id,
        ii.producer_type_or_vendor_id, counters_.subscribed);
  }
  return answer;
}

std::vector<mad::InformInfoRecord> InformManager::Records(bool trusted) const {
  std::vector<mad::InformInfoRecord> out;
  for (const Subscription& s : subs_) {
    out.push_back(s.record);
    if (!trusted) out.back().inform_info.qpn = 0;
  }
  return out;
}

bool InformManager::Matches(const mad::InformInfo& ii, const mad::Notice& n) {
  if (!GidIsZero(ii.gid)) {
    if (ii.gid != n.issuer_gid) return false;
  } else if (ii.lid_range_begin != mad::kInformAllLids) {
    if (n.issuer_lid < ii.lid_range_begin || n.issuer_lid > ii.lid_range_end) return false;
  }
  if ((ii.is_generic != 0) != (n.is_generic != 0)) return false;
  if (ii.type != mad::kInformAnyType && ii.type != n.type) return false;
  if (ii.trap_number_or_device_id != mad::kInformAnyTrap &&
      ii.trap_number_or_device_id != n.trap_number_or_device_id)
    return false;
  if (ii.producer_type_or_vendor_id != mad::kInformAnyProducer &&
      ii.producer_type_or_vendor_id != n.producer_type_or_vendor_id)
    return false;
  return true;
}

size_t InformManager::Publish(const mad::Notice& notice) {
  ++counters_.notices_published;
  size_t sent = 0;
  for (const Subscription& s : subs_) {
    if (!Matches(s.record.inform_info, notice)) continue;
    if (IsSecurityTrap(notice) && !s.trusted) continue;  // C15-0.2-1.16
    size_t& to_sub = in_flight_to_[{s.report_to.lid.value(), s.report_to.qpn}];
    if (in_flight_ >= options_.max_reports_in_flight ||
        to_sub >= options_.max_reports_per_subscriber) {
      ++counters_.reports_dropped;
      if (!reports_dropping_) {
        reports_dropping_ = true;
        Log(LogName::kSa).warn("SA-INF-011 Report of notice {} to LID {} QPN {:#x} dropped: {} "
                               "Reports wait for an answer ({} to that subscriber); more are "
                               "dropped without a line until one is answered",
                               notice.trap_number_or_device_id, s.report_to.lid.value(),
                               s.report_to.qpn, in_flight_, to_sub);
      }
      continue;
    }
    ++to_sub;
    mad::SaMad report;
    report.hdr.mgmt_class = static_cast<uint8_t>(mad::MgmtClass::kSubnAdm);
    report.hdr.class_version = mad::kSaClassVersion;
    report.hdr.method = mad::method::kReport;
    report.hdr.attr_id = mad::attr::kNotice;
    auto r = std::make_shared<Report>();
    r->msg.bytes.resize(mad::kMadSize);
    mad::EncodeSa(report, r->msg.bytes);
    mad::EncodeTo(notice, std::span<uint8_t>(r->msg.bytes).subspan(mad::kSaHeaderSize));
    r->msg.addr = s.report_to;
    r->trap = notice.trap_number_or_device_id;
    ++counters_.reports_sent;
    ++in_flight_;
    ++sent;
    Log(LogName::kSa).debug("Report of notice {} from LID {} to LID {} QPN {:#x}", r->trap,
                            notice.issuer_lid, s.report_to.lid.value(), s.report_to.qpn);
    SendAttempt(std::move(r));
  }
  return sent;
}

void InformManager::SendAttempt(std::shared_ptr<Report> report) {
  ++report->attempts;
  mad::SendOptions once{options_.report.timeout, 0};
  std::weak_ptr<char> alive = alive_;
  transport_.Send(report->msg, once, [this, alive, report](Result<mad::MadMessage> r) {
    if (alive.expired()) return;
    if (r.ok()) {
      auto hdr = r->header();
      if (hdr.ok() && hdr->method == mad::method::kReportResp) {
        ++counters_.reports_acked;
        ReportDone(report->msg.addr);
        reports_dropping_ = false;
        return;
      }
    }
    const bool retry = (r.ok() || r.status().code() == StatusCode::kTimeout) &&
                       report->attempts <= options_.report.retries;
    if (retry) {
      ++counters_.report_retries;
      SendAttempt(report);
      return;
    }
    ++counters_.reports_unacked;
    ReportDone(report->msg.addr);
    Log(LogName::kSa).warn("SA-INF-010 Report of notice {} to LID {} QPN {:#x} not answered "
                           "after {} attempt(s): {}",
                           report->trap, report->msg.addr.lid.value(), report->msg.addr.qpn,
                           report->attempts, r.ok() ? "not a ReportResponse" : r.status().message());
  });
}

void InformManager::ReportDone(const mad::MadAddress& to) {
  --in_flight_;
  auto it = in_flight_to_.find({to.lid.value(), to.qpn});
  if (it != in_flight_to_.end() && --it->second == 0) in_flight_to_.erase(it);
}

size_t InformManager::DropGone(const Fabric& fabric) {
  std::vector<std::vector<uint8_t>> gone;
  for (const Subscription& s : subs_) {
    if (!fabric.FindPort(Guid{GidPart(s.record.subscriber_gid, 8)}))
      gone.push_back(SubscriptionKey(s));
  }
  if (gone.empty()) return 0;
  // Memory drops them even if the file cannot; Load would bring them back after a restart
  // and the first sweep drops them again.
  if (Status st = Persist({}, gone); !st.ok()) {
    Log(LogName::kSa).warn("SA-INF-005 dropped subscriptions not removed from the state file: {}",
                           st.ToString());
  }
  std::erase_if(subs_, [&](const Subscription& s) {
    return std::find(gone.begin(), gone.end(), SubscriptionKey(s)) != gone.end();
  });
  counters_.subscribers_dropped += gone.size();
  Log(LogName::kSa).info("{} event subscription(s) dropped: their subscriber left the fabric",
                         gone.size());
  return gone.size();
}

void InformManager::OnLateReportResponse(const mad::MadMessage&) {
  ++counters_.report_responses_late;
}

}  // namespace ibsm::sm
