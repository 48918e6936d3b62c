#include "model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/w4_dequant.h"

namespace fovea {
namespace fs = std::filesystem;
namespace {

constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // the reference implementation's limit

struct FileMapping {
  void* addr = nullptr;
  size_t size = 0;
};

// Maps the whole file read-only; the returned pointer owns the mapping.
std::shared_ptr<FileMapping> map_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  FOVEA_CHECK(fd >= 0, "cannot open ", path, ": ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    FOVEA_FAIL("cannot stat ", path, ": ", std::strerror(err));
  }
  auto mapping = std::shared_ptr<FileMapping>(new FileMapping, [](FileMapping* m) {
    if (m->addr) ::munmap(m->addr, m->size);
    delete m;
  });
  mapping->size = size_t(st.st_size);
  if (mapping->size > 0) {
    void* addr = ::mmap(nullptr, mapping->size, PROT_READ, MAP_PRIVATE, fd, 0);
    const int err = errno;
    ::close(fd);
    FOVEA_CHECK(addr != MAP_FAILED, "cannot mmap ", path, ": ", std::strerror(err));
    mapping->addr = addr;
  } else {
    ::close(fd);
  }
  return mapping;
}

uint64_t read_le64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  auto mapping = map_file(path);
  mapping_ = mapping;
  const auto* bytes = static_cast<const unsigned char*>(mapping->addr);
  FOVEA_CHECK(mapping->size >= 8, path, ": truncated safetensors file (", mapping->size, " bytes, no header length)");
  const uint64_t header_size = read_le64(bytes);
  FOVEA_CHECK(header_size <= kMaxHeaderBytes && header_size <= mapping->size - 8, path, ": header length ", header_size,
              " runs past the end of the file (", mapping->size, " bytes): truncated or not safetensors");
  data_ = reinterpret_cast<const char*>(bytes) + 8 + header_size;
  parse_header(reinterpret_cast<const char*>(bytes) + 8, size_t(header_size), mapping->size - 8 - header_size);
}

void SafetensorsFile::parse_header(const char* text, size_t size, size_t data_size) {
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text, text + size);
  } catch (const nlohmann::json::exception& e) {
    FOVEA_FAIL(path_, ": bad JSON header: ", e.what());
  }
  FOVEA_CHECK(header.is_object(), path_, ": the header is not a JSON object");
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      FOVEA_CHECK(info.is_object(), path_, ": __metadata__ is not an object");
      for (const auto& [k, v] : info.items())
        if (v.is_string()) metadata_[k] = v.get<std::string>();
      continue;
    }
    const std::string where = str(path_, ": tensor ", name);
    FOVEA_CHECK(info.is_object() && info.contains("dtype") && info.contains("shape") && info.contains("data_offsets"),
                where, ": needs dtype, shape and data_offsets");
    Entry e{};
    FOVEA_CHECK(info["dtype"].is_string() && dtype_from_name(info["dtype"].get<std::string>(), &e.dtype), where,
                ": unknown dtype ", info["dtype"].dump());
    const auto& shape = info["shape"];
    FOVEA_CHECK(shape.is_array(), where, ": shape is not an array");
    uint64_t numel = 1;
    for (const auto& d : shape) {
      FOVEA_CHECK(d.is_number_unsigned() || (d.is_number_integer() && d.get<int64_t>() >= 0), where, ": bad dimension ",
                  d.dump());
      const uint64_t dim = d.get<uint64_t>();
      FOVEA_CHECK(dim == 0 || numel <= (uint64_t(1) << 62) / dim, where, ": shape too large");
      numel *= dim;
      e.shape.push_back(int64_t(dim));
    }
    const auto& offsets = info["data_offsets"];
    FOVEA_CHECK(
        offsets.is_array() && offsets.size() == 2 && offsets[0].is_number_unsigned() && offsets[1].is_number_unsigned(),
        where, ": data_offsets must be two non-negative integers");
    e.begin = offsets[0].get<size_t>();
    e.end = offsets[1].get<size_t>();
    FOVEA_CHECK(e.begin <= e.end && e.end <= data_size, where, ": data_offsets [", e.begin, ", ", e.end,
                ") run past the end of the data (", data_size, " bytes): truncated file?");
    FOVEA_CHECK(e.end - e.begin == numel * dtype_size(e.dtype), where, ": data_offsets hold ", e.end - e.begin,
                " bytes but shape ", shape_str(e.shape), " x ", dtype_name(e.dtype), " needs ",
                numel * dtype_size(e.dtype));
    entries_.emplace(name, std::move(e));
  }
  // Overlap check: sorted by start, each non-empty tensor must begin at or after the previous one's end.
  std::vector<std::pair<const std::string*, const Entry*>> by_offset;
  for (const auto& [name, e] : entries_)
    if (e.end > e.begin) by_offset.emplace_back(&name, &e);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const auto& a, const auto& b) { return a.second->begin < b.second->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    FOVEA_CHECK(by_offset[i].second->begin >= by_offset[i - 1].second->end, path_, ": tensor ", *by_offset[i].first,
                " overlaps tensor ", *by_offset[i - 1].first, " in the data section");
  }
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  for (const auto& [name, e] : entries_) out.push_back(name);
  return out;
}

