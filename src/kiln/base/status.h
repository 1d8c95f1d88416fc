// Status and StatusOr: kiln's error type. Library code never throws; every failure is a Status
// carrying a code, a message, and a chain of context notes added at each boundary
// ("in node 'conv0' (Conv)"). KILN_CHECK is for programmer bugs only and aborts.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <fmt/format.h>

namespace kiln {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // the user's input (model, module, flag, tensor) is malformed
  kUnimplemented,    // valid input that kiln does not support yet
  kNotFound,         // a named file, input or symbol does not exist
  kOutOfRange,       // a size or index beyond a limit
  kDataLoss,         // a file is truncated or corrupt
  kFailedPrecondition,
  kInternal,  // a bug in kiln
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  const std::vector<std::string>& notes() const { return notes_; }

  // Adds context, innermost first; to_string prints message then notes outward.
  Status& with_note(std::string note) & {
    notes_.push_back(std::move(note));
    return *this;
  }
  Status&& with_note(std::string note) && {
    notes_.push_back(std::move(note));
    return std::move(*this);
  }

  // "invalid argument: message\n  in ...\n  in ..."
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  std::vector<std::string> notes_;
};

inline Status ok_status() { return Status(); }

template <typename... Args>
Status invalid_argument(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kInvalidArgument, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status unimplemented(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kUnimplemented, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status not_found(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kNotFound, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status out_of_range(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kOutOfRange, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status data_loss(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kDataLoss, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status failed_precondition(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kFailedPrecondition, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status internal_error(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kInternal, fmt::format(f, std::forward<Args>(args)...));
}

// Holds either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    if (status_.ok()) status_ = internal_error("StatusOr constructed from OK status");
  }
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design

  bool ok() const { return status_.ok(); }
  const Status& status() const& { return status_; }
  Status status() && { return std::move(status_); }

  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

[[noreturn]] void check_failed(const char* file, int line, const char* expr);

}  // namespace kiln

#define KILN_CONCAT_INNER_(a, b) a##b
#define KILN_CONCAT_(a, b) KILN_CONCAT_INNER_(a, b)

#define KILN_RETURN_IF_ERROR(expr)               \
  do {                                           \
    ::kiln::Status kiln_status_ = (expr);        \
    if (!kiln_status_.ok()) return kiln_status_; \
  } while (0)

#define KILN_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return std::move(tmp).status();    \
  lhs = std::move(tmp).value()

#define KILN_ASSIGN_OR_RETURN(lhs, expr) \
  KILN_ASSIGN_OR_RETURN_IMPL_(KILN_CONCAT_(kiln_statusor_, __LINE__), lhs, expr)

#define KILN_CHECK(cond)                                          \
  do {                                                            \
    if (!(cond)) ::kiln::check_failed(__FILE__, __LINE__, #cond); \
  } while (0)
