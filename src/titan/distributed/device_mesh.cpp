#include "titan/distributed/device_mesh.h"

#include <stdexcept>
#include <string>
#include <vector>

namespace titan::distributed {
namespace {

static_assert(static_cast<int>(MeshGroup::TP) == static_cast<int>(MeshDim::TP),
              "the first MeshGroups are the mesh dimensions, in order");

struct GroupSpec {
  MeshGroup group;
  const char* name;
  std::vector<MeshDim> dims;  // empty: the sparse mesh's (expert parallelism)
};

// Every group, in MeshGroup's order; the dimensions' own groups take their names from the
// mesh's table.
const std::vector<GroupSpec>& group_specs() {
  using D = MeshDim;
  using G = MeshGroup;
  static const std::vector<GroupSpec> specs = [] {
    std::vector<GroupSpec> out;
    for (const auto& d : config::kMeshDims) out.push_back({MeshGroup(int(d.dim)), d.name, {d.dim}});
    out.push_back({G::Dp, "dp", {D::DpReplicate, D::DpShard}});
    out.push_back({G::DpShardCp, "dp_shard_cp", {D::DpShard, D::CP}});
    out.push_back({G::Loss, "loss", {D::DpReplicate, D::DpShard, D::CP}});
    out.push_back({G::EP, "ep", {}});
    out.push_back({G::EFsdp, "efsdp", {}});
    return out;
  }();
  return specs;
}

}  // namespace

const char* mesh_group_name(MeshGroup group) { return group_specs()[static_cast<int>(group)].name; }

DeviceMesh DeviceMesh::build(const ParallelDims& dims, World& world) {
  DeviceMesh mesh;
  const int rank = world.info().rank;
  for (const auto& spec : group_specs()) {
    std::vector<int> ranks;
    if (!spec.dims.empty()) {
      ranks = dims.group_ranks(rank, spec.dims);
    } else if (dims.ep_enabled()) {
      ranks = dims.sparse_group_ranks(rank, spec.group == MeshGroup::EP);
    } else {
      continue;
    }
    mesh.groups_[static_cast<int>(spec.group)] = world.new_group(ranks, spec.name);
  }
  return mesh;
}

std::shared_ptr<ProcessGroup> DeviceMesh::operator[](MeshGroup group) const {
  const auto& found = groups_[static_cast<int>(group)];
  if (!found) {
    throw std::out_of_range(std::string("no mesh group '") + mesh_group_name(group) +
                            "' (ep and efsdp exist with expert parallelism only)");
  }
  return found;
}

}  // namespace titan::distributed
