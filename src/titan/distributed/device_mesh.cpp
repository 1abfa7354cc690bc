#include "titan/distributed/device_mesh.h"

#include <stdexcept>
#include <utility>
#include <vector>

namespace titan::distributed {

DeviceMesh DeviceMesh::build(const ParallelDims& dims, World& world) {
  using D = MeshDim;
  static const std::vector<std::pair<std::string, std::vector<D>>> kMeshes = {
      {"pp", {D::PP}},
      {"dp_replicate", {D::DpReplicate}},
      {"dp_shard", {D::DpShard}},
      {"cp", {D::CP}},
      {"tp", {D::TP}},
      {"dp", {D::DpReplicate, D::DpShard}},
      {"dp_shard_cp", {D::DpShard, D::CP}},
      {"loss", {D::DpReplicate, D::DpShard, D::CP}},
  };
  DeviceMesh mesh;
  const int rank = world.info().rank;
  for (const auto& [name, mesh_dims] : kMeshes) {
    mesh.groups_[name] = world.new_group(dims.group_ranks(rank, mesh_dims), name);
  }
  if (dims.ep_enabled()) {
    mesh.groups_["ep"] = world.new_group(dims.sparse_group_ranks(rank, true), "ep");
    mesh.groups_["efsdp"] = world.new_group(dims.sparse_group_ranks(rank, false), "efsdp");
  }
  return mesh;
}

std::shared_ptr<ProcessGroup> DeviceMesh::operator[](const std::string& name) const {
  auto it = groups_.find(name);
  if (it == groups_.end()) throw std::out_of_range("no mesh dimension named '" + name + "'");
  return it->second;
}

}  // namespace titan::distributed