Tensor SafetensorsFile::tensor(const std::string& name) const {
  const auto it = entries_.find(name);
  FOVEA_CHECK(it != entries_.end(), path_, ": no tensor ", name);
  const Entry& e = it->second;
  Tensor t;
  t.dtype = e.dtype;
  t.device = Device::CPU;
  t.shape = e.shape;
  const char* p = data_ + e.begin;
  if (reinterpret_cast<uintptr_t>(p) % dtype_size(e.dtype) == 0) {
    t.data = const_cast<char*>(p);  // read-only mapping: kernels only read weights
    // When the last copy of this view goes, its whole pages leave the process's resident memory (the loader
    // reads each weight once, so a 150 GB checkpoint does not stay resident while it streams to the GPU). The
    // mapping is private and never written: a later read of the range faults the file's bytes back in.
    const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
    const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
    const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + (e.end - e.begin)) / page * page;
    auto mapping = mapping_;
    t.owner = std::shared_ptr<void>(mapping.get(), [mapping, begin, end](void*) {
      if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
    });
    return t;
  }
  // Writers pad the header to 8 bytes; a file that does not gets its misaligned tensors copied.
  Tensor copy = Tensor::host(e.dtype, e.shape);
  std::memcpy(copy.data, p, e.end - e.begin);
  return copy;
}

std::pair<DType, Shape> SafetensorsFile::info(const std::string& name) const {
  const auto it = entries_.find(name);
  FOVEA_CHECK(it != entries_.end(), path_, ": no tensor ", name);
  return {it->second.dtype, it->second.shape};
}

SafetensorsSet::SafetensorsSet(const std::string& dir) : dir_(dir) {
  FOVEA_CHECK(fs::is_directory(dir), "model directory ", dir, " does not exist");
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  if (fs::exists(index)) {
    nlohmann::json json;
    try {
      std::ifstream in(index);
      json = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      FOVEA_FAIL(index.string(), ": bad JSON: ", e.what());
    }
    FOVEA_CHECK(json.contains("weight_map") && json["weight_map"].is_object(), index.string(),
                ": no weight_map object");
    std::map<std::string, std::string> wanted;  // tensor -> shard
    for (const auto& [name, shard] : json["weight_map"].items()) {
      FOVEA_CHECK(shard.is_string(), index.string(), ": weight_map entry for ", name, " is not a file name");
      wanted[name] = shard.get<std::string>();
      // Shards live in the model directory: an absolute path or a ".." step would read files outside it.
      const fs::path rel(wanted[name]);
      const bool inside = !rel.empty() && rel.is_relative() && !rel.has_root_name() &&
                          std::none_of(rel.begin(), rel.end(), [](const fs::path& part) { return part == ".."; });
      FOVEA_CHECK(inside, index.string(), ": shard '", wanted[name], "' of tensor ", name,
                  " is not a file inside the model directory");
    }
    std::vector<std::string> shards;
    for (const auto& [name, shard] : wanted)
      if (std::find(shards.begin(), shards.end(), shard) == shards.end()) shards.push_back(shard);
    for (const auto& shard : shards) add_file((fs::path(dir) / shard).string());
    for (const auto& [name, shard] : wanted) {
      FOVEA_CHECK(has(name), index.string(), ": tensor ", name, " is listed in shard ", shard,
                  " but that file does not hold it");
    }
    return;
  }
  const fs::path single = fs::path(dir) / "model.safetensors";
  if (fs::exists(single)) {
    add_file(single.string());
    return;
  }
  std::vector<std::string> paths;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().extension() == ".safetensors") paths.push_back(entry.path().string());
  std::sort(paths.begin(), paths.end());
  FOVEA_CHECK(!paths.empty(), dir, ": no model.safetensors, model.safetensors.index.json or *.safetensors");
  for (const auto& p : paths) add_file(p);
}

