#include "titan/components/tensorboard/writer.h"

#include <fmt/format.h>
#include <isa-l/crc.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "titan/components/tensorboard/event.pb.h"
#include "titan/errors.h"

namespace titan::components::tensorboard {
namespace {

double wall_time() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

// ISA-L's crc32_iscsi neither inverts its input nor its result: CRC-32C does both.
uint32_t crc32c(std::string_view data) {
  auto* bytes = reinterpret_cast<unsigned char*>(const_cast<char*>(data.data()));
  return ~crc32_iscsi(bytes, static_cast<int>(data.size()), 0xFFFFFFFFu);
}

}  // namespace

uint32_t masked_crc32c(std::string_view data) {
  const uint32_t crc = crc32c(data);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

EventWriter::EventWriter(const std::string& folder) {
  std::filesystem::create_directories(folder);
  path_ = fmt::format("{}/events.out.tfevents.{:010d}.{}.{}.0", folder,
                      static_cast<int64_t>(wall_time()), host_name(), getpid());
  out_.open(path_, std::ios::binary | std::ios::app);
  if (!out_) throw Error("cannot write TensorBoard event file " + path_);
  Event first;
  first.set_wall_time(wall_time());
  first.set_file_version("brain.Event:2");
  write_record(first.SerializeAsString());
}

void EventWriter::add_scalars(int64_t step,
                              const std::vector<std::pair<std::string, double>>& scalars) {
  Event event;
  event.set_wall_time(wall_time());
  event.set_step(step);
  for (const auto& [tag, value] : scalars) {
    auto* v = event.mutable_summary()->add_value();
    v->set_tag(tag);
    v->set_simple_value(static_cast<float>(value));
  }
  write_record(event.SerializeAsString());
}

void EventWriter::write_record(const std::string& event) {
  char header[8];
  const uint64_t length = event.size();
  for (int i = 0; i < 8; ++i) header[i] = static_cast<char>((length >> (8 * i)) & 0xFF);
  auto put_u32 = [this](uint32_t x) {
    char b[4];
    for (int i = 0; i < 4; ++i) b[i] = static_cast<char>((x >> (8 * i)) & 0xFF);
    out_.write(b, 4);
  };
  out_.write(header, 8);
  put_u32(masked_crc32c(std::string_view(header, 8)));
  out_.write(event.data(), static_cast<std::streamsize>(event.size()));
  put_u32(masked_crc32c(event));
  out_.flush();
  if (!out_) throw Error("cannot write TensorBoard event file " + path_);
}

}  // namespace titan::components::tensorboard
