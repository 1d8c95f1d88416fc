#include "kiln/base/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <utility>

namespace kiln {
namespace {

// --- The SIGBUS guard -------------------------------------------------------------------------
// Mappings are registered in a fixed table the signal handler can read without locks: a slot is
// published by storing its begin address last, and retired by clearing it first.
struct GuardedRegion {
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};
  std::atomic<std::atomic<bool>*> faulted{nullptr};
};
constexpr size_t kMaxGuardedRegions = 256;
std::array<GuardedRegion, kMaxGuardedRegions> g_regions;
struct sigaction g_previous_sigbus {};
uintptr_t g_page_size = 4096;

void forward_to_previous(int signal, siginfo_t* info, void* context) {
  if ((g_previous_sigbus.sa_flags & SA_SIGINFO) != 0 && g_previous_sigbus.sa_sigaction != nullptr) {
    g_previous_sigbus.sa_sigaction(signal, info, context);
    return;
  }
  if (g_previous_sigbus.sa_handler != SIG_DFL && g_previous_sigbus.sa_handler != SIG_IGN) {
    g_previous_sigbus.sa_handler(signal);
    return;
  }
  // The default action: returning re-executes the faulting access, which now terminates the
  // process as if no handler had been installed.
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  ::sigaction(SIGBUS, &default_action, nullptr);
}

void on_sigbus(int signal, siginfo_t* info, void* context) {
  const auto address = reinterpret_cast<uintptr_t>(info->si_addr);
  for (GuardedRegion& region : g_regions) {
    const uintptr_t begin = region.begin.load(std::memory_order_acquire);
    if (begin == 0 || address < begin || address >= region.end.load(std::memory_order_relaxed)) {
      continue;
    }
    // A page of the mapping lies past the file's end: the file was truncated. Zeros take its
    // place, so the access completes; the owner's check_unchanged() reports the change.
    const uintptr_t page = address / g_page_size * g_page_size;
    void* replaced = ::mmap(reinterpret_cast<void*>(page), g_page_size, PROT_READ,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (replaced == MAP_FAILED) break;
    if (std::atomic<bool>* flag = region.faulted.load(std::memory_order_relaxed)) {
      flag->store(true, std::memory_order_relaxed);
    }
    return;
  }
  forward_to_previous(signal, info, context);
}

void install_sigbus_guard_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    const long page_size = ::sysconf(_SC_PAGESIZE);
    if (page_size > 0) g_page_size = static_cast<uintptr_t>(page_size);
    struct sigaction action {};
    action.sa_sigaction = on_sigbus;
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGBUS, &action, &g_previous_sigbus);
  });
}

// Registers [data, data + size); false when the table is full (the mapping is then unguarded,
// and a truncation can still be detected by check_unchanged between operations).
GuardedRegion* guard_region(const std::byte* data, size_t size, std::atomic<bool>* faulted) {
  install_sigbus_guard_once();
  for (GuardedRegion& region : g_regions) {
    uintptr_t expected = 0;
    // Claim the slot with a placeholder begin that no address matches (1 is never mapped).
    if (!region.begin.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) continue;
    region.end.store(0, std::memory_order_relaxed);
    region.faulted.store(faulted, std::memory_order_relaxed);
    region.end.store(reinterpret_cast<uintptr_t>(data) + size, std::memory_order_relaxed);
    region.begin.store(reinterpret_cast<uintptr_t>(data), std::memory_order_release);
    return &region;
  }
  return nullptr;
}

void unguard_region(GuardedRegion* region) {
  if (region == nullptr) return;
  region->begin.store(1, std::memory_order_release);
  region->end.store(0, std::memory_order_relaxed);
  region->faulted.store(nullptr, std::memory_order_relaxed);
  region->begin.store(0, std::memory_order_release);
}

std::string errno_text(int err) { return std::strerror(err); }

bool same_time(const struct timespec& a, const struct timespec& b) {
  return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

}  // namespace

struct MappedFile::Watch {
  int fd = -1;
  struct stat when_mapped {};
  std::atomic<bool> faulted{false};
  GuardedRegion* region = nullptr;

  ~Watch() {
    unguard_region(region);
    if (fd >= 0) ::close(fd);
  }
};

void release_mapped_pages(const std::byte* data, size_t bytes) {
  const long page_size = ::sysconf(_SC_PAGESIZE);
  if (data == nullptr || page_size <= 0) return;
  const auto page = static_cast<uintptr_t>(page_size);
  const auto begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t first = (begin + page - 1) / page * page;
  const uintptr_t end = (begin + bytes) / page * page;
  if (end <= first) return;
  // MADV_DONTNEED on a clean private file mapping only unmaps: the next access faults the file's
  // bytes back in.
  ::madvise(reinterpret_cast<void*>(first), end - first, MADV_DONTNEED);
}

StatusOr<MappedFile> MappedFile::open(const std::string& path) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return not_found("'{}': no such file", path);
    if (err == EISDIR) return invalid_argument("'{}' is a directory, not a file", path);
    return invalid_argument("cannot open '{}': {}", path, errno_text(err));
  }
  MappedFile out;
  out.path_ = path;
  out.watch_ = std::make_unique<Watch>();
  out.watch_->fd = fd;  // closed by the watch from here on
  struct stat& st = out.watch_->when_mapped;
  if (::fstat(fd, &st) != 0) {
    return data_loss("cannot stat '{}': {}", path, errno_text(errno));
  }
  if (S_ISDIR(st.st_mode)) return invalid_argument("'{}' is a directory, not a file", path);
  if (!S_ISREG(st.st_mode)) {
    return invalid_argument("'{}' is not a regular file and cannot be mapped", path);
  }
  out.size_ = static_cast<size_t>(st.st_size);
  if (out.size_ > 0) {
    void* addr = ::mmap(nullptr, out.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
      const int err = errno;
      out.size_ = 0;
      return invalid_argument("cannot map '{}' ({} bytes): {}", path, st.st_size, errno_text(err));
    }
    out.data_ = static_cast<const std::byte*>(addr);
    out.watch_->region = guard_region(out.data_, out.size_, &out.watch_->faulted);
  }
  return out;
}

Status MappedFile::check_unchanged() const {
  if (!watch_) return ok_status();
  struct stat now {};
  if (::fstat(watch_->fd, &now) != 0) {
    return failed_precondition("cannot check '{}' for changes: {}", path_, errno_text(errno));
  }
  const struct stat& then = watch_->when_mapped;
  if (now.st_size != then.st_size) {
    return failed_precondition(
        "'{}' changed on disk while loaded: it was {} bytes, it is {} bytes now (truncated or "
        "rewritten in place); load it again",
        path_, then.st_size, now.st_size);
  }
  // The modification time, not the change time: unlinking the old file (when another is renamed
  // over its path) changes the latter, and the mapping keeps the old file's bytes.
  if (watch_->faulted.load(std::memory_order_relaxed) || !same_time(now.st_mtim, then.st_mtim)) {
    return failed_precondition(
        "'{}' changed on disk while loaded (rewritten in place); load it again", path_);
  }
  return ok_status();
}

MappedFile::MappedFile() = default;

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      watch_(std::move(other.watch_)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    reset();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    watch_ = std::move(other.watch_);
  }
  return *this;
}

MappedFile::~MappedFile() { reset(); }

void MappedFile::reset() {
  // Unguard before unmapping, so the handler never maps zeros into an address range that a later
  // mapping reuses.
  watch_.reset();
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace kiln