void SafetensorsSet::add_file(const std::string& path) {
  auto file = std::make_shared<SafetensorsFile>(path);
  files_.push_back(file);
  for (const auto& name : file->names()) {
    const auto [it, inserted] = owner_.emplace(name, files_.size() - 1);
    FOVEA_CHECK(inserted, "tensor ", name, " is in both ", files_[it->second]->path(), " and ", path);
  }
}

std::string SafetensorsSet::describe() const {
  if (files_.size() == 1) return files_[0]->path();
  return str(dir_, " (", files_.size(), " safetensors files)");
}

Tensor SafetensorsSet::get(const std::string& name) const {
  const auto it = owner_.find(name);
  if (it != owner_.end()) {
    Tensor t = files_[it->second]->tensor(name);
    if (t.dtype == DType::F8E4M3 && quantization_.fp8_weights && owner_.count(name + "_scale") != 0)
      return dequantized_fp8(name, t);
    return t;
  }
  const std::string prefix = packed_prefix(name);
  FOVEA_CHECK(!prefix.empty(), describe(), ": missing tensor ", name);
  return dequantized(prefix);
}

std::string SafetensorsSet::packed_prefix(const std::string& name) const {
  static const std::string suffix = ".weight";
  if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) return "";
  if (owner_.count(name) != 0) return "";
  std::string prefix = name.substr(0, name.size() - suffix.size());
  return owner_.count(prefix + ".qweight") != 0 ? prefix : "";
}

PackedW4Linear SafetensorsSet::packed(const std::string& weight_name) const {
  const std::string prefix = packed_prefix(weight_name);
  FOVEA_CHECK(!prefix.empty(), describe(), ": ", weight_name, " is not a packed 4-bit weight");
  const std::string where = str(file_of(prefix + ".qweight"), ": ", prefix);
  FOVEA_CHECK(quantization_.packed(), where,
              ".qweight is a packed 4-bit weight, but config.json has no quantization_config (awq or gptq) "
              "saying how it is packed");
  auto part = [&](const char* suffix) {
    const std::string name = prefix + suffix;
    FOVEA_CHECK(has(name), where, suffix, " is missing (", quantization_.describe(), " stores ", prefix,
                ".qweight, .qzeros and .scales)");
    return get(name);
  };
  PackedW4Linear packed{part(".qweight"), part(".qzeros"), part(".scales"), {}};
  if (has(prefix + ".g_idx")) packed.g_idx = get(prefix + ".g_idx");
  return packed;
}

Tensor SafetensorsSet::dequantized(const std::string& prefix) const {
  const std::string where = str(file_of(prefix + ".qweight"), ": ", prefix);
  // bf16: what the GPU keeps anyway (its upload would round an f32 copy the same way), at half the host memory.
  return dequantize_w4(packed(prefix + ".weight"), quantization_, DType::BF16, where);
}

