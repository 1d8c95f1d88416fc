#include "kiln/tooling/tensor_file_codec.h"

#include <algorithm>
#include <cctype>
#include <list>
#include <mutex>

namespace kiln {
namespace {

struct Registry {
  std::mutex mutex;
  std::list<TensorFileCodec> codecs;  // a list keeps returned pointers stable
};

Registry& registry() {
  static Registry instance;
  return instance;
}

bool ends_with_ignoring_case(std::string_view s, std::string_view suffix) {
  if (s.size() < suffix.size()) return false;
  return std::equal(suffix.begin(), suffix.end(), s.end() - suffix.size(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) ==
           std::tolower(static_cast<unsigned char>(b));
  });
}

}  // namespace

void register_tensor_file_codec(TensorFileCodec codec) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.codecs.remove_if([&](const TensorFileCodec& c) {
    return c.extension.size() == codec.extension.size() &&
           ends_with_ignoring_case(c.extension, codec.extension);
  });
  r.codecs.push_back(std::move(codec));
}

const TensorFileCodec* find_tensor_file_codec(std::string_view path) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  for (const TensorFileCodec& codec : r.codecs) {
    if (!codec.extension.empty() && ends_with_ignoring_case(path, codec.extension)) return &codec;
  }
  return nullptr;
}

}  // namespace kiln
