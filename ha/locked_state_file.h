// A StateFile shared by two threads: the io thread (SA, multicast, HA and AR rows, events) and
// the state writer's thread (sweep rows, snapshots, LFT digests; sm/record/state_writer.h).
// Each call runs under one mutex around the wrapped file, which is not thread-safe
// (StateStore's contract). A call waits at most for the one call the other thread is in; the
// writer keeps its calls short (a snapshot is rendered before its write takes the lock).
#pragma once

#include <mutex>

#include "ha/state_rows.h"

namespace ibsm::ha {

class LockedStateFile final: public StateFile {
 public:
  // REQUIRES: `inner` outlives this, and nothing uses it but through this.
  explicit LockedStateFile(StateFile& inner): inner_(inner) {}

  Result<std::vector<Guid2LidEntry>> LoadGuid2Lid() override;
  Status SaveGuid2Lid(const std::vector<Guid2LidEntry>& upserts,
                      const std::vector<Guid>& removals) override;
  Status ReplaceGuid2Lid(const std::vector<Guid2LidEntry>& all) override;
  Status SaveLftDigests(const std::vector<LftDigestEntry>& upserts,
                        const std::vector<Guid>& removals) override;
  Result<std::vector<LftDigestEntry>> LoadLftDigests() override;
  Status SaveArGroupIds(const std::map<Guid, uint16_t>& ids) override;
  Result<std::map<Guid, uint16_t>> LoadArGroupIds() override;

  Result<int64_t> RecordSweep(const SweepRow& row) override;
  Result<std::vector<SweepRow>> RecentSweeps(size_t n) override;
  Status RecordEvent(const EventRow& row) override;
  Status RecordEvents(const std::vector<EventRow>& rows) override;
  Result<std::vector<EventRow>> RecentEvents(size_t n, int64_t since_us,
                                             std::string_view kind) override;
  Result<uint64_t> CountEvents(int64_t since_us) override;
  Status Prune(size_t keep_sweeps, size_t keep_events) override;

  Status SetValue(std::string_view key, std::string_view value) override;
  Result<std::optional<std::string>> GetValue(std::string_view key) override;
  Status UpsertPeer(const PeerRow& peer) override;
  Status RemovePeer(Guid guid) override;
  Result<std::vector<PeerRow>> Peers() override;

  Status SaveServiceRecords(const std::vector<ServiceRow>& upserts,
                            const std::vector<ServiceKey>& removals) override;
  Result<std::vector<ServiceRow>> LoadServiceRecords() override;
  Status SaveInformSubscriptions(const std::vector<InformRow>& upserts,
                                 const std::vector<std::vector<uint8_t>>& removals) override;
  Result<std::vector<InformRow>> LoadInformSubscriptions() override;
  Status SaveMulticastGroups(const std::vector<McGroupRow>& groups) override;
  Status SaveMulticastChanges(const std::vector<McGroupRow>& upserts,
                              const std::vector<std::array<uint8_t, 16>>& removals) override;
  Result<std::vector<McGroupRow>> LoadMulticastGroups() override;

  Status SaveSnapshot(std::string_view name, std::string_view json) override;
  // `produce` runs under the lock: the other thread waits for all of it.
  Status SaveSnapshotStreamed(std::string_view name,
                              const std::function<void(const SnapshotSink&)>& produce) override;
  Result<std::optional<SnapshotRow>> LoadSnapshot(std::string_view name) override;

  Status RecordPerfHistory(const std::vector<PerfHistoryRow>& rows, size_t keep_sweeps) override;
  Result<std::vector<PerfHistoryRow>> LoadPerfHistory(std::optional<Guid> node,
                                                      size_t limit) override;
  Result<int64_t> LastPerfSweep() override;

  const std::string& path() const override { return inner_.path(); }  // fixed at open
  bool degraded() const override;
  Status RetryWritable() override;
  uint64_t transactions() const override;

 private:
  // Runs `call` on the wrapped file under the lock.
  template <typename Call>
  auto Locked(Call call) const {
    std::lock_guard<std::mutex> lock(mu_);
    return call(inner_);
  }

  StateFile& inner_;
  mutable std::mutex mu_;
};

}  // namespace ibsm::ha