Tensor SafetensorsSet::dequantized_fp8(const std::string& name, const Tensor& codes) const {
  const Tensor scale = get(name + "_scale").to_f32();
  const int64_t rows = codes.rank() == 2 ? codes.dim(0) : 1, cols = codes.numel() / rows;
  FOVEA_CHECK(scale.numel() == rows || scale.numel() == 1, file_of(name), ": ", name, "_scale has ",
              shape_str(scale.shape), " for a ", shape_str(codes.shape), " weight (want [out, 1] or one scale)");
  Tensor out = Tensor::host(DType::BF16, codes.shape);
  for (int64_t r = 0; r < rows; ++r) {
    const float s = scale.ptr<float>()[scale.numel() == 1 ? 0 : r];
    for (int64_t c = 0; c < cols; ++c)
      out.ptr<uint16_t>()[r * cols + c] = f32_to_bf16(e4m3_to_f32(codes.ptr<uint8_t>()[r * cols + c]) * s);
  }
  return out;
}

Tensor SafetensorsSet::get(const std::string& name, const Shape& expected) const {
  Tensor t = get(name);
  FOVEA_CHECK(t.shape == expected, file_of(name), ": tensor ", name, " has shape ", shape_str(t.shape),
              ", the config needs ", shape_str(expected));
  return t;
}

WeightRef SafetensorsSet::ref(const std::string& name) const {
  std::shared_ptr<const SafetensorsSet> self;
  try {
    self = shared_from_this();
  } catch (const std::bad_weak_ptr&) {
    FOVEA_FAIL("SafetensorsSet::ref needs the set owned by a std::shared_ptr");
  }
  const auto it = owner_.find(name);
  if (it != owner_.end()) {
    std::shared_ptr<const SafetensorsFile> file = files_[it->second];
    const auto [dtype, shape] = file->info(name);
    if (dtype == DType::F8E4M3 && quantization_.fp8_weights && owner_.count(name + "_scale") != 0) {
      const int64_t rows = shape.size() == 2 ? shape[0] : 1;
      const auto [scale_dtype, scale_shape] = files_[owner_.at(name + "_scale")]->info(name + "_scale");
      int64_t scales = 1;
      for (int64_t d : scale_shape) scales *= d;
      FOVEA_CHECK(scales == rows || scales == 1, file_of(name), ": ", name, "_scale has ", shape_str(scale_shape),
                  " for a ", shape_str(shape), " weight (want [out, 1] or one scale)");
      return WeightRef(DType::BF16, shape, [self, name] { return self->get(name); });
    }
    return WeightRef(dtype, shape, [file, name] { return file->tensor(name); });
  }
  const std::string prefix = packed_prefix(name);
  FOVEA_CHECK(!prefix.empty(), describe(), ": missing tensor ", name);
  // The packed parts are views of the mappings: their shapes are checked now, their data read at load.
  const w4::PackedDims d =
      w4::packed_dims(packed(name), quantization_, str(file_of(prefix + ".qweight"), ": ", prefix));
  return WeightRef(DType::BF16, {d.out, d.in}, [self, prefix] { return self->dequantized(prefix); });
}

WeightRef SafetensorsSet::ref(const std::string& name, const Shape& expected) const {
  WeightRef r = ref(name);
  FOVEA_CHECK(r.shape == expected, file_of(name), ": tensor ", name, " has shape ", shape_str(r.shape),
              ", the config needs ", shape_str(expected));
  return r;
}

std::string SafetensorsSet::file_of(const std::string& name) const {
  const auto it = owner_.find(name);
  if (it != owner_.end()) return files_[it->second]->path();
  const std::string prefix = packed_prefix(name);
  return prefix.empty() ? "" : file_of(prefix + ".qweight");
}

std::vector<std::string> SafetensorsSet::names() const {
  std::vector<std::string> out;
  for (const auto& [name, i] : owner_) out.push_back(name);
  return out;
}

std::vector<std::shared_ptr<void>> SafetensorsSet::keep_alive() const {
  return std::vector<std::shared_ptr<void>>(files_.begin(), files_.end());
}

}  // namespace fovea
